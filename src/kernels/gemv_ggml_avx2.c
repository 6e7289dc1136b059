/* gemv_ggml_avx2.c — decode kernels for the 32-element GGUF block types of ggml_blocks.h (Q4_1, Q5_0, Q5_1, IQ4_NL;
 * the K-quants: gemv_kquant_avx2.c), against float activations: the blocks are read as stored, each group of eight codes is widened to
 * eight floats in a register, scaled by its sub-block's scale (and min) with one FMA, and multiplied into the
 * activation with another; nothing is decoded to memory.
 *
 * Order: per row, four accumulators (lanes of the 8-element groups g with g % 4 = k go to accumulator k, over the
 * row's blocks in order), summed (a0 + a1) + (a2 + a3) and reduced as tg_reduce1_ps. Rows are independent, so
 * any split of the rows gives the same bits; the prefill tile runs the same kernel for each token, so prefill
 * equals decoding.
 * Precision: a weight is formed as fma(d_sub, q, -m_sub) (one rounding, where the reference rounds twice), then
 * the fp32 dot product: |fast - exact| <= ~(cols/32 + 8) * 2^-24 * sum|w x|. */
#include "kernels/avx2.h"

#if TG_HAVE_AVX2

#include "kernels/avx2_inline.h"
#include "kernels/ggml_blocks.h"

static inline float f16_at(const uint8_t *p) { return tg_f16_to_f32(tg_ld16(p)); }

/* eight bytes at p widened to eight int32 */
TG_INLINE __m256i u8x8(const uint8_t *p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p));
}

/* lanes j = bit (j0 + j) of bits, 0 or 1 */
TG_INLINE __m256i bits8(uint32_t bits, int j0) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)(bits >> j0)), lane), _mm256_set1_epi32(1));
}

TG_INLINE __m256i shr(__m256i v, int n) { return _mm256_srl_epi32(v, _mm_cvtsi32_si128(n)); }
TG_INLINE __m256i mask(__m256i v, int m) { return _mm256_and_si256(v, _mm256_set1_epi32(m)); }

/* acc[g % 4] += (d * q + c) * x for the group g of eight codes q (int32 lanes); callers pass g % 4 as a constant */
TG_INLINE void group(__m256 acc[4], int g, __m256i q, float d, float c, const float *x) {
    const __m256 w = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(q), _mm256_set1_ps(c));
    acc[g & 3] = _mm256_fmadd_ps(w, _mm256_loadu_ps(x), acc[g & 3]);
}

/* ---- one block of each type: the 8-element groups in element order ---- */

TG_INLINE void blk_q4_1(const uint8_t *p, const float *x, __m256 acc[4]) {
    const float d = f16_at(p), m = f16_at(p + 2);
    for (int g = 0; g < 4; g++) {
        const __m256i b = u8x8(p + 4 + 8 * (g % 2));
        group(acc, g, g < 2 ? mask(b, 0xF) : shr(b, 4), d, m, x + 8 * g);
    }
}

TG_INLINE void blk_q5_0(const uint8_t *p, const float *x, __m256 acc[4]) {
    const float d = f16_at(p);
    uint32_t qh;
    memcpy(&qh, p + 2, 4);
    for (int g = 0; g < 4; g++) {
        const __m256i b = u8x8(p + 6 + 8 * (g % 2));
        const __m256i q = _mm256_or_si256(g < 2 ? mask(b, 0xF) : shr(b, 4), _mm256_slli_epi32(bits8(qh, 8 * g), 4));
        group(acc, g, _mm256_sub_epi32(q, _mm256_set1_epi32(16)), d, 0.0f, x + 8 * g);
    }
}

TG_INLINE void blk_q5_1(const uint8_t *p, const float *x, __m256 acc[4]) {
    const float d = f16_at(p), m = f16_at(p + 2);
    uint32_t qh;
    memcpy(&qh, p + 4, 4);
    for (int g = 0; g < 4; g++) {
        const __m256i b = u8x8(p + 8 + 8 * (g % 2));
        const __m256i q = _mm256_or_si256(g < 2 ? mask(b, 0xF) : shr(b, 4), _mm256_slli_epi32(bits8(qh, 8 * g), 4));
        group(acc, g, q, d, m, x + 8 * g);
    }
}

TG_INLINE void blk_iq4_nl(const uint8_t *p, const float *x, __m256 acc[4]) {
    const __m128i values = _mm_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);
    const float d = f16_at(p);
    const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(p + 2));
    const __m128i lo = _mm_shuffle_epi8(values, _mm_and_si128(b, _mm_set1_epi8(0xF)));
    const __m128i hi = _mm_shuffle_epi8(values, _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(0xF)));
    group(acc, 0, _mm256_cvtepi8_epi32(lo), d, 0.0f, x);
    group(acc, 1, _mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)), d, 0.0f, x + 8);
    group(acc, 2, _mm256_cvtepi8_epi32(hi), d, 0.0f, x + 16);
    group(acc, 3, _mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)), d, 0.0f, x + 24);
}

/* ---- the entry points (tg_gemv_fn, tg_tile_fn) ---- */

#define GGML_KERNELS(NAME, BLK, ELEMS, BYTES)                                                                        \
    void tg_avx2_gemv_##NAME(const uint8_t *w, size_t ws, int64_t nr, const void *xv, int64_t cols, float *y) {   \
        const float *x = xv;                                                                                       \
        for (int64_t r = 0; r < nr; r++) {                                                                         \
            const uint8_t *row = w + (size_t)r * ws;                                                               \
            if (r + 1 < nr) _mm_prefetch((const char *)(row + ws), _MM_HINT_T0);                                   \
            __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()}; \
            for (int64_t b = 0; b < cols / (ELEMS); b++) BLK(row + (size_t)b * (BYTES), x + b * (ELEMS), acc);     \
            y[r] = tg_reduce1_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));    \
        }                                                                                                          \
    }                                                                                                              \
    void tg_avx2_tile_##NAME(const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs, int nt, int64_t cols, \
                             float *y, size_t ldy) {                                                               \
        for (int t = 0; t < nt; t++) tg_avx2_gemv_##NAME(w, ws, nr, x + (size_t)t * xs, cols, y + (size_t)t * ldy); \
    }

GGML_KERNELS(q4_1, blk_q4_1, 32, TG_Q4_1_BYTES)
GGML_KERNELS(q5_0, blk_q5_0, 32, TG_Q5_0_BYTES)
GGML_KERNELS(q5_1, blk_q5_1, 32, TG_Q5_1_BYTES)
GGML_KERNELS(iq4_nl, blk_iq4_nl, 32, TG_IQ4_NL_BYTES)

#endif
