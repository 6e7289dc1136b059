/* session.c — the public session: a model, its KV cache and the forward pass, fed in chunks, with the context
 * limit and the finiteness of the logits checked at the boundary. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/cache_shape.h"
#include "api/session_internal.h"
#include "forward/forward.h"
#include "kvcache/kvcache.h"
#include "model/model.h"
#include "tinygpt.h"
#include "util/error.h"

/* Prompt tokens per forward call: each call streams every weight from memory once, so larger chunks read them
 * less often, at the cost of scratch that grows with the chunk (docs/PERFORMANCE.md has both). The bits do not
 * depend on it (chunked prefill == decoding token by token). */
#define TG_PREFILL_CHUNK 256

struct tg_session {
    const tg_model *model;
    tg_kvcache *cache;
    tg_forward *fwd;
    int64_t pos;         /* tokens evaluated so far */
    int64_t context;     /* the cache's capacity when unbounded */
    bool bounded;        /* a streaming policy bounds the cache: it never fills up */
    int chunk;           /* tokens per forward call */
    tg_abort_fn abort_fn; /* asked before every forward call; NULL = never */
    void *abort_user;
    int32_t *ids;        /* [pos] every token evaluated since the session was made or reset (snapshots, prefix
                          * reuse); room for cap_ids */
    size_t cap_ids;
};

tg_session *tg_session_new(const tg_model *model, const tg_cache_params *params, int n_threads, tg_error *err) {
    if (!model) {
        tg_fail(err, "no model");
        return NULL;
    }
    if (!model->has_weights) {
        tg_fail(err, "the model has no weights (a vocab-only file can tokenise but not run)");
        return NULL;
    }
    const tg_hparams *hp = &model->hp;
    tg_cache_params p = params ? *params : tg_cache_default_params();
    if (n_threads <= 0) n_threads = tg_threads_all_cores();

    tg_session *s = tg_calloc_or_fail(1, sizeof *s, err);
    if (!s) return NULL;
    s->model = model;
    if (p.context < 0) {
        tg_fail(err, "KV cache: context %lld must be >= 0 (0 = the model's)", (long long)p.context);
        goto fail;
    }
    s->context = p.context > 0 ? p.context : hp->context_length;
    s->cache = tg_model_kvcache_new(model, &p, err);
    if (!s->cache) goto fail;
    /* the cache says how it must be fed: bounded or not, and the largest chunk it can take */
    const tg_cache_plan plan = tg_kvcache_plan(s->cache);
    s->bounded = plan.bounded;
    s->chunk = plan.max_chunk > 0 && plan.max_chunk < TG_PREFILL_CHUNK ? plan.max_chunk : TG_PREFILL_CHUNK;
    s->fwd = tg_forward_new_on(model, s->cache, s->chunk, n_threads, p.device, err);
    if (!s->fwd) goto fail;
    return s;
fail:
    tg_session_free(s);
    return NULL;
}

void tg_session_free(tg_session *s) {
    if (!s) return;
    tg_forward_free(s->fwd);
    tg_kvcache_free(s->cache);
    free(s->ids);
    free(s);
}

/* Index of the first non-finite value of x[n], or -1. */
static int64_t first_non_finite(const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return i;
    return -1;
}

/* tg_session_eval, asking the abort callback before every forward call when check_abort. */
static bool session_eval(tg_session *s, const int32_t *ids, size_t n, float *logits_all, float *logits_last,
                         bool check_abort, tg_error *err) {
    if (!s) return tg_fail(err, "no session");
    if (n == 0) return true;
    if (!ids) return tg_fail(err, "no token ids");
    const int64_t vocab = s->model->hp.vocab_size;
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab)
            return tg_fail(err, "token id %ld (at index %zu) is outside the vocabulary [0, %lld)", (long)ids[i], i,
                           (long long)vocab);
    if (!s->bounded && (n > (size_t)INT64_MAX || (int64_t)n > s->context - s->pos))
        return tg_fail_code(err, TG_ERR_CONTEXT_FULL, "context window of %lld tokens is full", (long long)s->context);

    /* room in the history for every token, before anything is evaluated */
    if (n > s->cap_ids - (size_t)s->pos) {
        size_t cap = s->cap_ids ? s->cap_ids : 256;
        while (cap - (size_t)s->pos < n) {
            if (cap > SIZE_MAX / 2 / sizeof *s->ids) return tg_fail(err, "out of memory for the token history");
            cap *= 2;
        }
        int32_t *grown = realloc(s->ids, cap * sizeof *grown);
        if (!grown) return tg_fail(err, "out of memory for the token history");
        s->ids = grown;
        s->cap_ids = cap;
    }
    const int64_t start = s->pos;
    for (size_t i = 0; i < n;) {
        int c = n - i < (size_t)s->chunk ? (int)(n - i) : s->chunk;
        if (check_abort && s->abort_fn && s->abort_fn(s->abort_user))
            return tg_fail_code(err, TG_ERR_ABORTED, "aborted after %lld of %zu tokens", (long long)(s->pos - start),
                                n);
        if (!tg_kvcache_has_room(s->cache))
            return tg_fail_code(err, TG_ERR_CONTEXT_FULL, "context window of %lld tokens is full",
                                (long long)s->context);
        if (!tg_kvcache_reserve(s->cache, c, err)) return false; /* the chunks the next c tokens need */
        bool last = i + (size_t)c == n;
        tg_forward_chunk(s->fwd, s->cache, ids + i, c, s->pos, logits_all ? logits_all + (int64_t)i * vocab : NULL,
                         last ? logits_last : NULL);
        memcpy(s->ids + s->pos, ids + i, (size_t)c * sizeof *ids);
        s->pos += c;
        i += (size_t)c;
    }

    if (logits_all) {
        int64_t bad = first_non_finite(logits_all, (int64_t)n * vocab);
        if (bad >= 0)
            return tg_fail(err, "model produced non-finite logits at position %lld", (long long)(start + bad / vocab));
    } else if (logits_last && first_non_finite(logits_last, vocab) >= 0) {
        return tg_fail(err, "model produced non-finite logits at position %lld", (long long)(s->pos - 1));
    }
    return true;
}

bool tg_session_eval(tg_session *s, const int32_t *ids, size_t n, float *logits_all, float *logits_last,
                     tg_error *err) {
    return session_eval(s, ids, n, logits_all, logits_last, true, err);
}

bool tg_session_eval_token(tg_session *s, int32_t id, float *logits, tg_error *err) {
    return session_eval(s, &id, 1, NULL, logits, false, err);
}

int64_t tg_session_position(const tg_session *s) { return s ? s->pos : 0; }

bool tg_session_reserve(tg_session *s, int64_t n_tokens, tg_error *err) {
    if (!s) return tg_fail(err, "no session");
    return tg_kvcache_reserve(s->cache, n_tokens, err);
}

int64_t tg_session_remaining(const tg_session *s) {
    if (!s) return 0;
    if (s->bounded) return INT64_MAX;
    return s->context > s->pos ? s->context - s->pos : 0;
}

void tg_session_cache_report(const tg_session *s, tg_cache_report *r) {
    if (!s) return;
    tg_kvcache_report(s->cache, s->pos, r);
    tg_backend_memory m;
    if (!tg_forward_device_memory(s->fwd, &m)) return;
    memcpy(r->device, m.device, sizeof r->device);
    r->device_kv_bytes = m.kv;
    r->device_weight_bytes = m.weights;
    r->device_other_bytes = m.other;
}

int tg_session_threads(const tg_session *s) { return s ? tg_forward_threads(s->fwd) : 0; }

bool tg_session_meter_attention(tg_session *s, tg_error *err) {
    if (!s) return tg_fail(err, "no session");
    return tg_forward_meter_on(s->fwd, err);
}

bool tg_session_attention_stats(const tg_session *s, tg_attention_stats *out) {
    return s && out && tg_forward_meter(s->fwd, out);
}

void tg_session_reset(tg_session *s) {
    if (!s) return;
    tg_kvcache_reset(s->cache);
    s->pos = 0;
}

const int32_t *tg_session_tokens(const tg_session *s, size_t *n) {
    if (n) *n = s ? (size_t)s->pos : 0;
    return s ? s->ids : NULL;
}

struct tg_kvcache *tg_session_kvcache(tg_session *s) { return s->cache; }

bool tg_session_set_history(tg_session *s, const int32_t *ids, size_t n, tg_error *err) {
    if (n > s->cap_ids) {
        int32_t *grown = n <= SIZE_MAX / sizeof *grown ? malloc(n * sizeof *grown) : NULL;
        if (!grown) return tg_fail(err, "out of memory for the token history");
        free(s->ids);
        s->ids = grown;
        s->cap_ids = n;
    }
    if (n) memcpy(s->ids, ids, n * sizeof *ids);
    s->pos = (int64_t)n;
    return true;
}

void tg_session_set_abort(tg_session *s, tg_abort_fn fn, void *user) {
    if (!s) return;
    s->abort_fn = fn;
    s->abort_user = user;
}

bool tg_session_aborted(const tg_session *s) { return s && s->abort_fn && s->abort_fn(s->abort_user); }

const tg_model *tg_session_model(const tg_session *s) { return s ? s->model : NULL; }
