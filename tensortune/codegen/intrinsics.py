"""Which ISA intrinsic stands in for a portable C vector helper: per vector width, the first
intrinsic whose ISA macro the compiler defines, the portable body in the ``#else``."""

from __future__ import annotations

# Intrinsics for float32 vectors of 16, 8 and 4 lanes: for each width, (macro, intrinsic) pairs,
# each under the macro of the ISA it needs.
Native = dict[int, tuple[tuple[str, str], ...]]
NEON = "__ARM_NEON"
#: Each x86 vector width's lanes, ISA macro and intrinsic prefix.
X86_WIDTHS = ((16, "__AVX512F__", "_mm512"), (8, "__AVX__", "_mm256"), (4, "__SSE4_1__", "_mm"))


def _every_x86_width(form: str, neon: str) -> Native:
    """One intrinsic expression at every x86 width (``{p}`` stands for the width's prefix), and
    NEON's at 4 lanes: for operations whose instructions differ only in their prefix."""
    native: Native = {lanes: ((macro, form.format(p=p)),) for lanes, macro, p in X86_WIDTHS}
    native[4] += ((NEON, neon),)
    return native


# vmaxps/vminps return their second operand when either is NaN: the lanes where the first one is
# NaN are put back, three instructions as cheap as a compare and select. NEON's fmax/fmin return
# NaN when either operand is NaN, as NumPy does.
NATIVE_MIN_MAX: Native = {
    16: (
        (
            "__AVX512F__",
            "_mm512_mask_mov_ps(_mm512_{op}_ps(a, b), _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), a)",
        ),
    ),
    8: (
        (
            "__AVX__",
            "_mm256_blendv_ps(_mm256_{op}_ps(a, b), a, _mm256_cmp_ps(a, a, _CMP_UNORD_Q))",
        ),
    ),
    4: (
        ("__SSE4_1__", "_mm_blendv_ps(_mm_{op}_ps(a, b), a, _mm_cmpunord_ps(a, a))"),
        (NEON, "v{op}q_f32((float32x4_t)a, (float32x4_t)b)"),
    ),
}
NATIVE_FLOOR: Native = {
    16: (("__AVX512F__", "_mm512_roundscale_ps(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)"),),
    8: (("__AVX__", "_mm256_floor_ps(x)"),),
    4: (("__SSE4_1__", "_mm_floor_ps(x)"), (NEON, "vrndmq_f32((float32x4_t)x)")),
}
NATIVE_LDEXP: Native = {16: (("__AVX512F__", "_mm512_scalef_ps(y, n)"),)}
# exp's argument clamped to [-110, 89] with NaN kept: vmaxps/vminps return their second operand
# when either is NaN, NEON's fmax/fmin return NaN
NATIVE_EXP_CLAMP = _every_x86_width(
    "{p}_min_ps({p}_set1_ps(89.0f), {p}_max_ps({p}_set1_ps(-110.0f), x))",
    neon="vminq_f32(vmaxq_f32((float32x4_t)x, vdupq_n_f32(-110.0f)), vdupq_n_f32(89.0f))",
)
# exp_nonpos's argument raised to -88 (where its 2^n is 2^-127, whose bits (n + 127) << 23 are
# +0.0), NaN kept as above
NATIVE_EXP_NONPOS_CLAMP = _every_x86_width(
    "{p}_max_ps({p}_set1_ps(-88.0f), x)", neon="vmaxq_f32((float32x4_t)x, vdupq_n_f32(-88.0f))"
)
# to the nearest integer (ties to even): instructions the optimizer cannot fold away, as it may
# fold the magic-number rounding (x + 1.5 * 2^23) - 1.5 * 2^23 to x under -fassociative-math
NATIVE_ROUND: Native = {
    16: (
        (
            "__AVX512F__",
            "_mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)",
        ),
    ),
    8: (("__AVX__", "_mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)"),),
    4: (
        ("__SSE4_1__", "_mm_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)"),
        (NEON, "vrndnq_f32((float32x4_t)x)"),
    ),
}


def native_helper(t: str, lanes: int, signature: str, portable: str, native: Native) -> str:
    """``static inline {t} {signature}`` with the first intrinsic of ``native`` for this width
    whose ISA the compiler targets, else with the ``portable`` body."""
    code = f"static inline {t} {signature} {portable}"
    if t.startswith("f32") and lanes in native:
        branches = [
            f"#{'if' if i == 0 else 'elif'} defined({macro})\n"
            f"static inline {t} {signature} {{ return ({t}){intrinsic}; }}"
            for i, (macro, intrinsic) in enumerate(native[lanes])
        ]
        code = "\n".join(branches) + f"\n#else\n{code}\n#endif"
    return code
