#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#elif defined(__ARM_NEON)
#include <arm_neon.h>
#endif

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
static inline int32_t tt_floordiv_i32(int32_t a, int32_t b) {
  int32_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int32_t tt_floormod_i32(int32_t a, int32_t b) {
  int32_t m = a % b;
  return (m != 0 && ((m < 0) != (b < 0))) ? m + b : m;
}
/* NaN in either operand gives NaN, as np.maximum / np.minimum: a NaN b is tested first (a
   predictable branch), then a < b ? b : a is one vmaxss, which keeps a NaN a */
#define TT_MAX(a, b) ((b) != (b) ? (b) : (a) < (b) ? (b) : (a))
#define TT_MIN(a, b) ((b) != (b) ? (b) : (b) < (a) ? (b) : (a))
