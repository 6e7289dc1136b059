/* kvcache.c — the KV cache's storage: allocation (a bounded cache's once, in tg_kvcache_new; an unbounded cache's in
 * chunks as tokens arrive, checked against the memory limit), appending with RoPE, StreamingLLM eviction in whole
 * blocks, the sinks, read-back and the byte report. How a store keeps its other tokens is its
 * codec's (codec.h); attention over the storage lives in attend.c. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kvcache/codec.h"
#include "kvcache/eviction.h"
#include "kvcache/rotate.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/half.h"

/* ---- allocation: every buffer counted ------------------------------------------------------------------------- */

/* Most blocks tg_kvcache_new allocates besides the stores' chunks: 10 per K/V layer (five per store: the three chunk
 * tables, the residual ring, the sinks), 14 others. */
#define MAX_OWNED(n_layers) ((size_t)(n_layers) * 10 + 14)

/* Zeroed block of `bytes`, counted in the cache's accounting and owned by it (tg_kvcache_free frees every one); NULL
 * for 0 bytes or on failure (*ok cleared). */
static void *cache_alloc(tg_kvcache *c, size_t bytes, bool store, bool *ok) {
    if (bytes == 0) return NULL;
    void *p = c->n_owned < c->max_owned ? calloc(1, bytes) : NULL;
    if (!p) {
        *ok = false;
        return NULL;
    }
    c->owned[c->n_owned++] = p;
    c->n_allocs++;
    if (store) c->bytes_store += bytes;
    else c->bytes_meta += bytes;
    return p;
}

/* The fixed part of a store (its chunk tables, residual ring and sinks); its chunks come from store_grow. */
static void store_alloc(tg_kvcache *c, const tg_store_geom *sg, tg_store *s, bool *ok) {
    const size_t n = (size_t)sg->n_chunks;
    s->data = cache_alloc(c, n * sizeof *s->data, false, ok);
    s->scale = cache_alloc(c, n * sizeof *s->scale, false, ok);
    s->zero = cache_alloc(c, n * sizeof *s->zero, false, ok);
    s->resid = cache_alloc(c, sg->resid_bytes, true, ok);
    s->sink = cache_alloc(c, sg->sink_bytes, true, ok);
}

/* *p (of `old` bytes) grown to `bytes`, the new bytes zeroed; false (nothing changed) when the system refuses. */
static bool grow_block(void **p, size_t old, size_t bytes) {
    if (bytes <= old) return true;
    void *q = realloc(*p, bytes);
    if (!q) return false;
    memset((uint8_t *)q + old, 0, bytes - old);
    *p = q;
    return true;
}

/* A store that doubles: its one block grown to `rows` rows (what it holds moves with it). */
static bool store_double(tg_kvcache *c, const tg_store_geom *sg, tg_store *s, int64_t rows) {
    if (rows <= s->n_alloc) return true;
    size_t d0, s0, d1, s1;
    tg_store_level_bytes(sg, s->n_alloc, &d0, &s0);
    tg_store_level_bytes(sg, rows, &d1, &s1);
    void *d = s->data[0], *sc = s->scale[0], *z = s->zero[0];
    if (!grow_block(&d, d0, d1)) return false;
    s->data[0] = d;
    if (!grow_block(&sc, s0 / 2, s1 / 2)) return false;
    s->scale[0] = sc;
    if (!grow_block(&z, s0 / 2, s1 / 2)) return false;
    s->zero[0] = z;
    s->n_alloc = rows;
    c->n_allocs += (d1 > d0) + 2 * (s1 > s0);
    c->bytes_store += (d1 - d0) + (s1 - s0);
    return true;
}

/* Allocates store s's chunks up to `chunks` (zeroed, counted as K/V storage; those it has stay where they are), or
 * grows the block of a store that doubles. False when the system refuses one (the chunks allocated before it stay). */
static bool store_grow(tg_kvcache *c, const tg_store_geom *sg, tg_store *s, int64_t chunks) {
    if (sg->doubles) return store_double(c, sg, s, chunks);
    for (int64_t k = s->n_alloc; k < chunks; k++) {
        const size_t db = tg_store_chunk_data_bytes(sg, k), sb = tg_store_chunk_scale_bytes(sg, k) / 2;
        /* scale and zero: two halves of the chunk's scale bytes */
        uint8_t *d = db ? calloc(1, db) : NULL;
        uint16_t *sc = sb ? calloc(1, sb) : NULL, *z = sb ? calloc(1, sb) : NULL;
        if ((db && !d) || (sb && (!sc || !z))) {
            free(d);
            free(sc);
            free(z);
            return false;
        }
        s->data[k] = d;
        s->scale[k] = sc;
        s->zero[k] = z;
        s->n_alloc = k + 1;
        c->n_allocs += (db > 0) + 2 * (sb > 0);
        c->bytes_store += db + 2 * sb;
    }
    return true;
}

/* Frees store s's chunks (a chunk left half allocated by a refusal too: the tables start zeroed). */
static void store_free(const tg_store_geom *sg, tg_store *s) {
    for (int64_t k = 0; s->data && s->scale && s->zero && k < sg->n_chunks; k++) {
        free(s->data[k]);
        free(s->scale[k]);
        free(s->zero[k]);
    }
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

/* tg_cache_params.max_memory as a number of bytes: < 0 when there is no limit (asked for, or the system does not
 * say how much memory it has). */
static double memory_limit(int64_t max_memory) {
    if (max_memory != 0) return (double)max_memory;
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (double)pages * (double)page : -1.0;
}

/* The memory check of tg_cache_params.max_memory: false (message with the numbers) when `need` bytes of K/V storage
 * (for `tokens` tokens of a cache that grows; 0: the whole cache) would not fit the limit. */
static bool fits_memory(size_t need, double limit, int64_t max_memory, int64_t tokens, tg_error *err) {
    if (limit < 0 || (double)need <= limit) return true;
    char a[32], b[32], held[48] = "";
    fmt_bytes((double)need, a, sizeof a);
    fmt_bytes(limit, b, sizeof b);
    if (tokens > 0) snprintf(held, sizeof held, " to hold %lld tokens", (long long)tokens);
    if (max_memory == 0)
        return tg_fail_code(err, TG_ERR_CACHE_MEMORY, "KV cache needs %s%s but the machine has %s of memory", a, held,
                            b);
    return tg_fail_code(err, TG_ERR_CACHE_MEMORY_LIMIT, "KV cache needs %s%s, more than the memory limit %s", a, held,
                        b);
}

/* Grows every K/V layer's stores of a lazy cache to hold n non-sink tokens (at most the context): false (message)
 * when that would pass the memory limit or the system refuses. */
static bool grow_to(tg_kvcache *c, int64_t n, tg_error *err) {
    const tg_cache_geom *g = &c->g;
    if (!g->lazy) return true;
    if (n > g->context) n = g->context;
    const int64_t ck = tg_store_chunks_for(g, &g->k, n), cv = tg_store_chunks_for(g, &g->v, n);
    bool short_of = false;
    for (int l = 0; l < g->n_layers; l++)
        if (c->kv_source[l] == l && (c->layers[l].k.n_alloc < ck || c->layers[l].v.n_alloc < cv)) short_of = true;
    if (!short_of) return true;
    const int64_t tk = tg_store_tokens_in(g, &g->k, ck), tv = tg_store_tokens_in(g, &g->v, cv);
    if (!fits_memory(tg_cache_geom_bytes_held(g, n), c->mem_limit, c->params.max_memory, tk < tv ? tk : tv, err))
        return false;
    for (int l = 0; l < g->n_layers; l++) {
        if (c->kv_source[l] != l) continue;
        if (!store_grow(c, &g->k, &c->layers[l].k, ck) || !store_grow(c, &g->v, &c->layers[l].v, cv))
            return tg_fail(err, "KV cache: out of memory growing to %lld tokens", (long long)n);
    }
    return true;
}

bool tg_kvcache_reserve(tg_kvcache *c, int64_t n_tokens, tg_error *err) {
    if (!c || !c->g.lazy || n_tokens <= 0) return true;
    int64_t held = 0;
    for (int l = 0; l < c->g.n_layers; l++)
        if (c->kv_source[l] == l && c->layers[l].n_appended > held) held = c->layers[l].n_appended;
    return grow_to(c, n_tokens > c->g.context - held ? c->g.context : held + n_tokens, err);
}

/* tg_kvcache_new with the store codecs forced where not NULL, and the slot_rope reference scheme when asked. */
static tg_kvcache *cache_new(const tg_cache_shape *shape, const tg_cache_params *params, const tg_store_codec *force_k,
                             const tg_store_codec *force_v, bool slot_rope, tg_error *err) {
    tg_cache_geom g;
    if (!tg_cache_geom_resolve(shape, params, force_k, force_v, &g, err)) return NULL;
    g.slot_rope = slot_rope && g.reposition;
    /* a bounded cache allocates everything now; one that grows, what it holds before its first token */
    const double limit = memory_limit(params->max_memory);
    if (!fits_memory(tg_cache_geom_bytes_held(&g, 0), limit, params->max_memory, 0, err)) return NULL;
    tg_kvcache *c = calloc(1, sizeof *c);
    if (!c) {
        tg_fail(err, "KV cache: out of memory");
        return NULL;
    }
    c->shape = *shape;
    c->params = *params;
    c->g = g;
    c->plan = tg_cache_geom_plan(&g);
    tg_cache_geom_policy(&g, params, c->policy, sizeof c->policy);
    c->simd = true;
    c->int_vnni = true;
    c->mem_limit = limit;
    c->owned = calloc(MAX_OWNED(g.n_layers), sizeof *c->owned);
    c->max_owned = c->owned ? MAX_OWNED(g.n_layers) : 0;
    bool ok = c->owned != NULL;
    if (ok) {
        c->n_allocs++;
        c->bytes_meta += c->max_owned * sizeof *c->owned;
    }
    const size_t L = (size_t)g.n_layers, H = (size_t)g.n_kv_heads, D = (size_t)g.head_dim;
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
            tg_layer_cache *lc = &c->layers[l];
            store_alloc(c, &g.k, &lc->k, &ok);
            store_alloc(c, &g.v, &lc->v, &ok);
            /* everything of a bounded cache; nothing yet of one that grows */
            if (ok) ok = store_grow(c, &g.k, &lc->k, tg_store_chunks_for(&g, &g.k, 0)) &&
                         store_grow(c, &g.v, &lc->v, tg_store_chunks_for(&g, &g.v, 0));
        }
    }
    if (ok) {
        c->scratch_k = cache_alloc(c, H * D * sizeof(float), false, &ok);
        /* one block: the memo's positions, the factors, then the angles */
        uint8_t *memo = cache_alloc(c, TG_ROPE_MEMO * sizeof(int64_t) + (D / 2 + 1) * sizeof(double) +
                                           TG_ROPE_MEMO * 2 * (D / 2 + 1) * sizeof(float), false, &ok);
        if (ok) {
            c->rope_memo_pos = (int64_t *)(void *)memo;
            c->rope_pow = (double *)(void *)(memo + TG_ROPE_MEMO * sizeof(int64_t));
            c->rope_memo = (float *)(void *)(memo + TG_ROPE_MEMO * sizeof(int64_t) + (D / 2 + 1) * sizeof(double));
            c->rope_cos = c->rope_memo;
            c->rope_sin = c->rope_memo + D / 2 + 1;
            for (int i = 0; i < TG_ROPE_MEMO; i++) c->rope_memo_pos[i] = -1;
            for (size_t i = 0; i < D / 2; i++)
                c->rope_pow[i] = pow((double)shape->rope_theta, -2.0 * (int)i / (int)D); /* tg_rope_angles' factor */
        }
        c->rope_pos = -1;
        if (shape->rope_inv_freq) {
            c->rope_inv_freq = cache_alloc(c, D / 2 * sizeof(double), false, &ok);
            if (ok) memcpy(c->rope_inv_freq, shape->rope_inv_freq, D / 2 * sizeof(double));
        }
        c->shape.rope_inv_freq = c->rope_inv_freq;
    }
    if (ok && g.reposition && !g.slot_rope && g.sink > 0) {
        /* the sinks' frequencies (tg_rope_angles' to the bit) and angles of one offset: bounded, sinks beyond
         * TG_SINK_ANGLE_ROWS get theirs computed per read */
        c->inv_freq = cache_alloc(c, D / 2 * sizeof(double), false, &ok);
        for (size_t i = 0; ok && i < D / 2; i++)
            c->inv_freq[i] = shape->rope_inv_freq ? shape->rope_inv_freq[i]
                                                  : pow((double)shape->rope_theta, -2.0 * (double)i / (double)D);
        c->sink_rows = g.sink < TG_SINK_ANGLE_ROWS ? g.sink : TG_SINK_ANGLE_ROWS;
        c->sink_cos = cache_alloc(c, (size_t)c->sink_rows * (D / 2) * sizeof(float), false, &ok);
        c->sink_sin = cache_alloc(c, (size_t)c->sink_rows * (D / 2) * sizeof(float), false, &ok);
    }
    c->sink_off = -1;
    if (ok && g.grouped && g.res_cap > 0 && tg_kv_traits_of(g.resid_precision)->seg_kind != TG_SEG_F32)
        c->group_f32 = cache_alloc(c, (size_t)g.group * H * D * sizeof(float), false, &ok);
    if (ok && (g.rot_k || g.rot_v)) { /* every layer's and kv-head's signs; the staging row of rotated values */
        c->rot_sign = cache_alloc(c, L * H * D * sizeof(float), false, &ok);
        for (size_t i = 0; ok && i < L * H; i++) tg_rot_signs(c->rot_sign + i * D, (int)(i / H), (int)(i % H), (int)D);
        if (g.rot_v) c->scratch_v = cache_alloc(c, H * D * sizeof(float), false, &ok);
    }
    if (ok && g.grouped && (g.k.tiled || g.v.tiled))
        c->tile_rows = cache_alloc(c, (size_t)g.group * D, false, &ok);
    if (ok && params->quantize_sinks && g.sink > 0 && (g.k.range || g.v.range)) {
        c->sink_codes = cache_alloc(c, (size_t)g.sink * D, false, &ok);
        c->sink_grid = cache_alloc(c, 2 * D * sizeof(uint16_t), false, &ok);
    }
    if (ok && g.slot_rope) {
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

tg_kvcache *tg_kvcache_new(const tg_cache_shape *shape, const tg_cache_params *params, tg_error *err) {
    return cache_new(shape, params, NULL, NULL, false, err);
}

tg_kvcache *tg_kvcache_new_slot_rope(const tg_cache_shape *shape, const tg_cache_params *params, tg_error *err) {
    return cache_new(shape, params, NULL, NULL, true, err);
}

tg_kvcache *tg_kvcache_new_with_codecs(const tg_cache_shape *shape, const tg_cache_params *params,
                                       const char *key_codec, const char *value_codec, tg_error *err) {
    const tg_store_codec *kc = tg_store_codec_named(key_codec), *vc = tg_store_codec_named(value_codec);
    if ((key_codec && !kc) || (value_codec && !vc)) {
        tg_fail(err, "KV cache: no store codec named %s", key_codec && !kc ? key_codec : value_codec);
        return NULL;
    }
    return cache_new(shape, params, kc, vc, false, err);
}

void tg_kvcache_free(tg_kvcache *c) {
    if (!c) return;
    for (int l = 0; c->layers && c->kv_source && l < c->g.n_layers; l++) {
        if (c->kv_source[l] != l) continue;
        store_free(&c->g.k, &c->layers[l].k);
        store_free(&c->g.v, &c->layers[l].v);
    }
    for (size_t i = 0; i < c->n_owned; i++) free(c->owned[i]);
    free(c->owned);
    tg_rope_table_free(c->rope_tab);
    free(c);
}

/* Zeroes what store s has allocated (its chunks, or its block, as they are: a cache that grew keeps them). */
static void store_clear(const tg_store_geom *sg, tg_store *s) {
    if (sg->doubles && s->n_alloc > 0) {
        size_t d, sc;
        tg_store_level_bytes(sg, s->n_alloc, &d, &sc);
        if (s->data[0]) memset(s->data[0], 0, d);
        if (s->scale[0]) memset(s->scale[0], 0, sc / 2);
        if (s->zero[0]) memset(s->zero[0], 0, sc / 2);
    }
    for (int64_t k = 0; !sg->doubles && k < s->n_alloc; k++) {
        if (s->data[k]) memset(s->data[k], 0, tg_store_chunk_data_bytes(sg, k));
        if (s->scale[k]) memset(s->scale[k], 0, tg_store_chunk_scale_bytes(sg, k) / 2);
        if (s->zero[k]) memset(s->zero[k], 0, tg_store_chunk_scale_bytes(sg, k) / 2);
    }
    if (s->resid) memset(s->resid, 0, sg->resid_bytes);
    if (s->sink) memset(s->sink, 0, sg->sink_bytes);
}

uint64_t tg_kvcache_serial(const tg_kvcache *c) { return c ? c->serial : 0; }

void tg_kvcache_reset(tg_kvcache *c) {
    if (!c) return;
    c->serial = (c->serial | UINT32_MAX) + 1;
    const tg_cache_geom *g = &c->g;
    for (int l = 0; l < g->n_layers; l++) {
        if (c->kv_source[l] != l) continue;
        tg_layer_cache *L = &c->layers[l];
        store_clear(&g->k, &L->k);
        store_clear(&g->v, &L->v);
        L->n_sink = L->n_appended = L->first = L->qend = 0;
    }
    /* the scratch blocks are rewritten before they are read; cleared anyway, as tg_kvcache_new left them */
    const size_t HD = (size_t)g->n_kv_heads * (size_t)g->head_dim;
    memset(c->scratch_k, 0, HD * sizeof(float));
    if (c->group_f32) memset(c->group_f32, 0, (size_t)g->group * HD * sizeof(float));
    if (c->sink_codes) memset(c->sink_codes, 0, (size_t)g->sink * (size_t)g->head_dim);
    if (c->sink_grid) memset(c->sink_grid, 0, 2 * (size_t)g->head_dim * sizeof(uint16_t));
    c->rope_pos = -1;
    for (int i = 0; i < TG_ROPE_MEMO; i++) c->rope_memo_pos[i] = -1;
}

/* ---- rows ----------------------------------------------------------------------------------------------------- */

void tg_kvcache_rope_at(tg_kvcache *c, int64_t pos) {
    if (c->rope_pos == pos) return;
    const int64_t half = c->g.head_dim / 2, slot = pos % TG_ROPE_MEMO;
    c->rope_cos = c->rope_memo + slot * 2 * (half + 1);
    c->rope_sin = c->rope_cos + half + 1;
    if (c->rope_memo_pos[slot] != pos) { /* (double)pos * theta^(-2i/D): tg_rope_angles' angles, bit for bit */
        tg_rope_angles_freqs(c->g.head_dim, pos, c->rope_inv_freq ? c->rope_inv_freq : c->rope_pow, c->rope_cos,
                             c->rope_sin);
        c->rope_memo_pos[slot] = pos;
    }
    c->rope_pos = pos;
}

void tg_kvcache_rotate_slot(const tg_kvcache *c, float *x, int64_t slot) {
    tg_rope_table_apply(c->rope_tab, x, 1, slot, c->shape.rope_style);
}

int64_t tg_kvcache_sink_offset(const tg_kvcache *c, const tg_layer_cache *L, int64_t pos) {
    /* the query's slot is pos while it is a sink, then n_sink + (pos - sink - first): pos - slot */
    return pos < c->g.sink ? 0 : c->g.sink - L->n_sink + L->first;
}

void tg_kvcache_sink_angles(tg_kvcache *c, int64_t offset) {
    if (c->sink_off == offset || !c->sink_cos) return;
    const int64_t half = c->g.head_dim / 2;
    for (int64_t j = 0; j < c->sink_rows; j++)
        for (int64_t i = 0; i < half; i++) {
            const double a = (double)(offset + j) * c->inv_freq[i]; /* exact for any position below 2^53 */
            c->sink_cos[j * half + i] = (float)cos(a);
            c->sink_sin[j * half + i] = (float)sin(a);
        }
    c->sink_off = offset;
}

void tg_kvcache_rotate_sink(const tg_kvcache *c, float *x, int64_t j, int64_t offset) {
    const int64_t D = c->g.head_dim, half = D / 2;
    if (offset == c->sink_off && j < c->sink_rows) {
        tg_rope_apply(x, 1, (int)D, c->sink_cos + j * half, c->sink_sin + j * half, c->shape.rope_style);
        return;
    }
    const bool split = c->shape.rope_style == TG_ROPE_HALF; /* pairs (i, i + D/2), else (2i, 2i + 1) */
    for (int64_t i = 0; i < half; i++) {
        const double ang = (double)(offset + j) * c->inv_freq[i];
        const float cs = (float)cos(ang), sn = (float)sin(ang);
        float *pa = split ? x + i : x + 2 * i, *pb = split ? x + i + half : x + 2 * i + 1;
        const float a = *pa, b = *pb;
        *pa = a * cs - b * sn;
        *pb = a * sn + b * cs;
    }
}

void tg_kvcache_load_row(const tg_kvcache *c, const tg_layer_cache *L, bool keys, bool is_sink, int64_t n, int h,
                         float *out) {
    tg_segment g;
    if (is_sink) tg_store_sink_segment(c, L, keys, h, n, n, &g);
    else tg_store_segment(c, L, keys, h, n, n, &g);
    tg_segment_widen(&g, 0, c->g.head_dim, out);
}

/* ---- append ---------------------------------------------------------------------------------------------------- */

static void store_sink(const tg_kvcache *c, const tg_store_geom *sg, tg_store *s, int64_t j, const float *x) {
    const int64_t HD = (int64_t)c->g.n_kv_heads * c->g.head_dim;
    tg_plain_put(sg->sink_precision, x, s->sink + (size_t)(j * HD) * tg_plain_elem_bytes(sg->sink_precision), HD);
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

/* A store's row of token n: head by head where its codec stores so (scratch: head_dim bytes), else all at once
 * (which reads the token's index from L, so before L->n_appended counts it). */
static void store_insert(const tg_kvcache *c, const tg_store_geom *sg, tg_store *s, const tg_layer_cache *L,
                         int64_t n, const float *x, uint8_t *scratch) {
    if (!sg->codec->insert_head) {
        sg->codec->insert(c, sg, s, L, x);
        return;
    }
    for (int h = 0; h < c->g.n_kv_heads; h++)
        sg->codec->insert_head(c, sg, s, n, h, x + (int64_t)h * c->g.head_dim, scratch);
}

/* Whether a store's rows are left to tg_kvcache_append_head: its codec codes them head by head (a copy is not
 * worth the hand-over), and what a head's store writes (token n's row, or n's whole KIVI group when a key grid
 * re-codes it) lies in the last share of the attention (tg_kvcache_attend_splits: shares of at least about
 * TG_ATTN_SPLIT_TOKENS tokens; half that here, for the share the sinks shorten), which reads it only after the
 * store (the forward pass runs both in one unit). */
static bool store_defers(const tg_kvcache *c, const tg_store_geom *sg) {
    const int64_t touched = sg->rewrites ? c->g.group : 1;
    return sg->codec->insert_head && sg->codec->insert_codes && touched <= TG_ATTN_SPLIT_TOKENS / 2;
}

int tg_kvcache_append_start(tg_kvcache *c, int layer, int64_t pos, const float *k, const float *v, bool defer) {
    if (!c || !k || !v || layer < 0 || layer >= c->g.n_layers || c->kv_source[layer] != layer) return -1;
    const tg_cache_geom *g = &c->g;
    tg_layer_cache *L = &c->layers[layer];
    if (g->lazy && L->n_appended < g->context) { /* the chunks this token needs (tg_kvcache_reserve may have them) */
        const int64_t n1 = L->n_appended + 1;
        if (L->k.n_alloc < tg_store_chunks_for(g, &g->k, n1) || L->v.n_alloc < tg_store_chunks_for(g, &g->v, n1)) {
            tg_error err;
            if (!grow_to(c, n1, &err)) return -1;
        }
    }
    const int64_t HD = (int64_t)g->n_kv_heads * g->head_dim;
    float *kr = c->scratch_k;
    memcpy(kr, k, (size_t)HD * sizeof(float));
    /* keys rotated once at their absolute position, except re-positioned sinks (rotated per query to where the query
     * sees them) and every key of the slot_rope reference (rotated to its slot when read) */
    if (!(g->slot_rope || (g->reposition && L->n_sink < g->sink))) {
        tg_kvcache_rope_at(c, pos);
        tg_rope_apply(kr, g->n_kv_heads, g->head_dim, c->rope_cos, c->rope_sin, c->shape.rope_style);
        for (int h = 0; g->rot_k && h < g->n_kv_heads; h++) /* after RoPE; keys kept pre-RoPE are rotated when read */
            tg_rot_apply(kr + (int64_t)h * g->head_dim, tg_kvcache_rot_sign(c, layer, h), g->head_dim);
    }
    if (g->rot_v) {
        memcpy(c->scratch_v, v, (size_t)HD * sizeof(float));
        for (int h = 0; h < g->n_kv_heads; h++)
            tg_rot_apply(c->scratch_v + (int64_t)h * g->head_dim, tg_kvcache_rot_sign(c, layer, h), g->head_dim);
        v = c->scratch_v;
    }

    c->serial++;
    if (L->n_sink < g->sink) {
        store_sink(c, &g->k, &L->k, L->n_sink, kr);
        store_sink(c, &g->v, &L->v, L->n_sink, v);
        L->n_sink++;
        if (L->n_sink == g->sink) { /* the sinks are complete: quantise them as one group (quantize_sinks) */
            quantize_sink_rows(c, &g->k, &L->k);
            quantize_sink_rows(c, &g->v, &L->v);
        }
        return 0;
    }
    const int64_t n = L->n_appended;
    if (!g->eviction->make_room(g, L, n)) return -1; /* full: tg_kvcache_has_room said so */
    if (g->grouped && g->res_cap > 0 && n - L->qend == g->res_cap) { /* the residual is full: its oldest group gets quantised */
        if (g->k.codec->flush) g->k.codec->flush(c, &g->k, &L->k, L->qend);
        if (g->v.codec->flush) g->v.codec->flush(c, &g->v, &L->v, L->qend);
        L->qend += g->group;
    }
    int deferred = 0;
    if (defer && store_defers(c, &g->k)) deferred |= TG_APPEND_KEYS;
    else store_insert(c, &g->k, &L->k, L, n, kr, c->tile_rows);
    if (defer && store_defers(c, &g->v)) deferred |= TG_APPEND_VALUES;
    else store_insert(c, &g->v, &L->v, L, n, v, c->tile_rows);
    L->n_appended++;
    return deferred;
}

void tg_kvcache_append_head(tg_kvcache *c, int layer, int h, int deferred, const float *v, uint8_t *scratch) {
    const tg_cache_geom *g = &c->g;
    tg_layer_cache *L = &c->layers[layer];
    const int64_t n = L->n_appended - 1, off = (int64_t)h * g->head_dim;
    if (g->rot_v) v = c->scratch_v; /* the values append_start rotated */
    if (deferred & TG_APPEND_KEYS) g->k.codec->insert_head(c, &g->k, &L->k, n, h, c->scratch_k + off, scratch);
    if (deferred & TG_APPEND_VALUES) g->v.codec->insert_head(c, &g->v, &L->v, n, h, v + off, scratch);
}

bool tg_kvcache_append(tg_kvcache *c, int layer, int64_t pos, const float *k, const float *v) {
    return tg_kvcache_append_start(c, layer, pos, k, v, false) >= 0;
}

/* ---- queries --------------------------------------------------------------------------------------------------- */

static const tg_layer_cache *first_kv_layer(const tg_kvcache *c) {
    for (int l = 0; l < c->g.n_layers; l++)
        if (c->kv_source[l] == l) return &c->layers[l];
    return NULL;
}

static int64_t layer_stored(const tg_layer_cache *L) { return L->n_sink + (L->n_appended - L->first); }

tg_cache_plan tg_kvcache_plan(const tg_kvcache *c) {
    tg_cache_plan none = {0};
    return c ? c->plan : none;
}

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
    if (!c || layer < 0 || layer >= c->g.n_layers) return 0;
    const tg_layer_cache *L = &c->layers[c->kv_source[layer]];
    const int64_t sink_off = tg_kvcache_sink_offset(c, L, query_pos);
    const int64_t H = c->g.n_kv_heads, D = c->g.head_dim;
    int64_t slot = 0;
    for (int64_t i = 0; i < L->n_sink + (L->n_appended - L->first); i++, slot++) {
        const bool sink = i < L->n_sink;
        const int64_t n = sink ? i : L->first + (i - L->n_sink);
        for (int h = 0; h < H; h++) {
            if (k_out) {
                float *kd = k_out + (slot * H + h) * D;
                tg_kvcache_load_row(c, L, true, sink, n, h, kd);
                if (c->g.slot_rope) tg_kvcache_rotate_slot(c, kd, slot);
                else if (c->g.reposition && sink) tg_kvcache_rotate_sink(c, kd, n, sink_off);
                else if (c->g.rot_k) tg_rot_inverse(kd, tg_kvcache_rot_sign(c, layer, h), (int)D); /* stored rotated */
            }
            if (v_out) {
                tg_kvcache_load_row(c, L, false, sink, n, h, v_out + (slot * H + h) * D);
                if (c->g.rot_v) tg_rot_inverse(v_out + (slot * H + h) * D, tg_kvcache_rot_sign(c, layer, h), (int)D);
            }
        }
        if (pos_out) pos_out[slot] = sink ? n : c->g.sink + n;
    }
    return slot;
}

/* Bytes that a cache of precision p (keys and values) with c's sinks, window and context allocates, holding the
 * `held` non-sink tokens c holds when it grows: the same geometry code that sized c, with only the precision
 * changed. */
static size_t bytes_at_precision(const tg_kvcache *c, tg_kv_precision p, int64_t held) {
    tg_cache_shape s = c->shape;
    s.context_length = c->g.context;
    tg_cache_params q = c->params;
    q.key_precision = q.value_precision = p;
    q.window = c->g.window;
    q.sink = c->g.bounded ? c->g.sink : -1;
    q.budget_bytes = 0;
    q.context = 0;
    tg_cache_geom g;
    tg_error err;
    return tg_cache_geom_resolve(&s, &q, NULL, NULL, &g, &err) ? tg_cache_geom_bytes_held(&g, held) : 0;
}

/* Bytes store s of one layer has allocated: its chunks' (or block's) data and scales. */
static void store_allocated(const tg_store_geom *sg, const tg_store *s, size_t *data, size_t *scales) {
    tg_store_level_bytes(sg, s->n_alloc, data, scales);
}

void tg_kvcache_report(const tg_kvcache *c, int64_t position, tg_cache_report *r) {
    if (!r) return;
    memset(r, 0, sizeof *r);
    if (!c) return;
    const tg_cache_geom *g = &c->g;
    r->position = position;
    r->stored = tg_kvcache_stored(c);
    r->capacity = g->bounded ? g->max_stored : g->context;
    r->n_layers = g->n_layers;
    r->n_kv_layers = g->n_kv_layers;
    const tg_store_geom *k = &g->k, *v = &g->v;
    /* sinks at the store's own precision count as its data, full-precision ones (KIVI) with the residual */
    const bool kp = k->sink_precision == k->precision, vp = v->sink_precision == v->precision;
    for (int l = 0; l < g->n_layers; l++) {
        if (c->kv_source[l] != l) continue;
        size_t kd, ks, vd, vs;
        store_allocated(k, &c->layers[l].k, &kd, &ks);
        store_allocated(v, &c->layers[l].v, &vd, &vs);
        r->bytes_k_data += kd + (kp ? k->sink_bytes : 0);
        r->bytes_v_data += vd + (vp ? v->sink_bytes : 0);
        r->bytes_scales += ks + vs;
        r->bytes_residual += k->resid_bytes + v->resid_bytes + (kp ? 0 : k->sink_bytes) + (vp ? 0 : v->sink_bytes);
    }
    r->bytes_total = r->bytes_k_data + r->bytes_v_data + r->bytes_scales + r->bytes_residual;
    const tg_layer_cache *L = first_kv_layer(c);
    r->allocated_for = r->capacity;
    if (L && g->lazy) {
        const int64_t ck = tg_store_tokens_in(g, k, L->k.n_alloc), cv = tg_store_tokens_in(g, v, L->v.n_alloc);
        r->allocated_for = ck < cv ? ck : cv;
        r->chunk_tokens = g->chunk;
    }
    if (L && (k->range || v->range)) {
        const int64_t held = L->n_appended - L->first, ring = L->qend > L->first ? L->n_appended - L->qend : held;
        r->quantized = g->res_cap > 0 ? held - ring : held;
    }
    /* a cache that grows against one holding the same tokens; one allocated up front against its whole capacity */
    const int64_t held = L && g->lazy ? L->n_appended - L->first : g->max_nonsink;
    r->bytes_if_bf16 = bytes_at_precision(c, TG_KV_BF16, held);
    r->bytes_if_fp32 = bytes_at_precision(c, TG_KV_FP32, held);
    if (r->stored > 0) { /* what a cache sized for exactly the held tokens allocates, by the same closed form */
        tg_cache_shape s = c->shape;
        s.context_length = g->context;
        tg_error err;
        r->bytes_in_use = tg_kvcache_bytes_for(&s, &c->params, r->stored, &err);
    }
    memcpy(r->policy, c->policy, sizeof r->policy);
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

void tg_kvcache_set_int_vnni(tg_kvcache *c, bool on) {
    if (c) c->int_vnni = on;
}
