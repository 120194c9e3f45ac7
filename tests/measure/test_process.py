"""The worker process: a group of its own, killed whole, in the tuner's session."""

from __future__ import annotations

import os
import sys

import pytest

from tensortune.measure.process import Worker, kill_group


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Python 3.10 has no process_group")
def test_the_worker_is_its_own_group_in_the_tuners_session() -> None:
    """A session of its own is a scheduling group of its own (Linux autogroup): beside a busy
    neighbour its threads would get the CPUs group by group and every call would stall."""
    worker = Worker(dict(os.environ), startup_timeout=60)
    try:
        pid = worker.proc.pid
        assert os.getpgid(pid) == pid
        assert os.getsid(pid) == os.getsid(0)
    finally:
        kill_group(worker.proc, worker.stderr)
    assert worker.proc.poll() is not None
