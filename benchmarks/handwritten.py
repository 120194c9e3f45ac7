"""Hand-written schedules for matmul 1024^3 and conv2d 64x56x56 -> 64 (3x3, pad 1), FP32, 2 threads,
each timed beside its peer in the same run: NumPy/OpenBLAS for matmul, PyTorch CPU for conv.

    python benchmarks/handwritten.py [--threads 2] [--repeat 7]

Bars (issue 2): matmul >= 70% of OpenBLAS, conv2d >= 60% of PyTorch. Every kernel is checked
against its peer's result before it is timed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common

import tensortune as tt
from tensortune.space.template import vector_columns

MATMUL = "matmul:M=1024,N=1024,K=1024"
CONV = "conv2d:N=1,C=64,H=56,W=56,K=64,R=3,S=3,pad=1"


def matmul_schedule(wl: tt.Workload) -> tt.Schedule:
    """A 6x32 accumulator tile in 12 zmm registers over B packed into 32-wide panels."""
    s = tt.Schedule(wl.outputs)
    c = s.cache_write("matmul", "register")
    io, jo, ii, ji = s.tile("matmul", "i", "j", 6, 32)
    jo_o, jo_i = s.split("matmul", jo, 16)  # 16 panels of B (2 MiB) shared by all row tiles
    s.reorder("matmul", [jo_o, io, jo_i, ii, ji])
    s.compute_at(c, "matmul", jo_i)
    s.reorder(c, ["k", "i", "j"])
    s.unroll(c, "i")
    vector_columns(s, c, "j", 32, 16)  # split by 16, unroll the 2 vectors, vectorize the lanes
    s.unroll("matmul", ii)
    vector_columns(s, "matmul", ji, 32, 16)
    s.parallel("matmul", io)
    bp = s.pack("B", c, axis=1, factor=32, order=(1, 0, 2))  # B_pack[N/32, K, 32]
    s.parallel(bp, "i0")
    _, lanes = s.split(bp, "i2", 16)
    s.vectorize(bp, lanes)
    return s


def conv_schedule(wl: tt.Workload) -> tt.Schedule:
    """8 output channels x 3 vectors of 8 output columns per register tile; padding done once."""
    s = tt.Schedule(wl.outputs)
    s.parallel("X_pad", "i1")
    c = s.cache_write("conv2d", "register")
    ko, ki = s.split("conv2d", "k", 8)
    qo, qi = s.split("conv2d", "q", 24)
    s.reorder("conv2d", ["n", ko, "p", qo, ki, qi])
    s.compute_at(c, "conv2d", qo)
    s.reorder(c, ["c", "r", "s", "k", "q"])  # 24 accumulators live across the whole reduction
    s.unroll(c, "k")
    vector_columns(s, c, "q", 24, 8)
    s.unroll("conv2d", ki)
    vector_columns(s, "conv2d", qi, 24, 8)
    s.parallel("conv2d", s.fuse("conv2d", ko, "p"))  # 8 x 56 row tasks for the threads
    return s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    common.limit_threads(args.threads)
    target = tt.Target.detect(num_threads=args.threads)
    print(f"target: {target}   numpy: {common.openblas_info()}")
    print(common.header(["peer"]))

    wl = tt.workload(MATMUL)
    a, b = wl.random_inputs(0)
    kernel = tt.compile(wl, matmul_schedule(wl), target)
    out = kernel(a, b)
    common.check("matmul", out, a @ b)
    best = common.measure(
        [
            common.Contender("ours", lambda: None, common.kernel_timer(kernel, [a, b, out])),
            common.Contender("numpy", lambda: np.matmul(a, b)),
        ],
        repeat=args.repeat,
    )
    print(
        common.row(
            f"{MATMUL} (vs NumPy/OpenBLAS)", best["ours"], {"numpy": best["numpy"]}, wl.flops
        )
    )

    import torch

    wl = tt.workload(CONV)
    x, w = wl.random_inputs(0)
    kernel = tt.compile(wl, conv_schedule(wl), target)
    out = kernel(x, w)
    tx, tw = torch.from_numpy(x[None] if x.ndim == 3 else x), torch.from_numpy(w)
    with torch.no_grad():
        want = torch.nn.functional.conv2d(tx, tw, padding=1).numpy()
    common.check("conv2d", out, want)

    def torch_conv():
        with torch.no_grad():
            return torch.nn.functional.conv2d(tx, tw, padding=1)

    best = common.measure(
        [
            common.Contender("ours", lambda: None, common.kernel_timer(kernel, [x, w, out])),
            common.Contender("torch", torch_conv),
        ],
        repeat=args.repeat,
    )
    print(common.row(f"{CONV} (vs PyTorch)", best["ours"], {"torch": best["torch"]}, wl.flops))
    print(f"(torch {torch.__version__}, {torch.get_num_threads()} threads)")


if __name__ == "__main__":
    main()
