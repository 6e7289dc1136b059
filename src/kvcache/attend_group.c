/* attend_group.c — prefill attention of several tokens at once (tg_kvcache_attend_group): the tokens of a chunk see
 * the same keys and values, so each row is read and widened once for the query heads of up to eight tokens instead
 * of once per token.
 *
 * The arithmetic of every (query head, row) pair is exactly that of tg_kvcache_attend_piece with one share (attend.c
 * and attend_avx2.c): a score is the 8-lane FMA sequence over the columns (k = l, l + 8, ... in lane l) reduced in
 * the kernels' hadd order, the softmax is tg_kvcache_piece_softmax itself, and each output column accumulates
 * p_t * v_t by FMA over the visible rows in token order. Only the registers change: a 16-lane register holds two
 * query heads' 8-lane accumulators for one row (scores) or 16 columns of one head's output (values), and the
 * reductions are the hadds written as in-lane shuffles. Blocking never matters to those sequences, so chunked prefill
 * still gives the bits of decoding token by token. Rows a token does not see are never added to its output. */
#include <stdint.h>
#include <string.h>

#include "kvcache/attend_kernels.h"
#include "kvcache/cache_internal.h"
#include "kvcache/codec.h"
#include "kvcache/kvcache.h"

#if TG_HAVE_AVX2 && defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
#define TG_GROUP_AVX512 1
#include <immintrin.h>
#else
#define TG_GROUP_AVX512 0
#endif

#define GROUP_HEADS 16 /* query heads a group aims for (tokens per group: GROUP_HEADS / gq, at least 1) */
#define MAX_TOKENS 8   /* most tokens per group */
#define MAX_HEADS 64   /* most query heads per group */
#define ROWS 32        /* rows widened per pass */

int tg_kvcache_group_tokens(const tg_kvcache *c) {
    if (!TG_GROUP_AVX512) return 0;
    const int gq = c->g.n_heads / c->g.n_kv_heads;
    const int n = GROUP_HEADS / gq;
    return n < 1 ? 1 : n > MAX_TOKENS ? MAX_TOKENS : n;
}

/* work: the widened rows [ROWS][D], then the scores [nq * gq][max_stored] */
size_t tg_kvcache_group_work_floats(const tg_kvcache *c, int nq) {
    const size_t gq = (size_t)(c->g.n_heads / c->g.n_kv_heads);
    return (size_t)ROWS * (size_t)c->g.head_dim + (size_t)nq * gq * (size_t)c->g.max_stored;
}

/* Whether every segment of kv-head h's keys and values that the token at pos sees is fp32 / fp16 / bf16. */
static bool float_segments(const tg_kvcache *c, const tg_layer_cache *L, int h, int64_t s1, int64_t lo, int64_t hi) {
    for (int keys = 0; keys < 2; keys++) {
        tg_segment g;
        if (s1 >= 0) {
            tg_store_sink_segment(c, L, keys, h, 0, s1, &g);
            if (g.kind == TG_SEG_CODES) return false;
        }
        for (int64_t n = lo; n <= hi;) {
            tg_store_segment(c, L, keys, h, n, hi, &g);
            if (g.kind == TG_SEG_CODES || g.count < 1) return false;
            n += g.count;
        }
    }
    return true;
}

bool tg_kvcache_attend_group_ok(const tg_kvcache *c, int layer, int64_t pos0, int nq) {
    const int64_t D = c->g.head_dim;
    const int gq = c->g.n_heads / c->g.n_kv_heads;
    if (!TG_GROUP_AVX512 || !c->simd || D % 16 != 0 || nq < 1 || gq > MAX_HEADS) return false;
    int64_t s1, lo, hi, first_lo = 0, prev = -1, last_s1 = -1;
    /* each token sees all of the token before it and more: the visible tokens of every query are a prefix of the
     * last one's (sinks before non-sink tokens, a non-sink token only once every held sink is visible) */
    for (int j = nq - 1; j >= 0; j--) {
        bool plain;
        const int64_t n = tg_kvcache_visible(c, layer, pos0 + j, &s1, &lo, &hi, &plain);
        if (!plain || tg_kvcache_attend_splits(c, layer, pos0 + j) != 1) return false;
        if (j == nq - 1) {
            first_lo = lo;
            last_s1 = s1;
            const tg_layer_cache *L = &c->layers[c->kv_source[layer]];
            for (int h = 0; h < c->g.n_kv_heads; h++)
                if (!float_segments(c, L, h, s1, lo, hi)) return false;
        } else if (lo != first_lo || n > prev || (hi >= lo && s1 != last_s1)) {
            return false;
        }
        prev = n;
    }
    return true;
}

#if TG_GROUP_AVX512

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
static void values_rows(const float *const *rows, int64_t n, int64_t D, const float *const *p, float *const *o, int ne) {
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
static void scores_rows(const float *const *rows, int64_t n, int64_t D, const float *const *q, float *const *s, int ne) {
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
static void widen_rows(const tg_segment *g, int64_t i0, int64_t n, int64_t D, float *tile, const float **rows) {
    for (int64_t r = 0; r < n; r++) {
        const uint8_t *src = g->p + (size_t)(i0 + r) * g->stride;
        if (g->kind == TG_SEG_F32) {
            rows[r] = (const float *)(const void *)src;
            continue;
        }
        float *dst = tile + r * D;
        for (int64_t k = 0; k < D; k += 16) {
            const __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)(src + 2 * k));
            const __m512 v = g->kind == TG_SEG_F16 ? _mm512_cvtph_ps(h)
                                                   : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
            _mm512_storeu_ps(dst + k, v);
        }
        rows[r] = dst;
    }
}

/* The segments the last token sees, in token order: sinks [0, s1], then non-sink tokens [lo, hi]. */
typedef struct {
    const tg_kvcache *c;
    const tg_layer_cache *L;
    int h;
    int64_t s1, lo, hi;
} group_view;

static int64_t segment_at(const group_view *gv, bool keys, int64_t t, int64_t n_sinks, tg_segment *g) {
    if (t < n_sinks) {
        tg_store_sink_segment(gv->c, gv->L, keys, gv->h, 0, gv->s1, g);
        return 0;
    }
    tg_store_segment(gv->c, gv->L, keys, gv->h, gv->lo + (t - n_sinks), gv->hi, g);
    return t;
}

void tg_kvcache_attend_group(const tg_kvcache *c, int layer, int64_t pos0, int nq, const float *q_rot, size_t q_stride,
                             int h, float *parts, size_t part_stride, float *work) {
    const int64_t D = c->g.head_dim, ld = c->g.max_stored;
    const int gq = c->g.n_heads / c->g.n_kv_heads, ne = nq * gq;
    group_view gv = {c, &c->layers[c->kv_source[layer]], h, -1, 0, -1};
    int64_t nt[MAX_TOKENS];
    for (int j = 0; j < nq; j++) {
        bool plain;
        nt[j] = tg_kvcache_visible(c, layer, pos0 + j, &gv.s1, &gv.lo, &gv.hi, &plain);
    }
    const int64_t n_sinks = gv.s1 + 1, total = nt[nq - 1];
    float *tile = work, *sc = work + ROWS * D;
    const float *q[MAX_HEADS];
    float *s[MAX_HEADS];
    for (int e = 0; e < ne; e++) {
        q[e] = q_rot + (size_t)(e / gq) * q_stride + (size_t)(h * gq + e % gq) * (size_t)D;
        s[e] = sc + (int64_t)e * ld;
    }
    const float *rows[ROWS];

    /* keys: the scores of every row for every token that sees it (a token's scores past its last row are written
     * and never read) */
    for (int64_t t = 0; t < total;) {
        tg_segment g;
        const int64_t t0 = segment_at(&gv, true, t, n_sinks, &g);
        const int64_t end = t0 + g.count < total ? t0 + g.count : total;
        for (; t < end;) {
            const int64_t n = end - t < ROWS ? end - t : ROWS;
            widen_rows(&g, t - t0, n, D, tile, rows);
            int j0 = 0;
            while (nt[j0] <= t) j0++;
            float *st[MAX_HEADS];
            for (int e = j0 * gq; e < ne; e++) st[e] = s[e] + t;
            scores_rows(rows, n, D, q + j0 * gq, st + j0 * gq, ne - j0 * gq);
            t += n;
        }
    }

    /* the softmax of each token, as its own piece takes it */
    bool any[MAX_TOKENS];
    for (int j = 0; j < nq; j++) {
        float *part = parts + (size_t)j * part_stride;
        memset(part + 2 * gq, 0, (size_t)(gq * D) * sizeof(float));
        any[j] = tg_kvcache_piece_softmax(c, sc + (int64_t)j * gq * ld, ld, nt[j], part);
    }

    /* values: each token's rows added in token order, runs of rows seen by the same tokens at a time */
    for (int64_t t = 0; t < total;) {
        tg_segment g;
        const int64_t t0 = segment_at(&gv, false, t, n_sinks, &g);
        const int64_t end = t0 + g.count < total ? t0 + g.count : total;
        for (; t < end;) {
            const int64_t n = end - t < ROWS ? end - t : ROWS;
            widen_rows(&g, t - t0, n, D, tile, rows);
            for (int64_t r0 = 0; r0 < n;) {
                const float *p[MAX_HEADS];
                float *o[MAX_HEADS];
                int m = 0;
                int64_t r1 = n;
                for (int j = 0; j < nq; j++) {
                    if (!any[j] || nt[j] <= t + r0) continue;
                    if (nt[j] - t < r1) r1 = nt[j] - t;
                    float *oj = parts + (size_t)j * part_stride + 2 * gq;
                    for (int i = 0; i < gq; i++, m++) {
                        p[m] = s[j * gq + i] + t + r0;
                        o[m] = oj + (int64_t)i * D;
                    }
                }
                if (m == 0) break;
                values_rows(rows + r0, r1 - r0, D, p, o, m);
                r0 = r1;
            }
            t += n;
        }
    }
}

#else

void tg_kvcache_attend_group(const tg_kvcache *c, int layer, int64_t pos0, int nq, const float *q_rot, size_t q_stride,
                             int h, float *parts, size_t part_stride, float *work) {
    /* never called: tg_kvcache_attend_group_ok is false without the AVX-512 kernels */
    (void)c, (void)layer, (void)pos0, (void)nq, (void)q_rot, (void)q_stride, (void)h, (void)parts, (void)part_stride;
    (void)work;
}

#endif
