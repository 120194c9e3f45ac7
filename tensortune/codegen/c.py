"""C code generation from the loop IR: readable C, OpenMP for parallel loops, vector extensions.

Unrolled loops are replicated with their variable bound to a constant. A vectorized loop becomes
operations on vector types: unit-stride accesses are vector loads/stores, invariant ones broadcasts,
others gathers. Guards (tails, padding) inside it are tested at the first and last lane: when both
hold, the whole vector is in range (the conditions are affine), otherwise a scalar loop runs, so
tails are correct and the interior carries no per-lane test. ``register`` buffers whose indices
are constant once unrolled become named variables, which is what keeps accumulator tiles in
registers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import LoweringError
from ..ir.nodes import (
    Allocate,
    Buffer,
    Comment,
    For,
    IfThen,
    PrimFunc,
    Seq,
    Stmt,
    Store,
    walk_stmts,
)
from ..ir.simplify import expr_range, linear_coeff, simplify
from ..ir.width import needs_64bit_indices
from ..te.expr import (
    FLOAT_DTYPES,
    Binary,
    Call,
    Cast,
    Compare,
    Const,
    Expr,
    Select,
    TensorRead,
    Var,
    children,
    substitute,
    walk,
)
from ..te.tensor import C_RESERVED
from .preamble import C_TYPE, HEADER, floor_divmod, scalar_call, vector_helpers, vtype

STACK_LIMIT_BYTES = 128 * 1024
_PREC = {"or": 1, "and": 2, "cmp": 3, "add": 4, "sub": 4, "mul": 5, "div": 5, "mod": 5}
_CSYM = {"add": "+", "sub": "-", "mul": "*", "div": "/", "and": "&&", "or": "||"}
_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


class _NoPromotion(Exception):
    """A register buffer cannot become named variables (non-constant or mixed-width accesses)."""


@dataclass
class _Registers:
    """Named variables for a register buffer: scalars, or vectors of ``lanes`` elements
    ``stride`` apart (a tile vectorized along a dimension that is not the buffer's last)."""

    buffer: Buffer
    names: dict[tuple[int, int, int], str] = field(default_factory=dict)  # (off, lanes, stride)

    def name(self, offset: int, lanes: int, stride: int = 1) -> str:
        if lanes == 1:
            stride = 1
        if stride <= 0:
            raise _NoPromotion
        mine = {offset + k * stride for k in range(lanes)}
        for (off, n, step), existing in self.names.items():
            theirs = range(off, off + n * step, step)
            if not any(x in theirs for x in mine):
                continue
            if lanes == 1 and n > 1:
                return f"{existing}[{(offset - off) // step}]"  # one lane of a vector variable
            if (off, n, step) != (offset, lanes, stride):
                raise _NoPromotion
        key = (offset, lanes, stride)
        if key not in self.names:
            suffix = f"v{offset}" if lanes > 1 else f"{offset}"
            self.names[key] = f"{self.buffer.name}_{suffix}"
        return self.names[key]

    def declarations(self) -> list[str]:
        dt = self.buffer.dtype
        return [
            f"{vtype(dt, n) if n > 1 else C_TYPE[dt]} {name};"
            for (_, n, _), name in sorted(self.names.items())
        ]


@dataclass
class _Vec:
    """Emission state inside a vectorized loop."""

    var: Var
    lanes: int


class CEmitter:
    def __init__(self, func: PrimFunc):
        self.func = func
        self.lines: list[str] = []
        self.depth = 1
        self.bind: dict[Var, Expr] = {}  # unrolled loop variables -> constants
        self.ranges: dict[Var, int] = {}
        self.var_names: dict[Var, str] = {}
        self.taken: set[str] = {b.name for b in (*func.params, *func.temporaries)} | C_RESERVED
        self.registers: dict[int, _Registers] = {}
        self.vec_used: dict[tuple[str, int], set[str]] = {}
        self.in_parallel = False
        self.vec: _Vec | None = None
        self.assumed: set[Expr] = set()  # guards known true here (loop unswitching)
        # the type of loop variables, hence of every index expression built from them
        self.index_type = "int64_t" if needs_64bit_indices(func) else "int"
        self.divmod64 = False  # whether the 64-bit floor division helpers are called

    # -- names -----------------------------------------------------------------------------------
    def declare(self, v: Var) -> str:
        base, n = v.name, 2
        name = base
        while name in self.taken:
            name, n = f"{base}_{n}", n + 1
        self.taken.add(name)
        self.var_names[v] = name
        return name

    def line(self, text: str) -> None:
        self.lines.append("  " * self.depth + text)

    def comment(self, text: str) -> None:
        self.line(f"/* {comment_text(text)} */")

    def use_vec(self, dtype: str, lanes: int, func: str | None = None) -> str:
        if dtype == "bool":  # boolean lanes are masks: 0 or -1 in int32 lanes
            dtype = "int32"
        funcs = self.vec_used.setdefault((dtype, lanes), set())
        if dtype in FLOAT_DTYPES:
            self.vec_used.setdefault((_mask_dtype(dtype), lanes), set())
        if func:
            funcs.add(func)
        return vtype(dtype, lanes)

    # -- statements ------------------------------------------------------------------------------
    def stmt(self, s: Stmt) -> None:
        match s:
            case Seq(stmts):
                for x in stmts:
                    self.stmt(x)
            case Comment(text):
                self.comment(text)
            case For():
                self.loop(s)
            case IfThen(cond, body):
                c = self.prepare(cond)
                if c in self.assumed:
                    self.stmt(body)
                    return
                if _negated(c) in self.assumed:
                    return
                if isinstance(c, Const):
                    if c.value:
                        self.stmt(body)
                    return
                self.line(f"if ({self.expr(c)}) {{")
                self.nested(body)
                self.line("}")
            case Store(buf, idx, value):
                self.store(buf, idx, value)
            case Allocate(buf, body):
                self.allocate(buf, body)
            case _:
                raise LoweringError(f"cannot emit {type(s).__name__}")

    def nested(self, body: Stmt) -> None:
        self.depth += 1
        self.stmt(body)
        self.depth -= 1

    def loop(self, s: For) -> None:
        if s.kind == "unrolled":
            for k in range(s.extent):
                self.bind[s.var] = Const(k)
                self.stmt(s.body)
            del self.bind[s.var]
            return
        if s.kind == "vectorized":
            self.vector_loop(s)
            return
        if self.vector_accumulate(s):
            return
        name = self.declare(s.var)
        self.ranges[s.var] = s.extent
        if s.extent == 1:
            self.bind[s.var] = Const(0)
            self.stmt(s.body)
            del self.bind[s.var]
            return
        parallel = s.kind == "parallel" and not self.in_parallel and self.func.num_threads > 1
        hoist = [] if parallel else self.invariant_guards(s)
        if hoist:
            self.unswitch(s, name, hoist)
            return
        if parallel:
            self.line(
                f"#pragma omp parallel for num_threads({self.func.num_threads}) schedule(static)"
            )
        self.line(f"for ({self.index_type} {name} = 0; {name} < {s.extent}; ++{name}) {{")
        saved, self.in_parallel = self.in_parallel, self.in_parallel or parallel
        self.nested(s.body)
        self.in_parallel = saved
        self.line("}")

    def vector_accumulate(self, s: For) -> bool:
        """A reduction over ``for r: for v (vectorized)`` into one element keeps a vector
        accumulator across ``r`` and reduces its lanes once, instead of once per iteration."""
        inner = s.body
        if not (
            s.kind == "serial"
            and isinstance(inner, For)
            and inner.kind == "vectorized"
            and inner.extent in (4, 8, 16, 32, 64)
            and isinstance(inner.body, Store)
            and id(inner.body.buffer) not in self.registers
        ):
            return False
        st = inner.body
        off = self.offset(st.buffer, tuple(self.prepare(i) for i in st.indices))
        red = _reduction(self.prepare(st.value), st.buffer, off)
        if red is None or _vars_of(off) & {s.var, inner.var}:
            return False
        op, rest = red
        name, dt, lanes = self.declare(s.var), st.buffer.dtype, inner.extent
        t = self.use_vec(dt, lanes)
        acc = f"{st.buffer.name}_acc"
        identity = {"add": "0", "max": "-INFINITY", "min": "INFINITY"}[op]
        if dt == "int32" and op != "add":
            identity = "INT32_MIN" if op == "max" else "INT32_MAX"
        self.line("{")
        self.depth += 1
        self.line(f"{t} {acc} = tt_splat_{t}({identity});")
        self.ranges[s.var] = s.extent
        self.line(f"for ({self.index_type} {name} = 0; {name} < {s.extent}; ++{name}) {{")
        self.depth += 1
        self.vec, self.ranges[inner.var] = _Vec(inner.var, lanes), lanes
        try:
            x = self.vexpr(rest, dt)
        finally:
            self.vec = None
        self.line(f"{acc} = {acc} + {x};" if op == "add" else f"{acc} = tt_{op}_{t}({acc}, {x});")
        self.depth -= 1
        self.line("}")
        target = self.load_flat(st.buffer, off)
        horizontal = {"add": "sum", "max": "max", "min": "min"}[op]
        combined = f"tt_h{horizontal}_{t}({acc})"
        rhs = f"{target} + {combined}" if op == "add" else f"TT_{op.upper()}({target}, {combined})"
        self.line(f"{target} = {rhs};")
        self.depth -= 1
        self.line("}")
        return True

    def invariant_guards(self, s: For) -> list[Expr]:
        """Guards inside the loop that no loop inside it changes (tails of outer tiles).

        Unrolled loops inside count as constants: each of their values gives one instance of
        the guard, all of which are hoisted."""
        fors = [n for n in walk_stmts(s) if isinstance(n, For)]
        unrolled = {n.var: n.extent for n in fors if n.kind == "unrolled" and n is not s}
        inner = {n.var for n in fors} - unrolled.keys()
        found: list[Expr] = []
        for node in walk_stmts(s.body):
            # the else-half of a tile the lowering unswitched is not a guard: hoisting a test
            # with its negation would make the fast version unreachable
            if (
                not isinstance(node, IfThen)
                or not _index_only(node.cond)
                or _negated(node.cond) is not None
            ):
                continue
            for c in self._instances(node.cond, unrolled):
                if (
                    not isinstance(c, Const)
                    and c not in self.assumed
                    and not _vars_of(c) & inner
                    and c not in found
                ):
                    found.append(c)
        return found

    def _instances(self, cond: Expr, unrolled: dict[Var, int], limit: int = 64) -> list[Expr]:
        """``cond`` prepared once per combination of the unrolled loop values it uses."""
        used = [v for v in unrolled if v in _vars_of(cond)]
        combos: list[dict[Var, Expr]] = [{}]
        for v in used:
            combos = [{**c, v: Const(k)} for c in combos for k in range(unrolled[v])]
            if len(combos) > limit:
                return []
        return [self.prepare(substitute(cond, combo)) for combo in combos]

    def unswitch(self, s: For, name: str, conds: list[Expr]) -> None:
        """``if (all guards) { loop without them } else { loop with them }``."""
        self.line(f"if ({' && '.join(self.expr(c, 2) for c in conds)}) {{")
        self.depth += 1
        saved = set(self.assumed)
        self.assumed |= set(conds)
        self.plain_loop(s, name)
        self.assumed = saved
        self.depth -= 1
        self.line("} else {")
        self.depth += 1
        self.plain_loop(s, name)
        self.depth -= 1
        self.line("}")

    def plain_loop(self, s: For, name: str) -> None:
        self.line(f"for ({self.index_type} {name} = 0; {name} < {s.extent}; ++{name}) {{")
        self.nested(s.body)
        self.line("}")

    def allocate(self, buf: Buffer, body: Stmt) -> None:
        if buf.scope == "register":
            regs = _Registers(buf)
            saved_lines, saved_vec = self.lines, dict(self.vec_used)
            # the attempt may stop anywhere in the body: restore the whole emission state
            saved_state = (self.depth, dict(self.bind), self.in_parallel, self.vec)
            self.lines = []
            self.registers[id(buf)] = regs
            self.depth += 1
            try:
                self.stmt(body)
            except _NoPromotion:
                self.lines, self.vec_used = saved_lines, saved_vec
                self.depth, self.bind, self.in_parallel, self.vec = saved_state
                del self.registers[id(buf)]
                self.local_array(buf, body, "register tile kept in memory: indices not constant")
                return
            self.depth -= 1
            body_lines, self.lines = self.lines, saved_lines
            del self.registers[id(buf)]
            # a block of its own: an unrolled loop may emit the same tile more than once
            self.line("{")
            self.depth += 1
            self.comment(f"{buf.name}: {buf.dtype}{list(buf.shape)} held in registers")
            for decl in regs.declarations():
                self.line(decl)
            self.depth -= 1
            self.lines.extend(body_lines)
            self.line("}")
            return
        self.local_array(buf, body, None)

    def local_array(self, buf: Buffer, body: Stmt, note: str | None) -> None:
        ctype, nbytes = C_TYPE[buf.dtype], buf.size * _bytes(buf.dtype)
        self.line("{")
        self.depth += 1
        if note:
            self.comment(note)
        on_heap = nbytes > STACK_LIMIT_BYTES
        if on_heap:
            self.line(f"{ctype}* restrict {buf.name} = ({ctype}*)tt_alloc({nbytes});")
        else:
            self.line(f"{ctype} {buf.name}[{buf.size}] __attribute__((aligned(64)));")
        self.stmt(body)
        if on_heap:
            self.line(f"free({buf.name});")
        self.depth -= 1
        self.line("}")

    # -- expressions -----------------------------------------------------------------------------
    def prepare(self, e: Expr) -> Expr:
        return simplify(substitute(e, self.bind), self.ranges)

    def offset(self, buf: Buffer, idx: tuple[Expr, ...]) -> Expr:
        flat: Expr = Const(0)
        for i, n in zip(idx, buf.shape, strict=True):
            flat = flat * n + i
        return simplify(flat, self.ranges)

    def const_offset(self, off: Expr) -> int:
        if not isinstance(off, Const):
            raise _NoPromotion
        return int(off.value)

    def store(self, buf: Buffer, idx, value: Expr) -> None:
        off = self.offset(buf, tuple(self.prepare(i) for i in idx))
        value = self.prepare(value)
        regs = self.registers.get(id(buf))
        if regs is not None:
            self.line(f"{regs.name(self.const_offset(off), 1)} = {self.expr(value)};")
        else:
            self.line(f"{buf.name}[{self.expr(off)}] = {self.expr(value)};")

    def load(self, buf: Buffer, idx) -> str:
        return self.load_flat(buf, self.offset(buf, tuple(idx)))

    def load_flat(self, buf: Buffer, off: Expr) -> str:
        regs = self.registers.get(id(buf))
        if regs is not None:
            return regs.name(self.const_offset(off), 1)
        return f"{buf.name}[{self.expr(off)}]"

    def expr(self, e: Expr, parent: int = 0) -> str:
        match e:
            case Const(v, dt):
                return _literal(v, dt)
            case Var():
                return self.var_names.get(e) or self._unbound(e)
            case TensorRead(buf, idx):
                return self.load(buf, idx)
            case Binary("max" | "min" as op, a, b):
                return f"TT_{op.upper()}({self.expr(a)}, {self.expr(b)})"
            case Binary("floordiv" | "mod" as op, a, b, "int32"):
                if self.nonneg(a) and self.nonneg(b):
                    return _paren(
                        f"{self.expr(a, 5)} {'/' if op == 'floordiv' else '%'} {self.expr(b, 6)}",
                        5,
                        parent,
                    )
                wide = self.index_type == "int64_t"
                self.divmod64 |= wide
                helper = f"tt_floor{'div' if op == 'floordiv' else 'mod'}_i{64 if wide else 32}"
                return f"{helper}({self.expr(a)}, {self.expr(b)})"
            case Binary("floordiv", a, b, dt):
                return f"floor{'f' if dt == 'float32' else ''}({self.expr(a)} / {self.expr(b)})"
            case Binary("add", a, Const(v)) if isinstance(v, int | float) and v < 0:
                return _paren(f"{self.expr(a, 4)} - {_literal(-v, e.dtype)}", 4, parent)
            case Binary(op, a, b):
                p = _PREC[op]
                return _paren(f"{self.expr(a, p)} {_CSYM[op]} {self.expr(b, p + 1)}", p, parent)
            case Compare(op, a, b):
                return _paren(f"{self.expr(a, 4)} {_CMP[op]} {self.expr(b, 4)}", 3, parent)
            case Select(c, t, f):
                return f"({self.expr(c)} ? {self.expr(t)} : {self.expr(f)})"
            case Call(func, (x,), dt):
                return scalar_call(func, dt, self.expr(x))
            case Cast(v, dt):
                return f"(({C_TYPE[dt]})({self.expr(v)}))"
        raise LoweringError(f"cannot emit expression {e!r}")

    def _unbound(self, v: Var) -> str:
        raise LoweringError(f"variable '{v.name}' is used outside its loop")

    def nonneg(self, e: Expr) -> bool:
        r = expr_range(e, {**self.ranges, **(self._vec_range())})
        return r is not None and r[0] >= 0

    def _vec_range(self) -> dict[Var, int]:
        return {self.vec.var: self.vec.lanes} if self.vec else {}

    # -- vector loops ----------------------------------------------------------------------------
    def vector_loop(self, s: For) -> None:
        v, lanes = s.var, s.extent
        if lanes < 2 or lanes & (lanes - 1) or lanes > 64:  # a region narrower than the tile
            self.loop(For(v, lanes, "unrolled" if self.registers else "serial", s.body))
            return
        guarded = _flatten(s.body, ())
        conds = {c for g, st in guarded for c in (*g, *_index_selects(st.value, v))}
        name = self.declare(v)
        self.ranges[v] = lanes
        tests = []
        for c in conds:
            c = self.prepare(c)
            if isinstance(c, Const) and c.value:
                continue
            if not _affine_conjunction(c, v, self.ranges):
                tests = None
                break
            tests += [
                self.prepare(substitute(c, {v: Const(0)})),
                self.prepare(substitute(c, {v: Const(lanes - 1)})),
            ]
        if tests is not None and any(isinstance(t, Const) and not t.value for t in tests):
            tests = None
        if tests is None:
            self.scalar_loop(s, name)
            return
        tests = [t for t in tests if not isinstance(t, Const)]
        if tests:
            self.line(f"if ({' && '.join(self.expr(t, 2) for t in tests)}) {{")
            self.depth += 1
        self.vec = _Vec(v, lanes)
        self.bind[v] = v
        try:
            for _, st in guarded:
                self.vector_store(st, conds)
        finally:
            self.vec = None
            del self.bind[v]
        if tests:
            self.depth -= 1
            self.line("} else {")
            self.depth += 1
            self.scalar_loop(s, name)
            self.depth -= 1
            self.line("}")

    def scalar_loop(self, s: For, name: str) -> None:
        if self.registers:  # lanes of register tiles need constant indices
            self.loop(For(s.var, s.extent, "unrolled", s.body))
            return
        self.plain_loop(s, name)

    def vector_store(self, st: Store, conds: set[Expr]) -> None:
        v, lanes = self.vec.var, self.vec.lanes
        value = _drop_selects(self.prepare(st.value), conds, self)
        off = self.offset(st.buffer, tuple(self.prepare(i) for i in st.indices))
        stride = linear_coeff(off, v, self.ranges)
        dt = st.buffer.dtype
        t = self.use_vec(dt, lanes)
        if stride == 0:  # a reduction across lanes into one element
            red = _reduction(value, st.buffer, off)
            if red is None:
                raise LoweringError(
                    f"vectorized store to {st.buffer.name} does not vary with {v.name}"
                )
            op, rest = red
            self.use_vec(dt, lanes)
            target = self.load_flat(st.buffer, off)
            horizontal = {"add": "sum", "max": "max", "min": "min"}[op]
            combined = f"tt_h{horizontal}_{t}({self.vexpr(rest, dt)})"
            rhs = (
                f"{target} + {combined}"
                if op == "add"
                else f"TT_{op.upper()}({target}, {combined})"
            )
            self.line(f"{target} = {rhs};")
            return
        code = self.vexpr(value, dt)
        regs = self.registers.get(id(st.buffer))
        base = self.prepare(substitute(off, {v: Const(0)}))
        if regs is not None:
            if stride is None:
                raise _NoPromotion
            self.line(f"{regs.name(self.const_offset(base), lanes, stride)} = {code};")
            return
        if stride == 1:
            self.line(f"tt_store_{t}(&{st.buffer.name}[{self.expr(base)}], {code});")
            return
        self.line(f"{{ {t} tt_v = {code};")
        for k in range(lanes):
            o = self.prepare(substitute(off, {v: Const(k)}))
            self.line(f"  {st.buffer.name}[{self.expr(o)}] = tt_v[{k}];")
        self.line("}")

    def vexpr(self, e: Expr, dtype: str) -> str:
        """A vector-typed C expression for ``e`` (scalars are splatted)."""
        code, kind = self.vector(e)
        lanes = self.vec.lanes
        t = self.use_vec(dtype, lanes)
        if kind == "vec":
            return code
        if dtype == "bool":  # a scalar boolean is 0 or 1; a lane mask is 0 or -1
            return f"tt_splat_{t}(-(int32_t)({code}))"
        if kind == "mem":
            return f"tt_bcast_{t}(&{code})"
        return f"tt_splat_{t}({code})"

    def vector(self, e: Expr) -> tuple[str, str]:
        """(code, kind): kind is 'vec', 'scalar', or 'mem' (a scalar load that can broadcast)."""
        v, lanes = self.vec.var, self.vec.lanes
        if v not in _vars_of(e):
            if isinstance(e, TensorRead) and id(e.tensor) not in self.registers:
                return self.load(e.tensor, e.indices), "mem"
            return self.expr(e), "scalar"
        dt = e.dtype
        match e:
            case TensorRead(buf, idx):
                off = self.offset(buf, tuple(idx))
                stride = linear_coeff(off, v, self.ranges)
                t = self.use_vec(dt, lanes)
                base = self.prepare(substitute(off, {v: Const(0)}))
                regs = self.registers.get(id(buf))
                if dt == "bool":  # one byte per element: gather and widen 0/1 to 0/-1
                    lanes_code = [
                        self.load_flat(buf, self.prepare(substitute(off, {v: Const(k)})))
                        for k in range(lanes)
                    ]
                    return f"(-(({t}){{{', '.join(lanes_code)}}}))", "vec"
                if regs is not None:
                    if stride is None:
                        raise _NoPromotion
                    return regs.name(self.const_offset(base), lanes, stride), "vec"
                if stride == 1:
                    return f"tt_load_{t}(&{buf.name}[{self.expr(base)}])", "vec"
                if stride == 2:  # two contiguous loads and a shuffle, not a lane-by-lane gather
                    self.use_vec(dt, lanes, "load2")
                    return f"tt_load2_{t}(&{buf.name}[{self.expr(base)}])", "vec"
                lanes_code = [
                    self.load_flat(buf, self.prepare(substitute(off, {v: Const(k)})))
                    for k in range(lanes)
                ]
                return f"(({t}){{{', '.join(lanes_code)}}})", "vec"
            case Var():
                t = self.use_vec("int32", lanes)
                iota = ", ".join(str(k) for k in range(lanes))
                return f"(({t}){{{iota}}})", "vec"
            case Binary(op, a, b):
                va, vb = self.vexpr(a, a.dtype), self.vexpr(b, b.dtype)
                t = self.use_vec(dt, lanes)
                if op in ("max", "min"):
                    return f"tt_{op}_{t}({va}, {vb})", "vec"
                if op in ("and", "or"):
                    vb = self.mask_as(vb, _mask_of(b), _mask_of(a))
                    return f"({va} {'&' if op == 'and' else '|'} {vb})", "vec"
                if op in ("floordiv", "mod") and dt == "int32":
                    if self.nonneg(a) and self.nonneg(b):  # C's truncation is the floor
                        return f"({va} {'/' if op == 'floordiv' else '%'} {vb})", "vec"
                    t = self.use_vec(dt, lanes, op)
                    return f"tt_{op}_{t}({va}, {vb})", "vec"
                if op == "floordiv":
                    raise LoweringError("vectorized float floor division is not supported")
                return f"({va} {_CSYM[op]} {vb})", "vec"
            case Compare(op, a, b):
                return f"({self.vexpr(a, a.dtype)} {_CMP[op]} {self.vexpr(b, b.dtype)})", "vec"
            case Select(c, t_, f_):
                cc, kind = self.vector(c)
                tv, fv = self.vexpr(t_, dt), self.vexpr(f_, dt)
                t = self.use_vec(dt, lanes)
                if kind != "vec":
                    return f"({cc} ? {tv} : {fv})", "vec"
                cc = self.mask_as(cc, _mask_of(c), _mask_dtype(dt))
                return f"tt_select_{t}({cc}, {tv}, {fv})", "vec"
            case Call(func, (x,), _):
                xv = self.vexpr(x, x.dtype)
                if func == "neg":
                    return f"(-{xv})", "vec"
                if func == "not":
                    return f"(~{xv})", "vec"
                t = self.use_vec(dt, lanes, func)
                return f"tt_{func}_{t}({xv})", "vec"
            case Cast(x, _):
                t = self.use_vec(dt, lanes)
                xv = self.vexpr(x, x.dtype)
                if dt == "bool":
                    return f"({xv} != 0)", "vec"
                if x.dtype == "bool":  # lanes of -1 become 1
                    xv = f"(-{xv})"
                return f"__builtin_convertvector({xv}, {t})", "vec"
        raise LoweringError(f"cannot vectorize {e!r}")

    def mask_as(self, code: str, have: str, want: str) -> str:
        """A lane mask of ``have``-wide elements as one of ``want``-wide elements."""
        if have == want:
            return code
        return f"__builtin_convertvector({code}, {self.use_vec(want, self.vec.lanes)})"

    # -- the whole function ----------------------------------------------------------------------
    def function(self) -> str:
        f = self.func
        params = []
        for b in f.params:
            const_q = "" if any(b is o for o in f.outputs) else "const "
            params.append(f"{const_q}{C_TYPE[b.dtype]}* restrict {b.name}")
        self.depth = 1
        for b in f.temporaries:
            self.line(
                f"{C_TYPE[b.dtype]}* restrict {b.name} = "
                f"({C_TYPE[b.dtype]}*)tt_alloc({b.size * _bytes(b.dtype)});"
            )
        if f.temporaries:
            names = " || ".join(f"!{b.name}" for b in f.temporaries)
            self.line(
                f"if ({names}) {{ {' '.join(f'free({b.name});' for b in f.temporaries)} "
                "return -1; }"
            )
        self.stmt(f.body)
        for b in f.temporaries:
            self.line(f"free({b.name});")
        self.line("return 0;")
        body = "\n".join(self.lines)
        args = ", ".join(
            f"({'const ' if all(b is not o for o in f.outputs) else ''}{C_TYPE[b.dtype]}*)args[{i}]"
            for i, b in enumerate(f.params)
        )
        return (
            f"int {f.name}({', '.join(params)}) {{\n{body}\n}}\n\n"
            f"int {f.name}_packed(void** args) {{\n  return {f.name}({args});\n}}\n"
        )


def generate_c(func: PrimFunc, header_comment: str = "") -> str:
    """The complete C translation unit for one kernel."""
    em = CEmitter(func)
    body = em.function()
    helpers = [floor_divmod(64)] if em.divmod64 else []  # 32-bit ones would truncate
    helpers += [
        vector_helpers(dt, lanes, funcs)
        for (dt, lanes), funcs in sorted(em.vec_used.items(), key=lambda kv: (kv[0][1], kv[0][0]))
    ]
    comment = "".join(f" * {comment_text(line)}\n" for line in header_comment.splitlines())
    head = (
        f"/* Generated by tensortune.\n{comment} */\n"
        if comment
        else "/* Generated by tensortune. */\n"
    )
    return head + HEADER + ("\n".join(helpers) + "\n\n" if helpers else "\n") + body


# -- helpers ---------------------------------------------------------------------------------------
_COMMENT_SAFE = frozenset(map(chr, range(0x20, 0x7F))) - {"\\", "?"}


def comment_text(text: str) -> str:
    """``text`` made safe inside a C block comment: names and trace arguments reach comments and
    may come from a shared database, so no ``*/`` can end the comment and no backslash-newline
    (or ``??/`` trigraph) can splice lines; other characters are written as ``\\x<hex>``."""
    escaped = "".join(c if c in _COMMENT_SAFE else f"\\x{ord(c):02x}" for c in text)
    return escaped.replace("*/", "* /")


def _mask_dtype(dtype: str) -> str:
    return {"float32": "int32", "float64": "int64", "bool": "int32"}.get(dtype, dtype)


def _mask_of(e: Expr) -> str:
    """Element type of the lane mask that a boolean vector expression evaluates to."""
    match e:
        case Compare(_, a, _):
            return _mask_dtype(a.dtype)
        case Binary("and" | "or", a, _) | Call("not", (a,)):
            return _mask_of(a)
        case Cast(x, "bool"):
            return _mask_dtype(x.dtype)
    return "int32"


def _bytes(dtype: str) -> int:
    return {"float64": 8, "bool": 1}.get(dtype, 4)


def _literal(v, dtype: str) -> str:
    if dtype == "bool":
        return "1" if v else "0"
    if dtype == "int32":
        return str(int(v))
    v = float(v)
    if v != v:
        return "NAN"
    if v in (float("inf"), float("-inf")):
        return ("-" if v < 0 else "") + "INFINITY"
    text = repr(v)
    return text + ("f" if dtype == "float32" else "")


def _paren(text: str, prec: int, parent: int) -> str:
    return f"({text})" if prec < parent else text


def _vars_of(e: Expr) -> set[Var]:
    return {n for n in walk(e) if isinstance(n, Var)}


def _flatten(s: Stmt, guards: tuple[Expr, ...]) -> list[tuple[tuple[Expr, ...], Store]]:
    match s:
        case Store():
            return [(guards, s)]
        case IfThen(c, body):
            return _flatten(body, (*guards, c))
        case Seq(stmts):
            return [x for st in stmts for x in _flatten(st, guards)]
        case Comment():
            return []
    raise LoweringError(f"a vectorized loop must be innermost; found {type(s).__name__} inside it")


def _negated(e: Expr) -> Expr | None:
    """``c`` for ``!c``, else None."""
    return e.args[0] if isinstance(e, Call) and e.func == "not" else None


def _index_only(e: Expr) -> bool:
    return all(not isinstance(n, TensorRead) for n in walk(e))


def _index_selects(e: Expr, v: Var) -> list[Expr]:
    """Conditions of selects that depend only on indices (padding), including ``v``."""
    return [
        n.cond
        for n in walk(e)
        if isinstance(n, Select) and _index_only(n.cond) and v in _vars_of(n.cond)
    ]


def _affine_conjunction(c: Expr, v: Var, ranges) -> bool:
    match c:
        case Binary("and", a, b):
            return _affine_conjunction(a, v, ranges) and _affine_conjunction(b, v, ranges)
        case Compare(op, a, b) if op != "ne" and a.dtype == "int32":
            return linear_coeff(a - b, v, ranges) is not None
    return v not in _vars_of(c)


def _drop_selects(e: Expr, conds: set[Expr], em: CEmitter) -> Expr:
    """Inside the vector fast path, padding selects are known true."""
    prepared = {em.prepare(c) for c in conds}

    def go(x: Expr) -> Expr:
        if isinstance(x, Select) and em.prepare(x.cond) in prepared:
            return go(x.true_value)
        kids = children(x)
        if not kids:
            return x
        from ..te.expr import rebuild

        return rebuild(x, tuple(go(k) for k in kids))

    return go(e)


def _reduction(value: Expr, buf: Buffer, off: Expr):
    if isinstance(value, Binary) and value.op in ("add", "max", "min"):
        acc = value.a
        if isinstance(acc, TensorRead) and acc.tensor is buf:
            return value.op, value.b
    return None
