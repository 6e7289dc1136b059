/* gemv_ggml_avx2.c — decode kernels for the GGUF block types of ggml_blocks.h (Q4_1, Q5_0, Q5_1, Q2_K..Q6_K,
 * IQ4_NL), against float activations: the blocks are read as stored, each group of eight codes is widened to
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

/* Q2_K / Q3_K / Q6_K share the element order 128h + 32s + l (j = 4h + s, l = 8k): group 4j + k, 16-element scale
 * 8h + 2s + k / 2; the loops run j outside and k inside (four iterations, unrolled: acc[k] stays in a register) */
TG_INLINE void blk_q2_k(const uint8_t *p, const float *x, __m256 acc[4]) {
    const float d = f16_at(p + 80), dmin = f16_at(p + 82);
    for (int j = 0; j < 8; j++) {
        const int h = j / 4, s = j % 4;
        float dl[2], ml[2];
        for (int u = 0; u < 2; u++) {
            const uint8_t k = p[8 * h + 2 * s + u];
            dl[u] = d * (float)(k & 0xF), ml[u] = dmin * (float)(k >> 4);
        }
        for (int k = 0; k < 4; k++) {
            const __m256i q = mask(shr(u8x8(p + 16 + 32 * h + 8 * k), 2 * s), 3);
            group(acc, k, q, dl[k / 2], -ml[k / 2], x + 32 * j + 8 * k);
        }
    }
}

TG_INLINE void blk_q3_k(const uint8_t *p, const float *x, __m256 acc[4]) {
    const float d = f16_at(p + 108);
    for (int j = 0; j < 8; j++) {
        const int h = j / 4, s = j % 4;
        const float dl[2] = {d * (float)tg_q3k_scale(8 * h + 2 * s, p + 96),
                             d * (float)tg_q3k_scale(8 * h + 2 * s + 1, p + 96)};
        for (int k = 0; k < 4; k++) {
            const __m256i lo = mask(shr(u8x8(p + 32 + 32 * h + 8 * k), 2 * s), 3);
            const __m256i hb = mask(shr(u8x8(p + 8 * k), j), 1); /* set: no offset; clear: minus 4 */
            const __m256i q = _mm256_sub_epi32(lo, _mm256_slli_epi32(_mm256_xor_si256(hb, _mm256_set1_epi32(1)), 2));
            group(acc, k, q, dl[k / 2], 0.0f, x + 32 * j + 8 * k);
        }
    }
}

TG_INLINE void blk_q6_k(const uint8_t *p, const float *x, __m256 acc[4]) {
    const float d = f16_at(p + 208);
    const int8_t *sc = (const int8_t *)(const void *)(p + 192);
    for (int j = 0; j < 8; j++) {
        const int h = j / 4, s = j % 4;
        const float dl[2] = {d * (float)sc[8 * h + 2 * s], d * (float)sc[8 * h + 2 * s + 1]};
        for (int k = 0; k < 4; k++) {
            const __m256i lo = mask(shr(u8x8(p + 64 * h + 32 * (s % 2) + 8 * k), 4 * (s / 2)), 0xF);
            const __m256i hi = mask(shr(u8x8(p + 128 + 32 * h + 8 * k), 2 * s), 3);
            const __m256i q = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
            group(acc, k, q, dl[k / 2], 0.0f, x + 32 * j + 8 * k);
        }
    }
}

/* Q4_K / Q5_K: sub-block sb of 32 (groups 4sb..4sb+3): nibble sb % 2 of qs[32(sb / 2) + l], fifth bit sb of qh[l] */
TG_INLINE void blk_q45_k(const uint8_t *p, const float *x, __m256 acc[4], bool five) {
    const float d = f16_at(p), dmin = f16_at(p + 2);
    const uint8_t *qh = p + 16, *qs = five ? p + 48 : p + 16;
    for (int sb = 0; sb < 8; sb++) {
        uint8_t sc, m;
        tg_k4_scale_min(sb, p + 4, &sc, &m);
        const float d1 = d * (float)sc, m1 = dmin * (float)m;
        for (int k = 0; k < 4; k++) {
            __m256i q = mask(shr(u8x8(qs + 32 * (sb / 2) + 8 * k), 4 * (sb % 2)), 0xF);
            if (five) q = _mm256_or_si256(q, _mm256_slli_epi32(mask(shr(u8x8(qh + 8 * k), sb), 1), 4));
            group(acc, k, q, d1, -m1, x + 32 * sb + 8 * k);
        }
    }
}

TG_INLINE void blk_q5_k(const uint8_t *p, const float *x, __m256 acc[4]) { blk_q45_k(p, x, acc, true); }

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
GGML_KERNELS(q2_k, blk_q2_k, TG_QK_K, TG_Q2_K_BYTES)
GGML_KERNELS(q3_k, blk_q3_k, TG_QK_K, TG_Q3_K_BYTES)
GGML_KERNELS(q5_k, blk_q5_k, TG_QK_K, TG_Q5_K_BYTES)
GGML_KERNELS(q6_k, blk_q6_k, TG_QK_K, TG_Q6_K_BYTES)

/* ---- Q4_K against the Q8 form of the activations (tg_q8x_block, one per 32 elements = one Q4_K sub-block) ----
 * Per super-block: isum[sb] = the exact int32 dot product of sub-block sb's 32 nibbles with the activation's codes
 * (maddubs + madd, the eight sub-blocks' lanes reduced together, exact), then in eight lanes at once
 * acc = fma((float)isum, (d * sc) * dx, acc) and mins = fma((dmin * m) * dx, (float)sum(codes), mins), over the
 * row's super-blocks in order; y = tg_reduce1_ps(acc) - tg_reduce1_ps(mins). The prefill kernel reads the same
 * codes out of the packed groups (a gather of eight 4-byte pieces), so it gives the same bits. Error: the
 * activation's quantisation (|x - dx q| <= dx / 2 per element) plus fp32 rounding. */
TG_INLINE float q4k_row_q8x(const uint8_t *row, int64_t nsup, const tg_q8x_block *xq, const tg_q8x_pack8 *xp, int t) {
    const __m256i ones = _mm256_set1_epi16(1), lo4 = _mm256_set1_epi8(0xF);
    const __m256i piece = _mm256_setr_epi32(0, 8, 16, 24, 32, 40, 48, 56);
    __m256 acc = _mm256_setzero_ps(), mins = _mm256_setzero_ps();
    for (int64_t b = 0; b < nsup; b++) {
        const uint8_t *p = row + (size_t)b * TG_Q4_K_BYTES;
        const float d = f16_at(p), dmin = f16_at(p + 2);
        __m256i isum[8];
        float ds[8], dm[8], sums[8];
        for (int sb = 0; sb < 8; sb++) {
            const int64_t xb = 8 * b + sb;
            __m256i codes;
            float dx;
            if (xq) {
                codes = _mm256_loadu_si256((const __m256i *)(const void *)xq[xb].q);
                dx = xq[xb].d, sums[sb] = (float)xq[xb].sum;
            } else {
                const __m256i at = _mm256_add_epi32(piece, _mm256_set1_epi32(t));
                codes = _mm256_i32gather_epi32((const int *)(const void *)xp[xb].q, at, 4);
                dx = xp[xb].d[t], sums[sb] = (float)xp[xb].sum[t];
            }
            __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(p + 16 + 32 * (sb / 2)));
            if (sb % 2) q = _mm256_srli_epi16(q, 4);
            q = _mm256_and_si256(q, lo4);
            isum[sb] = _mm256_madd_epi16(_mm256_maddubs_epi16(q, codes), ones);
            uint8_t sc, m;
            tg_k4_scale_min(sb, p + 4, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            ds[sb] = d1 * dx, dm[sb] = m1 * dx;
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tg_reduce8_epi32(isum)), _mm256_loadu_ps(ds), acc);
        mins = _mm256_fmadd_ps(_mm256_loadu_ps(dm), _mm256_loadu_ps(sums), mins);
    }
    return tg_reduce1_ps(acc) - tg_reduce1_ps(mins);
}

void tg_avx2_gemv_q4_k(const uint8_t *w, size_t ws, int64_t nr, const void *x, int64_t cols, float *y) {
    for (int64_t r = 0; r < nr; r++) {
        if (r + 1 < nr) _mm_prefetch((const char *)(w + (size_t)(r + 1) * ws), _MM_HINT_T0);
        y[r] = q4k_row_q8x(w + (size_t)r * ws, cols / TG_QK_K, x, NULL, 0);
    }
}

void tg_avx2_gemm_q4_k(const uint8_t *w, size_t ws, int64_t nr, const tg_q8x_pack8 *xp, int64_t nb, int64_t n,
                       float *y, size_t ldy) {
    for (int64_t r = 0; r < nr; r++)
        for (int64_t t = 0; t < n; t++)
            y[(size_t)t * ldy + (size_t)r] =
                q4k_row_q8x(w + (size_t)r * ws, nb / 8, NULL, xp + (t / 8) * nb, (int)(t % 8));
}

#endif
