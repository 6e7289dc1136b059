/* attend.c — attention of one query over the cache's own storage: scores against packed KIVI key groups with the
 * per-channel scales folded into the query (q . k = sum_c (q_c s_c) u_c + sum_c q_c z_c), against the fp32
 * residual, sinks and plain rows; softmax; values accumulated as sum_t (p_t s_t) u_t + sum_t p_t z_t. No
 * dequantised copy of the cache is ever made: at most one key row per kv-head is widened (re-positioned RoPE). */
#include <math.h>
#include <string.h>

#include "kernels/vec.h"
#include "kvcache/cache_internal.h"
#include "util/half.h"

/* What one query may see in a layer: sinks by flag, non-sink tokens [lo, hi] (empty when lo > hi). */
typedef struct {
    const tg_kvcache *c;
    const tg_layer_cache *L;
    int64_t pos;      /* query position */
    int window;       /* layer sliding window, 0 = none */
    int64_t lo, hi;   /* visible non-sink indices */
    int gq;           /* query heads per kv-head */
} view;

static bool sink_visible(const view *vw, int64_t j) {
    return j <= vw->pos && (vw->window == 0 || vw->pos - j < vw->window);
}

static int64_t slot_of(const view *vw, int64_t n) { return vw->L->n_sink + (n - vw->L->first); }

/* Scores of kv-head h: qh = its gq rotated, scaled queries; sc = the scores of its first query head. */
static void scores_for_head(const view *vw, int h, const float *qh, float *sc, float *tile, float *w) {
    const tg_kvcache *c = vw->c;
    const tg_layer_cache *L = vw->L;
    const tg_store_geom *sg = &c->g.k;
    const tg_store *s = &L->k;
    const int64_t H = c->g.n_kv_heads, D = c->g.head_dim, ms = c->g.max_stored, G = c->g.group;
    const bool repo = c->g.reposition;
#define SCORE(slot_, row_)                                                                                            \
    do {                                                                                                              \
        for (int i_ = 0; i_ < vw->gq; i_++) sc[(int64_t)i_ * ms + (slot_)] = tg_dot_f32((row_), qh + i_ * D, D);      \
    } while (0)

    for (int64_t j = 0; j < L->n_sink; j++) {
        if (!sink_visible(vw, j)) continue;
        tg_kvcache_load_row(c, L, true, true, j, h, tile);
        if (repo) tg_kvcache_rotate_slot(c, tile, j);
        SCORE(j, tile);
    }
    int64_t n = vw->lo;
    while (n <= vw->hi) {
        const int64_t slot = slot_of(vw, n);
        if (sg->kind == TG_STORE_GROUPED && n < L->qend) {
            /* a quantised group: the rows [n, end] of unit n / G */
            const int64_t unit = (n / G) % c->g.n_units, uh = unit * H + h;
            int64_t end = (n / G) * G + G - 1;
            if (end > vw->hi) end = vw->hi;
            const uint8_t *rows = s->data + (size_t)(uh * G) * sg->row_bytes;
            const uint16_t *scl = s->scale + uh * D, *zr = s->zero + uh * D;
            if (repo) {
                for (int64_t m = n; m <= end; m++) {
                    tg_kivi_dequantize_row_channels(sg->range, rows + (size_t)(m % G) * sg->row_bytes, D, scl, zr, tile);
                    tg_kvcache_rotate_slot(c, tile, slot + (m - n));
                    SCORE(slot + (m - n), tile);
                }
            } else {
                for (int i = 0; i < vw->gq; i++) {
                    const float *q = qh + i * D;
                    float bias = 0.0f;
                    for (int64_t ch = 0; ch < D; ch++) {
                        w[ch] = q[ch] * tg_f16_to_f32(scl[ch]);
                        bias += q[ch] * tg_f16_to_f32(zr[ch]);
                    }
                    for (int64_t m = n; m <= end; m++)
                        sc[(int64_t)i * ms + slot + (m - n)] =
                            tg_kivi_dot(sg->range->bits, rows + (size_t)(m % G) * sg->row_bytes, w, D, c->simd) + bias;
                }
            }
            n = end + 1;
            continue;
        }
        if (sg->kind == TG_STORE_WHOLE && !repo) {
            /* one grid per (kv-head, channel) for every row: fold it into the queries once */
            const uint16_t *scl = s->scale + h * D, *zr = s->zero + h * D;
            for (int i = 0; i < vw->gq; i++) {
                const float *q = qh + i * D;
                float bias = 0.0f;
                for (int64_t ch = 0; ch < D; ch++) {
                    w[ch] = q[ch] * tg_f16_to_f32(scl[ch]);
                    bias += q[ch] * tg_f16_to_f32(zr[ch]);
                }
                for (int64_t m = n; m <= vw->hi; m++) {
                    const uint8_t *row = s->data + (size_t)((m % c->g.row_cap) * H + h) * sg->row_bytes;
                    sc[(int64_t)i * ms + slot + (m - n)] = tg_kivi_dot(sg->range->bits, row, w, D, c->simd) + bias;
                }
            }
            break;
        }
        /* one full-precision row: residual, plain fp32 in place, anything else widened into the tile */
        const float *row = NULL;
        if (!repo && sg->kind == TG_STORE_GROUPED) row = s->resid + ((n % c->g.res_cap) * H + h) * D;
        else if (!repo && sg->kind == TG_STORE_PLAIN && sg->precision == TG_KV_FP32)
            row = (const float *)(const void *)(s->data + (size_t)((n % c->g.row_cap) * H + h) * sg->row_bytes);
        else if (!repo && sg->kind == TG_STORE_PLAIN && sg->precision == TG_KV_FP16) {
            const uint16_t *r16 = (const uint16_t *)(const void *)(s->data + (size_t)((n % c->g.row_cap) * H + h) *
                                                                                 sg->row_bytes);
            for (int i = 0; i < vw->gq; i++) sc[(int64_t)i * ms + slot] = tg_dot_f16(r16, qh + i * D, D);
            n++;
            continue;
        }
        if (!row) {
            tg_kvcache_load_row(c, L, true, false, n, h, tile);
            if (repo) tg_kvcache_rotate_slot(c, tile, slot);
            row = tile;
        }
        SCORE(slot, row);
        n++;
    }
#undef SCORE
}

/* Softmax of one query head's visible scores in place; returns false when nothing is visible. */
static bool softmax_visible(const view *vw, float *sc) {
    const tg_layer_cache *L = vw->L;
    float m = -INFINITY;
    for (int64_t j = 0; j < L->n_sink; j++)
        if (sink_visible(vw, j) && sc[j] > m) m = sc[j];
    for (int64_t n = vw->lo; n <= vw->hi; n++)
        if (sc[slot_of(vw, n)] > m) m = sc[slot_of(vw, n)];
    if (m == -INFINITY) return false;
    double sum = 0.0;
    for (int64_t j = 0; j < L->n_sink; j++)
        if (sink_visible(vw, j)) sum += (sc[j] = expf(sc[j] - m));
    for (int64_t n = vw->lo; n <= vw->hi; n++) {
        float *p = &sc[slot_of(vw, n)];
        sum += (*p = expf(*p - m));
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t j = 0; j < L->n_sink; j++)
        if (sink_visible(vw, j)) sc[j] *= inv;
    for (int64_t n = vw->lo; n <= vw->hi; n++) sc[slot_of(vw, n)] *= inv;
    return true;
}

/* out[gq][D] = sum over visible tokens of p * value, for the gq query heads of kv-head h. */
static void values_for_head(const view *vw, int h, const float *sc, float *out, float *tile, float *zacc) {
    const tg_kvcache *c = vw->c;
    const tg_layer_cache *L = vw->L;
    const tg_store_geom *sg = &c->g.v;
    const tg_store *s = &L->v;
    const int64_t H = c->g.n_kv_heads, D = c->g.head_dim, ms = c->g.max_stored, G = c->g.group;
    memset(out, 0, (size_t)(vw->gq * D) * sizeof(float));
    for (int i = 0; i < vw->gq; i++) zacc[i] = 0.0f;
    for (int64_t j = 0; j < L->n_sink; j++) {
        if (!sink_visible(vw, j)) continue;
        tg_kvcache_load_row(c, L, false, true, j, h, tile);
        for (int i = 0; i < vw->gq; i++) tg_axpy_f32(sc[(int64_t)i * ms + j], tile, out + i * D, D);
    }
    for (int64_t n = vw->lo; n <= vw->hi; n++) {
        const int64_t slot = slot_of(vw, n);
        const uint8_t *qrow = NULL;
        float scale = 0.0f, zero = 0.0f;
        if (sg->kind == TG_STORE_GROUPED && n < L->qend) {
            const int64_t uh = ((n / G) % c->g.n_units) * H + h, t = n % G;
            qrow = s->data + (size_t)(uh * G + t) * sg->row_bytes;
            scale = tg_f16_to_f32(s->scale[uh * G + t]);
            zero = tg_f16_to_f32(s->zero[uh * G + t]);
        } else if (sg->kind == TG_STORE_WHOLE) {
            const int64_t rh = (n % c->g.row_cap) * H + h;
            qrow = s->data + (size_t)rh * sg->row_bytes;
            scale = tg_f16_to_f32(s->scale[rh]);
            zero = tg_f16_to_f32(s->zero[rh]);
        }
        if (qrow) {
            for (int i = 0; i < vw->gq; i++) {
                const float p = sc[(int64_t)i * ms + slot];
                tg_kivi_axpy(sg->range->bits, p * scale, qrow, out + i * D, D, c->simd);
                zacc[i] += p * zero;
            }
            continue;
        }
        if (sg->kind == TG_STORE_PLAIN && sg->precision == TG_KV_FP16) {
            const uint16_t *r16 = (const uint16_t *)(const void *)(s->data + (size_t)((n % c->g.row_cap) * H + h) *
                                                                                 sg->row_bytes);
            for (int i = 0; i < vw->gq; i++) tg_axpy_f16(sc[(int64_t)i * ms + slot], r16, out + i * D, D);
            continue;
        }
        const float *row;
        if (sg->kind == TG_STORE_GROUPED) row = s->resid + ((n % c->g.res_cap) * H + h) * D;
        else if (sg->precision == TG_KV_FP32)
            row = (const float *)(const void *)(s->data + (size_t)((n % c->g.row_cap) * H + h) * sg->row_bytes);
        else {
            tg_kvcache_load_row(c, L, false, false, n, h, tile);
            row = tile;
        }
        for (int i = 0; i < vw->gq; i++) tg_axpy_f32(sc[(int64_t)i * ms + slot], row, out + i * D, D);
    }
    for (int i = 0; i < vw->gq; i++)
        for (int64_t ch = 0; ch < D; ch++) out[i * D + ch] += zacc[i];
}

void tg_kvcache_attend(tg_kvcache *c, int layer, int64_t pos, const float *q, float *out, int n_threads) {
    if (!c || !q || !out || layer < 0 || layer >= c->g.n_layers) return;
    const tg_cache_geom *g = &c->g;
    const int64_t NH = g->n_heads, H = g->n_kv_heads, D = g->head_dim;
    view vw = {
        .c = c,
        .L = &c->layers[c->kv_source[layer]],
        .pos = pos,
        .window = c->layer_window[layer],
        .gq = (int)(NH / H),
    };
    const tg_layer_cache *L = vw.L;
    /* visible non-sink tokens: held, not in the future, inside the layer's sliding window */
    vw.lo = L->first;
    vw.hi = L->n_appended - 1;
    if (pos - g->sink < vw.hi) vw.hi = pos - g->sink;
    if (vw.window > 0 && pos - vw.window + 1 - g->sink > vw.lo) vw.lo = pos - vw.window + 1 - g->sink;

    /* queries: rotated at the absolute position (vanilla) or at the query's own slot (re-positioned), scaled */
    float *qr = c->scratch_q;
    memcpy(qr, q, (size_t)(NH * D) * sizeof(float));
    int64_t qpos = pos;
    if (g->reposition) qpos = pos < g->sink ? pos : L->n_sink + (pos - g->sink - L->first);
    if (g->reposition) tg_rope_table_apply(c->rope_tab, qr, (int)NH, qpos, c->shape.rope_style);
    else tg_rope(qr, (int)NH, (int)D, qpos, c->shape.rope_theta, c->shape.rope_style);
    tg_scale_f32(qr, 1.0f / sqrtf((float)D), NH * D);

    const int nt = n_threads > 1 ? n_threads : 1;
    (void)nt;
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1 && H > 1)
    for (int h = 0; h < (int)H; h++) {
        const int64_t q0 = (int64_t)h * vw.gq;
        float *sc = c->scores + q0 * g->max_stored;
        float *tile = c->scratch_tile + h * D;
        scores_for_head(&vw, h, qr + q0 * D, sc, tile, c->scratch_w + q0 * D);
        bool any = true;
        for (int i = 0; i < vw.gq; i++) any = softmax_visible(&vw, sc + (int64_t)i * g->max_stored) && any;
        if (!any) {
            memset(out + q0 * D, 0, (size_t)(vw.gq * D) * sizeof(float));
            continue;
        }
        values_for_head(&vw, h, sc, out + q0 * D, tile, c->scratch_zacc + q0);
    }
}
