/* eviction.h — internal to src/kvcache: eviction policies. A policy decides how many tokens a layer holds (the
 * capacities every store is sized by) and which non-sink tokens go when a new one comes: none (eviction_none.c: an
 * unbounded cache of `context` tokens) or StreamingLLM (eviction_streaming.c: the first `sink` tokens and the recent
 * window, the middle dropped in whole blocks). Each is one table of operations; eviction.c holds the table. Adding a
 * policy = one eviction_*.c file and one row there (and the parameters that select it). */
#ifndef TG_KVCACHE_EVICTION_H
#define TG_KVCACHE_EVICTION_H

#include <stdbool.h>
#include <stdint.h>

#include "kvcache/cache_internal.h"

struct tg_eviction {
    const char *name;
    /* Whether this policy applies to params whose window (a budget already resolved into one) is `window`. */
    bool (*selects)(const tg_cache_params *p, int64_t window);
    /* Fills g's token capacities (sink, row_cap, max_nonsink and, when g->grouped, residual, res_cap, n_units) for
     * g->window (0 when unbounded) and g->context; g's shape, group, block and residual precision are set. False when
     * the numbers would overflow. */
    bool (*capacities)(tg_cache_geom *g, const tg_cache_params *p);
    /* Makes room for non-sink token n == L->n_appended: moves L->first (and L->qend with it) forward in whole
     * g->block units as the policy drops tokens. False when the token cannot be held (the cache is full). */
    bool (*make_room)(const tg_cache_geom *g, tg_layer_cache *L, int64_t n);
};

extern const tg_eviction tg_eviction_none, tg_eviction_streaming;

/* The policy the table picks for params with this window; NULL when none does. */
const tg_eviction *tg_eviction_for(const tg_cache_params *p, int64_t window);

#endif
