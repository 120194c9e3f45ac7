"""Run kernels built for another architecture under a user-mode emulator (qemu-user).

For checking correctness only: timings under emulation mean nothing, so none are taken. A small
standalone C driver, built for the target by its cross compiler, reads a manifest naming each
kernel's library, entry point and argument files, ``dlopen``s the library, fills the inputs from
raw little-endian files, calls ``<name>_packed`` and writes the outputs back. One emulator process
runs a whole batch, since starting qemu costs more than most kernels.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..build.compiler import compile_program
from ..build.kernel import ArgSpec
from ..errors import TensorTuneError
from ..target import Target, arch_of
from .base import Call

DRIVER_SOURCE = r"""
/* tensortune kernel driver: tt_driver MANIFEST. The manifest is one field per line:
   the number of kernels, then per kernel its library path, entry point (the _packed symbol),
   number of arguments and per argument "in" or "out", its size in bytes and its data file.
   Prints "done <index> <status>" after each kernel; exits non-zero on any failure. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*tt_packed_fn)(void**);

static char* field(FILE* f, char* buf, size_t size) {
    if (fgets(buf, (int)size, f) == NULL) { fprintf(stderr, "manifest truncated\n"); exit(3); }
    buf[strcspn(buf, "\n")] = 0;
    return buf;
}

static long number(FILE* f) {
    char buf[64];
    return strtol(field(f, buf, sizeof buf), NULL, 10);
}

int main(int argc, char** argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s MANIFEST\n", argv[0]); return 2; }
    FILE* manifest = fopen(argv[1], "r");
    if (manifest == NULL) { perror(argv[1]); return 2; }
    char path[4096], name[512], role[8];
    long kernels = number(manifest);
    for (long k = 0; k < kernels; ++k) {
        void* library = dlopen(field(manifest, path, sizeof path), RTLD_NOW | RTLD_LOCAL);
        if (library == NULL) { fprintf(stderr, "kernel %ld: %s\n", k, dlerror()); return 4; }
        tt_packed_fn fn = (tt_packed_fn)dlsym(library, field(manifest, name, sizeof name));
        if (fn == NULL) { fprintf(stderr, "kernel %ld: no symbol %s\n", k, name); return 4; }
        long nargs = number(manifest);
        void** args = calloc((size_t)nargs + 1, sizeof(void*));
        char (*files)[4096] = calloc((size_t)nargs + 1, sizeof *files);
        int* outputs = calloc((size_t)nargs + 1, sizeof(int));
        size_t* sizes = calloc((size_t)nargs + 1, sizeof(size_t));
        if (!args || !files || !outputs || !sizes) { fprintf(stderr, "out of memory\n"); return 5; }
        for (long a = 0; a < nargs; ++a) {
            outputs[a] = strcmp(field(manifest, role, sizeof role), "out") == 0;
            sizes[a] = (size_t)number(manifest);
            field(manifest, files[a], sizeof files[a]);
            args[a] = aligned_alloc(64, (sizes[a] + 64) / 64 * 64);
            if (args[a] == NULL) { fprintf(stderr, "out of memory\n"); return 5; }
            memset(args[a], 0xff, sizes[a]); /* poison: NaN where a kernel writes nothing */
            if (!outputs[a]) {
                FILE* in = fopen(files[a], "rb");
                if (in == NULL || fread(args[a], 1, sizes[a], in) != sizes[a]) {
                    fprintf(stderr, "kernel %ld: cannot read %s\n", k, files[a]);
                    return 6;
                }
                fclose(in);
            }
        }
        int status = fn(args);
        for (long a = 0; a < nargs; ++a) {
            if (outputs[a]) {
                FILE* out = fopen(files[a], "wb");
                if (out == NULL || fwrite(args[a], 1, sizes[a], out) != sizes[a]) {
                    fprintf(stderr, "kernel %ld: cannot write %s\n", k, files[a]);
                    return 6;
                }
                fclose(out);
            }
            free(args[a]);
        }
        free(args); free(files); free(outputs); free(sizes);
        /* never dlclose: unloading a library whose OpenMP team may still be parked crashes */
        printf("done %ld %d\n", k, status);
        fflush(stdout);
        if (status != 0) return 7;
    }
    return 0;
}
"""

DEFAULT_TIMEOUT = 600.0


class EmulationError(TensorTuneError):
    """The emulator is missing, or a kernel failed (crashed, returned an error) under it."""


def emulator(target: Target) -> list[str]:
    """The command prefix that runs the target's programs here: ``qemu-aarch64 -L SYSROOT``.

    Raises EmulationError saying what to install when the emulator or the target's libraries
    (the cross toolchain's sysroot: libc, libgomp, the dynamic loader) are missing.
    """
    arch = arch_of(target.isa)
    program = next((p for p in map(shutil.which, arch.emulators) if p), None)
    if program is None:
        tried = ", ".join(arch.emulators) or "none known"
        raise EmulationError(
            f"no emulator for {arch.name} on PATH (tried {tried}); "
            f"install one (`{arch.emulator_install}`)"
        )
    sysroot = next((s for s in arch.sysroots if Path(s, "lib").is_dir()), None)
    if sysroot is None:
        raise EmulationError(
            f"no {arch.name} libraries for the emulator (looked in {', '.join(arch.sysroots)}); "
            f"install the cross toolchain (`{arch.cross_install}`)"
        )
    return [program, "-L", sysroot]


def driver(target: Target) -> Path:
    """The kernel driver, built for the target by its (cross) compiler, through the cache."""
    return compile_program(DRIVER_SOURCE, target, ["-O2", "-std=gnu11"], ["-ldl"])


def run_emulated(
    target: Target, calls: Sequence[Call], timeout: float = DEFAULT_TIMEOUT
) -> list[tuple[np.ndarray, ...]]:
    """Run every kernel of `calls` once, in one emulator process; return their outputs.

    Raises EmulationError naming the kernel that failed, with the driver's error output.
    """
    if not calls:
        return []
    command = [*emulator(target), str(driver(target))]
    with tempfile.TemporaryDirectory(prefix="tensortune-emu-") as tmp:
        lines = [str(len(calls))]
        pending: list[list[tuple[Path, ArgSpec]]] = []
        for k, (artifact, inputs) in enumerate(calls):
            specs = [a for a in artifact.args if a.role == "input"]
            if len(inputs) != len(specs):
                raise EmulationError(
                    f"kernel {artifact.name!r} takes {len(specs)} inputs, got {len(inputs)}"
                )
            lines += [str(artifact.library), f"{artifact.name}_packed", str(len(artifact.args))]
            outputs: list[tuple[Path, ArgSpec]] = []
            given = iter(inputs)  # inputs come before outputs in every signature
            for a, spec in enumerate(artifact.args):
                file = Path(tmp, f"{k}-{a}.bin")
                size = int(np.prod(spec.shape, dtype=np.int64)) * np.dtype(spec.dtype).itemsize
                if spec.role == "input":
                    array = np.ascontiguousarray(next(given), dtype=spec.dtype)
                    if array.shape != spec.shape:
                        raise EmulationError(
                            f"kernel {artifact.name!r}: input {spec.name!r} has shape "
                            f"{array.shape}, expected {spec.shape}"
                        )
                    array.tofile(file)
                else:
                    outputs.append((file, spec))
                lines += ["out" if spec.role == "output" else "in", str(size), str(file)]
            pending.append(outputs)
        manifest = Path(tmp, "manifest")
        manifest.write_text("\n".join(lines) + "\n")
        env = {**os.environ, "OMP_NUM_THREADS": str(target.num_threads)}
        try:
            proc = subprocess.run(
                [*command, str(manifest)],
                capture_output=True,
                text=True,
                timeout=timeout,
                env=env,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise EmulationError(
                f"{len(calls)} kernels under {command[0]} took > {timeout:g} s"
            ) from exc
        done = [line.split() for line in proc.stdout.splitlines() if line.startswith("done ")]
        statuses = [int(fields[2]) for fields in done]
        if proc.returncode != 0:
            # the kernel after the last one done crashed, unless that one returned an error
            index = len(statuses) - 1 if statuses and statuses[-1] != 0 else len(statuses)
            failed = calls[min(index, len(calls) - 1)][0]
            why = f"returned status {statuses[-1]}" if index < len(statuses) else "failed"
            raise EmulationError(
                f"kernel {failed.name!r} ({failed.library}) {why} under {command[0]} "
                f"(exit {proc.returncode}):\n{proc.stderr.strip()[-2000:]}"
            )
        return [
            tuple(np.fromfile(file, dtype=spec.dtype).reshape(spec.shape) for file, spec in outs)
            for outs in pending
        ]
