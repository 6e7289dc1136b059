/* codec_kivi_whole.c — KIVI without groups (group size 0, the design note's scheme): token n in row n mod row_cap
 * ([row_cap][n_kv_heads][row_bytes] codes, quantised when appended, no residual); keys with one fp16 (scale, zero)
 * per (kv-head, channel) for all held rows, re-fitted on every append; values with one per token; sinks at the residual
 * precision (fp32 when they get quantised). One block of rows (a unit = one row of every kv-head) that an unbounded
 * cache doubles as it fills (moving what it holds: O(1) amortised), not chunks: chunks would cut the rows' segments
 * at their ends, which regroups the values' blocks in attention and changes the last bits. */
#include "kvcache/codec.h"

#include <string.h>

#include "util/half.h"

static bool whole_selects(const tg_cache_geom *g, tg_kv_precision p) { return !g->grouped && tg_kivi_is_quantized(p); }

static bool whole_geometry(const tg_cache_geom *g, tg_store_geom *sg) {
    bool ok = true;
    const size_t H = (size_t)g->n_kv_heads, D = (size_t)g->head_dim;
    sg->range = tg_kivi_range_of(sg->precision);
    sg->row_bytes = tg_kivi_row_bytes(sg->range, (int64_t)D);
    sg->data_bytes = tg_mul4(&ok, (size_t)g->row_cap, H, sg->row_bytes, 1);
    sg->scale_bytes = sg->per_channel ? tg_mul4(&ok, H, D, 2 * sizeof(uint16_t), 1)
                                      : tg_mul4(&ok, (size_t)g->row_cap, H, 2 * sizeof(uint16_t), 1);
    sg->sink_precision = g->sink_precision;
    sg->sink_bytes = tg_mul4(&ok, (size_t)g->sink, H, D, tg_plain_elem_bytes(g->sink_precision));
    sg->rewrites = sg->scale_bytes > 0; /* keys: every append may re-fit the grid and re-code the held rows */
    sg->doubles = true;
    sg->unit_tokens = 1;
    sg->n_units = g->row_cap;
    sg->unit_data_bytes = tg_mul4(&ok, H, sg->row_bytes, 1, 1);
    sg->unit_scale_bytes = sg->per_channel ? 0 : tg_mul4(&ok, H, 2 * sizeof(uint16_t), 1, 1);
    sg->fixed_scale_bytes = sg->per_channel ? sg->scale_bytes : 0;
    return ok;
}

/* Keys: refits each channel's (scale, zero) over the held rows [first, n) and the new row x, re-codes the held rows
 * of every channel whose grid changed (O(T * D) per step), then codes x into row n. */
static void whole_keys_insert(const tg_kvcache *c, const tg_store_geom *sg, const tg_store *s, int64_t first,
                              int64_t n, const float *x) {
    uint8_t *data = s->data[0];
    uint16_t *scale = s->scale[0], *zero = s->zero[0];
    const int64_t H = c->g.n_kv_heads, D = c->g.head_dim, cap = c->g.row_cap;
    const int bits = sg->range->bits, levels = sg->range->qmax - sg->range->qmin;
    const size_t rb = sg->row_bytes, hstride = (size_t)H * rb;
    const int64_t row_new = n % cap;
    memset(data + (size_t)row_new * hstride, 0, hstride);
    for (int64_t h = 0; h < H; h++) {
        uint8_t *base = data + (size_t)h * rb;
        for (int64_t ch = 0; ch < D; ch++) {
            const float so = tg_f16_to_f32(scale[h * D + ch]), zo = tg_f16_to_f32(zero[h * D + ch]);
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
            if (sh != scale[h * D + ch] || zh != zero[h * D + ch]) {
                for (int64_t t = first; t < n; t++) {
                    uint8_t *row = base + (size_t)(t % cap) * hstride;
                    float old = (float)tg_kivi_get(row, bits, ch) * so + zo;
                    tg_kivi_put(row, bits, ch, tg_kivi_code(old, sn, zn, levels));
                }
                scale[h * D + ch] = sh;
                zero[h * D + ch] = zh;
            }
            tg_kivi_put(base + (size_t)row_new * hstride, bits, ch, tg_kivi_code(xv, sn, zn, levels));
        }
    }
}

static void whole_insert(const tg_kvcache *c, const tg_store_geom *sg, tg_store *s, const tg_layer_cache *L,
                         const float *x) {
    if (sg->per_channel) {
        whole_keys_insert(c, sg, s, L->first, L->n_appended, x);
        return;
    }
    const int64_t H = c->g.n_kv_heads, D = c->g.head_dim, row = L->n_appended % c->g.row_cap;
    for (int64_t h = 0; h < H; h++)
        tg_kivi_quantize_row(sg->range, x + h * D, D, s->data[0] + (size_t)(row * H + h) * sg->row_bytes,
                             &s->scale[0][row * H + h], &s->zero[0][row * H + h]);
}

static void whole_segment_at(const tg_kvcache *c, const tg_store_geom *sg, const tg_store *s,
                             const tg_layer_cache *L, int h, int64_t n, tg_segment *g) {
    (void)L;
    const int64_t H = c->g.n_kv_heads, D = c->g.head_dim, row = n % c->g.row_cap;
    *g = (tg_segment){.count = c->g.row_cap - row};
    g->p = s->data[0] + (size_t)(row * H + h) * sg->row_bytes;
    g->stride = (size_t)H * sg->row_bytes;
    tg_segment_codes(g, sg, s->scale[0], s->zero[0], (size_t)(h * D), (size_t)(row * H + h), (size_t)H);
}

const tg_store_codec tg_codec_kivi_whole = {
    .name = "kivi-whole", .selects = whole_selects, .geometry = whole_geometry,
    .insert = whole_insert, .flush = NULL, .segment_at = whole_segment_at,
};
