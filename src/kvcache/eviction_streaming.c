/* eviction_streaming.c — StreamingLLM: the first `sink` tokens (default 4) and the recent window W; the middle is
 * dropped in whole blocks (G tokens when a KIVI group exists, else 1), so at most W + G - 1 non-sink tokens are held
 * after an append. Grouped KIVI stores keep a residual of at most R rows, capped to what the window can hold, and
 * enough group units for the rest. Ring buffers: O(1) per token. */
#include "kvcache/eviction.h"

#define DEFAULT_SINK 4

static bool streaming_selects(const tg_cache_params *p, int64_t window) {
    (void)p;
    return window > 0;
}

static bool streaming_capacities(tg_cache_geom *g, const tg_cache_params *p) {
    const int64_t W = g->window;
    if (W > INT64_MAX / 4 - 2 * (int64_t)TG_KV_MAX_GROUP_SIZE) return false;
    g->sink = p->sink < 0 ? DEFAULT_SINK : p->sink;
    if (!g->grouped) {
        g->row_cap = g->max_nonsink = W;
        return true;
    }
    const int64_t G = g->group, held = W + G - 1; /* most non-sink tokens held after an append */
    g->residual = g->residual_asked < G * (held / G) ? g->residual_asked : G * (held / G);
    g->res_cap = g->residual == 0 ? 0 : g->residual > G ? g->residual : G; /* 0: no residual ring */
    const int64_t units = (W + 2 * G - 2 - g->res_cap) / G;
    g->n_units = units > 0 ? units : 0;
    g->row_cap = g->max_nonsink = held;
    return true;
}

static bool streaming_make_room(const tg_cache_geom *g, tg_layer_cache *L, int64_t n) {
    /* drop the oldest block while the rest still covers the window once this token is in */
    while ((n + 1) - L->first - g->block >= g->window) {
        L->first += g->block;
        if (L->qend < L->first) L->qend = L->first;
    }
    return true;
}

const tg_eviction tg_eviction_streaming = {
    .name = "streaming-llm", .selects = streaming_selects, .capacities = streaming_capacities,
    .make_room = streaming_make_room,
};
