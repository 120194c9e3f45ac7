"""The peers a report compares a winner with: NumPy, and PyTorch and ONNX Runtime when they are
importable, each given the workload's inputs, checked against the NumPy reference, then timed.

The benchmarks use the same peers (``benchmarks/peers.py`` re-exports `peers_for`); here they are
timed by ``perf_counter`` around their Python call, a block of calls long enough that
the call overhead does not count, best median of a few blocks.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

Peer = Callable[[], Any]
_CONVS = ("conv2d", "depthwise_conv2d")


def peers_for(wl: Any, inputs: list[np.ndarray], threads: int) -> dict[str, Peer]:
    """``{peer name: zero-argument callable}`` for the peers that implement this workload."""
    params = dict(wl.params)
    found: dict[str, Peer] = {}
    mine = _numpy(wl.op, params, inputs)
    if mine is not None:
        found["numpy"] = mine
    for name, make in (("pytorch", _torch), ("onnxruntime", _onnxruntime)):
        with contextlib.suppress(ImportError):
            fn = make(wl, params, inputs, threads)
            if fn is not None:
                found[name] = fn
    return found


def fastest_peer(wl: Any, threads: int, min_seconds: float = 0.02) -> tuple[str, float] | None:
    """(name, seconds per call) of the fastest correct peer of ``wl``, or None if none runs it."""
    inputs = wl.random_inputs()
    expected = wl.reference(inputs)
    if isinstance(expected, tuple):
        return None
    scale = max(1.0, float(np.abs(expected).max()))
    _limit_threads(threads)
    timed = {}
    for name, fn in peers_for(wl, inputs, threads).items():
        try:
            got = np.asarray(fn())
        except Exception:  # a peer that cannot run this case is no peer for it
            continue
        if got.shape == expected.shape and np.allclose(got, expected, rtol=1e-3, atol=1e-3 * scale):
            timed[name] = _seconds(fn, min_seconds)
    if not timed:
        return None
    name = min(timed, key=timed.__getitem__)
    return name, timed[name]


def _seconds(fn: Peer, min_seconds: float, blocks: int = 3) -> float:
    fn()
    start = time.perf_counter()
    fn()
    number = max(1, int(min_seconds / max(time.perf_counter() - start, 1e-7)))
    medians = []
    for _ in range(blocks):
        times = []
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(number):
                fn()
            times.append((time.perf_counter() - start) / number)
        medians.append(statistics.median(times))
    return min(medians)


def _limit_threads(threads: int) -> None:
    """Give NumPy's BLAS the kernels' thread count when threadpoolctl can (no-op otherwise)."""
    with contextlib.suppress(ImportError):
        from threadpoolctl import threadpool_limits

        threadpool_limits(threads)


def _numpy(op: str, params: dict, x: list[np.ndarray]) -> Peer | None:
    if params.get("epilogue") is not None:
        return None
    if op in ("matmul", "batch_matmul"):
        return lambda: np.matmul(x[0], x[1])
    if op == "dense":
        return lambda: x[0] @ x[1].T
    if op == "softmax":

        def softmax() -> np.ndarray:
            e = np.exp(x[0] - x[0].max(axis=-1, keepdims=True))
            return e / e.sum(axis=-1, keepdims=True)

        return softmax
    if op == "layernorm":

        def layernorm() -> np.ndarray:
            mean = x[0].mean(axis=-1, keepdims=True)
            var = x[0].var(axis=-1, keepdims=True)
            return (x[0] - mean) / np.sqrt(var + 1e-5) * x[1] + x[2]

        return layernorm
    return None


def _torch(wl: Any, params: dict, inputs: list[np.ndarray], threads: int) -> Peer | None:
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    t = [torch.from_numpy(x) for x in inputs]
    op, epilogue = wl.op, params.get("epilogue")
    # a bias is the last input; PyTorch's own layers take it in the call (addmm, linear, conv)
    bias = t[-1] if epilogue is not None and epilogue.startswith("bias+") else None
    call: Peer | None = None
    if op == "matmul" and bias is not None:
        call = lambda: torch.addmm(bias, t[0], t[1])  # noqa: E731
    elif op in ("matmul", "batch_matmul"):

        def product() -> Any:
            out = torch.matmul(t[0], t[1])
            return out if bias is None else out + bias

        call = product
    elif op == "dense":
        call = lambda: F.linear(t[0], t[1], bias)  # noqa: E731
    elif op in _CONVS and params["layout"] == "NCHW":
        kw = {"stride": params["stride"], "padding": params["pad"]}
        kw |= {"dilation": params["dilation"], "groups": params["groups"]}
        call = lambda: F.conv2d(t[0], t[1], bias, **kw)  # noqa: E731
    elif op == "maxpool2d" and params["layout"] == "NCHW":
        window, stride, pad = (params["R"], params["S"]), params["stride"], params["pad"]
        call = lambda: F.max_pool2d(t[0], window, stride, pad)  # noqa: E731
    elif op == "softmax":
        call = lambda: torch.softmax(t[0], dim=-1)  # noqa: E731
    elif op == "layernorm":
        call = lambda: F.layer_norm(t[0], (t[0].shape[-1],), t[1], t[2], eps=1e-5)  # noqa: E731
    if call is None:
        return None
    act = None if epilogue is None else (F.relu if epilogue.endswith("relu") else F.gelu)

    def no_grad() -> Any:
        with torch.no_grad():
            return call() if act is None else act(call())

    return no_grad


def _onnxruntime(wl: Any, params: dict, inputs: list[np.ndarray], threads: int) -> Peer | None:
    import onnx
    import onnx.numpy_helper
    import onnxruntime as ort
    from onnx import TensorProto, helper

    op, epilogue = wl.op, params.get("epilogue")
    names = [f"in{i}" for i in range(len(inputs))]
    operands = names[:-1] if epilogue is not None and epilogue.startswith("bias+") else names
    attrs: dict[str, Any] = {}
    if op in ("matmul", "batch_matmul"):
        node = "MatMul"
    elif op == "dense":  # X @ W.T: ONNX Runtime's Gemm reads W [N, K] as it is
        node, attrs = "Gemm", {"transB": 1}
    elif op in _CONVS and params["layout"] == "NCHW":
        s, p, d = params["stride"], params["pad"], params["dilation"]
        node, operands = "Conv", names  # a bias is the Conv's third input
        attrs = {"strides": [s, s], "pads": [p] * 4, "dilations": [d, d]}
        attrs["group"] = params["groups"]
    elif op == "maxpool2d" and params["layout"] == "NCHW":
        node, p = "MaxPool", params["pad"]
        attrs = {"kernel_shape": [params["R"], params["S"]], "pads": [p] * 4}
        attrs["strides"] = [params["stride"]] * 2
    elif op == "softmax":
        node, attrs = "Softmax", {"axis": -1}
    elif op == "layernorm":
        node, attrs = "LayerNormalization", {"axis": -1, "epsilon": 1e-5}
    else:
        return None
    # the epilogue as ONNX writes it (bias Add, then Relu or the erf Gelu of opset 20), which
    # ONNX Runtime fuses into the GEMM where it can
    nodes = [helper.make_node(node, operands, ["product"], **attrs)]
    if operands != names:
        nodes.append(helper.make_node("Add", [nodes[-1].output[0], names[-1]], ["biased"]))
    if epilogue is not None:
        act = "Relu" if epilogue.endswith("relu") else "Gelu"
        nodes.append(helper.make_node(act, [nodes[-1].output[0]], ["activated"]))
    nodes[-1].output[0] = "out"  # the last node's result is the graph's output
    # the workload's constants (weights) are initializers, which ONNX Runtime packs once, as
    # tensortune's kernel does with them
    fixed = {f"in{i}" for i, t in enumerate(wl.inputs) if t.name in wl.constants}
    floats = TensorProto.FLOAT
    graph = helper.make_graph(
        nodes,
        "peer",
        [
            helper.make_tensor_value_info(n, floats, list(x.shape))
            for n, x in zip(names, inputs, strict=True)
            if n not in fixed
        ],
        [helper.make_tensor_value_info("out", floats, list(wl.outputs[0].shape))],
        [
            onnx.numpy_helper.from_array(x, n)
            for n, x in zip(names, inputs, strict=True)
            if n in fixed
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    feed = {n: x for n, x in zip(names, inputs, strict=True) if n not in fixed}
    return lambda: session.run(None, feed)[0]
