"""Layout planning: conv regions in NHWC against ONNX Runtime, region boundaries, weights
transposed once at compile time, odd channel counts, and the "auto" rule."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the graph tests need the optional onnx package")
pytest.importorskip("onnxruntime", reason="the graph tests compare against onnxruntime")

from tensortune.graph import ModelError, compile_model, extract_tasks, from_onnx  # noqa: E402
from tensortune.graph.fold import optimize  # noqa: E402
from tensortune.graph.layout import choose_layout, plan_layout, to_nhwc  # noqa: E402
from tensortune.schedule import Schedule  # noqa: E402

from . import builders  # noqa: E402
from .builders import Builder  # noqa: E402
from .builders import check_against_ort as _check  # noqa: E402


def nhwc_ops(model) -> list[str]:
    """The ops of a compiled model's graph that run in NHWC."""
    return [n.op for n in model.graph.nodes if n.attr("layout") == "NHWC"]


def region_ops(seed: int = 11):
    """Every op the planner re-lays out, after a conv: pools, Concat, Split, per-channel
    constants (a batch norm not after a conv), a squeeze-excite Mul, ReduceMean kept and
    dropped, GlobalAveragePool; and two outputs read in NCHW."""
    b = Builder(seed)
    y = b.op("Relu", [b.conv("x", 3, 8, 3, bias=True, pads=[1, 1, 1, 1])])
    m = b.op("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    a = b.op("AveragePool", [y], kernel_shape=[2, 2], strides=[2, 2])
    c = b.batchnorm(b.op("Concat", [m, a], axis=1), 16)
    s1, s2 = b.op("Split", [c], outputs=2, axis=1, num_outputs=2)
    se = b.op("Sigmoid", [b.op("ReduceMean", [s1, b.const(np.array([2, 3], np.int64))])])
    z = b.conv(b.op("Mul", [s2, se]), 8, 12, 1)
    z = b.op("Add", [z, b.const(b.rng.uniform(-1, 1, (12, 1, 1)).astype(np.float32))])
    flat = b.op("ReduceMean", [z, b.const(np.array([-1, -2], np.int64))], keepdims=0)
    gap = b.op("GlobalAveragePool", [z])
    return b.model({"x": (1, 3, 8, 8)}, [flat, gap, z], opset=18)


def batched_pooling(seed: int = 15):
    """A batch of 3: GlobalAveragePool keeps its NHWC pool form (batch 1 is a GEMM row)."""
    b = Builder(seed)
    y = b.op("Relu", [b.conv("x", 5, 20, 3, bias=True, pads=[1, 1, 1, 1])])
    y = b.op("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2])
    return b.model({"x": (3, 5, 6, 7)}, [b.op("GlobalAveragePool", [y])])


ZOO = {
    "batched_pooling": batched_pooling,
    "resnet_block": builders.resnet_block,
    "inverted_residual": builders.inverted_residual,
    "conv_gemm": builders.conv_gemm,
    "twin_convs": builders.twin_convs,
    "dqn": builders.dqn,
    "region_ops": region_ops,
}


@pytest.mark.parametrize("name", sorted(ZOO))
def test_zoo_models_with_convs_match_onnx_runtime_in_nhwc(target, name):
    compiled = _check(ZOO[name](), target, layout="NHWC")
    assert "Conv" in nhwc_ops(compiled)
    if name == "batched_pooling":
        assert nhwc_ops(compiled) == ["Conv", "MaxPool", "GlobalAveragePool"]


def test_region_ops_all_take_their_nhwc_form():
    graph = to_nhwc(optimize(from_onnx(region_ops())))
    ops = [n.op for n in graph.nodes]
    # one transpose in; the outputs read back through one transpose and views (size-1 axes)
    assert ops.count("Transpose") == 2
    assert {"Conv", "MaxPool", "AveragePool"} <= {
        n.op for n in graph.nodes if n.attr("layout") == "NHWC"
    }
    assert "GlobalAveragePool" not in ops and "MatMul" in ops  # batch 1: a GEMM row
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)}
    want = from_onnx(region_ops()).reference(feeds)
    got = graph.reference(feeds)  # the NumPy oracle understands the NHWC forms too
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-5)


def test_an_op_without_an_nhwc_form_ends_the_region(target):
    """Conv -> Transpose (a user's permutation) -> Conv: the region is left before the
    Transpose (read in NCHW) and entered again for the second conv."""
    b = Builder(12)
    y = b.op("Relu", [b.conv("x", 4, 6, 3, pads=[1, 1, 1, 1])])
    y = b.op("Transpose", [y], perm=[0, 1, 3, 2])
    y = b.conv(y, 6, 5, 3)
    low = b.op("Add", [y, "bias_row"])  # a non-constant operand of lower rank: stays NCHW
    model = b.model({"x": (1, 4, 7, 5), "bias_row": (5,)}, [low])
    compiled = _check(model, target, layout="NHWC")
    assert nhwc_ops(compiled) == ["Conv", "Conv"]
    graph = compiled.graph
    user = next(n for n in graph.nodes if n.op == "Transpose" and n.attr("perm") == [0, 1, 3, 2])
    producer = graph.producers()[user.inputs[0]]
    assert producer.op == "Transpose" and tuple(producer.attr("perm")) == (0, 3, 1, 2)
    add = next(n for n in graph.nodes if n.op == "Add")
    assert add.outputs == (graph.outputs[0].name,)
    assert graph.values[add.inputs[0]].shape == (1, 5, 3, 5)  # NCHW again


def test_weights_are_transposed_once_at_compile_time(target):
    model = builders.twin_convs()
    nchw = compile_model(from_onnx(model), target=target, layout="NCHW")
    nhwc = compile_model(from_onnx(model), target=target, layout="NHWC")
    # the same kernels plus one transpose in and one out: nothing per run for the weights
    assert len(nhwc.steps) == len(nchw.steps) + 2
    conv_calls = [c for c in nhwc.steps if c.group.anchor.op == "Conv"]
    for call in conv_calls:
        weight = call.group.anchor.inputs[1]
        assert weight in nhwc.graph.initializers  # a constant in [R, S, C, K]
        assert nhwc.graph.initializers[weight].shape == (3, 3, 8, 8)
        assert nhwc.places[weight].region == "weights"
        assert "transpose" not in call.note.lower()
    original = {i.name for i in model.graph.initializer if len(i.dims) == 4}
    assert len(original) == 3 and not original & set(nhwc.graph.initializers)  # NCHW not kept


@pytest.mark.parametrize(
    "c, k, group, size, stride",
    [
        (1, 4, 1, 3, 1),
        (3, 5, 1, 3, 1),
        (5, 7, 1, 1, 2),
        (6, 9, 3, 3, 1),
        (5, 5, 5, 3, 2),
        (17, 17, 17, 5, 1),
    ],
)
def test_odd_channel_counts(target, c, k, group, size, stride):
    b = Builder(13)
    y = b.conv("x", c, k, size, bias=True, group=group, strides=[stride, stride], pads=[1] * 4)
    y = b.op("Clip", [y, b.const(np.float32(0.0)), b.const(np.float32(6.0))])
    model = b.model({"x": (1, c, 11, 9)}, [y])
    compiled = _check(model, target, layout="NHWC")
    assert nhwc_ops(compiled) == ["Conv"]


def _convs(layers: list[tuple[int, int, int, int]], hw: int = 8):
    """Conv + ReLU layers of (input channels, output channels, window, groups)."""
    b = Builder(14)
    y = "x"
    for c, k, size, group in layers:
        y = b.op("Relu", [b.conv(y, c, k, size, pads=[size // 2] * 4, group=group)])
    return b.model({"x": (1, layers[0][0], hw, hw)}, [y])


MOBILE = [(3, 32, 3, 1), (32, 32, 3, 32), (32, 96, 1, 1), (96, 96, 3, 96), (96, 24, 1, 1)]
DENSE = [(3, 32, 3, 1), (32, 32, 3, 1), (32, 64, 3, 1), (64, 64, 1, 1)]


def test_auto_rule():
    """NHWC on 32 registers where most of the work is 1x1 and depthwise convs, or the convs
    are a real CNN's work."""

    def picks(layers, lanes=16, registers=32, hw=8):
        return choose_layout(optimize(from_onnx(_convs(layers, hw))), lanes, registers)

    assert picks(MOBILE) == "NHWC"
    assert picks(MOBILE, 8, 16) == "NCHW"  # AVX2: NHWC's defaults not measured there
    assert picks(DENSE) == "NCHW"
    assert picks(DENSE, hw=224) == "NHWC"  # 1.6e9 multiply-adds
    assert picks(DENSE, 8, 16, hw=224) == "NCHW"
    assert picks([(16, 8, 1, 1), (8, 8, 1, 1)]) == "NCHW"  # under a vector of channels
    assert picks([(16, 8, 1, 1), (8, 8, 1, 1)], lanes=8) == "NHWC"
    assert choose_layout(optimize(from_onnx(builders.encoder_layer())), 16) == "NCHW"


@pytest.mark.parametrize("layers", [MOBILE, DENSE], ids=["mobile", "dense"])
def test_auto_compiles_what_the_rule_picks(target, layers):
    from tensortune.space.template import lanes_for

    model = _convs(layers)
    picked = choose_layout(optimize(from_onnx(model)), lanes_for(target), target.vector_registers)
    compiled = _check(model, target, layout="auto")
    assert bool(nhwc_ops(compiled)) == (picked == "NHWC")
    for task in extract_tasks(from_onnx(model), target=target):  # tuning sees the same
        if task.workload.op == "conv2d":
            assert _conv_layout(task) == picked


def _conv_layout(task) -> str:
    stage = next(s for s in Schedule(task.workload.outputs).stages if s.tensor.tag == "conv2d")
    return stage.tensor.attrs["layout"]


def test_tasks_are_the_nhwc_kernels():
    graph = from_onnx(builders.twin_convs())
    for layout in ("NCHW", "NHWC"):
        (conv,) = [t for t in extract_tasks(graph, layout=layout) if "Conv" in t.workload.name]
        assert _conv_layout(conv) == layout
        assert conv.weight == 3
        assert conv.flops == 2 * 8 * 6 * 6 * 8 * 9 + 8 * 6 * 6  # the ReLU: 1 an element


def test_tune_model_tunes_the_layout_it_is_given(target, tmp_path):
    from tensortune.graph import tune_model

    db = str(tmp_path / "t.db")
    for layout in ("NCHW", "NHWC"):
        result = tune_model(
            builders.twin_convs(), budget=1, db=db, target=target, verbose=False, layout=layout
        )
        convs = [r.task for r in result.tasks if r.task.workload.op == "conv2d"]
        assert convs and all(_conv_layout(t) == layout for t in convs)


def test_unknown_layout_is_one_clear_error():
    with pytest.raises(ModelError, match="layout must be one of auto, NCHW, NHWC"):
        plan_layout(optimize(from_onnx(builders.twin_convs())), "NCWH")


def test_profile_names_nhwc_convs_by_their_window(target):
    block = builders.inverted_residual(c=32, hw=12, expand=6, out_c=32)
    prof = compile_model(from_onnx(block), target=target, layout="NHWC").profile(rounds=3)
    convs = ["Conv 1x1 s1", "Conv 3x3 depthwise s2", "Conv 1x1 s1"]
    assert [r.op for r in prof.rows] == ["Transpose", *convs, "Transpose"]
