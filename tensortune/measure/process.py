"""The worker child process a `Runner` measures in: started under a bare ``tensortune`` package
in its own process group, one JSON line per job and per reply, its stderr kept for failure reports,
and killed with its whole group when it misbehaves or is no longer needed."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from pathlib import Path
from typing import IO, Any

_STDERR_TAIL = 4000
# Start the worker under a bare `tensortune` package: the real __init__ imports the whole
# compiler (and SciPy), doubling the ~0.35 s start-up paid after every failed candidate.
_BOOTSTRAP = """
import sys, types
package = types.ModuleType("tensortune")
package.__path__ = [sys.argv[1]]
sys.modules["tensortune"] = package
from tensortune.measure.worker import main
main()
"""


_OWN_GROUP: dict[str, Any] = (
    {"process_group": 0} if sys.version_info >= (3, 11) else {"start_new_session": True}
)
"""A process group of its own (killed whole), in the tuner's session. Not a new session: Linux
schedules each session as one group (autogroup), so a worker in a session of its own shares the
CPUs with a CPU-bound neighbour group by group, not thread by thread, and one of its two threads
runs a third of the time in 4 ms slices. Beside a spinning competitor every call of a 0.2 ms
two-thread conv then waited 8-24 ms; in the tuner's session most calls run unstalled (Python
3.10 has no ``process_group`` and keeps the old way)."""


class WorkerGone(Exception):
    """The worker closed its end of the pipe (it crashed or exited)."""


class Worker:
    """One worker child process (see `worker.py`) in its own process group."""

    def __init__(self, env: dict[str, str], startup_timeout: float):
        self.stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (finalizer closes)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _BOOTSTRAP, str(Path(__file__).resolve().parents[1])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env,
            **_OWN_GROUP,
        )
        self._finalizer = weakref.finalize(self, kill_group, self.proc, self.stderr)
        self._buffer = b""
        self.tasks = 0
        ready = self.receive(startup_timeout)
        if not ready.get("ready"):
            raise WorkerGone(f"unexpected handshake from worker: {ready}")

    def send(self, job: dict[str, Any]) -> None:
        """Write one job line; BrokenPipeError means the worker was already gone."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(job).encode() + b"\n")
        self.proc.stdin.flush()

    def receive(self, timeout: float) -> dict[str, Any]:
        """Wait for one reply line; raises TimeoutError or WorkerGone."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise WorkerGone("worker closed its output")
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return json.loads(line)

    def stderr_position(self) -> int:
        return self.stderr.seek(0, os.SEEK_END)

    def stderr_since(self, position: int) -> str:
        self.stderr.seek(position)
        lines = self.stderr.read().decode(errors="replace").strip().splitlines()
        # faulthandler's list of loaded extension modules says nothing about the kernel
        text = "\n".join(line for line in lines if not line.startswith("Extension modules:"))
        return text if len(text) <= _STDERR_TAIL else "...\n" + text[-_STDERR_TAIL:]

    def exit_code(self, grace: float = 5.0) -> int:
        """The worker's return code once it is gone (killed if it lingers)."""
        try:
            return self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.wait()

    def kill(self) -> None:
        self._finalizer()


def kill_group(proc: subprocess.Popen[bytes], stderr: IO[bytes]) -> None:
    """Kill the worker's whole process group and reap it."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    for stream in (proc.stdin, proc.stdout, stderr):
        if stream is not None:
            with contextlib.suppress(OSError):
                stream.close()
