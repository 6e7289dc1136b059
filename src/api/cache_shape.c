/* cache_shape.c — a model's KV cache shape (cache_shape.h), and tg_cache_bytes: the cache-bytes table of
 * `tinygpt info --cache-table`, from the same closed-form geometry the cache allocates by (reads only the model's
 * hyper-parameters, never its weights). */
#include "api/cache_shape.h"

#include <stdlib.h>

#include "util/error.h"

tg_cache_shape tg_model_cache_shape(const tg_model *model, int64_t context, const int *layer_window) {
    const tg_hparams *hp = &model->hp;
    tg_cache_shape shape = {
        .n_layers = hp->n_layers,
        .n_heads = hp->n_heads,
        .n_kv_heads = hp->n_kv_heads,
        .head_dim = hp->head_dim,
        .rope_theta = hp->rope_theta,
        .rope_inv_freq = hp->rope_inv_freq,
        .rope_style = hp->rope_style,
        .context_length = context,
        .kv_source = hp->kv_source,
        .layer_window = layer_window,
        .attn_softcap = hp->attn_softcap,
    };
    return shape;
}

size_t tg_cache_bytes(const tg_model *model, const tg_cache_params *params, int64_t n_tokens, tg_error *err) {
    if (!model || !params) {
        tg_fail(err, "KV cache table: no model or parameters");
        return 0;
    }
    const tg_cache_shape shape = tg_model_cache_shape(model, model->hp.context_length, NULL);
    return tg_kvcache_bytes_for(&shape, params, n_tokens, err);
}

/* The model's sliding window for every layer (malloc'ed; NULL and *ok true when it has none). */
static int *layer_windows(const tg_model *model, bool *ok) {
    const tg_hparams *hp = &model->hp;
    *ok = true;
    if (hp->sliding_window <= 0 && !hp->layer_window) return NULL;
    int *w = malloc((size_t)hp->n_layers * sizeof *w);
    if (!w) {
        *ok = false;
        return NULL;
    }
    for (int l = 0; l < hp->n_layers; l++) w[l] = hp->layer_window ? hp->layer_window[l] : hp->sliding_window;
    return w;
}

tg_kvcache *tg_model_kvcache_new(const tg_model *model, const tg_cache_params *params, tg_error *err) {
    if (params->context < 0) {
        tg_fail(err, "KV cache: context %lld must be >= 0 (0 = the model's)", (long long)params->context);
        return NULL;
    }
    bool ok;
    int *lw = layer_windows(model, &ok);
    if (!ok) {
        tg_fail(err, "out of memory");
        return NULL;
    }
    const int64_t context = params->context > 0 ? params->context : model->hp.context_length;
    const tg_cache_shape shape = tg_model_cache_shape(model, context, lw);
    tg_kvcache *c = tg_kvcache_new(&shape, params, err);
    free(lw);
    return c;
}

size_t tg_model_kvcache_bytes(const tg_model *model, const tg_cache_params *params, tg_error *err) {
    if (params->context < 0) {
        tg_fail(err, "KV cache: context %lld must be >= 0 (0 = the model's)", (long long)params->context);
        return 0;
    }
    bool ok;
    int *lw = layer_windows(model, &ok);
    if (!ok) {
        tg_fail(err, "out of memory");
        return 0;
    }
    const int64_t context = params->context > 0 ? params->context : model->hp.context_length;
    const tg_cache_shape shape = tg_model_cache_shape(model, context, lw);
    /* unbounded: sized for exactly its context; bounded: a history longer than the bound (sinks, window, the largest
     * group and residual), so the smaller of the two bytes_for compares is the bounded allocation */
    int64_t n = context;
    if (params->window > 0 || params->budget_bytes > 0) {
        const int64_t sink = params->sink > 0 ? params->sink : 4;
        n = context + sink + (params->window > 0 ? params->window : context) + TG_KV_MAX_GROUP_SIZE +
            TG_KV_MAX_RESIDUAL;
    }
    tg_cache_params p = *params;
    p.max_memory = -1; /* the long history is only a probe: the memory limit applies when the cache is made */
    size_t bytes = tg_kvcache_bytes_for(&shape, &p, n, err);
    free(lw);
    return bytes;
}
