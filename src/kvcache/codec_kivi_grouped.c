/* codec_kivi_grouped.c — KIVI with groups of G tokens: tokens [first, qend) quantised, token n in group unit
 * (n / G) mod n_units ([n_units][n_kv_heads][G][row_bytes] codes, as one tile per (unit, kv-head) where kivi.h's
 * tiles fit the shape; keys with one fp16 (scale, zero) per channel of a
 * group, values per token), tokens [qend, n_appended) in the full-precision residual ring (fp32, fp16 or bf16, row
 * n mod res_cap), quantised G at a time when the ring is full; sinks at the residual precision (fp32 when they
 * get quantised). Tiled stores on AVX2 builds take kivi_avx2.c's path (the same bytes); the scalar path is its
 * reference. */
#include "kvcache/codec.h"
#include "kvcache/attend_kernels.h"
#include "kvcache/kivi_avx2.h"

static bool grouped_selects(const tg_cache_geom *g, tg_kv_precision p) {
    return g->grouped && g->res_cap > 0 && tg_kivi_is_quantized(p);
}

static bool grouped_geometry(const tg_cache_geom *g, tg_store_geom *sg) {
    bool ok = tg_kivi_group_geometry(g, sg);
    sg->resid_bytes = tg_mul4(&ok, (size_t)g->res_cap, (size_t)g->n_kv_heads, (size_t)g->head_dim, g->resid_elem);
    sg->rewrites = sg->scale_bytes > 0; /* groups get quantised (none when the residual never fills) */
    sg->unit_lag = g->res_cap;          /* the first group unit is needed when the ring is full */
    return ok;
}

static void grouped_insert_head(const tg_kvcache *c, const tg_store_geom *sg, tg_store *s, int64_t n, int h,
                                const float *x, uint8_t *scratch) {
    (void)sg;
    (void)scratch;
    const int64_t D = c->g.head_dim, HD = (int64_t)c->g.n_kv_heads * D, row = n % c->g.res_cap;
    tg_plain_put(c->g.resid_precision, x, s->resid + (size_t)(row * HD + h * D) * c->g.resid_elem, D);
}

/* Quantises residual tokens [qend, qend + G) into their group unit (from an fp32 ring in place, or widened first
 * from an fp16 / bf16 one). */
static void grouped_flush(const tg_kvcache *c, const tg_store_geom *sg, tg_store *s, int64_t qend) {
    const int64_t H = c->g.n_kv_heads, D = c->g.head_dim, G = c->g.group;
    if (c->g.n_units == 0) return; /* cannot happen: such geometries never fill the residual */
    int64_t k, unit;
    tg_kivi_unit_of(c, sg, qend, &k, &unit);
    const int64_t r0 = qend % c->g.res_cap;
    /* the group's G rows [G][H * D], contiguous in the ring (res_cap % G == 0) */
    const uint8_t *ring = s->resid + (size_t)(r0 * H * D) * c->g.resid_elem;
    const float *group = (const float *)(const void *)ring;
    if (tg_kv_traits_of(c->g.resid_precision)->seg_kind != TG_SEG_F32) { /* not fp32 rows readable in place */
        tg_plain_get(c->g.resid_precision, ring, c->group_f32, G * H * D);
        group = c->group_f32;
    }
    const tg_attn_kernels *ak = c->simd ? tg_attn_kernels_get() : NULL;
    const bool fast = ak && ak->kivi_key_group && sg->tiled && D <= TG_KIVI_AVX2_MAX_D;
    for (int64_t h = 0; h < H; h++) {
        const int64_t uh = unit * H + h;
        uint8_t *rows = tg_kivi_group_rows(c, sg, s, k, unit, h);
        uint16_t *scale = s->scale[k], *zero = s->zero[k];
        const float *x = group + h * D;
        if (fast && sg->per_channel) {
            ak->kivi_key_group(sg->range, x, (size_t)(H * D), G, D, scale + uh * D, zero + uh * D, rows);
            continue;
        }
        if (fast) {
            for (int64_t t = 0; t < G; t++)
                if (!ak->kivi_value_row(sg->range, x + t * H * D, D, rows, t, &scale[uh * G + t],
                                            &zero[uh * G + t])) {
                    tg_kivi_quantize_row(sg->range, x + t * H * D, D, c->tile_rows, &scale[uh * G + t],
                                         &zero[uh * G + t]);
                    tg_kivi_tile_put_row(rows, false, sg->range->bits, G, D, t, c->tile_rows);
                }
            continue;
        }
        uint8_t *dst = sg->tiled ? c->tile_rows : rows; /* a tile: packed rows first, then laid out */
        if (sg->per_channel) {
            tg_kivi_quantize_channels(sg->range, x, (size_t)(H * D), (int)G, D, dst, scale + uh * D, zero + uh * D);
        } else {
            for (int64_t t = 0; t < G; t++)
                tg_kivi_quantize_row(sg->range, x + t * H * D, D, dst + (size_t)t * sg->row_bytes,
                                     &scale[uh * G + t], &zero[uh * G + t]);
        }
        if (sg->tiled)
            for (int64_t t = 0; t < G; t++)
                tg_kivi_tile_put_row(rows, sg->per_channel, sg->range->bits, G, D, t, dst + (size_t)t * sg->row_bytes);
    }
}

static void grouped_segment_at(const tg_kvcache *c, const tg_store_geom *sg, const tg_store *s,
                               const tg_layer_cache *L, int h, int64_t n, tg_segment *g) {
    const int64_t H = c->g.n_kv_heads, D = c->g.head_dim;
    *g = (tg_segment){0};
    if (n >= L->qend) { /* the residual ring, up to its wrap */
        const int64_t row = n % c->g.res_cap;
        g->kind = tg_plain_seg_kind(c->g.resid_precision);
        g->count = c->g.res_cap - row;
        g->p = s->resid + (size_t)((row * H + h) * D) * c->g.resid_elem;
        g->stride = (size_t)(H * D) * c->g.resid_elem;
        return;
    }
    tg_kivi_group_segment(c, sg, s, h, n, L->qend, g); /* the rest of n's quantised group */
}

const tg_store_codec tg_codec_kivi_grouped = {
    .name = "kivi-grouped", .selects = grouped_selects, .geometry = grouped_geometry,
    .insert_head = grouped_insert_head, .flush = grouped_flush, .segment_at = grouped_segment_at,
};
