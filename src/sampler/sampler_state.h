/* sampler_state.h — internal to the library: a sampler's state for session snapshots (src/api/snapshot.c). */
#ifndef TG_SAMPLER_STATE_H
#define TG_SAMPLER_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "tinygpt.h"

/* The vocabulary the sampler was made for. */
int32_t tg_sampler_vocab(const tg_sampler *s);
/* rng[4] = the PRNG state; hist (room for tg_sampler_history_cap ids, may be NULL when that is 0) = the ids the
 * repeat penalty remembers, oldest first; returns their count. */
size_t tg_sampler_get_state(const tg_sampler *s, uint64_t rng[4], int32_t *hist);
/* Most ids the repeat penalty remembers (0 when it is off). */
size_t tg_sampler_history_cap(const tg_sampler *s);
/* The PRNG state rng[4] and the history hist[n] (oldest first; a sampler that remembers fewer keeps the newest,
 * ids outside the vocabulary are skipped, as tg_sampler_accept does). */
void tg_sampler_set_state(tg_sampler *s, const uint64_t rng[4], const int32_t *hist, size_t n);

#endif
