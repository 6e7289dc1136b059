/* codec_kivi_provisional.c — KIVI groups of G tokens without a full-precision residual: every non-sink token is
 * quantised as it arrives, into group unit (n / G) mod n_units ([n_units][n_kv_heads][G][row_bytes] codes, the
 * layout of codec_kivi_grouped.c, tiles included). Values: one fp16 (scale, zero) per token, exactly what a flushed group holds.
 * Keys: one fp16 (scale, zero) per channel of a group, provisional while the group fills: the first token fits the
 * grid to itself; a later token whose channel value falls outside the grid's span widens that channel's grid to
 * cover it (tg_kivi_fit over [grid bottom, grid top] and the value) and re-codes the channel's earlier rows of the
 * group from their dequantised values. Cost O(G) per widened channel, so at most O(G * D) per token; a complete
 * group's grid covers all its values, and each row carries at most one half-step of every grid it was re-coded
 * under. Sinks at the residual precision (codec_kivi_grouped.c's rule). Tiled stores on AVX2 builds take the
 * eight-channel path of kivi_avx2.c (the same bytes); this file's scalar path is its reference. */
#include "kvcache/codec.h"

#include <string.h>

#include "kvcache/attend_kernels.h"
#include "kvcache/kivi_avx2.h"
#include "util/half.h"

static bool provisional_selects(const tg_cache_geom *g, tg_kv_precision p) {
    return g->grouped && g->res_cap == 0 && tg_kivi_is_quantized(p);
}

static bool provisional_geometry(const tg_cache_geom *g, tg_store_geom *sg) {
    bool ok = tg_kivi_group_geometry(g, sg);
    sg->rewrites = sg->per_channel; /* a widened key grid re-codes the group's earlier rows */
    return ok;
}

/* A group's codes: G packed rows (rows + t * rb), or one tile (kivi.h). */
typedef struct {
    uint8_t *rows;
    size_t rb;
    bool tiled;
    int bits;
    int64_t G, D;
} group_codes;

static int code_get(const group_codes *gc, int64_t t, int64_t k) {
    return gc->tiled ? tg_kivi_tile_get(gc->rows, true, gc->bits, gc->G, gc->D, t, k)
                     : tg_kivi_get(gc->rows + (size_t)t * gc->rb, gc->bits, k);
}

static void code_put(const group_codes *gc, int64_t t, int64_t k, int u) {
    if (gc->tiled) tg_kivi_tile_put(gc->rows, true, gc->bits, gc->G, gc->D, t, k, u);
    else tg_kivi_put(gc->rows + (size_t)t * gc->rb, gc->bits, k, u);
}

/* Key channel k of the t rows before row t of a group re-coded from grid (s0, z0) to the grid (scale, zero). */
static void recode_channel(const tg_kivi_range *r, const group_codes *gc, int64_t t, int64_t k, float s0, float z0,
                           float s1, float z1) {
    const int levels = r->qmax - r->qmin;
    for (int64_t i = 0; i < t; i++) {
        const float x = (float)code_get(gc, i, k) * s0 + z0;
        code_put(gc, i, k, tg_kivi_code(x, s1, z1, levels));
    }
}

/* Token t of a key group (t > 0): widens the grid of every channel the token falls outside of, then codes it
 * (fast: kivi_avx2.c's path, for a tile). */
static void insert_key(const tg_kivi_range *r, const float *x, const group_codes *gc, int64_t t, uint16_t *scale,
                       uint16_t *zero, const tg_attn_kernels *fast) {
    const int levels = r->qmax - r->qmin;
    if (fast) {
        int32_t miss[TG_KIVI_AVX2_MAX_D];
        const int64_t n_miss = fast->kivi_key_misses(r, x, gc->D, scale, zero, miss);
        for (int64_t i = 0; i < n_miss; i++) {
            const int64_t k = miss[i];
            const float s = tg_f16_to_f32(scale[k]), z = tg_f16_to_f32(zero[k]), top = z + (float)levels * s;
            tg_kivi_fit(r, x[k] < z ? x[k] : z, x[k] > top ? x[k] : top, &scale[k], &zero[k]);
            fast->kivi_recode_key_channel(r, gc->rows, gc->G, t, k, s, z, tg_f16_to_f32(scale[k]),
                                            tg_f16_to_f32(zero[k]));
        }
        fast->kivi_key_row(r, x, gc->D, scale, zero, gc->rows, gc->G, t);
        return;
    }
    if (!gc->tiled) memset(gc->rows + (size_t)t * gc->rb, 0, gc->rb);
    for (int64_t k = 0; k < gc->D; k++) {
        float s = tg_f16_to_f32(scale[k]), z = tg_f16_to_f32(zero[k]);
        const float top = z + (float)levels * s;
        if (x[k] < z || x[k] > top) { /* outside the span (NaN never is: it codes to 0) */
            uint16_t ns, nz;
            tg_kivi_fit(r, x[k] < z ? x[k] : z, x[k] > top ? x[k] : top, &ns, &nz);
            const float s1 = tg_f16_to_f32(ns), z1 = tg_f16_to_f32(nz);
            recode_channel(r, gc, t, k, s, z, s1, z1);
            scale[k] = ns;
            zero[k] = nz;
            s = s1;
            z = z1;
        }
        code_put(gc, t, k, tg_kivi_code(x[k], s, z, levels));
    }
}

static void provisional_insert_head(const tg_kvcache *c, const tg_store_geom *sg, tg_store *s, int64_t n, int h,
                                    const float *x, uint8_t *scratch) {
    const int64_t H = c->g.n_kv_heads, D = c->g.head_dim, G = c->g.group, t = n % G;
    int64_t k, unit;
    tg_kivi_unit_of(c, sg, n, &k, &unit);
    uint16_t *scale = s->scale[k], *zero = s->zero[k];
    const tg_attn_kernels *ak = c->simd ? tg_attn_kernels_get() : NULL;
    /* kivi_avx2.c's path, where the table has it */
    const tg_attn_kernels *fast = ak && ak->kivi_key_row && sg->tiled && D <= TG_KIVI_AVX2_MAX_D ? ak : NULL;
    const int64_t uh = unit * H + h;
    uint8_t *rows = tg_kivi_group_rows(c, sg, s, k, unit, h);
    if (sg->per_channel && t > 0) {
        const group_codes gc = {rows, sg->row_bytes, sg->tiled, sg->range->bits, G, D};
        insert_key(sg->range, x, &gc, t, scale + uh * D, zero + uh * D, fast);
        return;
    }
    if (fast && !sg->per_channel &&
        fast->kivi_value_row(sg->range, x, D, rows, t, &scale[uh * G + t], &zero[uh * G + t]))
        return;
    /* a row of its own: straight into the group's rows, or packed first (in scratch) and then into the tile */
    uint8_t *row = sg->tiled ? scratch : rows + (size_t)t * sg->row_bytes;
    if (!sg->per_channel)
        tg_kivi_quantize_row(sg->range, x, D, row, &scale[uh * G + t], &zero[uh * G + t]);
    else /* t == 0: the group's first key fits the grid to itself */
        tg_kivi_quantize_channels(sg->range, x, (size_t)D, 1, D, row, scale + uh * D, zero + uh * D);
    if (sg->tiled) tg_kivi_tile_put_row(rows, sg->per_channel, sg->range->bits, G, D, t, row);
}

static void provisional_segment_at(const tg_kvcache *c, const tg_store_geom *sg, const tg_store *s,
                                   const tg_layer_cache *L, int h, int64_t n, tg_segment *g) {
    tg_kivi_group_segment(c, sg, s, h, n, L->n_appended, g);
}

const tg_store_codec tg_codec_kivi_provisional = {
    .name = "kivi-provisional", .selects = provisional_selects, .geometry = provisional_geometry,
    .insert_head = provisional_insert_head, .insert_codes = true, .segment_at = provisional_segment_at,
};
