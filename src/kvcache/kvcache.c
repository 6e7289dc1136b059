/* kvcache.c — the KV cache's storage: allocation (once, in tg_kvcache_new), appending with RoPE, StreamingLLM
 * eviction in whole blocks, KIVI group flushes from the fp32 residual, whole-history re-quantisation, read-back and
 * the byte report. Attention over this storage lives in attend.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/vec.h"
#include "kvcache/cache_internal.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/half.h"

/* ---- allocation: every buffer once, counted ------------------------------------------------------------------ */

/* Zeroed block of `bytes`, counted in the cache's accounting; NULL for 0 bytes or on failure (*ok cleared). */
static void *cache_alloc(tg_kvcache *c, size_t bytes, bool store, bool *ok) {
    if (bytes == 0) return NULL;
    void *p = calloc(1, bytes);
    if (!p) {
        *ok = false;
        return NULL;
    }
    c->n_allocs++;
    if (store) c->bytes_store += bytes;
    else c->bytes_meta += bytes;
    return p;
}

static void store_alloc(tg_kvcache *c, const tg_store_geom *sg, tg_store *s, bool *ok) {
    s->data = cache_alloc(c, sg->data_bytes, true, ok);
    /* scale and zero: two halves of scale_bytes */
    s->scale = cache_alloc(c, sg->scale_bytes / 2, true, ok);
    s->zero = cache_alloc(c, sg->scale_bytes / 2, true, ok);
    s->resid = cache_alloc(c, sg->resid_bytes, true, ok);
    s->sink = cache_alloc(c, sg->sink_bytes, true, ok);
}

static void store_free(tg_store *s) {
    free(s->data);
    free(s->scale);
    free(s->zero);
    free(s->resid);
    free(s->sink);
}

/* "45.78 GiB": bytes in the binary unit that suits them. */
static void fmt_bytes(double bytes, char *buf, size_t cap) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    while (u < 6 && bytes >= 1024.0) {
        bytes /= 1024.0;
        u++;
    }
    snprintf(buf, cap, u ? "%.2f %s" : "%.0f %s", bytes, units[u]);
}

/* The memory check of tg_cache_params.max_memory: false (message with the numbers) when the K/V storage of g would
 * not fit the limit. */
static bool fits_memory(const tg_cache_geom *g, int64_t max_memory, tg_error *err) {
    if (max_memory < 0) return true;
    double limit = (double)max_memory;
    if (max_memory == 0) {
        const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        if (pages <= 0 || page <= 0) return true; /* the system does not say */
        limit = (double)pages * (double)page;
    }
    const size_t need = tg_cache_geom_bytes(g);
    if ((double)need <= limit) return true;
    char a[32], b[32];
    fmt_bytes((double)need, a, sizeof a);
    fmt_bytes(limit, b, sizeof b);
    if (max_memory == 0)
        return tg_fail(err, "KV cache needs %s but the machine has %s of memory (--max-memory to change the limit)",
                       a, b);
    return tg_fail(err, "KV cache needs %s, more than --max-memory %s", a, b);
}

tg_kvcache *tg_kvcache_new(const tg_cache_shape *shape, const tg_cache_params *params, tg_error *err) {
    tg_cache_geom g;
    if (!tg_cache_geom_resolve(shape, params, &g, err)) return NULL;
    if (!fits_memory(&g, params->max_memory, err)) return NULL;
    tg_kvcache *c = calloc(1, sizeof *c);
    if (!c) {
        tg_fail(err, "KV cache: out of memory");
        return NULL;
    }
    c->shape = *shape;
    c->params = *params;
    c->g = g;
    c->simd = true;
    bool ok = true;
    const size_t L = (size_t)g.n_layers, H = (size_t)g.n_kv_heads, NH = (size_t)g.n_heads, D = (size_t)g.head_dim;
    c->kv_source = cache_alloc(c, L * sizeof(int), false, &ok);
    c->layer_window = cache_alloc(c, L * sizeof(int), false, &ok);
    c->layers = cache_alloc(c, L * sizeof(tg_layer_cache), false, &ok);
    if (ok) {
        for (size_t l = 0; l < L; l++) {
            c->kv_source[l] = shape->kv_source ? shape->kv_source[l] : (int)l;
            c->layer_window[l] = shape->layer_window ? shape->layer_window[l] : 0;
        }
        c->shape.kv_source = c->kv_source;
        c->shape.layer_window = c->layer_window;
        for (size_t l = 0; l < L && ok; l++) {
            if (c->kv_source[l] != (int)l) continue;
            store_alloc(c, &g.k, &c->layers[l].k, &ok);
            store_alloc(c, &g.v, &c->layers[l].v, &ok);
        }
    }
    size_t work_n = 0;
    if (!tg_mul_size(H, tg_kvcache_work_floats(c), &work_n) || !tg_mul_size(work_n, sizeof(float), &work_n)) ok = false;
    if (ok) {
        c->scratch_k = cache_alloc(c, H * D * sizeof(float), false, &ok);
        c->scratch_q = cache_alloc(c, NH * D * sizeof(float), false, &ok);
        c->work = cache_alloc(c, work_n, false, &ok);
        c->parts = cache_alloc(c, H * TG_ATTN_MAX_SPLITS * tg_kvcache_part_floats(c) * sizeof(float), false, &ok);
        c->rope_cos = cache_alloc(c, (D / 2 + 1) * sizeof(float), false, &ok);
        c->rope_sin = cache_alloc(c, (D / 2 + 1) * sizeof(float), false, &ok);
        c->rope_pos = -1;
        if (shape->rope_inv_freq) {
            c->rope_inv_freq = cache_alloc(c, D / 2 * sizeof(double), false, &ok);
            if (ok) memcpy(c->rope_inv_freq, shape->rope_inv_freq, D / 2 * sizeof(double));
        }
        c->shape.rope_inv_freq = c->rope_inv_freq;
    }
    if (ok && g.grouped && g.resid_precision != TG_KV_FP32)
        c->group_f32 = cache_alloc(c, (size_t)g.group * H * D * sizeof(float), false, &ok);
    if (ok && params->quantize_sinks && g.sink > 0 && (g.k.range || g.v.range)) {
        c->sink_codes = cache_alloc(c, (size_t)g.sink * D, false, &ok);
        c->sink_grid = cache_alloc(c, 2 * D * sizeof(uint16_t), false, &ok);
    }
    if (ok && g.reposition) {
        /* cos / sin of the first slots, bit-for-bit tg_rope's rotation without trigonometry per read; slots past the
         * table (a window beyond TG_REPOSITION_TABLE_SLOTS) are rotated by the same formula computed directly, so
         * a huge window costs neither the table's memory nor its time up front */
        const int64_t slots = g.max_stored < TG_REPOSITION_TABLE_SLOTS ? g.max_stored : TG_REPOSITION_TABLE_SLOTS;
        c->rope_tab = c->rope_inv_freq ? tg_rope_table_new_freqs(g.head_dim, c->rope_inv_freq, slots, err)
                                       : tg_rope_table_new(g.head_dim, shape->rope_theta, slots, err);
        if (!c->rope_tab) {
            tg_kvcache_free(c);
            return NULL;
        }
        c->n_allocs++;
        c->bytes_meta += (size_t)slots * D * sizeof(float) + D / 2 * sizeof(double);
    }
    if (!ok) {
        tg_kvcache_free(c);
        tg_fail(err, "KV cache: out of memory (%zu bytes of K/V requested)", tg_cache_geom_bytes(&g));
        return NULL;
    }
    return c;
}

void tg_kvcache_free(tg_kvcache *c) {
    if (!c) return;
    if (c->layers)
        for (int l = 0; l < c->g.n_layers; l++) {
            store_free(&c->layers[l].k);
            store_free(&c->layers[l].v);
        }
    free(c->layers);
    free(c->kv_source);
    free(c->layer_window);
    tg_rope_table_free(c->rope_tab);
    free(c->scratch_k);
    free(c->scratch_q);
    free(c->work);
    free(c->parts);
    free(c->rope_cos);
    free(c->rope_sin);
    free(c->rope_inv_freq);
    free(c->sink_codes);
    free(c->sink_grid);
    free(c->group_f32);
    free(c);
}

/* ---- rows ----------------------------------------------------------------------------------------------------- */

static void to_plain(tg_kv_precision p, const float *x, uint8_t *dst, int64_t n) {
    if (p == TG_KV_FP32) memcpy(dst, x, (size_t)n * sizeof(float));
    else if (p == TG_KV_FP16) tg_f32_to_f16_row(x, (uint16_t *)(void *)dst, n);
    else tg_f32_to_bf16_row(x, (uint16_t *)(void *)dst, n);
}

static void from_plain(tg_kv_precision p, const uint8_t *src, float *out, int64_t n) {
    if (p == TG_KV_FP32) memcpy(out, src, (size_t)n * sizeof(float));
    else if (p == TG_KV_FP16) tg_f16_to_f32_row((const uint16_t *)(const void *)src, out, n);
    else tg_bf16_to_f32_row((const uint16_t *)(const void *)src, out, n);
}

void tg_kvcache_rope_at(tg_kvcache *c, int64_t pos) {
    if (c->rope_pos == pos) return;
    if (c->rope_inv_freq) tg_rope_angles_freqs(c->g.head_dim, pos, c->rope_inv_freq, c->rope_cos, c->rope_sin);
    else tg_rope_angles(c->g.head_dim, pos, c->shape.rope_theta, c->rope_cos, c->rope_sin);
    c->rope_pos = pos;
}

void tg_kvcache_rotate_slot(const tg_kvcache *c, float *x, int64_t slot) {
    tg_rope_table_apply(c->rope_tab, x, 1, slot, c->shape.rope_style);
}

void tg_kvcache_load_row(const tg_kvcache *c, const tg_layer_cache *L, bool keys, bool is_sink, int64_t n, int h,
                         float *out) {
    const tg_store_geom *sg = keys ? &c->g.k : &c->g.v;
    const tg_store *s = keys ? &L->k : &L->v;
    const int64_t H = c->g.n_kv_heads, D = c->g.head_dim;
    if (is_sink) {
        if (sg->kind == TG_STORE_PLAIN) from_plain(sg->precision, s->sink + (size_t)(n * H + h) * sg->row_bytes, out, D);
        else memcpy(out, (const float *)(const void *)s->sink + (n * H + h) * D, (size_t)D * sizeof(float));
        return;
    }
    switch (sg->kind) {
    case TG_STORE_PLAIN: {
        const int64_t row = n % c->g.row_cap;
        from_plain(sg->precision, s->data + (size_t)(h * c->g.row_cap + row) * sg->row_bytes, out, D);
        return;
    }
    case TG_STORE_GROUPED: {
        if (n >= L->qend) {
            from_plain(c->g.resid_precision, s->resid + (size_t)(((n % c->g.res_cap) * H + h) * D) * c->g.resid_elem,
                       out, D);
            return;
        }
        const int64_t G = c->g.group, unit = (n / G) % c->g.n_units, t = n % G;
        const int64_t uh = unit * H + h;
        const uint8_t *row = s->data + (size_t)(uh * G + t) * sg->row_bytes;
        if (sg->per_channel) tg_kivi_dequantize_row_channels(sg->range, row, D, s->scale + uh * D, s->zero + uh * D, out);
        else tg_kivi_dequantize_row(sg->range, row, D, tg_f16_to_f32(s->scale[uh * G + t]),
                                    tg_f16_to_f32(s->zero[uh * G + t]), out);
        return;
    }
    case TG_STORE_WHOLE: {
        const int64_t row = n % c->g.row_cap;
        const uint8_t *r = s->data + (size_t)(row * H + h) * sg->row_bytes;
        if (sg->per_channel) tg_kivi_dequantize_row_channels(sg->range, r, D, s->scale + h * D, s->zero + h * D, out);
        else tg_kivi_dequantize_row(sg->range, r, D, tg_f16_to_f32(s->scale[row * H + h]),
                                    tg_f16_to_f32(s->zero[row * H + h]), out);
        return;
    }
    }
}

/* ---- append ---------------------------------------------------------------------------------------------------- */

static void store_sink(const tg_kvcache *c, const tg_store_geom *sg, tg_store *s, int64_t j, const float *x) {
    const int64_t HD = (int64_t)c->g.n_kv_heads * c->g.head_dim;
    if (sg->kind == TG_STORE_PLAIN) to_plain(sg->precision, x, s->sink + (size_t)j * (size_t)HD * sg->elem_bytes, HD);
    else memcpy((float *)(void *)s->sink + j * HD, x, (size_t)HD * sizeof(float));
}

/* Grouped store: quantises residual tokens [qend, qend + G) into their group unit (from the fp32 ring in place, or
 * widened first from an fp16 / bf16 one). */
static void flush_group(const tg_kvcache *c, const tg_store_geom *sg, tg_store *s, int64_t qend) {
    const int64_t H = c->g.n_kv_heads, D = c->g.head_dim, G = c->g.group;
    if (c->g.n_units == 0) return; /* cannot happen: such geometries never fill the residual */
    const int64_t unit = (qend / G) % c->g.n_units, r0 = qend % c->g.res_cap;
    /* the group's G rows [G][H * D], contiguous in the ring (res_cap % G == 0) */
    const float *group = (const float *)(const void *)(s->resid + (size_t)(r0 * H * D) * c->g.resid_elem);
    if (c->g.resid_precision != TG_KV_FP32) {
        from_plain(c->g.resid_precision, s->resid + (size_t)(r0 * H * D) * c->g.resid_elem, c->group_f32, G * H * D);
        group = c->group_f32;
    }
    for (int64_t h = 0; h < H; h++) {
        const int64_t uh = unit * H + h;
        uint8_t *rows = s->data + (size_t)(uh * G) * sg->row_bytes;
        const float *x = group + h * D;
        if (sg->per_channel) {
            tg_kivi_quantize_channels(sg->range, x, (size_t)(H * D), (int)G, D, rows, s->scale + uh * D,
                                      s->zero + uh * D);
        } else {
            for (int64_t t = 0; t < G; t++)
                tg_kivi_quantize_row(sg->range, x + t * H * D, D, rows + (size_t)t * sg->row_bytes,
                                     &s->scale[uh * G + t], &s->zero[uh * G + t]);
        }
    }
}

/* Whole-history keys: refits each channel's (scale, zero) over the held rows [first, n) and the new row x, re-codes
 * the held rows of every channel whose grid changed (the design note's scheme, O(T * D) per step), then codes x into
 * row n. */
static void whole_keys_insert(const tg_kvcache *c, const tg_store_geom *sg, tg_store *s, int64_t first, int64_t n,
                              const float *x) {
    const int64_t H = c->g.n_kv_heads, D = c->g.head_dim, cap = c->g.row_cap;
    const int bits = sg->range->bits, levels = sg->range->qmax - sg->range->qmin;
    const size_t rb = sg->row_bytes, hstride = (size_t)H * rb;
    const int64_t row_new = n % cap;
    memset(s->data + (size_t)row_new * hstride, 0, hstride);
    for (int64_t h = 0; h < H; h++) {
        uint8_t *base = s->data + (size_t)h * rb;
        for (int64_t ch = 0; ch < D; ch++) {
            const float so = tg_f16_to_f32(s->scale[h * D + ch]), zo = tg_f16_to_f32(s->zero[h * D + ch]);
            const float xv = x[h * D + ch];
            int umin = levels, umax = 0;
            for (int64_t t = first; t < n; t++) {
                int u = tg_kivi_get(base + (size_t)(t % cap) * hstride, bits, ch);
                if (u < umin) umin = u;
                if (u > umax) umax = u;
            }
            float lo = xv, hi = xv;
            if (n > first) {
                float a = (float)umin * so + zo, b = (float)umax * so + zo;
                lo = a < lo ? a : lo;
                hi = b > hi ? b : hi;
            }
            uint16_t sh, zh;
            tg_kivi_fit(sg->range, lo, hi, &sh, &zh);
            const float sn = tg_f16_to_f32(sh), zn = tg_f16_to_f32(zh);
            if (sh != s->scale[h * D + ch] || zh != s->zero[h * D + ch]) {
                for (int64_t t = first; t < n; t++) {
                    uint8_t *row = base + (size_t)(t % cap) * hstride;
                    float old = (float)tg_kivi_get(row, bits, ch) * so + zo;
                    tg_kivi_put(row, bits, ch, tg_kivi_code(old, sn, zn, levels));
                }
                s->scale[h * D + ch] = sh;
                s->zero[h * D + ch] = zh;
            }
            tg_kivi_put(base + (size_t)row_new * hstride, bits, ch, tg_kivi_code(xv, sn, zn, levels));
        }
    }
}

static void store_insert(const tg_kvcache *c, const tg_store_geom *sg, tg_store *s, const tg_layer_cache *L,
                         const float *x) {
    const int64_t H = c->g.n_kv_heads, D = c->g.head_dim, HD = H * D, n = L->n_appended;
    switch (sg->kind) {
    case TG_STORE_PLAIN: /* head-major: each kv-head's rows are contiguous, so attention streams them */
        for (int64_t h = 0; h < H; h++)
            to_plain(sg->precision, x + h * D, s->data + (size_t)(h * c->g.row_cap + n % c->g.row_cap) * sg->row_bytes, D);
        return;
    case TG_STORE_GROUPED:
        to_plain(c->g.resid_precision, x, s->resid + (size_t)((n % c->g.res_cap) * HD) * c->g.resid_elem, HD);
        return;
    case TG_STORE_WHOLE:
        if (sg->per_channel) {
            whole_keys_insert(c, sg, s, L->first, n, x);
        } else {
            const int64_t row = n % c->g.row_cap;
            for (int64_t h = 0; h < H; h++)
                tg_kivi_quantize_row(sg->range, x + h * D, D, s->data + (size_t)(row * H + h) * sg->row_bytes,
                                     &s->scale[row * H + h], &s->zero[row * H + h]);
        }
        return;
    }
}

/* quantize_sinks: replaces a KIVI store's fp32 sink rows [sink][n_kv_heads][head_dim] by their round trip through
 * the store's quantiser (keys per channel over all the sinks of a kv-head, values per token), so attention sees
 * int-precision sinks while the fp32 slots (and the byte count) stay as they are. */
static void quantize_sink_rows(const tg_kvcache *c, const tg_store_geom *sg, tg_store *s) {
    if (!sg->range || !c->sink_codes) return;
    const int64_t H = c->g.n_kv_heads, D = c->g.head_dim, S = c->g.sink;
    float *rows = (float *)(void *)s->sink;
    uint16_t *scale = c->sink_grid, *zero = c->sink_grid + D;
    for (int64_t h = 0; h < H; h++) {
        float *x = rows + h * D; /* sink t of kv-head h at x + t * H * D */
        if (sg->per_channel) {
            tg_kivi_quantize_channels(sg->range, x, (size_t)(H * D), (int)S, D, c->sink_codes, scale, zero);
            for (int64_t t = 0; t < S; t++)
                tg_kivi_dequantize_row_channels(sg->range, c->sink_codes + (size_t)t * sg->row_bytes, D, scale, zero,
                                                x + t * H * D);
        } else {
            for (int64_t t = 0; t < S; t++) {
                tg_kivi_quantize_row(sg->range, x + t * H * D, D, c->sink_codes, scale, zero);
                tg_kivi_dequantize_row(sg->range, c->sink_codes, D, tg_f16_to_f32(scale[0]), tg_f16_to_f32(zero[0]),
                                       x + t * H * D);
            }
        }
    }
}

void tg_kvcache_append(tg_kvcache *c, int layer, int64_t pos, const float *k, const float *v) {
    if (!c || !k || !v || layer < 0 || layer >= c->g.n_layers || c->kv_source[layer] != layer) return;
    const tg_cache_geom *g = &c->g;
    tg_layer_cache *L = &c->layers[layer];
    const int64_t HD = (int64_t)g->n_kv_heads * g->head_dim;
    float *kr = c->scratch_k;
    memcpy(kr, k, (size_t)HD * sizeof(float));
    /* vanilla: keys rotated once at their absolute position; re-positioned: stored pre-RoPE, rotated when read */
    if (!g->reposition) {
        tg_kvcache_rope_at(c, pos);
        tg_rope_apply(kr, g->n_kv_heads, g->head_dim, c->rope_cos, c->rope_sin, c->shape.rope_style);
    }

    if (L->n_sink < g->sink) {
        store_sink(c, &g->k, &L->k, L->n_sink, kr);
        store_sink(c, &g->v, &L->v, L->n_sink, v);
        L->n_sink++;
        if (L->n_sink == g->sink) { /* the sinks are complete: quantise them as one group (quantize_sinks) */
            quantize_sink_rows(c, &g->k, &L->k);
            quantize_sink_rows(c, &g->v, &L->v);
        }
        return;
    }
    const int64_t n = L->n_appended;
    if (!g->bounded && n >= g->context) return; /* full: tg_kvcache_has_room said so */
    if (g->bounded) {
        /* StreamingLLM: drop the oldest block while the rest still covers the window once this token is in */
        while ((n + 1) - L->first - g->block >= g->window) {
            L->first += g->block;
            if (L->qend < L->first) L->qend = L->first;
        }
    }
    if (g->grouped && n - L->qend == g->res_cap) {
        if (g->k.kind == TG_STORE_GROUPED) flush_group(c, &g->k, &L->k, L->qend);
        if (g->v.kind == TG_STORE_GROUPED) flush_group(c, &g->v, &L->v, L->qend);
        L->qend += g->group;
    }
    store_insert(c, &g->k, &L->k, L, kr);
    store_insert(c, &g->v, &L->v, L, v);
    L->n_appended++;
}

/* ---- queries --------------------------------------------------------------------------------------------------- */

static const tg_layer_cache *first_kv_layer(const tg_kvcache *c) {
    for (int l = 0; l < c->g.n_layers; l++)
        if (c->kv_source[l] == l) return &c->layers[l];
    return NULL;
}

static int64_t layer_stored(const tg_layer_cache *L) { return L->n_sink + (L->n_appended - L->first); }

bool tg_kvcache_has_room(const tg_kvcache *c) {
    if (!c) return false;
    if (c->g.bounded) return true;
    for (int l = 0; l < c->g.n_layers; l++)
        if (c->kv_source[l] == l && c->layers[l].n_appended >= c->g.context) return false;
    return true;
}

int64_t tg_kvcache_stored(const tg_kvcache *c) {
    const tg_layer_cache *L = c ? first_kv_layer(c) : NULL;
    return L ? layer_stored(L) : 0;
}

int64_t tg_kvcache_read_back(const tg_kvcache *c, int layer, int64_t query_pos, float *k_out, float *v_out,
                             int64_t *pos_out) {
    (void)query_pos; /* keys are rotated at their position (vanilla) or slot (re-positioned), not at the query */
    if (!c || layer < 0 || layer >= c->g.n_layers) return 0;
    const tg_layer_cache *L = &c->layers[c->kv_source[layer]];
    const int64_t H = c->g.n_kv_heads, D = c->g.head_dim;
    int64_t slot = 0;
    for (int64_t i = 0; i < L->n_sink + (L->n_appended - L->first); i++, slot++) {
        const bool sink = i < L->n_sink;
        const int64_t n = sink ? i : L->first + (i - L->n_sink);
        for (int h = 0; h < H; h++) {
            if (k_out) {
                float *kd = k_out + (slot * H + h) * D;
                tg_kvcache_load_row(c, L, true, sink, n, h, kd);
                if (c->g.reposition) tg_kvcache_rotate_slot(c, kd, slot);
            }
            if (v_out) tg_kvcache_load_row(c, L, false, sink, n, h, v_out + (slot * H + h) * D);
        }
        if (pos_out) pos_out[slot] = sink ? n : c->g.sink + n;
    }
    return slot;
}

void tg_kvcache_report(const tg_kvcache *c, int64_t position, tg_cache_report *r) {
    if (!r) return;
    memset(r, 0, sizeof *r);
    if (!c) return;
    const tg_cache_geom *g = &c->g;
    const size_t nl = (size_t)g->n_kv_layers;
    r->position = position;
    r->stored = tg_kvcache_stored(c);
    r->capacity = g->bounded ? g->max_stored : g->context;
    r->n_layers = g->n_layers;
    r->n_kv_layers = g->n_kv_layers;
    const tg_store_geom *k = &g->k, *v = &g->v;
    const bool kp = k->kind == TG_STORE_PLAIN, vp = v->kind == TG_STORE_PLAIN;
    r->bytes_k_data = nl * (k->data_bytes + (kp ? k->sink_bytes : 0));
    r->bytes_v_data = nl * (v->data_bytes + (vp ? v->sink_bytes : 0));
    r->bytes_scales = nl * (k->scale_bytes + v->scale_bytes);
    r->bytes_residual = nl * (k->resid_bytes + v->resid_bytes + (kp ? 0 : k->sink_bytes) + (vp ? 0 : v->sink_bytes));
    r->bytes_total = r->bytes_k_data + r->bytes_v_data + r->bytes_scales + r->bytes_residual;
    const size_t elems = (size_t)r->stored * nl * (size_t)g->n_kv_heads * (size_t)g->head_dim * 2;
    r->bytes_if_bf16 = elems * 2;
    r->bytes_if_fp32 = elems * 4;
    tg_cache_geom_policy(g, &c->params, r->policy, sizeof r->policy);
    r->sink = g->sink;
    r->window = g->window;
}

void tg_kvcache_alloc_stats(const tg_kvcache *c, size_t *bytes_store, size_t *bytes_meta, int64_t *n_allocs) {
    if (bytes_store) *bytes_store = c ? c->bytes_store : 0;
    if (bytes_meta) *bytes_meta = c ? c->bytes_meta : 0;
    if (n_allocs) *n_allocs = c ? c->n_allocs : 0;
}

void tg_kvcache_set_simd(tg_kvcache *c, bool on) {
    if (c) c->simd = on;
}
