/* cache_internal.h — internal to src/kvcache: the resolved policy geometry (capacities and byte counts in closed
 * form), the storage structs, and the functions shared by policy.c, kvcache.c and attend.c.
 *
 * Token bookkeeping of one layer. Tokens at absolute positions < sink go to the sink rows (bounded caches only). The
 * others are numbered n = pos - sink ("non-sink index") and live in [first, n_appended):
 *   - plain stores (fp32/fp16/bf16) keep token n in row n mod row_cap;
 *   - grouped KIVI stores keep tokens [first, qend) quantised, token n in group unit (n / G) mod n_units, row n mod
 *     G, and tokens [qend, n_appended) in the fp32 residual ring, row n mod res_cap;
 *   - whole-history KIVI stores (group size 0) keep token n in row n mod row_cap, keys with one (scale, zero) per
 *     (kv-head, channel) for all rows.
 * first and qend only move forward in whole blocks (G tokens in grouped mode), so eviction is O(1) per token. */
#ifndef TG_KVCACHE_INTERNAL_H
#define TG_KVCACHE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvcache/kivi.h"
#include "kvcache/kvcache.h"

/* Where a store keeps its tokens. */
typedef enum {
    TG_STORE_PLAIN = 0,  /* fp32 / fp16 / bf16 rows */
    TG_STORE_GROUPED,    /* KIVI with groups of G and a full-precision (fp32, fp16 or bf16) residual */
    TG_STORE_WHOLE,      /* KIVI, the design note's scheme: per-channel key scales over the whole history */
} tg_store_kind;

/* The byte layout of one store (the keys or the values of one layer), identical for every layer. */
typedef struct {
    tg_kv_precision precision;
    tg_store_kind kind;
    const tg_kivi_range *range; /* NULL for plain */
    bool per_channel;           /* keys: scales per channel; values: per token */
    size_t elem_bytes;          /* plain: 4 or 2 */
    size_t row_bytes;           /* one kv-head row of head_dim elements in storage */
    /* sizes in bytes of each buffer of one layer */
    size_t data_bytes;          /* rows / quantised units */
    size_t scale_bytes;         /* scale + zero arrays together (fp16 each) */
    size_t resid_bytes;         /* residual ring (at resid_precision) */
    size_t sink_bytes;          /* sink rows: fp32 for KIVI stores, the plain precision otherwise */
} tg_store_geom;

/* The policy resolved against a shape: every capacity the cache allocates, in closed form. */
typedef struct {
    int n_layers, n_kv_layers;
    int n_heads, n_kv_heads, head_dim;
    bool bounded;         /* StreamingLLM: sinks + window */
    int64_t sink;         /* sink tokens (0 when unbounded) */
    int64_t window;       /* window (0 when unbounded) */
    bool window_from_budget;
    int64_t context;      /* unbounded capacity */
    bool reposition;      /* effective: only with a window */
    bool grouped;         /* a KIVI store with group size > 0 exists */
    int group;            /* G (grouped only) */
    int64_t block;        /* eviction unit: G when grouped, else 1 */
    int64_t residual;     /* effective residual R (grouped only) */
    int64_t res_cap;      /* residual ring rows: max(R, G), bounded by what can be held */
    tg_kv_precision resid_precision; /* residual ring storage: fp32, fp16 or bf16 */
    size_t resid_elem;    /* its bytes per element: 4 or 2 */
    int64_t n_units;      /* quantised group units (grouped only) */
    int64_t row_cap;      /* rows of plain and whole-history stores */
    int64_t max_nonsink;  /* most non-sink tokens held after an append */
    int64_t max_stored;   /* sink + max_nonsink */
    tg_store_geom k, v;
    size_t bytes_layer;   /* all store bytes of one K/V layer */
} tg_cache_geom;

/* Validates params against shape and resolves them (the budget into a window). False with a message naming the
 * flag. */
bool tg_cache_geom_resolve(const tg_cache_shape *shape, const tg_cache_params *params, tg_cache_geom *g,
                           tg_error *err);
/* One-line policy description for the banner. */
void tg_cache_geom_policy(const tg_cache_geom *g, const tg_cache_params *params, char *buf, size_t size);
/* Bytes of all stores of all K/V layers (the report's bytes_total). */
size_t tg_cache_geom_bytes(const tg_cache_geom *g);

/* One store of one layer. */
typedef struct {
    uint8_t *data;    /* plain: [n_kv_heads][row_cap][head_dim] elems (head-major: attention streams one kv-head's
                       * rows); grouped: [n_units][n_kv_heads][G][row_bytes];
                       * whole: [row_cap][n_kv_heads][row_bytes] */
    uint16_t *scale;  /* fp16. grouped keys: [n_units][n_kv_heads][head_dim]; grouped values: [n_units][n_kv_heads][G];
                       * whole keys: [n_kv_heads][head_dim]; whole values: [row_cap][n_kv_heads] */
    uint16_t *zero;   /* same shape as scale */
    uint8_t *resid;   /* grouped: [res_cap][n_kv_heads][head_dim] at resid_precision */
    uint8_t *sink;    /* [sink][n_kv_heads][head_dim], fp32 for KIVI stores, plain precision otherwise */
} tg_store;

typedef struct {
    tg_store k, v;
    int64_t n_sink;     /* sink tokens held */
    int64_t n_appended; /* non-sink tokens appended so far */
    int64_t first;      /* first non-sink token still held */
    int64_t qend;       /* grouped: first non-sink token still in the residual */
} tg_layer_cache;

/* Slots whose re-positioning RoPE angles are tabulated up front (65536: 8 MiB at head_dim 64); slots beyond are
 * rotated by the same formula computed per read (tg_rope_table_apply), with identical results. */
#define TG_REPOSITION_TABLE_SLOTS ((int64_t)1 << 16)

struct tg_kvcache {
    tg_cache_shape shape;    /* kv_source / layer_window point at the copies below */
    int *kv_source;          /* [n_layers] */
    int *layer_window;       /* [n_layers] */
    tg_cache_params params;
    tg_cache_geom g;
    tg_layer_cache *layers;  /* [n_layers]; only layers with kv_source[l] == l have storage */
    tg_rope_table *rope_tab; /* reposition: cos / sin of slots [0, min(max_stored, TG_REPOSITION_TABLE_SLOTS)) */
    float *scratch_k;        /* [n_kv_heads * head_dim] append staging */
    float *scratch_q;        /* [n_heads * head_dim] rotated, scaled queries */
    float *work;             /* [n_kv_heads][tg_kvcache_work_floats] one attention piece's work space per kv-head */
    float *parts;            /* [n_kv_heads][TG_ATTN_MAX_SPLITS][tg_kvcache_part_floats] pieces' partial results */
    int64_t rope_pos;        /* position whose RoPE angles rope_cos / rope_sin hold (-1: none yet) */
    float *rope_cos;         /* [head_dim / 2] */
    float *rope_sin;         /* [head_dim / 2] */
    double *rope_inv_freq;   /* [head_dim / 2] copy of shape->rope_inv_freq (NULL: unscaled) */
    uint8_t *sink_codes;     /* quantize_sinks: [sink][head_dim] codes of one kv-head's sinks (at most a byte each) */
    uint16_t *sink_grid;     /* quantize_sinks: [2 * head_dim] per-channel fp16 scales, then zeros */
    float *group_f32;        /* residual not fp32: [group][n_kv_heads * head_dim] the group being flushed, widened */
    bool simd;               /* AVX2 kernels (tests switch them off to compare with the scalar reference) */
    size_t bytes_store;      /* allocated for K/V storage (== g.bytes_layer * n_kv_layers) */
    size_t bytes_meta;       /* allocated for everything else */
    int64_t n_allocs;        /* allocation calls made (all in tg_kvcache_new) */
};

/* Makes rope_cos / rope_sin the angles of position pos (computed once per position: a token's key and its query
 * share them). Not thread-safe: called from append and tg_kvcache_query only. */
void tg_kvcache_rope_at(tg_kvcache *c, int64_t pos);
/* Rotates x[head_dim] (one head) to cache slot `slot` with the precomputed table (reposition mode only). */
void tg_kvcache_rotate_slot(const tg_kvcache *c, float *x, int64_t slot);
/* Dequantised / widened key or value row of non-sink token n (or sink j when is_sink) of kv-head h into out
 * [head_dim], as stored (no rotation). */
void tg_kvcache_load_row(const tg_kvcache *c, const tg_layer_cache *L, bool keys, bool is_sink, int64_t n, int h,
                         float *out);

#endif
