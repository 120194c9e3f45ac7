"""The compiled model as one shared library: every kernel compiled to an object file with its own
schedule's flags, plus a generated C entry point that runs them in order on the planned arena.

The entry point, ``<model>_run_with(weights, arena, inputs, outputs)``, narrows int64 inputs to
the kernels' int32 (checking the range), calls each kernel with pointers into the weights
buffer, the inputs and the arena, and copies the outputs out: Python makes one call per
inference, and a C program needs no Python at all (``<model>_init`` / ``<model>_run``).

The weights buffer is the weights file's bytes followed by the packed copies of the weights
(``W_pack`` of a convolution, ``B_pack`` of a GEMM): ``<model>_prepack(weights)`` fills them
once, calling each kernel's ``_prepack`` function, so no inference repacks a constant.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..build.compiler import compile_program
from ..build.kernel import ArgSpec
from ..dtype import dtype
from ..lower import PREPACK_SUFFIX
from ..target import Target
from ..te.tensor import sanitize
from .ir import Graph, ValueInfo

STATUS = {
    0: "success",
    2: "an int64 input holds a value beyond int32",
    3: "not initialised (call <model>_init first)",
    4: "cannot read the weights file, or its size is wrong",
}
"""The entry point's return codes; a kernel's own nonzero status (-1: out of memory) passes
through."""


@dataclass(frozen=True)
class KernelUnit:
    """One kernel of the model: its C function, source, signature and object file."""

    name: str
    source: str
    args: tuple[ArgSpec, ...]
    flags: tuple[str, ...]
    obj: Path
    tuned: bool  # built from a tuning database record, not a default schedule
    prepack: tuple[ArgSpec, ...] = ()
    """The signature of ``<name>_prepack`` (constant inputs, then the packed buffers the kernel
    reads), or empty: the kernel packs nothing once."""

    @property
    def inputs(self) -> tuple[ArgSpec, ...]:
        return tuple(a for a in self.args if a.role == "input")

    @property
    def packed(self) -> tuple[str, ...]:
        """Names of the kernel's inputs that ``<name>_prepack`` fills."""
        return tuple(a.name for a in self.prepack if a.role == "output")

    @property
    def outputs(self) -> tuple[ArgSpec, ...]:
        return tuple(a for a in self.args if a.role == "output")


@dataclass(frozen=True)
class Place:
    """Where a value lives at run time: ``input`` (index), ``weights`` or ``arena`` (offset)."""

    region: str
    offset: int
    dtype: str  # the kernels' dtype of the value


@dataclass(frozen=True)
class Call:
    """One kernel call of the run (or, ``prepack``, of ``<model>_prepack``): the unit, its
    argument values and a comment."""

    unit: KernelUnit
    values: tuple[str, ...]  # graph values, inputs then the output (prepack: packed values)
    note: str
    prepack: bool = False

    @property
    def function(self) -> str:
        """The C function called: the kernel, or its ``_prepack``."""
        return self.unit.name + (PREPACK_SUFFIX if self.prepack else "")


def compile_object(source: str, flags: Sequence[str], target: Target) -> Path:
    """A kernel's C compiled (through the verified cache) into a position-independent object
    file, with the target's flags and the schedule's own."""
    base = [f for f in target.cflags if f != "-shared"]
    return compile_program(source, target, [*base, *flags, "-c"], libraries=())


def link_library(entry: str, objects: Sequence[Path], target: Target) -> Path:
    """The entry point and every kernel object linked into one shared library (cached)."""
    return compile_program(entry, target, list(target.cflags), [*map(str, objects), "-lm"])


def c_name(name: str) -> str:
    """The model's name as a C identifier prefix."""
    return sanitize(name).lower()


def _prototype(call: Call) -> str:
    head = f"int {call.function}("
    line = next(x for x in call.unit.source.splitlines() if x.startswith(head))
    return line[: line.rindex(")") + 1] + ";"


class _Names:
    """C locals named after graph values, unique (never one of the entry point's own names)."""

    def __init__(self) -> None:
        self.taken = {"inputs", "outputs", "weights", "arena", "w", "m", "i", "v", "status"}
        self.of: dict[str, str] = {}

    def __call__(self, value: str) -> str:
        if value not in self.of:
            base = sanitize(value.strip("/").replace("/", "_"))
            name, k = base, 1
            while name in self.taken:
                k += 1
                name = f"{base}_{k}"
            self.taken.add(name)
            self.of[value] = name
        return self.of[value]


def entry_source(
    model: str,
    graph: Graph,
    places: dict[str, Place],
    calls: Sequence[Call],
    staging: dict[str, int],
    sizes: Sizes,
    prepacks: Sequence[Call] = (),
) -> str:
    """The C entry point of a model named ``model`` (a C prefix)."""
    names = _Names()
    functions = {c.function: c for c in (*prepacks, *calls)}
    units = {c.unit.name for c in calls}
    out = [
        f"/* Generated by tensortune: model {graph.name!r}, {len(calls)} kernel calls of "
        f"{len(units)} kernels,",
        f" * {sizes.arena} arena bytes, {sizes.weights} weights bytes, {sizes.packed} bytes of "
        "weights packed once. */",
        "#include <stdint.h>",
        "#include <stdio.h>",
        "#include <stdlib.h>",
        "#include <string.h>",
        "",
        *(_prototype(c) for c in functions.values()),
        "",
        *_prepack_source(model, places, prepacks),
        "",
        f"int {model}_run_with(const void* weights, void* arena, const void* const* inputs, "
        "void* const* outputs) {",
        "  const unsigned char* w = (const unsigned char*)weights;",
        "  unsigned char* m = (unsigned char*)arena;",
        "  int status;",
        "  (void)w;",
    ]
    declared: set[str] = set()

    def pointer(value: str) -> str:
        place = places[value]
        if place.region == "input" and value != graph.inputs[place.offset].name:
            return pointer(graph.inputs[place.offset].name)  # a view: the (staged) input itself
        local = names(value)
        if local in declared:
            return local
        declared.add(local)
        ct = dtype(place.dtype).c_type
        if place.region == "input":
            expr = f"(const {ct}*)inputs[{place.offset}]"
            info = graph.inputs[place.offset]
            if value in staging:
                expr = f"({ct}*)(m + {staging[value]})"
            out.append(f"  const {ct}* {local} = {expr};")
            if value in staging:
                out.append(_narrow(info, place.offset, local))
        elif place.region == "weights":
            out.append(f"  const {ct}* {local} = (const {ct}*)(w + {place.offset});")
        else:
            out.append(f"  {ct}* {local} = ({ct}*)(m + {place.offset});")
        return local

    for info in graph.inputs:
        if info.name in places:
            pointer(info.name)
    for call in calls:
        args = [pointer(v) for v in call.values]
        out.append(f"  /* {call.note.replace('*/', '* /')} */")
        out.append(f"  if ((status = {call.unit.name}({', '.join(args)})) != 0) return status;")
    for k, info in enumerate(graph.outputs):
        src = pointer(info.name)
        have = places[info.name].dtype
        if have == info.dtype:
            nbytes = info.size * np.dtype(info.dtype).itemsize
            out.append(f"  memcpy(outputs[{k}], {src}, {nbytes});  /* output {info.name!r} */")
        else:
            ct = dtype(info.dtype).c_type
            out.append(
                f"  for (long i = 0; i < {info.size}; ++i) (({ct}*)outputs[{k}])[i] = "
                f"({ct}){src}[i];  /* output {info.name!r} */"
            )
    out += ["  return 0;", "}", "", _standalone(model, sizes)]
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class Sizes:
    """Bytes of a model's arena, of its weights file and of the packed weights after them."""

    arena: int
    weights: int
    packed: int = 0


def _prepack_source(model: str, places: dict[str, Place], prepacks: Sequence[Call]) -> list[str]:
    """``<model>_prepack(weights)``: every kernel's prepack function on its weights, filling
    the packed region after the file's bytes."""
    out = [f"int {model}_prepack(void* weights) {{"]
    if not prepacks:
        return [*out, "  (void)weights;", "  return 0;", "}"]
    out += ["  unsigned char* w = (unsigned char*)weights;", "  int status;"]
    for call in prepacks:
        args = []
        for k, value in enumerate(call.values):
            place = places[value]
            ct = dtype(place.dtype).c_type
            const = "const " if call.unit.prepack[k].role == "input" else ""
            args.append(f"({const}{ct}*)(w + {place.offset})")
        out.append(f"  /* {call.note.replace('*/', '* /')} */")
        out.append(f"  if ((status = {call.function}({', '.join(args)})) != 0) return status;")
    return [*out, "  return 0;", "}"]


def _narrow(info: ValueInfo, index: int, local: str) -> str:
    """Convert an input to the kernels' int32 (an int64 one checked against int32's range)."""
    ct = dtype(info.dtype).c_type
    check = "    if (v < INT32_MIN || v > INT32_MAX) return 2;\n" if info.dtype == "int64" else ""
    return (
        f"  for (long i = 0; i < {info.size}; ++i) {{  /* {info.name}: {info.dtype} to int32 */\n"
        f"    {ct} v = ((const {ct}*)inputs[{index}])[i];\n{check}"
        f"    ((int32_t*){local})[i] = (int32_t)v;\n  }}"
    )


def _standalone(model: str, sizes: Sizes) -> str:
    """``<model>_init(path)``, ``<model>_run(inputs, outputs)``, ``<model>_free()``: the
    model with weights read from a file (and packed once) and an arena of its own, for C
    programs."""
    weights_bytes, arena_bytes = sizes.weights, sizes.arena
    return f"""\
static void* {model}_weights;
static void* {model}_arena;

void {model}_free(void) {{
  free({model}_weights);
  free({model}_arena);
  {model}_weights = {model}_arena = NULL;
}}

int {model}_init(const char* weights_path) {{
  {model}_free();
  {model}_weights = aligned_alloc(64, {max(64, aligned(weights_bytes + sizes.packed))});
  {model}_arena = aligned_alloc(64, {max(64, -(-arena_bytes // 64) * 64)});
  if (!{model}_weights || !{model}_arena) {{ {model}_free(); return -1; }}
  FILE* f = fopen(weights_path, "rb");
  size_t got = f ? fread({model}_weights, 1, {weights_bytes}, f) : 0;
  int extra = f ? fgetc(f) != EOF : 1;
  if (f) fclose(f);
  if (got != {weights_bytes} || extra) {{ {model}_free(); return 4; }}
  int status = {model}_prepack({model}_weights);
  if (status) {model}_free();
  return status;
}}

int {model}_run(const void* const* inputs, void* const* outputs) {{
  if (!{model}_weights) return 3;
  return {model}_run_with({model}_weights, {model}_arena, inputs, outputs);
}}"""


def header_source(model: str, graph: Graph, sizes: Sizes) -> str:
    """The C header of an exported model: entry points, shapes and sizes."""
    guard = f"TENSORTUNE_{model.upper()}_H"
    up = model.upper()
    lines = [
        f"/* {model}: model {graph.name!r} compiled by tensortune.",
        f' * {model}_init("{model}.weights") once, then {model}_run(inputs, outputs) per',
        " * inference: one pointer per input and output, in the order below, each a dense",
        " * C-contiguous array. Return codes: "
        + "; ".join(f"{k} {v}" for k, v in STATUS.items())
        + ". */",
        f"#ifndef {guard}",
        f"#define {guard}",
        "",
        f"#define {up}_NUM_INPUTS {len(graph.inputs)}",
        f"#define {up}_NUM_OUTPUTS {len(graph.outputs)}",
        f"#define {up}_ARENA_BYTES {sizes.arena}",
        f"#define {up}_WEIGHTS_BYTES {sizes.weights}",
        f"#define {up}_PACKED_BYTES {sizes.packed}",
    ]
    for role, infos in (("INPUT", graph.inputs), ("OUTPUT", graph.outputs)):
        for k, v in enumerate(infos):
            p = f"{up}_{role}{k}"
            dims = ", ".join(map(str, v.shape)) or "1"
            lines += [
                f"/* {role.lower()} {k}: {v.name!r} {v.dtype} {list(v.shape)} */",
                f'#define {p}_NAME "{v.name}"',
                f"#define {p}_TYPE {dtype(v.dtype).c_type}",
                f"#define {p}_SIZE {v.size}",
                f"#define {p}_RANK {len(v.shape)}",
                f"#define {p}_SHAPE {{{dims}}}",
            ]
    lines += [
        "",
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
        f"int {model}_init(const char* weights_path);",
        f"int {model}_run(const void* const* inputs, void* const* outputs);",
        f"void {model}_free(void);",
        f"/* Reentrant form: your weights buffer ({up}_WEIGHTS_BYTES + {up}_PACKED_BYTES bytes,",
        f" * 64-byte aligned: the file's bytes, then {model}_prepack fills the rest once) and",
        f" * arena ({up}_ARENA_BYTES bytes, 64-byte aligned; one per concurrent caller). */",
        f"int {model}_prepack(void* weights);",
        f"int {model}_run_with(const void* weights, void* arena, const void* const* inputs, "
        "void* const* outputs);",
        "#ifdef __cplusplus",
        "}",
        "#endif",
        f"#endif /* {guard} */",
    ]
    return "\n".join(lines) + "\n"


def pack_weights(arrays: dict[str, np.ndarray]) -> tuple[dict[str, int], bytes]:
    """Each array's offset in one buffer (64-byte aligned, in the given order) and the bytes."""
    offsets: dict[str, int] = {}
    chunks: list[bytes] = []
    size = 0
    for name, array in arrays.items():
        offsets[name] = size
        data = np.ascontiguousarray(array).tobytes()
        padded = -(-len(data) // 64) * 64 if data else 0
        chunks.append(data + bytes(padded - len(data)))
        size += padded
    return offsets, b"".join(chunks)


def kernel_c_name(model: str, index: int, ops: Sequence[str]) -> str:
    """A kernel's C function: the model prefix, its index and its ops (``m_03_conv_add_relu``)."""
    words = [re.sub(r"[^a-z0-9]", "", op.lower())[:12] for op in ops[:4]]
    return f"{model}_{index:02d}_{'_'.join(words)}"


def aligned(n: int, to: int = 64) -> int:
    return -(-n // to) * to if n else 0


def nbytes(info: ValueInfo, dtype: str) -> int:
    return math.prod(info.shape) * np.dtype(dtype).itemsize


__all__ = [
    "STATUS",
    "Call",
    "KernelUnit",
    "Place",
    "Sizes",
    "compile_object",
    "entry_source",
    "header_source",
    "kernel_c_name",
    "link_library",
    "pack_weights",
]
