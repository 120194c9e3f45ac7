"""The C allocator of a kernel's scratch buffers (packed operands, padded inputs, large local
tiles), emitted once in every translation unit's preamble.

A block freed at the end of a call is kept by the thread that freed it (8 slots per thread) and
handed back to the next call asking for the same size, so a kernel's time never depends on its
caller's malloc state: glibc maps fresh, faulting pages for every block above its mmap threshold
until some large block has been freed, and one GEMM's default ran 0.82 ms in a fresh process and
0.66 ms in a tuner's worker by that alone. Blocks of a page or more start on a page, as the
arrays tensortune places do (see `tensortune.memory`).

Inside a compiled model (kernels built with ``-DTT_MODEL_WORKSPACE``) the blocks come instead
from one workspace per thread that every kernel of the model shares (``MODEL_WORKSPACE``, in the
model's entry point): a kernel's padded input or packed panel then lands on memory the previous
kernel just used, warm in cache, as it is when the kernel is timed alone. With a pool per kernel
each kernel's blocks were cold by its next call (ResNet-18's 3x3 convs ran 10-15% slower in the
model than alone).
"""

WORKSPACE_FLAG = "-DTT_MODEL_WORKSPACE"
"""Compiles a kernel's ``tt_alloc``/``tt_free`` into calls of the model's shared workspace."""

SCRATCH = """\
#ifdef TT_MODEL_WORKSPACE
/* Scratch buffers come from the model's workspace (its entry point), shared by its kernels. */
void* tt_workspace_alloc(size_t bytes);
void tt_workspace_free(void* p);
static inline void* tt_alloc(size_t bytes) { return tt_workspace_alloc(bytes); }
static inline void tt_free(void* p, size_t bytes) { (void)bytes; tt_workspace_free(p); }
#else
/* Scratch buffers outlive the call: each thread keeps the last blocks it freed and takes one of
   the same size back on the next call, so a kernel's speed never depends on the caller's malloc
   state (glibc maps fresh, faulting pages for every large block until its threshold moves: one
   GEMM ran 0.82 or 0.66 ms per call by that alone). A block of a page or more starts on a page,
   as arrays do (see tensortune.memory). */
#define TT_SCRATCH_SLOTS 8
static __thread void* tt_scratch[TT_SCRATCH_SLOTS];
static __thread size_t tt_scratch_bytes[TT_SCRATCH_SLOTS];
static __thread unsigned tt_scratch_next;
static inline void* tt_alloc(size_t bytes) {
  bytes = (bytes + 63) / 64 * 64;
  for (int i = 0; i < TT_SCRATCH_SLOTS; ++i) {
    if (tt_scratch[i] != NULL && tt_scratch_bytes[i] == bytes) {
      void* p = tt_scratch[i];
      tt_scratch[i] = NULL;
      return p;
    }
  }
  size_t align = bytes >= 4096 ? 4096 : 64;
  return aligned_alloc(align, (bytes + align - 1) / align * align);
}
static inline void tt_free(void* p, size_t bytes) {
  if (p == NULL) return;
  unsigned slot = tt_scratch_next++ % TT_SCRATCH_SLOTS;
  for (unsigned i = 0; i < TT_SCRATCH_SLOTS; ++i) {
    if (tt_scratch[i] == NULL) { slot = i; break; }
  }
  free(tt_scratch[slot]);
  tt_scratch[slot] = p;
  tt_scratch_bytes[slot] = (bytes + 63) / 64 * 64;
}
#endif
"""

MODEL_WORKSPACE = """\
/* Kernels' scratch blocks, stacked on one block per thread that every kernel of the model
   reuses, so each finds its scratch warm from the kernel before. A kernel frees all its blocks
   by its end; when none is outstanding, the block grows to the largest stack seen (until then
   an overflowing block comes from malloc). Hidden: each model's library has its own. */
static __thread unsigned char* tt_ws_base;
static __thread size_t tt_ws_size, tt_ws_top, tt_ws_peak;
static __thread unsigned tt_ws_live;
__attribute__((visibility("hidden"))) void* tt_workspace_alloc(size_t bytes) {
  size_t align = bytes >= 4096 ? 4096 : 64;
  size_t start = (tt_ws_top + align - 1) / align * align;
  size_t end = start + (bytes + 63) / 64 * 64;
  if (tt_ws_live == 0 && tt_ws_peak > tt_ws_size) {
    free(tt_ws_base);
    tt_ws_size = (tt_ws_peak + 4095) / 4096 * 4096;
    tt_ws_base = (unsigned char*)aligned_alloc(4096, tt_ws_size);
    if (tt_ws_base == NULL) tt_ws_size = 0;
  }
  if (end > tt_ws_peak) tt_ws_peak = end;
  void* p = end <= tt_ws_size ? tt_ws_base + start
                              : aligned_alloc(align, (bytes + align - 1) / align * align);
  if (p != NULL) {
    tt_ws_top = end;
    ++tt_ws_live;
  }
  return p;
}
__attribute__((visibility("hidden"))) void tt_workspace_free(void* p) {
  if (p == NULL) return;
  unsigned char* c = (unsigned char*)p;
  if (tt_ws_base == NULL || c < tt_ws_base || c >= tt_ws_base + tt_ws_size) free(p);
  if (--tt_ws_live == 0) tt_ws_top = 0;
}
"""
