/* gemv_q32_avx2.c — decode (GEMV) and prefill (GEMM) kernels for the 32-element GGUF block types Q4_1, Q5_0, Q5_1
 * and IQ4_NL (ggml_blocks.h) against the tg_q8x_block form of the activations (quant.h: int8 codes, the fp16 scale
 * dx, the codes' sum and the fp16 sum term s per 32 elements, as llama.cpp's block_q8_0 / block_q8_1), as Q8_0 / Q4_0
 * are (gemv_avx2.c): the same integers and scale products as llama.cpp's dot products (only the order of the float
 * sums differs).
 *
 * Per block: the 32 weight codes are unpacked from the block as stored into bytes (Q4_1: nibbles; Q5_0 / Q5_1:
 * nibble | fifth bit << 4; IQ4_NL: the fixed table's signed value of each nibble) and their exact int32 dot product
 * with the activation's codes is taken with maddubs + madd (IQ4_NL's signs moved onto x, as Q8_0's); eight rows'
 * products are reduced together (tg_reduce8_epi32), so per block and token one conversion and one FMA serve eight rows:
 *   acc = fma((float)(isum - bias * sum_x), d * dx, acc)       (bias 16 for Q5_0, else 0)
 *   acc = fma(m, s, acc)                                        (Q4_1 / Q5_1: the block's fp16 offset m)
 * over the row's blocks in order. A lone row (nr % 8) does the same arithmetic one lane at a time, and prefill decodes
 * each group of eight rows' blocks once for up to 16 tokens, in the same order per (row, token): prefill gives the bits
 * of decoding, whichever split of the rows. Error against the exact product: the activation's rounding,
 * |x - dx q| <= dx / 2 per element, plus fp32 rounding. */
#include "kernels/avx2.h"

#if TG_HAVE_AVX2

#include "kernels/avx2_inline.h"
#include "kernels/ggml_blocks.h"

#define Q32_TOKENS 16 /* tokens per pass of the prefill kernel */

/* What a type's kernels need to know of its blocks. */
typedef struct {
    size_t bytes;
    int qs_at, qh_at, m_at; /* byte offsets of the nibbles, of the fifth bits (-1: none), of m (-1: none) */
    int32_t bias;           /* the code of zero (Q5_0's 16), subtracted through sum_x */
    bool table;             /* IQ4_NL: signed table values */
} q32_layout;

static const q32_layout LAYOUT_Q4_1 = {TG_Q4_1_BYTES, 4, -1, 2, 0, false};
static const q32_layout LAYOUT_Q5_0 = {TG_Q5_0_BYTES, 6, 2, -1, 16, false};
static const q32_layout LAYOUT_Q5_1 = {TG_Q5_1_BYTES, 8, 4, 2, 0, false};
static const q32_layout LAYOUT_IQ4_NL = {TG_IQ4_NL_BYTES, 2, -1, -1, 0, true};

/* The 32 codes of a block in element order (low nibbles are elements 0..15, high nibbles 16..31). */
TG_INLINE __m256i q32_codes(const q32_layout *L, const uint8_t *blk) {
    const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(blk + L->qs_at));
    const __m128i m4 = _mm_set1_epi8(0x0F);
    __m256i q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m4), _mm_and_si128(b, m4));
    if (L->table) {
        const __m256i values = _mm256_setr_epi8(-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89,
                                                113, -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69,
                                                89, 113);
        return _mm256_shuffle_epi8(values, q);
    }
    if (L->qh_at >= 0) { /* bit j of qh -> bit 4 of byte j */
        uint32_t qh;
        memcpy(&qh, blk + L->qh_at, 4);
        const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh),
                                                   _mm256_setr_epi64x(0, 0x0101010101010101ll, 0x0202020202020202ll,
                                                                      0x0303030303030303ll));
        const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
        const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
        q = _mm256_or_si256(q, _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
    }
    return q;
}

/* Per-lane int32 partial sums of the block's code products (their total: the exact integer dot product). */
TG_INLINE __m256i q32_dot(const q32_layout *L, __m256i w, const int8_t *xq) {
    const __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)xq);
    const __m256i ones = _mm256_set1_epi16(1);
    if (L->table) return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w)), ones);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), ones);
}

/* fp16 at p as fp32 through F16C (the values of util/half.h's portable conversion) */
TG_INLINE float f16_at(const uint8_t *p) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(tg_ld16(p)))); }

/* fp16 field at byte `at` of eight rows' blocks (block pointers p[r]) as fp32. */
TG_INLINE __m256 f16x8(const uint8_t *const p[8], int at) {
    __m128i h = _mm_cvtsi32_si128(tg_ld16(p[0] + at));
    h = _mm_insert_epi16(h, tg_ld16(p[1] + at), 1);
    h = _mm_insert_epi16(h, tg_ld16(p[2] + at), 2);
    h = _mm_insert_epi16(h, tg_ld16(p[3] + at), 3);
    h = _mm_insert_epi16(h, tg_ld16(p[4] + at), 4);
    h = _mm_insert_epi16(h, tg_ld16(p[5] + at), 5);
    h = _mm_insert_epi16(h, tg_ld16(p[6] + at), 6);
    h = _mm_insert_epi16(h, tg_ld16(p[7] + at), 7);
    return _mm256_cvtph_ps(h);
}

/* Eight rows (block pointers p[r] of block b) against T tokens' activation block b (x[t]): acc[t] lane r. */
TG_INLINE void q32_block8(const q32_layout *L, const uint8_t *const p[8], const tg_q8x_block *const *x, int T,
                          __m256 *acc) {
    __m256i w[8];
    for (int r = 0; r < 8; r++) w[r] = q32_codes(L, p[r]);
    const __m256 d = f16x8(p, 0), m = L->m_at >= 0 ? f16x8(p, L->m_at) : _mm256_setzero_ps();
    for (int t = 0; t < T; t++) {
        __m256i dots[8];
        for (int r = 0; r < 8; r++) dots[r] = q32_dot(L, w[r], x[t]->q);
        __m256i s = tg_reduce8_epi32(dots);
        if (L->bias) s = _mm256_sub_epi32(s, _mm256_set1_epi32(L->bias * x[t]->sum));
        const __m256 dx = _mm256_set1_ps(x[t]->d);
        acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_mul_ps(d, dx), acc[t]);
        if (L->m_at >= 0) acc[t] = _mm256_fmadd_ps(m, _mm256_set1_ps(x[t]->s), acc[t]);
    }
}

/* One row against one token, the same arithmetic one lane at a time. */
TG_INLINE float q32_row1(const q32_layout *L, const uint8_t *p, const tg_q8x_block *x, int64_t nb) {
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++, p += L->bytes) {
        const __m256i d8 = q32_dot(L, q32_codes(L, p), x[b].q);
        __m128i h = _mm_add_epi32(_mm256_castsi256_si128(d8), _mm256_extracti128_si256(d8, 1));
        h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
        h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
        const int32_t isum = _mm_cvtsi128_si32(h) - L->bias * x[b].sum;
        acc = fmaf((float)isum, f16_at(p) * x[b].d, acc);
        if (L->m_at >= 0) acc = fmaf(f16_at(p + L->m_at), x[b].s, acc);
    }
    return acc;
}

/* y[t * ldy + r] for r < nr, t < n; token t's nb blocks at x + t * nb. */
TG_INLINE void q32_matmul(const q32_layout *L, const uint8_t *w, size_t ws, int64_t nr, const tg_q8x_block *x,
                          int64_t nb, int64_t n, float *y, size_t ldy) {
    for (int64_t t0 = 0; t0 < n; t0 += Q32_TOKENS) {
        const int T = (int)(n - t0 < Q32_TOKENS ? n - t0 : Q32_TOKENS);
        const tg_q8x_block *xg = x + (size_t)t0 * (size_t)nb;
        float *yg = y + (size_t)t0 * ldy;
        int64_t r = 0;
        for (; r + 8 <= nr; r += 8) {
            __m256 acc[Q32_TOKENS];
            for (int t = 0; t < T; t++) acc[t] = _mm256_setzero_ps();
            const uint8_t *p[8];
            for (int k = 0; k < 8; k++) p[k] = w + (size_t)(r + k) * ws;
            for (int64_t b = 0; b < nb; b++) {
                const tg_q8x_block *xb[Q32_TOKENS];
                for (int t = 0; t < T; t++) xb[t] = xg + (size_t)t * (size_t)nb + (size_t)b;
                q32_block8(L, p, xb, T, acc);
                for (int k = 0; k < 8; k++) p[k] += L->bytes;
            }
            for (int t = 0; t < T; t++) _mm256_storeu_ps(yg + (size_t)t * ldy + (size_t)r, acc[t]);
        }
        for (; r < nr; r++)
            for (int t = 0; t < T; t++)
                yg[(size_t)t * ldy + (size_t)r] = q32_row1(L, w + (size_t)r * ws, xg + (size_t)t * (size_t)nb, nb);
    }
}

#define Q32_KERNELS(NAME, LAYOUT)                                                                                     \
    void tg_avx2_gemv_##NAME(const uint8_t *w, size_t ws, int64_t nr, const void *x, int64_t cols, float *y) {       \
        q32_matmul(&LAYOUT, w, ws, nr, x, cols / TG_QK, 1, y, 0);                                                     \
    }                                                                                                                 \
    void tg_avx2_gemm_q8x_##NAME(const uint8_t *w, size_t ws, int64_t nr, const tg_q8x_block *xq, int64_t nb,        \
                                 int64_t n, float *y, size_t ldy) {                                                   \
        q32_matmul(&LAYOUT, w, ws, nr, xq, nb, n, y, ldy);                                                            \
    }
Q32_KERNELS(q4_1, LAYOUT_Q4_1)
Q32_KERNELS(q5_0, LAYOUT_Q5_0)
Q32_KERNELS(q5_1, LAYOUT_Q5_1)
Q32_KERNELS(iq4_nl, LAYOUT_IQ4_NL)
#undef Q32_KERNELS

#else
typedef int tg_gemv_q32_avx2_unused; /* ISO C forbids an empty translation unit */
#endif
