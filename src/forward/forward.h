/* forward.h — the transformer forward pass over a chunk of tokens, calling the KV cache per layer. */
#ifndef TG_FORWARD_H
#define TG_FORWARD_H

#include <stdbool.h>
#include <stdint.h>

#include "forward/backend.h"
#include "kvcache/kvcache.h"
#include "model/model.h"

typedef struct tg_forward tg_forward;

/* Scratch buffers for chunks of up to max_chunk tokens and n_threads threads (< 1 means 1), allocated once; the
 * attention work space is sized for `cache` (the cache the calls will use, or one of the same shape and policy). */
tg_forward *tg_forward_new(const struct tg_model *m, const tg_kvcache *cache, int max_chunk, int n_threads,
                           tg_error *err);
/* tg_forward_new on `device`: NULL or "cpu" (the CPU backend), "vulkan" or "vulkan:N" (Vulkan device N), "auto"
 * (Vulkan device 0 when it opens and can run the model and cache, else the CPU). NULL (err filled) for another name
 * or when the device cannot run them. */
tg_forward *tg_forward_new_on(const struct tg_model *m, const tg_kvcache *cache, int max_chunk, int n_threads,
                              const char *device, tg_error *err);
void tg_forward_free(tg_forward *f);
/* The size of the forward's thread team (>= 1; may be smaller than asked when the system refused threads). */
int tg_forward_threads(const tg_forward *f);

/* The attention-sink meter (tinygpt.h's tg_attention_stats): turns it on, allocating its buffers once; false (err
 * filled) when memory runs out. Each call then sums, after its pool run, every query's shares. */
bool tg_forward_meter_on(tg_forward *f, tg_error *err);
/* The meter's sums (NULL fields and false when it is off). */
bool tg_forward_meter(const tg_forward *f, tg_attention_stats *out);
/* The device's name and bytes when the forward pass runs on one (false, *out zeroed, on the CPU). */
bool tg_forward_device_memory(const tg_forward *f, tg_backend_memory *out);

/* Runs ids[n] at positions pos..pos+n-1 (n <= max_chunk) on the forward's team of n_threads (one pool run): matrix-matrix
 * projections for the chunk, attention through the cache (token by token where a later append could change what an
 * earlier token sees), so the result is bit-for-bit that of decoding the tokens one at a time, whatever the thread
 * count. Writes logits [n, vocab] to logits_all when non-NULL and the last row to logits_last when non-NULL.
 * Allocates nothing. */
void tg_forward_chunk(tg_forward *f, tg_kvcache *cache, const int32_t *ids, int n, int64_t pos, float *logits_all,
                      float *logits_last);

/* One session's rows in a batch: n tokens ids[n] at positions pos..pos+n-1 through its own cache; logits (non-NULL)
 * receives the distribution after the last of them [vocab]. */
typedef struct {
    tg_kvcache *cache;
    const int32_t *ids;
    int n;
    int64_t pos;
    float *logits;
} tg_forward_seg;

/* Runs the segments of several sessions in one pass (one pool run): every weight matrix is read once for all their
 * rows (matrix x several vectors), attention is per row over its own cache. A row's result is bit-for-bit what
 * tg_forward_chunk of its segment alone computes (the matrix kernels follow one arithmetic order per (row,
 * activation) whatever the batch, and a cache that needs token-by-token attention gets its rows one round at a time).
 * False (nothing run) when the rows exceed max_chunk, a segment is empty, two segments share a cache, or a cache needs
 * more attention work space than the cache the forward was sized for. Allocates nothing. */
bool tg_forward_batch(tg_forward *f, const tg_forward_seg *segs, int n_segs);

/* Whether the forward can run rows through cache (tg_forward_batch's check); telling it that cache runs no more
 * calls (a device backend frees its copy for another cache). */
bool tg_forward_fits(const tg_forward *f, const tg_kvcache *cache);
void tg_forward_release(tg_forward *f, const tg_kvcache *cache);

/* The most rows one call takes (max_chunk). */
int tg_forward_max_rows(const tg_forward *f);

#endif
