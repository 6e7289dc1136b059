/* bench/decode_ab_side.c — one side of bench/decode_ab.c: a session of one build of libtinygpt, filled to a depth,
 * that decodes a token per call. Compiled once per build with -DAB_SIDE=a or b and linked (ld -r) with that build's
 * libtinygpt.a, every symbol but the three below then made local (bench/decode-ab.sh), so two builds of the whole
 * engine live in one process. Uses only the public API (include/tinygpt.h). Built by bench/decode-ab.sh. */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tinygpt.h"

#define PASTE2(a, b) ab_##a##_##b
#define PASTE(a, b) PASTE2(a, b)
#define SIDE(name) PASTE(AB_SIDE, name)

#define FILL_CHUNK 512 /* prompt tokens per evaluation while filling to the depth (as tinygpt bench fills) */

typedef struct {
    tg_model *model;
    tg_session *s;
    float *logits;
    int32_t vocab, next;
} side;

static int32_t random_id(uint64_t *state, int32_t vocab) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (int32_t)((*state >> 33) % (uint64_t)vocab);
}

/* The model at `path` with a cache of precision `kv` (fp32 ... int2) on `threads` threads, filled with `depth`
 * random tokens (the same for both sides: the seed is fixed), room for `tokens` more. NULL with a message in err. */
void *SIDE(open)(const char *path, const char *kv, int64_t depth, int64_t tokens, int threads, char *err,
                 size_t err_len) {
    tg_error e = {0};
    side *sd = calloc(1, sizeof *sd);
    tg_kv_precision prec;
    if (!sd || !tg_kv_precision_parse(kv, &prec)) {
        snprintf(err, err_len, "unknown cache precision '%s' (or out of memory)", kv);
        free(sd);
        return NULL;
    }
    sd->model = tg_model_load(path, &e);
    if (!sd->model) {
        snprintf(err, err_len, "%s", e.msg);
        free(sd);
        return NULL;
    }
    tg_model_info info;
    tg_model_get_info(sd->model, &info);
    tg_cache_params p = tg_cache_default_params();
    p.key_precision = p.value_precision = prec;
    if (depth + tokens > info.context_length) p.context = depth + tokens; /* as tinygpt bench extends it */
    sd->vocab = tg_vocab_size(sd->model);
    sd->s = tg_session_new(sd->model, &p, threads, &e);
    sd->logits = malloc((size_t)sd->vocab * sizeof(float));
    int32_t *ids = malloc(FILL_CHUNK * sizeof(int32_t));
    bool ok = sd->s && sd->logits && ids;
    uint64_t state = 42;
    for (int64_t done = 0; ok && done < depth;) {
        const int64_t n = depth - done < FILL_CHUNK ? depth - done : FILL_CHUNK;
        for (int64_t i = 0; i < n; i++) ids[i] = random_id(&state, sd->vocab);
        ok = tg_session_eval(sd->s, ids, (size_t)n, NULL, sd->logits, &e);
        done += n;
    }
    free(ids);
    if (!ok) {
        snprintf(err, err_len, "%s", e.msg[0] ? e.msg : "out of memory");
        if (sd->s) tg_session_free(sd->s);
        tg_model_free(sd->model);
        free(sd->logits);
        free(sd);
        return NULL;
    }
    sd->next = random_id(&state, sd->vocab);
    return sd;
}

/* Decodes one token (the argmax of the previous one's logits after the first): its wall seconds, or -1 on failure. */
double SIDE(step)(void *h) {
    side *sd = h;
    struct timespec t0, t1;
    tg_error e = {0};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const bool ok = tg_session_eval(sd->s, &sd->next, 1, NULL, sd->logits, &e);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (!ok) return -1.0;
    int32_t best = 0;
    for (int32_t i = 1; i < sd->vocab; i++)
        if (sd->logits[i] > sd->logits[best]) best = i;
    sd->next = best;
    return (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
}

void SIDE(close)(void *h) {
    side *sd = h;
    if (!sd) return;
    tg_session_free(sd->s);
    tg_model_free(sd->model);
    free(sd->logits);
    free(sd);
}
