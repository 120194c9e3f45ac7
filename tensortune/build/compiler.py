"""C source -> shared library, through a content-addressed on-disk cache.

Tuning compiles thousands of near-identical candidates and re-runs sessions often, so every
library is keyed by sha256(source, compiler version, flags, target) and compiled at most once;
files are renamed into place atomically so concurrent processes never load a partial `.so`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shlex
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import platformdirs

from ..errors import BuildError
from ..target import Target

DEFAULT_TIMEOUT = 300.0
"""Seconds one compiler invocation may take before it is abandoned."""

_SHOWN_LINES = 20


class CompileError(BuildError):
    """The compiler rejected a source; `.log` is its full stderr, `.command` its argv."""

    def __init__(self, message: str, log: str, command: Sequence[str]):
        super().__init__(message)
        self.log = log
        self.command = tuple(command)


def cache_dir() -> Path:
    """Where libraries are cached: $TENSORTUNE_CACHE_DIR, else the user cache dir."""
    configured = os.environ.get("TENSORTUNE_CACHE_DIR")
    root = Path(configured) if configured else Path(platformdirs.user_cache_dir("tensortune"))
    path = root if configured else root / "kernels"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BuildError(f"cannot create kernel cache directory {path}: {exc}") from exc
    return path


@functools.cache
def compiler_version(cc: str) -> str:
    """The compiler's `--version` banner, part of the cache key (upgrades change code)."""
    try:
        proc = subprocess.run(
            [cc, "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise BuildError(f"cannot run the C compiler {cc!r}: {exc}") from exc
    if proc.returncode != 0:
        raise BuildError(f"`{cc} --version` failed: {proc.stderr.strip()}")
    return proc.stdout.strip()


def library_key(source: str, target: Target, extra_flags: Sequence[str] = ()) -> str:
    """The sha256 hex digest naming the cached library for these inputs."""
    digest = hashlib.sha256()
    for part in (source, compiler_version(target.cc), *target.cflags, *extra_flags, target.key()):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def compile_library(
    source: str,
    target: Target,
    extra_flags: Sequence[str] = (),
    timeout: float = DEFAULT_TIMEOUT,
) -> Path:
    """Compile `source` for `target` into a shared library and return its cached path.

    A cache hit returns immediately without running the compiler. Raises CompileError
    (a BuildError with `.log` and `.command`) when the compiler rejects the source, and
    BuildError when it cannot be run or times out.
    """
    directory = cache_dir()
    key = library_key(source, target, extra_flags)
    library = directory / f"{key}.so"
    if library.exists():
        return library
    source_path = directory / f"{key}.c"
    try:
        if not source_path.exists():
            _write_atomically(source_path, source)
        fd, tmp_name = tempfile.mkstemp(prefix=f"{key}.", suffix=".tmp.so", dir=directory)
        os.close(fd)
    except OSError as exc:
        raise BuildError(f"cannot write to the kernel cache {directory}: {exc}") from exc
    tmp_library = Path(tmp_name)
    command = [
        target.cc,
        *target.cflags,
        *extra_flags,
        "-o",
        str(tmp_library),
        str(source_path),
        "-lm",
    ]
    try:
        _run_compiler(command, timeout)
        os.replace(tmp_library, library)
    finally:
        tmp_library.unlink(missing_ok=True)
    return library


def _run_compiler(command: list[str], timeout: float) -> None:
    shown = shlex.join(command)
    try:
        # Own session, so a timeout kills the whole group: cc1 and as, not just the driver.
        proc = subprocess.Popen(
            command,
            shell=False,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
    except OSError as exc:
        raise BuildError(f"cannot run the C compiler: {exc}\ncommand: {shown}") from exc
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except BaseException as exc:  # timeout or Ctrl-C: leave no compiler running
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        if isinstance(exc, subprocess.TimeoutExpired):
            raise BuildError(f"compiler timed out after {timeout:g} s: {shown}") from exc
        raise
    if proc.returncode != 0:
        log = stderr or stdout
        lines = log.splitlines()
        head = "\n".join(lines[:_SHOWN_LINES])
        more = (
            f"\n... ({len(lines) - _SHOWN_LINES} more lines in .log)"
            if len(lines) > _SHOWN_LINES
            else ""
        )
        raise CompileError(
            f"C compilation failed (exit {proc.returncode}): {shown}\n{head}{more}", log, command
        )


def _write_atomically(path: Path, text: str) -> None:
    fd, tmp_name = tempfile.mkstemp(prefix=f"{path.stem}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp_name, path)
    finally:
        Path(tmp_name).unlink(missing_ok=True)
