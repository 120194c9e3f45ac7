"""Hand-written C kernels following the kernel ABI, one per way a candidate can behave."""

import numpy as np

from tensortune.build.kernel import ArgSpec

N = 4096
ARGS = (
    ArgSpec("A", (N,), "float32"),
    ArgSpec("B", (N,), "float32"),
    ArgSpec("C", (N,), "float32", "output"),
)


def vector_kernel(name: str, body: str, prelude: str = "", status: str = "0") -> str:
    """``name(A, B, C)`` running `body` once per element i, plus its packed entry point."""
    return f"""
#include <stdio.h>
#include <stdlib.h>
{prelude}
void {name}(const float* restrict A, const float* restrict B, float* restrict C) {{
    for (int i = 0; i < {N}; ++i) {{ {body} }}
}}
int {name}_packed(void** args) {{
    {name}((const float*)args[0], (const float*)args[1], (float*)args[2]);
    return {status};
}}
"""


GOOD = vector_kernel("vadd", "C[i] = A[i] + B[i];")
SEGFAULT = vector_kernel("segv", "C[i] = A[i] + B[i]; *(volatile float*)0 = C[i];")
HANG = vector_kernel("hang", "C[i] = A[i] + B[i]; for (volatile int spin = 1; spin;) {}")
WRONG = vector_kernel("wrong", "C[i] = A[i] - B[i];")
NO_COMPILE = vector_kernel("broken", "C[i] = A[i] + ;")
ABORT = vector_kernel("boom", "C[i] = A[i] + B[i]; if (i == 7) abort();")
CHATTY = vector_kernel("chatty", 'C[i] = A[i] + B[i]; if (i == 0) printf("hello\\n");')
FAILING = vector_kernel("failing", "C[i] = A[i] + B[i];", status="3")
SLOW = vector_kernel(
    "slow",
    "C[i] = A[i] + B[i]; if (i == 0) nanosleep(&(struct timespec){0, 2000000}, NULL);",
    prelude="#include <time.h>",
)


def inputs() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    return tuple(rng.standard_normal(N, dtype=np.float32) for _ in range(2))


PARTIAL = vector_kernel("partial", "if (i % 2 == 0) C[i] = A[i] + B[i];")
