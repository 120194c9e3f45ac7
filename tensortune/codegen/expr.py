"""Printing scalar expressions and buffer accesses as C."""

from __future__ import annotations

from ..dtype import dtype
from ..errors import LoweringError
from ..ir.nodes import Buffer
from ..ir.simplify import expr_range, flat_offset
from ..lower.registers import RegisterNames
from ..te import expr as E
from .preamble import scalar_call

_PREC = {"or": 1, "and": 2, "cmp": 3, "add": 4, "sub": 4, "mul": 5, "div": 5, "mod": 5}
_CSYM = {"add": "+", "sub": "-", "mul": "*", "div": "/", "and": "&&", "or": "||"}
CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


class ExprPrinter:
    """Scalar C for expressions; loop variables by their declared names, register buffers by
    the variables ``RegisterNames`` gives them."""

    ranges: dict[E.Var, int]
    var_names: dict[E.Var, str]
    registers: dict[int, RegisterNames]
    index_type: str
    divmod64: bool
    vec: tuple[E.Var, int] | None

    def offset(self, buf: Buffer, idx: tuple[E.Expr, ...]) -> E.Expr:
        return flat_offset(buf, idx, self.ranges)

    def load(self, buf: E.Storage, idx: tuple[E.Expr, ...]) -> str:
        if not isinstance(buf, Buffer):  # lowering replaces every DSL tensor by its Buffer
            raise LoweringError(f"read of {buf.name!r} was not lowered to a buffer")
        regs = self.registers.get(id(buf))
        if regs is not None:
            return regs.access(tuple(idx), self.ranges, None)
        return f"{buf.name}[{self.expr(self.offset(buf, tuple(idx)))}]"

    def load_flat(self, buf: Buffer, off: E.Expr) -> str:
        regs = self.registers.get(id(buf))
        if regs is not None:
            if not isinstance(off, E.Const):
                raise LoweringError(f"register buffer {buf.name}: offset {off!r} is not constant")
            return regs.name(int(off.value), 1)
        return f"{buf.name}[{self.expr(off)}]"

    def expr(self, e: E.Expr, parent: int = 0) -> str:
        match e:
            case E.Const(v, dt):
                return literal(v, dt)
            case E.Var():
                name = self.var_names.get(e)
                if name is None:
                    raise LoweringError(f"variable '{e.name}' is used outside its loop")
                return name
            case E.TensorRead(buf, idx):
                return self.load(buf, idx)
            case E.Binary("max" | "min" as op, a, b):
                return f"TT_{op.upper()}({self.expr(a)}, {self.expr(b)})"
            case E.Binary("floordiv" | "mod" as op, a, b, "int32"):
                sym = "/" if op == "floordiv" else "%"
                if self.nonneg(a) and self.nonneg(b):
                    return _paren(f"{self.expr(a, 5)} {sym} {self.expr(b, 6)}", 5, parent)
                wide = self.index_type == "int64_t"
                self.divmod64 |= wide
                helper = f"tt_floor{'div' if op == 'floordiv' else 'mod'}_i{64 if wide else 32}"
                return f"{helper}({self.expr(a)}, {self.expr(b)})"
            case E.Binary("floordiv", a, b, dt):
                return f"floor{'f' if dt == 'float32' else ''}({self.expr(a)} / {self.expr(b)})"
            case E.Binary("add", a, E.Const(v)) if isinstance(v, int | float) and v < 0:
                return _paren(f"{self.expr(a, 4)} - {literal(-v, e.dtype)}", 4, parent)
            case E.Binary(op, a, b):
                p = _PREC[op]
                return _paren(f"{self.expr(a, p)} {_CSYM[op]} {self.expr(b, p + 1)}", p, parent)
            case E.Compare(op, a, b):
                return _paren(f"{self.expr(a, 4)} {CMP[op]} {self.expr(b, 4)}", 3, parent)
            case E.Select(c, t, f):
                return f"({self.expr(c)} ? {self.expr(t)} : {self.expr(f)})"
            case E.Call(func, (x,), dt):
                return scalar_call(func, dt, self.expr(x))
            case E.Cast(v, dt):
                return f"(({dtype(dt).c_type})({self.expr(v)}))"
        raise LoweringError(f"cannot emit expression {e!r}")

    def nonneg(self, e: E.Expr) -> bool:
        """Whether ``e`` is never negative (then C's truncating ``/`` and ``%`` are floors)."""
        lanes = {self.vec[0]: self.vec[1]} if self.vec else {}
        r = expr_range(e, {**self.ranges, **lanes})
        return r is not None and r[0] >= 0


def literal(v: int | float | bool, dt: str) -> str:
    if dt == "bool":
        return "1" if v else "0"
    if not dtype(dt).is_float:
        return str(int(v))
    v = float(v)
    if v != v:
        return "NAN"
    if v in (float("inf"), float("-inf")):
        return ("-" if v < 0 else "") + "INFINITY"
    return repr(v) + ("f" if dt == "float32" else "")


def _paren(text: str, prec: int, parent: int) -> str:
    return f"({text})" if prec < parent else text
