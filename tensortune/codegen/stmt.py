"""Printing statements: loops, branches, stores, comments and the storage of local buffers."""

from __future__ import annotations

from ..dtype import dtype
from ..errors import LoweringError
from ..ir.nodes import Allocate, Buffer, Comment, For, IfThen, Seq, Stmt, Store
from ..lower.registers import NotPromotable, RegisterNames
from ..te.expr import Var
from .vector import VectorPrinter

STACK_LIMIT_BYTES = 128 * 1024
_COMMENT_SAFE = frozenset(map(chr, range(0x20, 0x7F))) - {"\\", "?"}


def comment_text(text: str) -> str:
    """``text`` made safe inside a C block comment: names and trace arguments reach comments and
    may come from a shared database, so no ``*/`` can end the comment and no backslash-newline
    (or ``??/`` trigraph) can splice lines; other characters are written as ``\\x<hex>``."""
    escaped = "".join(c if c in _COMMENT_SAFE else f"\\x{ord(c):02x}" for c in text)
    return escaped.replace("*/", "* /")


class StmtPrinter(VectorPrinter):
    """One C line per IR statement, indented like the IR: the passes decided everything."""

    lines: list[str]
    depth: int
    taken: set[str]
    num_threads: int

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

    def stmt(self, s: Stmt) -> None:
        match s:
            case Seq(stmts):
                for x in stmts:
                    self.stmt(x)
            case Comment(text):
                self.comment(text)
            case For(kind="vectorized"):
                self.vector_loop(s)
            case For():
                self.loop(s)
            case IfThen(cond, body, orelse):
                self.line(f"if ({self.expr(cond)}) {{")
                self.nested(body)
                if orelse is not None:
                    self.line("} else {")
                    self.nested(orelse)
                self.line("}")
            case Store(buf, idx, value):
                code = self.expr(value)  # reads first: the order RegisterNames saw them in
                regs = self.registers.get(id(buf))
                if regs is not None:
                    self.line(f"{regs.access(idx, self.ranges, None)} = {code};")
                else:
                    self.line(f"{buf.name}[{self.expr(self.offset(buf, idx))}] = {code};")
            case Allocate(buf, body):
                if buf.scope == "register":
                    self.register_tile(buf, body)
                else:
                    self.local_array(buf, body)
            case _:
                raise LoweringError(f"cannot emit {type(s).__name__}")

    def nested(self, body: Stmt) -> None:
        self.depth += 1
        self.stmt(body)
        self.depth -= 1

    def loop(self, s: For) -> None:
        if s.kind not in ("serial", "parallel"):
            raise LoweringError(f"loop {s.var.name} is still {s.kind}: run the lowering passes")
        name = self.declare(s.var)
        self.ranges[s.var] = s.extent
        if s.kind == "parallel":
            self.line(f"#pragma omp parallel for num_threads({self.num_threads}) schedule(static)")
        self.line(f"for ({self.index_type} {name} = 0; {name} < {s.extent}; ++{name}) {{")
        self.nested(s.body)
        self.line("}")

    def register_tile(self, buf: Buffer, body: Stmt) -> None:
        """A block declaring one variable per scalar or vector the tile is accessed as."""
        regs = RegisterNames(buf)
        saved, self.lines = self.lines, []
        self.registers[id(buf)] = regs
        self.depth += 1
        try:
            self.stmt(body)
        except NotPromotable as e:
            raise LoweringError(f"register tile {buf.name} was not checked by its pass") from e
        finally:
            self.depth -= 1
            del self.registers[id(buf)]
        body_lines, self.lines = self.lines, saved
        self.line("{")  # a block of its own: an unrolled loop may hold the same tile twice
        self.depth += 1
        self.comment(f"{buf.name}: {buf.dtype}{list(buf.shape)} held in registers")
        for (_, n, _), name in sorted(regs.names.items()):
            ctype = self.use_vec(buf.dtype, n) if n > 1 else dtype(buf.dtype).c_type
            self.line(f"{ctype} {name};")
        self.depth -= 1
        self.lines.extend(body_lines)
        self.line("}")

    def local_array(self, buf: Buffer, body: Stmt) -> None:
        ctype, size = dtype(buf.dtype).c_type, buf.nbytes
        self.line("{")
        self.depth += 1
        on_heap = size > STACK_LIMIT_BYTES
        if on_heap:
            self.line(f"{ctype}* restrict {buf.name} = ({ctype}*)tt_alloc({size});")
        else:
            self.line(f"{ctype} {buf.name}[{buf.size}] __attribute__((aligned(64)));")
        self.stmt(body)
        if on_heap:
            self.line(f"tt_free({buf.name}, {size});")
        self.depth -= 1
        self.line("}")
