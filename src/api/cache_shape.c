/* cache_shape.c — a model's KV cache shape (cache_shape.h), and tg_cache_bytes: the cache-bytes table of
 * `tinygpt info --cache-table`, from the same closed-form geometry the cache allocates by (reads only the model's
 * hyper-parameters, never its weights). */
#include "api/cache_shape.h"

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
