"""What the query mixins of `Database` (claims, predictions) need of it: one transaction runner."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sqlalchemy import Connection

_T = TypeVar("_T")


class Store:
    """Base of the mixins: ``_run`` is `Database`'s transaction with its retries."""

    location: str

    def _run(self, action: str, work: Callable[[Connection], _T], write: bool = False) -> _T:
        raise NotImplementedError
