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

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define TG_ATTEND_AVX2 1
#else
#define TG_ATTEND_AVX2 0
#endif

#if TG_ATTEND_AVX2
static inline __m256 bf16x8(const uint16_t *x) {
    __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)x));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}
#endif

/* sum_i bf16(a[i]) * b[i], widening in registers. */
static float dot_bf16(const uint16_t *a, const float *b, int64_t n, bool simd) {
    int64_t i = 0;
    float s = 0.0f;
#if TG_ATTEND_AVX2
    if (simd) {
        __m256 acc = _mm256_setzero_ps();
        for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(bf16x8(a + i), _mm256_loadu_ps(b + i), acc);
        __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
        h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        h = _mm_add_ss(h, _mm_movehdup_ps(h));
        s = _mm_cvtss_f32(h);
    }
#else
    (void)simd;
#endif
    for (; i < n; i++) s += tg_bf16_to_f32(a[i]) * b[i];
    return s;
}

/* y[i] += a * bf16(x[i]). */
static void axpy_bf16(float a, const uint16_t *x, float *y, int64_t n, bool simd) {
    int64_t i = 0;
#if TG_ATTEND_AVX2
    if (simd) {
        const __m256 va = _mm256_set1_ps(a);
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, bf16x8(x + i), _mm256_loadu_ps(y + i)));
    }
#else
    (void)simd;
#endif
    for (; i < n; i++) y[i] += a * tg_bf16_to_f32(x[i]);
}

/* Per-kv-head work space. */
typedef struct {
    const float *qh; /* [gq][head_dim] rotated, scaled queries of this kv-head */
    float *sc;       /* scores of its first query head; query head i at sc + i * max_stored */
    float *tile;     /* [head_dim] one widened key or value row */
    float *w;        /* [head_dim] q_c * scale_c */
    float *sz;       /* [2 * head_dim] widened scales, then zeros, of one grid */
} head_work;

/* Scores of one full-precision key row (already rotated). */
static void score_row(const view *vw, const head_work *hw, const float *row, int64_t slot) {
    const int64_t D = vw->c->g.head_dim, ms = vw->c->g.max_stored;
    for (int i = 0; i < vw->gq; i++) hw->sc[i * ms + slot] = tg_dot_f32(row, hw->qh + i * D, D);
}

/* Scores of `count` packed key rows sharing one per-channel grid (hw->sz), row r at row0 + r * stride and slot
 * slot0 + r. Vanilla: the grid is folded into the query once, then each row is an integer-weighted sum. Re-positioned
 * (keys stored pre-RoPE): each row is widened into the tile and rotated to its slot. */
static void score_packed_rows(const view *vw, const head_work *hw, const uint8_t *row0, size_t stride, int64_t count,
                              int64_t slot0) {
    const tg_kvcache *c = vw->c;
    const int bits = c->g.k.range->bits;
    const int64_t D = c->g.head_dim, ms = c->g.max_stored;
    if (c->g.reposition) {
        for (int64_t r = 0; r < count; r++) {
            tg_kivi_dequantize_row_f32(bits, row0 + (size_t)r * stride, D, hw->sz, hw->sz + D, hw->tile, c->simd);
            tg_kvcache_rotate_slot(c, hw->tile, slot0 + r);
            score_row(vw, hw, hw->tile, slot0 + r);
        }
        return;
    }
    for (int i = 0; i < vw->gq; i++) {
        const float *q = hw->qh + i * D;
        for (int64_t ch = 0; ch < D; ch++) hw->w[ch] = q[ch] * hw->sz[ch];
        const float bias = tg_dot_f32(q, hw->sz + D, D);
        for (int64_t r = 0; r < count; r++)
            hw->sc[i * ms + slot0 + r] = tg_kivi_dot(bits, row0 + (size_t)r * stride, hw->w, D, c->simd) + bias;
    }
}

static void widen_grid(const view *vw, const head_work *hw, const uint16_t *scale, const uint16_t *zero) {
    const int64_t D = vw->c->g.head_dim;
    tg_f16_to_f32_row(scale, hw->sz, D);
    tg_f16_to_f32_row(zero, hw->sz + D, D);
}

/* Scores of every visible token for kv-head h. */
static void scores_for_head(const view *vw, int h, const head_work *hw) {
    const tg_kvcache *c = vw->c;
    const tg_layer_cache *L = vw->L;
    const tg_store_geom *sg = &c->g.k;
    const tg_store *s = &L->k;
    const int64_t H = c->g.n_kv_heads, D = c->g.head_dim, ms = c->g.max_stored, G = c->g.group;
    const int64_t cap = c->g.row_cap;
    const bool repo = c->g.reposition;

    for (int64_t j = 0; j < L->n_sink; j++) {
        if (!sink_visible(vw, j)) continue;
        tg_kvcache_load_row(c, L, true, true, j, h, hw->tile);
        if (repo) tg_kvcache_rotate_slot(c, hw->tile, j);
        score_row(vw, hw, hw->tile, j);
    }
    if (sg->kind == TG_STORE_WHOLE && vw->lo <= vw->hi) {
        /* one grid per (kv-head, channel) for all rows; the ring may wrap once inside [lo, hi] */
        widen_grid(vw, hw, s->scale + h * D, s->zero + h * D);
        const size_t stride = (size_t)H * sg->row_bytes;
        for (int64_t n = vw->lo; n <= vw->hi;) {
            const int64_t row = n % cap, count = vw->hi - n + 1 < cap - row ? vw->hi - n + 1 : cap - row;
            score_packed_rows(vw, hw, s->data + (size_t)(row * H + h) * sg->row_bytes, stride, count, slot_of(vw, n));
            n += count;
        }
        return;
    }
    for (int64_t n = vw->lo; n <= vw->hi;) {
        const int64_t slot = slot_of(vw, n);
        if (sg->kind == TG_STORE_GROUPED && n < L->qend) {
            /* the visible rows [n, end] of quantised group n / G */
            const int64_t uh = ((n / G) % c->g.n_units) * H + h;
            int64_t end = (n / G) * G + G - 1;
            if (end > vw->hi) end = vw->hi;
            widen_grid(vw, hw, s->scale + uh * D, s->zero + uh * D);
            score_packed_rows(vw, hw, s->data + (size_t)(uh * G + n % G) * sg->row_bytes, sg->row_bytes, end - n + 1,
                              slot);
            n = end + 1;
            continue;
        }
        if (sg->kind == TG_STORE_GROUPED) {
            const float *row = s->resid + ((n % c->g.res_cap) * H + h) * D;
            if (repo) {
                memcpy(hw->tile, row, (size_t)D * sizeof(float));
                tg_kvcache_rotate_slot(c, hw->tile, slot);
                row = hw->tile;
            }
            score_row(vw, hw, row, slot);
        } else if (!repo && sg->precision == TG_KV_FP32) {
            score_row(vw, hw, (const float *)(const void *)(s->data + (size_t)((n % cap) * H + h) * sg->row_bytes), slot);
        } else if (repo) {
            tg_kvcache_load_row(c, L, true, false, n, h, hw->tile);
            tg_kvcache_rotate_slot(c, hw->tile, slot);
            score_row(vw, hw, hw->tile, slot);
        } else {
            /* fp16 / bf16 rows: widened inside the dot product */
            const uint16_t *r16 = (const uint16_t *)(const void *)(s->data + (size_t)((n % cap) * H + h) * sg->row_bytes);
            for (int i = 0; i < vw->gq; i++)
                hw->sc[i * ms + slot] = sg->precision == TG_KV_FP16 ? tg_dot_f16(r16, hw->qh + i * D, D)
                                                                    : dot_bf16(r16, hw->qh + i * D, D, c->simd);
        }
        n++;
    }
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
        if (sg->kind == TG_STORE_PLAIN && sg->precision != TG_KV_FP32) {
            const uint16_t *r16 = (const uint16_t *)(const void *)(s->data + (size_t)((n % c->g.row_cap) * H + h) *
                                                                                 sg->row_bytes);
            for (int i = 0; i < vw->gq; i++) {
                if (sg->precision == TG_KV_FP16) tg_axpy_f16(sc[(int64_t)i * ms + slot], r16, out + i * D, D);
                else axpy_bf16(sc[(int64_t)i * ms + slot], r16, out + i * D, D, c->simd);
            }
            continue;
        }
        const float *row;
        if (sg->kind == TG_STORE_GROUPED) row = s->resid + ((n % c->g.res_cap) * H + h) * D;
        else row = (const float *)(const void *)(s->data + (size_t)((n % c->g.row_cap) * H + h) * sg->row_bytes);
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
    (void)nt; /* read only by the OpenMP pragma */
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1 && H > 1)
    for (int h = 0; h < (int)H; h++) {
        const int64_t q0 = (int64_t)h * vw.gq;
        float *sc = c->scores + q0 * g->max_stored;
        float *tile = c->scratch_tile + h * D;
        const head_work hw = {
            .qh = qr + q0 * D,
            .sc = sc,
            .tile = tile,
            .w = c->scratch_w + q0 * D,
            .sz = c->scratch_sz + 2 * h * D,
        };
        scores_for_head(&vw, h, &hw);
        bool any = true;
        for (int i = 0; i < vw.gq; i++) any = softmax_visible(&vw, sc + (int64_t)i * g->max_stored) && any;
        if (!any) {
            memset(out + q0 * D, 0, (size_t)(vw.gq * D) * sizeof(float));
            continue;
        }
        values_for_head(&vw, h, sc, out + q0 * D, tile, c->scratch_zacc + q0);
    }
}
