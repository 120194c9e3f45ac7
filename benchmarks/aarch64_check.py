"""Cross-compile the aarch64 (NEON) check set and run it under qemu: prints how many kernels
matched NumPy. Correctness only; timings under emulation mean nothing and none are taken.

The set (tests/backend/aarch64_kernels.py) is every operator of the library unscheduled, on plain
and NaN/inf inputs, and the GEMM, conv, depthwise, pool and norm design spaces' default and
sampled configs. Needs ``aarch64-linux-gnu-gcc`` and ``qemu-aarch64``
(``apt-get install gcc-aarch64-linux-gnu qemu-user``).

    python benchmarks/aarch64_check.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.backend import aarch64_kernels as kernels  # after the sys.path line


def main() -> int:
    started = time.perf_counter()
    target = kernels.neon_target()
    checks = kernels.op_checks(target) + kernels.space_checks(target)
    built = time.perf_counter()
    problems = kernels.run_checks(target, checks)
    for label, why in problems.items():
        if why is not None:
            print(f"MISMATCH {label}: {why}", file=sys.stderr)
    print(kernels.summary(checks, problems))
    print(
        f"(build {built - started:.1f} s with {target.cc}, "
        f"qemu {time.perf_counter() - built:.1f} s for all runs)"
    )
    return 0 if all(why is None for why in problems.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
