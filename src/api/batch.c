/* batch.c — sequences (a KV cache and a position) and one forward pass that advances many of them together
 * (tinygpt.h: batches). The forward's tg_forward_batch does the work; this file checks the boundary: ids in the
 * vocabulary, room in each cache, finite logits. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/cache_shape.h"
#include "api/sequence_internal.h"
#include "forward/forward.h"
#include "kvcache/kvcache.h"
#include "model/model.h"
#include "tinygpt.h"
#include "util/error.h"

struct tg_sequence {
    const tg_model *model;
    tg_kvcache *cache;
    int64_t pos;
    int64_t context; /* the cache's capacity when unbounded */
    bool bounded;
    int max_chunk;
};

struct tg_batch {
    const tg_model *model;
    tg_forward *fwd;
    size_t work_floats;      /* attention work space per piece the forward has */
    tg_forward_seg *segs;    /* [max_rows] */
};

size_t tg_sequence_bytes(const tg_model *model, const tg_cache_params *params, tg_error *err) {
    if (!model || !params) {
        tg_fail(err, "no model or cache parameters");
        return 0;
    }
    return tg_model_kvcache_bytes(model, params, err);
}

tg_sequence *tg_sequence_new(const tg_model *model, const tg_cache_params *params, tg_error *err) {
    if (!model || !params) {
        tg_fail(err, "no model or cache parameters");
        return NULL;
    }
    tg_sequence *q = tg_calloc_or_fail(1, sizeof *q, err);
    if (!q) return NULL;
    q->model = model;
    q->cache = tg_model_kvcache_new(model, params, err);
    if (!q->cache) {
        free(q);
        return NULL;
    }
    const tg_cache_plan plan = tg_kvcache_plan(q->cache);
    q->bounded = plan.bounded;
    q->context = params->context > 0 ? params->context : model->hp.context_length;
    q->max_chunk = plan.max_chunk > 0 && plan.max_chunk < TG_BATCH_PREFILL_MAX ? plan.max_chunk : TG_BATCH_PREFILL_MAX;
    return q;
}

void tg_sequence_free(tg_sequence *q) {
    if (!q) return;
    tg_kvcache_free(q->cache);
    free(q);
}

int64_t tg_sequence_position(const tg_sequence *q) { return q ? q->pos : 0; }

const tg_model *tg_sequence_model(const tg_sequence *q) { return q->model; }

tg_kvcache *tg_sequence_kvcache(tg_sequence *q) { return q->cache; }

void tg_sequence_set_position(tg_sequence *q, int64_t pos) { q->pos = pos; }

void tg_sequence_empty(tg_sequence *q) {
    tg_kvcache_reset(q->cache);
    q->pos = 0;
}

int64_t tg_sequence_remaining(const tg_sequence *q) {
    if (!q) return 0;
    if (q->bounded) return INT64_MAX;
    return q->context > q->pos ? q->context - q->pos : 0;
}

int tg_sequence_max_chunk(const tg_sequence *q) { return q ? q->max_chunk : 0; }

void tg_sequence_cache_report(const tg_sequence *q, tg_cache_report *r) {
    if (q) tg_kvcache_report(q->cache, q->pos, r);
}

tg_batch *tg_batch_new(const tg_model *model, const tg_cache_params *widest, int max_rows, int n_threads,
                       tg_error *err) {
    if (!model || !widest) {
        tg_fail(err, "no model or cache parameters");
        return NULL;
    }
    if (!model->has_weights) {
        tg_fail(err, "the model has no weights (a vocab-only file can tokenise but not run)");
        return NULL;
    }
    if (max_rows < 1) {
        tg_fail(err, "a batch of %d rows: must be at least 1", max_rows);
        return NULL;
    }
    if (n_threads <= 0) n_threads = tg_threads_all_cores();
    tg_batch *b = tg_calloc_or_fail(1, sizeof *b, err);
    if (!b) return NULL;
    b->model = model;
    b->segs = calloc((size_t)max_rows, sizeof *b->segs);
    /* the forward sizes its attention work space by a cache of the widest policy (made and dropped here) */
    tg_kvcache *probe = b->segs ? tg_model_kvcache_new(model, widest, err) : NULL;
    if (!b->segs && err) tg_fail(err, "out of memory");
    if (probe) {
        b->work_floats = tg_kvcache_work_floats(probe);
        b->fwd = tg_forward_new_on(model, probe, max_rows, n_threads, widest->device, err);
    }
    tg_kvcache_free(probe);
    if (!b->fwd) {
        tg_batch_free(b);
        return NULL;
    }
    return b;
}

void tg_batch_free(tg_batch *b) {
    if (!b) return;
    tg_forward_free(b->fwd);
    free(b->segs);
    free(b);
}

int tg_batch_threads(const tg_batch *b) { return b ? tg_forward_threads(b->fwd) : 0; }

int tg_batch_max_rows(const tg_batch *b) { return b ? tg_forward_max_rows(b->fwd) : 0; }

bool tg_batch_fits(const tg_batch *b, const tg_sequence *q) {
    return b && q && tg_kvcache_work_floats(q->cache) <= b->work_floats && tg_forward_fits(b->fwd, q->cache);
}

void tg_batch_release(tg_batch *b, const tg_sequence *q) {
    if (b && q) tg_forward_release(b->fwd, q->cache);
}

bool tg_batch_on_device(const tg_batch *b) {
    tg_backend_memory m;
    return b && tg_forward_device_memory(b->fwd, &m);
}

bool tg_batch_eval(tg_batch *b, tg_batch_item *items, int n_items, tg_error *err) {
    if (!b || (n_items > 0 && !items) || n_items < 0) return tg_fail(err, "no batch or items");
    const int64_t vocab = b->model->hp.vocab_size;
    int rows = 0;
    for (int i = 0; i < n_items; i++) {
        const tg_batch_item *it = &items[i];
        if (!it->seq || !it->ids || it->n < 1) return tg_fail(err, "batch item %d is empty", i);
        if (it->n > it->seq->max_chunk)
            return tg_fail(err, "batch item %d: %d tokens, more than its sequence takes at once (%d)", i, it->n,
                           it->seq->max_chunk);
        if (rows + it->n > tg_forward_max_rows(b->fwd))
            return tg_fail(err, "batch: more than %d rows", tg_forward_max_rows(b->fwd));
        if ((int64_t)it->n > tg_sequence_remaining(it->seq) || !tg_kvcache_has_room(it->seq->cache))
            return tg_fail_code(err, TG_ERR_CONTEXT_FULL, "context window of %lld tokens is full",
                                (long long)it->seq->context);
        if (!tg_batch_fits(b, it->seq))
            return tg_fail(err, "batch item %d: its cache holds more tokens than the batch was sized for, or has "
                                "another policy than the batch's device keeps", i);
        for (int j = 0; j < i; j++)
            if (items[j].seq == it->seq) return tg_fail(err, "batch items %d and %d: the same sequence", j, i);
        for (int t = 0; t < it->n; t++)
            if (it->ids[t] < 0 || it->ids[t] >= vocab)
                return tg_fail(err, "token id %ld (batch item %d) is outside the vocabulary [0, %lld)",
                               (long)it->ids[t], i, (long long)vocab);
        rows += it->n;
    }
    for (int i = 0; i < n_items; i++)
        b->segs[i] = (tg_forward_seg){items[i].seq->cache, items[i].ids, items[i].n, items[i].seq->pos,
                                      items[i].logits};
    if (!tg_forward_batch(b->fwd, b->segs, n_items)) return tg_fail(err, "batch: the forward pass refused the rows");
    for (int i = 0; i < n_items; i++) {
        tg_batch_item *it = &items[i];
        it->seq->pos += it->n;
        it->finite = true;
        if (it->logits)
            for (int64_t v = 0; v < vocab && it->finite; v++) it->finite = isfinite(it->logits[v]);
    }
    return true;
}
