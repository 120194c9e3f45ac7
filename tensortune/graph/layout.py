"""Layout planning: a model's conv region run in NHWC (channels innermost) instead of ONNX's NCHW.

In NHWC a 1x1 conv is a plain GEMM with contiguous stores and a depthwise conv vectorizes over
channels; between two convs the activations stay NHWC, so the layout is paid for at the region's
edges only. The pass rewrites the graph (after ``optimize``, before fusion):

    x -> Conv(W[K,C,R,S]) -> Relu -> Conv -> Add(., x) -> GlobalAveragePool -> Flatten -> Gemm
    x -> Transpose(0,2,3,1) -> Conv{NHWC}(W[R,S,C,K]) -> Relu -> Conv{NHWC} -> Add(., x')
      -> GlobalAveragePool{NHWC} -> Reshape[N,C,1,1] -> Flatten -> Gemm

Weights are transposed here, once, at compile time; a constant operand of an elementwise op is
permuted the same way (a per-channel ``[C,1,1]`` becomes ``[1,1,1,C]``). Convs, pools, global
average pooling, reductions, Concat, Slice and elementwise ops (epilogues, residual adds) take
their NHWC form; any other op reads its inputs back in NCHW (a transpose where the region ends),
so an op the pass does not know costs a transpose, never a wrong result. A transpose that moves
only size-1 axes is a Reshape: a view, no kernel. At batch 1 a GlobalAveragePool becomes a
GEMM row (``pixel_mean``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .attributes import optional_ints
from .errors import ModelError
from .fold import prune
from .fuse import ELEMENTWISE
from .ir import Graph, Node, ValueInfo
from .reference import REDUCTIONS

LAYOUTS = ("auto", "NCHW", "NHWC")
TO_NHWC = (0, 2, 3, 1)  # NHWC axis j holds NCHW axis TO_NHWC[j]
TO_NCHW = (0, 3, 1, 2)
CONV_WEIGHT = (2, 3, 1, 0)  # [K, C/g, R, S] -> [R, S, C/g, K]
WINDOWED = frozenset({"Conv", "MaxPool", "AveragePool", "GlobalAveragePool"})
"""Ops whose NHWC form is the same op with ``layout="NHWC"`` (a tensortune attribute)."""


def nhwc_axis(axis: int) -> int:
    """Where NCHW axis ``axis`` sits in NHWC."""
    return TO_NHWC.index(axis % 4)


def nchw_shape(shape: tuple[int, ...], layout: str) -> tuple[int, ...]:
    """A 4-D shape in ``layout`` as its NCHW form (what ONNX's attributes describe)."""
    return tuple(shape[d] for d in TO_NCHW) if layout == "NHWC" else shape


def _permuted(shape: tuple[int, ...], perm: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(shape[d] for d in perm)


class _Rewrite:
    """The graph rebuilt node by node; each value known in NCHW (its own name) and/or NHWC
    (a twin named ``<value>/nhwc``)."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.inits = dict(graph.initializers)
        self.values = dict(graph.values)
        self.nodes: list[Node] = []
        self.twin: dict[str, str] = {}  # value -> its NHWC twin
        self.nchw = {v.name for v in graph.inputs} | set(graph.initializers)

    def fresh(self, base: str) -> str:
        name, k = base, 1
        while name in self.values or name in self.inits:
            k += 1
            name = f"{base}_{k}"
        return name

    def declare(self, name: str, shape: tuple[int, ...], dtype: str) -> str:
        self.values[name] = ValueInfo(name, shape, dtype)
        return name

    def move(self, src: str, dst: str, perm: tuple[int, ...]) -> None:
        """``dst = transpose(src, perm)``: a Reshape (a view) when only size-1 axes move."""
        shape = self.values[src].shape
        if [d for d in range(len(shape)) if shape[d] != 1] == [p for p in perm if shape[p] != 1]:
            target = self.fresh(f"{dst}/shape")
            self.inits[target] = np.array(_permuted(shape, perm), np.int64)
            self.nodes.append(Node("Reshape", f"{dst}/reshape", (src, target), (dst,)))
        else:
            self.nodes.append(Node("Transpose", f"{dst}/transpose", (src,), (dst,), {"perm": perm}))

    def as_nhwc(self, value: str) -> str:
        """The NHWC twin of a 4-D value: a permuted constant, or a transpose at region entry."""
        if value not in self.twin:
            info = self.values[value]
            twin = self.declare(
                self.fresh(f"{value}/nhwc"), _permuted(info.shape, TO_NHWC), info.dtype
            )
            if value in self.inits:
                self.inits[twin] = np.ascontiguousarray(self.inits[value].transpose(TO_NHWC))
            else:
                self.move(value, twin, TO_NHWC)
            self.twin[value] = twin
        return self.twin[value]

    def as_nchw(self, value: str) -> str:
        """The value in NCHW: a transpose back where the region ends (once per value)."""
        if value not in self.nchw:
            self.move(self.twin[value], value, TO_NCHW)
            self.nchw.add(value)
        return value

    def broadcast_operand(self, value: str) -> str | None:
        """An elementwise operand next to NHWC values: its twin, a scalar as it is, a constant
        of lower rank permuted as if padded to rank 4; None for a non-constant of lower rank."""
        if value in self.twin:
            return self.twin[value]
        info = self.values[value]
        if info.size == 1 and (value in self.inits or len(info.shape) == 0):
            return value
        if value in self.inits and len(info.shape) <= 4:
            padded = self.inits[value].reshape((1,) * (4 - len(info.shape)) + info.shape)
            name = self.fresh(f"{value}/nhwc")
            self.inits[name] = np.ascontiguousarray(padded.transpose(TO_NHWC))
            self.declare(name, self.inits[name].shape, info.dtype)
            self.twin[value] = name
            return name
        return self.as_nhwc(value) if len(info.shape) == 4 else None

    def output_twin(self, node: Node) -> tuple[str, ...]:
        """Fresh NHWC names for a node's (single) output, recorded as its twin."""
        out = node.outputs[0]
        info = self.values[out]
        twin = self.declare(self.fresh(f"{out}/nhwc"), _permuted(info.shape, TO_NHWC), info.dtype)
        self.twin[out] = twin
        return (twin,)

    def run(self, node: Node) -> None:
        form = self.nhwc_form(node)
        if form is None:
            inputs = tuple(self.as_nchw(i) if i and i not in self.nchw else i for i in node.inputs)
            self.nodes.append(replace(node, inputs=inputs))
            self.nchw.update(o for o in node.outputs if o)
        else:
            self.nodes.append(form)

    def region_input(self, node: Node) -> bool:
        """Whether the node reads a value that lives only in NHWC."""
        return any(i in self.twin and i not in self.nchw for i in node.inputs if i)

    def nhwc_form(self, node: Node) -> Node | None:
        """The node rewritten to read and write NHWC, or None to keep it in NCHW."""
        outs = [o for o in node.outputs if o]
        if len(outs) != 1 or not node.inputs or len(self.values[outs[0]].shape) > 4:
            return None
        op = node.op
        if op in ELEMENTWISE:
            if not self.region_input(node) or len(self.values[outs[0]].shape) != 4:
                return None
            operands = [self.broadcast_operand(i) if i else "" for i in node.inputs]
            if any(i is None for i in operands):
                return None
            twin = self.output_twin(node)
            return replace(node, inputs=tuple(i or "" for i in operands), outputs=twin)
        if len(self.values[node.inputs[0]].shape) != 4:
            return None
        if op in WINDOWED and (op == "Conv" or self.region_input(node)):
            return self.windowed(node)
        if not self.region_input(node):
            return None
        if op == "Concat" and all(len(self.values[i].shape) == 4 for i in node.inputs):
            inputs = tuple(self.as_nhwc(i) for i in node.inputs)
            attrs = {**node.attrs, "axis": nhwc_axis(node.attr("axis"))}
            return replace(node, inputs=inputs, attrs=attrs, outputs=self.output_twin(node))
        if op == "Slice":
            return self.slice(node)
        if op in REDUCTIONS:
            return self.reduction(node)
        return None

    def windowed(self, node: Node) -> Node | None:
        if node.op == "Conv":
            w = node.inputs[1]
            if w not in self.inits or self.inits[w].ndim != 4:
                return None
            w_t = self.fresh(f"{w}/rsck")
            self.inits[w_t] = np.ascontiguousarray(self.inits[w].transpose(CONV_WEIGHT))
            self.declare(w_t, self.inits[w_t].shape, self.values[w].dtype)
            inputs: tuple[str, ...] = (self.as_nhwc(node.inputs[0]), w_t, *node.inputs[2:])
        elif node.op == "AveragePool" and node.attr("count_include_pad", 0):
            return None  # its padding is a separate NCHW pad: kept as it is
        elif node.op == "GlobalAveragePool" and self.values[node.inputs[0]].shape[0] == 1:
            return self.pixel_mean(node)
        else:
            inputs = (self.as_nhwc(node.inputs[0]),)
        attrs = {**node.attrs, "layout": "NHWC"}
        return replace(node, inputs=inputs, attrs=attrs, outputs=self.output_twin(node))

    def pixel_mean(self, node: Node) -> Node:
        """Batch-1 GlobalAveragePool in NHWC as ``ones[1, HW] / HW @ x[HW, C]``: a GEMM row
        vectorized along the channels (the pool's default reduced each channel along a
        strided column: 68 us against 7 in NCHW on MobileNetV2's 7x7x1280, Zen 5)."""
        x = self.as_nhwc(node.inputs[0])
        _, h, w, c = self.values[x].shape
        out = node.outputs[0]
        rows = self.declare(self.fresh(f"{out}/pixels"), (h * w, c), self.values[x].dtype)
        self.nodes.append(
            Node(
                "Reshape",
                f"{rows}/reshape",
                (x, self.constant(f"{rows}/shape", [h * w, c])),
                (rows,),
            )
        )
        weights = self.fresh(f"{out}/mean_weights")
        self.inits[weights] = np.full((1, h * w), 1.0 / (h * w), self.values[x].dtype)
        self.declare(weights, (1, h * w), self.values[x].dtype)
        mean = self.declare(self.fresh(f"{out}/mean"), (1, c), self.values[x].dtype)
        self.nodes.append(Node("MatMul", f"{out}/matmul", (weights, rows), (mean,)))
        (twin,) = self.output_twin(node)
        shape = self.constant(f"{twin}/shape", [1, 1, 1, c])
        return Node("Reshape", f"{twin}/reshape", (mean, shape), (twin,))

    def constant(self, base: str, values: list[int]) -> str:
        name = self.fresh(base)
        self.inits[name] = np.array(values, np.int64)
        self.declare(name, (len(values),), "int64")
        return name

    def slice(self, node: Node) -> Node | None:
        args = [self.inits.get(i) if i else None for i in node.inputs]
        starts = optional_ints(node, "starts", args, 1)
        if starts is None or optional_ints(node, "ends", args, 2) is None:
            return None
        axes = [nhwc_axis(a) for a in optional_ints(node, "axes", args, 3) or range(len(starts))]
        x = self.as_nhwc(node.inputs[0])
        if node.attr("starts") is not None:  # the attribute form of opsets before 10
            return replace(
                node,
                inputs=(x,),
                attrs={**node.attrs, "axes": axes},
                outputs=self.output_twin(node),
            )
        rest = [*node.inputs[1:3], self.constant(f"{node.name}/nhwc_axes", axes)]
        rest += list(node.inputs[4:5])
        return replace(node, inputs=(x, *rest), outputs=self.output_twin(node))

    def reduction(self, node: Node) -> Node | None:
        """A reduction over given axes: NHWC in; NHWC out with keepdims, else the kept axes'
        order must be NCHW's (the output is then the same either way, e.g. ``[N, C]``)."""
        args = [self.inits.get(i) if i else None for i in node.inputs]
        axes = optional_ints(node, "axes", args, 1)
        if not axes:
            return None
        moved = sorted(nhwc_axis(a) for a in axes)
        keep = bool(node.attr("keepdims", 1))
        kept = [TO_NHWC[j] for j in range(4) if j not in moved]
        if not keep and kept != sorted(kept):
            return None
        x = self.as_nhwc(node.inputs[0])
        if node.attr("axes") is not None:
            form = replace(node, inputs=(x,), attrs={**node.attrs, "axes": moved})
        else:
            form = replace(node, inputs=(x, self.constant(f"{node.name}/nhwc_axes", moved)))
        if keep:
            return replace(form, outputs=self.output_twin(node))
        self.nchw.add(node.outputs[0])  # no channel axis left out of place: one layout
        return form


def to_nhwc(graph: Graph) -> Graph:
    """The graph with every conv, and the ops between convs that have an NHWC form, in NHWC;
    the inputs and outputs stay as ONNX gives them (NCHW)."""
    rewrite = _Rewrite(graph)
    for node in graph.nodes:
        rewrite.run(node)
    for info in graph.outputs:
        rewrite.as_nchw(info.name)
    done = graph.replace(
        nodes=tuple(rewrite.nodes), initializers=rewrite.inits, values=rewrite.values
    )
    return prune(done)


def _conv_work(graph: Graph, lanes: int) -> tuple[float, float]:
    """(multiply-adds of every conv, of the 1x1 and grouped convs with a vector's worth of
    output channels or more)."""
    total = suited = 0.0
    for node in graph.nodes:
        if node.op == "Conv" and len(graph.values[node.inputs[1]].shape) == 4:
            k, cg, r, s = graph.values[node.inputs[1]].shape
            work = float(graph.values[node.outputs[0]].size * cg * r * s)
            total += work
            if ((r, s) == (1, 1) or node.attr("group", 1) > 1) and k >= lanes:
                suited += work
    return total, suited


LARGE_CONV_WORK = 1e8
"""Multiply-adds of a model's convs from which NHWC's packed tiles pay on any conv mix: a
real CNN's (ResNet-18 1.8e9, MobileNetV2 3e8); DQN's 8e6 convs ran faster in NCHW."""


def choose_layout(graph: Graph, lanes: int, registers: int = 32) -> str:
    """The layout ``"auto"`` picks: NHWC on a target of 32 vector registers when the convs
    do at least ``LARGE_CONV_WORK`` multiply-adds, or at least half of their multiply-adds are
    in 1x1 and grouped (depthwise) convs of a vector's worth of output channels or more
    (``lanes`` floats); NCHW otherwise (no convs; a few small convs; a target whose NHWC
    defaults were not measured).

    Measured on Zen 5 (AVX-512), untuned, the layouts timed in interleaved rounds in one
    process (``benchmarks/layout_ab.py``), with NHWC's weights packed into output-channel
    panels: ResNet-18 (3x3 convs) ran in 0.96x the NCHW time in NHWC at 2 threads and at 1
    (7.79 vs 8.06 ms, ONNX Runtime 7.80; 14.95 vs 15.58 ms), MobileNetV2 (mostly 1x1 and
    depthwise convs) in 0.71x (1.69 vs 2.41 ms, ORT 1.83) and 0.69x; DQN (8x8 and 4x4 strided
    convs of 4-64 channels) 1.05x at 2 threads, 0.92x at 1: a few microseconds, mostly outside
    its convs. Inside ResNet-18 NHWC's 3x3 convs ran 0.9-1.0x NCHW's packed channel tiles'
    time, its stem 0.9x, its strided 1x1 convs 0.6x.
    """
    total, suited = _conv_work(graph, lanes)
    if registers < 32 or not total:
        return "NCHW"
    return "NHWC" if total >= LARGE_CONV_WORK or suited >= 0.5 * total else "NCHW"


def plan_layout(graph: Graph, layout: str = "auto", lanes: int = 16, registers: int = 32) -> Graph:
    """The graph in ``layout`` (``"auto"``: ``choose_layout`` for a target of ``lanes``
    floats a vector and ``registers`` vector registers)."""
    if layout not in LAYOUTS:
        raise ModelError(f"layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    if layout == "auto":
        layout = choose_layout(graph, lanes, registers)
    return to_nhwc(graph) if layout == "NHWC" else graph


__all__ = ["LAYOUTS", "choose_layout", "nchw_shape", "nhwc_axis", "plan_layout", "to_nhwc"]
