/* vk_backend.h — internal to the Vulkan backend: its state (the compiled program, the device buffers, the KV mirror),
 * shared by vk_backend.c (creating it: checks, uploads, compiling) and vk_run.c (running one call).
 *
 * The KV mirror: the device holds, for every layer with its own K/V, the keys (rotated as the CPU cache stores them;
 * a re-positioned cache's sinks pre-RoPE) and values of the tokens attention may see, in slots: slot = position for
 * an unbounded cache; for StreamingLLM the sinks in slots [0, sink) and the rest in a ring of window + max_rows slots
 * (so appending a call's rows never overwrites a key one of its rows still sees). Every slot's position is in the
 * aux buffer, and attention masks by position (causal, the window, a layer's sliding window), so a chunk appended
 * at once computes what appending and attending its tokens one at a time computes. The host's tg_kvcache is still
 * appended to after every call (from the pre-RoPE keys the call read back): it keeps the bookkeeping and the report.
 * A KIVI cache is stored on the device in its own format instead, its rows appended and attended one at a time
 * within a layer (vk_kivi.c). */
#ifndef TG_BACKEND_VULKAN_VK_BACKEND_H
#define TG_BACKEND_VULKAN_VK_BACKEND_H

#include "backend/vulkan/vk_ctx.h"
#include "backend/vulkan/vk_profile.h"
#include "forward/backend.h"
#include "kvcache/cache_internal.h"

typedef enum { PL_EMBED, PL_RMSNORM, PL_MATMUL, PL_ROPE_Q, PL_KV_APPEND, PL_ATTEND, PL_GLU, PL_ADD, PL_KIVI_STORE,
              PL_ATTEND_KIVI, PL_ATTEND_MERGE, PL_KIVI_ROTATE, PL_COUNT } vk_pl;

/* attend.comp's splits along the slots for a cache's rows of a call when they are at most ATTEND_SPLIT_ROWS
 * (decode): up to ATTEND_MAX_SPLITS, one per 64 slots; their partials in the activations at part_off, room for
 * ATTEND_PART_ROWS rows (several caches' rows attend side by side, then their partials are merged; test_vulkan.c's
 * test_batch has calls of more split rows than that). */
#define ATTEND_SPLIT_ROWS 4
#define ATTEND_MAX_SPLITS 64
#define ATTEND_PART_ROWS 8

/* An uploaded weight matrix: its device copy (in the file's layout) and the descriptor set that binds it. */
typedef struct {
    const void *data; /* the host tensor's data (the key: a tied matrix is uploaded once) */
    tg_vk_buf buf;
    VkDescriptorSet set;
    uint32_t row_bytes, type;
} vk_weight;

/* A KIVI cache's token of one row of the call (vk_kivi.c): what its append does and, after it, the host cache's
 * bookkeeping of every K/V layer (cache_internal.h's tg_layer_cache). */
typedef struct {
    int64_t pos;
    bool is_sink;        /* the token goes to sink idx; else it is non-sink token idx */
    int64_t idx;
    bool flush;          /* a residual group [flush_at, flush_at + G) is quantised first */
    int64_t flush_at;
    int64_t n_sink, first, n_appended, qend;
} vk_kivi_step;

/* One cache's copy on the device (vk_kv.c): the KV mirror's keys and values, a buffer each per K/V layer (a device's
 * storage-buffer range, often 4 GiB, bounds one buffer: a whole-context 8B cache is 8 GiB of keys), or a KIVI
 * cache's stores (kc[0]; vc[0] a placeholder), the descriptor sets binding them (with the norms at binding 0), and
 * which cache it holds: the cache's serial (kvcache.h) when the device last held exactly what the cache holds. */
typedef struct {
    const tg_kvcache *cache; /* NULL: free */
    uint64_t serial;
    uint64_t last_call;      /* the backend's call that last used it */
    tg_vk_buf *kc, *vc;      /* [n_kvbuf] */
    VkDescriptorSet *set;    /* [n_kvbuf] */
    VkDescriptorPool pool;
    uint32_t a_slot_pos;     /* a StreamingLLM mirror's slot positions in aux (n_slots words); else unused */
} vk_kv;

/* One program operation as the backend runs it. */
typedef struct {
    tg_op_kind kind;
    tg_val out, in, in2;
    int layer;         /* the layer the operation belongs to (K / V products, rope/append, attend) */
    int w;             /* EMBED, MATMUL: index in weights */
    const tg_tensor *t;
    uint32_t norm_off; /* NORM: the weight's offset in floats in the norms buffer */
    bool own_kv;
    bool add_out;      /* MATMUL: the sum is added to `out` (the residual add that followed it, fused) */
    bool no_barrier;   /* MATMUL: the next operation is a product of the same input into another output */
    bool skip;         /* fused into the operation before it */
} vk_op;

struct tg_backend {
    const struct tg_model *m;
    tg_vk_ctx *vk;
    int device_index; /* the N of --device vulkan:N */
    int max_rows;
    VkPipeline pl[PL_COUNT];
    VkDescriptorPool pool;
    VkDescriptorSet set_norms; /* binding 0: the norm weights (= set_kv[0]) */
    vk_weight *weights;        /* [n_weights] */
    int n_weights;
    vk_op *ops; /* [n_ops] */
    int n_ops;
    tg_vk_buf norms, act, aux;
    /* the caches' copies (vk_kv.c): up to max_rows of them (a call's rows have at most that many caches), made as
     * caches come and kept for the next; each of n_kvbuf buffers (kv_bytes in all, under kv_limit for all copies
     * together); every row's copy in the call (row_kv[max_rows]); calls counts the calls; none is the placeholder
     * the other descriptor sets bind for the KV buffers */
    vk_kv *kv;
    int n_kv, *row_kv;
    int n_kvbuf;
    size_t kv_buf_bytes[2], kv_bytes;
    double kv_limit;
    uint64_t calls;
    tg_vk_buf none;
    tg_cache_geom ref;   /* the geometry of the cache the backend was made for: fits() compares others to it */
    bool ref_qsinks;
    tg_vk_buf rb;   /* readback (host-visible): a call's logits rows from float 0, its K / V rows from rb_kv */
    size_t rb_kv;
    VkBufferCopy *regions; /* [1 + 2 n_layers] the readback's copies */
    tg_vk_profile *prof;   /* TG_VULKAN_PROFILE=1 only */
    /* activations: value v of the call's rows at act + off[v], ld[v] floats a row; K and V hold every layer's rows
     * (layer l's at off + l * max_rows * ld), read back for the host cache's appends */
    uint32_t off[TG_VAL_COUNT], ld[TG_VAL_COUNT];
    uint32_t part_off; /* attend.comp's split partials (ATTEND_PART_ROWS x n_heads x ATTEND_MAX_SPLITS x (hd + 2)) */
    /* the KV mirror's geometry */
    int *kv_index;           /* [n_layers] a K/V layer's index in the mirror (-1: the layer reads another's) */
    uint32_t n_slots, ring;  /* slots per layer; StreamingLLM: the window's ring (0: unbounded, slot = position) */
    uint32_t sink, window, max_sink;
    bool k16, v16, reposition;
    const int *layer_window; /* [n_layers] or NULL */
    const int *kv_source;    /* [n_layers] */
    /* a KIVI cache (vk_kivi.c): its stores in kc (vc a placeholder), their descriptors (desc[n_desc], copied to aux
     * at a_desc: keys then values of each K/V layer), each store's kind (0 plain, 1 KIVI with a residual, 2 KIVI
     * provisional, 3 KIVI without groups: keys [0], values [1]), the fp32 staging of the rows' rotated keys and values in act (row t's keys
     * at stage_off + 2 t kvd, its values kvd after them), each row's step [max_rows] */
    bool kivi;
    uint32_t *desc, n_desc, a_desc, stage_off;
    size_t kivi_words; /* a KIVI copy's store buffer, in words */
    int kind[2];
    vk_kivi_step *steps;
    /* a rotated KIVI cache (kvcache/rotate.h): keys and / or values rotated; the signs of every layer and kv-head
     * ([n_layers][n_kv_heads][head_dim] floats, tg_rot_signs') in aux at a_rot; the Walsh–Hadamard block */
    bool rot_k, rot_v;
    bool quantize_sinks; /* the sinks quantised once complete (--kv-quantize-sinks) */
    uint32_t a_rot, rot_block;
    /* aux: word offsets of the row table */
    uint32_t a_ids, a_pos, a_slot, a_slot_pos, a_cos, a_sin, a_sink_cos, a_sink_sin;
};

/* vk_kv.c. The cache copies' first one made (at create: so that a cache the device cannot hold fails there);
 * every row's copy of the call bound (row_kv), each brought up to date with its cache (a cache the device did not
 * append to, a restored snapshot: its tokens uploaded from the host cache); false (err filled) when a copy cannot
 * be had. After the call: each copy's serial taken (the host cache appended to). */
bool tg_vk_kv_first(tg_backend *be, tg_error *err);
bool tg_vk_kv_bind(tg_backend *be, const tg_rows *rows, tg_error *err);
void tg_vk_kv_done(tg_backend *be, const tg_rows *rows);
/* Whether cache c has the geometry the backend was made for (its copies take the same buffers); freeing every
 * copy; forgetting cache c (its copy free for another). */
bool tg_vk_kv_same(const tg_backend *be, const tg_kvcache *c);
void tg_vk_kv_free_all(tg_backend *be);
void tg_vk_kv_forget(tg_backend *be, const tg_kvcache *c);

/* A descriptor pool of n_sets sets of the one layout (vk_backend.c); false (err filled) when the driver refuses. */
bool tg_vk_make_pool(tg_backend *be, int n_sets, VkDescriptorPool *pool, tg_error *err);
/* A descriptor set from pool binding b0 at 0, the activations and the row table, and kc / vc at 3 and 4
 * (vk_backend.c); VK_NULL_HANDLE (err filled) when the pool is out of sets. */
VkDescriptorSet tg_vk_make_set(tg_backend *be, VkDescriptorPool pool, const tg_vk_buf *b0, const tg_vk_buf *kc,
                               const tg_vk_buf *vc, tg_error *err);

/* The slot of the token at pos in the KV mirror (above; a KIVI cache has none: 0) (vk_kv.c). */
uint32_t tg_vk_slot_of(const tg_backend *be, int64_t pos);

/* Runs one call (vk_run.c). */
void tg_vk_run(tg_backend *be, const tg_rows *rows);

/* vk_kivi.c. Whether cache c stores either keys or values as KIVI codes; whether the backend takes its policy
 * (false, err naming what it does not take). */
bool tg_vk_kivi_wanted(const tg_kvcache *c);
bool tg_vk_kivi_check(const tg_kvcache *c, tg_error *err);
/* The layout of the device stores of c's n_kv K/V layers (be->desc filled, copied to aux by the caller;
 * be->kivi_words: a copy's store buffer). */
bool tg_vk_kivi_make(tg_backend *be, const tg_kvcache *c, int n_kv, tg_error *err);
/* be->steps[t0 .. t0 + n) for the tokens at pos[0 .. n) appended to c in that order (and those rows' sink angles in
 * aux); false when c fills up before the last. */
bool tg_vk_kivi_prepare(tg_backend *be, const tg_kvcache *c, const int64_t *pos, int n, int t0);
/* Records layer's store steps of row t's token (its keys and values staged at be->stage_off + 2 t kvd), and row
 * t's attention of layer (queries at q_off, output at out_off: the row's own). */
void tg_vk_kivi_append(tg_backend *be, int layer, int t);
/* A rotated cache (be->rot_k / rot_v): records the rotation of layer's n staged rows (kivi_rotate.comp); else
 * nothing. */
void tg_vk_kivi_rotate(tg_backend *be, int layer, int n);
void tg_vk_kivi_attend(tg_backend *be, int layer, int t, uint32_t q_off, uint32_t out_off);

#endif
