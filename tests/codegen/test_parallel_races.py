"""Kernels whose threads write neighbouring parts of one output get every element right on every
call. GCC's predictive commoning (-O3, and -O2 on the loops it vectorizes) drops a store that a
later iteration overwrites and, for a loop that runs fewer iterations than that distance (one
thread's share of a parallel loop), loads the element before the loop and stores it back after:
stale values land on elements another thread has just written. Kernels are built with
-fno-predictive-commoning; without it this kernel's sums were wrong in 5-20% of calls."""

from __future__ import annotations

import numpy as np

import tensortune as tt
from tensortune.space.registry import design_space

CALLS = 200


def test_an_output_reset_in_parallel_is_right_on_every_call(target) -> None:
    """conv2d with input channels in blocks (``c_block``): the output is reset in the stage's
    parallel loop (rows of 6 pixels per thread, 16 channels 36 floats apart, so a store of
    channel c+1 is one of channel c six rows on), then each block adds into it. Each call
    writes into NaNs, so an element written back from before the call shows."""
    wl = tt.workload("conv2d:C=600,H=11,W=11,K=16,R=3,S=3,stride=2,pad=1")
    ds = design_space(wl, target)
    config = {**ds.default, "vector_axis": "channels", "c_block": 128}
    kernel = tt.compile(wl, schedule=ds.schedule(config), target=target)
    stage = kernel.source.split("/* stage conv2d */")[1]
    block = stage.index("for (int c_o = 0;")  # the reset, the block loop, the tiles in parallel
    assert stage.index("#pragma omp parallel") < block < stage.index("#pragma omp parallel", block)
    inputs = wl.random_inputs(0)
    want = wl.reference(inputs)
    fed = kernel.feeds({t.name: a for t, a in zip(wl.inputs, inputs, strict=True)})
    out = np.empty_like(want)
    for call in range(CALLS):
        out.fill(np.nan)
        kernel(*fed, out=out)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4, err_msg=f"call {call}")
