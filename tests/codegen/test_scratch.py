"""The model workspace that kernels of a compiled model take their scratch blocks from:
blocks live at once never overlap, the block grows to the largest stack a kernel needed, and
from then on every block comes from it (warm memory, no malloc)."""

import subprocess

from tensortune.build.compiler import compile_program
from tensortune.codegen.scratch import MODEL_WORKSPACE, SCRATCH
from tensortune.target import Target

DRIVER = (
    r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define TT_MODEL_WORKSPACE
"""
    + SCRATCH
    + MODEL_WORKSPACE
    + r"""
static int inside(void* p) {
  unsigned char* c = (unsigned char*)p;
  return tt_ws_base != NULL && c >= tt_ws_base && c < tt_ws_base + tt_ws_size;
}
/* one "kernel": three blocks live at once, written whole, freed out of order */
static int kernel(size_t a, size_t b, size_t c, int* in_block) {
  unsigned char* x = tt_alloc(a);
  unsigned char* y = tt_alloc(b);
  unsigned char* z = tt_alloc(c);
  if (!x || !y || !z) return -1;
  memset(x, 1, a); memset(y, 2, b); memset(z, 3, c);
  for (size_t i = 0; i < a; ++i) if (x[i] != 1) return 1;
  for (size_t i = 0; i < b; ++i) if (y[i] != 2) return 1;
  if ((uintptr_t)y % (b >= 4096 ? 4096 : 64) != 0) return 2;
  *in_block = inside(x) && inside(y) && inside(z);
  tt_free(y, b); tt_free(x, a); tt_free(z, c);
  return 0;
}
int main(void) {
  int first = 0, later = 0, small = 0, status;
  if ((status = kernel(100000, 5000, 70, &first)) != 0) return 10 + status;
  if ((status = kernel(100000, 5000, 70, &later)) != 0) return 20 + status;
  if ((status = kernel(64, 3000, 10, &small)) != 0) return 30 + status;
  printf("%d %d %d %zu\n", first, later, small, tt_ws_size);
  return tt_ws_live == 0 && tt_ws_top == 0 ? 0 : 40;
}
"""
)


def test_blocks_come_from_one_workspace_once_it_has_grown():
    exe = compile_program(DRIVER, Target.detect(), ["-O1"])
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    first, later, small, size = map(int, run.stdout.split())
    assert first == 0  # the first call's blocks overflowed the empty workspace into malloc
    assert later == 1 and small == 1  # then one block serves every kernel's stack
    assert size >= 100000 + 5000 + 70
