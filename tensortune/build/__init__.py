"""C source to loaded kernel: cached compilation and a checked ctypes calling convention."""

from .compiler import CompileError, cache_dir, compile_library
from .kernel import ArgSpec, Kernel, pointer_array

__all__ = [
    "ArgSpec",
    "CompileError",
    "Kernel",
    "cache_dir",
    "compile_library",
    "pointer_array",
]
