/* attend_avx2.c — the AVX2 block kernels of attention: scores and value sums of up to eight cache rows for the query
 * heads that share their kv-head, reading the rows as stored (fp32 in place, fp16 / bf16 widened in registers, KIVI
 * codes turned into u * scale + zero in registers). A row is loaded and widened once per 8-column chunk and used by
 * up to three query heads at a time, whose accumulators stay in registers: the work per row is one widening plus one
 * FMA per head per 8 columns. KIVI codes go in as plain integers: a key group's per-channel grid is folded into the
 * queries once per segment (q . (u s + z) = (q s) . u + q . z) and a value's own scale into its weight
 * (p (u s + z) = (p s) u + p z). attend.c holds the scalar reference (tests compare the two). */
#include "kvcache/attend_kernels.h"

#if TG_HAVE_AVX2

#include <immintrin.h>
#include <string.h>

#define TG_INLINE static inline __attribute__((always_inline))

/* Eight codes starting at element k (a multiple of 8) of a packed row, as floats. */
TG_INLINE __m256 codes8(int bits, const uint8_t *row, int64_t k) {
    if (bits == 8)
        return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(row + k))));
    if (bits == 4) {
        uint32_t w;
        memcpy(&w, row + k / 2, 4);
        const __m256i v = _mm256_srlv_epi32(_mm256_set1_epi32((int)w), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
        return _mm256_cvtepi32_ps(_mm256_and_si256(v, _mm256_set1_epi32(0xf)));
    }
    uint16_t w;
    memcpy(&w, row + k / 4, 2);
    const __m256i v = _mm256_srlv_epi32(_mm256_set1_epi32((int)w), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
    return _mm256_cvtepi32_ps(_mm256_and_si256(v, _mm256_set1_epi32(0x3)));
}

/* Columns k..k+7 of row r of the block as fp32. */
TG_INLINE __m256 ld8(const tg_attn_block *b, int kind, int bits, int r, int64_t k, int64_t D) {
    const uint8_t *row = b->rows[r];
    switch (kind) {
    case TG_SEG_F32: return _mm256_loadu_ps((const float *)(const void *)row + k);
    case TG_SEG_F16: return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(row + 2 * k)));
    case TG_SEG_BF16: {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(row + 2 * k)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    }
    default: /* the codes themselves: keys' grid is folded into the queries, values' scale into p */
        (void)D;
        return codes8(bits, row, k);
    }
}

/* dst[r] = lane r of s for the block's nr rows (1..8). */
TG_INLINE void store_rows(__m256 s, int nr, float *dst) {
    if (nr == 8) {
        _mm256_storeu_ps(dst, s);
        return;
    }
    float out[8];
    _mm256_storeu_ps(out, s);
    for (int r = 0; r < nr; r++) dst[r] = out[r];
}

/* dst[r] = the lane sum of a[r] (+ *bias) for the block's nr rows: eight lane sums at once, in one order. */
TG_INLINE void store_scores(const __m256 a[8], const float *bias, int nr, float *dst) {
    const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    __m256 s = _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
    if (bias) s = _mm256_add_ps(s, _mm256_set1_ps(*bias));
    store_rows(s, nr, dst);
}

/* Scores of the block's rows for NQ query heads q[j * D ..] (j < NQ): sc[j * ld + r]. */
TG_INLINE void scores_nq(const tg_attn_block *b, int kind, int bits, const float *q, int64_t D, float *sc, int64_t ld,
                         const int NQ) {
    __m256 acc[3][8];
    for (int j = 0; j < NQ; j++)
        for (int r = 0; r < 8; r++) acc[j][r] = _mm256_setzero_ps();
    for (int64_t k = 0; k < D; k += 8) {
        __m256 qv[3];
        for (int j = 0; j < NQ; j++) qv[j] = _mm256_loadu_ps(q + (int64_t)j * D + k);
        for (int r = 0; r < 8; r++) {
            const __m256 kv = ld8(b, kind, bits, r, k, D);
            for (int j = 0; j < NQ; j++) acc[j][r] = _mm256_fmadd_ps(kv, qv[j], acc[j][r]);
        }
    }
    for (int j = 0; j < NQ; j++) store_scores(acc[j], kind == TG_SEG_CODES ? b->bias + j : NULL, b->nr, sc + (int64_t)j * ld);
}

/* o_j[c..c+31] += sum_r p[j * ld + r] row_r[c..c+31] + z[j] for NQ query heads, one 32-column chunk (z NULL: no
 * constant term). For codes, p already carries each row's scale and z its zeros. */
TG_INLINE void values_nq(const tg_attn_block *b, int kind, int bits, const float *p, int64_t ld, const float *z,
                         int64_t c, int64_t D, float *o, const int NQ) {
    __m256 acc[4][4];
    for (int j = 0; j < NQ; j++)
        for (int i = 0; i < 4; i++) acc[j][i] = _mm256_loadu_ps(o + (int64_t)j * D + c + 8 * i);
    for (int r = 0; r < b->nr; r++) {
        __m256 pv[4];
        for (int j = 0; j < NQ; j++) pv[j] = _mm256_broadcast_ss(p + (int64_t)j * ld + r);
        for (int i = 0; i < 4; i++) {
            const __m256 v = ld8(b, kind, bits, r, c + 8 * i, D);
            for (int j = 0; j < NQ; j++) acc[j][i] = _mm256_fmadd_ps(pv[j], v, acc[j][i]);
        }
    }
    if (z)
        for (int j = 0; j < NQ; j++)
            for (int i = 0; i < 4; i++) acc[j][i] = _mm256_add_ps(acc[j][i], _mm256_set1_ps(z[j]));
    for (int j = 0; j < NQ; j++)
        for (int i = 0; i < 4; i++) _mm256_storeu_ps(o + (int64_t)j * D + c + 8 * i, acc[j][i]);
}

/* Same for a last chunk of 8 columns (D % 32 != 0). */
TG_INLINE void values_nq8(const tg_attn_block *b, int kind, int bits, const float *p, int64_t ld, const float *z,
                          int64_t c, int64_t D, float *o, const int NQ) {
    __m256 acc[4];
    for (int j = 0; j < NQ; j++) acc[j] = _mm256_loadu_ps(o + (int64_t)j * D + c);
    for (int r = 0; r < b->nr; r++) {
        const __m256 v = ld8(b, kind, bits, r, c, D);
        for (int j = 0; j < NQ; j++) acc[j] = _mm256_fmadd_ps(_mm256_broadcast_ss(p + (int64_t)j * ld + r), v, acc[j]);
    }
    if (z)
        for (int j = 0; j < NQ; j++) acc[j] = _mm256_add_ps(acc[j], _mm256_set1_ps(z[j]));
    for (int j = 0; j < NQ; j++) _mm256_storeu_ps(o + (int64_t)j * D + c, acc[j]);
}

#if defined(__AVX512F__)
/* ---- float rows with 512-bit registers: two rows (scores) or sixteen columns (values) per register ------------- *
 * Each 8-lane half does exactly what scores_nq / values_nq do in one 256-bit register (the same FMAs in the same
 * order per lane, the same reduction), so the bits are theirs; each widening and FMA covers twice the work. */
#define TG_ATTN512 1

/* Columns k..k+7 of rows r and r + 1 of a float block: row r's in lanes 0-7, row r + 1's in 8-15. */
TG_INLINE __m512 ld16_rows(const tg_attn_block *b, int kind, int r, int64_t k) {
    const uint8_t *r0 = b->rows[r], *r1 = b->rows[r + 1];
    if (kind == TG_SEG_F32)
        return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps((const float *)(const void *)r0 + k)),
                                  _mm256_loadu_ps((const float *)(const void *)r1 + k), 1);
    const __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(r0 + 2 * k))),
                                              _mm_loadu_si128((const __m128i *)(const void *)(r1 + 2 * k)), 1);
    if (kind == TG_SEG_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* Columns k..k+15 of row r of a float block. */
TG_INLINE __m512 ld16_cols(const tg_attn_block *b, int kind, int r, int64_t k) {
    const uint8_t *row = b->rows[r];
    if (kind == TG_SEG_F32) return _mm512_loadu_ps((const float *)(const void *)row + k);
    const __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)(row + 2 * k));
    if (kind == TG_SEG_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* hadd_ps within each 128-bit lane of two 512-bit registers: (a0 + a1, a2 + a3, b0 + b1, b2 + b3) per lane. */
TG_INLINE __m512 hadd512_ps(__m512 a, __m512 b) {
    return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x88), _mm512_shuffle_ps(a, b, 0xDD));
}

/* store_scores of eight rows held two to a register (a[p]: row 2p in lanes 0-7, row 2p + 1 in 8-15), without
 * taking them apart first: the same additions. store_scores sums row r's lanes v as S0 + S1, S_h = (v[4h] +
 * v[4h + 1]) + (v[4h + 2] + v[4h + 3]); two hadd levels leave, in 128-bit lane h of g, S_h of rows 0, 2, 4, 6 (lanes
 * 0-1: v_{2p}'s halves) or of rows 1, 3, 5, 7 (lanes 2-3); lanes 0 + 1 and 2 + 3 are the scores, interleaved. */
TG_INLINE void store_scores512(const __m512 a[4], int nr, float *dst) {
    const __m512 g = hadd512_ps(hadd512_ps(a[0], a[1]), hadd512_ps(a[2], a[3]));
    const __m512 t = _mm512_add_ps(g, _mm512_shuffle_f32x4(g, g, 0xB1)); /* lane h + its neighbour (S0 + S1) */
    const __m128 even = _mm512_castps512_ps128(t), odd = _mm512_extractf32x4_ps(t, 2);
    const __m256 s = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_unpacklo_ps(even, odd)),
                                          _mm_unpackhi_ps(even, odd), 1);
    store_rows(s, nr, dst);
}

/* scores_nq for float rows: acc[j][p] holds rows 2p (lower half) and 2p + 1 (upper half) for head j. Sixteen
 * columns at a time while they last (each of two rows loaded once, split into the two 8-column steps: row r's
 * k .. k + 7 beside row r + 1's, then k + 8 .. k + 15), then eight: the same FMAs in the same order either way. */
TG_INLINE void scores512_nq(const tg_attn_block *b, int kind, const float *q, int64_t D, float *sc, int64_t ld,
                            const int NQ) {
    __m512 acc[3][4];
    for (int j = 0; j < NQ; j++)
        for (int p = 0; p < 4; p++) acc[j][p] = _mm512_setzero_ps();
    int64_t k = 0;
    for (; k + 16 <= D; k += 16) {
        __m512 qa[3], qb[3];
        for (int j = 0; j < NQ; j++) {
            qa[j] = _mm512_broadcast_f32x8(_mm256_loadu_ps(q + (int64_t)j * D + k));
            qb[j] = _mm512_broadcast_f32x8(_mm256_loadu_ps(q + (int64_t)j * D + k + 8));
        }
        for (int p = 0; p < 4; p++) {
            const __m512 r0 = ld16_cols(b, kind, 2 * p, k), r1 = ld16_cols(b, kind, 2 * p + 1, k);
            const __m512 lo = _mm512_shuffle_f32x4(r0, r1, 0x44), hi = _mm512_shuffle_f32x4(r0, r1, 0xEE);
            for (int j = 0; j < NQ; j++) acc[j][p] = _mm512_fmadd_ps(lo, qa[j], acc[j][p]);
            for (int j = 0; j < NQ; j++) acc[j][p] = _mm512_fmadd_ps(hi, qb[j], acc[j][p]);
        }
    }
    for (; k < D; k += 8) {
        __m512 qv[3];
        for (int j = 0; j < NQ; j++) qv[j] = _mm512_broadcast_f32x8(_mm256_loadu_ps(q + (int64_t)j * D + k));
        for (int p = 0; p < 4; p++) {
            const __m512 kv = ld16_rows(b, kind, 2 * p, k);
            for (int j = 0; j < NQ; j++) acc[j][p] = _mm512_fmadd_ps(kv, qv[j], acc[j][p]);
        }
    }
    for (int j = 0; j < NQ; j++) store_scores512(acc[j], b->nr, sc + (int64_t)j * ld);
}

/* values_nq for float rows: acc[j][i] = columns c + 16 i .. + 15 of head j. */
TG_INLINE void values512_nq(const tg_attn_block *b, int kind, const float *p, int64_t ld, int64_t c, int64_t D,
                            float *o, const int NQ) {
    __m512 acc[4][2];
    for (int j = 0; j < NQ; j++)
        for (int i = 0; i < 2; i++) acc[j][i] = _mm512_loadu_ps(o + (int64_t)j * D + c + 16 * i);
    for (int r = 0; r < b->nr; r++) {
        __m512 pv[4];
        for (int j = 0; j < NQ; j++) pv[j] = _mm512_set1_ps(p[(int64_t)j * ld + r]);
        for (int i = 0; i < 2; i++) {
            const __m512 v = ld16_cols(b, kind, r, c + 16 * i);
            for (int j = 0; j < NQ; j++) acc[j][i] = _mm512_fmadd_ps(pv[j], v, acc[j][i]);
        }
    }
    for (int j = 0; j < NQ; j++)
        for (int i = 0; i < 2; i++) _mm512_storeu_ps(o + (int64_t)j * D + c + 16 * i, acc[j][i]);
}
#else
#define TG_ATTN512 0
#endif

TG_INLINE void scores_kind(const tg_attn_block *b, int kind, int bits, const float *qh, int gq, int64_t D, float *sc,
                           int64_t ld) {
    tg_attn_block g = *b;
    int j = 0;
#if TG_ATTN512
    if (kind != TG_SEG_CODES) {
        for (; j + 3 <= gq; j += 3) scores512_nq(b, kind, qh + (int64_t)j * D, D, sc + (int64_t)j * ld, ld, 3);
        if (gq - j == 2) scores512_nq(b, kind, qh + (int64_t)j * D, D, sc + (int64_t)j * ld, ld, 2);
        else if (gq - j == 1) scores512_nq(b, kind, qh + (int64_t)j * D, D, sc + (int64_t)j * ld, ld, 1);
        return;
    }
#endif
    for (; j + 3 <= gq; j += 3) {
        g.bias = b->bias ? b->bias + j : NULL;
        scores_nq(&g, kind, bits, qh + (int64_t)j * D, D, sc + (int64_t)j * ld, ld, 3);
    }
    g.bias = b->bias ? b->bias + j : NULL;
    if (gq - j == 2) scores_nq(&g, kind, bits, qh + (int64_t)j * D, D, sc + (int64_t)j * ld, ld, 2);
    else if (gq - j == 1) scores_nq(&g, kind, bits, qh + (int64_t)j * D, D, sc + (int64_t)j * ld, ld, 1);
}

TG_INLINE void values_kind(const tg_attn_block *b, int kind, int bits, const float *p, int64_t ld, int gq, int64_t D,
                           float *o) {
    for (int j = 0; j < gq; j += 4) {
        const int nq = gq - j < 4 ? gq - j : 4;
        const float *pj = p + (int64_t)j * ld;
        int64_t pld = ld;
        float *oj = o + (int64_t)j * D;
        /* codes: fold each row's scale into its weights and its zero into one constant per head, once per block */
        float pw[4][TG_ATTN_BLK], zs[4];
        const float *z = NULL;
        if (kind == TG_SEG_CODES) {
            for (int q = 0; q < nq; q++) {
                zs[q] = 0.0f;
                for (int r = 0; r < b->nr; r++) {
                    pw[q][r] = pj[(int64_t)q * ld + r] * b->tscale[r];
                    zs[q] += pj[(int64_t)q * ld + r] * b->tzero[r];
                }
            }
            pj = &pw[0][0];
            pld = TG_ATTN_BLK;
            z = zs;
        }
        int64_t c = 0;
#if TG_ATTN512
        if (kind != TG_SEG_CODES)
            for (; c + 32 <= D; c += 32) {
                switch (nq) {
                case 4: values512_nq(b, kind, pj, pld, c, D, oj, 4); break;
                case 3: values512_nq(b, kind, pj, pld, c, D, oj, 3); break;
                case 2: values512_nq(b, kind, pj, pld, c, D, oj, 2); break;
                default: values512_nq(b, kind, pj, pld, c, D, oj, 1); break;
                }
            }
#endif
        for (; c + 32 <= D; c += 32) {
            switch (nq) {
            case 4: values_nq(b, kind, bits, pj, pld, z, c, D, oj, 4); break;
            case 3: values_nq(b, kind, bits, pj, pld, z, c, D, oj, 3); break;
            case 2: values_nq(b, kind, bits, pj, pld, z, c, D, oj, 2); break;
            default: values_nq(b, kind, bits, pj, pld, z, c, D, oj, 1); break;
            }
        }
        for (; c < D; c += 8) {
            switch (nq) {
            case 4: values_nq8(b, kind, bits, pj, pld, z, c, D, oj, 4); break;
            case 3: values_nq8(b, kind, bits, pj, pld, z, c, D, oj, 3); break;
            case 2: values_nq8(b, kind, bits, pj, pld, z, c, D, oj, 2); break;
            default: values_nq8(b, kind, bits, pj, pld, z, c, D, oj, 1); break;
            }
        }
    }
}

/* KERNEL(b, kind, bits, args...) with b's row kind and code bits as compile-time constants (each specialisation
 * inlined on its own). */
#define DISPATCH(KERNEL, b, ...)                                                                                      \
    do {                                                                                                              \
        switch ((b)->kind) {                                                                                          \
        case TG_SEG_F32: KERNEL(b, TG_SEG_F32, 0, __VA_ARGS__); break;                                                \
        case TG_SEG_F16: KERNEL(b, TG_SEG_F16, 0, __VA_ARGS__); break;                                                \
        case TG_SEG_BF16: KERNEL(b, TG_SEG_BF16, 0, __VA_ARGS__); break;                                              \
        default:                                                                                                      \
            if ((b)->bits == 8) KERNEL(b, TG_SEG_CODES, 8, __VA_ARGS__);                                              \
            else if ((b)->bits == 4) KERNEL(b, TG_SEG_CODES, 4, __VA_ARGS__);                                         \
            else KERNEL(b, TG_SEG_CODES, 2, __VA_ARGS__);                                                             \
            break;                                                                                                    \
        }                                                                                                             \
    } while (0)

void tg_attn_avx2_scores(const tg_attn_block *b, const float *qh, int gq, int64_t D, float *sc, int64_t ld) {
    DISPATCH(scores_kind, b, qh, gq, D, sc, ld);
}

void tg_attn_avx2_values(const tg_attn_block *b, const float *p, int64_t ld, int gq, int64_t D, float *o) {
    DISPATCH(values_kind, b, p, ld, gq, D, o);
}

void tg_attn_avx2_widen(const tg_attn_block *b, int r, int64_t D, float *out) {
    for (int64_t k = 0; k < D; k += 8) {
        __m256 v = ld8(b, b->kind, b->bits, r, k, D);
        if (b->kind == TG_SEG_CODES) {
            if (b->grid) v = _mm256_fmadd_ps(v, _mm256_loadu_ps(b->grid + k), _mm256_loadu_ps(b->grid + D + k));
            else v = _mm256_fmadd_ps(v, _mm256_set1_ps(b->tscale[r]), _mm256_set1_ps(b->tzero[r]));
        }
        _mm256_storeu_ps(out + k, v);
    }
}

void tg_attn_avx2_fold(const float *qh, int gq, int64_t D, const float *grid, float *qf, float *bias) {
    for (int i = 0; i < gq; i++) {
        const float *q = qh + (int64_t)i * D;
        __m256 z = _mm256_setzero_ps();
        for (int64_t k = 0; k < D; k += 8) {
            const __m256 qv = _mm256_loadu_ps(q + k);
            _mm256_storeu_ps(qf + (int64_t)i * D + k, _mm256_mul_ps(qv, _mm256_loadu_ps(grid + k)));
            z = _mm256_fmadd_ps(qv, _mm256_loadu_ps(grid + D + k), z);
        }
        __m128 h = _mm_add_ps(_mm256_castps256_ps128(z), _mm256_extractf128_ps(z, 1));
        h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        bias[i] = _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
    }
}

/* ---- plain float segments: the rows of a run at once ------------------------------------------------------------ *
 * The block kernels cost a block descriptor, a dispatch and, for the values, a store and reload of the query heads'
 * accumulators per eight rows. The run kernels take a plain segment whole: the scores still eight rows at a time
 * (each row's dot products and their reduction are scores512_nq's), the values with every head's accumulators in
 * registers across the rows of a run. Per element of o that is the same chain of FMAs, row after row, so the bits
 * are the block kernels'. */

/* Rows per run where one pass over a run's rows cannot cover every head and column (more than 4 heads or 64
 * columns): each pass re-reads the run's rows, which stay in L1 (32 rows of 256 bytes: 8 KB). */
#define RUN_ROWS 32

/* Rows [*fetched, until) of the run fetched into L2, each row's every line (into L2, not L1: attend.c's
 * RUN_LEAD_BYTES), and with them the same rows of s->beside. */
TG_INLINE void fetch_rows(const tg_attn_rows *s, size_t row_bytes, int64_t *fetched, int64_t until) {
    if (until > s->count) until = s->count;
    for (; *fetched < until; ++*fetched) {
        for (size_t off = 0; off < row_bytes; off += 64)
            _mm_prefetch((const char *)s->p + (size_t)*fetched * s->stride + off, _MM_HINT_T1);
        if (s->beside)
            for (size_t off = 0; off < row_bytes; off += 64)
                _mm_prefetch((const char *)s->beside + (size_t)*fetched * s->beside_stride + off, _MM_HINT_T1);
    }
}

TG_INLINE size_t row_bytes_of(int kind, int64_t D) { return (size_t)D * (kind == TG_SEG_F32 ? 4 : 2); }

bool tg_attn_avx2_runs(int kind, int64_t D) { return TG_ATTN512 && kind != TG_SEG_CODES && D % 16 == 0; }

void tg_attn_avx2_scores_rows(const tg_attn_rows *s, const float *qh, int gq, int64_t D, float *sc, int64_t ld) {
    const size_t rb = row_bytes_of(s->kind, D);
    int64_t fetched = 0;
    fetch_rows(s, rb, &fetched, s->lead);
    tg_attn_block b;
    b.kind = s->kind;
    b.bits = 0;
    b.bias = NULL;
    b.grid = NULL;
    b.tile = NULL;
    for (int64_t i0 = 0; i0 < s->count; i0 += TG_ATTN_BLK) {
        const int nr = (int)(s->count - i0 < TG_ATTN_BLK ? s->count - i0 : TG_ATTN_BLK);
        fetch_rows(s, rb, &fetched, i0 + TG_ATTN_BLK + s->lead);
        b.nr = nr;
        for (int r = 0; r < TG_ATTN_BLK; r++) b.rows[r] = s->p + (size_t)(i0 + (r < nr ? r : 0)) * s->stride;
        switch (s->kind) {
        case TG_SEG_F32: scores_kind(&b, TG_SEG_F32, 0, qh, gq, D, sc + i0, ld); break;
        case TG_SEG_F16: scores_kind(&b, TG_SEG_F16, 0, qh, gq, D, sc + i0, ld); break;
        default: scores_kind(&b, TG_SEG_BF16, 0, qh, gq, D, sc + i0, ld); break;
        }
    }
}

#if TG_ATTN512
/* Columns c .. c + 16 NC - 1 of NQ heads (o_j at o + j * D), over rows [r0, r0 + n) of the run: acc[j][i] holds
 * columns c + 16 i .. + 15 of head j for the whole pass; with fetch, each row's row `lead` ahead is fetched. */
TG_INLINE void values512_run(const tg_attn_rows *s, int kind, int64_t r0, int64_t n, const float *p, int64_t ld,
                             int64_t c, int64_t D, float *o, bool fetch, size_t rb, int64_t *fetched, const int NQ,
                             const int NC) {
    __m512 acc[4][4];
    for (int j = 0; j < NQ; j++)
        for (int i = 0; i < NC; i++) acc[j][i] = _mm512_loadu_ps(o + (int64_t)j * D + c + 16 * i);
    const uint8_t *row = s->p + (size_t)r0 * s->stride;
    for (int64_t r = r0; r < r0 + n; r++, row += s->stride) {
        if (fetch) fetch_rows(s, rb, fetched, r + 1 + s->lead);
        __m512 pv[4];
        for (int j = 0; j < NQ; j++) pv[j] = _mm512_set1_ps(p[(int64_t)j * ld + r]);
        for (int i = 0; i < NC; i++) {
            __m512 v;
            if (kind == TG_SEG_F32) {
                v = _mm512_loadu_ps((const float *)(const void *)row + c + 16 * i);
            } else {
                const __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)(row + 2 * (c + 16 * i)));
                v = kind == TG_SEG_F16 ? _mm512_cvtph_ps(h)
                                       : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
            }
            for (int j = 0; j < NQ; j++) acc[j][i] = _mm512_fmadd_ps(pv[j], v, acc[j][i]);
        }
    }
    for (int j = 0; j < NQ; j++)
        for (int i = 0; i < NC; i++) _mm512_storeu_ps(o + (int64_t)j * D + c + 16 * i, acc[j][i]);
}

/* values512_run with NQ and NC (1..4 each) as compile-time constants. */
TG_INLINE void values512_pass(const tg_attn_rows *s, int kind, int64_t r0, int64_t n, const float *p, int64_t ld,
                              int64_t c, int64_t D, float *o, bool fetch, size_t rb, int64_t *fetched, int nq, int nc) {
#define PASS(Q, C) values512_run(s, kind, r0, n, p, ld, c, D, o, fetch, rb, fetched, Q, C)
#define PASS_NC(Q)                                                                                                    \
    switch (nc) {                                                                                                     \
    case 4: PASS(Q, 4); break;                                                                                        \
    case 3: PASS(Q, 3); break;                                                                                        \
    case 2: PASS(Q, 2); break;                                                                                        \
    default: PASS(Q, 1); break;                                                                                       \
    }
    switch (nq) {
    case 4: PASS_NC(4); break;
    case 3: PASS_NC(3); break;
    case 2: PASS_NC(2); break;
    default: PASS_NC(1); break;
    }
#undef PASS_NC
#undef PASS
}

TG_INLINE void values_rows_kind(const tg_attn_rows *s, int kind, const float *p, int64_t ld, int gq, int64_t D,
                                float *o) {
    const size_t rb = row_bytes_of(kind, D);
    const bool one_pass = gq <= 4 && D <= 64;
    const int64_t run = one_pass ? s->count : RUN_ROWS;
    int64_t fetched = 0;
    fetch_rows(s, rb, &fetched, s->lead);
    for (int64_t r0 = 0; r0 < s->count; r0 += run) {
        const int64_t n = s->count - r0 < run ? s->count - r0 : run;
        bool first = true; /* the run's first pass fetches ahead */
        for (int j = 0; j < gq; j += 4) {
            const int nq = gq - j < 4 ? gq - j : 4;
            for (int64_t c = 0; c < D; c += 64) {
                const int nc = (int)((D - c < 64 ? D - c : 64) / 16);
                values512_pass(s, kind, r0, n, p + (int64_t)j * ld, ld, c, D, o + (int64_t)j * D, first, rb, &fetched,
                               nq, nc);
                first = false;
            }
        }
    }
}
#endif

void tg_attn_avx2_values_rows(const tg_attn_rows *s, const float *p, int64_t ld, int gq, int64_t D, float *o) {
#if TG_ATTN512
    switch (s->kind) {
    case TG_SEG_F32: values_rows_kind(s, TG_SEG_F32, p, ld, gq, D, o); break;
    case TG_SEG_F16: values_rows_kind(s, TG_SEG_F16, p, ld, gq, D, o); break;
    default: values_rows_kind(s, TG_SEG_BF16, p, ld, gq, D, o); break;
    }
#else
    (void)s, (void)p, (void)ld, (void)gq, (void)D, (void)o; /* tg_attn_avx2_runs is false: never called */
#endif
}

#else
typedef int tg_attend_avx2_unused; /* ISO C forbids an empty translation unit */
#endif
