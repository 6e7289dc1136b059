/* attend_int_inline.h — internal to the integer attention kernels (attend_int_avx2.c, attend_int_avx512.c): the
 * levels both widths quantise to, the run of rows a value pass weighs at once, the scratch layout of a run's weights,
 * the per-tile kernel types, and the two horizontal reductions whose order both widths must share (a float sum's bits
 * depend on its order). */
#ifndef TG_KVCACHE_ATTEND_INT_INLINE_H
#define TG_KVCACHE_ATTEND_INT_INLINE_H

#include "kvcache/attend_kernels.h"

#if TG_HAVE_AVX2

#include <immintrin.h>

#define TG_INLINE static inline __attribute__((always_inline))

#define KEY_Q8 8191  /* int8 keys' query levels: D * 255 * 8192 fits int32 for head dims up to 1024 */
#define KEY_Q 127    /* int4 / int2 keys' query levels */
#define VAL_W8 16383 /* int8 values' weight levels (a run's sums: 32 * 255 * 16383 fits int32) */
#define VAL_W 255    /* int4 / int2 values' weight levels */
#define RUN 32       /* rows per value run */

/* One run's weights (in the caller's scratch): rows [R, R + 32) of the tile, those outside [t0, t0 + count) weighing
 * nothing. lo / hi [gq][8]: the byte operands of each 4-row group (head j's at j * 8); dw, zs [gq]. */
typedef struct {
    int32_t *lo, *hi;
    float *dw, *zs;
} run_weights;
_Static_assert(RUN / 4 == 8, "a run's weights are one 32-byte store per head");

/* Set k (0 or 1) of a value pass's two runs' weights in its scratch (TG_ATTN_INT_SCRATCH_WORDS: 18 words per head
 * each), so that the next run's are prepared while this run's sums are taken. */
TG_INLINE run_weights run_weights_in(int32_t *scratch, int gq, int k) {
    int32_t *base = scratch + (int64_t)k * 18 * gq;
    return (run_weights){base, base + 8 * gq, (float *)(void *)(base + 16 * gq), (float *)(void *)(base + 17 * gq)};
}

/* The per-tile kernels, one instance per code width (and head dim for the query preparation). */
typedef void tg_attn_int_prepare_fn(const float *qh, int gq, int64_t D, const uint16_t *gscale, const uint16_t *gzero,
                                    tg_attn_int_queries *q);
typedef void tg_attn_int_scores_fn(const tg_attn_tile *t, const tg_attn_int_queries *q, int gq, int64_t D, float *sc,
                                   int64_t ld);
/* The run of rows [R, last) of tile t (last = R + RUN, or the segment's end): its row quads (rounded up), and in *full
 * (unless NULL) whether every 8-row vector of it lies in the tile's segment (no masks needed). */
TG_INLINE int64_t run_quads(const tg_attn_tile *t, int64_t R, int *full) {
    const int64_t end = t->t0 + t->count, last = R + RUN < end ? R + RUN : end;
    if (full) *full = R >= t->t0 && (last - R) % 8 == 0;
    return (last - R + 3) / 4;
}

/* A value pass, one run of rows [R, R + RUN) of tile t at a time (R: a multiple of 8; the rows outside
 * [t0, t0 + count) weigh nothing): prepare_run quantises the run's weights p[j * ld + row - t0] (the tile's scale and
 * zero at tscale / tzero + row - t0) into rw; values_run adds the run's value sums into o[gq][D]. */
typedef void tg_attn_int_prepare_run_fn(const tg_attn_tile *t, int64_t R, const float *p, int64_t ld, int gq,
                                        const uint16_t *tscale, const uint16_t *tzero, const run_weights *rw);
typedef void tg_attn_int_values_run_fn(const tg_attn_tile *t, int64_t R, const run_weights *rw, int gq, int64_t D,
                                       float *o);

/* max over the eight lanes (exact in any order) */
TG_INLINE float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

/* ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)): the one order of both widths */
TG_INLINE float hsum8(__m256 v) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__) &&               \
    defined(__AVX512VNNI__)
#define TG_ATTN_INT512 1
/* attend_int_avx512.c: the 512-bit instances, the bits of the 256-bit ones. Scores need tiles of a multiple of 16
 * rows, values a multiple of 16 int32 lanes per row quad (head dim / codes per byte), or 8 lanes for int4 / int2
 * codes (two quads a register). */
tg_attn_int_prepare_fn *tg_attn_int512_prepare_for(int bits, int64_t D);
tg_attn_int_scores_fn *tg_attn_int512_scores_for(int bits);
tg_attn_int_prepare_run_fn *tg_attn_int512_prepare_run_for(int bits);
tg_attn_int_values_run_fn *tg_attn_int512_values_run_for(int bits);
#else
#define TG_ATTN_INT512 0
#endif

#endif
#endif
