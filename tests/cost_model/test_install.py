"""``pip install .`` with no extras, then ``tt.tune``: LightGBM and the prior come along."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import tensortune as tt
from tensortune.cost_model import LGBMCostModel, save_pretrained, transferable_features
from tensortune.space.registry import design_space
from tensortune.target import Target

ROOT = Path(__file__).parents[2]
#: pip output that means the package index, not the package, is the problem.
OFFLINE = ("NewConnectionError", "Temporary failure in name resolution", "No matching distribution")

SCRIPT = textwrap.dedent(
    """
    import sys, warnings
    import tensortune as tt
    from tensortune.cost_model import PRETRAINED_PATH, load_pretrained
    from tensortune.cost_model.prior import PriorCalibratedModel
    from tensortune.search import make_tuning_strategy
    from tensortune.space.registry import design_space
    assert PRETRAINED_PATH.is_file(), PRETRAINED_PATH  # shipped as package data
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_pretrained() is not None
        ds = design_space(tt.workload("matmul:M=16,N=16,K=16"), tt.Target.detect())
        assert isinstance(make_tuning_strategy("model", ds).model, PriorCalibratedModel)
        result = tt.tune("matmul:M=16,N=16,K=16", trials=4, db=sys.argv[1])
    assert result.trials == 4 and result.best_seconds > 0, result
    print("tuned", result.trials)
    """
)


def _source_copy(dest: Path, prior_from: Target) -> Path:
    """The package sources in ``dest`` (pip builds there, not in the shared checkout), with a
    tiny prior as the package's pretrained file."""
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, dest / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.so", "default.json")
    shutil.copytree(ROOT / "tensortune", dest / "tensortune", ignore=ignore)
    ds = design_space(tt.workload("matmul:M=16,N=32,K=16"), prior_from)
    x = transferable_features(ds, ds.space.sample(0, 16))
    model = LGBMCostModel(seed=0).fit(x, 1e-3 * (1 + x[:, 0] ** 2))
    # as if it passed its held-out check, overall and for the op class tuned
    passed = {
        "held_out": {
            "pairwise_accuracy": 1.0,
            "per_op_class": {"matmul": {"pairwise_accuracy": 1.0}},
        }
    }
    save_pretrained(model, dest / "tensortune/cost_model/pretrained/default.json", meta=passed)
    return dest


@pytest.mark.slow
def test_pip_install_without_extras_then_tune(tmp_path: Path, target: Target) -> None:
    (tmp_path / "src").mkdir()
    source = _source_copy(tmp_path / "src", target)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    pip = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", str(source)],
        capture_output=True,
        text=True,
        timeout=480,
    )
    if pip.returncode != 0 and any(s in pip.stdout + pip.stderr for s in OFFLINE):
        pytest.skip(f"the package index is unreachable: {pip.stderr.strip()[-300:]}")
    assert pip.returncode == 0, pip.stderr[-2000:]
    run = subprocess.run(
        [str(python), "-c", SCRIPT, str(tmp_path / "t.db")],
        capture_output=True,
        text=True,
        timeout=480,
        cwd=tmp_path,  # not the checkout: the installed package must be what runs
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "tuned 4" in run.stdout
