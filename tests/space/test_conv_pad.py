"""Where a conv's pad stage is computed: once for the whole input (``pad_at="root"``), or per
iteration of the loop the threads share (``"tile"``), each iteration padding the rows it reads
so that no thread reads what the other wrote; correct on every variant and thread count."""

from __future__ import annotations

import numpy as np
import pytest

import tensortune as tt
from tensortune.pipeline import build_source
from tensortune.space.registry import design_space

from .matches import assert_configs_match_numpy

STEM = "conv2d:N=1,C=3,H=224,W=224,K=24,R=3,S=3,stride=2,pad=1,dilation=1,groups=1,layout=NCHW"
SPECS = [
    "conv2d:C=3,H=11,W=13,K=20,R=3,S=3,stride=2,pad=1",
    "conv2d:N=2,C=3,H=15,W=15,K=12,R=5,S=5,stride=2,pad=2,dilation=2",
    "conv2d:C=16,H=9,W=9,K=16,R=3,S=3,pad=1,groups=16",
    "conv2d:C=8,H=9,W=10,K=16,R=3,S=3,pad=1,layout=NHWC",
    "conv2d:C=12,H=9,W=9,K=24,R=3,S=3,pad=1,epilogue=bias+relu",
    "conv2d:C=288,H=9,W=9,K=20,R=3,S=3,stride=2,pad=1",
]


def _per_tile(ds: tt.space.DesignSpace, count: int, seed: int) -> list[dict]:
    """The default and random configs of ``ds``, each with its pad copied per tile."""
    rng = np.random.default_rng(seed)
    configs = [{**ds.default, "inline_pad": False, "pad_at": "tile"}]
    for config in ds.space.sample(rng, 20 * count):
        config = {**config, "inline_pad": False, "pad_at": "tile"}
        if len(configs) < count and ds.space.is_valid(config):
            configs.append(config)
    return configs


@pytest.mark.parametrize("threads", [2, 1])
@pytest.mark.parametrize("spec", SPECS)
def test_a_pad_copied_per_tile_matches_numpy(spec: str, threads: int, target) -> None:
    ds = design_space(tt.workload(spec), tt.Target.cross(target.isa, num_threads=threads))
    assert assert_configs_match_numpy(ds, _per_tile(ds, 4, seed=len(spec) + threads)) == 4


def test_a_pad_per_tile_is_written_and_read_inside_the_parallel_loop(avx512_target) -> None:
    ds = design_space(tt.workload(STEM), avx512_target)
    source, _ = build_source(ds.schedule(ds.default), "stem", avx512_target)
    body = source[source.index("/* stage conv2d */") :]
    assert "/* stage X_pad */" not in source  # no copy of the whole input of its own
    parallel = body.index("#pragma omp parallel for")
    accumulate = body.index("conv2d_register_v0 = (conv2d_register_v0 +")
    assert parallel < body.index("float X_pad[") < accumulate
    assert "&X_pad[" in body[accumulate : body.index("\n", accumulate)]  # the tile reads it
    once = {**ds.default, "pad_at": "root"}
    assert "/* stage X_pad */" in build_source(ds.schedule(once), "stem", avx512_target)[0]


def test_the_pad_knob_and_its_default(target) -> None:
    """Only padded convs have the knob; a config recorded before it copies the pad once; a pad
    that is inlined has no copy to place (the knob builds nothing different); an ungrouped
    NCHW first conv (C <= 4) copies per tile, a depthwise conv (1 channel a group) does not."""
    stem = design_space(tt.workload(STEM), target)
    assert stem.space.knob("pad_at").choices == ("root", "tile")
    assert stem.default["pad_at"] == "tile" and not stem.default["inline_pad"]
    old = {k: v for k, v in stem.default.items() if k != "pad_at"}
    assert stem.space.is_valid(old) and stem.space.complete(old)["pad_at"] == "root"
    inlined = [{**stem.default, "inline_pad": True, "pad_at": at} for at in ("root", "tile")]
    sources = {build_source(stem.schedule(c), "stem", target)[0] for c in inlined}
    assert len(sources) == 1 and "X_pad[" not in sources.pop()
    wide = design_space(tt.workload("conv2d:C=64,H=56,W=56,K=64,R=3,S=3,pad=1"), target)
    assert wide.default["pad_at"] == "root"
    depthwise = design_space(tt.workload("conv2d:C=2,H=13,W=13,K=2,R=7,S=7,pad=3,groups=2"), target)
    assert depthwise.default["pad_at"] == "root"
    unpadded = design_space(tt.workload("conv2d:C=16,H=8,W=8,K=16,R=1,S=1"), target)
    assert "pad_at" not in unpadded.space.names
