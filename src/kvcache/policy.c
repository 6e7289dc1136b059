/* policy.c — the cache policy: defaults, precision names, validation with messages naming the flag, resolution of a
 * byte budget into a window, and the closed-form geometry (every capacity and byte count the cache allocates). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "kvcache/cache_internal.h"
#include "util/checked.h"
#include "util/error.h"

/* Upper bounds that keep every product below comfortably checked. */
#define MAX_GROUP 4096
#define MAX_RESIDUAL (1 << 20)
#define DEFAULT_SINK 4

tg_cache_params tg_cache_default_params(void) {
    tg_cache_params p = {
        .key_precision = TG_KV_FP32,
        .value_precision = TG_KV_FP32,
        .sink = -1,
        .window = 0,
        .group_size = 32,
        .residual = 128,
        .reposition = false,
        .budget_bytes = 0,
        .context = 0,
        .quantize_sinks = false,
        .residual_precision = TG_KV_FP32,
        .max_memory = 0,
    };
    return p;
}

static const char *const precision_names[] = {"fp32", "fp16", "bf16", "int8", "int4", "int2"};
#define N_PRECISIONS ((int)(sizeof precision_names / sizeof precision_names[0]))

bool tg_kv_precision_parse(const char *name, tg_kv_precision *out) {
    if (!name) return false;
    for (int i = 0; i < N_PRECISIONS; i++)
        if (strcmp(name, precision_names[i]) == 0) {
            if (out) *out = (tg_kv_precision)i;
            return true;
        }
    return false;
}

const char *tg_kv_precision_name(tg_kv_precision p) {
    return (int)p >= 0 && (int)p < N_PRECISIONS ? precision_names[p] : "unknown";
}

static bool precision_ok(tg_kv_precision p) { return (int)p >= 0 && (int)p < N_PRECISIONS; }

/* ---- geometry ------------------------------------------------------------------------------------------------- */

/* Checked a * b * c * d; sets *ok = false on overflow. */
static size_t mul4(bool *ok, size_t a, size_t b, size_t c, size_t d) {
    size_t r;
    if (!tg_mul_size(a, b, &r) || !tg_mul_size(r, c, &r) || !tg_mul_size(r, d, &r)) {
        *ok = false;
        return 0;
    }
    return r;
}

static bool store_geom(const tg_cache_geom *g, tg_kv_precision p, bool keys, tg_store_geom *s) {
    bool ok = true;
    const size_t H = (size_t)g->n_kv_heads, D = (size_t)g->head_dim;
    memset(s, 0, sizeof *s);
    s->precision = p;
    s->range = tg_kivi_range_of(p);
    s->per_channel = keys;
    if (!s->range) {
        s->kind = TG_STORE_PLAIN;
        s->elem_bytes = p == TG_KV_FP32 ? 4 : 2;
        s->row_bytes = D * s->elem_bytes;
        s->data_bytes = mul4(&ok, (size_t)g->row_cap, H, s->row_bytes, 1);
        s->sink_bytes = mul4(&ok, (size_t)g->sink, H, s->row_bytes, 1);
        return ok;
    }
    s->row_bytes = tg_kivi_row_bytes(s->range, (int64_t)D);
    s->sink_bytes = mul4(&ok, (size_t)g->sink, H, D, sizeof(float));
    if (g->grouped) {
        s->kind = TG_STORE_GROUPED;
        const size_t G = (size_t)g->group, U = (size_t)g->n_units;
        s->data_bytes = mul4(&ok, U, H, G, s->row_bytes);
        s->scale_bytes = mul4(&ok, U, H, keys ? D : G, 2 * sizeof(uint16_t));
        s->resid_bytes = mul4(&ok, (size_t)g->res_cap, H, D, g->resid_elem);
    } else {
        s->kind = TG_STORE_WHOLE;
        s->data_bytes = mul4(&ok, (size_t)g->row_cap, H, s->row_bytes, 1);
        s->scale_bytes = keys ? mul4(&ok, H, D, 2 * sizeof(uint16_t), 1)
                              : mul4(&ok, (size_t)g->row_cap, H, 2 * sizeof(uint16_t), 1);
    }
    return ok;
}

static size_t store_total(const tg_store_geom *s, bool *ok) {
    size_t t = 0;
    if (!tg_add_size(t, s->data_bytes, &t) || !tg_add_size(t, s->scale_bytes, &t) ||
        !tg_add_size(t, s->resid_bytes, &t) || !tg_add_size(t, s->sink_bytes, &t))
        *ok = false;
    return t;
}

/* Capacities for a given (already validated) window; window 0 = unbounded with g->context tokens. */
static bool geom_for_window(tg_cache_geom *g, const tg_cache_params *p, int64_t window) {
    const bool any_kivi = tg_kivi_is_quantized(p->key_precision) || tg_kivi_is_quantized(p->value_precision);
    g->bounded = window > 0;
    g->window = window;
    g->sink = g->bounded ? (p->sink < 0 ? DEFAULT_SINK : p->sink) : 0;
    g->reposition = p->reposition && g->bounded;
    g->grouped = any_kivi && p->group_size > 0;
    g->group = g->grouped ? p->group_size : 0;
    g->block = g->grouped ? g->group : 1;
    g->residual = g->res_cap = g->n_units = 0;
    g->resid_precision = p->residual_precision;
    g->resid_elem = p->residual_precision == TG_KV_FP32 ? sizeof(float) : sizeof(uint16_t);
    if (g->bounded && window > INT64_MAX / 4 - 2 * (int64_t)MAX_GROUP) return false;
    if (g->grouped) {
        const int64_t G = g->group;
        if (g->bounded) {
            const int64_t W = window;
            const int64_t held = W + G - 1; /* most non-sink tokens held after an append */
            g->residual = p->residual < G * (held / G) ? p->residual : G * (held / G);
            g->res_cap = g->residual > G ? g->residual : G;
            const int64_t units = (W + 2 * G - 2 - g->res_cap) / G;
            g->n_units = units > 0 ? units : 0;
            g->row_cap = held;
            g->max_nonsink = held;
        } else {
            const int64_t T = g->context;
            const int64_t C = p->residual > G ? p->residual : G;
            g->residual = p->residual;
            g->res_cap = C < T ? C : T;
            g->n_units = T > C ? (T - 1 - C + G) / G : 0;
            g->row_cap = T;
            g->max_nonsink = T;
        }
    } else {
        g->row_cap = g->bounded ? window : g->context;
        g->max_nonsink = g->row_cap;
    }
    g->max_stored = g->sink + g->max_nonsink;
    bool ok = store_geom(g, p->key_precision, true, &g->k) && store_geom(g, p->value_precision, false, &g->v);
    size_t kb = store_total(&g->k, &ok), vb = store_total(&g->v, &ok);
    if (!ok || !tg_add_size(kb, vb, &g->bytes_layer)) return false;
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

bool tg_cache_geom_resolve(const tg_cache_shape *shape, const tg_cache_params *p, tg_cache_geom *g, tg_error *err) {
    memset(g, 0, sizeof *g);
    if (!p) return tg_fail(err, "KV cache: no parameters");
    if (!shape_ok(shape, &g->n_kv_layers, err)) return false;
    if (!precision_ok(p->key_precision))
        return tg_fail(err, "--kv-quantize-keys: unknown precision %d", (int)p->key_precision);
    if (!precision_ok(p->value_precision))
        return tg_fail(err, "--kv-quantize-values: unknown precision %d", (int)p->value_precision);
    if (p->sink < -1) return tg_fail(err, "--streaming-llm-sink %" PRId64 ": must be >= 0", p->sink);
    if (p->window < 0) return tg_fail(err, "--streaming-llm-window %" PRId64 ": must be >= 0", p->window);
    if (p->budget_bytes < 0) return tg_fail(err, "--kv-budget %" PRId64 ": must be > 0", p->budget_bytes);
    if (p->budget_bytes > 0 && p->window > 0)
        return tg_fail(err, "--kv-budget and --streaming-llm-window are exclusive: the budget chooses the window");
    if (p->sink > 0 && p->window == 0 && p->budget_bytes == 0)
        return tg_fail(err, "--streaming-llm-sink %" PRId64 " needs --streaming-llm-window (or --kv-budget): without "
                            "a window nothing is evicted", p->sink);
    if (p->group_size < 0 || p->group_size > MAX_GROUP)
        return tg_fail(err, "--kv-group-size %d: must be in 0..%d", p->group_size, MAX_GROUP);
    if (p->residual < 0 || p->residual > MAX_RESIDUAL)
        return tg_fail(err, "--kv-residual %d: must be in 0..%d", p->residual, MAX_RESIDUAL);
    if (p->residual_precision != TG_KV_FP32 && p->residual_precision != TG_KV_FP16 &&
        p->residual_precision != TG_KV_BF16)
        return tg_fail(err, "--kv-residual-precision %s: must be fp32, fp16 or bf16",
                       tg_kv_precision_name(p->residual_precision));
    if (p->group_size > 0 && p->residual % p->group_size != 0)
        return tg_fail(err, "--kv-residual %d is not a multiple of --kv-group-size %d", p->residual, p->group_size);

    g->n_layers = shape->n_layers;
    g->n_heads = shape->n_heads;
    g->n_kv_heads = shape->n_kv_heads;
    g->head_dim = shape->head_dim;
    g->context = shape->context_length;

    if (p->budget_bytes == 0) {
        if (!geom_for_window(g, p, p->window))
            return tg_fail(err, p->window > 0 ? "--streaming-llm-window %" PRId64 ": the cache would not fit in memory"
                                              : "KV cache: context of %" PRId64 " tokens would not fit in memory",
                           p->window > 0 ? p->window : g->context);
        return true;
    }
    /* the largest window in [1, context] whose cache fits the budget (bytes grow with the window) */
    const size_t budget = (size_t)p->budget_bytes;
    if (!geom_for_window(g, p, 1) || tg_cache_geom_bytes(g) > budget) {
        size_t need = geom_for_window(g, p, 1) ? tg_cache_geom_bytes(g) : SIZE_MAX;
        return tg_fail(err, "--kv-budget %" PRId64 ": too small; even %" PRId64 " sink tokens and a window of 1 need "
                            "%zu bytes", p->budget_bytes, g->sink, need);
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
            APPEND(" (KIVI, group %d, residual %" PRId64, g->group, g->residual);
            if (g->bounded && g->residual < p->residual) APPEND(" of %d, capped by the window", p->residual);
            if (g->resid_precision != TG_KV_FP32) APPEND(" at %s", tg_kv_precision_name(g->resid_precision));
            APPEND(")");
        } else {
            APPEND(" (KIVI, whole-history key scales re-quantised each step)");
        }
    }
    if (!g->bounded) {
        APPEND(", unbounded (context %" PRId64 ")", g->context);
        if (p->reposition) APPEND("; re-positioning has no effect without a window");
    } else {
        APPEND(", StreamingLLM sink %" PRId64 " + window %" PRId64, g->sink, g->window);
        if (g->window_from_budget) APPEND(" (largest within --kv-budget %" PRId64 " B)", p->budget_bytes);
        APPEND(" (%s RoPE; stored <= %" PRId64, g->reposition ? "re-positioned" : "vanilla", g->max_stored);
        if (g->grouped) APPEND(" with group slack");
        APPEND(")");
        if ((kq || vq) && g->sink > 0) APPEND(p->quantize_sinks ? ", sinks quantised" : ", sinks fp32");
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
    if (!tg_cache_geom_resolve(shape, params, &g, err)) return 0;
    /* an unbounded cache sized for exactly n_tokens (all a streaming cache needs before its first eviction) */
    tg_cache_shape s = *shape;
    s.context_length = n_tokens;
    tg_cache_params u = *params;
    u.window = 0;
    u.budget_bytes = 0;
    u.sink = -1;
    tg_cache_geom gu;
    if (!tg_cache_geom_resolve(&s, &u, &gu, err)) return 0;
    size_t unbounded = tg_cache_geom_bytes(&gu);
    if (!g.bounded) return unbounded;
    size_t bounded = tg_cache_geom_bytes(&g);
    return unbounded < bounded ? unbounded : bounded;
}
