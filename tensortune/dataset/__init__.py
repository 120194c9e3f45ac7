"""The cost model's dataset: which workloads, collecting measurements, exporting them, and
training the pretrained prior on them (``tensortune dataset collect|export|train|card``).

Modules: ``workloads`` (the training set and the held-out families), ``collect`` (measuring
into a tuning database, resumable), ``records`` (the exported format), ``export``, ``train``
(features recomputed, the prior fitted and saved) and ``card`` (the markdown dataset card).
"""

from __future__ import annotations

from .card import write_card
from .collect import collect, dataset_db_path, measured_trials
from .export import export_dataset
from .records import DatasetError, cpu_kind, on_target, read_records, target_of, write_records
from .train import feature_set, fit, groups_of, train_pretrained, training_records
from .workloads import (
    HELD_OUT_FAMILIES,
    OP_CLASSES,
    TRAINING_FAMILIES,
    check_no_held_out,
    collection_order,
    held_out_workloads,
    op_class,
    training_workloads,
)

__all__ = [
    "HELD_OUT_FAMILIES",
    "OP_CLASSES",
    "TRAINING_FAMILIES",
    "DatasetError",
    "check_no_held_out",
    "collect",
    "collection_order",
    "cpu_kind",
    "dataset_db_path",
    "export_dataset",
    "feature_set",
    "fit",
    "groups_of",
    "held_out_workloads",
    "measured_trials",
    "on_target",
    "op_class",
    "read_records",
    "target_of",
    "train_pretrained",
    "training_records",
    "training_workloads",
    "write_card",
    "write_records",
]
