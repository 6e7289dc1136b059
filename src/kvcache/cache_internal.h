/* cache_internal.h — internal to src/kvcache: the resolved policy geometry (capacities and byte counts in closed
 * form), the storage structs, and the functions shared by policy.c, kvcache.c, attend.c and the store codecs.
 *
 * Token bookkeeping of one layer. Tokens at absolute positions < sink go to the sink rows (bounded caches only). The
 * others are numbered n = pos - sink ("non-sink index") and live in [first, n_appended); where a store keeps token n
 * is its codec's business (codec.h: plain rows, KIVI groups with a residual ring, whole-history KIVI). Grouped
 * stores keep tokens [qend, n_appended) in their residual ring. first and qend only move forward in whole blocks (G
 * tokens when a KIVI group exists), so eviction is O(1) per token. */
#ifndef TG_KVCACHE_INTERNAL_H
#define TG_KVCACHE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvcache/kivi.h"
#include "kvcache/kvcache.h"

/* How a store keeps its tokens (codec.h); which tokens a layer keeps (eviction.h). */
typedef struct tg_store_codec tg_store_codec;
typedef struct tg_eviction tg_eviction;

/* The byte layout of one store (the keys or the values of one layer), identical for every layer. */
typedef struct {
    tg_kv_precision precision;
    const tg_store_codec *codec;
    const tg_kivi_range *range; /* KIVI codecs; NULL for plain */
    bool per_channel;           /* keys: scales per channel; values: per token */
    size_t elem_bytes;          /* plain: 4 or 2 */
    size_t row_bytes;           /* one kv-head row of head_dim elements in storage */
    bool tiled;                 /* KIVI groups: each (group, kv-head) is a tile (kivi.h), when the shape allows */
    /* sizes in bytes of each buffer of one layer */
    size_t data_bytes;          /* rows / quantised units */
    size_t scale_bytes;         /* scale + zero arrays together (fp16 each) */
    size_t resid_bytes;         /* residual ring (at resid_precision) */
    size_t sink_bytes;          /* sink rows [sink][n_kv_heads][head_dim] at sink_precision */
    tg_kv_precision sink_precision; /* fp32 for KIVI stores, the plain precision otherwise */
    bool rewrites;              /* an append may re-code rows already held (a group quantised, a grid re-fitted) */
    /* data and scales as units (a row of every kv-head for plain stores, a KIVI group of G tokens for grouped ones),
     * allocated in chunks of chunk_units units (chunk k holds units [k * chunk_units, ...), the last one fewer):
     * one chunk of everything for a bounded cache, as tokens arrive for an unbounded one (geometry->lazy) */
    bool grows;                 /* the codec's data and scales are made of units in chunks */
    bool doubles;               /* instead: one block of units (rows) that an unbounded cache doubles as it fills,
                                 * moving what it holds (O(1) amortised), so that its rows stay one segment */
    size_t fixed_scale_bytes;   /* doubles: scales + zeros that do not grow with the rows (per-channel key grids) */
    int64_t unit_tokens;        /* tokens per unit: 1 or G */
    int64_t unit_lag;           /* non-sink tokens held before the first unit is needed (the residual ring) */
    int64_t n_units;            /* units of the whole capacity */
    size_t unit_data_bytes, unit_scale_bytes; /* bytes of one unit's data, scales + zeros */
    int64_t chunk_units;        /* units per chunk (>= 1) */
    int chunk_units_log2;       /* its log2 when a power of two, else -1 (or 0 when not chunked: unused) */
    int64_t n_chunks;           /* chunks of the whole capacity */
} tg_store_geom;

/* The policy resolved against a shape: every capacity the cache allocates, in closed form. */
typedef struct {
    int n_layers, n_kv_layers;
    int n_heads, n_kv_heads, head_dim;
    const tg_eviction *eviction; /* which tokens are kept */
    bool bounded;         /* StreamingLLM: sinks + window */
    int64_t sink;         /* sink tokens (0 when unbounded) */
    int64_t window;       /* window (0 when unbounded) */
    bool window_from_budget;
    int64_t context;      /* unbounded capacity */
    bool reposition;      /* effective: only with a window. Window keys are stored rotated at their absolute
                           * position, as vanilla stores them (RoPE is relative and the window contiguous, so their
                           * distances to the query are the slot distances); the sinks are stored pre-RoPE and
                           * rotated, per query, to (query position - query slot + sink index) */
    bool slot_rope;       /* test reference (tg_kvcache_new_slot_rope), with reposition: the former scheme, every key
                           * stored pre-RoPE and rotated to its cache slot when read, the query to its own slot */
    bool grouped;         /* a KIVI store with group size > 0 exists */
    int group;            /* G (grouped only) */
    int group_log2;       /* log2 G when G is a power of two, else -1 */
    int64_t block;        /* eviction unit: G when grouped, else 1 */
    int64_t residual_asked; /* R asked for (TG_KV_RESIDUAL_AUTO resolved) */
    int64_t residual;     /* effective residual R (grouped only) */
    int64_t res_cap;      /* residual ring rows: max(R, G), bounded by what can be held */
    tg_kv_precision resid_precision; /* residual ring storage: fp32, fp16 or bf16 */
    size_t resid_elem;    /* its bytes per element: 4 or 2 */
    tg_kv_precision sink_precision; /* KIVI stores' sinks: the residual precision (fp32 with quantize_sinks) */
    int64_t n_units;      /* quantised group units (grouped only) */
    int64_t row_cap;      /* rows of plain and whole-history stores */
    int64_t max_nonsink;  /* most non-sink tokens held after an append */
    int64_t max_stored;   /* sink + max_nonsink */
    bool lazy;            /* unbounded with stores made of units: chunks allocated as tokens arrive */
    int64_t chunk;        /* lazy: tokens per chunk (every store's chunk holds at least this many) */
    const tg_store_codec *force_k, *force_v; /* tests: codecs forced by name (NULL: the table's choice) */
    tg_store_geom k, v;
    bool rot_k, rot_v;    /* KIVI keys / values stored rotated (rotate.h): the query rotated, the output back */
    size_t bytes_layer;   /* all store bytes of one K/V layer */
} tg_cache_geom;

/* Validates params against shape and resolves them (the budget into a window), with the store codecs forced to
 * force_k / force_v where not NULL. False with a message about the policy. */
bool tg_cache_geom_resolve(const tg_cache_shape *shape, const tg_cache_params *params, const tg_store_codec *force_k,
                           const tg_store_codec *force_v, tg_cache_geom *g, tg_error *err);
/* Test hook: tg_kvcache_new with the keys' and the values' stores kept by the codecs of these names (codec.c's table;
 * NULL = the policy's choice). NULL with a message for an unknown name. */
tg_kvcache *tg_kvcache_new_with_codecs(const tg_cache_shape *shape, const tg_cache_params *params,
                                       const char *key_codec, const char *value_codec, tg_error *err);
/* The schedule a cache of this geometry needs (tg_kvcache_plan). */
tg_cache_plan tg_cache_geom_plan(const tg_cache_geom *g);
/* One-line policy description for the banner. */
void tg_cache_geom_policy(const tg_cache_geom *g, const tg_cache_params *params, char *buf, size_t size);
/* Bytes of all stores of all K/V layers at the whole capacity (what a bounded cache allocates up front). */
size_t tg_cache_geom_bytes(const tg_cache_geom *g);
/* The allocation level of store sg that holds n non-sink tokens (the whole capacity when the cache is not lazy):
 * its chunks, or its rows for a store that doubles. */
int64_t tg_store_chunks_for(const tg_cache_geom *g, const tg_store_geom *sg, int64_t n);
/* Bytes of store sg's data and scales + zeros at allocation level `level` (chunks, or rows when it doubles). */
void tg_store_level_bytes(const tg_store_geom *sg, int64_t level, size_t *data, size_t *scales);
/* Bytes of chunk k of store sg: its data and its scales + zeros. */
size_t tg_store_chunk_data_bytes(const tg_store_geom *sg, int64_t k);
size_t tg_store_chunk_scale_bytes(const tg_store_geom *sg, int64_t k);
/* Units in chunk k of store sg. */
int64_t tg_store_chunk_units(const tg_store_geom *sg, int64_t k);
/* Non-sink tokens store sg holds at allocation level `chunks` (its residual ring's included), at most g's
 * max_nonsink. */
int64_t tg_store_tokens_in(const tg_cache_geom *g, const tg_store_geom *sg, int64_t chunks);
/* Bytes of all stores of all K/V layers once n non-sink tokens are held: everything allocated up front plus the
 * chunks those tokens need (== tg_cache_geom_bytes when not lazy or n fills the capacity). */
size_t tg_cache_geom_bytes_held(const tg_cache_geom *g, int64_t n);

/* One store of one layer: buffers of the sizes its tg_store_geom gives, laid out by its codec. Data, scales and
 * zeros are chunks of units (tg_store_geom): data[k] holds units [k * chunk_units, ...); stores that are not made of
 * units have one chunk of everything. */
typedef struct {
    uint8_t **data;   /* [n_chunks] rows / quantised units */
    uint16_t **scale; /* [n_chunks] fp16 scales (KIVI) */
    uint16_t **zero;  /* [n_chunks] fp16 zeros, same shape as scale */
    int64_t n_alloc;  /* chunks allocated: [0, n_alloc) (a store that doubles: rows its one block holds) */
    uint8_t *resid;   /* grouped: [res_cap][n_kv_heads][head_dim] at resid_precision */
    uint8_t *sink;    /* [sink][n_kv_heads][head_dim] at sink_precision */
} tg_store;

typedef struct {
    tg_store k, v;
    int64_t n_sink;     /* sink tokens held */
    int64_t n_appended; /* non-sink tokens appended so far */
    int64_t first;      /* first non-sink token still held */
    int64_t qend;       /* grouped: first non-sink token still in the residual */
} tg_layer_cache;

/* Slots whose RoPE angles the slot_rope reference tabulates up front (65536: 8 MiB at head_dim 64); slots beyond
 * are rotated by the same formula computed per read (tg_rope_table_apply), with identical results. */
#define TG_REPOSITION_TABLE_SLOTS ((int64_t)1 << 16)
/* Sinks whose re-positioning angles are kept, per offset (4096: at most 1 MiB of cos and sin at head_dim 64, 256 B
 * per sink); sinks beyond are rotated with angles computed per read, with identical results. */
#define TG_SINK_ANGLE_ROWS ((int64_t)1 << 12)

struct tg_kvcache {
    tg_cache_shape shape;    /* kv_source / layer_window point at the copies below */
    int *kv_source;          /* [n_layers] */
    int *layer_window;       /* [n_layers] */
    tg_cache_params params;
    tg_cache_geom g;
    tg_cache_plan plan;      /* from g, once */
    char policy[sizeof ((tg_cache_report *)0)->policy]; /* the banner's policy line, formatted once */
    tg_layer_cache *layers;  /* [n_layers]; only layers with kv_source[l] == l have storage */
    tg_rope_table *rope_tab; /* slot_rope: cos / sin of slots [0, min(max_stored, TG_REPOSITION_TABLE_SLOTS)) */
    double *inv_freq;        /* reposition: [head_dim / 2] each pair's frequency (rope_inv_freq, or theta^(-2i/D)) */
    int64_t sink_off;        /* reposition: the offset whose sink angles sink_cos / sink_sin hold (-1: none yet) */
    int64_t sink_rows;       /* reposition: sinks with angles kept, min(sink, TG_SINK_ANGLE_ROWS) */
    float *sink_cos;         /* reposition: [sink_rows][head_dim / 2] cos of sink j at position sink_off + j */
    float *sink_sin;         /* [sink_rows][head_dim / 2] */
    float *scratch_k;        /* [n_kv_heads * head_dim] append staging */
    int64_t rope_pos;        /* position whose RoPE angles rope_cos / rope_sin hold (-1: none yet) */
    float *rope_cos;         /* [head_dim / 2]: into rope_memo */
    float *rope_sin;         /* [head_dim / 2] */
    float *rope_memo;        /* [TG_ROPE_MEMO][2][head_dim / 2 + 1] cos, sin of the recent positions (a chunk's
                              * tokens: computed by the first layer, read by the others) */
    int64_t *rope_memo_pos;  /* [TG_ROPE_MEMO] the position each slot holds (slot pos % TG_ROPE_MEMO; -1: none) */
    double *rope_pow;        /* [head_dim / 2] theta^(-2i / head_dim), exactly tg_rope_angles' factor (unscaled) */
    double *rope_inv_freq;   /* [head_dim / 2] copy of shape->rope_inv_freq (NULL: unscaled) */
    uint8_t *sink_codes;     /* quantize_sinks: [sink][head_dim] codes of one kv-head's sinks (at most a byte each) */
    uint16_t *sink_grid;     /* quantize_sinks: [2 * head_dim] per-channel fp16 scales, then zeros */
    float *group_f32;        /* residual not fp32: [group][n_kv_heads * head_dim] the group being flushed, widened */
    float *rot_sign;         /* rot_k or rot_v: [n_layers][n_kv_heads][head_dim] each head's signs (rotate.h) */
    float *scratch_v;        /* rot_v: [n_kv_heads * head_dim] the token's rotated values */
    uint8_t *tile_rows;      /* tiled KIVI stores: [group][head_dim] packed rows on their way into a tile */
    bool int_vnni;           /* integer attention kernels: the VNNI instruction where built (tests: its emulation) */
    bool simd;               /* AVX2 kernels (tests switch them off to compare with the scalar reference) */
    size_t bytes_store;      /* allocated for K/V storage (== g.bytes_layer * n_kv_layers once every chunk is) */
    double mem_limit;        /* max_memory resolved: the most bytes bytes_store may reach (< 0: none) */
    int64_t n_chunk_blocks;  /* chunks allocated after tg_kvcache_new (freed apart from `owned`) */
    size_t bytes_meta;       /* allocated for everything else */
    void **owned;            /* [max_owned] every block allocated above (tg_kvcache_free frees them) */
    size_t n_owned, max_owned;
    int64_t n_allocs;        /* allocation calls made (all in tg_kvcache_new) */
    uint64_t serial;         /* tg_kvcache_serial's */
};

#define TG_ROPE_MEMO 64 /* positions whose RoPE angles a cache keeps (a prefill chunk's) */

/* Makes rope_cos / rope_sin the angles of position pos (computed once per position: a token's key and its query
 * share them). Not thread-safe: called from append and tg_kvcache_query only. */
void tg_kvcache_rope_at(tg_kvcache *c, int64_t pos);
/* Rotates x[head_dim] (one head) to cache slot `slot` with the precomputed table (slot_rope only). */
void tg_kvcache_rotate_slot(const tg_kvcache *c, float *x, int64_t slot);
/* Re-positioning: the position offset of the sinks seen by the query of the token at pos in a layer holding L, so
 * that sink j sits at position offset + j: pos minus the query's slot (0 while the sinks fill, then L->first). */
int64_t tg_kvcache_sink_offset(const tg_kvcache *c, const tg_layer_cache *L, int64_t pos);
/* Makes sink_cos / sink_sin the angles of sink positions offset + j (once per offset; not thread-safe: called
 * from tg_kvcache_query only). */
void tg_kvcache_sink_angles(tg_kvcache *c, int64_t offset);
/* Rotates x[head_dim] (one head of pre-RoPE sink j) to position offset + j: with the kept angles when they are of
 * this offset, else computed here (the same double-precision formula, identical results). Only reads c. */
void tg_kvcache_rotate_sink(const tg_kvcache *c, float *x, int64_t j, int64_t offset);
/* Test hook: tg_kvcache_new, but a re-positioning cache runs the slot_rope reference scheme (the former default
 * implementation: pre-RoPE keys rotated at their slots when read). */
tg_kvcache *tg_kvcache_new_slot_rope(const tg_cache_shape *shape, const tg_cache_params *params, tg_error *err);
/* The softmax of a piece's scores: sc[i * ld + t] (query head i of the kv-head, t < nt) becomes exp(score - m_i)
 * (zeros for a head whose scores are all -inf or NaN-free -inf), part[i] = m_i (the largest score, NaNs skipped),
 * part[gq + i] = l_i (their sum; NaN when a score is). True when some head has a finite maximum (the value sweep
 * must then run for every head). The one softmax of tg_kvcache_attend_piece and of the grouped prefill pieces. */
bool tg_kvcache_piece_softmax(const tg_kvcache *c, float *sc, int64_t ld, int64_t nt, float *part);
/* What the query of the token at pos sees in `layer` (attend.c's view): sinks [0 or later, *s1], non-sink tokens
 * [*lo, *hi]; returns how many. *plain: the layer has no sliding window and no sink is rotated when read (no
 * re-positioned sinks, not the slot_rope reference), so the visible sinks start at 0 and every key is read as stored. */
int64_t tg_kvcache_visible(const tg_kvcache *c, int layer, int64_t pos, int64_t *s1, int64_t *lo, int64_t *hi,
                           bool *plain);
/* Dequantised / widened key or value row of non-sink token n (or sink j when is_sink) of kv-head h into out
 * [head_dim], as stored (no rotation); read through the store's segments. */
/* Signs of the rotation of layer's K/V (its kv_source's) for kv-head h (rotate.h); only when rot_k or rot_v. */
static inline const float *tg_kvcache_rot_sign(const tg_kvcache *c, int layer, int h) {
    return c->rot_sign + ((int64_t)c->kv_source[layer] * c->g.n_kv_heads + h) * c->g.head_dim;
}
/* rot_v: the partial outputs o[gq][head_dim] of kv-head h's query heads rotated back (R^T, rotate.h); else
 * nothing. Linear, so a piece's partial sum may be rotated back before the shares are combined. */
void tg_kvcache_rot_output(const tg_kvcache *c, int layer, int h, float *o);
void tg_kvcache_load_row(const tg_kvcache *c, const tg_layer_cache *L, bool keys, bool is_sink, int64_t n, int h,
                         float *out);

#endif
