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
 * still gives the bits of decoding token by token. Rows a token does not see are never added to its output. The
 * 512-bit kernels are attend_group_avx512.c's, reached through the kernel table (attend_kernels.h: the AVX-512 table
 * has them; without them no chunk is grouped). */
#include <stdint.h>
#include <string.h>

#include "kvcache/attend_kernels.h"
#include "kvcache/cache_internal.h"
#include "kvcache/codec.h"
#include "kvcache/kvcache.h"


#define GROUP_HEADS 16 /* query heads a group aims for (tokens per group: GROUP_HEADS / gq, at least 1) */
#define MAX_TOKENS 8   /* most tokens per group */
#define MAX_HEADS 64   /* most query heads per group */
#define ROWS 32        /* rows widened per pass */

/* The table whose group kernels run (NULL: none). */
static const tg_attn_kernels *group_kernels(void) {
    const tg_attn_kernels *ak = tg_attn_kernels_get();
    return ak && ak->group_scores ? ak : NULL;
}

int tg_kvcache_group_tokens(const tg_kvcache *c) {
    if (!group_kernels()) return 0;
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
    if (!group_kernels() || !c->simd || D % 16 != 0 || nq < 1 || gq > MAX_HEADS) return false;
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

/* A walk over the keys' or the values' rows in token order: the segment that holds tokens [t0, end). */
typedef struct {
    bool keys;
    tg_segment g;
    int64_t t0, end;
} row_walk;

/* Widens the rows from token t on into rows[] (tile holds them): at most ROWS, and none past the segment holding t
 * or past token total (w moves to that segment when t has left its own). Returns how many. */
static int64_t widen_rows(const tg_attn_kernels *ak, const group_view *gv, row_walk *w, int64_t t, int64_t n_sinks,
                          int64_t total, int64_t D, float *tile, const float **rows) {
    if (t >= w->end) {
        w->t0 = segment_at(gv, w->keys, t, n_sinks, &w->g);
        w->end = w->t0 + w->g.count < total ? w->t0 + w->g.count : total;
    }
    const int64_t n = w->end - t < ROWS ? w->end - t : ROWS;
    ak->group_widen(w->g.kind, w->g.p, w->g.stride, t - w->t0, n, D, tile, rows);
    return n;
}

void tg_kvcache_attend_group(const tg_kvcache *c, int layer, int64_t pos0, int nq, const float *q_rot, size_t q_stride,
                             int h, float *parts, size_t part_stride, float *work) {
    const int64_t D = c->g.head_dim, ld = c->g.max_stored;
    const int gq = c->g.n_heads / c->g.n_kv_heads, ne = nq * gq;
    const tg_attn_kernels *ak = group_kernels();
    if (!ak) return; /* never: tg_kvcache_attend_group_ok is false without the group kernels */
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
    row_walk kw = {.keys = true};
    for (int64_t t = 0; t < total;) {
        const int64_t n = widen_rows(ak, &gv, &kw, t, n_sinks, total, D, tile, rows);
        int j0 = 0;
        while (nt[j0] <= t) j0++;
        float *st[MAX_HEADS];
        for (int e = j0 * gq; e < ne; e++) st[e] = s[e] + t;
        ak->group_scores(rows, n, D, q + j0 * gq, st + j0 * gq, ne - j0 * gq);
        t += n;
    }

    /* the softmax of each token, as its own piece takes it */
    bool any[MAX_TOKENS];
    for (int j = 0; j < nq; j++) {
        float *part = parts + (size_t)j * part_stride;
        memset(part + 2 * gq, 0, (size_t)(gq * D) * sizeof(float));
        any[j] = tg_kvcache_piece_softmax(c, sc + (int64_t)j * gq * ld, ld, nt[j], part);
    }

    /* values: each token's rows added in token order, runs of rows seen by the same tokens at a time */
    row_walk vw = {.keys = false};
    for (int64_t t = 0; t < total;) {
        const int64_t n = widen_rows(ak, &gv, &vw, t, n_sinks, total, D, tile, rows);
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
            ak->group_values(rows + r0, r1 - r0, D, p, o, m);
            r0 = r1;
        }
        t += n;
    }
    for (int j = 0; j < nq; j++) tg_kvcache_rot_output(c, layer, h, parts + (size_t)j * part_stride + 2 * gq);
}
