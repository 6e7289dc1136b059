/* vk_kivi.c — the Vulkan backend's KIVI caches (int8 / int4 / int2 keys and values, each store of either precision
 * kind, mixed or not): the device stores laid out (shaders/kivi.glsl: sinks and a ring at a float precision, codes
 * and fp16 grids of G-token groups), the store steps of one token's append recorded in the CPU's order
 * (kvcache.c's append: eviction, a residual group flushed, the token inserted), and attention recorded over the view
 * the CPU cache gives the token; a rotated cache's keys and values rotated before they are stored (--kv-rotate:
 * kivi_rotate.comp, the query and the output in attend_kivi.comp); quantised sinks; a store without groups (group
 * size 0) as one group of its held rows.
 *
 * Why a layer's rows go one at a time: a KIVI cache re-codes what earlier tokens see (a provisional key grid widened,
 * a residual group quantised, a window's block evicted), so the CPU appends and attends a chunk's tokens one at a
 * time, layer by layer (tg_cache_plan's token_by_token: forward/attention.c's rounds); the device does the same:
 * the call's matrix products take all its rows at once, and in each layer row t's store steps and attention are
 * recorded before row t + 1's. Before the call the host works out, from its own cache (which it appends to after
 * the call: vk_run.c), what each row's append does and what the row sees afterwards (tg_vk_kivi_prepare): the same
 * bookkeeping, so the device's stores follow the CPU's exactly, and attention reads only tokens the CPU cache still
 * holds. A layer reading another's K/V (YOCO) attends after that layer stored every row, as the CPU's does. */
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/vk_backend.h"
#include "kernels/ops.h"
#include "kvcache/cache_internal.h"
#include "kvcache/eviction.h"
#include "util/checked.h"

/* kivi.glsl's descriptor words (D_*), one descriptor per store */
enum { D_PREC, D_BITS, D_SINK, D_RING, D_RLEN, D_CODES, D_SCALES, D_UNITS, D_GROUP, D_ROWW, D_PERCH, D_CLIP, D_SPREC,
       D_WORDS };
/* kivi_store.comp's modes */
enum { M_SINK, M_RING, M_KEY, M_VALUE, M_KFLUSH, M_VFLUSH, M_SINKQ, M_WKEY };

bool tg_vk_kivi_wanted(const tg_kvcache *c) {
    return tg_kv_precision_is_integer(c->g.k.precision) || tg_kv_precision_is_integer(c->g.v.precision);
}

static uint32_t prec_code(tg_kv_precision p) { return p == TG_KV_FP32 ? 0 : p == TG_KV_FP16 ? 1 : 2; }

bool tg_vk_kivi_check(const tg_kvcache *c, tg_error *err) {
    const tg_cache_geom *g = &c->g;
    if (g->head_dim % 16 != 0)
        return tg_fail(err, "vulkan: a KIVI cache needs head_dim a multiple of 16 on the Vulkan backend (%d)",
                       g->head_dim);
    return true;
}

/* Store sg's descriptor with its regions from word *at on; false when the words overflow 2^32. */
static bool layout_store(const tg_cache_geom *g, const tg_store_geom *sg, uint32_t *d, size_t *at) {
    const size_t H = (size_t)g->n_kv_heads, D = (size_t)g->head_dim, HD = H * D;
    const tg_kv_precision fp = sg->range ? g->sink_precision : sg->precision;
    const tg_kv_precision rp = sg->range ? g->resid_precision : sg->precision;
    const size_t eb_sink = prec_code(fp) == 0 ? 4 : 2, eb = prec_code(rp) == 0 ? 4 : 2;
    const size_t bits = sg->range ? (size_t)sg->range->bits : 0;
    /* without groups (group size 0): one group of all the rows held, in their ring of row_cap */
    const size_t G = g->grouped ? (size_t)g->group : (size_t)g->row_cap;
    const size_t U = !bits ? 0 : g->grouped && g->n_units > 0 ? (size_t)g->n_units : 1;
    const size_t ring = !bits ? (size_t)g->row_cap : (size_t)g->res_cap;
    size_t sizes[4] = {0, 0, 0, 0}; /* sinks, ring, codes, scales (words) */
    bool ok = tg_mul_size((size_t)g->sink * HD, eb_sink, &sizes[0]) && tg_mul_size(ring * HD, eb, &sizes[1]);
    sizes[0] /= 4;
    sizes[1] /= 4;
    ok = ok && (!bits || (tg_mul_size(U * H, G * D * bits / 32, &sizes[2]) &&
                          tg_mul_size(U * H, sg->per_channel ? D : G, &sizes[3])));
    const int regions[4] = {D_SINK, D_RING, D_CODES, D_SCALES};
    for (int i = 0; ok && i < 4; i++) {
        d[regions[i]] = (uint32_t)*at;
        ok = tg_add_size(*at, sizes[i] ? sizes[i] : 1, at) && *at <= UINT32_MAX;
    }
    d[D_PREC] = prec_code(rp);
    d[D_SPREC] = prec_code(fp);
    d[D_BITS] = (uint32_t)bits;
    d[D_RLEN] = (uint32_t)(ring ? ring : 1);
    d[D_UNITS] = (uint32_t)(U ? U : 1);
    d[D_GROUP] = (uint32_t)G;
    d[D_ROWW] = (uint32_t)(D * bits / 32);
    d[D_PERCH] = sg->per_channel;
    d[D_CLIP] = sg->range && sg->range->clip;
    return ok;
}

bool tg_vk_kivi_make(tg_backend *be, const tg_kvcache *c, int n_kv, tg_error *err) {
    const tg_cache_geom *g = &c->g;
    be->kivi = true;
    be->n_desc = (uint32_t)(2 * n_kv * D_WORDS);
    be->desc = calloc(be->n_desc ? be->n_desc : 1, sizeof *be->desc);
    if (!be->desc) return tg_fail(err, "out of memory");
    size_t at = 0;
    for (int i = 0; i < n_kv; i++)
        if (!layout_store(g, &g->k, be->desc + (2 * i) * D_WORDS, &at) ||
            !layout_store(g, &g->v, be->desc + (2 * i + 1) * D_WORDS, &at))
            return tg_fail(err, "vulkan: the KIVI cache's device stores of %d layers exceed 2^32 words", n_kv);
    for (int s = 0; s < 2; s++)
        be->kind[s] = !be->desc[s * D_WORDS + D_BITS] ? 0 : !g->grouped ? 3 : g->res_cap > 0 ? 1 : 2;
    be->kivi_words = at;
    if (!(be->steps = calloc((size_t)be->max_rows, sizeof *be->steps))) return tg_fail(err, "out of memory");
    return true;
}

bool tg_vk_kivi_prepare(tg_backend *be, const tg_kvcache *c, const int64_t *pos, int n, int t0) {
    const tg_cache_geom *g = &c->g;
    int l0 = 0;
    while (l0 < g->n_layers && c->kv_source[l0] != l0) l0++;
    tg_layer_cache L = c->layers[l0]; /* the bookkeeping as it will be after each row's append */
    const int hd = g->head_dim, half = hd / 2;
    for (int t = 0; t < n; t++) {
        vk_kivi_step *st = &be->steps[t0 + t];
        *st = (vk_kivi_step){.pos = pos[t], .is_sink = L.n_sink < g->sink};
        if (st->is_sink) {
            st->idx = L.n_sink++;
        } else {
            st->idx = L.n_appended;
            if (!g->eviction->make_room(g, &L, st->idx)) return false;
            st->flush = g->res_cap > 0 && st->idx - L.qend == g->res_cap;
            st->flush_at = L.qend;
            if (st->flush) L.qend += g->group;
            L.n_appended++;
        }
        st->n_sink = L.n_sink;
        st->first = L.first;
        st->n_appended = L.n_appended;
        st->qend = L.qend;
        if (!g->reposition || g->sink == 0) continue;
        /* the row's sink angles: sink j at position offset + j (kvcache.c's tg_kvcache_sink_offset) */
        const int64_t off = pos[t] < g->sink ? 0 : g->sink - L.n_sink + L.first;
        float *aux = (float *)be->aux.map + (size_t)(t0 + t) * be->max_sink * (size_t)half;
        for (int64_t j = 0; j < L.n_sink; j++)
            tg_rope_angles_freqs(hd, off + j, c->inv_freq, aux + be->a_sink_cos + j * half,
                                 aux + be->a_sink_sin + j * half);
    }
    return true;
}

/* Records a store step of mode on store s (keys 0, values 1) of K/V layer index kv in the copy bound to set. */
static void store(tg_backend *be, VkDescriptorSet set, int mode, int kv, int s, uint32_t src, int64_t idx,
                  int64_t first) {
    const tg_hparams *hp = &be->m->hp;
    const uint32_t H = (uint32_t)hp->n_kv_heads, D = (uint32_t)hp->head_dim, bits = be->desc[s * D_WORDS + D_BITS];
    const uint32_t G = be->desc[s * D_WORDS + D_GROUP];
    const uint32_t pc[] = {(uint32_t)mode, be->a_desc + (uint32_t)((2 * kv + s) * D_WORDS), src, (uint32_t)idx, H, D,
                           (uint32_t)first};
    const bool per_ch = be->desc[s * D_WORDS + D_PERCH];
    const uint32_t count = mode <= M_RING                ? H * D / 2
                           : mode == M_VALUE             ? H
                           : mode == M_VFLUSH            ? H * G
                           : mode == M_SINKQ && per_ch   ? H * D
                           : mode == M_SINKQ             ? H * (uint32_t)idx
                                                         : H * (D * bits / 32);
    tg_vk_dispatch(be->vk, be->pl[PL_KIVI_STORE], set, pc, sizeof pc, (count + 63) / 64, 1, 1);
}

void tg_vk_kivi_append(tg_backend *be, int layer, int t) {
    const vk_kivi_step *st = &be->steps[t];
    const int kv = be->kv_index[layer];
    const VkDescriptorSet set = be->kv[be->row_kv[t]].set[0];
    const uint32_t kvd = (uint32_t)(be->m->hp.n_kv_heads * be->m->hp.head_dim);
    for (int s = 0; s < 2; s++) { /* keys, then values */
        const uint32_t src = be->stage_off + (2 * (uint32_t)t + (uint32_t)s) * kvd;
        if (st->is_sink) {
            store(be, set, M_SINK, kv, s, src, st->idx, 0);
            /* the sinks complete: quantised as one group (--kv-quantize-sinks, a KIVI store's) */
            if (be->quantize_sinks && be->kind[s] != 0 && st->idx + 1 == be->sink)
                store(be, set, M_SINKQ, kv, s, src, be->sink, 0);
        } else if (be->kind[s] >= 2) { /* provisional or without groups: coded as it arrives */
            store(be, set, s ? M_VALUE : be->kind[s] == 3 ? M_WKEY : M_KEY, kv, s, src, st->idx, st->first);
        } else {
            if (be->kind[s] == 1 && st->flush) store(be, set, s ? M_VFLUSH : M_KFLUSH, kv, s, src, st->flush_at, 0);
            store(be, set, M_RING, kv, s, src, st->idx, 0);
        }
    }
}

void tg_vk_kivi_rotate(tg_backend *be, int layer, int n) {
    const tg_hparams *hp = &be->m->hp;
    if (!be->rot_k && !be->rot_v) return;
    const uint32_t D = (uint32_t)hp->head_dim, H = (uint32_t)hp->n_kv_heads;
    const uint32_t pc[] = {H * D, D, be->rot_block, be->stage_off, be->a_rot + (uint32_t)layer * H * D, be->a_pos,
                           be->reposition ? be->sink : 0, be->rot_k, be->rot_v};
    tg_vk_dispatch(be->vk, be->pl[PL_KIVI_ROTATE], be->set_norms, pc, sizeof pc, H, (uint32_t)n, 1);
}

void tg_vk_kivi_attend(tg_backend *be, int layer, int t, uint32_t q_off, uint32_t out_off) {
    const tg_hparams *hp = &be->m->hp;
    const vk_kivi_step *st = &be->steps[t];
    const int64_t pos = st->pos, sink = be->sink, lw = be->layer_window ? be->layer_window[layer] : 0;
    /* kvcache/attend.c's make_view, after this token's append */
    const int64_t s0 = lw > 0 && pos - lw + 1 > 0 ? pos - lw + 1 : 0;
    const int64_t s1 = pos < st->n_sink - 1 ? pos : st->n_sink - 1;
    int64_t lo = st->first, hi = st->n_appended - 1;
    if (pos - sink < hi) hi = pos - sink;
    if (lw > 0 && pos - lw + 1 - sink > lo) lo = pos - lw + 1 - sink;
    const uint32_t qend[2] = {be->kind[0] == 1 ? (uint32_t)st->qend : (uint32_t)st->n_appended,
                              be->kind[1] == 1 ? (uint32_t)st->qend : (uint32_t)st->n_appended};
    const uint32_t kv = (uint32_t)be->kv_index[be->kv_source[layer]];
    const uint32_t sink_at = (uint32_t)t * be->max_sink * (uint32_t)(hp->head_dim / 2); /* the row's sink angles */
    const uint32_t sign_off = be->a_rot + (uint32_t)(be->kv_source[layer] * hp->n_kv_heads * hp->head_dim);
    const uint32_t pc[] = {(uint32_t)hp->n_heads, (uint32_t)(hp->n_heads / hp->n_kv_heads), (uint32_t)hp->head_dim,
                           hp->rope_style == TG_ROPE_HALF, q_off, out_off, be->a_desc + 2 * kv * D_WORDS,
                           be->a_desc + (2 * kv + 1) * D_WORDS, (uint32_t)hp->n_kv_heads, (uint32_t)s0,
                           (uint32_t)(s1 >= s0 ? s1 - s0 + 1 : 0), (uint32_t)lo, (uint32_t)(hi >= lo ? hi - lo + 1 : 0),
                           qend[0], qend[1], be->reposition, be->a_sink_cos + sink_at, be->a_sink_sin + sink_at,
                           be->rot_k, be->rot_v, sign_off, be->rot_block};
    tg_vk_dispatch(be->vk, be->pl[PL_ATTEND_KIVI], be->kv[be->row_kv[t]].set[0], pc, sizeof pc, (uint32_t)hp->n_heads,
                   1, 1);
}
