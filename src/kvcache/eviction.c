/* eviction.c — the table of eviction policies (eviction.h). */
#include "kvcache/eviction.h"

#include <stddef.h>

/* The policies, in the order one is picked (the first whose `selects` says yes). */
static const tg_eviction *const policies[] = {
    &tg_eviction_none,
    &tg_eviction_streaming,
};

const tg_eviction *tg_eviction_for(const tg_cache_params *p, int64_t window) {
    for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++)
        if (policies[i]->selects(p, window)) return policies[i];
    return NULL;
}
