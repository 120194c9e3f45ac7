"""A model exported (``CompiledModel.export``) and run by a C program with no Python: its top
values beside Python's and ONNX Runtime's (issue 16).

    python benchmarks/export_c.py [--model resnet18] [--db PATH] [--threads 2] [--out DIR]

The model (``torch_models.py``, batch 1, seeded random weights) is compiled with ``--db``'s
best schedules (none: the defaults), exported into ``--out``, and a C program (below) is
built against the exported header and library. It reads the weights file and the input, runs
the model and prints the five largest outputs; Python prints the same from ``model(x)`` and
ONNX Runtime's output. Exit status 1 when the C program's outputs differ from Python's.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common
from models import ab_model

from tensortune.graph import compile_model, from_onnx
from tensortune.target import Target

DRIVER = r"""
#include <stdio.h>
#include "model.h"

static MODEL_INPUT0_TYPE x[MODEL_INPUT0_SIZE];
static MODEL_OUTPUT0_TYPE y[MODEL_OUTPUT0_SIZE];

int main(int argc, char** argv) {
  if (argc != 4) return 1;
  FILE* f = fopen(argv[2], "rb");
  if (!f || fread(x, sizeof x[0], MODEL_INPUT0_SIZE, f) != MODEL_INPUT0_SIZE) return 1;
  fclose(f);
  int status = model_init(argv[1]);
  if (status || (status = model_run((const void*[]){x}, (void*[]){y}))) return 2;
  f = fopen(argv[3], "wb");
  fwrite(y, sizeof y[0], MODEL_OUTPUT0_SIZE, f);
  fclose(f);
  int used[MODEL_OUTPUT0_SIZE] = {0};
  printf("C      top-5");
  for (int t = 0; t < 5 && t < MODEL_OUTPUT0_SIZE; ++t) {
    int best = -1;
    for (int i = 0; i < MODEL_OUTPUT0_SIZE; ++i)
      if (!used[i] && (best < 0 || y[i] > y[best])) best = i;
    used[best] = 1;
    printf(" %d:%.6f", best, y[best]);
  }
  printf("\n");
  model_free();
  return 0;
}
"""


def top5(label: str, y: np.ndarray) -> str:
    flat = y.reshape(-1)
    order = sorted(range(flat.size), key=lambda i: (-flat[i], i))[:5]
    return f"{label:6} top-5" + "".join(f" {i}:{flat[i]:.6f}" for i in order)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--db", default=None, help="tuning database (default: none, defaults)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--out", default=None, help="export directory (default: a temporary one)")
    args = parser.parse_args()
    common.limit_threads(args.threads)
    proto, feeds, _, want = ab_model(args.model, args.threads)
    target = Target.detect(num_threads=args.threads)
    model = compile_model(from_onnx(proto), db=args.db, target=target, name="model")
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        out = Path(args.out) if args.out else work / "out"
        files = model.export(out)
        (work / "main.c").write_text(DRIVER)
        program = work / "main"
        link = [f"-I{out}", f"-L{out}", "-lmodel", f"-Wl,-rpath,{out.resolve()}"]
        subprocess.run(["gcc", "-O2", "-o", program, work / "main.c", *link], check=True)
        (x,) = feeds.values()
        x.tofile(work / "x.bin")
        run = subprocess.run(
            [program, files["weights"], work / "x.bin", work / "y.bin"],
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin"},  # no Python anywhere near it
        )
        if run.returncode != 0:
            raise SystemExit(f"the C program failed ({run.returncode}): {run.stderr}")
        got = np.fromfile(work / "y.bin", np.float32).reshape(want.shape)
    python = model(x)
    print(f"{args.model}: exported to {out if args.out else 'a temporary directory'}")
    print(run.stdout.strip())
    print(top5("Python", python))
    print(top5("ORT", want))
    same = np.array_equal(got, python)
    error = float(np.abs(got - want).max() / np.abs(want).max())
    print(f"C outputs equal Python's: {same}; max error vs ONNX Runtime {error:.1e}")
    raise SystemExit(0 if same else 1)


if __name__ == "__main__":
    main()
