/* forward.h — the transformer forward pass over a chunk of tokens, calling the KV cache per layer. */
#ifndef TG_FORWARD_H
#define TG_FORWARD_H

#include <stdbool.h>
#include <stdint.h>

#include "kvcache/kvcache.h"
#include "model/model.h"

typedef struct tg_forward tg_forward;

/* Scratch buffers for chunks of up to max_chunk tokens, allocated once. */
tg_forward *tg_forward_new(const struct tg_model *m, int max_chunk, int n_threads, tg_error *err);
void tg_forward_free(tg_forward *f);

/* Runs ids[n] at positions pos..pos+n-1 (n <= max_chunk): matrix-matrix projections for the chunk, attention token
 * by token through the cache (identical to decoding one at a time). Writes logits [n, vocab] to logits_all when
 * non-NULL and the last row to logits_last when non-NULL. */
void tg_forward_chunk(tg_forward *f, tg_kvcache *cache, const int32_t *ids, int n, int64_t pos, float *logits_all,
                      float *logits_last);

#endif
