import dataclasses
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tensortune import target as target_module
from tensortune.errors import BuildError, SpecError, TensorTuneError
from tensortune.target import (
    ARCHS,
    COMMON_CFLAGS,
    ISAS,
    Target,
    arch_of,
    host_arch,
    isa_cflags,
    supported_isas,
)
from tensortune.target import x86 as x86_module


@pytest.fixture(scope="module")
def host() -> Target:
    return Target.detect()


def test_detect_describes_this_machine(host: Target):
    assert host.isa == supported_isas()[0]
    assert host.vector_bits == {"avx512": 512, "avx2": 256}.get(host.isa, 128)
    assert host.num_threads >= 1
    assert 0 < host.l1d_bytes <= host.l2_bytes <= host.l3_bytes
    assert host.cc.startswith("/")
    assert host.cflags[-len(COMMON_CFLAGS) :] == COMMON_CFLAGS
    assert str(host) == f"{host.isa}-{host.num_threads}t"


def test_avx2_target_turns_avx512_off():
    if "avx2" not in supported_isas():
        pytest.skip("CPU has no AVX2")
    avx2 = Target.detect(num_threads=1, isa="avx2")
    assert avx2.vector_bits == 256
    assert avx2.cflags[:4] == ("-O3", "-mavx2", "-mfma", "-mno-avx512f")
    assert str(avx2) == "avx2-1t"


@pytest.mark.parametrize(
    ("isa", "flags"),
    [("sse4", ("-O3", "-msse4.2")), ("generic", ("-O3",))],
)
def test_small_isa_flags(isa: str, flags: tuple[str, ...]):
    assert isa_cflags(isa, "gcc") == flags


def test_avx512_uses_explicit_flags_when_native_lacks_them(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(x86_module, "_native_has_avx512", lambda cc: False)
    flags = isa_cflags("avx512", "gcc")
    assert "-march=native" not in flags
    assert {"-mavx512f", "-mavx512vl", "-mavx512bw", "-mavx512dq", "-mfma", "-mavx2"} <= set(flags)
    monkeypatch.setattr(x86_module, "_native_has_avx512", lambda cc: True)
    assert "-march=native" in isa_cflags("avx512", "gcc")


def test_unsupported_isa_is_a_clear_error(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(target_module.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(target_module, "_cpu_flags", lambda: frozenset({"sse4_2"}))
    assert Target.detect(isa="sse4").isa == "sse4"
    assert Target.detect().isa == "sse4"
    with pytest.raises(TensorTuneError, match=r"does not support isa 'avx2'.*avx2, fma"):
        Target.detect(isa="avx2")
    with pytest.raises(TensorTuneError, match=r"'neon': it is an aarch64 level.*Target.cross"):
        Target.detect(isa="neon")
    with pytest.raises(TensorTuneError, match="unknown isa 'sve'"):
        Target.detect(isa="sve")


def test_no_compiler_tells_how_to_get_one(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setattr(target_module.shutil, "which", lambda name: None)
    with pytest.raises(BuildError, match=r"no C compiler was found.*CC.*apt-get install gcc"):
        Target.detect()


def test_cc_environment_variable(monkeypatch: pytest.MonkeyPatch, host: Target):
    monkeypatch.setenv("CC", host.cc)
    assert Target.detect().cc == host.cc
    monkeypatch.setenv("CC", "no-such-compiler-xyz")
    with pytest.raises(BuildError, match=r"no-such-compiler-xyz.*CC environment variable"):
        Target.detect()


def test_cache_sizes_from_sysfs(tmp_path):
    for index, (level, kind, size) in enumerate(
        [("1", "Data", "48K"), ("1", "Instruction", "32K"), ("2", "Unified", "2048K"),
         ("3", "Unified", "96M")]
    ):  # fmt: skip
        folder = tmp_path / f"index{index}"
        folder.mkdir()
        (folder / "level").write_text(level + "\n")
        (folder / "type").write_text(kind + "\n")
        (folder / "size").write_text(size + "\n")
    assert target_module._cache_sizes(tmp_path) == {
        "l1d_bytes": 48 * 1024,
        "l2_bytes": 2 * 1024**2,
        "l3_bytes": 96 * 1024**2,
    }


def test_cache_sizes_fall_back_without_sysfs(tmp_path):
    assert target_module._cache_sizes(tmp_path / "missing") == target_module._DEFAULT_CACHES


def test_from_string(host: Target):
    parsed = Target.from_string("generic threads=1 l1d=48K l2=2M l3=65536")
    assert (parsed.isa, parsed.num_threads) == ("generic", 1)
    assert (parsed.l1d_bytes, parsed.l2_bytes, parsed.l3_bytes) == (48 * 1024, 2 << 20, 65536)
    assert Target.from_string("") == host
    assert Target.from_string("native") == host
    assert Target.from_string(f"cc={host.cc}").cc == host.cc


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("avx9", "unknown isa 'avx9'"),
        ("avx2 sse4", "more than one isa"),
        ("threads=0", "positive integer"),
        ("threads=two", "positive integer"),
        ("cores=2", "unknown option 'cores'"),
        ("l2=", "has no value"),
        ("l2=lots", "cannot parse size"),
    ],
)
def test_from_string_errors(spec: str, message: str):
    with pytest.raises(SpecError, match=message):
        Target.from_string(spec)


def test_key_is_stable_and_covers_every_field(host: Target):
    assert host.key() == Target.detect().key()
    assert len(host.key()) == 16
    changed = [
        dataclasses.replace(host, name="other"),
        dataclasses.replace(host, num_threads=host.num_threads + 1),
        dataclasses.replace(host, l2_bytes=host.l2_bytes * 2),
        dataclasses.replace(host, cflags=(*host.cflags, "-g")),
        dataclasses.replace(host, cc="/opt/cc"),
    ]
    assert len({t.key() for t in changed} | {host.key()}) == len(changed) + 1


def test_dict_round_trip_through_json(host: Target):
    data = json.loads(json.dumps(host.to_dict()))
    assert Target.from_dict(data) == host
    assert Target.from_dict(data).key() == host.key()


def test_lanes_and_peak(host: Target):
    wide = dataclasses.replace(host, isa="avx512", vector_bits=512)
    assert wide.lanes("float32") == 16
    assert wide.lanes("float64") == 8
    assert wide.lanes("int32") == 16
    assert wide.lanes("bool") == 64
    assert wide.peak_gflops("float32", ghz=2.0) == 2 * 16 * 2 * 2.0 * wide.num_threads
    assert host.peak_gflops() > 0


def test_invalid_fields_are_rejected(host: Target):
    with pytest.raises(TensorTuneError, match="unknown isa"):
        dataclasses.replace(host, isa="mmx")
    with pytest.raises(TensorTuneError, match="num_threads"):
        dataclasses.replace(host, num_threads=0)
    with pytest.raises(TensorTuneError, match="vector_bits"):
        dataclasses.replace(host, vector_bits=64)


@given(value=st.integers(min_value=0, max_value=1 << 20), unit=st.sampled_from(["", "K", "M"]))
def test_parse_size(value: int, unit: str):
    factor = {"": 1, "K": 1024, "M": 1024**2}[unit]
    assert target_module._parse_size(f"{value}{unit}", "test") == value * factor


def test_every_isa_level_is_known(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(target_module.platform, "machine", lambda: "x86_64")
    assert set(supported_isas(frozenset())) == {"generic"}
    assert supported_isas(frozenset({"avx2", "fma", "sse4_2"})) == ("avx2", "sse4", "generic")
    assert ISAS == ("avx512", "avx2", "sse4", "generic", "neon")
    monkeypatch.setattr(target_module.platform, "machine", lambda: "aarch64")
    assert supported_isas(frozenset({"fp", "asimd"})) == ("neon",)
    monkeypatch.setattr(target_module.platform, "machine", lambda: "riscv64")
    assert supported_isas(frozenset({"avx2", "fma"})) == ()
    with pytest.raises(TensorTuneError, match="no code generator for this CPU"):
        Target.detect()


def test_each_architecture_is_one_table():
    """Target branches on no architecture: every level's facts come from its arch's table."""
    assert {arch.name for arch in ARCHS} == {"x86_64", "aarch64"}
    for arch in ARCHS:
        for isa in arch.isas:
            assert arch_of(isa) is arch
            assert arch.vector_bits[isa] in (128, 256, 512)
    assert arch_of("aarch64") is arch_of("neon")
    assert host_arch() is not None


def _x86_isas() -> list[str]:
    return [isa for isa in ISAS if arch_of(isa).name == "x86_64"]


@pytest.mark.parametrize("isa", _x86_isas())
def test_cross_target_for_any_isa_whatever_this_cpu_runs(isa: str, host: Target):
    if host.arch != "x86_64":
        pytest.skip("x86 levels on an x86 host")
    cross = Target.cross(isa, num_threads=3)
    assert (cross.isa, cross.num_threads, cross.l2_bytes) == (isa, 3, host.l2_bytes)
    assert cross.cflags == isa_cflags(isa, cross.cc) + COMMON_CFLAGS
    assert cross.lanes("float32") == cross.vector_bits // 32
    assert cross.is_native and cross.arch == "x86_64"
    with pytest.raises(TensorTuneError, match="unknown isa 'mips'"):
        Target.cross("mips")


def test_neon_target_is_an_aarch64_cross_target(monkeypatch: pytest.MonkeyPatch, host: Target):
    monkeypatch.setattr(target_module.shutil, "which", lambda name: f"/usr/bin/{name}")
    neon = Target.cross("aarch64", num_threads=2)
    assert neon == Target.cross("neon", num_threads=2) == Target.from_string("neon threads=2")
    assert (neon.isa, neon.arch, neon.vector_bits, neon.lanes("float32")) == (
        "neon",
        "aarch64",
        128,
        4,
    )
    assert neon.vector_registers == 32
    if host.arch != "aarch64":
        assert not neon.is_native
        assert neon.cc == "/usr/bin/aarch64-linux-gnu-gcc"  # never $CC: it builds for the host
    assert neon.cflags == ("-O3", "-march=armv8-a", *COMMON_CFLAGS)
    assert Target.from_dict(neon.to_dict()) == neon


def test_missing_cross_compiler_says_what_to_install(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(target_module.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(target_module.shutil, "which", lambda name: None)
    with pytest.raises(BuildError, match=r"no aarch64 C compiler.*apt-get install gcc-aarch64"):
        Target.cross("neon")
