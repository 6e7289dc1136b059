/* codec.c — the table of store codecs (codec.h) and what every store is read through: the segment lookups, widening
 * a segment's row, the fp32 / fp16 / bf16 row converters. */
#include "kvcache/codec.h"

#include <string.h>

#include "util/checked.h"
#include "util/half.h"

/* The codecs, in the order a store's codec is picked (the first whose `selects` says yes). */
static const tg_store_codec *const codecs[] = {
    &tg_codec_plain,
    &tg_codec_kivi_grouped,
    &tg_codec_kivi_provisional,
    &tg_codec_kivi_whole,
    &tg_codec_fp32_copy,
};
#define N_CODECS (sizeof codecs / sizeof codecs[0])

const tg_store_codec *tg_store_codec_for(const tg_cache_geom *g, tg_kv_precision p) {
    for (size_t i = 0; i < N_CODECS; i++)
        if (codecs[i]->selects && codecs[i]->selects(g, p)) return codecs[i];
    return NULL;
}

const tg_store_codec *tg_store_codec_named(const char *name) {
    for (size_t i = 0; name && i < N_CODECS; i++)
        if (strcmp(codecs[i]->name, name) == 0) return codecs[i];
    return NULL;
}

/* ---- segments --------------------------------------------------------------------------------------------------- */

void tg_store_segment(const tg_kvcache *c, const tg_layer_cache *L, bool keys, int h, int64_t n, int64_t last,
                      tg_segment *g) {
    const tg_store_geom *sg = keys ? &c->g.k : &c->g.v;
    sg->codec->segment_at(c, sg, keys ? &L->k : &L->v, L, h, n, g);
    if (last - n + 1 < g->count) g->count = last - n + 1;
    if (g->run < g->count) g->run = g->count; /* also a codec that sets no run */
    if (last - n + 1 < g->run) g->run = last - n + 1;
    g->slot0 = L->n_sink + (n - L->first);
}

void tg_store_sink_segment(const tg_kvcache *c, const tg_layer_cache *L, bool keys, int h, int64_t s0, int64_t s1,
                           tg_segment *g) {
    const tg_store_geom *sg = keys ? &c->g.k : &c->g.v;
    const size_t H = (size_t)c->g.n_kv_heads, row = (size_t)c->g.head_dim * tg_plain_elem_bytes(sg->sink_precision);
    *g = (tg_segment){.kind = tg_plain_seg_kind(sg->sink_precision), .count = s1 - s0 + 1, .slot0 = s0};
    g->p = (keys ? L->k.sink : L->v.sink) + ((size_t)s0 * H + (size_t)h) * row;
    g->stride = H * row;
}

void tg_segment_codes(tg_segment *g, const tg_store_geom *sg, const uint16_t *scale, const uint16_t *zero, size_t grid,
                      size_t token, size_t tstride) {
    g->kind = TG_SEG_CODES;
    g->bits = sg->range->bits;
    if (sg->per_channel) {
        g->gscale = scale + grid;
        g->gzero = zero + grid;
    } else {
        g->tscale = scale + token;
        g->tzero = zero + token;
        g->tstride = tstride;
    }
}

/* The float precision whose rows are segments of this kind; NULL for codes. */
static const tg_kv_traits *plain_of_kind(int kind) {
    for (int i = 0; i < tg_kv_precision_count(); i++) {
        const tg_kv_traits *t = tg_kv_traits_of((tg_kv_precision)i);
        if (!t->is_integer && t->seg_kind == kind) return t;
    }
    return NULL;
}

void tg_segment_widen(const tg_segment *g, int64_t i, int64_t D, float *out) {
    const uint8_t *row = g->p + (size_t)i * g->stride;
    const tg_kv_traits *plain = plain_of_kind(g->kind);
    if (plain) {
        plain->get(row, out, D);
        return;
    }
    if (g->tiled) {
        const bool keys = g->gscale != NULL;
        for (int64_t k = 0; k < D; k++) {
            const float u = (float)tg_kivi_tile_get(g->p, keys, g->bits, g->group, D, g->t0 + i, k);
            out[k] = keys ? u * tg_f16_to_f32(g->gscale[k]) + tg_f16_to_f32(g->gzero[k])
                          : u * tg_f16_to_f32(g->tscale[(size_t)i * g->tstride]) + tg_f16_to_f32(g->tzero[(size_t)i * g->tstride]);
        }
        return;
    }
    if (g->gscale) { /* keys: the per-channel grid */
        for (int64_t k = 0; k < D; k++)
            out[k] = (float)tg_kivi_get(row, g->bits, k) * tg_f16_to_f32(g->gscale[k]) + tg_f16_to_f32(g->gzero[k]);
        return;
    }
    const float scale = tg_f16_to_f32(g->tscale[(size_t)i * g->tstride]);
    const float zero = tg_f16_to_f32(g->tzero[(size_t)i * g->tstride]);
    for (int64_t k = 0; k < D; k++) out[k] = (float)tg_kivi_get(row, g->bits, k) * scale + zero;
}

/* ---- plain rows ------------------------------------------------------------------------------------------------- */

size_t tg_plain_elem_bytes(tg_kv_precision p) { return tg_kv_traits_of(p)->unit_bytes; }

int tg_plain_seg_kind(tg_kv_precision p) { return tg_kv_traits_of(p)->seg_kind; }

void tg_plain_put(tg_kv_precision p, const float *x, uint8_t *dst, int64_t n) { tg_kv_traits_of(p)->put(x, dst, n); }

void tg_plain_get(tg_kv_precision p, const uint8_t *src, float *out, int64_t n) {
    tg_kv_traits_of(p)->get(src, out, n);
}

size_t tg_mul4(bool *ok, size_t a, size_t b, size_t c, size_t d) {
    size_t r;
    if (!tg_mul_size(a, b, &r) || !tg_mul_size(r, c, &r) || !tg_mul_size(r, d, &r)) {
        *ok = false;
        return 0;
    }
    return r;
}

/* Unit u's chunk k and index i in it (no division in the usual cases: the unit in the first chunk, or the first
 * lap of a bounded ring). */
static void chunk_of(const tg_store_geom *sg, int64_t u, int64_t *k, int64_t *i) {
    *k = u < sg->chunk_units ? 0 : sg->chunk_units_log2 >= 0 ? u >> sg->chunk_units_log2 : u / sg->chunk_units;
    *i = u - *k * sg->chunk_units;
}

/* n / G, as a shift when G is a power of two. */
static int64_t group_index(const tg_cache_geom *g, int64_t n) { return g->group_log2 >= 0 ? n >> g->group_log2 : n / g->group; }

void tg_kivi_unit_of(const tg_kvcache *c, const tg_store_geom *sg, int64_t n, int64_t *k, int64_t *i) {
    const int64_t q = group_index(&c->g, n);
    chunk_of(sg, q < c->g.n_units ? q : q % c->g.n_units, k, i);
}

uint8_t *tg_kivi_group_rows(const tg_kvcache *c, const tg_store_geom *sg, const tg_store *s, int64_t k, int64_t i,
                            int64_t h) {
    const int64_t units = tg_store_chunk_units(sg, k);
    return s->data[k] + (size_t)((h * units + i) * c->g.group) * sg->row_bytes;
}

void tg_kivi_group_segment(const tg_kvcache *c, const tg_store_geom *sg, const tg_store *s, int h, int64_t n,
                           int64_t end, tg_segment *g) {
    const int64_t H = c->g.n_kv_heads, D = c->g.head_dim, G = c->g.group, q = group_index(&c->g, n), t = n - q * G;
    const int64_t u = q < c->g.n_units ? q : q % c->g.n_units;
    int64_t k, i;
    chunk_of(sg, u, &k, &i);
    const int64_t uh = i * H + h;
    *g = (tg_segment){0};
    g->count = end - n < G - t ? end - n : G - t;
    uint8_t *rows = tg_kivi_group_rows(c, sg, s, k, i, h);
    if (sg->tiled) {
        g->tiled = true;
        g->p = rows;
        g->t0 = t;
        g->group = G;
        /* the units after u in chunk k are the next groups (up to the ring's wrap) */
        const int64_t units = tg_store_chunk_units(sg, k) - i < c->g.n_units - u ? tg_store_chunk_units(sg, k) - i
                                                                                 : c->g.n_units - u;
        g->run = end - n < units * G - t ? end - n : units * G - t;
        g->tile_next = (size_t)G * sg->row_bytes;
        g->scale_next = (size_t)H * (size_t)(sg->per_channel ? D : G);
    } else {
        g->p = rows + (size_t)t * sg->row_bytes;
        g->stride = sg->row_bytes;
    }
    tg_segment_codes(g, sg, s->scale[k], s->zero[k], (size_t)(uh * D), (size_t)(uh * G + t), 1);
}

bool tg_kivi_group_geometry(const tg_cache_geom *g, tg_store_geom *sg) {
    bool ok = true;
    const size_t H = (size_t)g->n_kv_heads, D = (size_t)g->head_dim, G = (size_t)g->group, U = (size_t)g->n_units;
    sg->range = tg_kivi_range_of(sg->precision);
    sg->row_bytes = tg_kivi_row_bytes(sg->range, (int64_t)D);
    sg->tiled = tg_kivi_tiles_fit((int64_t)D, (int64_t)G);
    sg->data_bytes = tg_mul4(&ok, U, H, G, sg->row_bytes);
    sg->scale_bytes = tg_mul4(&ok, U, H, sg->per_channel ? D : G, 2 * sizeof(uint16_t));
    sg->resid_bytes = 0;
    sg->sink_precision = g->sink_precision;
    sg->sink_bytes = tg_mul4(&ok, (size_t)g->sink, H, D, tg_plain_elem_bytes(g->sink_precision));
    sg->grows = true;
    sg->unit_tokens = (int64_t)G;
    sg->n_units = (int64_t)U;
    sg->unit_data_bytes = tg_mul4(&ok, H, G, sg->row_bytes, 1);
    sg->unit_scale_bytes = tg_mul4(&ok, H, sg->per_channel ? D : G, 2 * sizeof(uint16_t), 1);
    return ok;
}
