"""The C allocator of a kernel's scratch buffers (packed operands, padded inputs, large local
tiles), emitted once in every translation unit's preamble.

A block freed at the end of a call is kept by the thread that freed it (8 slots per thread) and
handed back to the next call asking for the same size, so a kernel's time never depends on its
caller's malloc state: glibc maps fresh, faulting pages for every block above its mmap threshold
until some large block has been freed, and one GEMM's default ran 0.82 ms in a fresh process and
0.66 ms in a tuner's worker by that alone. Blocks of a page or more start on a page, as the
arrays tensortune places do (see `tensortune.memory`).
"""

SCRATCH = """\
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
"""
