/* vk_backend.h — internal to the Vulkan backend: its state (the compiled program, the device buffers, the KV mirror),
 * shared by vk_backend.c (creating it: checks, uploads, compiling) and vk_run.c (running one call).
 *
 * The KV mirror: the device holds, for every layer with its own K/V, the keys (rotated as the CPU cache stores them;
 * a re-positioned cache's sinks pre-RoPE) and values of the tokens attention may see, in slots: slot = position for
 * an unbounded cache; for StreamingLLM the sinks in slots [0, sink) and the rest in a ring of window + max_rows slots
 * (so appending a call's rows never overwrites a key one of its rows still sees). Every slot's position is in the
 * aux buffer, and attention masks by position (causal, the window, a layer's sliding window), so a chunk appended
 * at once computes what appending and attending its tokens one at a time computes. The host's tg_kvcache is still
 * appended to after every call (from the pre-RoPE keys the call read back): it keeps the bookkeeping and the report. */
#ifndef TG_BACKEND_VULKAN_VK_BACKEND_H
#define TG_BACKEND_VULKAN_VK_BACKEND_H

#include "backend/vulkan/vk_ctx.h"
#include "forward/backend.h"

typedef enum { PL_EMBED, PL_RMSNORM, PL_MATMUL, PL_ROPE_Q, PL_KV_APPEND, PL_ATTEND, PL_GLU, PL_ADD, PL_COUNT } vk_pl;

/* An uploaded weight matrix: its device copy (in the file's layout) and the descriptor set that binds it. */
typedef struct {
    const void *data; /* the host tensor's data (the key: a tied matrix is uploaded once) */
    tg_vk_buf buf;
    VkDescriptorSet set;
    uint32_t row_bytes, type;
} vk_weight;

/* One program operation as the backend runs it. */
typedef struct {
    tg_op_kind kind;
    tg_val out, in, in2;
    int layer;         /* the layer the operation belongs to (K / V products, rope/append, attend) */
    int w;             /* EMBED, MATMUL: index in weights */
    const tg_tensor *t;
    uint32_t norm_off; /* NORM: the weight's offset in floats in the norms buffer */
    bool own_kv;
} vk_op;

struct tg_backend {
    const struct tg_model *m;
    tg_vk_ctx *vk;
    int max_rows;
    VkPipeline pl[PL_COUNT];
    VkDescriptorPool pool;
    VkDescriptorSet set_norms; /* binding 0: the norm weights */
    vk_weight *weights;        /* [n_weights] */
    int n_weights;
    vk_op *ops; /* [n_ops] */
    int n_ops;
    tg_vk_buf norms, act, aux, kc, vc;
    /* activations: value v of the call's rows at act + off[v], ld[v] floats a row; K and V hold every layer's rows
     * (layer l's at off + l * max_rows * ld), read back for the host cache's appends */
    uint32_t off[TG_VAL_COUNT], ld[TG_VAL_COUNT];
    /* the KV mirror */
    const tg_kvcache *bound; /* the cache whose tokens the mirror holds (NULL: none yet) */
    int *kv_index;           /* [n_layers] a K/V layer's index in the mirror (-1: the layer reads another's) */
    uint32_t n_slots, ring;  /* slots per layer; StreamingLLM: the window's ring (0: unbounded, slot = position) */
    uint32_t sink, window, max_sink;
    bool k16, v16, reposition;
    const int *layer_window; /* [n_layers] or NULL */
    const int *kv_source;    /* [n_layers] */
    /* aux: word offsets of the row table */
    uint32_t a_ids, a_pos, a_slot, a_slot_pos, a_cos, a_sin, a_sink_cos, a_sink_sin;
};

/* Runs one call (vk_run.c). */
void tg_vk_run(tg_backend *be, const tg_rows *rows);

#endif
