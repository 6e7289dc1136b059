/* attend_int_avx512.c — the integer-domain attention kernels of attend_int_avx2.c at 512 bits (issue #16): the
 * same integer sums (exact, in any order) and the same float operations lane for lane, so the same bits, with half
 * the instructions per row. Read attend_int_avx2.c first: its header is the arithmetic; this file only widens it.
 *
 * - Scores: a lane is a row, sixteen rows per register (tiles of a multiple of 16 rows).
 * - Values: a lane is a channel word, sixteen per register (head dim / codes per byte a multiple of 16), or two row
 *   quads of eight lanes each (int2 at head dim 32: values_quad_pairs).
 * - The float steps that reduce over lanes (a query head's bias and max, a run's zero sum and max per head) keep
 *   the 256-bit eight-lane chains: two query heads share a register, head a in lanes 0-7 and head b in lanes 8-15,
 *   and each half is reduced in hsum8's / hmax8's order (hsum8x2 / hmax8x2: both halves at once, in the register).
 *   The bytes are packed by the same saturating packs, per 128-bit lane, then put in order by one permute. */
#include "kvcache/attend_int_inline.h"

#if TG_HAVE_AVX2 && TG_ATTN_INT512

#include <math.h>

/* Slot s of every byte of x (codes of `bits` bits) as bytes. */
TG_INLINE __m512i slot(const int bits, __m512i x, const int s) {
    if (bits == 8) return x;
    __m512i y = x;
    switch (s * bits) {
    case 2: y = _mm512_srli_epi16(x, 2); break;
    case 4: y = _mm512_srli_epi16(x, 4); break;
    case 6: y = _mm512_srli_epi16(x, 6); break;
    default: break;
    }
    return _mm512_and_si512(y, _mm512_set1_epi8(bits == 4 ? 0x0f : 0x03));
}

/* Two eight-lane float vectors as one register: a in lanes 0-7, b in 8-15. */
TG_INLINE __m512 pair(__m256 a, __m256 b) { return _mm512_insertf32x8(_mm512_castps256_ps512(a), b, 1); }

/* v[0..3] (int32, head a's eight lanes then head b's, each within a byte's range: unsigned, or signed when sgn) as
 * 32 bytes per head in lane order: da[0..8) the int32 words of head a's bytes v[0][0..3], v[0][4..7], v[1][0..3], ...
 * — pack_bytes on each half (the same saturating packs, per 128-bit lane). */
TG_INLINE void pack_bytes2(const __m512i *v, const int sgn, int32_t *da, int32_t *db) {
    const __m512i a = sgn ? _mm512_packs_epi32(v[0], v[1]) : _mm512_packus_epi32(v[0], v[1]);
    const __m512i b = sgn ? _mm512_packs_epi32(v[2], v[3]) : _mm512_packus_epi32(v[2], v[3]);
    const __m512i c = sgn ? _mm512_packs_epi16(a, b) : _mm512_packus_epi16(a, b);
    const __m512i order = _mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
    const __m512i o = _mm512_permutexvar_epi32(order, c);
    _mm256_storeu_si256((__m256i *)(void *)da, _mm512_castsi512_si256(o));
    _mm256_storeu_si256((__m256i *)(void *)db, _mm512_extracti64x4_epi64(o, 1));
}

/* CALL(NQ) for NQ the value of nq (1..8; more is 8): a kernel instantiated once per head count. */
#define BY_HEADS(nq, CALL)                                                                                            \
    switch (nq) {                                                                                                     \
    case 1: CALL(1); break;                                                                                           \
    case 2: CALL(2); break;                                                                                           \
    case 3: CALL(3); break;                                                                                           \
    case 4: CALL(4); break;                                                                                           \
    case 5: CALL(5); break;                                                                                           \
    case 6: CALL(6); break;                                                                                           \
    case 7: CALL(7); break;                                                                                           \
    default: CALL(8); break;                                                                                          \
    }

/* Per half (lanes 0-7 and 8-15): hmax8 / hsum8 of that half, in hmax8's / hsum8's order (lane 0 of each half is
 * their result bit for bit, NaN included: the same operations on the same operands in the same order), broadcast over
 * the half. Three in-register steps for both heads at once instead of two reductions through the scalar unit. */
TG_INLINE __m512 half_bcast(__m512 v) {
    return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 8, 8, 8, 8, 8, 8, 8, 8), v);
}
TG_INLINE __m512 hmax8x2(__m512 v) {
    v = _mm512_max_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1))); /* max(lo, hi) of each half */
    v = _mm512_max_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));       /* movehl */
    return half_bcast(_mm512_max_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)))); /* movehdup */
}
TG_INLINE __m512 hsum8x2(__m512 v) {
    v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
    v = _mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));
    return half_bcast(_mm512_add_ps(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1))));
}
/* levels / amax where 0 < amax < inf, else 0 (the scalar code's test and division, lane by lane) */
TG_INLINE __m512 inverse_levels(__m512 amax, float levels) {
    const __mmask16 ok = _mm512_cmp_ps_mask(amax, _mm512_setzero_ps(), _CMP_GT_OQ) &
                         _mm512_cmp_ps_mask(amax, _mm512_set1_ps(INFINITY), _CMP_LT_OQ);
    return _mm512_maskz_div_ps(ok, _mm512_set1_ps(levels), amax);
}
TG_INLINE float lane0(__m512 v) { return _mm512_cvtss_f32(v); }
TG_INLINE float lane8(__m512 v) { return _mm_cvtss_f32(_mm512_extractf32x4_ps(v, 2)); }

/* ---- keys ------------------------------------------------------------------------------------------------------ */

/* attend_int_avx2.c's prepare_keys, two heads a register (an odd last head alone: prepare_key_head). */
TG_INLINE void prepare_keys(const float *qh, int gq, int64_t D, const uint16_t *gscale, const uint16_t *gzero,
                            const int bits, tg_attn_int_queries *q, const int DD) {
    const int64_t n = DD ? DD : D;
    const float levels = bits == 8 ? (float)KEY_Q8 : (float)KEY_Q, step = 1.0f / levels;
    const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    __m512 sv[TG_ATTN_INT_MAX_D / 8], zv[TG_ATTN_INT_MAX_D / 8]; /* the grid, widened once, in both halves */
    for (int64_t k = 0; k < n; k += 8) {
        const __m256 s = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(gscale + k)));
        const __m256 z = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(gzero + k)));
        sv[k / 8] = pair(s, s);
        zv[k / 8] = pair(z, z);
    }
    int j = 0;
    for (; j + 1 < gq; j += 2) {
        const float *xa = qh + (int64_t)j * n, *xb = xa + n;
        __m512 qf[TG_ATTN_INT_MAX_D / 8], m = _mm512_setzero_ps(), z = _mm512_setzero_ps();
        for (int64_t k = 0; k < n; k += 8) { /* the fold: qf = q * scale, bias = q . zero */
            const __m512 qv = pair(_mm256_loadu_ps(xa + k), _mm256_loadu_ps(xb + k));
            qf[k / 8] = _mm512_mul_ps(qv, sv[k / 8]);
            z = _mm512_fmadd_ps(qv, zv[k / 8], z);
            m = _mm512_max_ps(m, _mm512_and_ps(qf[k / 8], abs_mask));
        }
        const __m512 amax = hmax8x2(m), bias = hsum8x2(z), dq = _mm512_mul_ps(amax, _mm512_set1_ps(step));
        const __m512 iv = inverse_levels(amax, levels);
        q->bias[j] = lane0(bias);
        q->dq[j] = lane0(dq);
        q->bias[j + 1] = lane8(bias);
        q->dq[j + 1] = lane8(dq);
        int32_t *lo = q->lo + (int64_t)j * (n / 4), *hi = q->hi + (int64_t)j * (n / 4);
        for (int64_t k = 0; k < n; k += 32) {
            __m512i v[4], h[4];
            for (int i = 0; i < 4; i++) {
                v[i] = _mm512_cvtps_epi32(_mm512_mul_ps(qf[k / 8 + i], iv));
                h[i] = _mm512_setzero_si512();
                if (bits == 8) { /* q = 128 hi + lo, lo in [0, 127], hi in [-64, 63] */
                    h[i] = _mm512_srai_epi32(v[i], 7);
                    v[i] = _mm512_and_si512(v[i], _mm512_set1_epi32(127));
                }
            }
            pack_bytes2(v, 1, lo + k / 4, lo + n / 4 + k / 4);
            if (bits == 8) pack_bytes2(h, 1, hi + k / 4, hi + n / 4 + k / 4);
        }
    }
    if (j < gq) { /* an odd last head alone, in eight lanes: where a 512-bit operation costs two 256-bit ones (Zen 4),
                   * half the cost of pairing it with itself */
        __m256 sv8[TG_ATTN_INT_MAX_D / 8], zv8[TG_ATTN_INT_MAX_D / 8];
        for (int64_t k = 0; k < n; k += 8) {
            sv8[k / 8] = _mm512_castps512_ps256(sv[k / 8]);
            zv8[k / 8] = _mm512_castps512_ps256(zv[k / 8]);
        }
        prepare_key_head(qh + (int64_t)j * n, n, sv8, zv8, bits, q, j);
    }
}

#define PREPARE_KEYS(B, DD)                                                                                           \
    static __attribute__((noinline)) void prepare_keys_b##B##_d##DD(const float *qh, int gq, int64_t D,               \
                                                                     const uint16_t *gscale, const uint16_t *gzero,   \
                                                                     tg_attn_int_queries *q) {                        \
        prepare_keys(qh, gq, D, gscale, gzero, B, q, DD);                                                             \
    }
TG_ATTN_INT_INSTANCES(PREPARE_KEYS)
#undef PREPARE_KEYS

TG_ATTN_INT_LOOKUP(tg_attn_int_prepare_fn, tg_attn_int512_prepare_for, prepare_keys)

/* Scores of tile rows [rb, rb + 16 NB) for NQ heads, stored for the rows of [t0, t0 + count): NB * NQ (int8: twice
 * that) independent accumulators. */
TG_INLINE void scores_blocks(const int bits, const tg_attn_tile *t, int64_t rb, const int32_t *q_lo,
                             const int32_t *q_hi, const float *dq, const float *bias, int64_t D, float *sc, int64_t ld,
                             const int NQ, const int NB) {
    const int cpb = 8 / bits;
    const int64_t nchunk = D / (4 * cpb), qw = D / 4; /* int32 words per query head */
    __m512i acc[2][8], acch[2][8];
    for (int b = 0; b < NB; b++)
        for (int j = 0; j < NQ; j++) acc[b][j] = acch[b][j] = _mm512_setzero_si512();
    for (int64_t c = 0; c < nchunk; c++) {
        __m512i x[2];
        for (int b = 0; b < NB; b++)
            x[b] = _mm512_loadu_si512((const void *)(t->tile + (c * t->G + rb + 16 * b) * 4));
        for (int s = 0; s < cpb; s++) {
            __m512i xs[2];
            for (int b = 0; b < NB; b++) xs[b] = slot(bits, x[b], s);
            const int64_t w = c * cpb + s;
            for (int j = 0; j < NQ; j++) {
                const __m512i ql = _mm512_set1_epi32(q_lo[j * qw + w]);
                for (int b = 0; b < NB; b++) acc[b][j] = _mm512_dpbusd_epi32(acc[b][j], xs[b], ql);
                if (bits == 8) {
                    const __m512i qh = _mm512_set1_epi32(q_hi[j * qw + w]);
                    for (int b = 0; b < NB; b++) acch[b][j] = _mm512_dpbusd_epi32(acch[b][j], xs[b], qh);
                }
            }
        }
    }
    for (int b = 0; b < NB; b++) {
        const int64_t r0 = rb + 16 * b;
        const int64_t a = t->t0 > r0 ? t->t0 - r0 : 0, e = t->t0 + t->count - r0 < 16 ? t->t0 + t->count - r0 : 16;
        for (int j = 0; j < NQ; j++) {
            const __m512i isum = bits == 8 ? _mm512_add_epi32(_mm512_slli_epi32(acch[b][j], 7), acc[b][j]) : acc[b][j];
            const __m512 sv = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(dq[j]), _mm512_set1_ps(bias[j]));
            float *row = sc + (int64_t)j * ld; /* segment row i at row[i]: tile row r0 + r is row[r0 + r - t0] */
            if (a == 0 && e == 16) {
                _mm512_storeu_ps(row + (r0 - t->t0), sv);
            } else {
                float out[16];
                _mm512_storeu_ps(out, sv);
                for (int64_t r = a; r < e; r++) row[r0 + r - t->t0] = out[r];
            }
        }
    }
}

/* NQ heads over every block of the segment: two blocks at a time while the tile has them. */
TG_INLINE void scores_heads(const int bits, const tg_attn_tile *t, const int32_t *lo, const int32_t *hi,
                            const float *dq, const float *bias, int64_t D, float *sc, int64_t ld, const int NQ) {
    const int64_t end = t->t0 + t->count;
    int64_t rb = t->t0 / 16 * 16;
    for (; rb + 16 < end && rb + 32 <= t->G; rb += 32) scores_blocks(bits, t, rb, lo, hi, dq, bias, D, sc, ld, NQ, 2);
    for (; rb < end; rb += 16) scores_blocks(bits, t, rb, lo, hi, dq, bias, D, sc, ld, NQ, 1);
}

/* Heads in groups of eight (int8: four, each with its high and low accumulators). */
TG_INLINE void scores_all(const int bits, const tg_attn_tile *t, const tg_attn_int_queries *q, int gq, int64_t D,
                          float *sc, int64_t ld) {
    const int64_t qw = D / 4;
    const int most = bits == 8 ? 4 : 8;
    for (int j = 0; j < gq;) {
        const int nq = gq - j < most ? gq - j : most;
#define HEADS(NQ) scores_heads(bits, t, q->lo + j * qw, q->hi + j * qw, q->dq + j, q->bias + j, D, sc + j * ld, ld, NQ)
        BY_HEADS(nq, HEADS)
#undef HEADS
        j += nq;
    }
}

/* One instance per code width and head dim (32, 64, 128; 0: any other), as the query preparation: a constant head
 * dim unrolls the chunk loop. */
#define SCORES_INSTANCE(B, DD)                                                                                        \
    static __attribute__((noinline)) void scores_b##B##_d##DD(const tg_attn_tile *t, const tg_attn_int_queries *q,    \
                                                              int gq, int64_t D, float *sc, int64_t ld) {             \
        scores_all(B, t, q, gq, DD ? DD : D, sc, ld);                                                                 \
    }
TG_ATTN_INT_INSTANCES(SCORES_INSTANCE)
#undef SCORES_INSTANCE

TG_ATTN_INT_LOOKUP(tg_attn_int_scores_fn, tg_attn_int512_scores_for, scores)

/* ---- values ---------------------------------------------------------------------------------------------------- */

/* attend_int_avx2.c's prepare_run, two heads a register (an odd last head alone: prepare_run_head). FULL: every row
 * of the run's 8-row vectors lies in the segment (no masks); FULL == 2: and the run is all RUN rows (its vector count
 * a constant, so that the weights stay in registers). */
TG_INLINE void prepare_run(const int bits, const int FULL, const tg_attn_tile *t, int64_t R, int64_t n4, const float *p,
                           int64_t ld, int gq, const uint16_t *tscale, const uint16_t *tzero, const run_weights *rw) {
    const float levels = bits == 8 ? (float)VAL_W8 : (float)VAL_W, step = 1.0f / levels;
    const int64_t nv = FULL == 2 ? RUN / 8 : (n4 + 1) / 2; /* 8-row vectors of the run */
    __m512 sv[RUN / 8], zv[RUN / 8];
    __mmask8 mk[RUN / 8];
    for (int64_t v = 0; v < nv; v++) {
        /* rows R + 8 v + l: valid when inside the segment; their scales (the tile's own rows: in bounds) */
        const int64_t r0 = R + 8 * v - t->t0;
        if (!FULL) { /* lanes l with 0 <= r0 + l < count */
            const int64_t lo = r0 < 0 ? -r0 : 0, hi = t->count - r0 < 8 ? t->count - r0 : 8;
            mk[v] = (__mmask8)(hi > lo ? ((1u << hi) - 1u) & ~((1u << lo) - 1u) : 0u);
        }
        const __m256 s = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(tscale + r0)));
        const __m256 z = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(tzero + r0)));
        sv[v] = pair(s, s);
        zv[v] = pair(z, z);
    }
    const __m512 stepv = _mm512_set1_ps(step);
    int j = 0;
    for (; j + 1 < gq; j += 2) {
        __m512 w[RUN / 8], m = _mm512_setzero_ps(), zacc = _mm512_setzero_ps();
        for (int64_t v = 0; v < nv; v++) {
            const int64_t at = R + 8 * v - t->t0;
            const float *pa = p + (int64_t)j * ld + at, *pb = pa + ld;
            const __m512 pv = FULL ? pair(_mm256_loadu_ps(pa), _mm256_loadu_ps(pb))
                                   : pair(_mm256_maskz_loadu_ps(mk[v], pa), _mm256_maskz_loadu_ps(mk[v], pb));
            w[v] = _mm512_mul_ps(pv, sv[v]);
            zacc = _mm512_fmadd_ps(pv, zv[v], zacc);
            m = _mm512_max_ps(m, w[v]);
        }
        const __m512 amax = hmax8x2(m), zs = hsum8x2(zacc), dw = _mm512_mul_ps(amax, stepv);
        const __m512 iv = inverse_levels(amax, levels);
        rw->dw[j] = lane0(dw);
        rw->zs[j] = lane0(zs);
        rw->dw[j + 1] = lane8(dw);
        rw->zs[j + 1] = lane8(zs);
        __m512i w8[RUN / 8], wh[RUN / 8];
        for (int64_t v = 0; v < RUN / 8; v++) {
            w8[v] = v < nv ? _mm512_cvtps_epi32(_mm512_mul_ps(w[v], iv)) : _mm512_setzero_si512();
            wh[v] = _mm512_setzero_si512();
            if (bits == 8) { /* w8 = 128 hi + lo, both in [0, 127] */
                wh[v] = _mm512_srli_epi32(w8[v], 7);
                w8[v] = _mm512_and_si512(w8[v], _mm512_set1_epi32(127));
            }
        }
        pack_bytes2(w8, 0, rw->lo + 8 * j, rw->lo + 8 * (j + 1));
        if (bits == 8) pack_bytes2(wh, 0, rw->hi + 8 * j, rw->hi + 8 * (j + 1));
    }
    if (j < gq) { /* an odd last head alone, in eight lanes */
        __m256 pv[RUN / 8], sv8[RUN / 8], zv8[RUN / 8];
        for (int64_t v = 0; v < nv; v++) {
            const float *pj = p + (int64_t)j * ld + (R + 8 * v - t->t0);
            pv[v] = FULL ? _mm256_loadu_ps(pj) : _mm256_maskz_loadu_ps(mk[v], pj);
            sv8[v] = _mm512_castps512_ps256(sv[v]);
            zv8[v] = _mm512_castps512_ps256(zv[v]);
        }
        prepare_run_head(pv, nv, sv8, zv8, bits, rw, j);
    }
}

/* o_j[channel words of lane vectors v0 .. v0 + NV - 1] += the run's value sums for NQ heads (NV * NQ * slots
 * independent accumulators, at most 16). */
TG_INLINE void values_vecs(const int bits, const tg_attn_tile *t, int64_t R, int64_t n4, int64_t v0,
                           const run_weights *rw, int j0, int64_t D, float *o, const int NQ, const int NV) {
    const int cpb = 8 / bits, ns = bits == 8 ? 2 : cpb; /* accumulators per (vector, head): int8 hi and lo */
    const int64_t lanes = D / cpb;
    __m512i acc[2][8][4];
    for (int v = 0; v < NV; v++)
        for (int j = 0; j < NQ; j++)
            for (int s = 0; s < ns; s++) acc[v][j][s] = _mm512_setzero_si512();
    for (int64_t i = 0; i < n4; i++) {
        const int64_t t4 = R / 4 + i;
        __m512i wl[8], wh[8];
        for (int j = 0; j < NQ; j++) {
            wl[j] = _mm512_set1_epi32(rw->lo[8 * (j0 + j) + i]);
            if (bits == 8) wh[j] = _mm512_set1_epi32(rw->hi[8 * (j0 + j) + i]);
        }
        for (int v = 0; v < NV; v++) {
            const __m512i x = _mm512_loadu_si512((const void *)(t->tile + (t4 * lanes + 16 * (v0 + v)) * 4));
            if (bits == 8) {
                for (int j = 0; j < NQ; j++) {
                    acc[v][j][0] = _mm512_dpbusd_epi32(acc[v][j][0], x, wl[j]);
                    acc[v][j][1] = _mm512_dpbusd_epi32(acc[v][j][1], x, wh[j]);
                }
                continue;
            }
            for (int s = 0; s < cpb; s++) {
                const __m512i xs = slot(bits, x, s);
                for (int j = 0; j < NQ; j++) acc[v][j][s] = _mm512_dpbusd_epi32(acc[v][j][s], wl[j], xs);
            }
        }
    }
    for (int j = 0; j < NQ; j++) {
        const __m512 dw = _mm512_set1_ps(rw->dw[j0 + j]), zs = _mm512_set1_ps(rw->zs[j0 + j]);
        float *oj = o + (int64_t)(j0 + j) * D;
        for (int v = 0; v < NV; v++)
            for (int s = 0; s < cpb; s++) {
                const __m512i isum =
                    bits == 8 ? _mm512_add_epi32(_mm512_slli_epi32(acc[v][j][1], 7), acc[v][j][0]) : acc[v][j][s];
                float *dst = oj + 16 * (v0 + v) + s * lanes;
                const __m512 add = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), dw, zs);
                _mm512_storeu_ps(dst, _mm512_add_ps(_mm512_loadu_ps(dst), add));
            }
    }
}

/* values_vecs where a row quad is eight int32 lanes (int2 codes at head dim 32): two quads a register, quad i in lanes
 * 0-7 and quad i + 1 in lanes 8-15, each half weighed by its own quad's weights (an odd last quad's partner weighs 0:
 * prepare_run gives the rows past the segment weight 0, and the tile holds them). The halves' sums are added (exact
 * integers) before the float steps, which are attend_int_avx2.c's eight-lane ones, so the bits are its bits. */
TG_INLINE void values_quad_pairs(const int bits, const tg_attn_tile *t, int64_t R, int64_t n4, const run_weights *rw,
                                 int j0, int64_t D, float *o, const int NQ) {
    const int cpb = 8 / bits; /* codes per byte: one accumulator per slot (not int8: its quads are wider) */
    __m512i acc[8][4]; /* NQ * slots <= 16 in use */
    for (int j = 0; j < NQ; j++)
        for (int s = 0; s < cpb; s++) acc[j][s] = _mm512_setzero_si512();
    for (int64_t i = 0; i < n4; i += 2) {
        const __m512i x = _mm512_loadu_si512((const void *)(t->tile + (R / 4 + i) * 8 * 4));
        __m512i w[8];
        for (int j = 0; j < NQ; j++) {
            const int32_t *wj = rw->lo + 8 * (j0 + j) + i; /* i + 1 <= 7: within the run's eight words */
            w[j] = _mm512_mask_set1_epi32(_mm512_set1_epi32(wj[0]), (__mmask16)0xFF00, wj[1]);
        }
        for (int s = 0; s < cpb; s++) {
            const __m512i xs = slot(bits, x, s);
            for (int j = 0; j < NQ; j++) acc[j][s] = _mm512_dpbusd_epi32(acc[j][s], w[j], xs);
        }
    }
    for (int j = 0; j < NQ; j++) {
        const __m256 dw = _mm256_set1_ps(rw->dw[j0 + j]), zs = _mm256_set1_ps(rw->zs[j0 + j]);
        float *oj = o + (int64_t)(j0 + j) * D;
        for (int s = 0; s < cpb; s++) {
            const __m256i isum = _mm256_add_epi32(_mm512_castsi512_si256(acc[j][s]), _mm512_extracti64x4_epi64(acc[j][s], 1));
            float *dst = oj + s * 8;
            const __m256 add = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), dw, zs);
            _mm256_storeu_ps(dst, _mm256_add_ps(_mm256_loadu_ps(dst), add));
        }
    }
}

/* NQ heads over every lane vector, two at a time where the accumulators allow. */
TG_INLINE void values_heads(const int bits, const tg_attn_tile *t, int64_t R, int64_t n4, const run_weights *rw, int j0,
                            int64_t D, float *o, const int NQ) {
    const int ns = bits == 8 ? 2 : 8 / bits;
    const int64_t nvec = D / (8 / bits) / 16;
    if (bits != 8 && D / (8 / bits) == 8) {
        values_quad_pairs(bits, t, R, n4, rw, j0, D, o, NQ);
        return;
    }
    int64_t v = 0;
    if (2 * NQ * ns <= 16)
        for (; v + 2 <= nvec; v += 2) values_vecs(bits, t, R, n4, v, rw, j0, D, o, NQ, 2);
    for (; v < nvec; v++) values_vecs(bits, t, R, n4, v, rw, j0, D, o, NQ, 1);
}

/* n4: the run's row quads (run_quads; the constant RUN / 4 for a whole run, so that the kernels' loops unroll). */
TG_INLINE void values_run(const int bits, const tg_attn_tile *t, int64_t R, int64_t n4, const run_weights *rw, int gq,
                          int64_t D, float *o) {
    const int most = bits == 2 ? 4 : 8; /* heads a pass: NQ * slots accumulators <= 16 */
    for (int j = 0; j < gq;) {
        const int nq = gq - j < most ? gq - j : most;
#define HEADS(NQ) values_heads(bits, t, R, n4, rw, j, D, o, NQ)
        BY_HEADS(nq, HEADS)
#undef HEADS
        j += nq;
    }
}

/* The value sums per code width and head dim (32, 64, 128; 0: any other), as the scores. */
#define VALUES_INSTANCE(B, DD)                                                                                        \
    static __attribute__((noinline)) void values_b##B##_d##DD(const tg_attn_tile *t, int64_t R,                       \
                                                              const run_weights *rw, int gq, int64_t D, float *o) {   \
        const int64_t n4 = run_quads(t, R, NULL);                                                                     \
        if (n4 == RUN / 4) values_run(B, t, R, RUN / 4, rw, gq, DD ? DD : D, o);                                      \
        else values_run(B, t, R, n4, rw, gq, DD ? DD : D, o);                                                         \
    }
#define RUN_INSTANCES(B)                                                                                              \
    static __attribute__((noinline)) void prepare_run_b##B(const tg_attn_tile *t, int64_t R, const float *p,          \
                                                           int64_t ld, int gq, const uint16_t *tscale,                \
                                                           const uint16_t *tzero, const run_weights *rw) {            \
        int full;                                                                                                     \
        const int64_t n4 = run_quads(t, R, &full);                                                                    \
        if (full && n4 == RUN / 4) prepare_run(B, 2, t, R, n4, p, ld, gq, tscale, tzero, rw);                         \
        else if (full) prepare_run(B, 1, t, R, n4, p, ld, gq, tscale, tzero, rw);                                     \
        else prepare_run(B, 0, t, R, n4, p, ld, gq, tscale, tzero, rw);                                               \
    }                                                                                                                 \
    VALUES_INSTANCE(B, 32) VALUES_INSTANCE(B, 64) VALUES_INSTANCE(B, 128) VALUES_INSTANCE(B, 0)
RUN_INSTANCES(8)
RUN_INSTANCES(4)
RUN_INSTANCES(2)
#undef RUN_INSTANCES
#undef VALUES_INSTANCE

tg_attn_int_prepare_run_fn *tg_attn_int512_prepare_run_for(int bits) {
    return bits == 8 ? prepare_run_b8 : bits == 4 ? prepare_run_b4 : prepare_run_b2;
}

TG_ATTN_INT_LOOKUP(tg_attn_int_values_run_fn, tg_attn_int512_values_run_for, values)

#undef BY_HEADS

#else
typedef int tg_attend_int_avx512_unused; /* ISO C forbids an empty translation unit */
#endif
