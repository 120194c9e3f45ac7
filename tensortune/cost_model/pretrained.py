"""The pretrained cost model shipped in the package: save, load, and fall back cleanly.

The file is JSON text (a format version, the feature names the model was trained on, the
model's own state such as LightGBM's ``model_to_string``, ``meta`` describing the data, and the
exemplars: the fastest configs measured of each training workload, which zero-shot compiles
offer the model as candidates), never a pickle and never the training arrays, so it is safe to
load, diffable and small. A
file that is missing, unreadable, of another version or trained on other features is not an
error: tuning then learns from scratch, after one warning per file per process.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import MissingDependency
from .cost_model import CostModel
from .features import TRANSFERABLE_FEATURES
from .lgbm import LGBMCostModel
from .xgb import XGBCostModel

#: Where the package's pretrained model lives (package data, shipped by ``pip install``).
PRETRAINED_PATH = Path(__file__).parent / "pretrained" / "default.json"

FORMAT = "tensortune-cost-model"
FORMAT_VERSION = 1
MAX_BYTES = 5 * 1024 * 1024

#: Model classes a pretrained file may hold, by class name.
_CLASSES: dict[str, type[CostModel]] = {cls.__name__: cls for cls in (LGBMCostModel, XGBCostModel)}

#: Files already read in this process: (path, mtime_ns, size) -> parsed document or None.
_LOADED: dict[tuple[str, int, int], dict[str, Any] | None] = {}
_WARNED: set[str] = set()


def save_pretrained(
    model: CostModel,
    path: str | Path,
    *,
    meta: dict[str, Any],
    exemplars: Sequence[Mapping[str, Any]] = (),
) -> None:
    """Write a model trained on ``TRANSFERABLE_FEATURES`` rows as a pretrained JSON file.

    ``meta`` (JSON-able) says what it was trained on, e.g. dataset size and CPU kinds;
    ``exemplars`` are fast measured configs of the training workloads, each
    ``{"workload": name, "target": key, "cpu_kind": kind, "config": {...}}``. Raises
    ValueError for an untrained model, a model of a class ``load_pretrained`` cannot rebuild,
    one trained on another number of columns, or a file that would exceed 5 MB.
    """
    name = type(model).__name__
    if name not in _CLASSES:
        raise ValueError(f"cannot save a {name} as pretrained: use one of {', '.join(_CLASSES)}")
    if not model.is_fitted:
        raise ValueError("save_pretrained needs a trained model (call fit first)")
    width = None if model._features is None else model._features.shape[1]
    if width != len(TRANSFERABLE_FEATURES):
        raise ValueError(
            f"the model was trained on {width} columns; a pretrained model must be trained on "
            f"the {len(TRANSFERABLE_FEATURES)} TRANSFERABLE_FEATURES (transferable_features())"
        )
    doc = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "class": name,
        "feature_names": list(TRANSFERABLE_FEATURES),
        "meta": meta,
        "exemplars": [dict(e) for e in exemplars],
        "state": model._get_state(),
    }
    text = json.dumps(doc, separators=(",", ":"))
    if len(text.encode()) > MAX_BYTES:
        raise ValueError(
            f"the pretrained model would take {len(text.encode()) / 2**20:.1f} MB, over the "
            f"{MAX_BYTES // 2**20} MB limit: train fewer or smaller trees"
        )
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(text)


def _document(path: str | Path | None) -> dict[str, Any] | None:
    """The checked file at ``path`` (default ``PRETRAINED_PATH``), read once per file version;
    None after one warning naming the file and what is wrong."""
    file = Path(PRETRAINED_PATH if path is None else path)
    try:
        stat = file.stat()
        key = (str(file.resolve()), stat.st_mtime_ns, stat.st_size)
    except OSError:
        key = (str(file), -1, -1)
    if key not in _LOADED:
        doc, problem = _read(file)
        _LOADED[key] = doc
        if problem is not None and key[0] not in _WARNED:
            _WARNED.add(key[0])
            warnings.warn(
                f"pretrained cost model {file}: {problem}; learning from scratch",
                stacklevel=3,
            )
    return _LOADED[key]


def _model(doc: dict[str, Any]) -> CostModel:
    return _CLASSES[doc["class"]]._from_state(dict(doc["state"]))


def load_pretrained(path: str | Path | None = None) -> CostModel | None:
    """The model saved at ``path`` (default ``PRETRAINED_PATH``), or None after one warning
    naming the file and what is wrong when it is missing, corrupt, of another format version or
    trained on features other than ``TRANSFERABLE_FEATURES``. Each call returns a fresh model."""
    doc = _document(path)
    return None if doc is None else _model(doc)


#: A pretrained model steers a search or picks a kernel unmeasured only if it ranked the held-out
#: families' configs at least this well when it was trained (its file's ``meta["held_out"]``,
#: written by ``tensortune dataset train``): a model that cannot rank shapes it never saw would
#: trade the template default, and the first trials of every search, for a guess (a first prior
#: trained on 117 records picked a batched GEMM 21x slower than the default). Zero-shot compiles
#: apply the bar per op class, to the cross-validated figure where no held-out family tests one.
MIN_HELD_OUT_ACCURACY = 0.75


#: The ranking checks in a model file's meta that may decide an op class's trust, in order of
#: precedence, with their names in a Prediction's ``source``.
_CHECKS = {"held_out": "held-out", "cross_validated": "cross-validated"}


def untrusted_class(op_class: str, meta: Mapping[str, Any]) -> str | None:
    """Why a model with this file meta must not pick a zero-shot config or steer a search for
    ``op_class``, or None if it may: the first of its ranking checks (``meta["held_out"]``, then
    ``meta["cross_validated"]``) with a pairwise accuracy for the class decides (below
    ``MIN_HELD_OUT_ACCURACY``: not trusted); with neither, the model is not trusted either."""
    for name, label in _CHECKS.items():
        per_class = (meta.get(name) or {}).get("per_op_class") or {}
        accuracy = (per_class.get(op_class) or {}).get("pairwise_accuracy")
        if accuracy is None:
            continue
        if accuracy < MIN_HELD_OUT_ACCURACY:
            return (
                f"{op_class} below trust bar: {label} pairwise {accuracy:.3f} < "
                f"{MIN_HELD_OUT_ACCURACY}"
            )
        return None
    return f"{op_class} below trust bar: no held-out or cross-validated figure for it"


#: How often a zero-shot choice must be right to leave the template default: a candidate is
#: picked over the default only when the model scores it further above than the gap at which
#: its out-of-fold predictions ordered pairs right this often (``meta["cross_validated"]``'s
#: ``confident_gap``, per op class). A ranking right 0.77 of the time over all pairs is right
#: more often about pairs it puts far apart, and a zero-shot kernel must not end slower than the
#: default: a prior trusted on every close call picked, for a MobileNet-V2 depthwise layer, the
#: exemplar of another stride at 0.68 of the default's speed. Chosen on the training workloads
#: only (out-of-fold scores, each group's pick among its measured configs and the default): with
#: no gap 18 of 329 picks ran over 5% slower than the default (geomean cost 0.966 of it); at 0.8,
#: 4 (0.977); at 0.9 nearly every pick stays the default (2, 0.985).
CONFIDENT_ACCURACY = 0.8


def confident_gap_of(op_class: str, meta: Mapping[str, Any]) -> float:
    """The score gap over the default that a zero-shot candidate of ``op_class`` must clear
    (``CONFIDENT_ACCURACY``): the class's figure, else the overall one; infinite where the model
    never reached that accuracy (stored as None); 0 for a file trained before the gap was
    stored (its per-class trust bar alone decides, as it did)."""
    check = meta.get("cross_validated") or {}
    row = (check.get("per_op_class") or {}).get(op_class) or {}
    for source in (row, check):
        if "confident_gap" in source:
            gap = source["confident_gap"]
            return math.inf if gap is None else float(gap)
    return 0.0


def trusted_pretrained(path: str | Path | None = None) -> CostModel | None:
    """``load_pretrained(path)`` if the model passed its held-out check (``MIN_HELD_OUT_ACCURACY``),
    else None. A missing or damaged file warns (see ``load_pretrained``); a model below the bar
    is the shipped state of a young dataset, not a fault, and is not used without a word."""
    doc = _document(path)
    if doc is None:
        return None
    accuracy = (doc["meta"].get("held_out") or {}).get("pairwise_accuracy")
    return _model(doc) if accuracy is not None and accuracy >= MIN_HELD_OUT_ACCURACY else None


def pretrained_meta(path: str | Path | None = None) -> dict[str, Any] | None:
    """The ``meta`` saved with the pretrained model (None when it cannot be loaded)."""
    doc = _document(path)
    return None if doc is None else dict(doc["meta"])


def pretrained_exemplars(path: str | Path | None = None) -> list[dict[str, Any]]:
    """The exemplars saved with the pretrained model (see ``save_pretrained``): none when it
    cannot be loaded, or for a file written before they were kept."""
    doc = _document(path)
    return [] if doc is None else list(doc.get("exemplars", []))


def _exemplars_problem(exemplars: Any) -> str | None:
    """What is wrong with a file's exemplars, if anything (absent is fine: older files)."""
    if exemplars is None:
        return None
    fields = {"workload": str, "target": str, "cpu_kind": str, "config": dict}
    if not isinstance(exemplars, list) or not all(
        isinstance(e, dict) and all(isinstance(e.get(k), t) for k, t in fields.items())
        for e in exemplars
    ):
        return "its exemplars are not a list of {workload, target, cpu_kind, config} objects"
    return None


def _read(file: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The parsed, checked document, or None and what is wrong with it."""
    if not file.is_file():
        return None, "no such file"
    try:
        if file.stat().st_size > MAX_BYTES:
            return None, f"larger than {MAX_BYTES // 2**20} MB"
        doc = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        return None, f"unreadable ({e})"
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        return None, f"not a {FORMAT} file"
    if doc.get("version") != FORMAT_VERSION:
        return (
            None,
            f"format version {doc.get('version')!r}, this tensortune reads {FORMAT_VERSION}",
        )
    if doc.get("feature_names") != list(TRANSFERABLE_FEATURES):
        return None, "trained on other features than this version's TRANSFERABLE_FEATURES"
    if not isinstance(doc.get("meta"), dict):
        return None, "its meta is not a JSON object"
    if (problem := _exemplars_problem(doc.get("exemplars"))) is not None:
        return None, problem
    if doc.get("class") not in _CLASSES or not isinstance(doc.get("state"), dict):
        return None, f"unknown model class {doc.get('class')!r}"
    try:
        _CLASSES[doc["class"]]._from_state(dict(doc["state"]))
    except MissingDependency:  # not the file's fault: nothing would learn without it either
        raise
    except Exception as e:  # a damaged model string fails inside the library, with its own type
        return None, f"the model state does not load ({type(e).__name__}: {e})"
    return doc, None
