"""C helpers emitted ahead of a kernel: vector types and the operations C lacks on them.

Only what a kernel uses is emitted. Vector types are GCC/Clang vector extensions of any power-of-two
width; on x86 the broadcast of a scalar from memory goes through an intrinsic so that it compiles
to ``vbroadcastss mem`` rather than a register shuffle competing with FMAs for a port.
"""

from __future__ import annotations

C_TYPE = {"float32": "float", "float64": "double", "int32": "int32_t", "bool": "int32_t"}
SHORT = {"float32": "f32", "float64": "f64", "int32": "i32", "bool": "i32"}
MASK_OF = {"float32": "int32", "float64": "int64", "int32": "int32", "bool": "int32"}
_BITS = {"float32": 32, "float64": 64, "int32": 32, "int64": 64, "bool": 32}
_SCALAR = {**C_TYPE, "int64": "int64_t"}
_SHORT = {**SHORT, "int64": "i64"}

HEADER = """\
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

static inline void* tt_alloc(size_t bytes) {
  return aligned_alloc(64, (bytes + 63) / 64 * 64);
}
static inline int32_t tt_floordiv_i32(int32_t a, int32_t b) {
  int32_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int32_t tt_floormod_i32(int32_t a, int32_t b) {
  int32_t m = a % b;
  return (m != 0 && ((m < 0) != (b < 0))) ? m + b : m;
}
#define TT_MAX(a, b) ((a) > (b) ? (a) : (b))
#define TT_MIN(a, b) ((a) < (b) ? (a) : (b))
"""


def vtype(dtype: str, lanes: int) -> str:
    return f"{_SHORT[dtype]}x{lanes}"


def mask_type(dtype: str, lanes: int) -> str:
    return vtype(MASK_OF[dtype], lanes)


def vector_helpers(dtype: str, lanes: int, funcs: set[str]) -> str:
    """Typedefs and helpers for one (dtype, lanes) vector type."""
    t, s = vtype(dtype, lanes), _SCALAR[dtype]
    m = mask_type(dtype, lanes)
    nbytes = _BITS[dtype] // 8 * lanes
    out = [f"typedef {s} {t} __attribute__((vector_size({nbytes}), aligned({nbytes})));"]
    if m != t:
        ms = _SCALAR[MASK_OF[dtype]]
        out.append(f"typedef {ms} {m} __attribute__((vector_size({nbytes}), aligned({nbytes})));")
    out.append(
        f"static inline {t} tt_load_{t}(const {s}* p) {{ {t} v; memcpy(&v, p, sizeof v); "
        "return v; }"
    )
    out.append(f"static inline void tt_store_{t}({s}* p, {t} v) {{ memcpy(p, &v, sizeof v); }}")
    out.append(f"static inline {t} tt_splat_{t}({s} x) {{ return ({t}){{}} + x; }}")
    bcast = f"static inline {t} tt_bcast_{t}(const {s}* p) {{ return ({t}){{}} + *p; }}"
    if dtype == "float32" and lanes == 16:
        bcast = (
            "#if defined(__AVX512F__)\n"
            f"static inline {t} tt_bcast_{t}(const float* p) {{ return ({t})_mm512_set1_ps(*p); }}\n"
            f"#else\n{bcast}\n#endif"
        )
    elif dtype == "float32" and lanes == 8:
        bcast = (
            "#if defined(__AVX__)\n"
            f"static inline {t} tt_bcast_{t}(const float* p) {{ return ({t})_mm256_broadcast_ss(p); }}\n"
            f"#else\n{bcast}\n#endif"
        )
    out.append(bcast)
    out.append(
        f"static inline {t} tt_select_{t}({m} c, {t} a, {t} b) {{ "
        f"return ({t})((({m})a & c) | (({m})b & ~c)); }}"
        if dtype != "int32"
        else f"static inline {t} tt_select_{t}({m} c, {t} a, {t} b) {{ return (a & c) | (b & ~c); }}"
    )
    out.append(f"static inline {t} tt_max_{t}({t} a, {t} b) {{ return tt_select_{t}(a > b, a, b); }}")
    out.append(f"static inline {t} tt_min_{t}({t} a, {t} b) {{ return tt_select_{t}(a < b, a, b); }}")
    for red, op in (("sum", "r + v[l]"), ("max", "TT_MAX(r, v[l])"), ("min", "TT_MIN(r, v[l])")):
        out.append(
            f"static inline {s} tt_h{red}_{t}({t} v) {{ {s} r = v[0]; "
            f"for (int l = 1; l < {lanes}; ++l) r = {op}; return r; }}"
        )
    for f in sorted(funcs):
        out.append(
            f"static inline {t} tt_{f}_{t}({t} v) {{ {t} r; "
            f"for (int l = 0; l < {lanes}; ++l) r[l] = {scalar_call(f, dtype, 'v[l]')}; return r; }}"
        )
    return "\n".join(out)


def scalar_call(func: str, dtype: str, x: str) -> str:
    """C for a math function on a scalar of ``dtype``."""
    f = "f" if dtype == "float32" else ""
    one = "1.0f" if dtype == "float32" else "1.0"
    table = {
        "exp": f"exp{f}({x})",
        "log": f"log{f}({x})",
        "tanh": f"tanh{f}({x})",
        "erf": f"erf{f}({x})",
        "sqrt": f"sqrt{f}({x})",
        "rsqrt": f"({one} / sqrt{f}({x}))",
        "sigmoid": f"({one} / ({one} + exp{f}(-({x}))))",
        "abs": f"fabs{f}({x})" if dtype in ("float32", "float64") else f"abs({x})",
        "neg": f"(-({x}))",
        "not": f"(!({x}))",
    }
    return table[func]
