/* attention.h — the CPU backend's orchestration of attention over the KV cache, round by round: the appends and the
 * queries' rotation (one unit), then the pieces (units of row x kv-head x share, or groups of prefill rows), their
 * combination into each row's output, and the attention-sink meter's hooks on the pieces. The cache computes; this
 * file decides which piece runs where and what must come first. */
#ifndef TG_FORWARD_ATTENTION_H
#define TG_FORWARD_ATTENTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "forward/backend.h"
#include "forward/sched.h"

/* The attention-sink meter's buffers. */
typedef struct {
    float *mass;        /* [n_layers, max_rows, n_kv_heads, TG_ATTN_MAX_SPLITS, gq * TG_MASS_FLOATS] the pieces' masses */
    int64_t *mass_vis;  /* [n_layers, max_rows] tokens each query saw */
    int *mass_splits;   /* [n_layers, max_rows] its shares */
    double *mass_share; /* [gq * TG_MASS_RANGES] one kv-head's combined shares */
    double *share_sum;  /* [n_layers, n_heads, TG_MASS_RANGES] */
    int64_t *queries, *skipped; /* [n_layers] */
} tg_attn_meter_bufs;

typedef struct {
    const tg_hparams *hp;
    int max_rows;
    size_t part_floats;  /* tg_kvcache_part_floats of the cache */
    float *parts;        /* [max_rows, n_kv_heads, TG_ATTN_MAX_SPLITS, part_floats] the pieces' partial results */
    int *splits;         /* [max_rows] shares of each row's attention */
    int *pending;        /* [max_rows] the stores of each row's append its attention's last shares make first (a mask
                          * of tg_kvcache_append_start: the kv-heads' stores overlap the attention; 0: none) */
    size_t work_floats;  /* tg_kvcache_work_floats of the cache it was sized for (the most a cache may need) */
    int group_tokens;    /* tokens per grouped prefill piece (tg_kvcache_group_tokens; 0: none) */
    size_t gwork_floats; /* tg_kvcache_group_work_floats of that cache for group_tokens */
    /* [n_layers][max_rows] per layer and round, set by the round's prepare step and never again in the call: a
     * thread the OS held back catches up through finished steps, and the number of units of a pieces step it reads
     * here must be that step's, not a later layer's (a sliding-window layer beside a global one has fewer shares) */
    int *round_group;    /* whether the round's pieces run grouped */
    bool *round_defers;  /* whether a row of it has pending stores */
    int *round_splits;   /* the most shares a row of it has */
    tg_attn_meter_bufs mt; /* the attention-sink meter; mt.mass == NULL: off */
} tg_attn;

/* Sizes a's buffers for max_rows rows through `cache` (or caches of its shape and policy); false when memory runs
 * out (tg_attn_free then frees what was had). */
bool tg_attn_init(tg_attn *a, const tg_hparams *hp, const tg_kvcache *cache, int max_rows);
void tg_attn_free(tg_attn *a);

/* Layer l of the call's rows, round by round: each round's appends of k, v [rows, n_kv_heads * head_dim] (when the
 * layer holds its own K/V) and the rotation of its queries q [rows, n_heads * head_dim] (in place), a step of one
 * unit; then its pieces, a step. Runs 2 * rows->n_rounds steps. work [work_floats] and gwork [gwork_floats] are the
 * calling thread's. */
void tg_attn_layer(tg_team *tm, tg_attn *a, const tg_rows *rows, int l, bool own_kv, float *q, const float *k,
                   const float *v, float *work, float *gwork);

/* The attention output of rows 0 .. n: each row's pieces combined, into out [n, n_heads * head_dim]. */
void tg_attn_combine(const tg_attn *a, const tg_rows *rows, int n, float *out);

/* The meter: on (buffers allocated once; false when memory runs out), its sums after a call of n rows through
 * `cache`, and what it has summed (false when off). */
bool tg_attn_meter_on(tg_attn *a);
void tg_attn_meter_sum(tg_attn *a, const tg_kvcache *cache, int n);
bool tg_attn_meter(const tg_attn *a, tg_attention_stats *out);

#endif
