"""The predictions table's queries (zero-shot choices, see `prediction`), for `Database`,
which supplies the transactions with their retries (``_run``) and its ``location``."""

from __future__ import annotations

import warnings

from sqlalchemy import Connection, delete, insert, select

from ..errors import DatabaseError, RecordWarning
from .connect import serialize
from .prediction import Prediction
from .schema import PREDICTION_LOCK, prediction_from_row, prediction_to_row, predictions_table
from .store import Store


class PredictionStore(Store):
    """``record_prediction`` and ``prediction``: zero-shot choices, kept apart from records."""

    def record_prediction(self, prediction: Prediction) -> None:
        """Keep a zero-shot choice, replacing the one of the same (workload, target, version,
        space): it is never a record, so no measurement query returns it."""
        row = prediction_to_row(prediction)
        c = predictions_table.c
        same = (
            (c.workload == prediction.workload)
            & (c.target == prediction.target)
            & (c.version == prediction.version)
            & (c.space == prediction.space)
        )

        def replace_row(conn: Connection) -> None:
            serialize(conn, PREDICTION_LOCK)  # two compiles of one workload keep one row
            conn.execute(delete(predictions_table).where(same))
            conn.execute(insert(predictions_table), row)

        self._run("record_prediction", replace_row, write=True)

    def prediction(
        self, workload: str, target: str, *, version: str | None = None, space: str | None = None
    ) -> Prediction | None:
        """The newest zero-shot choice for this workload on this target, or None."""
        c = predictions_table.c
        stmt = select(predictions_table).where(c.workload == workload, c.target == target)
        if version is not None:
            stmt = stmt.where(c.version == version)
        if space is not None:
            stmt = stmt.where(c.space == space)
        stmt = stmt.order_by(c.created_at.desc()).limit(1)
        row = self._run("prediction", lambda conn: conn.execute(stmt).first())
        if row is None:
            return None
        try:
            return prediction_from_row(row)
        except DatabaseError as e:
            warnings.warn(
                f"tuning database '{self.location}': skipping the prediction for "
                f"{workload[:200]}: {e}",
                RecordWarning,
                stacklevel=2,
            )
            return None
