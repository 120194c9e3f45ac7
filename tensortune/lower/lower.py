"""Lowering: a schedule becomes the final loop-nest program, the one codegen prints.

``build_nest`` turns the scheduled stages into one loop nest whose loops carry their kinds; the
passes then make every decision the C shows, in this order:

1. ``parallel_loops``  — parallel loops that cannot run in parallel become serial, with a note;
   ``reciprocals``     — (``fast_math``) loop-invariant divisors inverted once before their loop;
2. ``unroll``          — unrolled loops (and loops of extent 1) become copies with constants;
3. ``unswitch``        — loop-invariant guards are tested once, with the facts they establish;
4. ``vectorize``       — vector accumulators, vector tails split off, scalar fallbacks noted;
5. ``unroll``          — again, for the scalar tails of register tiles;
6. ``prune``           — vector tests the unswitched branches already decide disappear;
7. ``promote_registers`` — register tiles that cannot be named variables stay in memory.

``lower_prepacked`` splits the nest at the inputs declared constant first (``prepack``), so the
stages that depend only on them run once, in a function of their own.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from ..ir.nodes import PrimFunc
from ..schedule.annotations import fast_math as allows_fast_math
from ..schedule.schedule import Schedule
from .nest import build_nest
from .parallel import parallel_loops
from .prepack import Prepacked, check_constants, root_constant_stages, split_constants
from .reciprocal import reciprocals
from .registers import promote_registers
from .unroll import unroll
from .unswitch import prune, unswitch
from .vectorize import vectorize


def run_passes(func: PrimFunc, masked: bool = True, fast_math: bool = False) -> PrimFunc:
    """``func`` after every lowering pass: the program as it will run. ``masked``: the target
    has masked vector loads and stores, so a vector tail runs as one masked operation (else as
    scalar code, see ``vectorize``). ``fast_math``: the schedule allows reciprocals."""
    body = parallel_loops(func.body, func.num_threads)
    if fast_math:
        body = reciprocals(body)
    body = unroll(body)
    body = unswitch(body)
    body = vectorize(body, masked)
    body = unroll(body)
    body = prune(body)
    body = promote_registers(body)
    return replace(func, body=body)


def lower(
    sch: Schedule, name: str = "kernel", num_threads: int = 1, masked: bool = True
) -> PrimFunc:
    """Lower a schedule into one PrimFunc named ``name`` (inputs, then outputs, as parameters):
    the final program, which ``generate_c`` prints statement for statement."""
    return run_passes(build_nest(sch, name, num_threads), masked, allows_fast_math(sch.flags))


def lower_prepacked(
    sch: Schedule,
    name: str = "kernel",
    num_threads: int = 1,
    constants: Collection[str] = (),
    masked: bool = True,
) -> Prepacked:
    """Lower a schedule whose inputs named in ``constants`` never change between calls: the
    stages computed from them alone become ``<name>_prepack``, run once (see ``prepack``).
    Without constants the kernel is exactly ``lower``'s."""
    constants = check_constants(sch, constants)
    if not constants:
        return Prepacked(lower(sch, name, num_threads, masked))
    fast = allows_fast_math(sch.flags)
    sch = root_constant_stages(sch, constants)
    split = split_constants(build_nest(sch, name, num_threads), constants)
    if split.prepack is None:
        return Prepacked(run_passes(split.run, masked, fast))
    return Prepacked(run_passes(split.run, masked, fast), run_passes(split.prepack, masked, fast))
