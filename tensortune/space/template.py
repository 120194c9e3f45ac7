"""Design spaces: a search space of knobs plus the function turning a config into a schedule.

A template reads the workload's stages (by tag) and declares the knobs that matter for that op
class; ``schedule(config)`` replays the config as schedule primitives, so the resulting trace is
what the database stores. Stages a template does not own (pads, epilogues, softmax pieces) get
the shared elementwise treatment: inline injective producers, parallelise the outer loop,
vectorize the inner one.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from ..schedule import Schedule
from ..schedule.stage import Stage
from ..target import Target
from ..te.expr import TensorRead, walk
from ..workload import Workload
from .space import Config, Constraint, Knob, SearchSpace


@dataclass(frozen=True)
class DesignSpace:
    """What a tuner needs for one workload on one target.

    ``name`` is stored in every record the space produces, so results of different spaces for
    one workload are never ranked together (each is timed beside its own ``default``) and
    ``compile`` applies only records of the space it rebuilds them with. The built-in
    templates are ``""``; a registered space gets its registered name (``register_space``).
    """

    workload: Workload
    target: Target
    space: SearchSpace
    build: Callable[[Config], Schedule]
    default: Config
    name: str = ""

    def schedule(self, config: Config) -> Schedule:
        self.space.validate(config)
        return self.build(self.space.complete(config))


def lanes_for(target: Target, dtype: str = "float32") -> int:
    return max(4, target.lanes(dtype))


def common_knobs() -> list[Knob]:
    """Code-generation flags every template exposes."""
    return [Knob("opt_level", ("O2", "O3"))]


def apply_common(s: Schedule, config: Config) -> None:
    s.annotate("opt_level", config.get("opt_level", "O3"))


def finish(
    s: Schedule, config: Config, lanes: int, parallel: bool, placed: tuple[str, ...] = ()
) -> Schedule:
    """``s`` with every root stage a template did not place itself (``placed``) scheduled
    simply, and the knobs every space shares applied: how each template's build ends."""
    for st in s.stages:
        if st.attach == ("root",) and st.name not in placed:
            schedule_simple(s, st, lanes, parallel)
    apply_common(s, config)
    return s


def split_vectorize(s: Schedule, stage: str, loop: str, extent: int, lanes: int) -> None:
    """Vectorize the innermost ``loop``: exactly if it is ``lanes`` wide, else split it first."""
    if extent == lanes:
        s.vectorize(stage, loop)
    elif extent > 1:
        _, inner = s.split(stage, loop, lanes)
        s.vectorize(stage, inner)


def vector_columns(s: Schedule, stage: str, loop: str, width: int, lanes: int) -> None:
    """``width`` columns of a register tile as ``width/lanes`` unrolled vectors."""
    if width == lanes:
        s.vectorize(stage, loop)
        return
    vo, vi = s.split(stage, loop, lanes)
    s.unroll(stage, vo)
    s.vectorize(stage, vi)


def window_stage(wl: Workload, tag: str) -> tuple[Stage, str, tuple[str, ...], dict[str, int]]:
    """The main stage of a windowed NCHW/NHWC op (conv, pool): the stage tagged ``tag``, its
    layout, its four spatial axis names and their extents."""
    main = next(st for st in Schedule(wl.outputs).stages if st.tensor.tag == tag)
    axes = tuple(a.name for a in main.axes)
    return main, main.tensor.attrs.get("layout", "NCHW"), axes, main.root_extents


def column_operand(main: Stage, j_name: str) -> tuple[str, int]:
    """The operand indexed by the column axis, and which of its dimensions that is."""
    j_var = next(a.var for a in main.axes if a.name == j_name)
    for node in walk(main.body):
        if isinstance(node, TensorRead):
            for d, idx in enumerate(node.indices):
                if idx == j_var:
                    return node.tensor.name, d
    raise ValueError(f"no operand of '{main.name}' is indexed by '{j_name}'")


def schedule_simple(
    s: Schedule, st: Stage, lanes: int, parallel: bool, vectorize: bool = True
) -> None:
    """Parallel outermost spatial loop(s), vectorized innermost loop: the default for any stage."""
    ext = st.extents()
    spatial = [lp.name for lp in st.leaves if lp.kind == "spatial"]
    if parallel and spatial:
        outer = spatial[0]
        if ext[outer] < 8 and len(spatial) > 2:  # too few iterations for the threads: fuse
            outer = s.fuse(st.name, spatial[0], spatial[1])
            spatial = [outer, *spatial[2:]]
        if ext.get(outer, st.extents()[outer]) > 1 and len(st.leaves) > 1:
            s.parallel(st.name, outer)
    inner = st.leaves[-1]
    if vectorize and inner.name not in st.annotations and st.tensor.dtype != "bool":
        split_vectorize(s, st.name, inner.name, st.extents()[inner.name], lanes)


def inline_injective(s: Schedule, keep: AbstractSet[str] = frozenset()) -> None:
    """Inline every elementwise/pad stage that is not an output and not in ``keep``."""
    for st in list(s.stages):
        if st.name in keep or st.is_output or st.is_reduction or st.attach != ("root",):
            continue
        s.compute_inline(st.name)


def generic_space(wl: Workload, target: Target) -> DesignSpace:
    """For any program: inline or not, parallel or not, vector width."""
    lanes = lanes_for(target)
    knobs = [
        Knob("inline", (True, False)),
        Knob("parallel", (True, False)),
        Knob("lanes", tuple(x for x in (4, 8, 16) if x <= lanes)),
        *common_knobs(),
    ]

    def build(config: Config) -> Schedule:
        s = Schedule(wl.outputs)
        if config["inline"]:
            inline_injective(s)
        return finish(s, config, config["lanes"], config["parallel"] and target.num_threads > 1)

    default = {"inline": True, "parallel": True, "lanes": knobs[2].choices[-1], "opt_level": "O3"}
    return DesignSpace(wl, target, SearchSpace(knobs), build, default)


__all__ = [
    "Config",
    "Constraint",
    "DesignSpace",
    "Knob",
    "SearchSpace",
    "apply_common",
    "common_knobs",
    "finish",
    "generic_space",
    "inline_injective",
    "lanes_for",
    "schedule_simple",
    "split_vectorize",
    "vector_columns",
    "window_stage",
]
