/* attend_team.h — test support: the whole attention of one query over a KV cache, run the way the forward pass runs
 * it (tg_kvcache_query, every piece of every kv-head on a tg_pool team, tg_kvcache_attend_combine per kv-head). */
#ifndef TG_TESTS_ATTEND_TEAM_H
#define TG_TESTS_ATTEND_TEAM_H

#include <stdint.h>

#include "kvcache/kvcache.h"

/* out[n_heads * head_dim] = attention of the pre-RoPE query q of the token at pos (already appended) in `layer`,
 * the kv-heads shared out over a team of n_threads (>= 1). Aborts the test on out of memory. */
void test_attend(tg_kvcache *c, int layer, int64_t pos, const float *q, float *out, int n_threads);

#endif
