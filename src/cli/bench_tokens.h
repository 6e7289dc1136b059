/* bench_tokens.h — the tokens `tinygpt bench` feeds a session, in both of its modes (cmd_bench.c, bench_side.c):
 * random prompt tokens to fill a cache to a depth, and the greedy choice of each generated token. */
#ifndef TG_CLI_BENCH_TOKENS_H
#define TG_CLI_BENCH_TOKENS_H

#include <stdbool.h>
#include <stdint.h>

#include "tinygpt.h"

#define TG_BENCH_FILL_CHUNK 512 /* prompt tokens per evaluation when filling a cache to a depth */

/* n token ids from a fixed xorshift sequence (*state advances), avoiding the special ids at the start of a large
 * vocabulary. */
void tg_bench_random_ids(int32_t *ids, int64_t n, int32_t vocab, uint64_t *state);

/* Evaluates random tokens (tg_bench_random_ids, in chunks of TG_BENCH_FILL_CHUNK through ids[TG_BENCH_FILL_CHUNK])
 * until s holds `depth` tokens. False, with err filled by tg_session_eval, when an evaluation fails. */
bool tg_bench_fill(tg_session *s, int64_t depth, int32_t *ids, int32_t vocab, uint64_t *state, tg_error *err);

/* The id of the largest of logits[0 .. vocab) (the first of equals). */
int32_t tg_bench_argmax(const float *logits, int32_t vocab);

#endif
