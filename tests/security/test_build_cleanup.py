"""Issue 11, item 9: a killed build leaves nothing behind, and the cache loads only its own files.

A tuner SIGKILLed mid-build takes its compiler with it (the build's process group dies with it)
and its temporary files are swept by the next process to use the cache; a cached library that
was replaced, made writable by others, or swapped for a symlink or someone else's file is
rebuilt, never loaded.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tensortune.build import compiler
from tensortune.build.compiler import compile_library
from tensortune.target import Target

SOURCE = "int answer(void) { return 42; }\n"


@pytest.fixture(scope="module")
def target() -> Target:
    return Target.from_string("generic threads=1")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "kernels"
    monkeypatch.setenv("TENSORTUNE_CACHE_DIR", str(path))
    return path


def gone(pid: int) -> bool:
    """The process has exited (a zombie waiting for its new parent counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def test_sigkill_mid_build_kills_the_compiler_and_the_next_run_sweeps_its_files(
    target: Target, cache: Path, tmp_path: Path
):
    pids = tmp_path / "pids"
    slow_cc = tmp_path / "slow-cc"  # like gcc: a driver waiting for a child (cc1)
    slow_cc.write_text(
        '#!/bin/sh\nif [ "$1" = --version ]; then echo slow 1.0; exit 0; fi\n'
        f'sleep 60 & echo "$$ $!" > {pids}\nwait\n'
    )
    slow_cc.chmod(0o755)
    builder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os; from tensortune.build.compiler import compile_library; "
            "from tensortune.target import Target; "
            "files = [os.open(os.devnull, os.O_RDONLY) for _ in range(20)]; "  # a busy process
            f"compile_library({SOURCE!r}, Target.from_string('generic threads=1 cc={slow_cc}'))",
        ],
        env={**os.environ, "TENSORTUNE_CACHE_DIR": str(cache)},
    )
    try:
        deadline = time.monotonic() + 60
        while not pids.exists() or len(pids.read_text().split()) < 2:
            assert builder.poll() is None and time.monotonic() < deadline, "build never started"
            time.sleep(0.05)
        builder.send_signal(signal.SIGKILL)
        builder.wait()
        compiler_pids = [int(pid) for pid in pids.read_text().split()]
        deadline = time.monotonic() + 10
        while not all(gone(pid) for pid in compiler_pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(gone(pid) for pid in compiler_pids), "the compiler outlived its tuner"
    finally:
        builder.kill()
        for pid in [int(p) for p in pids.read_text().split()] if pids.exists() else []:
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)

    left = [p.name for p in cache.iterdir() if ".tmp" in p.name]
    assert left, "the killed build left its temporary files (the sweep has work to do)"
    ours = cache / f"kernel.{os.getpid()}.inprogress.tmp.so"  # a live process's build
    ours.write_bytes(b"")
    assert ctypes.CDLL(str(compile_library(SOURCE, target))).answer() == 42
    assert [p.name for p in cache.iterdir() if ".tmp" in p.name] == [ours.name]


def tamper_content(library: Path, other: Path) -> None:
    shutil.copyfile(other, library)


def tamper_group_writable(library: Path, other: Path) -> None:
    library.chmod(0o775)


def tamper_world_writable(library: Path, other: Path) -> None:
    library.chmod(0o757)


def tamper_symlink(library: Path, other: Path) -> None:
    library.unlink()
    library.symlink_to(other)


def tamper_owner(library: Path, other: Path) -> None:
    if os.getuid() != 0:
        pytest.skip("only root can give a file to another user")
    os.chown(library, os.getuid() + 4242, -1)


@pytest.mark.parametrize(
    "tamper",
    [tamper_content, tamper_group_writable, tamper_world_writable, tamper_symlink, tamper_owner],
)
def test_a_cached_library_that_is_not_ours_is_rebuilt_not_loaded(
    tamper, target: Target, cache: Path, monkeypatch: pytest.MonkeyPatch
):
    library = compile_library(SOURCE, target)
    other = compile_library("int answer(void) { return 666; }\n", target)
    tamper(library, other)
    runs = []
    real = compiler._run_compiler
    monkeypatch.setattr(compiler, "_run_compiler", lambda *a: runs.append(a) or real(*a))
    assert compile_library(SOURCE, target) == library
    assert len(runs) == 1, "the tampered library was taken from the cache"
    assert not library.is_symlink()
    assert ctypes.CDLL(str(library)).answer() == 42


def test_an_intact_library_is_a_cache_hit(target: Target, cache: Path, monkeypatch):
    library = compile_library(SOURCE, target)

    def no_compiler(*args: object) -> None:
        raise AssertionError("compiled on a cache hit")

    monkeypatch.setattr(compiler, "_run_compiler", no_compiler)
    assert compile_library(SOURCE, target) == library
