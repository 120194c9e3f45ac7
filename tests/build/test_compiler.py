import ctypes
import dataclasses
import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tensortune.build import compiler
from tensortune.build.compiler import CompileError, cache_dir, compile_library
from tensortune.errors import BuildError, EnvironmentFailure
from tensortune.target import Target, supported_isas

SOURCE = "int answer(void) { return 42; }\n"


@pytest.fixture(scope="module")
def target() -> Target:
    return Target.from_string("generic threads=1")


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TENSORTUNE_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_compiles_and_loads(fresh_cache: Path, target: Target):
    path = compile_library(SOURCE, target)
    assert path.parent == fresh_cache
    assert path.suffix == ".so"
    assert ctypes.CDLL(str(path)).answer() == 42
    assert (fresh_cache / f"{path.stem}.c").read_text() == SOURCE
    assert sorted(p.name for p in fresh_cache.iterdir()) == [
        f"{path.stem}.c",
        path.name,
        f"{path.name}.sha256",
    ]


def test_cache_hit_does_not_compile(
    fresh_cache: Path, target: Target, monkeypatch: pytest.MonkeyPatch
):
    first = compile_library(SOURCE, target)

    def no_compiler(*args, **kwargs):
        raise AssertionError("compiler invoked on a cache hit")

    monkeypatch.setattr(compiler, "_run_compiler", no_compiler)
    assert compile_library(SOURCE, target) == first


def test_key_covers_source_flags_and_target(fresh_cache: Path, target: Target):
    base = compile_library(SOURCE, target)
    paths = {
        base,
        compile_library(SOURCE + "\n", target),
        compile_library(SOURCE, target, ["-O1"]),
        compile_library(SOURCE, dataclasses.replace(target, num_threads=2)),
    }
    assert len(paths) == 4


def test_compile_error_carries_log_and_command(fresh_cache: Path, target: Target):
    bad = "int broken(void) { return undeclared_name; }\n"
    with pytest.raises(CompileError) as info:
        compile_library(bad, target)
    error = info.value
    assert isinstance(error, BuildError)
    assert "undeclared_name" in error.log
    assert "undeclared_name" in str(error)
    assert error.command[0] == target.cc
    assert "-lm" in error.command
    assert [p for p in fresh_cache.iterdir() if p.suffix == ".so"] == []


def test_long_compiler_output_is_truncated_in_the_message(fresh_cache: Path, target: Target):
    bad = "".join(f"int f{i}(void) {{ return missing{i}; }}\n" for i in range(40))
    with pytest.raises(CompileError) as info:
        compile_library(bad, target)
    message = str(info.value)
    assert "more lines in .log" in message
    assert len(message.splitlines()) <= 23
    assert "missing39" in info.value.log
    assert "missing39" not in message


def test_missing_compiler(fresh_cache: Path, target: Target):
    with pytest.raises(EnvironmentFailure, match="cannot run the C compiler"):
        compile_library(SOURCE, dataclasses.replace(target, cc="/nonexistent/cc"))


def test_compiler_timeout(fresh_cache: Path, target: Target, tmp_path: Path):
    slow = tmp_path / "slow-cc"
    slow.write_text(
        '#!/bin/sh\nif [ "$1" = --version ]; then echo slow 1.0; exit 0; fi\nsleep 10\n'
    )
    slow.chmod(0o755)
    with pytest.raises(BuildError, match="timed out"):
        compile_library(SOURCE, dataclasses.replace(target, cc=str(slow)), timeout=0.5)
    assert [p for p in fresh_cache.iterdir() if p.suffix == ".so"] == []


def test_concurrent_compiles_of_one_source_agree(fresh_cache: Path, target: Target):
    source = "int twice(int x) { return 2 * x; }\n"
    with ThreadPoolExecutor(4) as pool:
        paths = set(pool.map(lambda _: compile_library(source, target), range(4)))
    (path,) = paths
    assert ctypes.CDLL(str(path)).twice(21) == 42
    assert not [p for p in fresh_cache.iterdir() if "tmp" in p.name]


def test_default_cache_dir_is_the_user_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("TENSORTUNE_CACHE_DIR")
    monkeypatch.setattr(compiler.platformdirs, "user_cache_dir", lambda app: str(tmp_path / app))
    assert cache_dir() == tmp_path / "tensortune" / "kernels"
    assert cache_dir().is_dir()


def test_unwritable_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("TENSORTUNE_CACHE_DIR", str(blocker / "sub"))
    with pytest.raises(EnvironmentFailure, match="cannot create kernel cache"):
        cache_dir()


@pytest.mark.parametrize("isa", ["avx2", "avx512"])
def test_isa_flags_reach_the_compiler(fresh_cache: Path, isa: str):
    if isa not in supported_isas():
        pytest.skip(f"CPU lacks {isa}")
    probe = (
        "#if defined(__AVX512F__) != AVX512\n#error wrong avx512 setting\n#endif\n"
        "#ifndef __AVX2__\n#error no avx2\n#endif\nint ok(void) { return 1; }\n"
    )
    target = Target.detect(num_threads=1, isa=isa)
    path = compile_library(probe, target, [f"-DAVX512={int(isa == 'avx512')}"])
    assert ctypes.CDLL(str(path)).ok() == 1


def test_no_temporary_files_survive(fresh_cache: Path, target: Target):
    compile_library(SOURCE, target)
    with pytest.raises(CompileError):
        compile_library("syntax error", target)
    leftovers = [p.name for p in fresh_cache.iterdir() if "tmp" in p.name]
    assert leftovers == []
    assert os.access(fresh_cache, os.W_OK)


PROGRAM = '#include <stdio.h>\nint main(void) { puts("hello from a program"); return 3; }\n'


def test_programs_share_the_verified_cache(fresh_cache: Path, target: Target):
    """Executables (the emulator's kernel driver) are built and cached like libraries, without
    the target's library flags, and a tampered one is rebuilt before it runs."""
    path = compiler.compile_program(PROGRAM, target, ["-O2"])
    assert path.parent == fresh_cache and path.suffix == ".exe"
    run = subprocess.run([str(path)], capture_output=True, text=True, check=False)
    assert (run.returncode, run.stdout) == (3, "hello from a program\n")
    assert compiler.compile_program(PROGRAM, target, ["-O2"]) == path
    assert compiler.compile_program(PROGRAM, target, ["-O1"]) != path
    assert path != compile_library(PROGRAM.replace("main", "entry"), target)
    path.chmod(0o755)
    path.write_bytes(b"#!/bin/sh\necho tampered\n")
    assert compiler.compile_program(PROGRAM, target, ["-O2"]) == path
    assert subprocess.run([str(path)], capture_output=True, text=True).stdout.startswith("hello")
    with pytest.raises(CompileError, match="C compilation failed"):
        compiler.compile_program("int main(void) { return }\n", target, ["-O2"])
