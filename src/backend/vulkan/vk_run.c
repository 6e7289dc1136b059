/* vk_run.c — one call of the Vulkan backend: the row table written (tokens, positions, slots, RoPE angles), the
 * whole program recorded as one command buffer (a dispatch and a barrier per operation), submitted and waited for,
 * the logits copied out, and the call's keys and values appended to the host cache (vk_backend.h says why). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "backend/vulkan/vk_backend.h"
#include "kvcache/cache_internal.h"
#include "util/clock.h"
#include "util/error.h"

/* A grid of 64-wide workgroups covering `count` invocations (x up to 1024 groups, the shaders' i = x + 65536 y). */
static void grid(uint64_t count, uint32_t *gx, uint32_t *gy) {
    const uint64_t groups = (count + 63) / 64;
    *gx = groups < 1024 ? (uint32_t)(groups ? groups : 1) : 1024;
    *gy = (uint32_t)((groups + 1023) / 1024);
    if (*gy == 0) *gy = 1;
}

static uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Writes the call's rows into the row table: tokens, positions, slots (and, in a StreamingLLM mirror, each slot's
 * position in the row's cache copy's table), the RoPE angles of each row's position, and a re-positioned cache's
 * sink angles for each row (the sinks sit just before the oldest window token the row sees). */
static void write_rows(tg_backend *be, const tg_rows *rows) {
    uint32_t *aux = be->aux.map;
    const int hd = be->m->hp.head_dim, half = hd / 2;
    for (int t = 0; t < rows->n; t++) {
        const tg_kvcache *c = rows->cache[t];
        const int64_t pos = rows->pos[t];
        const uint32_t slot = tg_vk_slot_of(be, pos);
        aux[be->a_ids + t] = (uint32_t)rows->ids[t];
        aux[be->a_pos + t] = (uint32_t)pos;
        aux[be->a_slot + t] = slot;
        if (be->ring && !be->kivi) aux[be->kv[be->row_kv[t]].a_slot_pos + slot] = (uint32_t)pos;
        float *cs = (float *)aux + be->a_cos + (size_t)t * half, *sn = (float *)aux + be->a_sin + (size_t)t * half;
        if (c->rope_inv_freq) tg_rope_angles_freqs(hd, pos, c->rope_inv_freq, cs, sn);
        else tg_rope_angles(hd, pos, c->shape.rope_theta, cs, sn);
        if (!be->reposition || be->kivi) continue; /* a KIVI cache's sink angles: tg_vk_kivi_prepare */
        const int64_t oldest = pos - (int64_t)be->window + 1 > (int64_t)be->sink ? pos - (int64_t)be->window + 1
                                                                                 : (int64_t)be->sink;
        for (uint32_t j = 0; j < be->max_sink; j++) {
            const size_t at = ((size_t)t * be->max_sink + j) * (size_t)half;
            tg_rope_angles_freqs(hd, oldest - (int64_t)be->sink + j, c->inv_freq, (float *)aux + be->a_sink_cos + at,
                                 (float *)aux + be->a_sink_sin + at);
        }
    }
}

/* Offset and row length of value v for layer l (K and V are per layer). */
static uint32_t off_of(const tg_backend *be, tg_val v, int l) {
    const uint32_t base = be->off[v];
    return v == TG_VAL_K || v == TG_VAL_V ? base + (uint32_t)l * (uint32_t)be->max_rows * be->ld[v] : base;
}

/* The end of the run of rows from r0 on whose cache copy is row r0's (rows of one cache are consecutive). */
static int run_end(const tg_backend *be, int r0, int n) {
    int r1 = r0 + 1;
    while (r1 < n && be->row_kv[r1] == be->row_kv[r0]) r1++;
    return r1;
}

/* Records the append of rows [r0, r1) of one cache into its copy of the KV mirror's layer (no barrier after it:
 * the caches' appends write their own copies). */
static void record_append(tg_backend *be, const vk_op *o, int r0, int r1) {
    const tg_hparams *hp = &be->m->hp;
    const uint32_t hd = (uint32_t)hp->head_dim, kvd = (uint32_t)(hp->n_kv_heads * hp->head_dim), half = hd / 2;
    const uint32_t n = (uint32_t)(r1 - r0), t0 = (uint32_t)r0;
    const uint32_t pk[] = {n, kvd, hd, hp->rope_style == TG_ROPE_HALF, off_of(be, TG_VAL_K, o->layer) + t0 * kvd,
                           off_of(be, TG_VAL_V, o->layer) + t0 * kvd, be->a_cos + t0 * half, be->a_sin + t0 * half,
                           be->a_pos + t0, be->a_slot + t0, be->k16, be->v16, be->reposition ? be->sink : 0, 0};
    uint32_t gx, gy;
    grid((uint64_t)n * kvd / 2, &gx, &gy);
    tg_vk_dispatch_free(be->vk, be->pl[PL_KV_APPEND], be->kv[be->row_kv[r0]].set[be->kv_index[o->layer]], pk,
                        sizeof pk, gx, gy, 1);
}

/* attend.comp's splits for rows [r0, r1) of one cache at positions pos. */
static uint32_t splits_of(const tg_backend *be, int r0, int r1, const int64_t *pos, uint32_t *slots) {
    int64_t max_pos = 0;
    for (int t = r0; t < r1; t++) max_pos = pos[t] > max_pos ? pos[t] : max_pos;
    *slots = be->ring ? be->n_slots : (uint32_t)(max_pos + 1);
    const uint32_t splits = r1 - r0 <= ATTEND_SPLIT_ROWS ? (*slots + 63) / 64 : 1;
    return splits < ATTEND_MAX_SPLITS ? splits : ATTEND_MAX_SPLITS;
}

/* Records the attention of rows [r0, r1) of one cache over its copy (queries at Q, output at o->out); with more than
 * one split its partials go to part (attend_merge.comp combines them). No barrier after it. */
static void record_attend(tg_backend *be, const vk_op *o, int r0, int r1, uint32_t slots, uint32_t splits,
                          uint32_t part) {
    const tg_hparams *hp = &be->m->hp;
    const uint32_t hd = (uint32_t)hp->head_dim, kvd = (uint32_t)(hp->n_kv_heads * hp->head_dim), half = hd / 2;
    const uint32_t n = (uint32_t)(r1 - r0), t0 = (uint32_t)r0, qd = (uint32_t)hp->n_heads * hd;
    const vk_kv *k = &be->kv[be->row_kv[r0]];
    /* an unbounded mirror's slot is the position: no table (UINT32_MAX) */
    const uint32_t pc[] = {(uint32_t)hp->n_heads, (uint32_t)(hp->n_heads / hp->n_kv_heads), hd,
                           hp->rope_style == TG_ROPE_HALF, off_of(be, TG_VAL_Q, 0) + t0 * qd,
                           off_of(be, o->out, 0) + t0 * be->ld[o->out], be->a_pos + t0,
                           be->ring ? k->a_slot_pos : UINT32_MAX, slots, kvd, be->k16, be->v16, be->sink,
                           be->ring ? be->window : 0, be->layer_window ? (uint32_t)be->layer_window[o->layer] : 0,
                           be->reposition, be->a_sink_cos + t0 * be->max_sink * half,
                           be->a_sink_sin + t0 * be->max_sink * half, be->max_sink, splits, part};
    tg_vk_dispatch_free(be->vk, be->pl[PL_ATTEND], k->set[be->kv_index[be->kv_source[o->layer]]], pc, sizeof pc,
                        (uint32_t)hp->n_heads, n, splits);
}

/* Records the attention of the mirror's layer for every row: each cache's rows over its own copy, side by side, as
 * many caches at a time as the partials have room for (ATTEND_PART_ROWS split rows), then their merges. */
static void record_attention(tg_backend *be, const vk_op *o, int n, const int64_t *pos) {
    const tg_hparams *hp = &be->m->hp;
    const uint32_t row_part = (uint32_t)hp->n_heads * ATTEND_MAX_SPLITS * ((uint32_t)hp->head_dim + 2);
    for (int g0 = 0, g1; g0 < n; g0 = g1) {
        uint32_t used = 0, slots;
        for (g1 = g0; g1 < n;) { /* the group's attention: caches from row g0 on */
            const int r1 = run_end(be, g1, n);
            const uint32_t splits = splits_of(be, g1, r1, pos, &slots);
            if (splits > 1 && used + (uint32_t)(r1 - g1) > ATTEND_PART_ROWS && g1 > g0) break;
            record_attend(be, o, g1, r1, slots, splits, be->part_off + used * row_part);
            if (splits > 1) used += (uint32_t)(r1 - g1);
            g1 = r1;
        }
        tg_vk_barrier(be->vk);
        if (used == 0) continue;
        used = 0;
        for (int r0 = g0, r1; r0 < g1; r0 = r1) { /* then the group's merges */
            r1 = run_end(be, r0, n);
            const uint32_t splits = splits_of(be, r0, r1, pos, &slots);
            if (splits == 1) continue;
            const uint32_t pm[] = {(uint32_t)hp->n_heads, (uint32_t)hp->head_dim, splits,
                                   be->part_off + used * row_part,
                                   off_of(be, o->out, 0) + (uint32_t)r0 * be->ld[o->out]};
            tg_vk_dispatch_free(be->vk, be->pl[PL_ATTEND_MERGE], be->set_norms, pm, sizeof pm,
                                (uint32_t)hp->n_heads, (uint32_t)(r1 - r0), 1);
            used += (uint32_t)(r1 - r0);
        }
        tg_vk_barrier(be->vk);
    }
}

/* Records operation o over rows [0, n) at positions pos (the head's rows [t0, n)). */
static void record(tg_backend *be, const vk_op *o, int n, int t0, const int64_t *pos) {
    const tg_hparams *hp = &be->m->hp;
    tg_vk_ctx *vk = be->vk;
    if (o->skip) return;
    const uint32_t hd = (uint32_t)hp->head_dim, kvd = (uint32_t)(hp->n_kv_heads * hp->head_dim);
    const uint32_t half_style = hp->rope_style == TG_ROPE_HALF;
    uint32_t gx, gy;
    switch (o->kind) {
    case TG_OP_EMBED: {
        const vk_weight *w = &be->weights[o->w];
        const uint32_t pc[] = {(uint32_t)n, (uint32_t)o->t->cols, w->row_bytes, w->type, off_of(be, o->out, 0),
                               be->a_ids};
        grid((uint64_t)n * (uint64_t)o->t->cols, &gx, &gy);
        tg_vk_dispatch(vk, be->pl[PL_EMBED], w->set, pc, sizeof pc, gx, gy, 1);
        return;
    }
    case TG_OP_NORM: {
        const uint32_t pc[] = {(uint32_t)hp->d_model, off_of(be, o->in, 0), off_of(be, o->out, 0), be->ld[o->out],
                               o->norm_off, fbits(hp->norm_eps)};
        tg_vk_dispatch(vk, be->pl[PL_RMSNORM], be->set_norms, pc, sizeof pc, (uint32_t)n, 1, 1);
        return;
    }
    case TG_OP_MATMUL: {
        const vk_weight *w = &be->weights[o->w];
        const uint32_t rows = (uint32_t)o->t->rows;
        const uint32_t first = o->out == TG_VAL_LOGITS ? (uint32_t)t0 : 0;
        if ((int)first >= n) return;
        const uint32_t in_off = off_of(be, o->in, o->layer), ld_in = be->ld[o->in];
        const uint32_t pc[] = {rows, (uint32_t)o->t->cols, w->row_bytes, w->type, first, (uint32_t)n, in_off, ld_in,
                               off_of(be, o->out, o->layer), be->ld[o->out], in_off % 4 == 0 && ld_in % 4 == 0,
                               o->add_out};
        const uint32_t rpw = 2 * (64 / vk->subgroup_size); /* matmul.comp: 2 rows (NR) a subgroup, 64 invocations */
        const uint32_t groups = (rows + rpw - 1) / rpw;
        gx = groups < 65535 ? groups : 65535;
        gy = (groups + gx - 1) / gx;
        (o->no_barrier ? tg_vk_dispatch_free : tg_vk_dispatch)(vk, be->pl[PL_MATMUL], w->set, pc, sizeof pc, gx, gy,
                                                                 1);
        return;
    }
    case TG_OP_ROPE_APPEND: {
        const float scale = 1.0f / sqrtf((float)hd);
        const uint32_t pq[] = {(uint32_t)n, (uint32_t)hp->n_heads, hd, half_style, off_of(be, TG_VAL_Q, 0), be->a_cos,
                               be->a_sin, fbits(scale)};
        grid((uint64_t)n * (uint64_t)hp->n_heads * hd / 2, &gx, &gy);
        tg_vk_dispatch(vk, be->pl[PL_ROPE_Q], be->set_norms, pq, sizeof pq, gx, gy, 1);
        if (!o->own_kv) return;
        if (!be->kivi) { /* into each cache's copy */
            for (int r0 = 0, r1; r0 < n; r0 = r1) record_append(be, o, r0, r1 = run_end(be, r0, n));
            tg_vk_barrier(vk);
            return;
        }
        const uint32_t pk[] = {(uint32_t)n, kvd, hd, half_style, off_of(be, TG_VAL_K, o->layer),
                               off_of(be, TG_VAL_V, o->layer), be->a_cos, be->a_sin, be->a_pos, be->a_slot,
                               be->k16, be->v16, be->reposition ? be->sink : 0, be->stage_off};
        grid((uint64_t)n * kvd / 2, &gx, &gy);
        tg_vk_dispatch(vk, be->pl[PL_KV_APPEND], be->set_norms, pk, sizeof pk, gx, gy, 1);
        tg_vk_kivi_rotate(be, o->layer, n);
        return;
    }
    case TG_OP_ATTEND: {
        if (be->kivi) { /* row by row: each row's append, then its attention (vk_kivi.c) */
            const uint32_t qd = (uint32_t)(hp->n_heads * hp->head_dim);
            for (int t = 0; t < n; t++) {
                if (be->kv_index[o->layer] >= 0) tg_vk_kivi_append(be, o->layer, t);
                tg_vk_kivi_attend(be, o->layer, t, off_of(be, TG_VAL_Q, 0) + (uint32_t)t * qd,
                                  off_of(be, o->out, 0) + (uint32_t)t * be->ld[o->out]);
            }
            return;
        }
        record_attention(be, o, n, pos);
        return;
    }
    case TG_OP_GLU: {
        const uint32_t count = (uint32_t)n * be->ld[o->in];
        const uint32_t pc[] = {count, off_of(be, o->in, 0), off_of(be, o->in2, 0)};
        grid(count, &gx, &gy);
        tg_vk_dispatch(vk, be->pl[PL_GLU], be->set_norms, pc, sizeof pc, gx, gy, 1);
        return;
    }
    case TG_OP_ADD: {
        const uint32_t count = (uint32_t)n * be->ld[o->out];
        const uint32_t pc[] = {count, off_of(be, o->out, 0), off_of(be, o->in, 0)};
        grid(count, &gx, &gy);
        tg_vk_dispatch(vk, be->pl[PL_ADD], be->set_norms, pc, sizeof pc, gx, gy, 1);
        return;
    }
    default:
        return; /* create refused every other kind */
    }
}

/* The profile's kind of operation o (vk_profile.h): the matrix products by their place in a layer. */
static tg_vk_prof_kind prof_kind(const vk_op *o) {
    switch (o->kind) {
    case TG_OP_EMBED: return PR_EMBED;
    case TG_OP_NORM: return PR_NORM;
    case TG_OP_ROPE_APPEND: return PR_ROPE_APPEND;
    case TG_OP_ATTEND: return PR_ATTEND;
    case TG_OP_GLU: return PR_GLU;
    case TG_OP_MATMUL:
        return o->out == TG_VAL_LOGITS                         ? PR_MM_LOGITS
               : o->in == TG_VAL_ATT                           ? PR_MM_OUT
               : o->out == TG_VAL_GATE || o->out == TG_VAL_UP  ? PR_MM_GATE_UP
               : o->in == TG_VAL_GATE                          ? PR_MM_DOWN
                                                               : PR_MM_QKV;
    default: return PR_ADD;
    }
}

/* NaN logits: what a call that could not run leaves (the session reports non-finite logits). */
static void poison(const tg_backend *be, const tg_rows *rows) {
    const size_t vocab = (size_t)be->m->hp.vocab_size;
    const int t0 = rows->logits_all ? 0 : rows->n - 1;
    float *outs[] = {rows->logits_all, rows->logits_last, rows->head_out};
    const size_t counts[] = {(size_t)(rows->n - t0) * vocab, vocab, (size_t)rows->n_head * vocab};
    for (int i = 0; i < 3; i++)
        for (size_t j = 0; outs[i] && j < counts[i]; j++) outs[i][j] = NAN;
}

/* Records the copies of the call's results into the readback buffer: logits rows [t0, n) (at row t's place) and
 * every K/V layer's keys and values of rows [0, n) (vk_backend.h's rb). */
static void record_readback(tg_backend *be, int n, int t0) {
    const tg_hparams *hp = &be->m->hp;
    VkBufferCopy *regions = be->regions;
    uint32_t k = 0;
    const size_t vocab = (size_t)hp->vocab_size, kvd = be->ld[TG_VAL_K], plane = (size_t)be->max_rows * kvd;
    if (t0 < n)
        regions[k++] = (VkBufferCopy){.srcOffset = ((size_t)be->off[TG_VAL_LOGITS] + (size_t)t0 * vocab) * 4,
                                      .dstOffset = (size_t)t0 * vocab * 4, .size = (size_t)(n - t0) * vocab * 4};
    for (int l = 0; l < hp->n_layers; l++) {
        if (be->kv_index[l] < 0) continue;
        const size_t dst = (be->rb_kv + 2 * (size_t)l * plane) * 4;
        regions[k++] = (VkBufferCopy){.srcOffset = (size_t)off_of(be, TG_VAL_K, l) * 4, .dstOffset = dst,
                                      .size = (size_t)n * kvd * 4};
        regions[k++] = (VkBufferCopy){.srcOffset = (size_t)off_of(be, TG_VAL_V, l) * 4, .dstOffset = dst + plane * 4,
                                      .size = (size_t)n * kvd * 4};
    }
    tg_vk_copy(be->vk, &be->act, &be->rb, regions, k);
}

/* Runs the call as one submission, copies out the logits wanted and appends the rows' keys and values to their
 * host caches; false (printed) when a cache copy cannot be had or the device failed. */
static bool run_call(tg_backend *be, const tg_rows *rows) {
    const tg_hparams *hp = &be->m->hp;
    const int n = rows->n;
    tg_error err = {0};
    if (!tg_vk_kv_bind(be, rows, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return false;
    }
    for (int t = 0; t < n; t++)
        if (!be->kivi && be->ring == 0 && rows->pos[t] >= (int64_t)be->n_slots) {
            fprintf(stderr, "vulkan: position %lld is past the KV mirror's %u slots\n", (long long)rows->pos[t],
                    be->n_slots);
            return false;
        }
    for (int r0 = 0, r1; be->kivi && r0 < n; r0 = r1) {
        r1 = run_end(be, r0, n);
        if (!tg_vk_kivi_prepare(be, rows->cache[r0], rows->pos + r0, r1 - r0, r0)) {
            fprintf(stderr, "vulkan: the KV cache is full at position %lld\n", (long long)rows->pos[r1 - 1]);
            return false;
        }
    }
    write_rows(be, rows);
    /* the logits' rows: every row with head rows or logits_all, else the call's last row (none without a head) */
    const int all = rows->n_head > 0 || rows->logits_all != NULL;
    const int t0 = all ? 0 : rows->logits_last ? n - 1 : n;
    const double start = tg_monotonic_s();
    bool ok = tg_vk_begin(be->vk, &err);
    if (ok) tg_vk_profile_begin(be->prof, be->vk);
    for (int i = 0; ok && i < be->n_ops; i++) {
        record(be, &be->ops[i], n, t0, rows->pos);
        tg_vk_profile_mark(be->prof, be->vk, prof_kind(&be->ops[i]));
    }
    if (ok) {
        record_readback(be, n, t0);
        tg_vk_profile_mark(be->prof, be->vk, PR_READBACK);
    }
    ok = ok && tg_vk_submit_wait(be->vk, &err);
    if (ok && tg_vk_messages(be->vk) > 0)
        ok = tg_fail(&err, "vulkan: the validation layer reported %d message(s) (printed above)",
                     tg_vk_messages(be->vk));
    if (!ok) {
        fprintf(stderr, "%s\n", err.msg);
        for (int i = 0; i < be->n_kv; i++) be->kv[i].cache = NULL; /* what the device holds is unknown now */
        return false;
    }
    const size_t vocab = (size_t)hp->vocab_size;
    const float *logits = be->rb.map;
    for (int i = 0; i < rows->n_head; i++)
        memcpy(rows->head_out + i * vocab, logits + (size_t)rows->head_rows[i] * vocab, vocab * sizeof(float));
    if (rows->logits_all) memcpy(rows->logits_all, logits, (size_t)n * vocab * sizeof(float));
    if (rows->logits_last) memcpy(rows->logits_last, logits + (size_t)(n - 1) * vocab, vocab * sizeof(float));
    /* the host caches' appends, layer by layer in position order */
    const size_t kvd = (size_t)be->ld[TG_VAL_K], plane = (size_t)be->max_rows * kvd;
    for (int l = 0; l < hp->n_layers; l++) {
        if (be->kv_index[l] < 0) continue;
        const float *k = (const float *)be->rb.map + be->rb_kv + 2 * (size_t)l * plane, *v = k + plane;
        for (int t = 0; t < n; t++)
            tg_kvcache_append(rows->cache[t], l, rows->pos[t], k + (size_t)t * kvd, v + (size_t)t * kvd);
    }
    tg_vk_kv_done(be, rows);
    tg_vk_profile_end(be->prof, be->vk, tg_monotonic_s() - start);
    return true;
}

void tg_vk_run(tg_backend *be, const tg_rows *rows) {
    if (!run_call(be, rows)) poison(be, rows);
}
