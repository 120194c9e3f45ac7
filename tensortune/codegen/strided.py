"""C helpers that load every ``stride``-th element (2-4) into a vector without a gather: a few
contiguous loads and a chain of two-source shuffles, plus a masked form for a row's ragged end that
never reads past its last active lane's element. Emitted by `preamble.vector_helpers`.

Eight 32-bit lanes at stride 2 (AVX2) deinterleave in two fixed shuffles, one within 128-bit
halves and one of 64-bit pairs (``vshufps`` + ``vpermpd``): gcc spells the one eight-lane shuffle
as two ``vpermd`` and a blend, whose two index vectors hold 2 of the 16 ymm registers (a 5x5
stride-2 depthwise tile then spilled its accumulators)."""

from __future__ import annotations


def _strided_plan(stride: int, lanes: int) -> tuple[list[int], list[int]]:
    """Where the contiguous loads of a stride-``stride`` read start, and which load each lane
    takes its element from (the first holding it). The last load ends at the last lane's
    element (``span - lanes``), so nothing past it is read."""
    span = stride * (lanes - 1) + 1
    starts = [min(i * lanes, span - lanes) for i in range(-(-span // lanes))]
    source = [next(i for i, o in enumerate(starts) if o <= stride * k < o + lanes)
              for k in range(lanes)]  # fmt: skip
    return starts, source


def _picks(stride: int, lanes: int, i: int) -> str:
    """The shuffle indices that bring load ``i``'s lanes in: after ``v0`` and ``v1`` (i == 1),
    or into the result so far (i > 1, the other lanes keep their place)."""
    starts, source = _strided_plan(stride, lanes)
    if i == 1:
        cells = [stride * k if src == 0 else lanes + stride * k - starts[1] if src == 1 else 0
                 for k, src in enumerate(source)]  # fmt: skip
    else:
        cells = [lanes + stride * k - starts[i] if src == i else k
                 for k, src in enumerate(source)]  # fmt: skip
    return ", ".join(map(str, cells))


def _octets(t: str) -> bool:
    """Is ``t`` a vector of eight 32-bit lanes (``f32x8``, ``i32x8``: AVX2's 256 bits)?"""
    return t.endswith("32x8")


def _deinterleave2(t: str, m: str, clang: bool) -> str:
    """``r`` from ``v0`` (elements 0-7) and ``v1`` (7-14) of eight 32-bit lanes: the even
    elements of each 128-bit half side by side (one ``vshufps``: ``v0``'s 0, 2 | 4, 6 and
    ``v1``'s 1, 3 | 5, 7, i.e. elements 8, 10 | 12, 14), then the middle 64-bit pairs swapped
    (one ``vpermpd``); neither needs an index register."""
    pair = "typedef double tt_d4 __attribute__((vector_size(32)));\n"
    if clang:
        return (
            f"  {pair}  r = __builtin_shufflevector(v0, v1, 0, 2, 9, 11, 4, 6, 13, 15);\n"
            f"  r = ({t})__builtin_shufflevector((tt_d4)r, (tt_d4)r, 0, 2, 1, 3);\n"
        )
    return (
        f"  {pair}  typedef long long tt_l4 __attribute__((vector_size(32)));\n"
        f"  r = __builtin_shuffle(v0, v1, ({m}){{0, 2, 9, 11, 4, 6, 13, 15}});\n"
        f"  r = ({t})__builtin_shuffle((tt_d4)r, (tt_l4){{0, 2, 1, 3}});\n"
    )


def _gather_shuffles(t: str, m: str, lanes: int, stride: int, clang: bool) -> str:
    """``r`` from loads ``v0, v1, ...`` by a chain of two-source shuffles (`_picks`)."""
    if stride == 2 and _octets(t):
        return _deinterleave2(t, m, clang)
    lines = []
    for i in range(1, len(_strided_plan(stride, lanes)[0])):
        a, picks = "v0" if i == 1 else "r", _picks(stride, lanes, i)
        call = (
            f"__builtin_shufflevector({a}, v{i}, {picks})"
            if clang
            else f"__builtin_shuffle({a}, v{i}, ({m}){{{picks}}})"
        )
        lines.append(f"  r = {call};\n")
    return "".join(lines)


def load_strided(t: str, m: str, s: str, lanes: int, stride: int) -> str:
    """Lanes ``p[0], p[k], ..., p[k*(lanes-1)]`` (a stride-``k`` read, as in a strided window)
    from ``ceil(span / lanes)`` contiguous loads and two-source shuffles (``vpermt2ps`` on
    AVX-512; `_deinterleave2` on AVX2): stride 2 two loads, stride 4 four loads and three
    shuffles."""
    starts, _ = _strided_plan(stride, lanes)
    loads = ", ".join(f"v{i} = tt_load_{t}(p + {o})" for i, o in enumerate(starts))
    return (
        f"static inline {t} tt_load{stride}_{t}(const {s}* p) {{\n"
        f"  {t} {loads}, r;\n"
        f"#if defined(__clang__)\n{_gather_shuffles(t, m, lanes, stride, True)}"
        f"#else\n{_gather_shuffles(t, m, lanes, stride, False)}#endif\n"
        "  return r;\n"
        "}"
    )


def maskload_strided(t: str, m: str, s: str, lanes: int, stride: int) -> str:
    """``tt_load<k>_`` of the lanes whose mask is -1 (a masked vector tail; the others are
    0). Each contiguous load is masked to the elements from the first active lane's to the
    last one's: element ``e`` is loaded when the lanes at ``floor(e/k)`` and ``ceil(e/k)`` are
    both active, so memory past the last active lane's element is never touched."""
    starts, _ = _strided_plan(stride, lanes)
    body = {}
    for clang in (True, False):
        lines = []
        for i, o in enumerate(starts):
            masks = []
            for lane in ([(o + j) // stride for j in range(lanes)],
                         [-(-(o + j) // stride) for j in range(lanes)]):  # fmt: skip
                picks = ", ".join(map(str, lane))
                masks.append(
                    f"__builtin_shufflevector(m, m, {picks})"
                    if clang
                    else f"__builtin_shuffle(m, ({m}){{{picks}}})"
                )
            lines.append(f"  {t} v{i} = tt_maskload_{t}(p + {o}, {masks[0]} & {masks[1]});\n")
        shuffles = _gather_shuffles(t, m, lanes, stride, clang)
        body[clang] = "".join(lines) + f"  {t} r;\n" + shuffles
    return (
        f"static inline {t} tt_maskload{stride}_{t}(const {s}* p, {m} m) {{\n"
        f"#if defined(__clang__)\n{body[True]}#else\n{body[False]}#endif\n"
        "  return r;\n"
        "}"
    )
