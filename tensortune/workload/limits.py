"""How large a workload may be: refused before anything is allocated (specs are untrusted)."""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence

from ..dtype import dtype
from ..errors import SpecError
from ..te import Tensor
from .spec import _shown

MAX_ELEMENTS = 2**40
"""Most elements one tensor may hold, whatever the memory limit: 64-bit offsets into it (and the
products computed on the way to them) stay far from overflow."""
DEFAULT_MAX_BYTES = 16 * 1024**3
"""Most bytes a workload's inputs and outputs may take together unless the environment says."""
MAX_BYTES_ENV_VAR = "TENSORTUNE_MAX_BYTES"
_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}


def max_bytes() -> int:
    """The most bytes a workload's inputs and outputs may take together: ``$TENSORTUNE_MAX_BYTES``
    (bytes, or with a K, M, G or T suffix, binary) or 16 GiB."""
    text = os.environ.get(MAX_BYTES_ENV_VAR, "").strip()
    if not text:
        return DEFAULT_MAX_BYTES
    match = re.fullmatch(r"([0-9]{1,20})\s*([KMGT]?)(?:i?B)?", text, re.IGNORECASE)
    if match is None or int(match[1]) == 0:
        raise SpecError(
            f"{MAX_BYTES_ENV_VAR} must be a positive size such as 17179869184 or 16G, "
            f"got {_shown(text)}"
        )
    return int(match[1]) * _UNITS[match[2].upper()]


def _check_size(spec: str, tensors: Sequence[Tensor]) -> None:
    """Refuse a program whose tensors could not be allocated, before anything is."""
    limit = max_bytes()
    budget, env = _bytes(limit), f"{MAX_BYTES_ENV_VAR} sets it"
    too_large = f"workload {_shown(spec)} is too large"
    sizes = {}
    for t in tensors:
        count, itemsize = math.prod(t.shape), dtype(t.dtype).size
        most = min(MAX_ELEMENTS, limit // itemsize)
        if count > most:
            why = "the index limit" if most == MAX_ELEMENTS else f"{budget} of memory; {env}"
            raise SpecError(
                f"{too_large}: tensor {t.name} would hold {count:.1e} {t.dtype} elements "
                f"({_bytes(count * itemsize)}); the limit is {most:.1e} elements ({why}); "
                "use smaller dimensions"
            )
        sizes[t.name] = count * itemsize
    if sum(sizes.values()) > limit:
        each = ", ".join(f"{name} {_bytes(n)}" for name, n in sizes.items())
        raise SpecError(
            f"{too_large}: its tensors would take {_bytes(sum(sizes.values()))} together "
            f"({each}); the limit is {budget} ({env}); use smaller dimensions"
        )


def _bytes(n: float) -> str:
    """``n`` bytes for a person: 4.0 TiB."""
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
    k = 0
    while n >= 1024 and k < len(units) - 1:
        n, k = n / 1024, k + 1
    return f"{n:.1f} {units[k]}" if k else f"{n} B"
