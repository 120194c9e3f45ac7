"""Small ONNX models built with onnx.helper (random weights, no downloads) for the graph tests."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Builder:
    """Nodes and initializers accumulated one call at a time, then one ModelProto."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def fresh(self, stem: str) -> str:
        self.count += 1
        return f"{stem}{self.count}"

    def const(self, array, name: str | None = None) -> str:
        name = name or self.fresh("c")
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, *shape: int, scale: float | None = None) -> str:
        fan_in = math.prod(shape[1:]) if len(shape) > 1 else shape[0]
        scale = scale if scale is not None else 1.0 / math.sqrt(fan_in)
        return self.const(
            self.rng.uniform(-scale, scale, shape).astype(np.float32), self.fresh("w")
        )

    def op(self, op_type: str, inputs: Sequence[str], outputs: int = 1, **attrs):
        names = [self.fresh(op_type.lower()) for _ in range(outputs)]
        self.nodes.append(
            helper.make_node(op_type, list(inputs), names, self.fresh(op_type), **attrs)
        )
        return names[0] if outputs == 1 else names

    def batchnorm(self, x: str, channels: int) -> str:
        r = self.rng
        params = [
            r.uniform(0.5, 1.5, channels),
            r.uniform(-0.5, 0.5, channels),
            r.uniform(-0.5, 0.5, channels),
            r.uniform(0.5, 1.5, channels),
        ]
        names = [self.const(p.astype(np.float32)) for p in params]
        return self.op("BatchNormalization", [x, *names], epsilon=1e-5)

    def conv(self, x: str, c: int, k: int, size: int, bias: bool = False, **attrs) -> str:
        group = attrs.get("group", 1)
        w = self.weight(k, c // group, size, size)
        inputs = (
            [x, w, self.const(self.rng.uniform(-0.1, 0.1, k).astype(np.float32))]
            if bias
            else [x, w]
        )
        return self.op("Conv", inputs, kernel_shape=[size, size], **attrs)

    def model(
        self, inputs: dict[str, Sequence[int | str]], outputs: Sequence[str], opset: int = 17
    ):
        ins = [
            helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in inputs.items()
        ]
        outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs]
        graph = helper.make_graph(self.nodes, "test", ins, outs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 8
        return model


def resnet_block(c: int = 8, hw: int = 8, seed: int = 0):
    """conv-bn-relu-conv-bn + residual add + relu (a ResNet basic block)."""
    b = Builder(seed)
    y = b.op("Relu", [b.batchnorm(b.conv("x", c, c, 3, pads=[1, 1, 1, 1]), c)])
    y = b.batchnorm(b.conv(y, c, c, 3, pads=[1, 1, 1, 1]), c)
    out = b.op("Relu", [b.op("Add", [y, "x"])])
    return b.model({"x": (1, c, hw, hw)}, [out])


def inverted_residual(c: int = 8, hw: int = 8, expand: int = 4, out_c: int = 12, seed: int = 1):
    """MobileNetV2 block: 1x1 expand, 3x3 depthwise stride 2, 1x1 project; ReLU6 as Clip."""
    b = Builder(seed)
    mid = c * expand
    lo, hi = b.const(np.float32(0.0)), b.const(np.float32(6.0))
    y = b.op("Clip", [b.batchnorm(b.conv("x", c, mid, 1), mid), lo, hi])
    y = b.conv(y, mid, mid, 3, strides=[2, 2], pads=[1, 1, 1, 1], group=mid)
    y = b.op("Clip", [b.batchnorm(y, mid), lo, hi])
    out = b.batchnorm(b.conv(y, mid, out_c, 1), out_c)
    return b.model({"x": (1, c, hw, hw)}, [out])


def classifier_head(c: int = 16, hw: int = 4, classes: int = 10, seed: int = 2):
    """GlobalAveragePool, Flatten, Gemm (transB=1, as torch's Linear exports)."""
    b = Builder(seed)
    y = b.op("Flatten", [b.op("GlobalAveragePool", ["x"])], axis=1)
    out = b.op("Gemm", [y, b.weight(classes, c), b.weight(classes)], transB=1)
    return b.model({"x": (1, c, hw, hw)}, [out])


def _heads(b: Builder, x: str, t: str, heads: int, dim: int) -> str:
    """Reshape ``t`` [B, S, D] to [B, S, H, D/H] with a Shape-derived target, as torch exports."""
    shape = b.op("Shape", [x])
    batch = b.op("Unsqueeze", [b.op("Gather", [shape, b.const(np.int64(0))], axis=0), b.const([0])])
    seq = b.op("Unsqueeze", [b.op("Gather", [shape, b.const(np.int64(1))], axis=0), b.const([0])])
    target = b.op(
        "Concat",
        [batch, seq, b.const(np.array([heads], np.int64)), b.const(np.array([dim // heads]))],
        axis=0,
    )
    return b.op("Reshape", [t, target])


def _linear(b: Builder, x: str, d_in: int, d_out: int) -> str:
    return b.op("Add", [b.op("MatMul", [x, b.weight(d_in, d_out)]), b.weight(d_out, scale=0.1)])


def _layernorm(b: Builder, x: str, dim: int) -> str:
    scale = b.const(b.rng.uniform(0.5, 1.5, dim).astype(np.float32))
    return b.op("LayerNormalization", [x, scale, b.weight(dim, scale=0.1)], axis=-1, epsilon=1e-5)


def encoder_layer(seq: int = 8, dim: int = 16, heads: int = 2, ffn: int = 32, seed: int = 3):
    """A post-norm transformer encoder layer: attention, residual, LayerNorm, FFN with an
    erf-form GELU, residual, LayerNorm; head reshapes via Shape -> Gather -> Concat chains."""
    b = Builder(seed)
    q, k, v = (_heads(b, "x", _linear(b, "x", dim, dim), heads, dim) for _ in range(3))
    q = b.op("Transpose", [q], perm=[0, 2, 1, 3])
    k = b.op("Transpose", [k], perm=[0, 2, 3, 1])
    v = b.op("Transpose", [v], perm=[0, 2, 1, 3])
    scores = b.op("Div", [b.op("MatMul", [q, k]), b.const(np.float32(math.sqrt(dim // heads)))])
    ctx = b.op("MatMul", [b.op("Softmax", [scores], axis=-1), v])
    ctx = b.op("Transpose", [ctx], perm=[0, 2, 1, 3])
    shape = b.op("Shape", [b.op("Identity", ["x"])])
    ctx = b.op("Reshape", [ctx, shape])
    h = _layernorm(b, b.op("Add", [_linear(b, ctx, dim, dim), "x"]), dim)
    f = _linear(b, h, dim, ffn)
    erf = b.op("Erf", [b.op("Div", [f, b.const(np.float32(math.sqrt(2)))])])
    gelu = b.op(
        "Mul",
        [b.op("Mul", [f, b.op("Add", [erf, b.const(np.float32(1.0))])]), b.const(np.float32(0.5))],
    )
    f = b.op("Dropout", [_linear(b, gelu, ffn, dim)])
    out = _layernorm(b, b.op("Add", [f, h]), dim)
    return b.model({"x": (1, seq, dim)}, [out])


def dqn(batch: int = 16, frames: int = 4, actions: int = 6, seed: int = 7):
    """A DQN-shaped Q network on a batch of observations: two strided convs with ReLU,
    Flatten, a hidden Gemm with ReLU and the Q-value Gemm (transB=1, as torch's Linear)."""
    b = Builder(seed)
    y = b.op("Relu", [b.conv("x", frames, 8, 4, bias=True, strides=[2, 2])])
    y = b.op("Relu", [b.conv(y, 8, 16, 3, bias=True, strides=[2, 2])])
    y = b.op("Flatten", [y], axis=1)
    y = b.op("Relu", [b.op("Gemm", [y, b.weight(32, 16 * 3 * 3), b.weight(32)], transB=1)])
    out = b.op("Gemm", [y, b.weight(actions, 32), b.weight(actions)], transB=1)
    return b.model({"x": (batch, frames, 18, 18)}, [out])


def run_ort(model, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


TOLERANCE = 1e-4
"""Max error relative to the output's largest magnitude (float32 sums in another order)."""


def check_against_ort(
    model, target, seed: int = 0, feeds: dict[str, np.ndarray] | None = None, **options
):
    """Compile ``model`` (``options`` for ``compile_model``), run it on ``feeds`` (default:
    seeded standard normals in each input's dtype) and assert every output matches ONNX
    Runtime's; the compiled model."""
    from tensortune.graph import compile_model, from_onnx

    g = from_onnx(model)
    rng = np.random.default_rng(seed)
    feeds = feeds or {v.name: rng.standard_normal(v.shape).astype(v.dtype) for v in g.inputs}
    compiled = compile_model(g, target=target, **options)
    ours = compiled.run(feeds)
    theirs = run_ort(model, feeds)
    for info, value in zip(g.outputs, theirs, strict=True):
        got = ours[info.name]
        assert got.shape == value.shape and got.dtype == value.dtype
        error = np.abs(got - value).max() / max(np.abs(value).max(), 1e-6)
        assert error < TOLERANCE, f"{info.name}: relative error {error:.2e}"
    return compiled


def op_zoo(seed: int = 4):
    """Many small ops in one opset-18 model: pools, Concat, HardSwish, Sigmoid, Tanh, Split
    (num_outputs), Where, Pow, ReduceMean (axes input), Expand, HardSigmoid, Sqrt, Transpose,
    Slice, Gather, Unsqueeze/Squeeze, Cast and Softmax; two outputs."""
    b = Builder(seed)
    a = b.op("MaxPool", ["x"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    p = b.op("AveragePool", ["x"], kernel_shape=[2, 2], strides=[2, 2])
    c = b.op("Concat", [a, p], axis=1)
    e = b.op("Mul", [b.op("Sigmoid", [b.op("HardSwish", [c])]), b.op("Tanh", [c])])
    s1, s2 = b.op("Split", [e], outputs=2, axis=1, num_outputs=2)
    mask = b.const(np.array([True, False, True, False]).reshape(4, 1, 1))
    h = b.op("Pow", [b.op("Where", [mask, s1, s2]), b.const(np.float32(2.0))])
    r = b.op("ReduceMean", [h, b.const(np.array([2, 3], np.int64))], keepdims=1)
    grow = b.op("Expand", [r, b.const(np.array([1, 4, 3, 3], np.int64))])
    t = b.op("Add", [grow, b.op("Sqrt", [b.op("HardSigmoid", [s2], alpha=0.3, beta=0.4)])])
    u = b.op("Transpose", [t], perm=[0, 2, 3, 1])
    v = b.op("Slice", [u, b.const([1]), b.const([3]), b.const([1])])
    w = b.op("Gather", [v, b.const(np.array([2, 0], np.int64))], axis=2)
    w = b.op("Squeeze", [b.op("Unsqueeze", [w, b.const([0])]), b.const([0])])
    out1 = b.op("Cast", [b.op("Neg", [w])], to=TensorProto.FLOAT)
    out2 = b.op("Softmax", [w], axis=-1)
    return b.model({"x": (1, 4, 6, 6)}, [out1, out2], opset=18)


def conv_gemm(seed: int = 5):
    """A dilated Conv with bias, Sigmoid, GlobalAveragePool, Flatten, and a Gemm with alpha,
    beta and transB=0; a BatchNormalization not after a Conv (on the Gemm input's producer)."""
    b = Builder(seed)
    y = b.op("Sigmoid", [b.conv("x", 3, 8, 3, bias=True, dilations=[2, 2], pads=[2, 2, 2, 2])])
    y = b.batchnorm(b.op("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2]), 8)
    y = b.op("Flatten", [b.op("GlobalAveragePool", [y])], axis=1)
    out = b.op("Gemm", [y, b.weight(8, 5), b.weight(1, 5)], alpha=0.5, beta=2.0)
    return b.model({"x": (1, 3, 10, 10)}, [out], opset=13)


def twin_convs(c: int = 8, hw: int = 6, seed: int = 6):
    """Three identical 3x3 conv+relu layers in a row: one task of weight 3."""
    b = Builder(seed)
    y = "x"
    for _ in range(3):
        y = b.op("Relu", [b.conv(y, c, c, 3, bias=True, pads=[1, 1, 1, 1])])
    return b.model({"x": (1, c, hw, hw)}, [y])


def decomposed_norms(seed: int = 10):
    """LayerNorm in its decomposed form (ReduceMean, Sub, Pow, Sqrt, Div...), SiLU as
    x * sigmoid(x), a Softmax over a middle axis and a LayerNormalization over two axes."""
    b = Builder(seed)
    mean = b.op("ReduceMean", ["x"], axes=[-1], keepdims=1)
    centered = b.op("Sub", ["x", mean])
    var = b.op("ReduceMean", [b.op("Pow", [centered, b.const(np.float32(2))])], axes=[-1])
    std = b.op("Sqrt", [b.op("Add", [var, b.const(np.float32(1e-5))])])
    norm = b.op("Add", [b.op("Mul", [b.op("Div", [centered, std]), b.weight(8)]), b.weight(8)])
    silu = b.op("Mul", [norm, b.op("Sigmoid", [norm])])
    out = b.op("Softmax", [silu], axis=1)
    gamma = b.const(b.rng.uniform(0.5, 1.5, (5, 8)).astype(np.float32))
    both = b.op("LayerNormalization", [silu, gamma, b.weight(5, 8)], axis=-2)  # two axes
    return b.model({"x": (2, 5, 8)}, [out, both])
