"""Every transferable feature's meaning and unit, in column order: the one place they are
documented. ``markdown()`` renders them as a reference page
(``python -m tensortune.cost_model.feature_docs > docs/cost_model_features.md``), and a test
checks that every column of ``TRANSFERABLE_FEATURES`` is here exactly once, in order.
"""

from __future__ import annotations

from dataclasses import dataclass

Row = tuple[str, str, str]
"""(name, meaning, unit)"""


@dataclass(frozen=True)
class Section:
    """One block of columns: its constant's name, what its rows share, and the rows."""

    title: str
    constant: str
    intro: str
    rows: tuple[Row, ...]


TERMS = """\
Every column a tensortune cost model sees, in column order. They come from the candidate's
**lowered loop nest** (the program as it will run, after scheduling and lowering), from the
flags it is compiled with, and from the **target**, never from knob values, so they mean the
same for every template and every CPU: this is `TRANSFERABLE_FEATURES`
(`tensortune.cost_model.features`), what the pretrained model is trained on and what
`transferable_features(design, configs)` returns.

Terms used below:

- **hottest store**: the store statement that performs the most arithmetic over the whole run
  (its copies made by unrolling count together as one *register block*);
- **register block**: the trailing unrolled and vectorized loops around the hottest store;
- **hot loop**: the innermost serial loop around the register block; **outer** loop: the one
  around it;
- **useful flops**: the workload's own operation count (`Workload.flops`), whatever the schedule;
- **cache line**: 64 bytes, what a cache moves however few of them an access uses;
- `log` is log2, and `log(0)` is written as 0.

A config that fails to schedule or lower gets NaN in every loop, access, build and delta column
(tree models treat it as missing); the target columns stay finite.

Within one tuning run the model also sees the knob encoding, appended after these columns
(`LoopNestFeatures.names`); knob columns mean nothing to another template and are never part
of `TRANSFERABLE_FEATURES`.
"""

LOOP = Section(
    "Loop features",
    "LOOP_FEATURES",
    "",
    (
        (
            "log_work_ratio",
            "arithmetic the nest performs (all stores) over the workload's useful flops: redundant "
            "work from padding, recomputation or guards",
            "log2 ratio",
        ),
        (
            "log_exec",
            "executions of the hottest store, one per vector (lanes counted once)",
            "log2 count",
        ),
        ("vector_lanes", "lanes of the block's vectorized loop (1 when scalar)", "elements"),
        ("log_block_size", "scalar iterations in the register block (all copies)", "log2 count"),
        (
            "accumulator_vectors",
            "register-scope vectors the block keeps live (the register tile)",
            "vectors",
        ),
        ("fma_per_load", "vector operations in the block per distinct non-register load", "ratio"),
        ("vector_loads", "distinct contiguous (stride 1 or 2) vector loads per block", "count"),
        ("broadcasts", "distinct loads per block that do not move with the vector lane", "count"),
        ("gathers", "loads that move with the lane at a stride other than 1 or 2", "count"),
        ("guards_in_block", "guards (if statements) between the hot loop and the store", "count"),
        ("guards_total", "guards around the hottest store at any depth", "count"),
        (
            "log_hot_stride_max",
            "largest distance between consecutive hot-loop iterations over the store's accesses",
            "log2 bytes",
        ),
        ("log_hot_stride_min", "smallest such distance", "log2 bytes"),
        ("hot_loop_extent", "trips of the hot loop (1 when there is none)", "count"),
        (
            "log_l1_traffic_per_flop",
            "bytes refetched from L2 into L1 per useful flop (a loop level is loaded once per "
            "trip of the loops around the outermost level whose working set, in cache lines, "
            "fits in L1)",
            "log2 bytes/flop",
        ),
        ("log_l2_traffic_per_flop", "the same for memory into L2", "log2 bytes/flop"),
        ("log_outer_trips", "trips of all loops around the hot loop", "log2 count"),
        ("log_parallel_extent", "extent of the parallel loop (0 when serial)", "log2 count"),
        (
            "parallel_imbalance",
            "`ceil(extent / threads) * threads / extent` of the parallel loop; the thread count "
            "when serial",
            "ratio (1 = balanced)",
        ),
        ("loop_depth", "loops around the hottest store", "count"),
        ("n_stores", "store statements in the kernel", "count"),
        (
            "log_other_exec_ratio",
            "executions of every other store over the hottest store's (-30 when it is the only "
            "store)",
            "log2 ratio",
        ),
        (
            "log_temp_bytes",
            "heap temporaries (e.g. a packed operand or a materialised pad)",
            "log2 bytes",
        ),
        (
            "memory_stores",
            "distinct stores to memory per register block, one per vector (0 when the block "
            "accumulates in registers)",
            "count",
        ),
        (
            "log_speedup",
            "parallel speedup of the parallel loop, `extent / ceil(extent / threads)` (0 when "
            "serial)",
            "log2 ratio",
        ),
        (
            "log_vector_ops_per_flop",
            "arithmetic operations of every store, one per vector, per useful flop and divided by "
            "the parallel speedup: the compute time in units of the workload's work",
            "log2 ops/flop",
        ),
        (
            "log_memory_ops_per_flop",
            "load and store instructions of the hottest block (a gather counts one per lane) over "
            "the run, per useful flop and divided by the parallel speedup",
            "log2 ops/flop",
        ),
        (
            "register_pressure",
            "vector registers the block needs at once over the target's vector register count: "
            "its accumulators plus one step's operands (the smaller side of the tile, its vector "
            "loads or its broadcasts, kept live if its operands each feed several operations, "
            "and one register streaming the other; one register per side when neither is "
            "shared, as in a depthwise tile); above 1 the compiler spills (16 registers on AVX2, "
            "32 on AVX-512)",
            "ratio",
        ),
        (
            "spilled_vectors",
            "vector registers the block needs beyond the target's count (0 when it fits)",
            "vectors",
        ),
    ),
)

ACCESS = Section(
    "Access features",
    "ACCESS_FEATURES",
    """\
Accesses are the block's distinct non-register reads plus its non-register writes. Loop
levels, innermost first: `inner` (the innermost loop), `block` (the register block, or the
innermost loop when there is none), `hot` (the block and the hot loop), `outer` (those and
the loop around them); a level the nest lacks repeats the one inside it.
""",
    (
        ("log_flops", "the workload's useful flops", "log2 flops"),
        (
            "log_compulsory_bytes",
            "bytes of the kernel's parameters (inputs and outputs), each touched at least once",
            "log2 bytes",
        ),
        (
            "log_arith_intensity",
            "useful flops per compulsory byte (the workload's roofline position)",
            "log2 flops/byte",
        ),
        (
            "ops_addsub",
            "additions and subtractions per scalar execution of the hottest store",
            "count",
        ),
        ("ops_mul", "multiplications per execution", "count"),
        ("ops_div", "divisions per execution", "count"),
        ("ops_minmax", "min and max operations per execution", "count"),
        ("ops_call", "math-function calls (exp, sqrt, tanh...) per execution", "count"),
        (
            "reads_contiguous",
            "distinct reads in the block that step 1 element per innermost-loop iteration",
            "count",
        ),
        ("reads_strided", "reads that step by more than 1 element", "count"),
        ("reads_broadcast", "reads that do not move with the innermost loop", "count"),
        (
            "reads_irregular",
            "reads whose index is not linear in the innermost loop variable",
            "count",
        ),
        ("write_contiguous", "1 if the store steps 1 element per innermost-loop iteration", "0/1"),
        ("write_in_register", "1 if the store writes a register-scope accumulator", "0/1"),
        (
            "log_bytes_inner",
            "bytes of the cache lines the accesses touch over the `inner` level (a strided or "
            "gathered element costs a whole line; copies of an unrolled loop count as one access, "
            "other overlaps are not detected)",
            "log2 bytes",
        ),
        ("log_bytes_block", "over the `block` level", "log2 bytes"),
        ("log_bytes_hot", "over the `hot` level", "log2 bytes"),
        ("log_bytes_outer", "over the `outer` level", "log2 bytes"),
        (
            "log_reuse_inner",
            "bytes accessed (every repeat) over the bytes of the lines touched at the `inner` level"
            " (below 0 when lines are only partly used)",
            "log2 ratio",
        ),
        ("log_reuse_block", "the same at the `block` level", "log2 ratio"),
        ("log_reuse_hot", "the same at the `hot` level", "log2 ratio"),
        ("log_reuse_outer", "the same at the `outer` level", "log2 ratio"),
        (
            "log_ws_hot_over_l1",
            "working set of the `hot` level over the target's L1 data cache",
            "log2 ratio",
        ),
        (
            "log_ws_outer_over_l2",
            "working set of the `outer` level over the target's L2",
            "log2 ratio",
        ),
        ("l1_fit_levels", "innermost loop levels whose working set fits in L1", "count"),
        ("l2_fit_levels", "innermost loop levels whose working set fits in L2", "count"),
        (
            "log_chunks_per_thread",
            "parallel loop extent over the target's threads (negative: idle threads)",
            "log2 ratio",
        ),
        (
            "log_flops_per_chunk",
            "useful flops per parallel chunk (all of them when serial)",
            "log2 flops",
        ),
    ),
)

BUILD = Section(
    "Build features",
    "BUILD_FEATURES",
    """\
How the C compiler is asked to build the kernel (`Schedule.flags`, set by `annotate`): the same
flags with the same effect in every template, so they describe the program, not a knob.
""",
    (
        (
            "build_opt_level",
            "the C compiler's optimisation level: 1, 2, 3 for -O1, -O2, -O3 (Ofast is 3 with fast "
            "math)",
            "level",
        ),
        (
            "build_fast_math",
            "1 if the compiler may reassociate and use reciprocals (`fast_math`, or `Ofast`)",
            "0/1",
        ),
        (
            "build_log_unroll",
            "how far the compiler may unroll the loops left rolled (`unroll_pragma`; 0 without)",
            "log2 times",
        ),
    ),
)

DELTA = Section(
    "Delta features",
    "DELTA_FEATURES",
    """\
Every loop, access and build feature again, minus the template default's for the same workload
and target (the reference each candidate is timed beside): `delta_<name>` for each `<name>`
above, in the same order. A value that means "large" for one shape and "small" for another (a
working set, a trip count) becomes "larger or smaller than the default's", which carries over.
""",
    (
        (
            "delta_<name>",
            "`<name>` of the config minus `<name>` of the template default",
            "as `<name>`",
        ),
    ),
)

TARGET = Section(
    "Target features",
    "TARGET_FEATURES",
    "",
    (
        ("target_vector_bits", "vector register width of the target's ISA level", "bits"),
        ("target_f32_lanes", "float32 lanes per vector register", "lanes"),
        ("target_vector_registers", "architectural vector registers", "count"),
        ("target_threads", "threads a kernel may use", "count"),
        ("target_log_l1", "L1 data cache size", "log2 bytes"),
        ("target_log_l2", "L2 cache size", "log2 bytes"),
        ("target_log_l3", "L3 cache size", "log2 bytes"),
        ("target_has_fma", "1 if the ISA level has fused multiply-add (avx512, avx2, neon)", "0/1"),
        ("target_has_avx512", "1 if the ISA level is avx512", "0/1"),
    ),
)

SECTIONS = (LOOP, ACCESS, BUILD, DELTA, TARGET)


def markdown() -> str:
    """The reference page: terms, then one table per section."""
    parts = ["# Cost-model features\n", TERMS]
    for s in SECTIONS:
        parts.append(f"## {s.title} (`{s.constant}`)\n")
        if s.intro:
            parts.append(s.intro)
        parts.append("| name | meaning | unit |\n| --- | --- | --- |")
        parts.extend(f"| `{name}` | {meaning} | {unit} |" for name, meaning, unit in s.rows)
        parts.append("")
    return "\n".join(parts)


if __name__ == "__main__":
    print(markdown(), end="")
