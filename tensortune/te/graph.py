"""The dataflow graph of a program: which tensors feed which, in an order producers come first.

The one topological sort of the package: the reference evaluator runs it and a schedule makes its
stages in it, so both see the same producers-first order.
"""

from __future__ import annotations

from collections.abc import Sequence

from .tensor import Tensor


def topological_order(outputs: Sequence[Tensor]) -> list[Tensor]:
    """Every tensor the outputs depend on (placeholders included), producers before consumers.

    The order is the post-order of a depth-first walk that visits each tensor's inputs in the
    order its body first reads them, outputs in the order given; iterative, since chains of
    elementwise stages may be deeper than Python's recursion limit.
    """
    order: list[Tensor] = []
    seen: set[Tensor] = set()
    for root in outputs:
        stack = [(root, False)]
        while stack:
            t, expanded = stack.pop()
            if expanded:
                order.append(t)
            elif t not in seen:
                seen.add(t)
                stack.append((t, True))
                stack.extend((i, False) for i in reversed(t.inputs) if i not in seen)
    return order


__all__ = ["topological_order"]
