/* gemv_repacked_avx512.c — Q8_0 and Q4_0 decode and prefill over weights in the repacked layout (repack.h), against
 * the tg_q8x_block rows of the activations (AVX-512 VNNI).
 *
 * Per piece (block b of sixteen rows) and token: the four 64-byte units k (rows k, 4 + k, 8 + k, 12 + k, one per
 * 128-bit lane) meet the token's 32 codes as two 16-byte halves broadcast to every lane (Q8_0: units 2k and 2k + 1
 * against halves 0 and 1; Q4_0: unit k's low nibbles against half 0, its high nibbles against half 1), one dpbusd
 * each, into four int32 accumulators per unit; three rounds of pairwise lane sums (hadd512) leave row i's exact
 * block sum in lane i. Then, as gemv_avx2.c's quant_rows16 and quant_rows8 do lane for lane:
 *   acc = fma((float)(isum - bias * sum_x), fp16(d) * dx, acc)        (bias 128 for Q8_0's biased codes, 8 for Q4_0)
 * over the blocks in order, so every (row, token) has the bits of the file-layout kernels (and prefill those of
 * decoding). The scales are one 32-byte load; the codes one contiguous stream per group of rows, which the hardware
 * prefetcher follows. */
#include "kernels/avx2.h"

#if TG_HAVE_AVX2 && TG_HAVE_KQ512

#include "kernels/avx2_inline.h"
#include "kernels/repack.h"

#define MAX_TOKENS 8 /* tokens per pass over a group's pieces */
/* How far ahead the pieces stream into L2 (tg_prefetch_lines_l2, a line once): the hardware prefetcher follows one
 * contiguous stream, but each decode unit starts cold without it. A short lead did as well as any of the longer ones
 * tried (docs/PERFORMANCE.md, Session 28). */
#define STREAM_LEAD 4096

/* 16 bytes at p in every 128-bit lane. */
TG_INLINE __m512i lanes16(const void *p) { return _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)p)); }

/* Rows [16 g, 16 g + 16) of one group (its pieces from w) against T tokens: y[t * ldy + i]. Q8: Q8_0, else Q4_0. */
TG_INLINE void group_tokens(const int Q8, const uint8_t *w, const tg_q8x_block *x, int64_t nb, const int T, float *y,
                            size_t ldy) {
    const size_t piece = (size_t)TG_REPACK_ROWS * (Q8 ? sizeof(tg_block_q8_0) : sizeof(tg_block_q4_0));
    const int32_t bias = Q8 ? 128 : 8;
    __m512 acc[MAX_TOKENS];
    for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();
    uintptr_t next = (uintptr_t)w + STREAM_LEAD;
    for (int64_t b = 0; b < nb; b++, w += piece) {
        tg_prefetch_lines_l2(&next, piece);
        __m512i c[8]; /* unit 2k + h against half h */
        for (int k = 0; k < 4; k++) {
            if (Q8) {
                c[2 * k] = _mm512_loadu_si512(w + 32 + 128 * k);
                c[2 * k + 1] = _mm512_loadu_si512(w + 32 + 128 * k + 64);
            } else {
                const __m512i v = _mm512_loadu_si512(w + 32 + 64 * k), m = _mm512_set1_epi8(0x0f);
                c[2 * k] = _mm512_and_si512(v, m);
                c[2 * k + 1] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m);
            }
        }
        const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)w));
        for (int t = 0; t < T; t++) {
            const tg_q8x_block *xb = x + (size_t)t * (size_t)nb + (size_t)b;
            const __m512i lo = lanes16(xb->q), hi = lanes16(xb->q + 16);
            __m512i s4[4];
            for (int k = 0; k < 4; k++) {
                s4[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), c[2 * k], lo);
                s4[k] = _mm512_dpbusd_epi32(s4[k], c[2 * k + 1], hi);
            }
            __m512i s = hadd512(hadd512(s4[0], s4[1]), hadd512(s4[2], s4[3]));
            s = _mm512_sub_epi32(s, _mm512_set1_epi32(bias * xb->sum));
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(d, _mm512_set1_ps(xb->d)), acc[t]);
        }
    }
    for (int t = 0; t < T; t++) _mm512_storeu_ps(y + (size_t)t * ldy, acc[t]);
}

/* Every group against n tokens, up to MAX_TOKENS at a time (a group's pieces read once per pass). */
TG_INLINE void repacked(const int Q8, const uint8_t *w, size_t rb, int64_t groups, const tg_q8x_block *x, int64_t nb,
                        int64_t n, float *y, size_t ldy) {
    for (int64_t g = 0; g < groups; g++) {
        const uint8_t *wg = w + (size_t)g * TG_REPACK_ROWS * rb;
        float *yg = y + (size_t)g * TG_REPACK_ROWS;
        for (int64_t t0 = 0; t0 < n; t0 += MAX_TOKENS) {
            const tg_q8x_block *xt = x + (size_t)t0 * (size_t)nb;
            float *yt = yg + (size_t)t0 * ldy;
            switch (n - t0 < MAX_TOKENS ? (int)(n - t0) : MAX_TOKENS) {
            case 1: group_tokens(Q8, wg, xt, nb, 1, yt, ldy); break;
            case 2: group_tokens(Q8, wg, xt, nb, 2, yt, ldy); break;
            case 3: group_tokens(Q8, wg, xt, nb, 3, yt, ldy); break;
            case 4: group_tokens(Q8, wg, xt, nb, 4, yt, ldy); break;
            case 5: group_tokens(Q8, wg, xt, nb, 5, yt, ldy); break;
            case 6: group_tokens(Q8, wg, xt, nb, 6, yt, ldy); break;
            case 7: group_tokens(Q8, wg, xt, nb, 7, yt, ldy); break;
            default: group_tokens(Q8, wg, xt, nb, 8, yt, ldy); break;
            }
        }
    }
}

void tg_avx512_repacked_q8_0(const uint8_t *w, size_t rb, int64_t groups, const tg_q8x_block *x, int64_t nb,
                             int64_t n, float *y, size_t ldy) {
    repacked(1, w, rb, groups, x, nb, n, y, ldy);
}

void tg_avx512_repacked_q4_0(const uint8_t *w, size_t rb, int64_t groups, const tg_q8x_block *x, int64_t nb,
                             int64_t n, float *y, size_t ldy) {
    repacked(0, w, rb, groups, x, nb, n, y, ldy);
}

#else
typedef int tg_gemv_repacked_avx512_unused; /* ISO C forbids an empty translation unit */
#endif
