/* attend_int_inline.h — internal to the integer attention kernels (attend_int_avx2.c, attend_int_avx512.c): the
 * levels both widths quantise to, the run of rows a value pass weighs at once, the scratch layout of a run's weights,
 * the per-tile kernel types, the two horizontal reductions whose order both widths must share (a float sum's bits
 * depend on its order), and one head's query and run-weight preparation in eight lanes, which both widths take. */
#ifndef TG_KVCACHE_ATTEND_INT_INLINE_H
#define TG_KVCACHE_ATTEND_INT_INLINE_H

#include "kvcache/attend_kernels.h"

#if TG_HAVE_AVX2

#include <immintrin.h>
#include <math.h>

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

/* Where an instance table (rows: code widths 8, 4, 2; columns, where it has them: head dims 32, 64, 128, any other)
 * keeps the instance for codes of `bits` bits and head dim D. */
TG_INLINE int width_row(int bits) { return bits == 8 ? 0 : bits == 4 ? 1 : 2; }
TG_INLINE int dim_column(int64_t D) { return D == 32 ? 0 : D == 64 ? 1 : D == 128 ? 2 : 3; }
/* Such a table's initializer, for instances named NAME_b<width>_d<head dim, 0: any other>. */
#define TG_ATTN_INT_TABLE(NAME)                                                                                       \
    {{NAME##_b8_d32, NAME##_b8_d64, NAME##_b8_d128, NAME##_b8_d0},                                                    \
     {NAME##_b4_d32, NAME##_b4_d64, NAME##_b4_d128, NAME##_b4_d0},                                                    \
     {NAME##_b2_d32, NAME##_b2_d64, NAME##_b2_d128, NAME##_b2_d0}}
/* X(B, DD) for every entry of such a table, in its order: the instances a file defines. */
#define TG_ATTN_INT_INSTANCES(X)                                                                                      \
    X(8, 32) X(8, 64) X(8, 128) X(8, 0) X(4, 32) X(4, 64) X(4, 128) X(4, 0) X(2, 32) X(2, 64) X(2, 128) X(2, 0)
/* `TYPE *FN(int bits, int64_t D)`: the instance NAME_b<width>_d<head dim> of such a table for codes of `bits` bits
 * and head dim D. */
#define TG_ATTN_INT_LOOKUP(TYPE, FN, NAME)                                                                            \
    TYPE *FN(int bits, int64_t D) {                                                                                   \
        static TYPE *const table[3][4] = TG_ATTN_INT_TABLE(NAME);                                                     \
        return table[width_row(bits)][dim_column(D)];                                                                 \
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

/* v[0..3] (eight int32 each, all within a byte's range: unsigned, or signed when sgn) as 32 bytes in order: dst[0..8)
 * are the int32 words of bytes v[0][0..3], v[0][4..7], v[1][0..3], ... */
TG_INLINE void pack_bytes(const __m256i *v, const int sgn, int32_t *dst) {
    const __m256i a = sgn ? _mm256_packs_epi32(v[0], v[1]) : _mm256_packus_epi32(v[0], v[1]);
    const __m256i b = sgn ? _mm256_packs_epi32(v[2], v[3]) : _mm256_packus_epi32(v[2], v[3]);
    const __m256i c = sgn ? _mm256_packs_epi16(a, b) : _mm256_packus_epi16(a, b);
    _mm256_storeu_si256((__m256i *)(void *)dst, _mm256_permutevar8x32_epi32(c, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

/* Query head j of a key segment, folded and quantised into q (tg_attn_int_prepare_keys' arithmetic, one head in eight
 * lanes): x its n floats (n a multiple of 32), sv / zv the segment grid's scales and zeros widened (n / 8 vectors).
 * attend_int_avx2.c takes every head through it, attend_int_avx512.c an odd last head (its pairs of heads in one
 * register do these operations lane for lane). */
TG_INLINE void prepare_key_head(const float *x, int64_t n, const __m256 *sv, const __m256 *zv, const int bits,
                                tg_attn_int_queries *q, int j) {
    const float levels = bits == 8 ? (float)KEY_Q8 : (float)KEY_Q, step = 1.0f / levels;
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 qf[TG_ATTN_INT_MAX_D / 8], m = _mm256_setzero_ps(), z = _mm256_setzero_ps();
    for (int64_t k = 0; k < n; k += 8) { /* the fold: qf = q * scale, bias = q . zero */
        const __m256 qv = _mm256_loadu_ps(x + k);
        qf[k / 8] = _mm256_mul_ps(qv, sv[k / 8]);
        z = _mm256_fmadd_ps(qv, zv[k / 8], z);
        m = _mm256_max_ps(m, _mm256_and_ps(qf[k / 8], abs_mask));
    }
    q->bias[j] = hsum8(z);
    const float amax = hmax8(m);
    const __m256 inv = _mm256_set1_ps(amax > 0.0f && amax < INFINITY ? levels / amax : 0.0f);
    q->dq[j] = amax * step;
    int32_t *lo = q->lo + (int64_t)j * (n / 4), *hi = q->hi + (int64_t)j * (n / 4);
    for (int64_t k = 0; k < n; k += 32) {
        __m256i v[4], h[4];
        for (int i = 0; i < 4; i++) {
            v[i] = _mm256_cvtps_epi32(_mm256_mul_ps(qf[k / 8 + i], inv));
            h[i] = _mm256_setzero_si256();
            if (bits == 8) { /* q = 128 hi + lo, lo in [0, 127], hi in [-64, 63] */
                h[i] = _mm256_srai_epi32(v[i], 7);
                v[i] = _mm256_and_si256(v[i], _mm256_set1_epi32(127));
            }
        }
        pack_bytes(v, 1, lo + k / 4);
        if (bits == 8) pack_bytes(h, 1, hi + k / 4);
    }
}

/* Head j's weights of a value run, quantised into rw (the value pass's arithmetic, one head in eight lanes): pv[v]
 * its weights of the run's 8-row vectors v < nv (rows outside the segment loaded as 0), sv / zv those rows' scales
 * and zeros widened. Taken as prepare_key_head is. */
TG_INLINE void prepare_run_head(const __m256 *pv, int64_t nv, const __m256 *sv, const __m256 *zv, const int bits,
                                const run_weights *rw, int j) {
    const float levels = bits == 8 ? (float)VAL_W8 : (float)VAL_W, step = 1.0f / levels;
    __m256 w[RUN / 8], m = _mm256_setzero_ps(), zacc = _mm256_setzero_ps();
    for (int64_t v = 0; v < nv; v++) {
        w[v] = _mm256_mul_ps(pv[v], sv[v]);
        zacc = _mm256_fmadd_ps(pv[v], zv[v], zacc);
        m = _mm256_max_ps(m, w[v]);
    }
    const float amax = hmax8(m);
    const __m256 inv = _mm256_set1_ps(amax > 0.0f && amax < INFINITY ? levels / amax : 0.0f);
    rw->dw[j] = amax * step;
    rw->zs[j] = hsum8(zacc);
    __m256i w8[RUN / 8], wh[RUN / 8];
    for (int64_t v = 0; v < RUN / 8; v++) {
        w8[v] = v < nv ? _mm256_cvtps_epi32(_mm256_mul_ps(w[v], inv)) : _mm256_setzero_si256();
        wh[v] = _mm256_setzero_si256();
        if (bits == 8) { /* w8 = 128 hi + lo, both in [0, 127] */
            wh[v] = _mm256_srli_epi32(w8[v], 7);
            w8[v] = _mm256_and_si256(w8[v], _mm256_set1_epi32(127));
        }
    }
    pack_bytes(w8, 0, rw->lo + 8 * j);
    if (bits == 8) pack_bytes(wh, 0, rw->hi + 8 * j);
}

/* attend_int_avx2.c's AVX2 build of tg_attn_int_keys / tg_attn_int_values with vnni off (the emulation), which its
 * AVX-512 build takes for vnni off instead of a second build of the emulation's instances (the same bits). */
void tg_attn_int_emul_keys(const tg_attn_tile *t, const float *qh, int gq, int64_t D, const uint16_t *gscale,
                           const uint16_t *gzero, size_t gstride, int32_t *scratch, float *sc, int64_t ld);
void tg_attn_int_emul_values(const tg_attn_tile *t, const float *p, int64_t ld, int gq, int64_t D,
                             const uint16_t *tscale, const uint16_t *tzero, size_t tstride, float *o, int32_t *scratch);

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__) &&               \
    defined(__AVX512VNNI__)
#define TG_ATTN_INT512 1
/* attend_int_avx512.c: the 512-bit instances, the bits of the 256-bit ones. Scores need tiles of a multiple of 16
 * rows, values a multiple of 16 int32 lanes per row quad (head dim / codes per byte), or 8 lanes for int4 / int2
 * codes (two quads a register). */
tg_attn_int_prepare_fn *tg_attn_int512_prepare_for(int bits, int64_t D);
tg_attn_int_scores_fn *tg_attn_int512_scores_for(int bits, int64_t D);
tg_attn_int_prepare_run_fn *tg_attn_int512_prepare_run_for(int bits);
tg_attn_int_values_run_fn *tg_attn_int512_values_run_for(int bits, int64_t D);
#else
#define TG_ATTN_INT512 0
#endif

#endif
#endif
