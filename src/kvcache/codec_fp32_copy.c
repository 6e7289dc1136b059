/* codec_fp32_copy.c — a test-only store codec (chosen by name, never by a policy): fp32 rows kept token-major
 * ([row_cap][n_kv_heads][head_dim], token n in row n mod row_cap, in chunks of rows), sinks fp32. It must compute exactly what the plain
 * fp32 store computes: the proof that a codec is one file and one table row. */
#include <string.h>

#include "kvcache/codec.h"

static bool copy_geometry(const tg_cache_geom *g, tg_store_geom *sg) {
    bool ok = true;
    const size_t H = (size_t)g->n_kv_heads, D = (size_t)g->head_dim;
    sg->elem_bytes = sizeof(float);
    sg->row_bytes = D * sizeof(float);
    sg->data_bytes = tg_mul4(&ok, (size_t)g->row_cap, H, sg->row_bytes, 1);
    sg->sink_precision = TG_KV_FP32;
    sg->sink_bytes = tg_mul4(&ok, (size_t)g->sink, H, sg->row_bytes, 1);
    sg->grows = true;
    sg->unit_tokens = 1;
    sg->n_units = g->row_cap;
    sg->unit_data_bytes = tg_mul4(&ok, H, sg->row_bytes, 1, 1);
    return ok && sg->precision == TG_KV_FP32;
}

static void copy_insert(const tg_kvcache *c, const tg_store_geom *sg, tg_store *s, const tg_layer_cache *L,
                        const float *x) {
    const size_t H = (size_t)c->g.n_kv_heads;
    const int64_t row = L->n_appended % c->g.row_cap, k = row / sg->chunk_units, r = row % sg->chunk_units;
    memcpy(s->data[k] + (size_t)r * H * sg->row_bytes, x, H * sg->row_bytes);
}

static void copy_segment_at(const tg_kvcache *c, const tg_store_geom *sg, const tg_store *s,
                            const tg_layer_cache *L, int h, int64_t n, tg_segment *g) {
    (void)L;
    const int64_t H = c->g.n_kv_heads, row = n % c->g.row_cap, k = row / sg->chunk_units, r = row % sg->chunk_units;
    *g = (tg_segment){.kind = TG_SEG_F32, .count = tg_store_chunk_units(sg, k) - r};
    g->p = s->data[k] + (size_t)(r * H + h) * sg->row_bytes;
    g->stride = (size_t)H * sg->row_bytes;
}

const tg_store_codec tg_codec_fp32_copy = {
    .name = "fp32-copy", .selects = NULL, .geometry = copy_geometry,
    .insert = copy_insert, .flush = NULL, .segment_at = copy_segment_at,
};
