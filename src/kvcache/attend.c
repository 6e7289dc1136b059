/* attend.c — attention of one query over the cache's own storage, in independent pieces that callers may run on
 * their own threads.
 *
 * A piece is (kv-head h, share s of n_split of the visible non-sink tokens; the visible sinks go with share 0). It
 * widens the key rows it covers to fp32, eight at a time, into a small tile (fp32 rows are read in place; fp16 /
 * bf16 rows are converted; KIVI codes become u * scale + zero with the group's per-channel grid, widened once per
 * group, or with the token's own scale for values; re-positioned keys are rotated to their slot), scores them
 * against the gq query heads that share h (eight rows' dot products reduced together), takes the softmax over its
 * share (max m, l = sum of exp(score - m), exp eight lanes at a time), then widens the value rows the same way and
 * accumulates o = sum exp(score - m) v per query head. tg_kvcache_attend_combine merges the shares of a head:
 * out = sum_s e^(m_s - M) o_s / sum_s e^(m_s - M) l_s. No dequantised copy of the cache is ever made: the largest
 * widened piece is one eight-row tile. Scalar reference kernels (tg_kvcache_set_simd(c, false)) sit beside the AVX2
 * ones. */
#include <math.h>
#include <string.h>

#include "kernels/vec.h"
#include "kvcache/cache_internal.h"
#include "util/half.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define TG_ATTEND_AVX2 1
#else
#define TG_ATTEND_AVX2 0
#endif

#define BLK 8            /* rows widened and scored together */
#define SPLIT_TOKENS 512 /* a share covers at least about this many tokens */

/* What one query may see in a layer: sinks [s0, s1], non-sink tokens [lo, hi] (each empty when first > last). */
typedef struct {
    const tg_kvcache *c;
    const tg_layer_cache *L;
    int64_t s0, s1;
    int64_t lo, hi;
    int gq; /* query heads per kv-head */
} view;

static void make_view(const tg_kvcache *c, int layer, int64_t pos, view *vw) {
    const tg_cache_geom *g = &c->g;
    const tg_layer_cache *L = &c->layers[c->kv_source[layer]];
    const int window = c->layer_window[layer];
    vw->c = c;
    vw->L = L;
    vw->gq = g->n_heads / g->n_kv_heads;
    /* sinks j <= pos inside the sliding window; non-sink tokens held, not in the future, inside the window */
    vw->s0 = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
    vw->s1 = pos < L->n_sink - 1 ? pos : L->n_sink - 1;
    vw->lo = L->first;
    vw->hi = L->n_appended - 1;
    if (pos - g->sink < vw->hi) vw->hi = pos - g->sink;
    if (window > 0 && pos - window + 1 - g->sink > vw->lo) vw->lo = pos - window + 1 - g->sink;
}

static int64_t span(int64_t a, int64_t b) { return b >= a ? b - a + 1 : 0; }

int tg_kvcache_attend_splits(const tg_kvcache *c, int layer, int64_t pos) {
    view vw;
    make_view(c, layer, pos, &vw);
    const int64_t n = span(vw.lo, vw.hi) + span(vw.s0, vw.s1);
    const int64_t s = n / SPLIT_TOKENS;
    return s < 1 ? 1 : s > TG_ATTN_MAX_SPLITS ? TG_ATTN_MAX_SPLITS : (int)s;
}

size_t tg_kvcache_work_floats(const tg_kvcache *c) {
    const size_t D = (size_t)c->g.head_dim, gq = (size_t)(c->g.n_heads / c->g.n_kv_heads);
    return BLK * D + 2 * D + gq * (size_t)c->g.max_stored;
}

size_t tg_kvcache_part_floats(const tg_kvcache *c) {
    return (size_t)(c->g.n_heads / c->g.n_kv_heads) * ((size_t)c->g.head_dim + 2);
}

void tg_kvcache_query(tg_kvcache *c, int layer, int64_t pos, const float *q, float *q_out) {
    const tg_cache_geom *g = &c->g;
    const int64_t NH = g->n_heads, D = g->head_dim;
    if (q_out != q) memmove(q_out, q, (size_t)(NH * D) * sizeof(float));
    if (g->reposition) {
        /* the query sits at its own slot: the sinks, then its place among the held non-sink tokens */
        const tg_layer_cache *L = &c->layers[c->kv_source[layer]];
        const int64_t qpos = pos < g->sink ? pos : L->n_sink + (pos - g->sink - L->first);
        tg_rope_table_apply(c->rope_tab, q_out, (int)NH, qpos, c->shape.rope_style);
    } else {
        tg_kvcache_rope_at(c, pos);
        tg_rope_apply(q_out, (int)NH, (int)D, c->rope_cos, c->rope_sin, c->shape.rope_style);
    }
    tg_scale_f32(q_out, 1.0f / sqrtf((float)D), NH * D);
}

/* ---- widening rows ------------------------------------------------------------------------------------------------ */

typedef struct {
    float *grid;     /* [2 * head_dim] widened per-channel scales, then zeros, of the key grid in use */
    int64_t grid_id; /* which: unit * n_kv_heads + h (grouped), -2 (whole-history), -1 (none yet) */
} fetch_state;

static void widen_grid(const tg_kvcache *c, fetch_state *fs, const uint16_t *scale, const uint16_t *zero, int64_t id) {
    if (fs->grid_id == id) return;
    const int64_t D = c->g.head_dim;
    tg_f16_to_f32_row(scale, fs->grid, D);
    tg_f16_to_f32_row(zero, fs->grid + D, D);
    fs->grid_id = id;
}

static const float *widen_plain(tg_kv_precision p, const uint8_t *src, float *dst, int64_t D) {
    if (p == TG_KV_FP32) return (const float *)(const void *)src;
    if (p == TG_KV_FP16) tg_f16_to_f32_row((const uint16_t *)(const void *)src, dst, D);
    else tg_bf16_to_f32_row((const uint16_t *)(const void *)src, dst, D);
    return dst;
}

/* The key (keys) or value row of kv-head h of sink j (is_sink) or non-sink token n, as fp32 (in place or widened
 * into dst); keys are rotated to their slot when re-positioning. */
static const float *fetch_row(const view *vw, int h, bool keys, bool is_sink, int64_t n, float *dst, fetch_state *fs) {
    const tg_kvcache *c = vw->c;
    const tg_layer_cache *L = vw->L;
    const tg_store_geom *sg = keys ? &c->g.k : &c->g.v;
    const tg_store *s = keys ? &L->k : &L->v;
    const int64_t H = c->g.n_kv_heads, D = c->g.head_dim;
    const float *row;
    int64_t slot = n;
    if (is_sink) {
        if (sg->kind == TG_STORE_PLAIN) row = widen_plain(sg->precision, s->sink + (size_t)(n * H + h) * sg->row_bytes, dst, D);
        else row = (const float *)(const void *)s->sink + (n * H + h) * D;
    } else {
        slot = L->n_sink + (n - L->first);
        switch (sg->kind) {
        case TG_STORE_PLAIN:
            row = widen_plain(sg->precision, s->data + (size_t)((n % c->g.row_cap) * H + h) * sg->row_bytes, dst, D);
            break;
        case TG_STORE_GROUPED: {
            if (n >= L->qend) {
                row = s->resid + ((n % c->g.res_cap) * H + h) * D;
                break;
            }
            const int64_t G = c->g.group, uh = ((n / G) % c->g.n_units) * H + h, t = n % G;
            const uint8_t *q = s->data + (size_t)(uh * G + t) * sg->row_bytes;
            if (sg->per_channel) {
                widen_grid(c, fs, s->scale + uh * D, s->zero + uh * D, uh);
                tg_kivi_dequantize_row_f32(sg->range->bits, q, D, fs->grid, fs->grid + D, dst, c->simd);
            } else {
                tg_kivi_dequantize_row_tok(sg->range->bits, q, D, tg_f16_to_f32(s->scale[uh * G + t]),
                                           tg_f16_to_f32(s->zero[uh * G + t]), dst, c->simd);
            }
            row = dst;
            break;
        }
        default: { /* TG_STORE_WHOLE */
            const int64_t rh = (n % c->g.row_cap) * H + h;
            const uint8_t *q = s->data + (size_t)rh * sg->row_bytes;
            if (sg->per_channel) {
                widen_grid(c, fs, s->scale + h * D, s->zero + h * D, -2);
                tg_kivi_dequantize_row_f32(sg->range->bits, q, D, fs->grid, fs->grid + D, dst, c->simd);
            } else {
                tg_kivi_dequantize_row_tok(sg->range->bits, q, D, tg_f16_to_f32(s->scale[rh]), tg_f16_to_f32(s->zero[rh]),
                                           dst, c->simd);
            }
            row = dst;
            break;
        }
        }
    }
    if (keys && c->g.reposition) {
        if (row != dst) memcpy(dst, row, (size_t)D * sizeof(float));
        tg_kvcache_rotate_slot(c, dst, slot);
        row = dst;
    }
    return row;
}

/* ---- the block kernels ---------------------------------------------------------------------------------------- */

/* sc[i * ld + r] = q_i . rows[r] for query heads i < gq and rows r < nr (nr <= BLK). */
static void score_block(const float *const *rows, int nr, const float *qh, int gq, int64_t D, float *sc, int64_t ld,
                        bool simd) {
#if TG_ATTEND_AVX2
    if (simd && D % 8 == 0) {
        const float *rp[BLK];
        for (int r = 0; r < BLK; r++) rp[r] = rows[r < nr ? r : 0];
        for (int i = 0; i < gq; i++) {
            const float *q = qh + (int64_t)i * D;
            __m256 a[BLK];
            for (int r = 0; r < BLK; r++) a[r] = _mm256_setzero_ps();
            for (int64_t k = 0; k < D; k += 8) {
                const __m256 qv = _mm256_loadu_ps(q + k);
                for (int r = 0; r < BLK; r++) a[r] = _mm256_fmadd_ps(_mm256_loadu_ps(rp[r] + k), qv, a[r]);
            }
            /* eight lane sums at once: [r0 .. r7] */
            const __m256 u0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
            const __m256 u1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
            const __m256 s = _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
            float out[BLK];
            _mm256_storeu_ps(out, s);
            memcpy(sc + (int64_t)i * ld, out, (size_t)nr * sizeof(float));
        }
        return;
    }
#else
    (void)simd;
#endif
    for (int i = 0; i < gq; i++)
        for (int r = 0; r < nr; r++) {
            float s = 0.0f;
            for (int64_t k = 0; k < D; k++) s += qh[(int64_t)i * D + k] * rows[r][k];
            sc[(int64_t)i * ld + r] = s;
        }
}

/* o_i += sum_r p[i * ld + r] rows[r] for query heads i < gq (o_i at o + i * D). */
static void value_block(const float *const *rows, int nr, const float *p, int64_t ld, int gq, int64_t D, float *o,
                        bool simd) {
#if TG_ATTEND_AVX2
    if (simd && D % 8 == 0) {
        for (int i = 0; i < gq; i++) {
            const float *pi = p + (int64_t)i * ld;
            float *oi = o + (int64_t)i * D;
            int64_t k = 0;
            for (; k + 32 <= D; k += 32) {
                __m256 a0 = _mm256_loadu_ps(oi + k), a1 = _mm256_loadu_ps(oi + k + 8);
                __m256 a2 = _mm256_loadu_ps(oi + k + 16), a3 = _mm256_loadu_ps(oi + k + 24);
                for (int r = 0; r < nr; r++) {
                    const __m256 pv = _mm256_broadcast_ss(pi + r);
                    a0 = _mm256_fmadd_ps(pv, _mm256_loadu_ps(rows[r] + k), a0);
                    a1 = _mm256_fmadd_ps(pv, _mm256_loadu_ps(rows[r] + k + 8), a1);
                    a2 = _mm256_fmadd_ps(pv, _mm256_loadu_ps(rows[r] + k + 16), a2);
                    a3 = _mm256_fmadd_ps(pv, _mm256_loadu_ps(rows[r] + k + 24), a3);
                }
                _mm256_storeu_ps(oi + k, a0);
                _mm256_storeu_ps(oi + k + 8, a1);
                _mm256_storeu_ps(oi + k + 16, a2);
                _mm256_storeu_ps(oi + k + 24, a3);
            }
            for (; k < D; k += 8) {
                __m256 a0 = _mm256_loadu_ps(oi + k);
                for (int r = 0; r < nr; r++) a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(pi + r), _mm256_loadu_ps(rows[r] + k), a0);
                _mm256_storeu_ps(oi + k, a0);
            }
        }
        return;
    }
#else
    (void)simd;
#endif
    for (int i = 0; i < gq; i++)
        for (int r = 0; r < nr; r++)
            for (int64_t k = 0; k < D; k++) o[(int64_t)i * D + k] += p[(int64_t)i * ld + r] * rows[r][k];
}

/* ---- one piece --------------------------------------------------------------------------------------------------- */

/* Rows of the piece's tokens, in order: sinks [s0, s1], then non-sink tokens [a, b]; BLK at a time. Calls the block
 * kernel for scores (keys) or values. */
static int64_t sweep(const view *vw, int h, bool keys, int64_t s0, int64_t s1, int64_t a, int64_t b, float *tile,
                     fetch_state *fs, const float *qh, float *sc, int64_t ld, float *o) {
    const tg_kvcache *c = vw->c;
    const int64_t D = c->g.head_dim;
    const float *rows[BLK];
    int nr = 0;
    int64_t t0 = 0, t = 0;
    const int64_t n_items = span(s0, s1) + span(a, b);
    for (int64_t k = 0; k < n_items; k++) {
        const bool is_sink = k < span(s0, s1);
        const int64_t n = is_sink ? s0 + k : a + (k - span(s0, s1));
        rows[nr] = fetch_row(vw, h, keys, is_sink, n, tile + (int64_t)nr * D, fs);
        nr++;
        t++;
        if (nr == BLK || k == n_items - 1) {
            if (keys) score_block(rows, nr, qh, vw->gq, D, sc + t0, ld, c->simd);
            else value_block(rows, nr, sc + t0, ld, vw->gq, D, o, c->simd);
            t0 = t;
            nr = 0;
        }
    }
    return t;
}

void tg_kvcache_attend_piece(const tg_kvcache *c, int layer, int64_t pos, const float *q_rot, int h, int split,
                             int n_split, float *part, float *work) {
    view vw;
    make_view(c, layer, pos, &vw);
    const int64_t D = c->g.head_dim, ld = c->g.max_stored;
    const int gq = vw.gq;
    const int64_t len = span(vw.lo, vw.hi);
    const int64_t a = vw.lo + len * split / n_split, b = vw.lo + len * (split + 1) / n_split - 1;
    const int64_t s0 = split == 0 ? vw.s0 : 0, s1 = split == 0 ? vw.s1 : -1;
    const float *qh = q_rot + (int64_t)h * gq * D;
    float *tile = work, *sc = work + BLK * D + 2 * D;
    fetch_state fs = {.grid = work + BLK * D, .grid_id = -1};

    const int64_t nt = sweep(&vw, h, true, s0, s1, a, b, tile, &fs, qh, sc, ld, NULL);
    float *o = part + 2 * gq; /* part: m[gq], l[gq], o[gq][D] */
    memset(o, 0, (size_t)(gq * D) * sizeof(float));
    bool any = false;
    for (int i = 0; i < gq; i++) {
        float *si = sc + (int64_t)i * ld;
        float m = -INFINITY;
        for (int64_t t = 0; t < nt; t++)
            if (si[t] > m) m = si[t]; /* NaN scores are skipped here and make the sum NaN below */
        part[i] = m;
        if (m == -INFINITY) {
            part[gq + i] = 0.0f;
            for (int64_t t = 0; t < nt; t++) si[t] = 0.0f;
            continue;
        }
        if (c->simd) {
            part[gq + i] = tg_exp_shift_sum(si, nt, m);
        } else {
            double sum = 0.0;
            for (int64_t t = 0; t < nt; t++) sum += (double)(si[t] = expf(si[t] - m));
            part[gq + i] = (float)sum;
        }
        any = true;
    }
    if (any) sweep(&vw, h, false, s0, s1, a, b, tile, &fs, NULL, sc, ld, o);
}

void tg_kvcache_attend_combine(const tg_kvcache *c, const float *parts, int n_split, float *out) {
    const int64_t D = c->g.head_dim;
    const int gq = c->g.n_heads / c->g.n_kv_heads;
    const size_t pf = tg_kvcache_part_floats(c);
    for (int i = 0; i < gq; i++) {
        float M = -INFINITY;
        for (int s = 0; s < n_split; s++) {
            const float *p = parts + (size_t)s * pf;
            if (p[gq + i] != 0.0f && p[i] > M) M = p[i];
        }
        float *oi = out + (int64_t)i * D;
        memset(oi, 0, (size_t)D * sizeof(float));
        if (M == -INFINITY) continue; /* nothing visible */
        double den = 0.0;
        for (int s = 0; s < n_split; s++) {
            const float *p = parts + (size_t)s * pf;
            if (p[gq + i] == 0.0f) continue;
            const float w = n_split == 1 ? 1.0f : expf(p[i] - M);
            den += (double)w * p[gq + i];
            tg_axpy_f32(w, p + 2 * gq + (int64_t)i * D, oi, D);
        }
        tg_scale_f32(oi, (float)(1.0 / den), D);
    }
}

void tg_kvcache_attend(tg_kvcache *c, int layer, int64_t pos, const float *q, float *out, int n_threads) {
    if (!c || !q || !out || layer < 0 || layer >= c->g.n_layers) return;
    const tg_cache_geom *g = &c->g;
    const int64_t H = g->n_kv_heads, D = g->head_dim, gq = g->n_heads / H;
    tg_kvcache_query(c, layer, pos, q, c->scratch_q);
    const int n_split = tg_kvcache_attend_splits(c, layer, pos);
    const size_t wf = tg_kvcache_work_floats(c), pf = tg_kvcache_part_floats(c);
    const int nt = n_threads > 1 ? n_threads : 1;
    (void)nt; /* read only by the OpenMP pragma */
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1 && H > 1)
    for (int h = 0; h < (int)H; h++) {
        float *parts = c->parts + (size_t)h * TG_ATTN_MAX_SPLITS * pf;
        for (int s = 0; s < n_split; s++)
            tg_kvcache_attend_piece(c, layer, pos, c->scratch_q, h, s, n_split, parts + (size_t)s * pf,
                                    c->work + (size_t)h * wf);
        tg_kvcache_attend_combine(c, parts, n_split, out + (int64_t)h * gq * D);
    }
}
