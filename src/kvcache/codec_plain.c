/* codec_plain.c — the plain store codec: rows of a float precision (fp32 / fp16 / bf16, converted by its traits
 * row), token n in row n mod row_cap, in chunks of rows (a unit = one row of every kv-head), each chunk
 * kv-head-major ([n_kv_heads][rows of the chunk][head_dim], so attention streams one kv-head's rows); sinks at the
 * same precision. */
#include "kvcache/codec.h"

static bool plain_selects(const tg_cache_geom *g, tg_kv_precision p) {
    (void)g;
    return !tg_kv_traits_of(p)->is_integer;
}

static bool plain_geometry(const tg_cache_geom *g, tg_store_geom *sg) {
    bool ok = true;
    const size_t H = (size_t)g->n_kv_heads, D = (size_t)g->head_dim;
    sg->elem_bytes = tg_plain_elem_bytes(sg->precision);
    sg->row_bytes = D * sg->elem_bytes;
    sg->data_bytes = tg_mul4(&ok, (size_t)g->row_cap, H, sg->row_bytes, 1);
    sg->sink_precision = sg->precision;
    sg->sink_bytes = tg_mul4(&ok, (size_t)g->sink, H, sg->row_bytes, 1);
    sg->grows = true;
    sg->unit_tokens = 1;
    sg->n_units = g->row_cap;
    sg->unit_data_bytes = tg_mul4(&ok, H, sg->row_bytes, 1, 1);
    return ok;
}

/* Where token n's rows are: chunk *k, row *r of its *rows. */
static void plain_row_of(const tg_kvcache *c, const tg_store_geom *sg, int64_t n, int64_t *k, int64_t *r,
                         int64_t *rows) {
    const int64_t row = n % c->g.row_cap;
    *k = row / sg->chunk_units;
    *r = row % sg->chunk_units;
    *rows = tg_store_chunk_units(sg, *k);
}

static void plain_insert_head(const tg_kvcache *c, const tg_store_geom *sg, tg_store *s, int64_t n, int h,
                              const float *x, uint8_t *scratch) {
    (void)scratch;
    int64_t k, r, rows;
    plain_row_of(c, sg, n, &k, &r, &rows);
    tg_plain_put(sg->precision, x, s->data[k] + (size_t)(h * rows + r) * sg->row_bytes, c->g.head_dim);
}

static void plain_segment_at(const tg_kvcache *c, const tg_store_geom *sg, const tg_store *s,
                             const tg_layer_cache *L, int h, int64_t n, tg_segment *g) {
    (void)L;
    int64_t k, r, rows;
    plain_row_of(c, sg, n, &k, &r, &rows);
    *g = (tg_segment){.kind = tg_plain_seg_kind(sg->precision), .count = rows - r};
    g->p = s->data[k] + (size_t)(h * rows + r) * sg->row_bytes;
    g->stride = sg->row_bytes;
}

const tg_store_codec tg_codec_plain = {
    .name = "plain", .selects = plain_selects, .geometry = plain_geometry,
    .insert_head = plain_insert_head, .flush = NULL, .segment_at = plain_segment_at,
};
