/* attend_group_avx512.c — the 512-bit kernels of prefill attention over several tokens at once (attend_group.c holds
 * the driver and the arithmetic they follow): a 16-lane register holds two query heads' 8-lane accumulators for one
 * row (scores) or 16 columns of one head's output (values). Reached through the AVX-512 attention table. */
#include "kvcache/attend_kernels.h"

#if TG_HAVE_AVX512

#include <immintrin.h>

#define TG_INLINE static inline __attribute__((always_inline))

/* _mm256_hadd_ps in each 128-bit lane of a 16-lane register: [a1 + a0, a3 + a2, b1 + b0, b3 + b2] per lane. */
TG_INLINE __m512 hadd16(__m512 a, __m512 b) {
    return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0xdd), _mm512_shuffle_ps(a, b, 0x88));
}

/* Scores of up to eight rows (row r at rows[r], fp32, r < nr; the rest repeat row 0) for NP pairs of query heads
 * (qa[p], qb[p]): sa[p][r], sb[p][r] (sb[p] NULL: the pair is qa[p] twice and only sa[p] is stored). Lanes 0-7 of
 * acc[p][r] are qa[p]'s 8-lane accumulator for row r, lanes 8-15 qb[p]'s: the FMA sequence of attend_avx2.c's
 * scores_nq, then its reduction (hadd, hadd, the two 128-bit halves added) on both halves at once. */
TG_INLINE void scores8(const float *const *rows, int nr, int64_t D, const float *const *qa, const float *const *qb,
                       float *const *sa, float *const *sb, const int NP) {
    const float *row[8];
    for (int r = 0; r < 8; r++) row[r] = rows[r < nr ? r : 0];
    __m512 acc[2][8];
    for (int p = 0; p < NP; p++)
        for (int r = 0; r < 8; r++) acc[p][r] = _mm512_setzero_ps();
    for (int64_t k = 0; k < D; k += 8) {
        __m512 q[2];
        for (int p = 0; p < NP; p++)
            q[p] = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(qa[p] + k)), _mm256_loadu_ps(qb[p] + k), 1);
        for (int r = 0; r < 8; r++) {
            const __m512 kv = _mm512_broadcast_f32x8(_mm256_loadu_ps(row[r] + k));
            for (int p = 0; p < NP; p++) acc[p][r] = _mm512_fmadd_ps(kv, q[p], acc[p][r]);
        }
    }
    const __mmask8 m = (__mmask8)((1u << nr) - 1);
    for (int p = 0; p < NP; p++) {
        const __m512 u0 = hadd16(hadd16(acc[p][0], acc[p][1]), hadd16(acc[p][2], acc[p][3]));
        const __m512 u1 = hadd16(hadd16(acc[p][4], acc[p][5]), hadd16(acc[p][6], acc[p][7]));
        /* 128-bit lanes: u0 = [a lo, a hi, b lo, b hi] of rows 0-3, u1 the same of rows 4-7 */
        const __m512 s = _mm512_add_ps(_mm512_shuffle_f32x4(u0, u1, 0x88), _mm512_shuffle_f32x4(u0, u1, 0xdd));
        const __m512 o = _mm512_shuffle_f32x4(s, s, 0xd8); /* [a rows 0-3, a rows 4-7, b rows 0-3, b rows 4-7] */
        _mm256_mask_storeu_ps(sa[p], m, _mm512_castps512_ps256(o));
        if (sb[p]) _mm256_mask_storeu_ps(sb[p], m, _mm512_extractf32x8_ps(o, 1));
    }
}

/* o[e][c0 ..] (16 NV columns) += sum over rows r < n of p[e][r] * rows[r][c0 ..], r in order, for NH heads. */
TG_INLINE void values_pass(const float *const *rows, int64_t n, int64_t c0, const float *const *p, float *const *o,
                           const int NH, const int NV) {
    __m512 acc[8][2];
    for (int e = 0; e < NH; e++)
        for (int v = 0; v < NV; v++) acc[e][v] = _mm512_loadu_ps(o[e] + c0 + 16 * v);
    for (int64_t r = 0; r < n; r++) {
        __m512 x[2];
        for (int v = 0; v < NV; v++) x[v] = _mm512_loadu_ps(rows[r] + c0 + 16 * v);
        for (int e = 0; e < NH; e++) {
            const __m512 pb = _mm512_set1_ps(p[e][r]);
            for (int v = 0; v < NV; v++) acc[e][v] = _mm512_fmadd_ps(pb, x[v], acc[e][v]);
        }
    }
    for (int e = 0; e < NH; e++)
        for (int v = 0; v < NV; v++) _mm512_storeu_ps(o[e] + c0 + 16 * v, acc[e][v]);
}

#define VALUES_NH(NV)                                                                                                \
    switch (nh) {                                                                                                    \
    case 1: values_pass(rows, n, c0, p + e, o + e, 1, NV); break;                                                    \
    case 2: values_pass(rows, n, c0, p + e, o + e, 2, NV); break;                                                    \
    case 3: values_pass(rows, n, c0, p + e, o + e, 3, NV); break;                                                    \
    case 4: values_pass(rows, n, c0, p + e, o + e, 4, NV); break;                                                    \
    case 5: values_pass(rows, n, c0, p + e, o + e, 5, NV); break;                                                    \
    case 6: values_pass(rows, n, c0, p + e, o + e, 6, NV); break;                                                    \
    case 7: values_pass(rows, n, c0, p + e, o + e, 7, NV); break;                                                    \
    default: values_pass(rows, n, c0, p + e, o + e, 8, NV); break;                                                   \
    }

/* o[e][0 .. D) += sum over rows r < n of p[e][r] * rows[r], for ne heads: 32 columns and 8 heads per pass. */
void tg_attn512_group_values(const float *const *rows, int64_t n, int64_t D, const float *const *p, float *const *o,
                             int ne) {
    for (int64_t c0 = 0; c0 < D;) {
        const bool wide = D - c0 >= 32;
        for (int e = 0; e < ne; e += 8) {
            const int nh = ne - e < 8 ? ne - e : 8;
            if (wide) VALUES_NH(2) else VALUES_NH(1)
        }
        c0 += wide ? 32 : 16;
    }
}

/* Scores of n rows for the ne heads: pairs of heads, two pairs per pass over each block of eight rows. */
void tg_attn512_group_scores(const float *const *rows, int64_t n, int64_t D, const float *const *q, float *const *s,
                             int ne) {
    for (int64_t b = 0; b < n; b += 8) {
        const int nr = n - b < 8 ? (int)(n - b) : 8;
        for (int e = 0; e < ne;) {
            if (ne - e >= 4) {
                const float *qa[2] = {q[e], q[e + 2]}, *qb[2] = {q[e + 1], q[e + 3]};
                float *sa[2] = {s[e] + b, s[e + 2] + b}, *sb[2] = {s[e + 1] + b, s[e + 3] + b};
                scores8(rows + b, nr, D, qa, qb, sa, sb, 2);
                e += 4;
            } else { /* a last pair, or a last head paired with itself */
                const bool two = ne - e >= 2;
                const float *qa[1] = {q[e]}, *qb[1] = {two ? q[e + 1] : q[e]};
                float *sa[1] = {s[e] + b}, *sb[1] = {two ? s[e + 1] + b : NULL};
                scores8(rows + b, nr, D, qa, qb, sa, sb, 1);
                e += two ? 2 : 1;
            }
        }
    }
}

/* Rows [i0, i0 + n) of a float segment as fp32 rows: fp32 read in place, fp16 / bf16 widened (exactly) into tile. */
void tg_attn512_group_widen(int kind, const uint8_t *p, size_t stride, int64_t i0, int64_t n, int64_t D, float *tile,
                            const float **rows) {
    for (int64_t r = 0; r < n; r++) {
        const uint8_t *src = p + (size_t)(i0 + r) * stride;
        if (kind == TG_SEG_F32) {
            rows[r] = (const float *)(const void *)src;
            continue;
        }
        float *dst = tile + r * D;
        for (int64_t k = 0; k < D; k += 16) {
            const __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)(src + 2 * k));
            const __m512 v = kind == TG_SEG_F16 ? _mm512_cvtph_ps(h)
                                                   : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
            _mm512_storeu_ps(dst + k, v);
        }
        rows[r] = dst;
    }
}

#endif
