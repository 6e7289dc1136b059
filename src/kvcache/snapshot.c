/* snapshot.c — the KV cache's part of a session snapshot: its policy as a list of resolved numbers, and its state
 * (counters and buffers exactly as stored), written and read through util/bytes.h. The only file of src/kvcache
 * that knows the snapshot format; docs/snapshot-format.md describes the bytes. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "kvcache/cache_internal.h"
#include "kvcache/codec.h"
#include "kvcache/snapshot.h"
#include "util/error.h"

/* ---- policy ------------------------------------------------------------------------------------------------- */

/* The resolved settings a restored cache must share with the saved one: one row each (its words and how its value
 * is shown). The list is part of the format: a new row needs a new format version. */
typedef enum { SHOW_INT, SHOW_PRECISION, SHOW_BOOL } show_kind;
typedef struct {
    const char *name;
    show_kind show;
} policy_row;

static const policy_row POLICY_ROWS[] = {
    {"layers", SHOW_INT},          {"layers holding K/V", SHOW_INT}, {"kv-heads", SHOW_INT},
    {"head dim", SHOW_INT},        {"key precision", SHOW_PRECISION}, {"value precision", SHOW_PRECISION},
    {"bounded (StreamingLLM)", SHOW_BOOL}, {"sink tokens", SHOW_INT}, {"window", SHOW_INT},
    {"context", SHOW_INT},         {"KIVI group size", SHOW_INT},   {"KIVI residual", SHOW_INT},
    {"residual precision", SHOW_PRECISION}, {"sink precision", SHOW_PRECISION}, {"re-positioned RoPE", SHOW_BOOL},
    {"slot RoPE reference", SHOW_BOOL}, {"quantised sinks", SHOW_BOOL}, {"key codec", SHOW_INT},
    {"value codec", SHOW_INT},     {"bytes per K/V layer", SHOW_INT}, {"keys rotated", SHOW_BOOL},
    {"values rotated", SHOW_BOOL}, {"key grids clipped", SHOW_BOOL}, {"value grids clipped", SHOW_BOOL},
};
enum { N_POLICY = sizeof POLICY_ROWS / sizeof POLICY_ROWS[0] };

/* A codec's number in the list: the index of its name in a fixed list (names are stable, table order may not be). */
static int64_t codec_number(const tg_store_codec *codec) {
    static const char *const names[] = {"plain", "kivi-grouped", "kivi-provisional", "kivi-whole", "fp32-copy"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (codec && strcmp(codec->name, names[i]) == 0) return (int64_t)i;
    return -1;
}

static void policy_values(const tg_kvcache *c, int64_t v[N_POLICY]) {
    const tg_cache_geom *g = &c->g;
    const int64_t vals[N_POLICY] = {
        g->n_layers,        g->n_kv_layers,          g->n_kv_heads,        g->head_dim,
        g->k.precision,     g->v.precision,          g->bounded,           g->sink,
        g->window,          g->bounded ? 0 : g->context, g->grouped ? g->group : 0, g->grouped ? g->residual : 0,
        g->resid_precision, g->sink_precision,       g->reposition,        g->slot_rope,
        c->params.quantize_sinks, codec_number(g->k.codec), codec_number(g->v.codec), (int64_t)g->bytes_layer,
        g->rot_k,           g->rot_v,                g->k.range && g->k.range->clip, g->v.range && g->v.range->clip,
    };
    memcpy(v, vals, sizeof vals);
}

void tg_kvcache_save_policy(const tg_kvcache *c, tg_wbytes *w) {
    int64_t v[N_POLICY];
    policy_values(c, v);
    tg_w_u32(w, N_POLICY);
    for (int i = 0; i < N_POLICY; i++) tg_w_i64(w, v[i]);
    for (int l = 0; l < c->g.n_layers; l++) tg_w_u32(w, (uint32_t)c->kv_source[l]);
}

static void show(const policy_row *row, int64_t x, char *buf, size_t size) {
    if (row->show == SHOW_PRECISION) snprintf(buf, size, "%s", tg_kv_precision_name((tg_kv_precision)x));
    else if (row->show == SHOW_BOOL) snprintf(buf, size, "%s", x == 1 ? "yes" : x == 0 ? "no" : "?");
    else snprintf(buf, size, "%" PRId64, x);
}

bool tg_kvcache_check_policy(const tg_kvcache *c, tg_rbytes *r, tg_error *err) {
    const uint32_t n = tg_r_u32(r);
    if (!r->ok || n != N_POLICY)
        return tg_fail(err, "the snapshot's cache policy has %" PRIu32 " settings, this version reads %d", n,
                       N_POLICY);
    int64_t mine[N_POLICY];
    policy_values(c, mine);
    for (int i = 0; i < N_POLICY; i++) {
        const int64_t x = tg_r_i64(r);
        if (!r->ok) return tg_fail(err, "the snapshot's cache policy is cut short");
        if (x != mine[i]) {
            char a[32], b[32];
            show(&POLICY_ROWS[i], x, a, sizeof a);
            show(&POLICY_ROWS[i], mine[i], b, sizeof b);
            return tg_fail(err, "the snapshot was made under another KV cache policy: %s: %s in the snapshot, %s here",
                           POLICY_ROWS[i].name, a, b);
        }
    }
    for (int l = 0; l < c->g.n_layers; l++) {
        const uint32_t src = tg_r_u32(r);
        if (!r->ok) return tg_fail(err, "the snapshot's cache policy is cut short");
        if (src != (uint32_t)c->kv_source[l])
            return tg_fail(err, "the snapshot was made under another layer sharing: layer %d reads layer %" PRIu32
                           "'s K/V in the snapshot, layer %d's here", l, src, c->kv_source[l]);
    }
    return true;
}

/* ---- state -------------------------------------------------------------------------------------------------- */

/* Calls fn on every buffer of store s as allocated (a store that doubles: its one block; else each chunk's data,
 * scales, zeros; then the residual ring and the sinks), with its bytes. */
typedef void (*buffer_fn)(void *ctx, uint8_t *p, size_t bytes);
static void each_buffer(const tg_store_geom *sg, const tg_store *s, buffer_fn fn, void *ctx) {
    if (sg->doubles) {
        if (s->n_alloc > 0) {
            size_t d, sc;
            tg_store_level_bytes(sg, s->n_alloc, &d, &sc);
            fn(ctx, s->data[0], d);
            fn(ctx, (uint8_t *)s->scale[0], sc / 2);
            fn(ctx, (uint8_t *)s->zero[0], sc / 2);
        }
    } else {
        for (int64_t k = 0; k < s->n_alloc; k++) {
            const size_t half = tg_store_chunk_scale_bytes(sg, k) / 2;
            fn(ctx, s->data[k], tg_store_chunk_data_bytes(sg, k));
            fn(ctx, (uint8_t *)s->scale[k], half);
            fn(ctx, (uint8_t *)s->zero[k], half);
        }
    }
    fn(ctx, s->resid, sg->resid_bytes);
    fn(ctx, s->sink, sg->sink_bytes);
}

static void write_buffer(void *ctx, uint8_t *p, size_t bytes) {
    if (p) tg_w_raw(ctx, p, bytes);
}

void tg_kvcache_save_state(const tg_kvcache *c, tg_wbytes *w) {
    const tg_cache_geom *g = &c->g;
    for (int l = 0; l < g->n_layers; l++) {
        if (c->kv_source[l] != l) continue;
        const tg_layer_cache *L = &c->layers[l];
        tg_w_i64(w, L->n_sink);
        tg_w_i64(w, L->n_appended);
        tg_w_i64(w, L->first);
        tg_w_i64(w, L->qend);
        tg_w_i64(w, L->k.n_alloc);
        tg_w_i64(w, L->v.n_alloc);
        each_buffer(&g->k, &L->k, write_buffer, w);
        each_buffer(&g->v, &L->v, write_buffer, w);
    }
}

static void read_buffer(void *ctx, uint8_t *p, size_t bytes) {
    if (p) tg_r_raw(ctx, p, bytes);
}

/* The counters of a layer are ones an append sequence can make: sinks within the policy's, the held non-sink tokens
 * within the capacity, qend <= n_appended, and sinks + non-sink tokens == the session's position. */
static bool counters_ok(const tg_cache_geom *g, const tg_layer_cache *L, int64_t position) {
    if (L->n_sink < 0 || L->n_sink > g->sink || L->n_appended < 0 || L->first < 0 || L->first > L->n_appended)
        return false;
    if (L->n_appended > 0 && L->n_sink != g->sink) return false;
    if (L->n_appended - L->first > g->max_nonsink) return false;
    if (L->qend < 0 || L->qend > L->n_appended) return false;
    if (!g->bounded && L->n_appended > g->context) return false;
    return position >= 0 && L->n_sink <= position && L->n_appended == position - L->n_sink;
}

bool tg_kvcache_load_state(tg_kvcache *c, tg_rbytes *r, int64_t position, tg_error *err) {
    const tg_cache_geom *g = &c->g;
    tg_kvcache_reset(c);
    for (int l = 0; l < g->n_layers; l++) {
        if (c->kv_source[l] != l) continue;
        tg_layer_cache *L = &c->layers[l];
        tg_layer_cache want = {0};
        want.n_sink = tg_r_i64(r);
        want.n_appended = tg_r_i64(r);
        want.first = tg_r_i64(r);
        want.qend = tg_r_i64(r);
        const int64_t ck = tg_r_i64(r), cv = tg_r_i64(r);
        if (!r->ok) goto short_read;
        if (!counters_ok(g, &want, position)) {
            tg_fail(err, "the snapshot's cache state is inconsistent (layer %d: %" PRId64 " sinks, tokens [%" PRId64
                    ", %" PRId64 ") at position %" PRId64 ")", l, want.n_sink, want.first, want.n_appended, position);
            goto fail;
        }
        /* allocation levels: what the held tokens need at least, what the policy allows at most */
        if (ck < tg_store_chunks_for(g, &g->k, want.n_appended) || cv < tg_store_chunks_for(g, &g->v, want.n_appended)
            || ck > tg_store_chunks_for(g, &g->k, g->max_nonsink) || cv > tg_store_chunks_for(g, &g->v, g->max_nonsink)) {
            tg_fail(err, "the snapshot's cache state is inconsistent (layer %d: allocation %" PRId64 " / %" PRId64
                    " for %" PRId64 " tokens)", l, ck, cv, want.n_appended);
            goto fail;
        }
        if (L->k.n_alloc < ck || L->v.n_alloc < cv) {
            const int64_t tk = tg_store_tokens_in(g, &g->k, ck), tv = tg_store_tokens_in(g, &g->v, cv);
            /* the fewest tokens that need exactly these levels (the saved cache grew both stores for one count) */
            if (!tg_kvcache_reserve(c, tk < tv ? tk : tv, err)) goto fail;
        }
        if (L->k.n_alloc != ck || L->v.n_alloc != cv) {
            tg_fail(err, "the snapshot's cache state is inconsistent (layer %d: allocation %" PRId64 " / %" PRId64
                    ", this cache %" PRId64 " / %" PRId64 ")", l, ck, cv, L->k.n_alloc, L->v.n_alloc);
            goto fail;
        }
        each_buffer(&g->k, &L->k, read_buffer, r);
        each_buffer(&g->v, &L->v, read_buffer, r);
        if (!r->ok) goto short_read;
        L->n_sink = want.n_sink;
        L->n_appended = want.n_appended;
        L->first = want.first;
        L->qend = want.qend;
    }
    return true;
short_read:
    tg_fail(err, "the snapshot's cache state is cut short");
fail:
    tg_kvcache_reset(c);
    return false;
}
