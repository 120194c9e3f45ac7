"""The peers a workload is compared with: NumPy, PyTorch and ONNX Runtime, each given the same
inputs as our kernel and checked against the NumPy reference before it is timed.

Each function returns ``{peer name: zero-argument callable}``, omitting peers that do not
implement the op (NumPy has no conv) or are not installed.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import tensortune as tt

Peers = dict[str, Callable[[], object]]


def peers_for(wl: tt.Workload, inputs: list[np.ndarray], threads: int) -> Peers:
    params = dict(wl.params)
    out: Peers = {}
    if wl.op in ("matmul", "batch_matmul") and "epilogue" not in params:
        a, b = inputs
        out["numpy"] = lambda: np.matmul(a, b)
    torch_fn = _torch(wl, inputs, params, threads)
    if torch_fn is not None:
        out["torch"] = torch_fn
    ort_fn = _onnxruntime(wl, inputs, params, threads)
    if ort_fn is not None:
        out["onnxruntime"] = ort_fn
    return out


def _torch(wl, inputs, params, threads):
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return None
    torch.set_num_threads(threads)
    t = [torch.from_numpy(x) for x in inputs]
    op = wl.op
    if op in ("matmul", "batch_matmul"):
        epi = params.get("epilogue")
        if epi == "bias+gelu":
            return _nograd(lambda: F.gelu(torch.addmm(t[2], t[0], t[1])))
        if epi == "bias+relu":
            return _nograd(lambda: F.relu(torch.addmm(t[2], t[0], t[1])))
        return _nograd(lambda: torch.matmul(t[0], t[1]))
    if op in ("conv2d", "depthwise_conv2d") and params.get("layout", "NCHW") == "NCHW":
        kw = dict(
            stride=params.get("stride", 1),
            padding=params.get("pad", 0),
            dilation=params.get("dilation", 1),
            groups=params.get("groups", 1),
        )
        return _nograd(lambda: F.conv2d(t[0], t[1], **kw))
    if op == "maxpool2d" and params.get("layout", "NCHW") == "NCHW":
        window, stride, pad = (params["R"], params["S"]), params["stride"], params["pad"]
        return _nograd(lambda: F.max_pool2d(t[0], window, stride, pad))
    if op == "softmax":
        return _nograd(lambda: torch.softmax(t[0], dim=-1))
    if op == "layernorm":
        cols = t[0].shape[-1]
        return _nograd(lambda: F.layer_norm(t[0], (cols,), t[1], t[2], eps=1e-5))
    return None


def _nograd(fn):
    import torch

    def call():
        with torch.no_grad():
            return fn()

    return call


def _onnxruntime(wl, inputs, params, threads):
    try:
        import onnx
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except ImportError:
        return None
    names = [f"in{i}" for i in range(len(inputs))]
    op = wl.op
    attrs: dict = {}
    if op in ("matmul", "batch_matmul") and "epilogue" not in params:
        node_op = "MatMul"
    elif op in ("conv2d", "depthwise_conv2d") and params.get("layout", "NCHW") == "NCHW":
        node_op = "Conv"
        s, p, d = params.get("stride", 1), params.get("pad", 0), params.get("dilation", 1)
        attrs = dict(
            strides=[s, s], pads=[p, p, p, p], dilations=[d, d], group=params.get("groups", 1)
        )
    elif op == "maxpool2d" and params.get("layout", "NCHW") == "NCHW":
        node_op, p = "MaxPool", params["pad"]
        attrs = dict(
            kernel_shape=[params["R"], params["S"]],
            strides=[params["stride"]] * 2,
            pads=[p, p, p, p],
        )
    elif op == "softmax":
        node_op, attrs = "Softmax", {"axis": -1}
    elif op == "layernorm":
        node_op, attrs = "LayerNormalization", {"axis": -1, "epsilon": 1e-5}
    else:
        return None
    out_shape = list(wl.outputs[0].shape)
    graph = helper.make_graph(
        [helper.make_node(node_op, names, ["out"], **attrs)],
        "one_node",
        [
            helper.make_tensor_value_info(n, TensorProto.FLOAT, list(x.shape))
            for n, x in zip(names, inputs, strict=True)
        ],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, out_shape)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    feed = dict(zip(names, inputs, strict=True))
    return lambda: sess.run(None, feed)[0]
