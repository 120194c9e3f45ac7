"""The claims table's queries: which tuner is measuring which config, for `Database`, which
supplies the transactions with their retries (``_run``)."""

from __future__ import annotations

import math
import time

from sqlalchemy import Connection, delete, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from ..errors import DatabaseError
from .schema import claims_table
from .store import Store


class ClaimStore(Store):
    """``claim`` and ``release``: concurrent tuners on one database share its work."""

    def claim(self, workload: str, target: str, config_key: str, *, owner: str, ttl: float) -> bool:
        """Atomically take the claim on measuring this config; True if ``owner`` now holds it.

        Concurrent tuners on one database claim a config before measuring it, so each config
        is measured once. A claim is free when nobody holds it or its holder's ``ttl``
        (seconds) has run out (a holder that died); its holder may renew it. Expiry uses
        wall-clock time, so processes on different machines need roughly synchronised clocks.
        """
        if not owner:
            raise DatabaseError("a claim needs a non-empty owner")
        if not (isinstance(ttl, (int, float)) and math.isfinite(ttl) and ttl > 0):
            raise DatabaseError(f"a claim needs a finite ttl > 0 seconds, got {ttl!r}")
        c = claims_table.c
        key = (c.workload == workload) & (c.target == target) & (c.config_key == config_key)

        def take(conn: Connection) -> bool:
            now = time.time()  # read on every attempt: a retry must not extend a stale claim
            renew_or_expired = or_(c.owner == owner, c.expires_at <= now)
            stmt = update(claims_table).where(key, renew_or_expired)
            if conn.execute(stmt.values(owner=owner, expires_at=now + ttl)).rowcount:
                return True
            if conn.execute(select(c.owner).where(key)).first() is not None:
                return False
            conn.execute(
                insert(claims_table).values(
                    workload=workload,
                    target=target,
                    config_key=config_key,
                    owner=owner,
                    expires_at=now + ttl,
                )
            )
            return True

        try:
            return self._run("claim", take, write=True)
        except DatabaseError as e:
            if isinstance(e.__cause__, IntegrityError):  # a server: another owner inserted first
                return False
            raise

    def release(self, workload: str, target: str, config_key: str, *, owner: str) -> None:
        """Drop ``owner``'s claim on this config (no-op if someone else holds it now)."""
        c = claims_table.c
        stmt = delete(claims_table).where(
            c.workload == workload,
            c.target == target,
            c.config_key == config_key,
            c.owner == owner,
        )
        self._run("release", lambda conn: conn.execute(stmt), write=True)
