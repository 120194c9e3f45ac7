"""Printing a vectorized loop as C vector-extension code.

After the ``vectorize`` pass a vectorized loop holds only stores, so it prints as one vector
statement per store: unit-stride accesses are vector loads/stores, strides 2 to 4 contiguous
loads and shuffles, invariant ones broadcasts, others gathers; a store to one element is a
horizontal reduction of the lanes. Choosing these instructions is the printer's whole job here.

A masked vector tail (``if c: store`` inside the loop, see `tensortune.lower.masks`) prints as a
block holding the lane mask ``tt_mask`` and one masked store; its reads of memory are masked
loads under ``tt_mask`` and under the padding tests around them (strided ones too, which load
only up to the last active lane's element), unless every lane's element is in the buffer (a
padded panel), and its reductions across lanes see the identity in the lanes that are off.
"""

from __future__ import annotations

from ..dtype import dtype
from ..errors import LoweringError
from ..ir.nodes import Comment, For, IfThen, Seq, Store
from ..ir.simplify import expr_range, linear_coeff, simplify
from ..lower.masks import MASKED_DTYPES, lane_guard, strided_load
from ..lower.vectorize import COMBINERS, reduction
from ..te import expr as E
from .expr import _CSYM, CMP, ExprPrinter, literal
from .preamble import vtype


class VectorPrinter(ExprPrinter):
    """Vector statements and expressions inside one vectorized loop (``self.vec``)."""

    vec_used: dict[tuple[str, int], set[str]]
    masks: list[tuple[str, str]]  # (C code, mask dtype) of the lane tests around an expression
    lines: list[str]  # provided by the statement printer, like ``depth`` and ``line``
    depth: int

    def line(self, text: str) -> None:  # provided by the statement printer
        raise NotImplementedError

    def active_vec(self) -> tuple[E.Var, int]:
        """(lane variable, lanes) of the vectorized loop being printed."""
        if self.vec is None:
            raise LoweringError("a vector expression outside a vectorized loop")
        return self.vec

    def use_vec(self, dt: str, lanes: int, func: str | None = None) -> str:
        """The vector type name, recording that its helpers (and ``func``) are needed."""
        if dt == "bool":  # boolean lanes are masks: 0 or -1 in int32 lanes
            dt = "int32"
        funcs = self.vec_used.setdefault((dt, lanes), set())
        if dtype(dt).is_float:
            self.vec_used.setdefault((dtype(dt).mask, lanes), set())
        if func:
            funcs.add(func)
        return vtype(dt, lanes)

    def vector_loop(self, s: For) -> None:
        self.vec = (s.var, s.extent)
        self.ranges[s.var] = s.extent
        self.masks = []
        try:
            stores = s.body.stmts if isinstance(s.body, Seq) else (s.body,)
            for st in stores:
                if isinstance(st, Comment):
                    continue
                if isinstance(st, IfThen) and isinstance(st.body, Store) and st.orelse is None:
                    self.masked_store(st.cond, st.body)
                elif isinstance(st, Store):
                    self.vector_store(st)
                else:
                    raise LoweringError(f"vectorized loop {s.var.name} holds a {type(st).__name__}")
        finally:
            self.vec = None
            self.masks = []

    def masked_store(self, cond: E.Expr, st: Store) -> None:
        """``if cond: st`` on the lanes where ``cond`` holds: its scalar part is an ``if``, its
        per-lane part the mask ``tt_mask`` of a block of its own."""
        scalar, lanes = lane_guard(cond, self.active_vec()[0])
        if scalar is not None:
            self.line(f"if ({self.expr(scalar)}) {{")
            self.depth += 1
        if lanes is None:
            self.vector_store(st)
        else:
            want = dtype(st.buffer.dtype).mask
            code = self.mask_as(self.vexpr(lanes, "bool"), _mask_of(lanes), want)
            saved, self.lines = self.lines, []
            self.masks = [("tt_mask", want)]
            self.depth += 1
            try:
                self.vector_store(st)
            finally:
                self.depth -= 1
                self.masks = []
            body, self.lines = self.lines, saved
            if not any("tt_mask" in b for b in body):  # a register tile: its lanes are free
                self.lines.extend(b[2:] for b in body)
            else:
                self.line(f"{{ {self.use_vec(want, self.active_vec()[1])} tt_mask = {code};")
                self.lines.extend(body)
                self.line("}")
        if scalar is not None:
            self.depth -= 1
            self.line("}")

    def mask_code(self, dt: str) -> str:
        """The conjunction of the lane tests around this point, as a mask for ``dt`` lanes."""
        want = dtype(dt).mask
        return " & ".join(self.mask_as(code, have, want) for code, have in self.masks)

    def in_bounds(self, buf, idx: tuple[E.Expr, ...]) -> bool:
        """Whether every lane's element of ``buf[idx]`` lies inside ``buf`` (a padded panel).
        A masked store runs only when some lane is active (`some_lane`), so an index that does
        not depend on the lane is in bounds, unless a padding test guards the read."""
        v, lanes = self.active_vec()
        ranges = {**self.ranges, v: lanes}
        padded = len(self.masks) > (1 if self.masks and self.masks[0][0] == "tt_mask" else 0)
        for i, n in zip(idx, buf.shape, strict=True):
            if v not in E.free_vars(i) and not padded:
                continue
            r = expr_range(i, ranges)
            if r is None or r[0] < 0 or r[1] >= n:
                return False
        return True

    def lane(self, off: E.Expr, k: int) -> E.Expr:
        return simplify(E.substitute(off, {self.active_vec()[0]: E.Const(k)}), self.ranges)

    def vector_store(self, st: Store) -> None:
        v, lanes = self.active_vec()
        off = self.offset(st.buffer, st.indices)
        stride = linear_coeff(off, v, self.ranges)
        dt = st.buffer.dtype
        t = self.use_vec(dt, lanes)
        if stride == 0:  # a reduction across lanes into one element
            red = reduction(st.value, st.buffer)
            if red is None:
                raise LoweringError(
                    f"vectorized store to {st.buffer.name} does not vary with {v.name}"
                )
            op, rest = red
            target = self.load_flat(st.buffer, off)
            lanes_code = self.vexpr(rest, dt)
            if self.masks:  # lanes that are off add the identity
                ident = literal(E.reduce_identity(COMBINERS[op], dt).value, dt)
                lanes_code = (
                    f"tt_select_{t}({self.mask_code(dt)}, {lanes_code}, tt_splat_{t}({ident}))"
                )
            combined = f"tt_h{COMBINERS[op]}_{t}({lanes_code})"  # tt_hsum, tt_hmax, tt_hmin
            rhs = (
                f"{target} + {combined}"
                if op == "add"
                else f"TT_{op.upper()}({target}, {combined})"
            )
            self.line(f"{target} = {rhs};")
            return
        code = self.vexpr(st.value, dt)
        regs = self.registers.get(id(st.buffer))
        if regs is not None:
            self.line(f"{regs.access(st.indices, self.ranges, self.vec)} = {code};")
            return
        base = self.lane(off, 0)
        if self.masks:
            if stride != 1 or dt not in MASKED_DTYPES:
                raise LoweringError(f"masked store to {st.buffer.name} is not contiguous")
            self.use_vec(dt, lanes, "mask")
            at = f"&{st.buffer.name}[{self.expr(base)}]"
            self.line(f"tt_maskstore_{t}({at}, {self.mask_code(dt)}, {code});")
            return
        if stride == 1:
            self.line(f"tt_store_{t}(&{st.buffer.name}[{self.expr(base)}], {code});")
            return
        self.line(f"{{ {t} tt_v = {code};")
        for k in range(lanes):
            self.line(f"  {st.buffer.name}[{self.expr(self.lane(off, k))}] = tt_v[{k}];")
        self.line("}")

    def vexpr(self, e: E.Expr, dt: str) -> str:
        """A vector-typed C expression for ``e`` (scalars are splatted)."""
        code, kind = self.vector(e)
        t = self.use_vec(dt, self.active_vec()[1])
        if kind == "vec":
            return code
        if dt == "bool":  # a scalar boolean is 0 or 1; a lane mask is 0 or -1
            return f"tt_splat_{t}(-(int32_t)({code}))"
        if kind == "mem":
            return f"tt_bcast_{t}(&{code})"
        return f"tt_splat_{t}({code})"

    def vector(self, e: E.Expr) -> tuple[str, str]:
        """(code, kind): kind is 'vec', 'scalar', or 'mem' (a scalar load that can broadcast)."""
        v, lanes = self.active_vec()
        if v not in E.free_vars(e):
            if isinstance(e, E.TensorRead) and id(e.tensor) not in self.registers:
                return self.load(e.tensor, e.indices), "mem"
            return self.expr(e), "scalar"
        dt = e.dtype
        match e:
            case E.TensorRead(buf, idx):
                return self.vector_read(buf, idx), "vec"
            case E.Var():
                t = self.use_vec("int32", lanes)
                return f"(({t}){{{', '.join(str(k) for k in range(lanes))}}})", "vec"
            case E.Binary(op, a, b):
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
            case E.Compare(op, a, b):
                return f"({self.vexpr(a, a.dtype)} {CMP[op]} {self.vexpr(b, b.dtype)})", "vec"
            case E.Select(c, t_, f_):
                cc, kind = self.vector(c)
                t = self.use_vec(dt, lanes)
                if kind != "vec":
                    return f"({cc} ? {self.vexpr(t_, dt)} : {self.vexpr(f_, dt)})", "vec"
                if any(isinstance(n, E.TensorRead) for n in E.walk(c)):  # a data test, not padding
                    tv, fv = self.vexpr(t_, dt), self.vexpr(f_, dt)
                else:  # the reads of each branch are masked by the test (in a masked tail)
                    tv = self.masked_by(cc, _mask_of(c), t_, dt)
                    fv = self.masked_by(f"(~{cc})", _mask_of(c), f_, dt)
                cc = self.mask_as(cc, _mask_of(c), dtype(dt).mask)
                return f"tt_select_{t}({cc}, {tv}, {fv})", "vec"
            case E.Call(func, (x,), _):
                xv = self.vexpr(x, x.dtype)
                if func == "neg":
                    return f"(-{xv})", "vec"
                if func == "not":
                    return f"(~{xv})", "vec"
                return f"tt_{func}_{self.use_vec(dt, lanes, func)}({xv})", "vec"
            case E.Cast(x, _):
                t = self.use_vec(dt, lanes)
                xv = self.vexpr(x, x.dtype)
                if dt == "bool":
                    return f"({xv} != 0)", "vec"
                if x.dtype == "bool":  # lanes of -1 become 1
                    xv = f"(-{xv})"
                return f"__builtin_convertvector({xv}, {t})", "vec"
        raise LoweringError(f"cannot vectorize {e!r}")

    def masked_by(self, code: str, have: str, e: E.Expr, dt: str) -> str:
        """``vexpr(e)`` with its masked loads also masked by ``code`` (a padding test)."""
        self.masks.append((code, have))
        try:
            return self.vexpr(e, dt)
        finally:
            self.masks.pop()

    def vector_read(self, buf, idx: tuple[E.Expr, ...]) -> str:
        v, lanes = self.active_vec()
        dt = buf.dtype
        off = self.offset(buf, tuple(idx))
        stride = linear_coeff(off, v, self.ranges)
        t = self.use_vec(dt, lanes)
        if dt == "bool":  # one byte per element: gather and widen 0/1 to 0/-1
            lanes_code = [self.load_flat(buf, self.lane(off, k)) for k in range(lanes)]
            return f"(-(({t}){{{', '.join(lanes_code)}}}))"
        regs = self.registers.get(id(buf))
        if regs is not None:
            return regs.access(tuple(idx), self.ranges, self.vec)
        base = self.lane(off, 0)
        at = f"&{buf.name}[{self.expr(base)}]"
        masked = bool(self.masks) and dt in MASKED_DTYPES and not self.in_bounds(buf, idx)
        if stride == 1 and masked:
            self.use_vec(dt, lanes, "mask")
            return f"tt_maskload_{t}({at}, {self.mask_code(dt)})"
        if stride == 1:
            return f"tt_load_{t}({at})"
        if strided_load(stride, lanes):  # contiguous loads and shuffles, not a gather
            if masked:
                self.use_vec(dt, lanes, "mask")
                self.use_vec(dt, lanes, f"maskload{stride}")
                return f"tt_maskload{stride}_{t}({at}, {self.mask_code(dt)})"
            self.use_vec(dt, lanes, f"load{stride}")
            return f"tt_load{stride}_{t}({at})"
        lanes_code = [self.load_flat(buf, self.lane(off, k)) for k in range(lanes)]
        return f"(({t}){{{', '.join(lanes_code)}}})"

    def mask_as(self, code: str, have: str, want: str) -> str:
        """A lane mask of ``have``-wide elements as one of ``want``-wide elements."""
        if have == want:
            return code
        return f"__builtin_convertvector({code}, {self.use_vec(want, self.active_vec()[1])})"


def _mask_of(e: E.Expr) -> str:
    """Element type of the lane mask that a boolean vector expression evaluates to."""
    match e:
        case E.Compare(_, a, _):
            return dtype(a.dtype).mask
        case E.Binary("and" | "or", a, _) | E.Call("not", (a,)):
            return _mask_of(a)
        case E.Cast(x, "bool"):
            return dtype(x.dtype).mask
    return "int32"
