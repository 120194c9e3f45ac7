"""The check every design-space test makes: a config's kernel computes what NumPy does."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

import tensortune as tt
from tensortune.space import DesignSpace


def assert_configs_match_numpy(
    ds: DesignSpace,
    configs: Iterable[Mapping[str, Any]],
    *,
    rtol: float = 1e-4,
    atol: float = 1e-4,
    skip_invalid: bool = False,
) -> int:
    """Compile each config of ``ds`` for its target and compare its output with NumPy's on one
    set of random inputs (``rtol=atol=0``: bit for bit); with ``skip_invalid`` the configs the
    space rejects are passed over. Returns how many configs were checked."""
    wl = ds.workload
    inputs = wl.random_inputs(0)
    want = wl.reference(inputs)
    checked = 0
    for config in configs:
        if skip_invalid and not ds.space.is_valid(config):
            continue
        kernel = tt.compile(wl, schedule=ds.schedule(dict(config)), target=ds.target)
        np.testing.assert_allclose(kernel(*inputs), want, rtol=rtol, atol=atol, err_msg=str(config))
        checked += 1
    return checked
