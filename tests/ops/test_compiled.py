"""Every operator of the library, unscheduled, compiles to a kernel that matches the reference.

The reference evaluator is itself checked against independent NumPy formulas (the other files in
this folder), so agreement here means the generated C is right.
"""

from __future__ import annotations

import numpy as np
import pytest

from tensortune import ops, te
from tensortune.pipeline import compile
from tensortune.target import Target
from tensortune.te.reference import evaluate


def _x(*shape, name="X"):
    return te.placeholder(shape, name=name)


CASES = {
    "matmul": lambda: ops.matmul(_x(5, 7, name="A"), _x(7, 3, name="B")),
    "batch_matmul": lambda: ops.batch_matmul(_x(2, 5, 7, name="A"), _x(2, 7, 3, name="B")),
    "dense": lambda: ops.dense(_x(4, 6), _x(5, 6, name="W"), _x(5, name="b")),
    "conv2d_nchw": lambda: ops.conv2d(_x(1, 4, 9, 9), _x(6, 2, 3, 3, name="W"), 2, 1, 1, 2),
    "conv2d_nhwc": lambda: ops.conv2d(
        _x(1, 7, 7, 3), _x(3, 3, 3, 5, name="W"), 1, 1, 2, layout="NHWC"
    ),
    "depthwise": lambda: ops.depthwise_conv2d(_x(1, 4, 8, 8), _x(4, 1, 3, 3, name="W"), 1, 1),
    "max_pool": lambda: ops.max_pool2d(_x(1, 3, 9, 9), 3, 2, 1),
    "avg_pool": lambda: ops.avg_pool2d(_x(1, 3, 9, 9), 3, 2, 1),
    "global_avg_pool": lambda: ops.global_avg_pool(_x(2, 3, 5, 5)),
    "add": lambda: ops.add(_x(4, 5), _x(5, name="Y")),
    "mul": lambda: ops.mul(_x(4, 5), _x(4, 5, name="Y")),
    "relu": lambda: ops.relu(_x(4, 9)),
    "gelu": lambda: ops.gelu(_x(4, 9)),
    "sigmoid": lambda: ops.sigmoid(_x(4, 9)),
    "tanh": lambda: ops.tanh(_x(4, 9)),
    "clip": lambda: ops.clip(_x(4, 9), -0.5, 0.5),
    "softmax": lambda: ops.softmax(_x(3, 17)),
    "layer_norm": lambda: ops.layer_norm(_x(3, 17), _x(17, name="g"), _x(17, name="b")),
    "reduce_sum": lambda: ops.reduce_sum(_x(3, 4, 5), axis=(0, 2)),
    "reduce_mean": lambda: ops.reduce_mean(_x(3, 4, 5), axis=1, keepdims=True),
    "reduce_max": lambda: ops.reduce_max(_x(3, 4, 5), axis=2),
    "transpose": lambda: ops.transpose(_x(2, 3, 4), (2, 0, 1)),
    "reshape": lambda: ops.reshape(_x(2, 3, 4), (4, -1)),
    "concat": lambda: ops.concat([_x(2, 3), _x(4, 3, name="Y")], axis=0),
    "pad": lambda: ops.pad(_x(3, 4), (1, 0), (2, 3), 1.5),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_unscheduled_operator_compiles_and_matches(name: str, target: Target) -> None:
    out = CASES[name]()
    kernel = compile(out, target=target)
    rng = np.random.default_rng(0)
    inputs = [rng.uniform(-1, 1, a.shape).astype(a.dtype) for a in kernel.inputs]
    want = evaluate(out, {spec.name: x for spec, x in zip(kernel.inputs, inputs, strict=True)})
    np.testing.assert_allclose(kernel(*inputs), want, rtol=1e-4, atol=1e-5)
