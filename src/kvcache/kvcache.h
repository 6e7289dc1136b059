/* kvcache.h — the KV cache: storage precision (fp32/fp16/bf16, KIVI int8/int4/int2 with groups and a
 * full-precision residual), StreamingLLM eviction (sinks + window, vanilla or re-positioned RoPE), per-layer
 * sharing, byte accounting, and attention over its own storage. Knows nothing of weights or tokens.
 *
 * Policy in brief (docs/kvcache.md has the details and the bounds):
 *  - KIVI keys per channel in groups of G tokens, values per token. With a residual R > 0 both stay in full
 *    precision in the residual ring (the newest tokens: up to max(R, G)) and are quantised together, G at a time,
 *    when it is full; with R = 0 (the default for int8 / int4) every token is quantised as it arrives, the newest
 *    group's keys on provisional per-channel grids. Group size 0 is the design note's scheme: one key grid per
 *    channel over the whole history, re-fitted every step; values per token at once, no residual.
 *  - StreamingLLM: the first `sink` tokens (at the residual precision under KIVI) and the recent window; the middle is dropped in whole
 *    blocks (G tokens when a KIVI group exists, else 1), so stored <= sink + window + G - 1. Ring buffers, O(1).
 *  - A bounded cache allocates every buffer once, in tg_kvcache_new; nothing grows afterwards. An unbounded one
 *    (no window) allocates its rows and groups in chunks of 512 or more tokens as they arrive (tg_kvcache_reserve,
 *    or the append that needs one), never moving what it holds, so its bytes follow the tokens held; the memory
 *    limit (tg_cache_params.max_memory) is checked at every chunk. (Group size 0 doubles one block of rows
 *    instead, moving what it holds: O(1) amortised, its rows one segment.) */
#ifndef TG_KVCACHE_H
#define TG_KVCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/ops.h"
#include "tinygpt.h"

typedef struct {
    int n_layers;
    int n_heads, n_kv_heads, head_dim;
    float rope_theta;
    const double *rope_inv_freq; /* [head_dim / 2]: each pair's RoPE frequency when the model scales them (Llama 3.1,
                                  * linear; copied), NULL = theta^(-2i/head_dim) */
    tg_rope_style rope_style;
    int64_t context_length;     /* capacity of an unbounded cache */
    const int *kv_source;       /* [n_layers]: layer whose K/V each layer reads (NULL = every layer its own) */
    const int *layer_window;    /* [n_layers]: sliding window of each layer, 0 = none (NULL = none) */
    float attn_softcap;         /* > 0: every score s becomes c tanh(s / c) before the softmax (Gemma 2) */
} tg_cache_shape;

typedef struct tg_kvcache tg_kvcache;

/* A cache for the policy: a bounded one with every buffer allocated (it never grows afterwards), an unbounded one
 * with none of its chunks yet. NULL with a message naming the flag when the policy is invalid (window 0 with a sink,
 * residual not a multiple of the group, budget too small...) or what it allocates now passes max_memory. */
tg_kvcache *tg_kvcache_new(const tg_cache_shape *shape, const tg_cache_params *params, tg_error *err);
void tg_kvcache_free(tg_kvcache *c);
/* Empties the cache, keeping every allocation: its storage is zeroed and it holds no token, exactly as
 * tg_kvcache_new left it, so the same appends give the same results. */
void tg_kvcache_reset(tg_kvcache *c);

/* What a copy of the cache elsewhere (a device backend's) compares to know whether it still holds what the cache
 * holds: each append adds 1, a reset or a loaded state (snapshot.h) adds 2^32 (so a fresh cache that a state was
 * loaded into never equals one that was appended to, as a freed cache's successor at the same address might). */
uint64_t tg_kvcache_serial(const tg_kvcache *c);

/* Allocates now the chunks an unbounded cache needs for n_tokens more tokens in every layer (at most up to its
 * context), so that appending them allocates nothing. False with TG_ERR_CACHE_MEMORY / TG_ERR_CACHE_MEMORY_LIMIT
 * (or out of memory) when they would pass max_memory; nothing is appended either way. True at once for a bounded
 * cache. */
bool tg_kvcache_reserve(tg_kvcache *c, int64_t n_tokens, tg_error *err);

/* Stores the new token's key and value for `layer` at absolute position pos (positions are appended in order:
 * pos == the number of tokens appended to this layer before). k is pre-RoPE: the cache rotates it at pos (a
 * re-positioning cache keeps its sinks pre-RoPE and rotates them per query). Eviction happens here; so does the
 * growth of an unbounded cache whose chunks were not reserved. Layers that read another layer's K/V are not appended
 * to. k, v: [n_kv_heads * head_dim]. False (nothing stored) for such a layer, a full unbounded cache, or a chunk that
 * max_memory or the system refuses. */
bool tg_kvcache_append(tg_kvcache *c, int layer, int64_t pos, const float *k, const float *v);

/* tg_kvcache_append in two parts, for a team that overlaps the kv-heads' stores with attention (the forward pass's
 * decode). tg_kvcache_append_start does what must come first (growth, eviction, a full residual's flush, sinks, the
 * keys' rotation), counts the token in (attention now sees it) and, when defer is set, leaves the stores whose codec
 * stores head by head (TG_APPEND_KEYS, TG_APPEND_VALUES: the returned mask) to tg_kvcache_append_head, which the
 * caller then runs once per kv-head h, from any thread, with the same v, before attention's last share
 * (tg_kvcache_attend_piece with split = n_split - 1) of h reads the token; the other shares do not read what it
 * writes. scratch: head_dim bytes of the caller's (the work of tg_kvcache_attend_piece serves). The store reads the
 * keys from the cache's staging row: no other append to this cache until every head is stored. Returns the mask
 * (0: everything stored), or -1 where tg_kvcache_append returns false. Same bytes as tg_kvcache_append. */
enum { TG_APPEND_KEYS = 1, TG_APPEND_VALUES = 2 };
int tg_kvcache_append_start(tg_kvcache *c, int layer, int64_t pos, const float *k, const float *v, bool defer);
void tg_kvcache_append_head(tg_kvcache *c, int layer, int h, int deferred, const float *v, uint8_t *scratch);

/* ---- attention, in pieces that callers run on their own threads (the forward pass's team) --------------------
 * The attention of the query of the token at position pos (already appended) over what `layer` may see,
 * out[n_heads * head_dim] = softmax(q k^T / sqrt(head_dim)) v per head (GQA heads sharing kv-heads), is
 * tg_kvcache_query, then every piece (h, s) of every kv-head h, then tg_kvcache_attend_combine per kv-head. Pieces
 * read quantised storage directly (never a dequantised copy of the cache) and only read the cache (and their own
 * work space), so any number may run concurrently between an append and the next append. Keys after pos are masked
 * (so a chunk may be appended first, as long as nothing it needs was evicted; tg_kvcache_plan says when), and so are
 * keys outside the layer's sliding window (pos - key_pos >= layer_window). */

/* Most shares one kv-head's visible tokens are split into. */
#define TG_ATTN_MAX_SPLITS 8
#define TG_ATTN_SPLIT_TOKENS 512 /* a share covers at least about this many tokens */

/* The number of shares (1..TG_ATTN_MAX_SPLITS) the attention of the token at pos in `layer` is split into: a
 * function of how many tokens it sees only, so results never depend on the caller's thread count. */
int tg_kvcache_attend_splits(const tg_kvcache *c, int layer, int64_t pos);
/* Floats of work space one piece needs (one buffer per concurrently running piece). */
size_t tg_kvcache_work_floats(const tg_kvcache *c);
/* Floats of one piece's partial result: (head_dim + 2) per query head of a kv-head. */
size_t tg_kvcache_part_floats(const tg_kvcache *c);
/* The queries of the token at pos, rotated at pos and scaled by 1/sqrt(head_dim): q_out[n_heads * head_dim] (may
 * alias q). Call after the token's append; not thread-safe (it caches the position's RoPE angles, and a
 * re-positioning cache the angles its pieces rotate the sinks with; pieces still compute them if this was not
 * called). */
void tg_kvcache_query(tg_kvcache *c, int layer, int64_t pos, const float *q, float *q_out);
/* Share `split` of n_split (from tg_kvcache_attend_splits) of the attention of the token at pos for kv-head h:
 * q_rot from tg_kvcache_query; part [tg_kvcache_part_floats] receives, per query head i of h, the largest score m_i,
 * l_i = sum exp(score - m_i) and o_i[head_dim] = sum exp(score - m_i) v (layout m[gq], l[gq], o[gq][head_dim]);
 * work [tg_kvcache_work_floats] is scratch. */
void tg_kvcache_attend_piece(const tg_kvcache *c, int layer, int64_t pos, const float *q_rot, int h, int split,
                             int n_split, float *part, float *work);
/* Prefill: the pieces of kv-head h of nq tokens at consecutive positions pos0 .. pos0 + nq - 1 in one pass over the
 * keys and values they share (each row widened once for all nq * gq query heads). Token j's query is at
 * q_rot + j * q_stride (from tg_kvcache_query), its part at parts + j * part_stride; the results are those of
 * tg_kvcache_attend_piece(c, layer, pos0 + j, ..., h, 0, 1, ...) bit for bit. Only where
 * tg_kvcache_attend_group_ok says so; work [tg_kvcache_group_work_floats(c, nq)] is scratch. */
void tg_kvcache_attend_group(const tg_kvcache *c, int layer, int64_t pos0, int nq, const float *q_rot, size_t q_stride,
                             int h, float *parts, size_t part_stride, float *work);
/* Whether tg_kvcache_attend_group can take tokens pos0 .. pos0 + nq - 1 of `layer` (after their appends): the AVX-512
 * kernels are built in, the cache reads fp32 / fp16 / bf16 rows as stored (no KIVI codes, rotated sinks, sliding
 * window) and each token's attention is one share. False: run tg_kvcache_attend_piece per token. */
bool tg_kvcache_attend_group_ok(const tg_kvcache *c, int layer, int64_t pos0, int nq);
/* Query tokens per group (tg_kvcache_attend_group's nq): enough query heads to share each widened row (8 / gq, at
 * least 1), and the floats of work space a group of nq needs. */
int tg_kvcache_group_tokens(const tg_kvcache *c);
size_t tg_kvcache_group_work_floats(const tg_kvcache *c, int nq);
/* out[gq * head_dim] (the query heads of one kv-head) = its n_split parts (consecutive, tg_kvcache_part_floats
 * apart) combined; zeros for a head that sees nothing. */
void tg_kvcache_attend_combine(const tg_kvcache *c, const float *parts, int n_split, float *out);

/* ---- the attention-sink meter (docs/kvcache.md, "The attention-sink meter"): where the softmax mass of a query goes,
 * read from the exp(score - m) that a piece leaves in its work space. The visible tokens of a query are counted in
 * position order: the held sinks first, then the held non-sink tokens, oldest first; "the first N" are the first N
 * of them, "the newest 16" the last 16 (the query's own token included). */
#define TG_MASS_RANGES 4  /* first 1, first 4, first 16, newest 16 visible tokens */
#define TG_MASS_NEWEST 16
#define TG_MASS_FLOATS 6  /* per query head of a piece: m, l, then the unnormalised mass on each range */
/* Right after tg_kvcache_attend_piece(c, layer, pos, ..., h, split, n_split, part, work) and before work is used
 * again (same arguments): mass[gq * TG_MASS_FLOATS] receives per query head i of h the piece's m_i and l_i (copied
 * from part) and sum exp(score - m_i) over the piece's tokens in each range. Returns how many tokens the query sees
 * (over all shares). Reads only the cache and work. */
int64_t tg_kvcache_piece_mass(const tg_kvcache *c, int layer, int64_t pos, int h, int split, int n_split,
                              const float *part, const float *work, float *mass);
/* shares[gq * TG_MASS_RANGES] = the n_split pieces' masses (consecutive, gq * TG_MASS_FLOATS apart) combined as
 * tg_kvcache_attend_combine combines outputs: each range's share of the softmax, in [0, 1]; zeros for a head that
 * sees nothing. */
void tg_kvcache_mass_combine(const tg_kvcache *c, const float *mass, int n_split, double *shares);

/* How callers must schedule tokens through a cache: fixed when the cache is made, so the decode path asks for it
 * without cost. */
typedef struct {
    bool bounded;        /* StreamingLLM: the cache evicts, so it never fills up (tg_kvcache_has_room stays true) */
    bool token_by_token; /* appending a token may change what an earlier token sees (an eviction, a KIVI group
                          * quantised, a key grid re-fitted): a chunk must append and attend its tokens one at a time
                          * to compute what decoding them one by one computes */
    int max_chunk;       /* most tokens one forward call may take, 0 = no limit: 1 when a layer reads another layer's
                          * K/V under eviction (the whole chunk is appended there before it attends, and a later token
                          * may evict keys an earlier one still needs) */
} tg_cache_plan;

/* The cache's schedule (see tg_cache_plan). */
tg_cache_plan tg_kvcache_plan(const tg_kvcache *c);

/* True when one more token fits (always true for a bounded streaming cache). */
bool tg_kvcache_has_room(const tg_kvcache *c);
int64_t tg_kvcache_stored(const tg_kvcache *c);
void tg_kvcache_report(const tg_kvcache *c, int64_t position, tg_cache_report *r);

/* Test read-back: dequantised keys, rotated as the query of the token at query_pos sees them (at their positions;
 * re-positioned sinks at consecutive positions ending just before the oldest held window token's) and values of
 * `layer` into k_out/v_out [stored, n_kv_heads, head_dim] and the absolute positions into pos_out[stored], in slot
 * order; any output may be NULL. Returns stored. */
int64_t tg_kvcache_read_back(const tg_kvcache *c, int layer, int64_t query_pos, float *k_out, float *v_out,
                             int64_t *pos_out);

/* Bytes (the report's bytes_total) of K/V storage that a cache of this shape and policy sized for a history of
 * n_tokens holds, from the same closed form that tg_kvcache_new allocates by: an unbounded policy with a context of
 * exactly n_tokens, all of it allocated (a cache with a longer context holding n_tokens allocates that rounded up to
 * its chunk); a StreamingLLM policy the smaller of that and its bounded allocation (sink + window + group slack), so
 * the table stops growing at the bound. 0 with err filled when the policy is invalid or n_tokens <= 0. */
size_t tg_kvcache_bytes_for(const tg_cache_shape *shape, const tg_cache_params *params, int64_t n_tokens,
                            tg_error *err);

/* Allocation accounting, for tests: bytes of K/V storage, bytes of everything else, allocation calls made. */
void tg_kvcache_alloc_stats(const tg_kvcache *c, size_t *bytes_store, size_t *bytes_meta, int64_t *n_allocs);

/* Test hook: false switches attention to the scalar reference kernels (default true: AVX2 where built). */
void tg_kvcache_set_simd(tg_kvcache *c, bool on);
/* Test hook: the integer attention kernels use the VNNI instruction where the build has it (default) or its exact
 * AVX2 emulation (the same bits either way: the tests check it). */
void tg_kvcache_set_int_vnni(tg_kvcache *c, bool on);

#endif
