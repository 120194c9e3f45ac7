"""Compile a batch of candidate sources in parallel, through the target's backend.

The work happens in compiler subprocesses, so a thread pool over the backend's `build` keeps
all cores busy without pickling anything; duplicates in a batch are compiled once.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..backend import backend_for
from ..errors import BuildError
from ..target import Target

Candidate = str | tuple[str, ...]
"""A source, or a tuple ``(source, *extra_flags)``."""


def compile_library(source: str, target: Target, extra_flags: Sequence[str] = ()) -> Path:
    """Build one candidate with `target`'s backend: the single build step of every batch."""
    return backend_for(target).build(source, extra_flags)


def build_candidates(
    sources: Sequence[Candidate], target: Target, n_workers: int = 2
) -> list[Path | BuildError]:
    """Library path or the BuildError (with `.log`) for each source, in input order.

    Only BuildError is caught: anything else is a bug and propagates.
    """
    jobs = [(item,) if isinstance(item, str) else tuple(item) for item in sources]
    unique = list(dict.fromkeys(jobs))

    def build(job: tuple[str, ...]) -> Path | BuildError:
        try:
            return compile_library(job[0], target, job[1:])
        except BuildError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=max(1, n_workers)) as pool:
        built = dict(zip(unique, pool.map(build, unique), strict=True))
    return [built[job] for job in jobs]
