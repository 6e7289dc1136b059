/* cache_shape.h — internal to src/api: the one place a model's hyper-parameters become a KV cache shape. */
#ifndef TG_API_CACHE_SHAPE_H
#define TG_API_CACHE_SHAPE_H

#include <stdint.h>

#include "kvcache/kvcache.h"
#include "model/model.h"

/* The shape of a KV cache for model: its layers, heads, RoPE and layer sharing, holding up to `context` tokens
 * unbounded, with layer_window[n_layers] per-layer sliding windows (NULL = none). The shape points into the model
 * and layer_window: use it while they live (tg_kvcache_new keeps copies of what it needs). */
tg_cache_shape tg_model_cache_shape(const tg_model *model, int64_t context, const int *layer_window);

/* The KV cache of a session of model under params, as tg_session_new makes it: holding p.context tokens (0 = the
 * model's) unbounded, the model's sliding window on every layer. NULL with err filled when the policy is invalid. */
tg_kvcache *tg_model_kvcache_new(const tg_model *model, const tg_cache_params *params, tg_error *err);

/* The bytes (the report's bytes_total) that tg_model_kvcache_new(model, params) allocates, from the same geometry,
 * without allocating: what a server admits a session by. 0 with err filled when the policy is invalid. */
size_t tg_model_kvcache_bytes(const tg_model *model, const tg_cache_params *params, tg_error *err);

#endif
