"""C helpers emitted ahead of a kernel: vector types and the operations C lacks on them.

Only what a kernel uses is emitted. Vector types are GCC/Clang vector extensions of any power-of-two
width; on x86 the broadcast of a scalar from memory goes through an intrinsic so that it compiles
to ``vbroadcastss mem`` rather than a register shuffle competing with FMAs for a port.
"""

from __future__ import annotations

# bool is one byte, as in NumPy (and kernel arguments: C99 _Bool)
C_TYPE = {"float32": "float", "float64": "double", "int32": "int32_t", "bool": "_Bool"}
SHORT = {"float32": "f32", "float64": "f64", "int32": "i32", "bool": "i32"}
MASK_OF = {
    "float32": "int32", "float64": "int64", "int32": "int32", "bool": "int32", "int64": "int64"
}  # fmt: skip
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
            f"static inline {t} tt_bcast_{t}(const float* p) "
            f"{{ return ({t})_mm512_set1_ps(*p); }}\n"
            f"#else\n{bcast}\n#endif"
        )
    elif dtype == "float32" and lanes == 8:
        bcast = (
            "#if defined(__AVX__)\n"
            f"static inline {t} tt_bcast_{t}(const float* p) "
            f"{{ return ({t})_mm256_broadcast_ss(p); }}\n"
            f"#else\n{bcast}\n#endif"
        )
    out.append(bcast)
    out.append(
        f"static inline {t} tt_select_{t}({m} c, {t} a, {t} b) {{ "
        f"return ({t})((({m})a & c) | (({m})b & ~c)); }}"
        if dtype != "int32"
        else f"static inline {t} tt_select_{t}({m} c, {t} a, {t} b) "
        "{ return (a & c) | (b & ~c); }"
    )
    out.append(
        f"static inline {t} tt_max_{t}({t} a, {t} b) {{ return tt_select_{t}(a > b, a, b); }}"
    )
    out.append(
        f"static inline {t} tt_min_{t}({t} a, {t} b) {{ return tt_select_{t}(a < b, a, b); }}"
    )
    for red, op in (
        ("sum", "t[l] + t[l + w]"),
        ("max", "TT_MAX(t[l], t[l + w])"),
        ("min", "TT_MIN(t[l], t[l + w])"),
    ):
        # a tree of log2(lanes) steps, not a chain of lanes-1 dependent operations
        out.append(
            f"static inline {s} tt_h{red}_{t}({t} v) {{ {s} t[{lanes}]; memcpy(t, &v, sizeof t); "
            f"for (int w = {lanes // 2}; w > 0; w /= 2) for (int l = 0; l < w; ++l) "
            f"t[l] = {op}; return t[0]; }}"
        )
    # floor division and modulo (C's / and % truncate); a true comparison is -1 in every lane
    if "floordiv" in funcs:
        out.append(
            f"static inline {t} tt_floordiv_{t}({t} a, {t} b) {{ {t} q = a / b, r = a % b; "
            "return q + ((r != 0) & ((r ^ b) < 0)); }"
        )
    if "mod" in funcs:
        out.append(
            f"static inline {t} tt_mod_{t}({t} a, {t} b) {{ {t} r = a % b; "
            "return r + (((r != 0) & ((r ^ b) < 0)) & b); }"
        )
    if "load2" in funcs:
        out.append(_load2(t, m, s, lanes))
    funcs = funcs - {"floordiv", "mod", "load2"}
    if dtype == "float32" and funcs & set(VECTOR_MATH):
        out.append(vector_math(t, m, lanes, funcs))
    for f in sorted(funcs - set(VECTOR_MATH) if dtype == "float32" else funcs):
        out.append(
            f"static inline {t} tt_{f}_{t}({t} v) {{ {t} r; "
            f"for (int l = 0; l < {lanes}; ++l) r[l] = {scalar_call(f, dtype, 'v[l]')}; "
            "return r; }"
        )
    return "\n".join(out)


def _load2(t: str, m: str, s: str, lanes: int) -> str:
    """Lanes ``p[0], p[2], ..., p[2*(lanes-1)]`` (a stride-2 read, as in a stride-2 window) from
    two overlapping contiguous loads and one two-source shuffle (``vpermt2ps`` on AVX-512). The
    second load starts at ``p + lanes - 1`` so nothing past the last lane's element is read."""
    picks = ", ".join(str(2 * k if 2 * k < lanes else 2 * k + 1) for k in range(lanes))
    return (
        f"static inline {t} tt_load2_{t}(const {s}* p) {{\n"
        f"  {t} lo = tt_load_{t}(p), hi = tt_load_{t}(p + {lanes - 1});\n"
        "#if defined(__clang__)\n"
        f"  return __builtin_shufflevector(lo, hi, {picks});\n"
        "#else\n"
        f"  return __builtin_shuffle(lo, hi, ({m}){{{picks}}});\n"
        "#endif\n"
        "}"
    )


# float32 vector math without libm calls: exp by range reduction to [-ln2/2, ln2/2] and a degree-6
# polynomial (Cephes expf, ~1 ulp); tanh and sigmoid through exp; erf by Abramowitz-Stegun 7.1.26
# (absolute error < 1.5e-7); sqrt and abs are exact.
VECTOR_MATH = ("exp", "tanh", "sigmoid", "erf", "sqrt", "rsqrt", "abs")


def vector_math(t: str, m: str, lanes: int, funcs: set[str]) -> str:
    need = set(funcs)
    if need & {"tanh", "sigmoid", "erf"}:
        need.add("exp")
    code = [
        f"static inline {t} tt_abs_{t}({t} x) "
        f"{{ return ({t})(({m})x & (({m}){{}} + 0x7fffffff)); }}"
    ]
    if "exp" in need:
        code.append(f"""static inline {t} tt_exp_{t}({t} x) {{
  x = tt_min_{t}(tt_max_{t}(x, tt_splat_{t}(-87.3f)), tt_splat_{t}(88.3f));
  {t} fx = x * 1.44269504088896341f + 0.5f;
  {m} n = __builtin_convertvector(fx, {m});
  n = n + ({m})(__builtin_convertvector(n, {t}) > fx); /* floor for negatives */
  {t} fn = __builtin_convertvector(n, {t});
  x = x - fn * 0.693359375f + fn * 2.12194440e-4f;
  {t} y = 1.9875691500e-4f * x + 1.3981999507e-3f;
  y = y * x + 8.3334519073e-3f;
  y = y * x + 4.1665795894e-2f;
  y = y * x + 1.6666665459e-1f;
  y = y * x + 5.0000001201e-1f;
  y = y * x * x + x + 1.0f;
  return y * ({t})((n + 127) << 23);
}}""")
    if "tanh" in need:
        code.append(f"""static inline {t} tt_tanh_{t}({t} x) {{
  {t} a = tt_abs_{t}(x), x2 = x * x;
  {t} small = x + x * x2 * (-0.333333333f + x2 * (0.133333333f - 0.053968254f * x2));
  {t} e = tt_exp_{t}(tt_min_{t}(a, tt_splat_{t}(20.0f)) * 2.0f);
  {t} big = 1.0f - 2.0f / (e + 1.0f);
  big = tt_select_{t}(x < 0.0f, -big, big);
  return tt_select_{t}(a < 0.0625f, small, big);
}}""")
    if "sigmoid" in need:
        code.append(
            f"static inline {t} tt_sigmoid_{t}({t} x) {{ return 1.0f / (1.0f + tt_exp_{t}(-x)); }}"
        )
    if "erf" in need:
        code.append(f"""static inline {t} tt_erf_{t}({t} x) {{
  {t} a = tt_abs_{t}(x);
  {t} k = 1.0f / (1.0f + 0.3275911f * a);
  {t} p = ((((1.061405429f * k - 1.453152027f) * k + 1.421413741f) * k - 0.284496736f) * k
           + 0.254829592f) * k;
  {t} r = 1.0f - p * tt_exp_{t}(-a * a);
  {t} x2 = x * x; /* near 0 the series keeps the relative error small */
  {t} series = x * (1.128379167f + x2 * (-0.376126389f + x2 * (0.112837917f
               + x2 * (-0.026866170f + x2 * 0.005223977f))));
  return tt_select_{t}(a < 0.5f, series, tt_select_{t}(x < 0.0f, -r, r));
}}""")
    if need & {"sqrt", "rsqrt"}:
        code.append(
            f"static inline {t} tt_sqrt_{t}({t} x) {{ {t} r; "
            f"for (int l = 0; l < {lanes}; ++l) r[l] = sqrtf(x[l]); return r; }}"
        )
        code.append(f"static inline {t} tt_rsqrt_{t}({t} x) {{ return 1.0f / tt_sqrt_{t}(x); }}")
    return "\n".join(code)


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
