/* eviction_none.c — no eviction: an unbounded cache holds up to `context` non-sink tokens (no sinks), then is full.
 * Grouped KIVI stores keep a residual ring of max(R, G) rows (at most the context) and enough group units for the
 * rest. */
#include "kvcache/eviction.h"

static bool none_selects(const tg_cache_params *p, int64_t window) {
    (void)p;
    return window == 0;
}

static bool none_capacities(tg_cache_geom *g, const tg_cache_params *p) {
    (void)p;
    const int64_t T = g->context;
    g->sink = 0;
    g->row_cap = g->max_nonsink = T;
    if (g->grouped) {
        const int64_t G = g->group, C = g->residual_asked == 0 ? 0 : g->residual_asked > G ? g->residual_asked : G; /* 0: no ring */
        g->residual = g->residual_asked;
        g->res_cap = C < T ? C : T;
        g->n_units = T > C ? (T - 1 - C + G) / G : 0;
    }
    return true;
}

static bool none_make_room(const tg_cache_geom *g, tg_layer_cache *L, int64_t n) {
    (void)L;
    return n < g->context; /* full: tg_kvcache_has_room said so */
}

const tg_eviction tg_eviction_none = {
    .name = "none", .selects = none_selects, .capacities = none_capacities, .make_room = none_make_room,
};
