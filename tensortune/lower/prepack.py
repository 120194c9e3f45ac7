"""Splitting a kernel at its constant inputs: what depends only on constants runs once.

A model's weights do not change between calls, yet a packed layout (``W_pack[K/w, C, R, S, w]``,
a GEMM's ``B_pack``) is rebuilt from them on every call. Given the names of the inputs that are
constant, every stage at root that reads (transitively) only constants moves into a second
function, ``<kernel>_prepack``, run once; the kernel then takes the buffers it filled as inputs.
A constant stage computed at a consumer's loop (a GEMM's B packed panel by panel) is computed at
root instead, so the whole packed copy is made once.

The split is a dataflow question on the loop nest ``build_nest`` makes (one top-level nest per
stage at root), so it needs no knowledge of which primitive made a stage.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace

from ..errors import LoweringError, ScheduleError
from ..ir.nodes import Allocate, Buffer, Comment, PrimFunc, Seq, Stmt, Store, seq, walk_stmts
from ..ir.visit import walk_exprs
from ..schedule.schedule import Schedule
from ..te.expr import TensorRead, tensors_read, walk

PREPACK_SUFFIX = "_prepack"


@dataclass(frozen=True)
class Prepacked:
    """A kernel split at its constants: ``prepack`` (None when nothing depends only on
    constants) computes the ``packed`` buffers once; ``run`` reads them as inputs per call."""

    run: PrimFunc
    prepack: PrimFunc | None = None

    @property
    def packed(self) -> tuple[Buffer, ...]:
        """The buffers computed once: ``prepack``'s outputs, inputs of ``run``."""
        return self.prepack.outputs if self.prepack is not None else ()


def check_constants(sch: Schedule, constants: Collection[str]) -> frozenset[str]:
    """The constant names, each an input of the schedule."""
    names = {t.name for t in sch.inputs}
    unknown = sorted(set(constants) - names)
    if unknown:
        raise LoweringError(
            f"constants {unknown} are not inputs of the kernel (inputs: {sorted(names)})"
        )
    return frozenset(constants)


def constant_stages(sch: Schedule, constants: Collection[str]) -> set[str]:
    """Names of the stages (not outputs) whose reads are, transitively, only constant inputs."""
    known = {id(t) for t in sch.inputs if t.name in constants}
    names: set[str] = set()
    for st in sch.stages:  # producers before consumers
        if not st.is_output and all(id(t) in known for t in tensors_read(st.body)):
            known.add(id(st.tensor))
            names.add(st.name)
    return names


def root_constant_stages(sch: Schedule, constants: Collection[str]) -> Schedule:
    """``sch`` (a copy, when anything changes) with every constant stage that is computed at a
    consumer's loop, into memory, computed at root instead."""
    const = constant_stages(sch, constants)
    attached = [
        st.name
        for st in sch.stages
        if st.name in const and st.attach[0] == "at" and st.scope == "global"
    ]
    if not attached:
        return sch
    copy = Schedule.from_trace(sch.outputs, sch.steps)
    copy.flags = dict(sch.flags)
    for name in attached:
        try:
            copy.compute_root(name)
        except ScheduleError:
            continue  # another stage is computed inside it: it stays where it is
    return copy


def _reads_writes(stmt: Stmt) -> tuple[set[int], set[int]]:
    """Ids of the buffers a top-level nest reads and writes, its own allocations left out."""
    local = {id(s.buffer) for s in walk_stmts(stmt) if isinstance(s, Allocate)}
    writes = {id(s.buffer) for s in walk_stmts(stmt) if isinstance(s, Store)}
    reads = {
        id(node.tensor)
        for e in walk_exprs(stmt)
        for node in walk(e)
        if isinstance(node, TensorRead) and isinstance(node.tensor, Buffer)
    }
    return reads - local, writes - local


def _nests(body: Stmt) -> list[list[Stmt]]:
    """The top-level statements, each nest with the comments before it."""
    groups: list[list[Stmt]] = [[]]
    for stmt in body.stmts if isinstance(body, Seq) else (body,):
        groups[-1].append(stmt)
        if not isinstance(stmt, Comment):
            groups.append([])
    return groups


def split_constants(func: PrimFunc, constants: Collection[str]) -> Prepacked:
    """Split ``build_nest``'s function: the top-level nests that read only constant inputs (or
    what such nests wrote) and write no output go to ``<name>_prepack``.

    The prepack function takes the constant inputs it reads and writes the buffers the rest
    reads; the kernel takes its inputs in their order (less the constants only the prepack
    reads), then those buffers, then its outputs."""
    known = {id(b) for b in func.params if b.name in constants}
    outputs = {id(b) for b in func.outputs}
    pre: list[Stmt] = []
    run: list[Stmt] = []
    pre_reads: set[int] = set()
    pre_writes: set[int] = set()
    run_reads: set[int] = set()
    for group in _nests(func.body):
        reads, writes = _reads_writes(seq(group))
        if writes and not writes & outputs and reads <= known:
            known |= writes
            pre += group
            pre_reads |= reads
            pre_writes |= writes
        else:
            run += group
            run_reads |= reads
    if not pre:
        return Prepacked(func)
    packed = tuple(b for b in func.temporaries if id(b) in pre_writes and id(b) in run_reads)
    inputs = [b for b in func.params if id(b) not in outputs]
    pre_func = PrimFunc(
        func.name + PREPACK_SUFFIX,
        tuple(b for b in inputs if id(b) in pre_reads) + packed,
        packed,
        tuple(b for b in func.temporaries if id(b) in pre_writes and id(b) not in run_reads),
        seq(pre),
        func.num_threads,
    )
    kept = tuple(
        b for b in inputs if id(b) in run_reads or not (b.name in constants and id(b) in pre_reads)
    )
    run_func = replace(
        func,
        params=kept + packed + func.outputs,
        temporaries=tuple(b for b in func.temporaries if id(b) not in pre_writes),
        body=seq(run),
    )
    return Prepacked(run_func, pre_func)


__all__ = [
    "PREPACK_SUFFIX",
    "Prepacked",
    "check_constants",
    "constant_stages",
    "root_constant_stages",
    "split_constants",
]
