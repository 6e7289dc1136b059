/* vk_kv.c — the caches' copies on the device (vk_backend.h's vk_kv): a copy per cache that the backend's calls
 * have rows of, so that a batch of sessions (tg_forward_batch: a server's) keeps every running session's cache on
 * the device; made as caches come (up to max_rows of them, all under one device-memory limit), reused when a cache
 * is forgotten or, past max_rows, by the copy no row of the call uses that was used least recently.
 *
 * A copy is in step with its cache when the cache's serial (kvcache.h) is the one the copy took after its last
 * call: nothing but this backend's calls appended to it since. Otherwise, before a call: an empty cache (new, reset)
 * starts an empty copy; a cache holding tokens the device never saw (a restored snapshot, a cache whose copy was
 * reused) has them uploaded from the host cache's stores: the mirror's keys and values are exactly what the host
 * cache stores (fp32 or fp16, keys after RoPE, re-positioned sinks before it), so the copy then holds what the
 * device's own appends would have. A KIVI cache's device stores have a layout of their own and no upload yet: such
 * a cache is refused with a message. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/vulkan/vk_backend.h"
#include "kernels/vec.h"
#include "kvcache/cache_internal.h"
#include "util/checked.h"

/* Frees copy k's buffers and pool (its fields zeroed). */
static void free_copy(tg_backend *be, vk_kv *k) {
    for (int i = 0; i < be->n_kvbuf; i++) {
        if (k->kc) tg_vk_buf_free(be->vk, &k->kc[i]);
        if (k->vc) tg_vk_buf_free(be->vk, &k->vc[i]);
    }
    if (k->pool) be->vk->f.vkDestroyDescriptorPool(be->vk->dev, k->pool, NULL);
    free(k->kc);
    free(k->vc);
    free(k->set);
    memset(k, 0, sizeof *k);
}

/* Makes copy be->kv[be->n_kv] (free, empty); false (err filled) when the device memory limit or the device refuse. */
static bool new_copy(tg_backend *be, tg_error *err) {
    const double mib = 1048576.0, need = (double)be->kv_bytes * (double)(be->n_kv + 1);
    if (be->kv_limit >= 0 && need > be->kv_limit)
        return tg_fail_code(err, TG_ERR_CACHE_MEMORY_LIMIT, "vulkan: %d caches' copies need %.1f MiB on device %s, "
                            "more than its KV memory limit %.1f MiB", be->n_kv + 1, need / mib, be->vk->device_name,
                            be->kv_limit / mib);
    vk_kv *k = &be->kv[be->n_kv];
    memset(k, 0, sizeof *k);
    const int n = be->n_kvbuf;
    k->kc = calloc((size_t)n, sizeof *k->kc);
    k->vc = calloc((size_t)n, sizeof *k->vc);
    k->set = calloc((size_t)n, sizeof *k->set);
    bool ok = k->kc && k->vc && k->set ? true : tg_fail(err, "out of memory");
    ok = ok && tg_vk_make_pool(be, n, &k->pool, err);
    const char *what[2] = {be->kivi ? "the KV cache's device stores" : "a layer's keys in the KV mirror",
                           be->kivi ? "a placeholder" : "a layer's values in the KV mirror"};
    for (int i = 0; ok && i < n; i++)
        ok = tg_vk_buf_new(be->vk, be->kv_buf_bytes[0], TG_VK_DEVICE, what[0], &k->kc[i], err) &&
             tg_vk_buf_new(be->vk, be->kv_buf_bytes[1], TG_VK_DEVICE, what[1], &k->vc[i], err) &&
             (k->set[i] = tg_vk_make_set(be, k->pool, &be->norms, &k->kc[i], &k->vc[i], err)) != VK_NULL_HANDLE;
    if (!ok) {
        free_copy(be, k);
        return false;
    }
    k->a_slot_pos = be->a_slot_pos + (uint32_t)be->n_kv * be->n_slots;
    be->n_kv++;
    return true;
}

bool tg_vk_kv_first(tg_backend *be, tg_error *err) {
    be->kv = calloc((size_t)be->max_rows, sizeof *be->kv);
    be->row_kv = calloc((size_t)be->max_rows, sizeof *be->row_kv);
    if (!be->kv || !be->row_kv) return tg_fail(err, "out of memory");
    return new_copy(be, err);
}

void tg_vk_kv_free_all(tg_backend *be) {
    for (int i = 0; be->kv && i < be->n_kv; i++) free_copy(be, &be->kv[i]);
    be->n_kv = 0;
}

void tg_vk_kv_forget(tg_backend *be, const tg_kvcache *c) {
    for (int i = 0; i < be->n_kv; i++)
        if (be->kv[i].cache == c) be->kv[i].cache = NULL;
}

bool tg_vk_kv_same(const tg_backend *be, const tg_kvcache *c) {
    const tg_cache_geom *a = &be->ref, *b = &c->g;
    return a->n_layers == b->n_layers && a->n_kv_heads == b->n_kv_heads && a->head_dim == b->head_dim &&
           a->k.precision == b->k.precision && a->v.precision == b->v.precision && a->bounded == b->bounded &&
           a->sink == b->sink && a->window == b->window && a->context == b->context &&
           a->reposition == b->reposition && a->slot_rope == b->slot_rope && a->grouped == b->grouped &&
           a->group == b->group && a->res_cap == b->res_cap && a->resid_precision == b->resid_precision &&
           a->sink_precision == b->sink_precision && a->n_units == b->n_units && a->row_cap == b->row_cap &&
           a->rot_k == b->rot_k && a->rot_v == b->rot_v && a->k.per_channel == b->k.per_channel &&
           a->v.per_channel == b->v.per_channel && a->k.range == b->k.range && a->v.range == b->v.range &&
           be->ref_qsinks == c->params.quantize_sinks;
}

uint32_t tg_vk_slot_of(const tg_backend *be, int64_t pos) {
    if (be->kivi) return 0;
    if (be->ring == 0 || pos < be->sink) return (uint32_t)pos;
    return be->sink + (uint32_t)((pos - be->sink) % be->ring);
}

/* Uploads the tokens cache c holds into copy k (the mirror: fp32 / fp16 as the host stores them); false (err
 * filled) for a KIVI cache or when the device fails. */
static bool upload(tg_backend *be, vk_kv *k, const tg_kvcache *c, tg_error *err) {
    if (be->kivi)
        return tg_fail(err, "vulkan: this KIVI cache holds tokens the device did not append (a restored snapshot); "
                            "a KIVI cache is not restored onto the Vulkan backend yet (fp32 and fp16 caches are)");
    const tg_cache_geom *g = &c->g;
    const int H = g->n_kv_heads, D = g->head_dim;
    /* slots written: a ring's any of n_slots; an unbounded mirror's [0, held) (slot = position) */
    const size_t kvd = (size_t)H * (size_t)D, slots = be->ring ? be->n_slots : (size_t)tg_kvcache_stored(c);
    float *row = malloc(kvd * sizeof *row);
    uint8_t *stage = malloc(slots * kvd * 4); /* one layer's keys or values, slot by slot */
    uint32_t *slot_pos = (uint32_t *)be->aux.map + k->a_slot_pos;
    bool ok = row && stage ? true : tg_fail(err, "out of memory");
    if (ok && be->ring) memset(slot_pos, 0xff, (size_t)be->n_slots * 4);
    for (int l = 0; ok && l < g->n_layers; l++) {
        if (be->kv_index[l] < 0) continue;
        const tg_layer_cache *L = &c->layers[l];
        const int64_t held = L->n_sink + (L->n_appended - L->first);
        for (int s = 0; ok && s < 2; s++) {
            const bool half = s ? be->v16 : be->k16;
            int64_t top = 0; /* slots written: [0, top) */
            for (int64_t i = 0; ok && i < held; i++) {
                const bool sink = i < L->n_sink;
                const int64_t n = sink ? i : L->first + (i - L->n_sink), pos = sink ? n : g->sink + n;
                const uint32_t slot = tg_vk_slot_of(be, pos);
                for (int h = 0; h < H; h++) tg_kvcache_load_row(c, L, s == 0, sink, n, h, row + (size_t)h * D);
                if (slot >= slots) {
                    ok = tg_fail(err, "vulkan: a cache's token is past the mirror's slots");
                    break;
                }
                if (half) tg_f32_to_f16_row(row, (uint16_t *)stage + (size_t)slot * kvd, (int64_t)kvd);
                else memcpy((float *)stage + (size_t)slot * kvd, row, kvd * 4);
                if (be->ring && s == 0 && l == 0) slot_pos[slot] = (uint32_t)pos;
                if ((int64_t)slot + 1 > top) top = slot + 1;
            }
            if (ok && top > 0)
                ok = tg_vk_upload(be->vk, s ? &k->vc[be->kv_index[l]] : &k->kc[be->kv_index[l]], 0, stage,
                                  (size_t)top * kvd * (half ? 2 : 4), err);
        }
    }
    free(row);
    free(stage);
    return ok;
}

/* Brings copy k in step with cache c (the module's comment). */
static bool sync(tg_backend *be, vk_kv *k, const tg_kvcache *c, tg_error *err) {
    const uint64_t serial = tg_kvcache_serial(c);
    if (k->cache == c && k->serial == serial) return true;
    k->cache = NULL;
    if (tg_kvcache_stored(c) == 0) {
        if (be->ring) memset((uint32_t *)be->aux.map + k->a_slot_pos, 0xff, (size_t)be->n_slots * 4);
    } else if (!upload(be, k, c, err)) {
        return false;
    }
    k->cache = c;
    k->serial = serial;
    return true;
}

/* The copy for cache c in a call that has bound rows [0, t) already: c's own, else a free one, else a new one, else
 * the least recently used one that none of rows [0, t) uses; -1 (err filled) when none can be had. */
static int copy_for(tg_backend *be, const tg_kvcache *c, int t, tg_error *err) {
    int free_at = -1, lru = -1;
    for (int i = 0; i < be->n_kv; i++) {
        if (be->kv[i].cache == c) return i;
        if (!be->kv[i].cache && free_at < 0) free_at = i;
    }
    if (free_at >= 0) return free_at;
    if (be->n_kv < be->max_rows) {
        tg_error why = {0};
        if (new_copy(be, &why)) return be->n_kv - 1;
        if (be->n_kv == 0) {
            *err = why;
            return -1;
        }
    }
    for (int i = 0; i < be->n_kv; i++) {
        bool in_call = false;
        for (int r = 0; r < t && !in_call; r++) in_call = be->row_kv[r] == i;
        if (!in_call && (lru < 0 || be->kv[i].last_call < be->kv[lru].last_call)) lru = i;
    }
    if (lru < 0) tg_fail(err, "vulkan: no room on the device for another cache's copy");
    return lru;
}

bool tg_vk_kv_bind(tg_backend *be, const tg_rows *rows, tg_error *err) {
    be->calls++;
    for (int t = 0; t < rows->n; t++) {
        const tg_kvcache *c = rows->cache[t];
        if (t > 0 && c == rows->cache[t - 1]) {
            be->row_kv[t] = be->row_kv[t - 1];
            continue;
        }
        const int i = copy_for(be, c, t, err);
        if (i < 0 || !sync(be, &be->kv[i], c, err)) return false;
        be->kv[i].last_call = be->calls;
        be->row_kv[t] = i;
    }
    return true;
}

void tg_vk_kv_done(tg_backend *be, const tg_rows *rows) {
    for (int t = 0; t < rows->n; t++) be->kv[be->row_kv[t]].serial = tg_kvcache_serial(rows->cache[t]);
}
