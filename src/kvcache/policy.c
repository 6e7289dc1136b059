/* policy.c — the cache policy: defaults, precision names, validation (each rejection with its tg_error_code, worded
 * in the cache's terms), resolution of a byte budget into a window, and the closed-form geometry (every capacity and
 * byte count the cache allocates). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "kvcache/codec.h"
#include "kvcache/eviction.h"
#include "kvcache/precision.h"
#include "util/checked.h"
#include "util/error.h"

/* Upper bounds that keep every product below comfortably checked. */
#define MAX_GROUP TG_KV_MAX_GROUP_SIZE
#define MAX_RESIDUAL TG_KV_MAX_RESIDUAL

tg_cache_params tg_cache_default_params(void) {
    tg_cache_params p = {
        .key_precision = TG_KV_FP32,
        .value_precision = TG_KV_FP32,
        .sink = -1,
        .window = 0,
        .group_size = TG_KV_GROUP_AUTO,
        .residual = TG_KV_RESIDUAL_AUTO,
        .rope_positions = TG_ROPE_POSITIONS_DEFAULT,
        .budget_bytes = 0,
        .context = 0,
        .quantize_sinks = false,
        .residual_precision = TG_KV_FP16,
        .max_memory = 0,
        .rotate = TG_KV_ROTATE_DEFAULT,
        .clip = TG_KV_CLIP_DEFAULT,
    };
    return p;
}

static bool precision_ok(tg_kv_precision p) { return tg_kv_traits_of(p) != NULL; }

/* ---- geometry ------------------------------------------------------------------------------------------------- */

/* The layout of one store: its codec (forced, or the table's choice) fills it in. */
static bool store_geom(const tg_cache_geom *g, tg_kv_precision p, bool keys, const tg_store_codec *force,
                       tg_store_geom *s) {
    memset(s, 0, sizeof *s);
    s->precision = p;
    s->per_channel = keys;
    s->codec = force ? force : tg_store_codec_for(g, p);
    return s->codec && s->codec->geometry(g, s);
}

/* A KIVI store's grids clipped (precision.h's clip_range) as the setting says. */
static void store_clip(tg_store_geom *s, tg_kv_clip clip, bool keys) {
    const tg_kv_traits *t = tg_kv_traits_of(s->precision);
    if (!s->range || !t) return;
    const bool on = clip == TG_KV_CLIP_ON || (clip == TG_KV_CLIP_DEFAULT && (keys ? t->clip_keys : t->clip_values));
    s->range = on ? &t->clip_range : &t->range;
}

static size_t store_total(const tg_store_geom *s, bool *ok) {
    size_t t = 0;
    if (!tg_add_size(t, s->data_bytes, &t) || !tg_add_size(t, s->scale_bytes, &t) ||
        !tg_add_size(t, s->resid_bytes, &t) || !tg_add_size(t, s->sink_bytes, &t))
        *ok = false;
    return t;
}

/* The group size of TG_KV_GROUP_AUTO for a cache that holds up to `length` tokens (its window, or its context when
 * unbounded): KIVI's 32 with an explicit residual (which must be a multiple of it); otherwise the largest of 32, 16,
 * 8 that is at most length / 8, so that the partly filled group and the block slack of eviction stay a small part of
 * a short cache (the per-channel key scales cost 4 * head_dim / G bytes a token). A precision with an automatic
 * residual (auto_resid: int2's one group) halves G (at least 8) while that fp16 group would be more than 1/16 of the
 * cache (G * 16 > length), so a cache of 512 tokens or more keeps G 32 with R 32 (better quality than G 16 with
 * R 16, fewer bytes, half the groups to attend: docs/kvcache.md), a shorter one G 16 with R 16 or less. */
static int auto_group(const tg_cache_params *p, bool auto_resid, int64_t length) {
    if (p->residual > 0) return TG_KV_AUTO_GROUP_MAX;
    int G = TG_KV_AUTO_GROUP_MAX;
    while (G > 8 && (int64_t)G * 8 > length) G /= 2;
    if (auto_resid && p->residual == TG_KV_RESIDUAL_AUTO && G > 8 && (int64_t)G * 16 > length) G /= 2;
    return G;
}

/* Tokens per chunk of an unbounded cache with this context: TG_ATTN_SPLIT_TOKENS (512: a share of the attention then
 * crosses at most one chunk end), doubled while the context holds more than 256 chunks (so the chunk tables stay
 * small). A segment ends at a chunk's end, and with it the kernels' prefetch lead and the query / weight pipelines of
 * the integer kernels, so a share that crosses several chunk ends pays for each; chunks of a share's size decode
 * faster at depth than smaller ones (docs/PERFORMANCE.md, Session 27). The price: an unbounded cache holds up to
 * 511 tokens more than it needs (a bounded one allocates everything up front anyway). */
static int64_t chunk_tokens(int64_t context) {
    int64_t c = TG_ATTN_SPLIT_TOKENS;
    while (c < context / 256 && c < ((int64_t)1 << 24)) c *= 2;
    return c;
}

/* log2 of v when v is a power of two, else -1 (divisions by it become shifts). */
static int log2_exact(int64_t v) {
    int l = 0;
    while (v > 1 && v % 2 == 0) v /= 2, l++;
    return v == 1 ? l : -1;
}

/* The chunk layout of a store (tg_store_geom's units): chunks of g->chunk tokens when the cache is lazy, else one
 * chunk of everything. */
static void store_chunks(const tg_cache_geom *g, tg_store_geom *s) {
    (void)g;
    if (s->doubles) {
        s->chunk_units = 1;
        s->n_chunks = s->n_units > 0 ? 1 : 0;
        return;
    }
    if (!s->grows) {
        s->chunk_units = 1;
        s->n_chunks = s->data_bytes > 0 || s->scale_bytes > 0 ? 1 : 0;
        return;
    }
    const int64_t per = g->lazy ? (g->chunk + s->unit_tokens - 1) / s->unit_tokens : s->n_units;
    s->chunk_units = per > 0 ? per : 1;
    s->chunk_units_log2 = log2_exact(s->chunk_units);
    s->n_chunks = (s->n_units + s->chunk_units - 1) / s->chunk_units;
}

int64_t tg_store_chunk_units(const tg_store_geom *sg, int64_t k) {
    if (!sg->grows) return 1;
    const int64_t rest = sg->n_units - k * sg->chunk_units;
    return rest < sg->chunk_units ? rest : sg->chunk_units;
}

size_t tg_store_chunk_data_bytes(const tg_store_geom *sg, int64_t k) {
    return sg->grows ? (size_t)tg_store_chunk_units(sg, k) * sg->unit_data_bytes : sg->data_bytes;
}

size_t tg_store_chunk_scale_bytes(const tg_store_geom *sg, int64_t k) {
    return sg->grows ? (size_t)tg_store_chunk_units(sg, k) * sg->unit_scale_bytes : sg->scale_bytes;
}

int64_t tg_store_tokens_in(const tg_cache_geom *g, const tg_store_geom *sg, int64_t chunks) {
    if (sg->doubles) return !g->lazy || chunks >= sg->n_units ? g->max_nonsink : chunks;
    if (!g->lazy || chunks >= sg->n_chunks) return g->max_nonsink;
    const int64_t t = sg->unit_lag + chunks * sg->chunk_units * sg->unit_tokens;
    return t < g->max_nonsink ? t : g->max_nonsink;
}

int64_t tg_store_chunks_for(const tg_cache_geom *g, const tg_store_geom *sg, int64_t n) {
    if (sg->doubles) { /* rows: the first chunk's worth, doubled until n fit, at most the capacity */
        if (!g->lazy) return sg->n_units;
        if (n <= 0) return 0;
        int64_t rows = g->chunk;
        while (rows < n && rows < sg->n_units) rows *= 2;
        return rows < sg->n_units ? rows : sg->n_units;
    }
    if (!g->lazy) return sg->n_chunks;
    int64_t units = n > sg->unit_lag ? (n - sg->unit_lag + sg->unit_tokens - 1) / sg->unit_tokens : 0;
    if (units > sg->n_units) units = sg->n_units;
    return (units + sg->chunk_units - 1) / sg->chunk_units;
}

void tg_store_level_bytes(const tg_store_geom *sg, int64_t level, size_t *data, size_t *scales) {
    *data = *scales = 0;
    if (sg->doubles) {
        *data = (size_t)level * sg->unit_data_bytes;
        *scales = level > 0 ? (size_t)level * sg->unit_scale_bytes + sg->fixed_scale_bytes : 0;
        return;
    }
    for (int64_t k = 0; k < level; k++) {
        *data += tg_store_chunk_data_bytes(sg, k);
        *scales += tg_store_chunk_scale_bytes(sg, k);
    }
}

/* Bytes of one layer's store sg at allocation level `chunks`. */
static size_t store_bytes_chunks(const tg_store_geom *sg, int64_t chunks) {
    size_t d, s;
    tg_store_level_bytes(sg, chunks, &d, &s);
    return sg->resid_bytes + sg->sink_bytes + d + s;
}

size_t tg_cache_geom_bytes_held(const tg_cache_geom *g, int64_t n) {
    if (!g->lazy) return tg_cache_geom_bytes(g);
    const size_t layer = store_bytes_chunks(&g->k, tg_store_chunks_for(g, &g->k, n)) +
                         store_bytes_chunks(&g->v, tg_store_chunks_for(g, &g->v, n));
    return layer * (size_t)g->n_kv_layers; /* at most tg_cache_geom_bytes(g), which did not overflow */
}

/* Capacities for a given (already validated) window; window 0 = unbounded with g->context tokens: the eviction
 * policy sizes the history, the store codecs their buffers. */
static bool geom_for_window(tg_cache_geom *g, const tg_cache_params *p, int64_t window) {
    const tg_kv_traits *kt = tg_kv_traits_of(p->key_precision), *vt = tg_kv_traits_of(p->value_precision);
    const bool any_kivi = kt->is_integer || vt->is_integer;
    g->eviction = tg_eviction_for(p, window);
    g->bounded = window > 0;
    g->window = window;
    g->reposition = g->bounded && p->rope_positions != TG_ROPE_POSITIONS_ORIGINAL;
    /* a precision that keeps an automatic residual (int2) also shapes the automatic group */
    const int auto_resid = kt->auto_residual_groups > vt->auto_residual_groups ? kt->auto_residual_groups
                                                                                : vt->auto_residual_groups;
    g->grouped = any_kivi && p->group_size != 0;
    g->group = !g->grouped           ? 0
               : p->group_size > 0 ? p->group_size
                                   : auto_group(p, auto_resid > 0, window > 0 ? window : g->context);
    /* TG_KV_RESIDUAL_AUTO: the precisions' auto_residual_groups (none for int8 / int4: their targets hold without
     * one; one group for int2) */
    g->residual_asked = p->residual != TG_KV_RESIDUAL_AUTO ? p->residual : (int64_t)auto_resid * g->group;
    g->group_log2 = g->grouped ? log2_exact(g->group) : -1;
    g->block = g->grouped ? g->group : 1;
    g->residual = g->res_cap = g->n_units = 0;
    g->resid_precision = p->residual_precision;
    g->resid_elem = tg_kv_traits_of(p->residual_precision)->unit_bytes;
    g->sink_precision = p->quantize_sinks ? TG_KV_FP32 : p->residual_precision;
    if (!g->eviction || !g->eviction->capacities(g, p)) return false;
    g->max_stored = g->sink + g->max_nonsink;
    bool ok = store_geom(g, p->key_precision, true, g->force_k, &g->k) &&
              store_geom(g, p->value_precision, false, g->force_v, &g->v);
    if (ok) {
        store_clip(&g->k, p->clip, true);
        store_clip(&g->v, p->clip, false);
    }
    size_t kb = store_total(&g->k, &ok), vb = store_total(&g->v, &ok);
    if (!ok || !tg_add_size(kb, vb, &g->bytes_layer)) return false;
    /* an unbounded cache of unit-made stores grows in chunks as tokens arrive */
    g->lazy = !g->bounded && (g->k.grows || g->k.doubles) && (g->v.grows || g->v.doubles);
    g->chunk = g->lazy ? chunk_tokens(g->context) : 0;
    store_chunks(g, &g->k);
    store_chunks(g, &g->v);
    g->rot_k = p->rotate == TG_KV_ROTATE_ON && g->k.range != NULL;
    g->rot_v = (p->rotate == TG_KV_ROTATE_ON || p->rotate == TG_KV_ROTATE_VALUES) && g->v.range != NULL;
    size_t all;
    return tg_mul_size(g->bytes_layer, (size_t)g->n_kv_layers, &all);
}

size_t tg_cache_geom_bytes(const tg_cache_geom *g) { return g->bytes_layer * (size_t)g->n_kv_layers; }

static bool shape_ok(const tg_cache_shape *s, int *n_kv_layers, tg_error *err) {
    if (!s) return tg_fail(err, "KV cache: no shape");
    if (s->n_layers <= 0 || s->n_heads <= 0 || s->n_kv_heads <= 0 || s->head_dim <= 0)
        return tg_fail(err, "KV cache: invalid shape (%d layers, %d heads, %d kv-heads, head_dim %d)", s->n_layers,
                       s->n_heads, s->n_kv_heads, s->head_dim);
    if (s->n_heads % s->n_kv_heads != 0)
        return tg_fail(err, "KV cache: %d query heads are not a multiple of %d kv-heads", s->n_heads, s->n_kv_heads);
    if (s->head_dim % 2 != 0) return tg_fail(err, "KV cache: head_dim %d is odd (RoPE needs pairs)", s->head_dim);
    if (s->context_length <= 0) return tg_fail(err, "KV cache: context length %" PRId64 " <= 0", s->context_length);
    if (s->head_dim > 65536 || s->n_heads > 65536) return tg_fail(err, "KV cache: head_dim or head count too large");
    int n = 0;
    for (int l = 0; l < s->n_layers; l++) {
        int src = s->kv_source ? s->kv_source[l] : l;
        if (src < 0 || src >= s->n_layers || (s->kv_source && s->kv_source[src] != src))
            return tg_fail(err, "KV cache: layer %d reads K/V of layer %d, which holds none", l, src);
        if (s->layer_window && s->layer_window[l] < 0)
            return tg_fail(err, "KV cache: layer %d has a negative sliding window", l);
        n += src == l;
    }
    *n_kv_layers = n;
    return true;
}

bool tg_cache_geom_resolve(const tg_cache_shape *shape, const tg_cache_params *p, const tg_store_codec *force_k,
                           const tg_store_codec *force_v, tg_cache_geom *g, tg_error *err) {
    memset(g, 0, sizeof *g);
    g->force_k = force_k;
    g->force_v = force_v;
    if (!p) return tg_fail(err, "KV cache: no parameters");
    if (!shape_ok(shape, &g->n_kv_layers, err)) return false;
    if (!precision_ok(p->key_precision))
        return tg_fail_code(err, TG_ERR_CACHE_KEY_PRECISION, "KV cache: unknown key precision %d",
                            (int)p->key_precision);
    if (!precision_ok(p->value_precision))
        return tg_fail_code(err, TG_ERR_CACHE_VALUE_PRECISION, "KV cache: unknown value precision %d",
                            (int)p->value_precision);
    if ((int)p->rope_positions < TG_ROPE_POSITIONS_DEFAULT || (int)p->rope_positions > TG_ROPE_POSITIONS_ORIGINAL)
        return tg_fail(err, "KV cache: unknown RoPE positions %d", (int)p->rope_positions);
    if ((int)p->rotate < TG_KV_ROTATE_DEFAULT || (int)p->rotate > TG_KV_ROTATE_VALUES)
        return tg_fail(err, "KV cache: unknown rotation setting %d", (int)p->rotate);
    if ((int)p->clip < TG_KV_CLIP_DEFAULT || (int)p->clip > TG_KV_CLIP_OFF)
        return tg_fail(err, "KV cache: unknown clip setting %d", (int)p->clip);
    if (p->sink < -1)
        return tg_fail_code(err, TG_ERR_CACHE_SINK, "KV cache: sink of %" PRId64 " tokens: must be >= 0", p->sink);
    if (p->window < 0)
        return tg_fail_code(err, TG_ERR_CACHE_WINDOW, "KV cache: window of %" PRId64 " tokens: must be >= 0",
                            p->window);
    if (p->budget_bytes < 0)
        return tg_fail_code(err, TG_ERR_CACHE_BUDGET, "KV cache: budget of %" PRId64 " bytes: must be > 0",
                            p->budget_bytes);
    if (p->budget_bytes > 0 && p->window > 0)
        return tg_fail_code(err, TG_ERR_CACHE_BUDGET_AND_WINDOW,
                            "KV cache: a byte budget and a window are exclusive: the budget chooses the window");
    if (p->sink > 0 && p->window == 0 && p->budget_bytes == 0)
        return tg_fail_code(err, TG_ERR_CACHE_SINK_WITHOUT_WINDOW,
                            "KV cache: %" PRId64 " sink tokens need a window (or a byte budget): without a window "
                            "nothing is evicted", p->sink);
    if (p->group_size < TG_KV_GROUP_AUTO || p->group_size > MAX_GROUP)
        return tg_fail_code(err, TG_ERR_CACHE_GROUP_SIZE, "KV cache: KIVI group size %d: must be in 0..%d",
                            p->group_size, MAX_GROUP);
    if (p->residual < TG_KV_RESIDUAL_AUTO || p->residual > MAX_RESIDUAL)
        return tg_fail_code(err, TG_ERR_CACHE_RESIDUAL, "KV cache: KIVI residual of %d tokens: must be in 0..%d",
                            p->residual, MAX_RESIDUAL);
    if (!precision_ok(p->residual_precision) || tg_kv_traits_of(p->residual_precision)->is_integer)
        return tg_fail_code(err, TG_ERR_CACHE_RESIDUAL_PRECISION,
                            "KV cache: KIVI residual precision %s: must be fp32, fp16 or bf16",
                            tg_kv_precision_name(p->residual_precision));
    const int rgroup = p->group_size == TG_KV_GROUP_AUTO ? TG_KV_AUTO_GROUP_MAX : p->group_size;
    if (rgroup > 0 && p->residual > 0 && p->residual % rgroup != 0)
        return tg_fail_code(err, TG_ERR_CACHE_RESIDUAL_NOT_MULTIPLE,
                            "KV cache: KIVI residual of %d tokens is not a multiple of the group size %d", p->residual,
                            rgroup);

    g->n_layers = shape->n_layers;
    g->n_heads = shape->n_heads;
    g->n_kv_heads = shape->n_kv_heads;
    g->head_dim = shape->head_dim;
    g->context = shape->context_length;

    if (p->budget_bytes == 0) {
        if (!geom_for_window(g, p, p->window)) {
            if (p->window > 0)
                return tg_fail_code(err, TG_ERR_CACHE_WINDOW_TOO_LARGE,
                                    "KV cache: a window of %" PRId64 " tokens would not fit in memory", p->window);
            return tg_fail(err, "KV cache: context of %" PRId64 " tokens would not fit in memory", g->context);
        }
        return true;
    }
    /* the largest window in [1, context] whose cache fits the budget (bytes grow with the window) */
    const size_t budget = (size_t)p->budget_bytes;
    if (!geom_for_window(g, p, 1) || tg_cache_geom_bytes(g) > budget) {
        size_t need = geom_for_window(g, p, 1) ? tg_cache_geom_bytes(g) : SIZE_MAX;
        return tg_fail_code(err, TG_ERR_CACHE_BUDGET_TOO_SMALL,
                            "KV cache: a budget of %" PRId64 " bytes is too small; even %" PRId64 " sink tokens and a "
                            "window of 1 need %zu bytes", p->budget_bytes, g->sink, need);
    }
    int64_t lo = 1, hi = g->context;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo + 1) / 2;
        if (geom_for_window(g, p, mid) && tg_cache_geom_bytes(g) <= budget) lo = mid;
        else hi = mid - 1;
    }
    geom_for_window(g, p, lo);
    g->window_from_budget = true;
    return true;
}

tg_cache_plan tg_cache_geom_plan(const tg_cache_geom *g) {
    tg_cache_plan plan = {.bounded = g->bounded};
    /* evictions and re-coded rows (a group flush, a re-fitted grid: stores with scales) change what is seen */
    plan.token_by_token = g->bounded || g->k.rewrites || g->v.rewrites;
    plan.max_chunk = g->bounded && g->n_kv_layers < g->n_layers ? 1 : 0;
    return plan;
}

/* ---- the banner's policy line ------------------------------------------------------------------------------- */

void tg_cache_geom_policy(const tg_cache_geom *g, const tg_cache_params *p, char *buf, size_t size) {
    const bool kq = g->k.range != NULL, vq = g->v.range != NULL;
    int n = snprintf(buf, size, "K %s / V %s", tg_kv_precision_name(g->k.precision),
                     tg_kv_precision_name(g->v.precision));
    size_t used = n > 0 ? (size_t)n : 0;
#define APPEND(...)                                                                                                   \
    do {                                                                                                              \
        if (used < size) {                                                                                            \
            int m_ = snprintf(buf + used, size - used, __VA_ARGS__);                                                  \
            if (m_ > 0) used += (size_t)m_;                                                                           \
        }                                                                                                             \
    } while (0)
    if (kq || vq) {
        if (g->grouped) {
            if (g->res_cap == 0) {
                APPEND(" (KIVI, group %d, no residual: the newest group's keys on provisional scales)", g->group);
            } else {
                APPEND(" (KIVI, group %d, residual %" PRId64, g->group, g->residual);
                if (g->bounded && g->residual < g->residual_asked)
                    APPEND(" of %" PRId64 ", capped by the window", g->residual_asked);
                if (g->resid_precision != TG_KV_FP32) APPEND(" at %s", tg_kv_precision_name(g->resid_precision));
                APPEND(")");
            }
        } else {
            APPEND(" (KIVI, whole-history key scales re-quantised each step)");
        }
        const bool ck = kq && g->k.range->clip, cv = vq && g->v.range->clip;
        if (ck || cv) APPEND(", %s grids clipped", ck && cv ? "K and V" : ck ? "K" : "V");
        if (g->rot_k || g->rot_v)
            APPEND(", %s rotated (Hadamard %d)", g->rot_k && g->rot_v ? "K and V" : g->rot_k ? "K" : "V",
                   g->head_dim & -g->head_dim);
    }
    if (!g->bounded) {
        APPEND(", unbounded (context %" PRId64 ")", g->context);
        if (p->rope_positions == TG_ROPE_POSITIONS_REPOSITION) APPEND("; re-positioning has no effect without a window");
    } else {
        APPEND(", StreamingLLM sink %" PRId64 " + window %" PRId64, g->sink, g->window);
        if (g->window_from_budget) APPEND(" (largest within --kv-budget %" PRId64 " B)", p->budget_bytes);
        APPEND(" (%s RoPE; stored <= %" PRId64, g->reposition ? "re-positioned" : "vanilla", g->max_stored);
        if (g->grouped) APPEND(" with group slack");
        APPEND(")");
        if ((kq || vq) && g->sink > 0)
            APPEND(p->quantize_sinks ? ", sinks quantised" : ", sinks %s", tg_kv_precision_name(g->sink_precision));
    }
#undef APPEND
}

/* ---- the cache table ------------------------------------------------------------------------------------------ */

size_t tg_kvcache_bytes_for(const tg_cache_shape *shape, const tg_cache_params *params, int64_t n_tokens,
                            tg_error *err) {
    if (!shape || n_tokens <= 0) {
        tg_fail(err, "KV cache table: %" PRId64 " tokens", n_tokens);
        return 0;
    }
    tg_cache_geom g;
    if (!tg_cache_geom_resolve(shape, params, NULL, NULL, &g, err)) return 0;
    /* an unbounded cache sized for exactly n_tokens (all a streaming cache needs before its first eviction) */
    tg_cache_shape s = *shape;
    s.context_length = n_tokens;
    tg_cache_params u = *params;
    u.window = 0;
    u.budget_bytes = 0;
    u.sink = -1;
    tg_cache_geom gu;
    if (!tg_cache_geom_resolve(&s, &u, NULL, NULL, &gu, err)) return 0;
    size_t unbounded = tg_cache_geom_bytes(&gu);
    if (!g.bounded) return unbounded;
    size_t bounded = tg_cache_geom_bytes(&g);
    return unbounded < bounded ? unbounded : bounded;
}
