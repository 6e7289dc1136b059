/* bench_tokens.c — the tokens `tinygpt bench` feeds a session (bench_tokens.h). */
#include "cli/bench_tokens.h"

void tg_bench_random_ids(int32_t *ids, int64_t n, int32_t vocab, uint64_t *state) {
    for (int64_t i = 0; i < n; i++) {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        ids[i] = vocab > 512 ? 259 + (int32_t)(*state % (uint64_t)(vocab - 259)) : (int32_t)(*state % (uint64_t)vocab);
    }
}

bool tg_bench_fill(tg_session *s, int64_t depth, int32_t *ids, int32_t vocab, uint64_t *state, tg_error *err) {
    while (tg_session_position(s) < depth) {
        int64_t n = depth - tg_session_position(s);
        if (n > TG_BENCH_FILL_CHUNK) n = TG_BENCH_FILL_CHUNK;
        tg_bench_random_ids(ids, n, vocab, state);
        if (!tg_session_eval(s, ids, (size_t)n, NULL, NULL, err)) return false;
    }
    return true;
}

int32_t tg_bench_argmax(const float *logits, int32_t vocab) {
    int32_t best = 0;
    for (int32_t i = 1; i < vocab; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}
