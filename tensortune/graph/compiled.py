"""A loaded model: the shared library ``compile_model`` (`tensortune.graph.model`) built, its
weights packed once into memory that lives as long as the model, and one arena the kernels run on.

A call checks the inputs in Python and makes one C call; ``export(dir)`` writes the library, a
header and the weights so a C program can run the model with no Python at all.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .entry import header_source
from .errors import ModelError
from .ir import Graph, ValueInfo
from .library import STATUS, Call, Place, Sizes
from .memory import MemoryPlan, arena
from .profile import ModelProfile, collect, random_feeds

_PTRS = ctypes.POINTER(ctypes.c_void_p)


class CompiledModel:
    """``model(x)`` for a single-input model (or ``model(x, y, ...)`` in input order) returns
    the output array (a tuple for several); ``model.run({name: array})`` returns a dict."""

    def __init__(
        self, graph: Graph, name: str, calls: list[Call], memory: MemoryPlan, **built: Any
    ):
        self.graph = graph
        self.name = name  # the C prefix of the library's symbols
        self.memory = memory  # arena bytes (memory.size) against no reuse (memory.unplanned)
        self.steps = calls
        self.kernels = {c.unit.name: c.unit for c in calls}
        self.places: dict[str, Place] = built["places"]
        self.library: Path = built["library"]
        self.entry: str = built["entry"]  # the generated C entry point
        self.sizes: Sizes = built["sizes"]
        self._weights: np.ndarray = built["weights"]  # the file's bytes, then the packed ones
        self.arena = arena(self.sizes.arena)
        self._lib = ctypes.CDLL(str(self.library))
        prepack = getattr(self._lib, f"{name}_prepack")
        prepack.argtypes = [ctypes.c_void_p]
        prepack.restype = ctypes.c_int
        status = prepack(self._weights.ctypes.data)
        if status != 0:
            raise ModelError(f"packing the weights failed with status {status} (out of memory)")
        self._run = getattr(self._lib, f"{name}_run_with")
        self._run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, _PTRS, _PTRS]
        self._run.restype = ctypes.c_int
        self._timed = getattr(self._lib, f"{name}_run_timed")
        self._timed.argtypes = [ctypes.c_void_p, ctypes.c_void_p, _PTRS, _PTRS, ctypes.c_void_p]
        self._timed.restype = ctypes.c_int
        self._lock = threading.Lock()  # one arena: calls from several threads take turns
        # what every call passes, made once: a call of a small model (DQN: 90 us) spent 10 us
        # in Python building these
        self._names = frozenset(v.name for v in self.inputs)
        self._fixed = (self._weights.ctypes.data, self.arena.ctypes.data)
        self._in_ptrs = (ctypes.c_void_p * max(1, len(self.inputs)))()
        self._out_ptrs = (ctypes.c_void_p * max(1, len(self.outputs)))()

    @property
    def inputs(self) -> tuple[ValueInfo, ...]:
        return self.graph.inputs

    @property
    def outputs(self) -> tuple[ValueInfo, ...]:
        return self.graph.outputs

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Run once; every output by name (fresh arrays)."""
        return self._invoke(feeds)

    def profile(
        self, feeds: Mapping[str, np.ndarray] | None = None, rounds: int = 50
    ) -> ModelProfile:
        """Each kernel call's median time inside the model's run (same arena, order and
        inputs), over ``rounds`` rounds alternating with whole runs; ``feeds`` default to
        random inputs."""
        feeds = random_feeds(self.inputs) if feeds is None else feeds

        def whole() -> float:
            start = time.perf_counter()
            self.run(feeds)
            return time.perf_counter() - start

        def timed(seconds: np.ndarray) -> object:
            return self._invoke(feeds, seconds)

        groups = [c.group for c in self.steps]
        kernels = [c.unit.name for c in self.steps]
        return collect(self.graph, groups, kernels, timed, whole, rounds)

    def _invoke(
        self, feeds: Mapping[str, np.ndarray], seconds: np.ndarray | None = None
    ) -> dict[str, np.ndarray]:
        """One run through ``<model>_run_with``, or with ``seconds`` (float64, one per kernel
        call) through ``<model>_run_timed``."""
        if feeds.keys() != self._names:
            extra = sorted(set(feeds) - self._names)
            missing = sorted(self._names - set(feeds))
            raise ModelError(
                f"model inputs are {sorted(self._names)}; missing {missing}, unknown {extra}"
            )
        ins = [self._checked(info, feeds[info.name]) for info in self.inputs]
        outs = [np.empty(v.shape, v.dtype) for v in self.outputs]
        with self._lock:
            for k, array in enumerate(ins):
                self._in_ptrs[k] = array.ctypes.data
            for k, array in enumerate(outs):
                self._out_ptrs[k] = array.ctypes.data
            args = (*self._fixed, self._in_ptrs, self._out_ptrs)
            if seconds is None:
                status = self._run(*args)
            else:
                status = self._timed(*args, seconds.ctypes.data)
        if status == 2:
            raise ModelError("an int64 input holds values beyond int32 (kernels index in int32)")
        if status != 0:
            raise ModelError(
                f"the model returned status {status}: {STATUS.get(status, 'a kernel failed')}"
            )
        return {v.name: a for v, a in zip(self.outputs, outs, strict=True)}

    def __call__(self, *arrays: Any) -> Any:
        """Arrays in input order -> the output (a tuple for several); one mapping of input
        names to arrays -> ``run``'s dict."""
        if len(arrays) == 1 and isinstance(arrays[0], Mapping):
            return self.run(arrays[0])
        if len(arrays) != len(self.inputs):
            names = ", ".join(f"{v.name} {v.shape} {v.dtype}" for v in self.inputs)
            raise ModelError(
                f"the model takes {len(self.inputs)} input(s) ({names}), got {len(arrays)}"
            )
        out = self.run({v.name: a for v, a in zip(self.inputs, arrays, strict=True)})
        values = tuple(out[v.name] for v in self.outputs)
        return values[0] if len(values) == 1 else values

    @staticmethod
    def _checked(info: ValueInfo, array: Any) -> np.ndarray:
        array = np.asarray(array)
        if array.shape != info.shape or array.dtype != np.dtype(info.dtype):
            raise ModelError(
                f"input '{info.name}' must be {info.shape} {info.dtype}, "
                f"got {array.shape} {array.dtype}"
            )
        return np.ascontiguousarray(array)

    def export(self, directory: str | os.PathLike[str]) -> dict[str, Path]:
        """Write ``lib<name>.so``, ``<name>.h``, ``<name>.weights`` and the entry point's C
        source ``<name>.c`` into ``directory``: everything a C program needs to run the model."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        files = {
            "library": out / f"lib{self.name}.so",
            "header": out / f"{self.name}.h",
            "weights": out / f"{self.name}.weights",
            "source": out / f"{self.name}.c",
        }
        shutil.copyfile(self.library, files["library"])
        files["library"].chmod(0o755)
        files["header"].write_text(header_source(self.name, self.graph, self.sizes))
        files["weights"].write_bytes(self._weights[: self.sizes.weights].tobytes())
        files["source"].write_text(self.entry)
        return files

    def benchmark(self, feeds: Mapping[str, np.ndarray], repeat: int = 10) -> float:
        """Median seconds of ``repeat`` runs after one warm-up."""
        self.run(feeds)
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            self.run(feeds)
            times.append(time.perf_counter() - start)
        return float(np.median(times))

    def __repr__(self) -> str:
        calls, kernels = len(self.steps), len(self.kernels)
        return f"CompiledModel({self.graph.name!r}: {calls} kernel calls, {kernels} kernels)"


__all__ = ["CompiledModel"]
