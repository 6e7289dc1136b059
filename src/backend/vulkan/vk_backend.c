/* vk_backend.c — the Vulkan backend's row of backend.h: what it accepts (F32 / F16 / BF16 / Q8_0 / Q4_0 / Q4_K /
 * Q5_K / Q6_K weights, fp32 / fp16 and KIVI caches (vk_kivi.c), unbounded or StreamingLLM, and the Llama program's
 * operations), the weights uploaded once, the activations and the KV mirror (vk_backend.h) allocated once, the
 * program compiled into operations with their pipelines and descriptor sets. vk_run.c runs the calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/vk_backend.h"
#include "kernels/repack.h"
#include "kernels/types.h"
#include "kvcache/cache_internal.h"
#include "kvcache/rotate.h"
#include "util/checked.h"

static const char *const pl_names[PL_COUNT] = {"embed", "rmsnorm", "matmul", "rope_q", "kv_append", "attend", "glu",
                                               "add", "kivi_store", "attend_kivi", "attend_merge", "kivi_rotate"};

/* ---- what the backend accepts ----------------------------------------------------------------------------------- */

/* The weight types shaders/common.glsl's w_elem decodes. */
static bool type_ok(tg_dtype t) {
    static const tg_dtype ok[] = {TG_DT_F32, TG_DT_F16, TG_DT_BF16, TG_DT_Q8_0, TG_DT_Q4_0, TG_DT_Q4_K, TG_DT_Q5_K,
                                  TG_DT_Q6_K};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (t == ok[i]) return true;
    return false;
}

static bool cache_ok(const tg_kvcache *c, tg_error *err) {
    const tg_cache_geom *g = &c->g;
    const tg_kv_precision pk = g->k.precision, pv = g->v.precision;
    if (tg_vk_kivi_wanted(c)) {
        if (!tg_vk_kivi_check(c, err)) return false;
    } else if ((pk != TG_KV_FP32 && pk != TG_KV_FP16) || (pv != TG_KV_FP32 && pv != TG_KV_FP16)) {
        return tg_fail(err, "vulkan: KV cache precision %s keys / %s values is not on the Vulkan backend yet (fp32, "
                            "fp16 and the KIVI ones are)", tg_kv_precision_name(pk), tg_kv_precision_name(pv));
    }
    if (g->slot_rope) return tg_fail(err, "vulkan: the slot-RoPE test cache is not on the Vulkan backend");
    if (g->n_heads % g->n_kv_heads || g->head_dim % 2 || g->head_dim > 256)
        return tg_fail(err, "vulkan: head shape %d heads / %d kv-heads of %d is not supported (head_dim even, <= 256)",
                       g->n_heads, g->n_kv_heads, g->head_dim);
    return true;
}

static bool op_ok(const tg_op *o, tg_error *err) {
    switch (o->kind) {
    case TG_OP_EMBED:
    case TG_OP_MATMUL:
        if (type_ok(o->w->type)) return true;
        return tg_fail(err, "vulkan: weight type %s is not on the Vulkan backend yet (F32, F16, BF16, Q8_0, Q4_0, "
                            "Q4_K, Q5_K and Q6_K are)",
                       tg_dtype_name(o->w->type));
    case TG_OP_NORM:
        return o->norm == TG_NORM_RMS || tg_fail(err, "vulkan: only RMS norms are on the Vulkan backend yet");
    case TG_OP_GLU:
        return o->glu == TG_GLU_SILU || tg_fail(err, "vulkan: only the SiLU-gated unit is on the Vulkan backend yet");
    case TG_OP_ROPE_APPEND:
    case TG_OP_ATTEND:
    case TG_OP_ADD:
        return true;
    default:
        return tg_fail(err, "vulkan: operation %s (this model's architecture) is not on the Vulkan backend yet",
                       tg_op_name(o->kind));
    }
}

/* ---- buffers ---------------------------------------------------------------------------------------------------- */

/* n * size with overflow checked into *out (bytes). */
static bool bytes_of(size_t n, size_t size, size_t *out, tg_error *err) {
    return tg_mul_size(n, size, out) || tg_fail(err, "vulkan: a buffer size overflows");
}

/* Uploads w in the file's layout (a repacked Q8_0 matrix is put back block by block) into device memory, with 16
 * bytes beyond its end (the shaders' unaligned word reads may touch the word after a row's last byte). */
static bool upload_weight(tg_backend *be, const tg_tensor *w, vk_weight *out, tg_error *err) {
    const size_t rb = tg_row_bytes(w->type, w->cols);
    size_t bytes;
    if (rb == 0 || rb > UINT32_MAX || !bytes_of((size_t)w->rows, rb, &bytes, err) || bytes > SIZE_MAX - 16)
        return tg_fail(err, "vulkan: a %s matrix of %lld columns cannot be uploaded", tg_dtype_name(w->type),
                       (long long)w->cols);
    if (!tg_vk_buf_new(be->vk, bytes + 16, TG_VK_DEVICE, "a weight matrix", &out->buf, err)) return false;
    bool ok;
    if (w->row_group) {
        uint8_t *host = malloc(bytes);
        if (!host) return tg_fail(err, "out of memory");
        const size_t bb = tg_weight_type_of(w->type)->block_bytes;
        const int64_t nb = w->cols / tg_weight_type_of(w->type)->block_elems;
        for (int64_t r = 0; r < w->rows; r++)
            for (int64_t b = 0; b < nb; b++) tg_repack_block(w, r, b, host + (size_t)r * rb + (size_t)b * bb);
        ok = tg_vk_upload(be->vk, &out->buf, 0, host, bytes, err);
        free(host);
    } else {
        ok = tg_vk_upload(be->vk, &out->buf, 0, w->data, bytes, err);
    }
    out->data = w->data;
    out->row_bytes = (uint32_t)rb;
    out->type = (uint32_t)w->type;
    return ok;
}

VkDescriptorSet tg_vk_make_set(tg_backend *be, VkDescriptorPool pool, const tg_vk_buf *b0, const tg_vk_buf *kc,
                               const tg_vk_buf *vc, tg_error *err) {
    const VkDescriptorSetAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                            .descriptorPool = pool, .descriptorSetCount = 1,
                                            .pSetLayouts = &be->vk->set_layout};
    VkDescriptorSet set = VK_NULL_HANDLE;
    if (be->vk->f.vkAllocateDescriptorSets(be->vk->dev, &ai, &set) != VK_SUCCESS) {
        tg_fail(err, "vulkan: out of descriptor sets");
        return VK_NULL_HANDLE;
    }
    const tg_vk_buf *bufs[TG_VK_BINDINGS] = {b0, &be->act, &be->aux, kc, vc, &be->act};
    VkDescriptorBufferInfo info[TG_VK_BINDINGS];
    VkWriteDescriptorSet w[TG_VK_BINDINGS];
    for (int i = 0; i < TG_VK_BINDINGS; i++) {
        info[i] = (VkDescriptorBufferInfo){.buffer = bufs[i]->buf, .offset = 0, .range = VK_WHOLE_SIZE};
        w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = set,
                                      .dstBinding = (uint32_t)i, .descriptorCount = 1,
                                      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .pBufferInfo = &info[i]};
    }
    be->vk->f.vkUpdateDescriptorSets(be->vk->dev, TG_VK_BINDINGS, w, 0, NULL);
    return set;
}

/* The activation layout (be->off / be->ld) and its size in floats. */
static bool layout_acts(tg_backend *be, size_t *floats, tg_error *err) {
    const tg_hparams *hp = &be->m->hp;
    const size_t rows = (size_t)be->max_rows, qd = (size_t)hp->n_heads * (size_t)hp->head_dim;
    const size_t kvd = (size_t)hp->n_kv_heads * (size_t)hp->head_dim;
    const size_t per_row[TG_VAL_COUNT] = {
        [TG_VAL_X] = (size_t)hp->d_model, [TG_VAL_H] = (size_t)hp->d_model, [TG_VAL_Q] = qd,
        [TG_VAL_K] = kvd * (size_t)hp->n_layers, [TG_VAL_V] = kvd * (size_t)hp->n_layers, [TG_VAL_ATT] = qd,
        [TG_VAL_T] = (size_t)hp->d_model, [TG_VAL_GATE] = (size_t)hp->ffn_dim, [TG_VAL_UP] = (size_t)hp->ffn_dim,
        [TG_VAL_LOGITS] = (size_t)hp->vocab_size};
    size_t at = 0;
    for (int v = 0; v < TG_VAL_COUNT; v++) {
        size_t n;
        at = (at + 3) & ~(size_t)3; /* each value 16-byte aligned (the shaders' vec4 loads) */
        if (!bytes_of(rows, per_row[v], &n, err) || !tg_add_size(at, n, &at) || at > UINT32_MAX)
            return tg_fail(err, "vulkan: the activations of %d rows exceed 2^32 floats", be->max_rows);
        be->off[v] = (uint32_t)(at - n);
        be->ld[v] = (uint32_t)(v == TG_VAL_K || v == TG_VAL_V ? kvd : per_row[v]);
    }
    size_t stage; /* a KIVI cache's staged rows: each row's keys, then its values */
    if (!bytes_of(rows, 2 * kvd, &stage, err) || !tg_add_size(at, stage, &at) || at > UINT32_MAX)
        return tg_fail(err, "vulkan: the activations of %d rows exceed 2^32 floats", be->max_rows);
    be->stage_off = (uint32_t)(at - stage);
    be->part_off = (uint32_t)at;
    const size_t parts = (size_t)ATTEND_PART_ROWS * (size_t)hp->n_heads * ATTEND_MAX_SPLITS *
                         ((size_t)hp->head_dim + 2);
    if (!tg_add_size(at, parts, &at) || at > UINT32_MAX)
        return tg_fail(err, "vulkan: the activations of %d rows exceed 2^32 floats", be->max_rows);
    *floats = at;
    return true;
}

/* The limit of the device's KV stores (all the caches' copies together): the cache's max_memory when set (> 0),
 * else (0) the device's largest device-local heap; none (< 0) with max_memory < 0. */
static double device_limit(const tg_backend *be, const tg_kvcache *c) {
    const int64_t asked = c->params.max_memory;
    VkDeviceSize heap = 0;
    for (uint32_t i = 0; i < be->vk->mem_props.memoryHeapCount; i++)
        if ((be->vk->mem_props.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) &&
            be->vk->mem_props.memoryHeaps[i].size > heap)
            heap = be->vk->mem_props.memoryHeaps[i].size;
    return asked < 0 ? -1.0 : asked > 0 ? (double)asked : heap > 0 ? (double)heap : -1.0;
}

/* False (err naming --max-memory) when kv_bytes exceed the backend's limit. */
static bool device_memory_fits(const tg_backend *be, const tg_kvcache *c, size_t kv_bytes, tg_error *err) {
    const int64_t asked = c->params.max_memory;
    const double limit = be->kv_limit, mib = 1048576.0;
    if (limit < 0 || (double)kv_bytes <= limit) return true;
    if (asked == 0)
        return tg_fail_code(err, TG_ERR_CACHE_MEMORY, "KV cache needs %.1f MiB on device %s but it has %.1f MiB of "
                            "memory", (double)kv_bytes / mib, be->vk->device_name, limit / mib);
    return tg_fail_code(err, TG_ERR_CACHE_MEMORY_LIMIT, "KV cache needs %.1f MiB on device %s, more than the memory "
                        "limit %.1f MiB", (double)kv_bytes / mib, be->vk->device_name, limit / mib);
}

/* The KV mirror's geometry from the cache (vk_backend.h) and the bytes of a cache's copy (vk_kv.c makes them). */
static bool make_mirror(tg_backend *be, const tg_kvcache *c, tg_error *err) {
    const tg_cache_geom *g = &c->g;
    const size_t kvd = (size_t)g->n_kv_heads * (size_t)g->head_dim;
    be->kv_index = malloc((size_t)g->n_layers * sizeof *be->kv_index);
    if (!be->kv_index) return tg_fail(err, "out of memory");
    int n_kv = 0;
    for (int l = 0; l < g->n_layers; l++) be->kv_index[l] = c->kv_source[l] == l ? n_kv++ : -1;
    /* copies: the cache the backend is made for may go before it (a batch's probe) */
    int *src = malloc((size_t)g->n_layers * sizeof *src), *lw = NULL;
    if (!src || (c->layer_window && !(lw = malloc((size_t)g->n_layers * sizeof *lw)))) {
        free(src);
        return tg_fail(err, "out of memory");
    }
    memcpy(src, c->kv_source, (size_t)g->n_layers * sizeof *src);
    if (lw) memcpy(lw, c->layer_window, (size_t)g->n_layers * sizeof *lw);
    be->kv_source = src;
    be->layer_window = lw;
    be->ref = c->g;
    be->ref_qsinks = c->params.quantize_sinks;
    be->kv_limit = device_limit(be, c);
    be->k16 = g->k.precision == TG_KV_FP16;
    be->v16 = g->v.precision == TG_KV_FP16;
    if (tg_vk_kivi_wanted(c)) { /* its own stores; the row table's slots unused */
        be->sink = (uint32_t)g->sink;
        be->reposition = g->reposition;
        be->max_sink = be->reposition ? be->sink : 0;
        be->n_slots = 1;
        be->rot_k = g->rot_k;
        be->rot_v = g->rot_v;
        be->quantize_sinks = c->params.quantize_sinks && g->sink > 0;
        be->rot_block = (uint32_t)tg_rot_block(g->head_dim);
        if (g->sink > INT32_MAX) return tg_fail(err, "vulkan: %lld sinks are too many", (long long)g->sink);
        be->n_kvbuf = 1;
        if (!tg_vk_kivi_make(be, c, n_kv, err)) return false;
        be->kv_buf_bytes[0] = be->kivi_words * 4;
        be->kv_buf_bytes[1] = 4;
        be->kv_bytes = be->kv_buf_bytes[0] + be->kv_buf_bytes[1];
        return device_memory_fits(be, c, be->kv_bytes, err);
    }
    int64_t slots;
    if (g->bounded) {
        be->sink = (uint32_t)g->sink;
        be->window = (uint32_t)g->window;
        be->ring = (uint32_t)(g->window + be->max_rows);
        be->reposition = g->reposition;
        be->max_sink = be->reposition ? be->sink : 0;
        slots = g->sink + (int64_t)be->ring;
        if (g->sink > INT32_MAX || g->window > INT32_MAX - be->max_rows - g->sink)
            return tg_fail(err, "vulkan: a StreamingLLM window of %lld is too large", (long long)g->window);
    } else {
        slots = g->context;
    }
    size_t floats, all;
    if (slots <= 0 || slots > INT32_MAX || !bytes_of((size_t)slots, kvd, &floats, err))
        return tg_fail(err, "vulkan: a KV mirror of %lld slots cannot be allocated", (long long)slots);
    be->n_slots = (uint32_t)slots;
    size_t kb, vb; /* one layer's */
    if (!bytes_of(floats, be->k16 ? 2 : 4, &kb, err) || !bytes_of(floats, be->v16 ? 2 : 4, &vb, err) ||
        kb > SIZE_MAX - vb || !bytes_of(kb + vb, (size_t)(n_kv > 0 ? n_kv : 1), &all, err))
        return false;
    if (!device_memory_fits(be, c, all, err)) return false;
    be->n_kvbuf = n_kv > 0 ? n_kv : 1;
    be->kv_buf_bytes[0] = kb;
    be->kv_buf_bytes[1] = vb;
    be->kv_bytes = all;
    return true;
}

/* The aux row table's layout and buffer. */
static bool make_aux(tg_backend *be, tg_error *err) {
    const tg_hparams *hp = &be->m->hp;
    const size_t rows = (size_t)be->max_rows, half = (size_t)hp->head_dim / 2;
    const size_t hd = (size_t)hp->n_kv_heads * (size_t)hp->head_dim, signs = be->rot_k || be->rot_v ? hd : 0;
    size_t at = 0, n_sink;
    size_t slot_tables = 0; /* a StreamingLLM mirror's slot positions: a table per cache copy (vk_kv.c) */
    if (be->ring && !bytes_of(be->n_slots, rows, &slot_tables, err)) return false;
    const size_t sizes[] = {rows, rows, rows, slot_tables, rows * half, rows * half, 0, 0, be->n_desc,
                            signs * (size_t)hp->n_layers};
    uint32_t *offs[] = {&be->a_ids, &be->a_pos, &be->a_slot, &be->a_slot_pos, &be->a_cos, &be->a_sin,
                        &be->a_sink_cos, &be->a_sink_sin, &be->a_desc, &be->a_rot};
    if (!bytes_of(rows * half, be->max_sink, &n_sink, err)) return false;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const size_t n = i == 6 || i == 7 ? n_sink : sizes[i];
        *offs[i] = (uint32_t)at;
        if (!tg_add_size(at, n, &at) || at > UINT32_MAX / 4) return tg_fail(err, "vulkan: the row table is too large");
    }
    if (!tg_vk_buf_new(be->vk, at * 4, TG_VK_SHARED, "the row table", &be->aux, err)) return false;
    memset(be->aux.map, 0xff, at * 4); /* every slot's position -1: empty */
    if (be->n_desc) memcpy((uint32_t *)be->aux.map + be->a_desc, be->desc, (size_t)be->n_desc * 4);
    float *sign = (float *)be->aux.map + be->a_rot;
    for (int l = 0; signs && l < hp->n_layers; l++)
        for (int h = 0; h < hp->n_kv_heads; h++)
            tg_rot_signs(sign + ((size_t)l * (size_t)hp->n_kv_heads + (size_t)h) * (size_t)hp->head_dim, l, h,
                         hp->head_dim);
    return true;
}

/* The readback buffer: a call's logits rows, then its K and V rows of every K/V layer (vk_run.c copies them). */
static bool make_readback(tg_backend *be, tg_error *err) {
    const tg_hparams *hp = &be->m->hp;
    const size_t rows = (size_t)be->max_rows, kvd = (size_t)hp->n_kv_heads * (size_t)hp->head_dim;
    size_t logits, kv, floats, bytes;
    if (!bytes_of(rows, (size_t)hp->vocab_size, &logits, err) || !bytes_of(rows * kvd, 2 * (size_t)hp->n_layers, &kv,
                                                                              err) ||
        !tg_add_size(logits, kv, &floats) || !bytes_of(floats, sizeof(float), &bytes, err))
        return tg_fail(err, "vulkan: the readback of %d rows is too large", be->max_rows);
    be->rb_kv = logits;
    be->regions = calloc(1 + 2 * (size_t)hp->n_layers, sizeof *be->regions);
    if (!be->regions) return tg_fail(err, "out of memory");
    return tg_vk_buf_new(be->vk, bytes, TG_VK_READBACK, "the readback buffer", &be->rb, err);
}

/* ---- compiling the program -------------------------------------------------------------------------------------- */

static int weight_index(tg_backend *be, const tg_tensor *w, tg_error *err) {
    for (int i = 0; i < be->n_weights; i++)
        if (be->weights[i].data == w->data && be->weights[i].type == (uint32_t)w->type) return i;
    vk_weight *slot = &be->weights[be->n_weights];
    if (!upload_weight(be, w, slot, err)) return -1;
    be->n_weights++;
    if (!(slot->set = tg_vk_make_set(be, be->pool, &slot->buf, &be->none, &be->none, err))) return -1;
    return be->n_weights - 1;
}

/* Fewer dispatches and barriers: a product whose output the next operation adds to the residual stream adds its sum
 * there itself (x += t: the same sum, then the same addition), and products of one input into separate outputs
 * (q / k / v, gate / up) run without a barrier between them. */
static void fuse(tg_backend *be) {
    for (int i = 0; i + 1 < be->n_ops; i++) {
        vk_op *o = &be->ops[i], *next = &be->ops[i + 1];
        if (o->kind != TG_OP_MATMUL) continue;
        if (next->kind == TG_OP_ADD && next->in == o->out && next->out != o->in && o->out != TG_VAL_LOGITS) {
            o->out = next->out;
            o->add_out = true;
            next->skip = true;
        } else if (next->kind == TG_OP_MATMUL && next->in == o->in && next->out != o->out && o->out != o->in &&
                   next->out != o->in) {
            o->no_barrier = true;
        }
    }
}

/* The ops of program p with their weights uploaded and their norm weights packed into be->norms. */
static bool compile(tg_backend *be, const tg_program *p, tg_error *err) {
    const int64_t d = be->m->hp.d_model;
    be->ops = calloc((size_t)p->n, sizeof *be->ops);
    be->weights = calloc((size_t)p->n, sizeof *be->weights);
    if (!be->ops || !be->weights) return tg_fail(err, "out of memory");
    int n_norms = 0, layer = 0;
    for (int i = 0; i < p->n; i++) {
        if (!op_ok(&p->ops[i], err)) return false;
        n_norms += p->ops[i].kind == TG_OP_NORM;
    }
    size_t nb;
    if (!bytes_of((size_t)(n_norms > 0 ? n_norms : 1) * (size_t)d, sizeof(float), &nb, err) ||
        !tg_vk_buf_new(be->vk, nb, TG_VK_DEVICE, "the norm weights", &be->norms, err) ||
        !(be->set_norms = tg_vk_make_set(be, be->pool, &be->norms, &be->none, &be->none, err)))
        return false;
    float *norms = calloc(nb / sizeof(float), sizeof(float));
    if (!norms) return tg_fail(err, "out of memory");
    uint32_t norm_at = 0;
    for (int i = 0; i < p->n; i++) {
        const tg_op *o = &p->ops[i];
        vk_op *v = &be->ops[be->n_ops++];
        *v = (vk_op){.kind = o->kind, .out = o->out, .in = o->in, .in2 = o->in2, .layer = layer, .w = -1, .t = o->w,
                     .own_kv = o->own_kv};
        if (o->kind == TG_OP_ROPE_APPEND || o->kind == TG_OP_ATTEND) v->layer = o->layer;
        if (o->kind == TG_OP_ATTEND) layer = o->layer + 1;
        if (o->kind == TG_OP_NORM) {
            memcpy(norms + norm_at, o->norm_w, (size_t)d * sizeof(float));
            v->norm_off = norm_at;
            norm_at += (uint32_t)d;
        }
        if ((o->kind == TG_OP_EMBED || o->kind == TG_OP_MATMUL) && (v->w = weight_index(be, o->w, err)) < 0) {
            free(norms);
            return false;
        }
    }
    const bool ok = tg_vk_upload(be->vk, &be->norms, 0, norms, nb, err);
    free(norms);
    fuse(be);
    return ok;
}

/* ---- the backend's life ----------------------------------------------------------------------------------------- */

static void vk_destroy(tg_backend *be) {
    if (!be) return;
    tg_vk_ctx *c = be->vk;
    if (c) {
        tg_vk_profile_free(be->prof, c);
        tg_vk_kv_free_all(be);
        for (int i = 0; i < be->n_weights; i++) tg_vk_buf_free(c, &be->weights[i].buf);
        tg_vk_buf *bufs[] = {&be->norms, &be->act, &be->aux, &be->rb, &be->none};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tg_vk_buf_free(c, bufs[i]);
        for (int i = 0; i < PL_COUNT; i++)
            if (be->pl[i]) c->f.vkDestroyPipeline(c->dev, be->pl[i], NULL);
        if (be->pool) c->f.vkDestroyDescriptorPool(c->dev, be->pool, NULL);
    }
    tg_vk_close(c);
    free(be->weights);
    free(be->ops);
    free(be->kv_index);
    free((void *)be->kv_source);
    free((void *)be->layer_window);
    free(be->desc);
    free(be->steps);
    free(be->regions);
    free(be->kv);
    free(be->row_kv);
    free(be);
}

bool tg_vk_make_pool(tg_backend *be, int n_sets, VkDescriptorPool *pool, tg_error *err) {
    const VkDescriptorPoolSize size = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                       .descriptorCount = (uint32_t)n_sets * TG_VK_BINDINGS};
    const VkDescriptorPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                           .maxSets = (uint32_t)n_sets, .poolSizeCount = 1, .pPoolSizes = &size};
    return be->vk->f.vkCreateDescriptorPool(be->vk->dev, &pi, NULL, pool) == VK_SUCCESS ||
           tg_fail(err, "vulkan: vkCreateDescriptorPool failed");
}

/* The device index of the backend's create: the N of --device vulkan:N, set by forward.c through
 * tg_backend_vulkan_create. */
tg_backend *tg_backend_vulkan_create(const struct tg_model *m, const tg_program *p, const tg_kvcache *cache,
                                     int max_rows, int device, tg_error *err) {
    if (!cache_ok(cache, err)) return NULL;
    tg_backend *be = calloc(1, sizeof *be);
    if (!be) {
        tg_fail(err, "out of memory");
        return NULL;
    }
    be->m = m;
    be->max_rows = max_rows;
    be->device_index = device;
    size_t floats = 0, bytes = 0;
    bool ok = (be->vk = tg_vk_open(device, err)) != NULL && tg_vk_make_pool(be, p->n + 1, &be->pool, err) &&
              make_mirror(be, cache, err) && make_aux(be, err) && layout_acts(be, &floats, err) &&
              bytes_of(floats, sizeof(float), &bytes, err) &&
              tg_vk_buf_new(be->vk, bytes, TG_VK_DEVICE, "the activations", &be->act, err) &&
              tg_vk_buf_new(be->vk, 16, TG_VK_DEVICE, "a placeholder", &be->none, err) &&
              make_readback(be, err) && compile(be, p, err) && tg_vk_kv_first(be, err);
    for (int i = 0; ok && i < PL_COUNT; i++) ok = (be->pl[i] = tg_vk_pipeline(be->vk, pl_names[i], err)) != NULL;
    if (ok && tg_vk_messages(be->vk) > 0)
        ok = tg_fail(err, "vulkan: the validation layer reported %d message(s) (printed above)",
                     tg_vk_messages(be->vk));
    if (ok) be->prof = tg_vk_profile_new(be->vk, be->n_ops + 1);
    if (ok) return be;
    vk_destroy(be);
    return NULL;
}

static tg_backend *vk_create(const struct tg_model *m, const tg_program *p, const tg_kvcache *cache, int max_rows,
                             int n_threads, tg_error *err) {
    (void)n_threads;
    return tg_backend_vulkan_create(m, p, cache, max_rows, 0, err);
}

static int vk_threads(const tg_backend *be) {
    (void)be;
    return 1;
}

/* Rows of any cache with the geometry the backend was made for (each gets its own copy: vk_kv.c). */
static bool vk_fits(const tg_backend *be, const tg_kvcache *cache) { return tg_vk_kv_same(be, cache); }

static bool vk_meter_on(tg_backend *be, tg_error *err) {
    (void)be;
    return tg_fail(err, "vulkan: the attention-sink meter is not on the Vulkan backend yet");
}

static bool vk_meter(const tg_backend *be, tg_attention_stats *out) {
    (void)be;
    (void)out;
    return false;
}

static void vk_memory(const tg_backend *be, tg_backend_memory *out) {
    snprintf(out->device, sizeof out->device, "vulkan:%d (%.100s)", be->device_index, be->vk->device_name);
    for (int i = 0; i < be->n_kv; i++)
        for (int j = 0; j < be->n_kvbuf; j++) out->kv += be->kv[i].kc[j].bytes + be->kv[i].vc[j].bytes;
    for (int i = 0; i < be->n_weights; i++) out->weights += be->weights[i].buf.bytes;
    out->other = be->norms.bytes + be->act.bytes + be->aux.bytes + be->rb.bytes;
}

const tg_backend_i tg_backend_vulkan = {
    .name = "vulkan",
    .create = vk_create,
    .destroy = vk_destroy,
    .threads = vk_threads,
    .fits = vk_fits,
    .release = tg_vk_kv_forget,
    .run = tg_vk_run,
    .meter_on = vk_meter_on,
    .meter = vk_meter,
    .memory = vk_memory,
};
