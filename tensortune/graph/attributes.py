"""Node attributes that ONNX spells several ways: as an attribute in older opsets and an input in
newer ones, or as explicit pads in one model and auto_pad or ceil_mode in another. Read here
once, for the importer's shapes, the reference and the lowering alike."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .ir import Node


def optional_ints(
    node: Node, key: str, args: Sequence[np.ndarray | None], index: int
) -> list[int] | None:
    """An int list given as attribute (older opsets) or as input ``index`` (newer ones)."""
    if node.attr(key) is not None:
        return [int(v) for v in node.attr(key)]
    if len(args) > index and args[index] is not None:
        return [int(v) for v in np.asarray(args[index]).reshape(-1)]
    return None


def pool_geometry(
    node: Node, shape: Sequence[int], kernel: Sequence[int]
) -> tuple[list[int], list[int], list[int], list[int]]:
    """(strides, dilations, pads_begin, pads_end) of a Conv or pool node over NC+spatial
    ``shape``, with auto_pad and ceil_mode turned into explicit (end) padding."""
    n = len(kernel)
    strides = list(node.attr("strides") or [1] * n)
    dilations = list(node.attr("dilations") or [1] * n)
    pads = list(node.attr("pads") or [0] * (2 * n))
    begin, end = pads[:n], pads[n:]
    auto = node.attr("auto_pad", "NOTSET")
    if isinstance(auto, bytes):
        auto = auto.decode()
    spatial = shape[2:]
    for d in range(n):
        window = dilations[d] * (kernel[d] - 1) + 1
        if auto in ("SAME_UPPER", "SAME_LOWER"):
            out = -(-spatial[d] // strides[d])
            total = max(0, (out - 1) * strides[d] + window - spatial[d])
            small, big = total // 2, total - total // 2
            begin[d], end[d] = (small, big) if auto == "SAME_UPPER" else (big, small)
        elif auto == "VALID":
            begin[d] = end[d] = 0
        if node.attr("ceil_mode", 0):
            span = spatial[d] + begin[d] + end[d] - window
            out = -(-span // strides[d]) + 1
            if (out - 1) * strides[d] >= spatial[d] + begin[d]:
                out -= 1  # the last window must start inside the input or its left padding
            end[d] += max(0, (out - 1) * strides[d] + window - (spatial[d] + begin[d] + end[d]))
    return strides, dilations, begin, end
