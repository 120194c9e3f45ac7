"""C source -> shared library, through a content-addressed on-disk cache.

Tuning compiles thousands of near-identical candidates and re-runs sessions often, so every
library is keyed by sha256(source, compiler version, flags, target) and compiled at most once;
files are renamed into place atomically so concurrent processes never load a partial `.so`.

Loading a library runs its code, so a cached `<key>.so` is used only if it is a regular file
owned by this user, writable by no one else, and matches the sha256 recorded beside it when it
was built; anything else is rebuilt. A failed build is the candidate's fault only if the
compiler still builds a trivial program into the cache: otherwise the compiler or the disk is
broken and the build raises EnvironmentFailure, which the tuner must not record as the config's.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import os
import shlex
import signal
import stat
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import platformdirs

from ..errors import BuildError, EnvironmentFailure
from ..target import Target

DEFAULT_TIMEOUT = 300.0
"""Seconds one compiler invocation may take before it is abandoned."""

_SHOWN_LINES = 20
_PROBE_SOURCE = "int tensortune_probe(int x) { return x + 1; }\n"
_TEMP_MARK = ".tmp"
"""Temporary files are named ``<stem>.<pid>.<random>.tmp<suffix>``, so a sweep can tell
the ones whose process died (SIGKILL mid-build) from those still being written."""

# The compiler runs under this script in its own process group. Its watcher blocks reading a
# pipe (the script's stdin) whose write end only this process holds: when this process exits in
# any way, SIGKILL included, the read ends and the watcher kills the group (driver, cc1, as, ld).
_LIFELINE = """
exec 3<&0 0</dev/null
"$@" 3<&- & compiler=$!
(read -r _ <&3; kill -KILL 0) & watcher=$!
wait "$compiler"; status=$?
kill -KILL "$watcher"; wait "$watcher"
exit "$status"
"""


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
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise EnvironmentFailure(f"cannot create kernel cache directory {path}: {exc}") from exc
    _sweep_dead_temporaries(path)
    return path


@functools.cache
def compiler_version(cc: str) -> str:
    """The compiler's `--version` banner, part of the cache key (upgrades change code)."""
    try:
        proc = subprocess.run(
            [cc, "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise EnvironmentFailure(f"cannot run the C compiler {cc!r}: {exc}") from exc
    if proc.returncode != 0:
        detail = proc.stderr.strip().splitlines()[:1]
        raise EnvironmentFailure(
            f"the C compiler {cc} does not work: `{cc} --version` failed "
            f"(exit {proc.returncode}){': ' + detail[0] if detail else ''}; set CC to a working one"
        )
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

    A verified cache hit returns immediately without running the compiler. Raises CompileError
    (a BuildError with `.log` and `.command`) when the compiler rejects the source, BuildError
    when it times out, and EnvironmentFailure when the compiler or the cache does not work.
    """
    key = library_key(source, target, extra_flags)
    return _compile_cached(source, target, key, ".so", [*target.cflags, *extra_flags], timeout)


def compile_program(
    source: str,
    target: Target,
    flags: Sequence[str],
    libraries: Sequence[str] = (),
    timeout: float = DEFAULT_TIMEOUT,
) -> Path:
    """Compile `source` with `target.cc` into an executable (e.g. a driver that runs kernels
    under an emulator), through the same verified cache as libraries.

    `flags` replace the target's library flags (no ``-shared``); errors as `compile_library`.
    """
    key = library_key(source, target, ("--program", *flags, "--libraries", *libraries))
    return _compile_cached(source, target, key, ".exe", [*flags], timeout, libraries)


def _compile_cached(
    source: str,
    target: Target,
    key: str,
    suffix: str,
    flags: list[str],
    timeout: float,
    libraries: Sequence[str] = ("-lm",),
) -> Path:
    directory = cache_dir()
    output = directory / f"{key}{suffix}"
    if _verified(output):
        return output
    source_path = directory / f"{key}.c"
    try:
        # Always rewritten: a `<key>.c` left by someone else must never be what gets compiled.
        _write_atomically(source_path, source.encode())
        with _temporary(directory, key, suffix) as tmp_output:
            try:
                _run_compiler(
                    [target.cc, *flags, "-o", str(tmp_output), str(source_path), *libraries],
                    timeout,
                )
            except CompileError:
                _check_compiler(target, directory, timeout)
                raise
            _install(tmp_output, output)
    except OSError as exc:
        raise EnvironmentFailure(f"cannot write to the kernel cache {directory}: {exc}") from exc
    return output


def _check_compiler(target: Target, directory: Path, timeout: float) -> None:
    """Raise EnvironmentFailure unless `target.cc` builds a trivial program into `directory`."""
    try:
        with (
            _temporary(directory, "probe", ".c") as source,
            _temporary(directory, "probe", ".so") as output,
        ):
            source.write_text(_PROBE_SOURCE)
            _run_compiler([target.cc, *target.cflags, "-o", str(output), str(source)], timeout)
    except (BuildError, OSError) as exc:
        detail = getattr(exc, "log", "") or str(exc)
        first = next((line for line in detail.splitlines() if line.strip()), "")
        raise EnvironmentFailure(
            f"the C compiler {target.cc} cannot build a trivial program in {directory} "
            f"(broken compiler, or no space left?): {first}"
        ) from exc


def _run_compiler(command: list[str], timeout: float) -> None:
    shown = shlex.join(command)
    try:
        with _process_group(command) as proc:
            try:
                stdout, stderr = proc.communicate(timeout=timeout)
            except subprocess.TimeoutExpired as exc:
                raise BuildError(f"compiler timed out after {timeout:g} s: {shown}") from exc
    except OSError as exc:
        raise EnvironmentFailure(f"cannot run the C compiler: {exc}\ncommand: {shown}") from exc
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


@contextlib.contextmanager
def _process_group(command: list[str]) -> Iterator[subprocess.Popen[str]]:
    """Run `command` in a new process group that is killed whenever this block exits, by a
    timeout, an exception or Ctrl-C, and by the lifeline (see `_LIFELINE`) if this process dies."""
    lifeline, held = os.pipe()
    try:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", _LIFELINE, "sh", *command],
            stdin=lifeline,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
    except BaseException:
        os.close(held)
        raise
    finally:
        os.close(lifeline)
    try:
        yield proc
    finally:
        if proc.poll() is None:  # not yet reaped, so its group id is still its own
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        os.close(held)
        proc.communicate()


def _install(tmp_output: Path, output: Path) -> None:
    """Record the library's (or program's) sha256 beside it, then rename it into place."""
    tmp_output.chmod(0o755)  # whatever the umask: a group-writable library would not load
    digest = hashlib.sha256(tmp_output.read_bytes()).hexdigest()
    _write_atomically(_hash_path(output), digest.encode())
    os.replace(tmp_output, output)


def _verified(library: Path) -> bool:
    """True if `library` and its recorded hash are trusted files and the hash matches."""
    expected = _trusted_bytes(_hash_path(library))
    content = _trusted_bytes(library)
    if expected is None or content is None:
        return False
    return hmac.compare_digest(expected, hashlib.sha256(content).hexdigest().encode())


def _trusted_bytes(path: Path) -> bytes | None:
    """The content of `path` if it is a regular file (not a symlink) owned by this user and
    writable by no one else; None otherwise, or when it does not exist."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if (
            not stat.S_ISREG(info.st_mode)
            or info.st_uid != os.getuid()
            or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        ):
            return None
        return handle.read()


def _hash_path(library: Path) -> Path:
    return library.with_name(library.name + ".sha256")


@contextlib.contextmanager
def _temporary(directory: Path, stem: str, suffix: str) -> Iterator[Path]:
    """A fresh empty file in `directory`, named for `_sweep_dead_temporaries`; removed on exit."""
    fd, name = tempfile.mkstemp(
        prefix=f"{stem}.{os.getpid()}.", suffix=_TEMP_MARK + suffix, dir=directory
    )
    os.close(fd)
    try:
        yield Path(name)
    finally:
        Path(name).unlink(missing_ok=True)


def _write_atomically(path: Path, data: bytes) -> None:
    with _temporary(path.parent, path.name.partition(".")[0], "") as tmp:
        tmp.write_bytes(data)
        os.replace(tmp, path)


@functools.cache
def _sweep_dead_temporaries(directory: Path) -> None:
    """Delete temporary files left in `directory` by processes that no longer exist (once per
    process and directory; a SIGKILL mid-build skips the cleanup of `_temporary`)."""
    for path in directory.glob(f"*{_TEMP_MARK}*"):
        parts = path.name.split(".")
        if len(parts) > 2 and parts[1].isdigit() and not _alive(int(parts[1])):
            path.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True
