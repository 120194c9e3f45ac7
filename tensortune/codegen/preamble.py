"""C helpers emitted ahead of a kernel: vector types and the operations C lacks on them.

Only what a kernel uses is emitted. Vector types are GCC/Clang vector extensions of any power-of-two
width, so the same C builds for every architecture; an intrinsic is only ever used under the macro
of the ISA that has it (``__AVX512F__``, ``__AVX__``, ``__SSE4_1__``, ``__ARM_NEON``), with the
portable code in the ``#else``. On x86 the broadcast of a scalar from memory goes through an
intrinsic so that it compiles to ``vbroadcastss mem`` rather than a register shuffle competing with
FMAs for a port; on NEON ``vmaxq_f32``/``vminq_f32`` already propagate NaN as NumPy does.

Facts about element types (C type, lane width, mask type) come from `tensortune.dtype`.
"""

from __future__ import annotations

from ..dtype import ALL, TENSOR_DTYPES
from ..dtype import dtype as row_of  # `dtype` names a dtype string below
from ..lower.masks import STRIDED_LOAD_STRIDES
from .intrinsics import (
    NATIVE_EXP_CLAMP,
    NATIVE_EXP_NONPOS_CLAMP,
    NATIVE_FLOOR,
    NATIVE_LDEXP,
    NATIVE_MIN_MAX,
    NATIVE_ROUND,
    native_helper,
)
from .scratch import SCRATCH
from .strided import load_strided, maskload_strided

# Views of the dtype table for the C printer (bool is one byte, as in NumPy and C99 _Bool).
C_TYPE = {name: row_of(name).c_type for name in TENSOR_DTYPES}
SHORT = {name: row_of(name).short for name in TENSOR_DTYPES}
MASK_OF = {name: row.mask for name, row in ALL.items()}


def floor_divmod(bits: int) -> str:
    """Python's (and NumPy's) floor division and modulo of `bits`-wide integers, which C's
    truncating ``/`` and ``%`` are not for negative operands."""
    t = f"int{bits}_t"
    return f"""\
static inline {t} tt_floordiv_i{bits}({t} a, {t} b) {{
  {t} q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}}
static inline {t} tt_floormod_i{bits}({t} a, {t} b) {{
  {t} m = a % b;
  return (m != 0 && ((m < 0) != (b < 0))) ? m + b : m;
}}"""


HEADER = (
    """\
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#elif defined(__ARM_NEON)
#include <arm_neon.h>
#endif

"""
    + SCRATCH
    + floor_divmod(32)
    + """
/* NaN in either operand gives NaN, as np.maximum / np.minimum: a NaN b is tested first (a
   predictable branch), then a < b ? b : a is one vmaxss, which keeps a NaN a */
#define TT_MAX(a, b) ((b) != (b) ? (b) : (a) < (b) ? (b) : (a))
#define TT_MIN(a, b) ((b) != (b) ? (b) : (b) < (a) ? (b) : (a))
"""
)


def vtype(name: str, lanes: int) -> str:
    """The C name of a vector of `lanes` elements of dtype `name` (``f32x16``)."""
    return f"{row_of(name).short}x{lanes}"


def mask_type(name: str, lanes: int) -> str:
    """The integer vector type a comparison of two `vtype(name, lanes)` vectors gives."""
    return vtype(row_of(name).mask, lanes)


def vector_helpers(dtype: str, lanes: int, funcs: set[str]) -> str:
    """Typedefs and helpers for one (dtype, lanes) vector type."""
    row = row_of(dtype)
    t, s = vtype(dtype, lanes), row.c_type
    m = mask_type(dtype, lanes)
    nbytes = row.bits // 8 * lanes
    out = [f"typedef {s} {t} __attribute__((vector_size({nbytes}), aligned({nbytes})));"]
    if m != t:
        ms = row_of(row.mask).c_type
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
    out.append(_min_max(t, dtype, lanes))
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
    if "mask" in funcs:
        out.append(masked_access(dtype, lanes))
    for stride in STRIDED_LOAD_STRIDES:
        if f"load{stride}" in funcs:
            out.append(load_strided(t, m, s, lanes, stride))
        if f"maskload{stride}" in funcs:  # after tt_maskload_, which it calls
            out.append(maskload_strided(t, m, s, lanes, stride))
    strided = {f"{kind}{k}" for kind in ("load", "maskload") for k in STRIDED_LOAD_STRIDES}
    funcs = funcs - {"floordiv", "mod", "mask", *strided}
    if dtype == "float32" and funcs & set(VECTOR_MATH):
        out.append(vector_math(t, m, lanes, funcs))
    for f in sorted(funcs - set(VECTOR_MATH) if dtype == "float32" else funcs):
        out.append(
            f"static inline {t} tt_{f}_{t}({t} v) {{ {t} r; "
            f"for (int l = 0; l < {lanes}; ++l) r[l] = {scalar_call(f, dtype, 'v[l]')}; "
            "return r; }"
        )
    return "\n".join(out)


def _min_max(t: str, dtype: str, lanes: int) -> str:
    """``tt_max_`` and ``tt_min_`` for one vector type; on floats NaN in either operand gives
    NaN, as np.maximum / np.minimum."""
    out = []
    for op, cmp in (("max", ">"), ("min", "<")):
        cond = f"(a {cmp} b) | (a != a)" if row_of(dtype).is_float else f"a {cmp} b"
        native = {
            k: tuple((macro, f.format(op=op)) for macro, f in pairs)
            for k, pairs in NATIVE_MIN_MAX.items()
        }
        portable = f"{{ return tt_select_{t}({cond}, a, b); }}"
        out.append(native_helper(t, lanes, f"tt_{op}_{t}({t} a, {t} b)", portable, native))
    return "\n".join(out)


# Masked loads and stores of 4- and 8-byte lanes: (AVX-512 suffix, mask test suffix, AVX2 suffix)
_MASKED = {"float32": ("ps", "epi32", "ps"), "float64": ("pd", "epi64", "pd"),
           "int32": ("epi32", "epi32", "epi32")}  # fmt: skip
_X86_REG = {64: ("_mm512", "__m512"), 32: ("_mm256", "__m256"), 16: ("_mm", "__m128")}


def _reg(nbytes: int, suffix: str) -> str:
    """The intrinsic register type of ``nbytes`` holding ``suffix`` lanes (``__m256d``)."""
    base = _X86_REG[nbytes][1]
    return base + {"ps": "", "pd": "d"}.get(suffix, "i")


def masked_access(dtype: str, lanes: int) -> str:
    """``tt_maskload_`` and ``tt_maskstore_`` for one vector type: lanes whose mask is -1 are
    loaded (the others are 0) or stored, and the memory of the other lanes is never touched:
    AVX-512 masked moves and AVX2 ``vmaskmov`` suppress faults on masked lanes, so a tail that
    ends at an unmapped page is safe. Wider vectors go register by register; elsewhere (NEON,
    two-lane vectors) lane by lane."""
    row = row_of(dtype)
    t, m, s = vtype(dtype, lanes), mask_type(dtype, lanes), row.c_type
    nbytes = row.bits // 8 * lanes
    portable_load = (
        f"{{ {t} r = ({t}){{}}; for (int l = 0; l < {lanes}; ++l) if (m[l]) r[l] = p[l]; "
        "return r; }"
    )
    portable_store = f"{{ for (int l = 0; l < {lanes}; ++l) if (m[l]) p[l] = v[l]; }}"
    load_sig = f"static inline {t} tt_maskload_{t}(const {s}* p, {m} m)"
    store_sig = f"static inline void tt_maskstore_{t}({s}* p, {m} m, {t} v)"
    if dtype not in _MASKED or nbytes < 16:
        return f"{load_sig} {portable_load}\n{store_sig} {portable_store}"
    wide, test, narrow = _MASKED[dtype]
    branches: list[str] = []
    avx512 = "defined(__AVX512F__) && defined(__AVX512VL__)"
    for macro, chunk in ((avx512, 64), ("defined(__AVX2__)", 32)):
        chunk = min(chunk, nbytes)
        pre, n, per = _X86_REG[chunk][0], nbytes // chunk, chunk * 8 // row.bits
        vr, mr = _reg(chunk, wide), _reg(chunk, "epi")
        if n == 1:
            mc, vc, at = f"({mr})m", f"({vr})v", "p"
        else:
            mc, vc, at = f"((const {mr}*)&m)[c]", f"((const {vr}*)&v)[c]", f"p + {per} * c"
        if macro == avx512:
            k = f"{pre}_test_{test}_mask({mc}, {mc})"
            zero = f"{pre}_setzero_{'si' + str(chunk * 8) if wide == 'epi32' else wide}()"
            load = f"{pre}_mask_loadu_{wide}({zero}, {k}, {at})"
            store = f"{pre}_mask_storeu_{wide}({at}, {k}, {vc})"
        else:
            cast = "(const int*)" if narrow == "epi32" else ""
            load = f"{pre}_maskload_{narrow}({cast}{at}, {mc})"
            store = f"{pre}_maskstore_{narrow}({'(int*)' if cast else ''}{at}, {mc}, {vc})"
        if n == 1:
            body_load, body_store = f"{{ return ({t}){load}; }}", f"{{ {store}; }}"
        else:
            loop = f"for (int c = 0; c < {n}; ++c)"
            body_load = f"{{ {t} r; {loop} (({vr}*)&r)[c] = {load}; return r; }}"
            body_store = f"{{ {loop} {store}; }}"
        branches.append(
            f"#{'if' if not branches else 'elif'} {macro}\n"
            f"{load_sig} {body_load}\n{store_sig} {body_store}"
        )
    return (
        "\n".join(branches)
        + f"\n#else\n{load_sig} {portable_load}\n{store_sig} {portable_store}\n#endif"
    )


# float32 vector math without libm calls: exp by range reduction to [-ln2/2, ln2/2] and a degree-6
# minimax polynomial in Horner form (Juffa's expf, as MLAS uses it; <= 1 ulp); exp_nonpos the same
# for arguments known to be <= 0 (softmax's x - max x), cheaper at both ends of the range; tanh
# and sigmoid through exp; erf by Abramowitz-Stegun 7.1.26 (absolute error < 1.5e-7); sqrt and
# abs are exact. NaN and infinities give what libm gives.
VECTOR_MATH = ("exp", "exp_nonpos", "tanh", "sigmoid", "erf", "sqrt", "rsqrt", "abs")

# e^r for |r| <= ln2/2 from the reduced argument r, as C statements that leave it in y
_EXP_POLY = """\
  {t} r = fn * -6.93145752e-1f + c;
  r = fn * -1.42860677e-6f + r;
  {t} y = 1.37805939e-3f * r + 8.37312452e-3f;
  y = y * r + 4.16695364e-2f;
  y = y * r + 1.66664720e-1f;
  y = y * r + 4.99999851e-1f;
  y = y * r + 1.0f;
  y = y * r + 1.0f;"""


def vector_math(t: str, m: str, lanes: int, funcs: set[str]) -> str:
    need = set(funcs)
    if need & {"tanh", "sigmoid", "erf"}:
        need.add("exp")
    code = [
        f"static inline {t} tt_abs_{t}({t} x) "
        f"{{ return ({t})(({m})x & (({m}){{}} + 0x7fffffff)); }}"
    ]
    if "exp" in need:
        floor = (
            f"{{ {m} n = __builtin_convertvector(x, {m}); "
            f"n = n + ({m})(__builtin_convertvector(n, {t}) > x); "
            f"return __builtin_convertvector(n, {t}); }}"
        )
        code.append(native_helper(t, lanes, f"tt_floor_{t}({t} x)", floor, NATIVE_FLOOR))
        # y * 2^n for an integral n in [-160, 129]: 2^h 2^(n-h) are two normal floats, so the
        # product rounds once, to 0, a denormal or inf exactly where y * 2^n does
        ldexp = (
            f"{{ {m} k = __builtin_convertvector(n, {m}), h = k >> 1; "
            f"return y * ({t})((h + 127) << 23) * ({t})((k - h + 127) << 23); }}"
        )
        code.append(native_helper(t, lanes, f"tt_ldexp_{t}({t} y, {t} n)", ldexp, NATIVE_LDEXP))
        # NaN falls through the comparisons, so a NaN argument stays NaN to the end (through r)
        clamp = (
            f"{{ return tt_select_{t}(x < -110.0f, tt_splat_{t}(-110.0f), "
            f"tt_select_{t}(x > 89.0f, tt_splat_{t}(89.0f), x)); }}"
        )
        code.append(native_helper(t, lanes, f"tt_exp_clamp_{t}({t} x)", clamp, NATIVE_EXP_CLAMP))
        code.append(f"""static inline {t} tt_exp_{t}({t} x) {{
  /* exp(c) = 2^n e^r with c clamped to [-110, 89], a range where exp(c) rounds to 0 (exp(-inf) = 0)
     or overflows to inf (exp(inf) = inf) like exp(x); a NaN c makes r, hence the result, NaN */
  {t} c = tt_exp_clamp_{t}(x);
  {t} fn = tt_floor_{t}(c * 1.44269504088896341f + 0.5f);
{_EXP_POLY.format(t=t)}
  return tt_ldexp_{t}(y, fn);
}}""")
    if "exp_nonpos" in need:
        # for x <= 0 the truncation of x - 0.5 toward zero rounds x to an integer n, |x - n| <= 1/2
        rint = f"{{ return __builtin_convertvector(__builtin_convertvector(x - 0.5f, {m}), {t}); }}"
        code.append(native_helper(t, lanes, f"tt_round_nonpos_{t}({t} x)", rint, NATIVE_ROUND))
        clamp = f"{{ return tt_select_{t}(x < -88.0f, tt_splat_{t}(-88.0f), x); }}"
        code.append(
            native_helper(
                t, lanes, f"tt_exp_nonpos_clamp_{t}({t} x)", clamp, NATIVE_EXP_NONPOS_CLAMP
            )
        )
        code.append(f"""static inline {t} tt_exp_nonpos_{t}({t} x) {{
  /* exp(x) for x <= 0 (MLAS's softmax exp): c = max(x, -88) = n ln2 + r, n = round(c / ln2) in
     [-127, 0], 2^n the float of bits (n + 127) << 23, one multiply. Below -87.68 n is -127, 2^n
     is +0.0: exp(-inf) = 0, and the denormals exp(x) < 8.4e-39 there flush to 0 (above, y 2^n
     rounds once, denormal or not); a NaN x makes r NaN. Positive x is out of contract */
  {t} c = tt_exp_nonpos_clamp_{t}(x);
  {t} fn = tt_round_nonpos_{t}(c * 1.44269504088896341f);
{_EXP_POLY.format(t=t)}
  return y * ({t})((__builtin_convertvector(fn, {m}) + 127) << 23);
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
        "exp_nonpos": f"exp{f}({x})",  # the vector helper's contract (x <= 0) only buys speed
        "log": f"log{f}({x})",
        "tanh": f"tanh{f}({x})",
        "erf": f"erf{f}({x})",
        "sqrt": f"sqrt{f}({x})",
        "rsqrt": f"({one} / sqrt{f}({x}))",
        "sigmoid": f"({one} / ({one} + exp{f}(-({x}))))",
        "abs": f"fabs{f}({x})" if row_of(dtype).is_float else f"abs({x})",
        "neg": f"(-({x}))",
        "not": f"(!({x}))",
    }
    return table[func]
