"""``tensortune dataset export|train|card`` end to end, as a user runs them."""

from __future__ import annotations

import subprocess
import sys

from tensortune.database import open_database
from tensortune.dataset import read_records
from tensortune.workload import workload

from .conftest import SPECS


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tensortune", "dataset", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_export_train_card(tiny_db, tmp_path):
    out = tmp_path / "data" / "tiny.jsonl.gz"
    out.parent.mkdir()
    done = _run("export", "--db", str(tiny_db), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "wrote 36 records" in done.stdout
    done = _run("train", str(out.parent), "-o", str(tmp_path / "prior.json"))
    assert done.returncode == 0, done.stderr
    assert "on 24 records of 2 workloads" in done.stdout and (tmp_path / "prior.json").is_file()
    assert "held-out pairwise 0." in done.stdout or "held-out pairwise 1.0" in done.stdout
    done = _run("train", str(out.parent), "--restricted", "threads=0", "-o", str(tmp_path / "r"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "threads=N wants a positive count" in done.stderr and not (tmp_path / "r").exists()
    done = _run("card", str(out), "-o", str(tmp_path / "CARD.md"))
    assert done.returncode == 0 and "| softmax | 12 |" in (tmp_path / "CARD.md").read_text()


def test_export_for_training_leaves_out_the_held_out_workloads(tiny_db, tmp_path):
    out = tmp_path / "train.jsonl.gz"
    done = _run("export", "--db", str(tiny_db), "-o", str(out), "--training-only")
    assert done.returncode == 0, done.stderr
    assert "wrote 24 records" in done.stdout
    assert "(12 records of held-out workloads left out)" in done.stdout
    assert {r["workload"] for r in read_records([out])} == {
        workload(s).name for s in SPECS if not s.startswith("dense")
    }


def test_bad_input_is_one_error_line_exit_2(tmp_path):
    done = _run("export", "--db", str(tmp_path / "none.db"), "-o", str(tmp_path / "x.jsonl.gz"))
    assert done.returncode == 2
    assert done.stderr.startswith("error: no tuning database at") and done.stderr.count("\n") == 1
    with open_database(tmp_path / "empty.db"):
        pass
    done = _run("export", "--db", str(tmp_path / "empty.db"), "-o", str(tmp_path / "e.jsonl.gz"))
    assert done.returncode == 2 and "holds no records to export" in done.stderr
    assert done.stderr.count("\n") == 1 and not (tmp_path / "e.jsonl.gz").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    done = _run("train", str(empty))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "no dataset records" in done.stderr


def test_collect_refuses_a_bad_target_before_measuring(tmp_path):
    done = _run("collect", "--db", str(tmp_path / "d.db"), "--target", "avx9000")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "unknown isa 'avx9000'" in done.stderr and not (tmp_path / "d.db").exists()


def test_collect_refuses_an_only_that_matches_no_workload(tmp_path):
    done = _run("collect", "--db", str(tmp_path / "d.db"), "--only", "no-such-op:")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "matches none of the dataset's training workloads" in done.stderr
    assert not (tmp_path / "d.db").exists()


def test_collect_refuses_an_unknown_op_class_naming_the_known_ones(tmp_path):
    done = _run("collect", "--db", str(tmp_path / "d.db"), "--op-class", "gemv")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "'gemv' is not an op class" in done.stderr and "depthwise_conv2d" in done.stderr
    assert not (tmp_path / "d.db").exists()


def test_collect_measures_only_the_chosen_op_class(tmp_path):
    db = tmp_path / "d.db"
    args = ("--db", str(db), "--op-class", "softmax", "--workloads", "1")
    done = _run("collect", *args, "--trials-per-workload", "1", "--target", "avx2 threads=1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("[1/") and "softmax:" in done.stdout.splitlines()[0]
    with open_database(db, readonly=True) as opened:
        names = {workload(r.workload).name for r in opened.records()}
    assert len(names) == 1 and all(n.startswith("softmax:") for n in names)
