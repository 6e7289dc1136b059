/* test_kvcache.c — the KV cache through its header API: fused attention against naive attention (over the raw
 * inputs for fp32, over the read-back K/V for every precision), StreamingLLM eviction, re-positioning, YOCO sharing,
 * sliding windows, policy validation, byte accounting and flat memory. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/ops.h"
#include "kvcache/cache_internal.h"
#include "attend_team.h"
#include "kvcache/kvcache.h"
#include "tinygpt.h"

/* ---- fixtures -------------------------------------------------------------------------------------------------- */

/* Deterministic pseudo-random floats in [-1, 1) (xorshift). */
static float frand(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (float)((*s >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

static tg_cache_shape small_shape(int n_layers, int n_heads, int n_kv_heads, int head_dim, int64_t ctx) {
    tg_cache_shape s = {
        .n_layers = n_layers,
        .n_heads = n_heads,
        .n_kv_heads = n_kv_heads,
        .head_dim = head_dim,
        .rope_theta = 10000.0f,
        .rope_style = TG_ROPE_HALF,
        .context_length = ctx,
    };
    return s;
}

/* Naive attention of one (post-RoPE) query over T keys/values [T][H][D]: out[NH][D]; visible[t] masks tokens. */
static void naive_attend(const float *q, const float *k, const float *v, const bool *visible, int64_t T, int NH, int H,
                         int D, float *out) {
    const int gq = NH / H;
    double *p = malloc((size_t)T * sizeof *p);
    assert_non_null(p);
    for (int qh = 0; qh < NH; qh++) {
        const int h = qh / gq;
        double m = -INFINITY, sum = 0.0;
        for (int64_t t = 0; t < T; t++) {
            if (!visible[t]) continue;
            double s = 0.0;
            for (int c = 0; c < D; c++) s += (double)q[qh * D + c] * k[(t * H + h) * D + c];
            p[t] = s / sqrt((double)D);
            if (p[t] > m) m = p[t];
        }
        for (int64_t t = 0; t < T; t++)
            if (visible[t]) sum += (p[t] = exp(p[t] - m));
        for (int c = 0; c < D; c++) {
            double o = 0.0;
            for (int64_t t = 0; t < T; t++)
                if (visible[t]) o += p[t] / sum * v[(t * H + h) * D + c];
            out[qh * D + c] = (float)o;
        }
    }
    free(p);
}

static float max_abs_diff(const float *a, const float *b, int64_t n) {
    float m = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        float d = fabsf(a[i] - b[i]);
        if (!(d <= m)) m = d; /* NaN propagates as a failure */
    }
    return m;
}

/* ---- milestone: fp32 unbounded == naive attention over the raw inputs ------------------------------------------ */

static void test_fp32_unbounded_matches_naive(void **state) {
    (void)state;
    const int NL = 2, NH = 4, H = 2, D = 16, T = 40;
    const int window[2] = {0, 7}; /* layer 1 has a sliding window */
    tg_cache_shape shape = small_shape(NL, NH, H, D, 64);
    shape.layer_window = window;
    tg_cache_params p = tg_cache_default_params();
    tg_error err = {0};
    tg_kvcache *c = tg_kvcache_new(&shape, &p, &err);
    assert_non_null(c);

    float *kraw = calloc((size_t)T * H * D, sizeof(float)), *vraw = calloc((size_t)T * H * D, sizeof(float));
    float *q = calloc((size_t)NH * D, sizeof(float)), *out = calloc((size_t)NH * D, sizeof(float));
    float *want = calloc((size_t)NH * D, sizeof(float));
    bool *vis = calloc(T, sizeof(bool));
    uint64_t seed = 42;
    for (int t = 0; t < T; t++) {
        for (int l = 0; l < NL; l++) {
            float k[2 * 16], v[2 * 16];
            for (int i = 0; i < H * D; i++) {
                k[i] = frand(&seed);
                v[i] = frand(&seed);
            }
            if (l == 0) {
                memcpy(kraw + t * H * D, k, sizeof k);
                memcpy(vraw + t * H * D, v, sizeof v);
            }
            tg_kvcache_append(c, l, t, l == 0 ? kraw + t * H * D : k, l == 0 ? vraw + t * H * D : v);
        }
        /* layer 0: query at t over the rotated raw keys */
        for (int i = 0; i < NH * D; i++) q[i] = frand(&seed);
        test_attend(c, 0, t, q, out, 1);
        float *kr = malloc((size_t)(t + 1) * H * D * sizeof(float));
        for (int s = 0; s <= t; s++) {
            memcpy(kr + s * H * D, kraw + s * H * D, (size_t)H * D * sizeof(float));
            tg_rope(kr + s * H * D, H, D, s, 10000.0f, TG_ROPE_HALF);
            vis[s] = true;
        }
        float *qr = malloc((size_t)NH * D * sizeof(float));
        memcpy(qr, q, (size_t)NH * D * sizeof(float));
        tg_rope(qr, NH, D, t, 10000.0f, TG_ROPE_HALF);
        naive_attend(qr, kr, vraw, vis, t + 1, NH, H, D, want);
        assert_true(max_abs_diff(out, want, NH * D) < 1e-5f);
        free(kr);
        free(qr);
    }
    assert_int_equal(tg_kvcache_stored(c), T);
    assert_true(tg_kvcache_has_room(c));
    free(kraw);
    free(vraw);
    free(q);
    free(out);
    free(want);
    free(vis);
    tg_kvcache_free(c);
}

/* ---- every precision / policy: fused == naive over read-back, eviction keeps the right positions ------------ */

typedef struct {
    tg_kv_precision kp, vp;
    int group, residual;
    int64_t sink, window;
    bool reposition;
    bool slot_rope; /* with reposition: the former scheme (tg_kvcache_new_slot_rope), keys rotated at their slots */
} scenario;

/* Half a quantisation step (x 1.5 for keys, whose RoPE rotation mixes the errors of two channels) of data in
 * [-1, 1] (values) or rotated into [-sqrt 2, sqrt 2] (keys), plus slack; for plain precisions, half an ulp at 1.5. */
static float tolerance(tg_kv_precision p, bool keys, bool whole, bool clipped) {
    const float range = keys ? 2.83f : 2.0f, mix = keys ? 1.5f : 1.0f;
    /* a clipped grid (kivi.h) codes the values beyond it at its ends: up to TG_KIVI_CLIP_STEPS / TG_KIVI_CLIP_DIV of
     * the range further from them than half a step */
    if (clipped) return tolerance(p, keys, whole, false) + mix * range * (float)TG_KIVI_CLIP_STEPS / TG_KIVI_CLIP_DIV;
    switch (p) {
    case TG_KV_FP32: return 1e-6f;
    case TG_KV_FP16: return 1e-3f;
    case TG_KV_BF16: return 8e-3f;
    case TG_KV_INT8: return mix * 0.5f * range / 255.0f * (whole ? 3.0f : 1.05f);
    case TG_KV_INT4: return mix * 0.5f * range / 15.0f * (whole ? 3.0f : 1.05f);
    default: return mix * 0.5f * range / 3.0f * (whole ? 3.0f : 1.05f);
    }
}

/* Layers: 0 holds K/V, 1 reads layer 0's (YOCO) with a sliding window of 6, 2 holds its own. */
#define SC_NL 3
#define SC_NH 4
#define SC_H 2
#define SC_D 16

static void check_positions(const scenario *sc, const tg_cache_geom *g, const int64_t *pos, int64_t stored, int64_t t) {
    const int64_t S = g->sink, n_s = t + 1 < S ? t + 1 : S;
    assert_true(stored >= n_s);
    for (int64_t j = 0; j < n_s; j++) assert_int_equal(pos[j], j);
    const int64_t nn = stored - n_s, seen = t + 1 - n_s;
    for (int64_t i = 0; i < nn; i++) assert_int_equal(pos[n_s + i], t - (nn - 1 - i)); /* contiguous, ends at t */
    if (!g->bounded || seen <= sc->window) {
        assert_int_equal(nn, seen); /* nothing evicted yet */
        return;
    }
    assert_true(nn >= sc->window);                /* the whole recent window is kept */
    assert_true(nn <= sc->window + g->block - 1); /* plus at most a group of slack */
    if (g->grouped) assert_int_equal((pos[n_s] - S) % g->group, 0); /* dropped in whole groups */
    assert_true(stored <= g->max_stored);
}

static void run_scenario(const scenario *sc, int T) {
    const int NH = SC_NH, H = SC_H, D = SC_D, HD = SC_H * SC_D;
    const int kv_source[SC_NL] = {0, 0, 2};
    const int window[SC_NL] = {0, 6, 0};
    tg_cache_shape shape = small_shape(SC_NL, NH, H, D, T + 8);
    shape.kv_source = kv_source;
    shape.layer_window = window;
    tg_cache_params p = tg_cache_default_params();
    p.key_precision = sc->kp;
    p.value_precision = sc->vp;
    p.group_size = sc->group;
    p.residual = sc->residual;
    p.sink = sc->sink;
    p.window = sc->window;
    p.rope_positions = sc->reposition ? TG_ROPE_POSITIONS_DEFAULT : TG_ROPE_POSITIONS_ORIGINAL;
    tg_error err = {0};
    tg_kvcache *c = sc->slot_rope ? tg_kvcache_new_slot_rope(&shape, &p, &err) : tg_kvcache_new(&shape, &p, &err);
    if (!c) fail_msg("tg_kvcache_new: %s", err.msg);
    const tg_cache_geom *g = &c->g;
    const bool whole = sc->group == 0;
    /* keys re-coded while their grid changes (whole-history grids; provisional grids of the newest group when there
     * is no residual) carry up to 3 half-steps */
    const bool provisional = sc->group > 0 && sc->residual == 0;
    const float ktol = tolerance(sc->kp, true, whole || provisional, g->k.range && g->k.range->clip),
                vtol = tolerance(sc->vp, false, whole, g->v.range && g->v.range->clip);

    float *kraw = calloc((size_t)T * HD, sizeof(float)), *vraw = calloc((size_t)T * HD, sizeof(float));
    float *kb = calloc((size_t)T * HD, sizeof(float)), *vb = calloc((size_t)T * HD, sizeof(float));
    int64_t *pb = calloc((size_t)T, sizeof(int64_t));
    bool *vis = calloc((size_t)T, sizeof(bool));
    float q[SC_NH * SC_D], qr[SC_NH * SC_D], out[SC_NH * SC_D], out_scalar[SC_NH * SC_D], want[SC_NH * SC_D];
    float k2[SC_H * SC_D], v2[SC_H * SC_D], kref[SC_D];
    uint64_t seed = 1234567;
    float worst_k = 0.0f, worst_v = 0.0f, worst_att = 0.0f;

    for (int64_t t = 0; t < T; t++) {
        for (int i = 0; i < HD; i++) {
            kraw[t * HD + i] = frand(&seed);
            vraw[t * HD + i] = frand(&seed);
            k2[i] = frand(&seed);
            v2[i] = frand(&seed);
        }
        tg_kvcache_append(c, 0, t, kraw + t * HD, vraw + t * HD);
        tg_kvcache_append(c, 2, t, k2, v2);

        int64_t stored = tg_kvcache_read_back(c, 0, t, kb, vb, pb);
        assert_int_equal(stored, tg_kvcache_stored(c));
        check_positions(sc, g, pb, stored, t);
        /* read-back == the inputs within the precision's tolerance, rotated where the query at t sees them: at their
         * position; re-positioned sinks at t - (stored - 1) + j, one slot before the oldest window token; every key
         * at its slot (the query at slot stored - 1) for the slot_rope reference */
        const int64_t n_s = t + 1 < g->sink ? t + 1 : g->sink, sink_off = t < g->sink ? 0 : t - (stored - 1);
        for (int64_t s = 0; s < stored; s++)
            for (int h = 0; h < H; h++) {
                memcpy(kref, kraw + pb[s] * HD + h * D, sizeof kref);
                const int64_t at = !g->reposition ? pb[s] : g->slot_rope ? s : s < n_s ? sink_off + s : pb[s];
                tg_rope(kref, 1, D, at, 10000.0f, TG_ROPE_HALF);
                for (int i = 0; i < D; i++) {
                    float dk = fabsf(kb[(s * H + h) * D + i] - kref[i]);
                    float dv = fabsf(vb[(s * H + h) * D + i] - vraw[pb[s] * HD + h * D + i]);
                    assert_true(isfinite(kb[(s * H + h) * D + i]) && isfinite(vb[(s * H + h) * D + i]));
                    if (dk > worst_k) worst_k = dk;
                    if (dv > worst_v) worst_v = dv;
                }
            }
        /* fused attention == naive attention over the read-back, for the owning and the sharing layer */
        for (int layer = 0; layer < 2; layer++) {
            for (int i = 0; i < NH * D; i++) q[i] = frand(&seed);
            test_attend(c, layer, t, q, out, 2);
            tg_kvcache_set_simd(c, false);
            test_attend(c, layer, t, q, out_scalar, 1);
            tg_kvcache_set_simd(c, true);
            memcpy(qr, q, sizeof q);
            tg_rope(qr, NH, D, g->slot_rope ? stored - 1 : t, 10000.0f, TG_ROPE_HALF);
            for (int64_t s = 0; s < stored; s++) vis[s] = pb[s] <= t && (window[layer] == 0 || t - pb[s] < window[layer]);
            naive_attend(qr, kb, vb, vis, stored, NH, H, D, want);
            float d = max_abs_diff(out, want, NH * D);
            if (d > worst_att) worst_att = d;
            assert_true(max_abs_diff(out, out_scalar, NH * D) < 1e-5f);
        }
    }
    if (!(worst_k <= ktol && worst_v <= vtol && worst_att < 1e-4f))
        fail_msg("K %s V %s G %d R %d sink %lld window %lld %s%s: worst |dK| %g (tol %g), |dV| %g (tol %g), "
                 "|d attention| %g (tol 1e-4)", tg_kv_precision_name(sc->kp), tg_kv_precision_name(sc->vp), sc->group,
                 sc->residual, (long long)sc->sink, (long long)sc->window, sc->reposition ? "reposition" : "vanilla",
                 sc->slot_rope ? " (slot reference)" : "", (double)worst_k, (double)ktol, (double)worst_v, (double)vtol, (double)worst_att);
    free(kraw);
    free(vraw);
    free(kb);
    free(vb);
    free(pb);
    free(vis);
    tg_kvcache_free(c);
}

static void run_all_precisions_as(int group, int residual, int64_t sink, int64_t window, bool repo, bool slot,
                                  int T) {
    for (int kp = TG_KV_FP32; kp <= TG_KV_INT2; kp++) {
        scenario sc = {(tg_kv_precision)kp, (tg_kv_precision)kp, group, residual, sink, window, repo, slot};
        run_scenario(&sc, T);
    }
    /* mixed: quantised keys with plain values and the other way round */
    scenario mixed[] = {
        {TG_KV_INT4, TG_KV_FP16, group, residual, sink, window, repo, slot},
        {TG_KV_BF16, TG_KV_INT2, group, residual, sink, window, repo, slot},
        {TG_KV_INT8, TG_KV_INT4, group, residual, sink, window, repo, slot},
    };
    for (size_t i = 0; i < sizeof mixed / sizeof mixed[0]; i++) run_scenario(&mixed[i], T);
}

static void run_all_precisions(int group, int residual, int64_t sink, int64_t window, bool repo, int T) {
    run_all_precisions_as(group, residual, sink, window, repo, false, T);
}

static void test_unbounded_every_precision(void **state) {
    (void)state;
    run_all_precisions(8, 16, -1, 0, false, 70); /* groups of 8, residual 16 */
    run_all_precisions(8, 8, -1, 0, false, 30);  /* no residual beyond the incomplete group */
    run_all_precisions(8, 0, -1, 0, false, 30);  /* no residual: provisional key grids */
    run_all_precisions(0, 0, -1, 0, false, 30);  /* the design note's whole-history scheme */
}

static void test_streaming_vanilla_every_precision(void **state) {
    (void)state;
    run_all_precisions(8, 16, 3, 20, false, 90);
    run_all_precisions(8, 8, 2, 5, false, 60); /* window smaller than a group */
    run_all_precisions(8, 0, 2, 5, false, 60); /* the same without a residual (provisional key grids) */
    run_all_precisions(4, 0, 3, 20, false, 70);
    run_all_precisions(0, 0, 4, 12, false, 50);
}

static void test_streaming_reposition_every_precision(void **state) {
    (void)state;
    run_all_precisions(8, 16, 3, 20, true, 90);
    run_all_precisions(8, 32, 0, 9, true, 60); /* no sinks; residual larger than the window */
    run_all_precisions(0, 0, 4, 12, true, 50);
    run_all_precisions(4, 0, 3, 20, true, 70); /* sinks at their re-positioned place through many evictions */
}

/* The former scheme, kept as the reference the new one is proven against (test_rope_positions.c). */
static void test_streaming_slot_reference_every_precision(void **state) {
    (void)state;
    run_all_precisions_as(8, 16, 3, 20, true, true, 90);
    run_all_precisions_as(0, 0, 4, 12, true, true, 50);
}

/* ---- causal mask, sliding window, full cache ---------------------------------------------------------------- */

/* A query at an earlier position after later tokens were appended (a whole chunk appended first) must not see
 * them; a layer's sliding window hides keys pos - key_pos >= window. */
static void test_future_tokens_and_window_masked(void **state) {
    (void)state;
    const int NH = 2, H = 1, D = 8, T = 12;
    const int window[2] = {0, 3};
    tg_cache_shape shape = small_shape(2, NH, H, D, T);
    shape.layer_window = window;
    tg_cache_params p = tg_cache_default_params();
    tg_error err = {0};
    tg_kvcache *c = tg_kvcache_new(&shape, &p, &err);
    assert_non_null(c);
    float k[T][8], v[T][8], q[16], out[16], want[16], kr[T][8], qr[16];
    bool vis[T];
    uint64_t seed = 99;
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < D; i++) {
            k[t][i] = frand(&seed);
            v[t][i] = frand(&seed);
        }
        tg_kvcache_append(c, 0, t, k[t], v[t]);
        tg_kvcache_append(c, 1, t, k[t], v[t]);
        memcpy(kr[t], k[t], sizeof kr[t]);
        tg_rope(kr[t], 1, D, t, 10000.0f, TG_ROPE_HALF);
    }
    assert_false(tg_kvcache_has_room(c)); /* context of T tokens is full */
    tg_kvcache_append(c, 0, T, k[0], v[0]); /* ignored */
    assert_int_equal(tg_kvcache_stored(c), T);
    for (int layer = 0; layer < 2; layer++)
        for (int pos = 0; pos < T; pos++) {
            for (int i = 0; i < NH * D; i++) q[i] = frand(&seed);
            test_attend(c, layer, pos, q, out, 1);
            memcpy(qr, q, sizeof q);
            tg_rope(qr, NH, D, pos, 10000.0f, TG_ROPE_HALF);
            for (int t = 0; t < T; t++) vis[t] = t <= pos && (window[layer] == 0 || pos - t < window[layer]);
            naive_attend(qr, &kr[0][0], &v[0][0], vis, T, NH, H, D, want);
            assert_true(max_abs_diff(out, want, NH * D) < 1e-5f);
        }
    tg_kvcache_free(c);
}

/* ---- the design note's bug classes at the cache level ----------------------------------------------------------- */

/* All-zero and constant K/V in every precision and layout: attention stays finite and equals the (exact) value. */
static void test_constant_and_zero_kv_finite(void **state) {
    (void)state;
    const int NH = 2, H = 1, D = 8;
    const float consts[] = {0.0f, 1.5f, -3.25f};
    const int groups[] = {4, 0};
    for (int kp = TG_KV_FP32; kp <= TG_KV_INT2; kp++)
        for (size_t gi = 0; gi < 2; gi++)
            for (int repo = 0; repo < 2; repo++)
                for (size_t ci = 0; ci < sizeof consts / sizeof consts[0]; ci++) {
                    tg_cache_shape shape = small_shape(1, NH, H, D, 64);
                    tg_cache_params p = tg_cache_default_params();
                    p.key_precision = p.value_precision = (tg_kv_precision)kp;
                    p.group_size = groups[gi];
                    p.residual = 0;
                    p.window = 6;
                    p.sink = 2;
                    p.rope_positions = repo ? TG_ROPE_POSITIONS_REPOSITION : TG_ROPE_POSITIONS_ORIGINAL;
                    tg_error err = {0};
                    tg_kvcache *c = tg_kvcache_new(&shape, &p, &err);
                    assert_non_null(c);
                    float k[8], v[8], q[16], out[16];
                    for (int i = 0; i < D; i++) k[i] = v[i] = consts[ci];
                    for (int i = 0; i < NH * D; i++) q[i] = 0.25f * (float)(i % 5) - 0.5f;
                    for (int t = 0; t < 40; t++) {
                        tg_kvcache_append(c, 0, t, k, v);
                        test_attend(c, 0, t, q, out, 1);
                        for (int i = 0; i < NH * D; i++) {
                            assert_true(isfinite(out[i]));
                            assert_float_equal(out[i], consts[ci], 1e-6f); /* mean of identical values */
                        }
                    }
                    tg_kvcache_free(c);
                }
}

/* Tiny ranges (scales at the 1e-5 floor, fp16 subnormals) and large magnitudes: finite, within a step. */
static void test_tiny_and_large_ranges_finite(void **state) {
    (void)state;
    const int NH = 1, H = 1, D = 8;
    const float mags[] = {1e-6f, 3e-5f, 1e-3f, 300.0f, 6e4f};
    for (int kp = TG_KV_INT8; kp <= TG_KV_INT2; kp++)
        for (size_t m = 0; m < sizeof mags / sizeof mags[0]; m++) {
            tg_cache_shape shape = small_shape(1, NH, H, D, 64);
            tg_cache_params p = tg_cache_default_params();
            p.key_precision = p.value_precision = (tg_kv_precision)kp;
            p.group_size = 4;
            p.residual = 0;
            tg_error err = {0};
            tg_kvcache *c = tg_kvcache_new(&shape, &p, &err);
            assert_non_null(c);
            uint64_t seed = 7;
            float k[8], v[8], q[8], out[8], kb[32 * 8], vb[32 * 8];
            for (int t = 0; t < 32; t++) {
                for (int i = 0; i < D; i++) {
                    k[i] = mags[m] * frand(&seed);
                    v[i] = mags[m] * frand(&seed);
                    q[i] = frand(&seed);
                }
                tg_kvcache_append(c, 0, t, k, v);
                test_attend(c, 0, t, q, out, 1);
                for (int i = 0; i < D; i++) assert_true(isfinite(out[i]) && fabsf(out[i]) <= 1.01f * mags[m] + 1e-5f);
            }
            int64_t n = tg_kvcache_read_back(c, 0, 31, kb, vb, NULL);
            for (int64_t i = 0; i < n * D; i++) assert_true(isfinite(kb[i]) && isfinite(vb[i]));
            tg_kvcache_free(c);
        }
}

/* ---- eviction and ring-buffer geometry over many policies ------------------------------------------------------ */

/* For many (window, group, residual, sink) the read-back after every append holds exactly the sinks and the
 * recent window (+ group slack) with the values that were appended (int8 tolerance): a ring sized too small would
 * overwrite live rows and fail here. */
static void test_eviction_geometry_sweep(void **state) {
    (void)state;
    const int H = 1, D = 8;
    const int groups[] = {1, 2, 4, 8};
    float kb[80 * 8], vb[80 * 8], k[8], v[8];
    int64_t pb[80];
    for (int64_t W = 1; W <= 20; W += 3)
        for (size_t gi = 0; gi < 4; gi++)
            for (int rm = 0; rm <= 3; rm++)
                for (int64_t S = 0; S <= 2; S += 2) {
                    const int G = groups[gi];
                    tg_cache_shape shape = small_shape(1, 1, H, D, 1000);
                    tg_cache_params p = tg_cache_default_params();
                    p.key_precision = TG_KV_INT8;
                    p.value_precision = TG_KV_INT8;
                    p.group_size = G;
                    p.residual = rm * G;
                    p.window = W;
                    p.sink = S;
                    tg_error err = {0};
                    tg_kvcache *c = tg_kvcache_new(&shape, &p, &err);
                    if (!c) fail_msg("%s", err.msg);
                    assert_true(c->g.max_stored <= 80);
                    scenario sc = {TG_KV_INT8, TG_KV_INT8, G, rm * G, S, W, false, false};
                    for (int64_t t = 0; t < 3 * c->g.max_stored + 10; t++) {
                        /* value i of token t encodes t, so a wrong row is caught */
                        for (int i = 0; i < D; i++) v[i] = k[i] = (float)((t * 7 + i) % 11) / 11.0f;
                        tg_kvcache_append(c, 0, t, k, v);
                        int64_t n = tg_kvcache_read_back(c, 0, t, kb, vb, pb);
                        check_positions(&sc, &c->g, pb, n, t);
                        for (int64_t s = 0; s < n; s++)
                            for (int i = 0; i < D; i++)
                                assert_float_equal(vb[s * D + i], (float)((pb[s] * 7 + i) % 11) / 11.0f, 0.0021f);
                    }
                    tg_kvcache_free(c);
                }
}

/* ---- byte accounting and flat memory ------------------------------------------------------------------------ */

/* Bytes per layer written out independently of policy.c, per precision: plain rows; KIVI packed codes + fp16
 * scale/zero pairs + the residual ring + the sinks, both at the residual precision (e bytes an element). */
static size_t closed_form_layer(tg_kv_precision p, bool keys, int64_t H, int64_t D, int64_t sink, int64_t rows,
                                int64_t G, int64_t units, int64_t res_cap, int64_t e) {
    const int bits = p == TG_KV_INT8 ? 8 : p == TG_KV_INT4 ? 4 : p == TG_KV_INT2 ? 2 : 0;
    if (!bits) {
        const int64_t pe = p == TG_KV_FP32 ? 4 : 2;
        return (size_t)((rows + sink) * H * D * pe);
    }
    const int64_t row_bytes = (D * bits + 7) / 8;
    if (G == 0) /* whole-history: rows of codes, one pair per (head, channel) for keys, per (row, head) for values */
        return (size_t)(rows * H * row_bytes + (keys ? H * D : rows * H) * 4 + sink * H * D * e);
    return (size_t)(units * G * H * row_bytes + units * H * (keys ? D : G) * 4 + res_cap * H * D * e +
                    sink * H * D * e);
}

static void test_byte_accounting(void **state) {
    (void)state;
    const int kv_source[3] = {0, 0, 2}; /* two K/V layers */
    const int64_t H = 2, D = 16, ctx = 100;
    for (int kp = TG_KV_FP32; kp <= TG_KV_INT2; kp++)
        for (int vp = TG_KV_FP32; vp <= TG_KV_INT2; vp++)
            for (int mode = 0; mode < 6; mode++) {
                /* 0 unbounded, 1 sink 4 + window 50, 2 group 0, 3/4 = 0/1 without a residual, 5 = 1 with an fp32
                 * residual (KIVI's setting) */
                tg_cache_shape shape = small_shape(3, 4, (int)H, (int)D, ctx);
                shape.kv_source = kv_source;
                tg_cache_params p = tg_cache_default_params();
                p.key_precision = (tg_kv_precision)kp;
                p.value_precision = (tg_kv_precision)vp;
                p.group_size = 16;
                p.residual = mode == 3 || mode == 4 ? 0 : 32;
                if (mode == 5) p.residual_precision = TG_KV_FP32;
                const bool bounded = mode == 1 || mode == 4 || mode == 5;
                if (bounded) p.window = 50; /* sink 4 + window 50 */
                if (mode == 2) p.group_size = 0;
                tg_error err = {0};
                tg_kvcache *c = tg_kvcache_new(&shape, &p, &err);
                assert_non_null(c);
                if (!bounded) assert_true(tg_kvcache_reserve(c, ctx, &err)); /* an unbounded cache's every chunk */
                const bool kivi = kp >= TG_KV_INT8 || vp >= TG_KV_INT8;
                const int64_t G = kivi ? p.group_size : 0, sink = bounded ? 4 : 0, e = mode == 5 ? 4 : 2;
                const int64_t ring = p.residual; /* max(R, G) with R a multiple of G; 0 without a residual */
                int64_t rows, units = 0, res_cap = 0;
                if (bounded) {
                    rows = G ? 50 + G - 1 : 50;
                    res_cap = ring;                              /* R below the window */
                    units = G ? (50 + 2 * G - 2 - ring) / G : 0; /* the most groups ever held */
                } else {
                    rows = ctx;
                    res_cap = ring;
                    units = G ? (ctx - 1 - ring + G) / G : 0;
                }
                size_t want =
                    2 * (closed_form_layer(p.key_precision, true, H, D, sink, rows, G, units, res_cap, e) +
                         closed_form_layer(p.value_precision, false, H, D, sink, rows, G, units, res_cap, e));
                tg_cache_report r;
                tg_kvcache_report(c, 0, &r);
                size_t store, meta;
                int64_t n_allocs;
                tg_kvcache_alloc_stats(c, &store, &meta, &n_allocs);
                if (r.bytes_total != want || store != want)
                    fail_msg("K %s V %s mode %d: report %zu, allocated %zu, closed form %zu", tg_kv_precision_name(kp),
                             tg_kv_precision_name(vp), mode, r.bytes_total, store, want);
                assert_int_equal(r.bytes_total, r.bytes_k_data + r.bytes_v_data + r.bytes_scales + r.bytes_residual);
                assert_int_equal(r.n_kv_layers, 2);
                assert_int_equal(r.n_layers, 3);
                if (!kivi) assert_int_equal(r.bytes_scales + r.bytes_residual, 0);
                assert_int_equal(tg_kvcache_bytes_for(&shape, &p, bounded ? 1000 : ctx, &err), want);
                tg_kvcache_free(c);
            }
}

/* Allocate, append 10x the capacity, check that nothing was allocated after tg_kvcache_new and that the report's
 * counts stay put; also bf16 / fp32 comparisons are for the stored history. */
static void test_memory_never_grows(void **state) {
    (void)state;
    for (int kp = TG_KV_FP32; kp <= TG_KV_INT2; kp++) {
        tg_cache_shape shape = small_shape(2, 2, 1, 8, 4096);
        tg_cache_params p = tg_cache_default_params();
        p.key_precision = p.value_precision = (tg_kv_precision)kp;
        p.group_size = 8;
        p.residual = 16;
        p.window = 24;
        p.rope_positions = kp % 2 ? TG_ROPE_POSITIONS_DEFAULT : TG_ROPE_POSITIONS_ORIGINAL;
        tg_error err = {0};
        tg_kvcache *c = tg_kvcache_new(&shape, &p, &err);
        assert_non_null(c);
        size_t store0, meta0, store1, meta1;
        int64_t n0, n1;
        tg_kvcache_alloc_stats(c, &store0, &meta0, &n0);
        tg_cache_report r0, r1;
        tg_kvcache_report(c, 0, &r0);
        uint64_t seed = 5;
        float k[8], v[8], q[16], out[16];
        const int64_t T = 10 * r0.capacity;
        for (int64_t t = 0; t < T; t++) {
            for (int i = 0; i < 8; i++) {
                k[i] = frand(&seed);
                v[i] = frand(&seed);
            }
            for (int i = 0; i < 16; i++) q[i] = frand(&seed);
            for (int l = 0; l < 2; l++) {
                tg_kvcache_append(c, l, t, k, v);
                test_attend(c, l, t, q, out, 1);
            }
            assert_true(tg_kvcache_stored(c) <= r0.capacity);
            assert_true(tg_kvcache_has_room(c));
        }
        tg_kvcache_alloc_stats(c, &store1, &meta1, &n1);
        assert_int_equal(store0, store1);
        assert_int_equal(meta0, meta1);
        assert_int_equal(n0, n1);
        tg_kvcache_report(c, T, &r1);
        assert_int_equal(r1.bytes_total, r0.bytes_total);
        assert_int_equal(r1.position, T);
        /* what bf16 / fp32 caches with the same sinks and window allocate: (4 + 24) rows x 2 layers x 8 x K, V */
        assert_int_equal(r1.bytes_if_fp32, (size_t)(4 + 24) * 2 * 8 * 2 * 4);
        assert_int_equal(r1.bytes_if_bf16, (size_t)(4 + 24) * 2 * 8 * 2 * 2);
        if (kp == TG_KV_BF16) assert_int_equal(r1.bytes_if_bf16, r1.bytes_total);
        if (kp == TG_KV_FP32) assert_int_equal(r1.bytes_if_fp32, r1.bytes_total);
        assert_true(r1.bytes_in_use > 0 && r1.bytes_in_use <= r1.bytes_total);
        tg_kvcache_free(c);
    }
}

/* An unbounded cache grows in chunks as tokens arrive (issue 14): nothing but its residual ring at first, then one
 * chunk of every store at a time, each allocated once (earlier chunks stay where they are, so what attention reads
 * never moves); its bytes, the report's and tg_kvcache_bytes_for at the chunk boundaries agree; reserving allocates
 * ahead; the memory limit is checked at every chunk and a refused chunk stores nothing. */
static void test_unbounded_grows_in_chunks(void **state) {
    (void)state;
    for (int kp = TG_KV_FP32; kp <= TG_KV_INT2; kp++) {
        const int64_t ctx = 1800, H = 2, D = 8; /* chunks of 512 tokens: three whole and a shorter last one */
        tg_cache_shape shape = small_shape(2, 4, (int)H, (int)D, ctx);
        tg_cache_params p = tg_cache_default_params();
        p.key_precision = p.value_precision = (tg_kv_precision)kp;
        p.group_size = 32; /* not from the length, so that caches sized for fewer tokens have the same groups */
        tg_error err = {0};
        tg_kvcache *c = tg_kvcache_new(&shape, &p, &err);
        assert_non_null(c);
        tg_cache_report r;
        tg_kvcache_report(c, 0, &r);
        assert_int_equal(r.chunk_tokens, 512);
        const size_t fixed = r.bytes_total; /* int2's residual ring of one group: the only part allocated up front */
        assert_int_equal(fixed, r.bytes_residual);
        uint64_t seed = 11;
        float k[16], v[16], q[32], out[32], ref[32];
        size_t last_store = 0;
        int64_t last_allocs = 0;
        for (int64_t t = 0; t < ctx; t++) {
            for (int i = 0; i < 16; i++) {
                k[i] = frand(&seed);
                v[i] = frand(&seed);
            }
            for (int i = 0; i < 32; i++) q[i] = frand(&seed);
            for (int l = 0; l < 2; l++) {
                assert_true(tg_kvcache_append(c, l, t, k, v));
                test_attend(c, l, t, q, out, 1);
            }
            size_t store, meta;
            int64_t n_allocs;
            tg_kvcache_alloc_stats(c, &store, &meta, &n_allocs);
            tg_kvcache_report(c, t + 1, &r);
            assert_int_equal(r.bytes_total, store);
            assert_true(r.allocated_for >= t + 1 && r.allocated_for - (t + 1) < 512 + 32);
            assert_true(r.bytes_in_use <= r.bytes_total);
            if (store != last_store) { /* a chunk boundary: exactly the bytes of a cache sized for what it holds */
                assert_true(n_allocs > last_allocs);
                tg_cache_shape sized = shape;
                sized.context_length = r.allocated_for;
                if (r.allocated_for % 512 == 0 || r.allocated_for == ctx)
                    assert_int_equal(store, tg_kvcache_bytes_for(&sized, &p, r.allocated_for, &err));
            } else {
                assert_int_equal(n_allocs, last_allocs); /* within a chunk, appends allocate nothing */
            }
            last_store = store;
            last_allocs = n_allocs;
        }
        /* full: every chunk, the bytes of the closed form, and attention as over a cache allocated up front */
        assert_false(tg_kvcache_has_room(c));
        assert_int_equal(last_store, tg_kvcache_bytes_for(&shape, &p, ctx, &err));
        tg_kvcache_report(c, ctx, &r);
        assert_int_equal(r.allocated_for, ctx);
        assert_false(tg_kvcache_append(c, 0, ctx, k, v));
        tg_kvcache_free(c);

        /* the same history through a cache whose chunks are all reserved at once attends identically */
        tg_kvcache *a = tg_kvcache_new(&shape, &p, &err), *b = tg_kvcache_new(&shape, &p, &err);
        assert_true(tg_kvcache_reserve(b, ctx, &err));
        size_t sb0, mb0;
        int64_t nb0;
        tg_kvcache_alloc_stats(b, &sb0, &mb0, &nb0);
        seed = 12;
        for (int64_t t = 0; t < 300; t++) {
            for (int i = 0; i < 16; i++) {
                k[i] = frand(&seed);
                v[i] = frand(&seed);
            }
            for (int i = 0; i < 32; i++) q[i] = frand(&seed);
            for (int l = 0; l < 2; l++) {
                tg_kvcache_append(a, l, t, k, v);
                tg_kvcache_append(b, l, t, k, v);
                test_attend(a, l, t, q, out, 1);
                test_attend(b, l, t, q, ref, 1);
                assert_memory_equal(out, ref, sizeof out);
            }
        }
        size_t sb1, mb1;
        int64_t nb1;
        tg_kvcache_alloc_stats(b, &sb1, &mb1, &nb1);
        assert_int_equal(nb0, nb1); /* the reserved cache allocated nothing while appending */
        tg_kvcache_free(a);
        tg_kvcache_free(b);

        /* a limit of the first chunk and a bit: the second is refused, with the numbers, and nothing is stored */
        c = tg_kvcache_new(&shape, &p, &err);
        assert_true(tg_kvcache_reserve(c, 1, &err));
        size_t one, meta;
        int64_t n_allocs;
        tg_kvcache_alloc_stats(c, &one, &meta, &n_allocs);
        tg_kvcache_report(c, 0, &r);
        const int64_t first = r.allocated_for; /* the tokens of the first chunk */
        tg_kvcache_free(c);
        p.max_memory = (int64_t)one + 100;
        c = tg_kvcache_new(&shape, &p, &err);
        assert_non_null(c);
        assert_true(tg_kvcache_reserve(c, first, &err));
        assert_false(tg_kvcache_reserve(c, first + 1, &err));
        assert_int_equal(err.code, TG_ERR_CACHE_MEMORY_LIMIT);
        char want[96];
        snprintf(want, sizeof want, "to hold %lld tokens, more than the memory limit", (long long)(first + 512));
        if (!strstr(err.msg, want)) fail_msg("%s: %s", tg_kv_precision_name(p.key_precision), err.msg);
        for (int64_t t = 0; t < first; t++) assert_true(tg_kvcache_append(c, 0, t, k, v));
        assert_false(tg_kvcache_append(c, 0, first, k, v));
        assert_int_equal(tg_kvcache_stored(c), first);
        tg_kvcache_free(c);
    }
}

/* Group size 0 (whole-history key grids) grows by doubling its one block of rows instead (its rows stay one
 * segment): 512, 1024, 2048 rows as tokens arrive, and attention bit for bit like a cache reserved whole up front. */
static void test_unbounded_whole_doubles(void **state) {
    (void)state;
    for (int kp = TG_KV_INT8; kp <= TG_KV_INT2; kp++) {
        const int64_t ctx = 2500;
        tg_cache_shape shape = small_shape(2, 4, 2, 8, ctx);
        tg_cache_params p = tg_cache_default_params();
        p.key_precision = p.value_precision = (tg_kv_precision)kp;
        p.group_size = 0;
        tg_error err = {0};
        tg_kvcache *a = tg_kvcache_new(&shape, &p, &err), *b = tg_kvcache_new(&shape, &p, &err);
        assert_non_null(a);
        assert_non_null(b);
        assert_true(tg_kvcache_reserve(b, ctx, &err));
        tg_cache_report r;
        tg_kvcache_report(a, 0, &r);
        assert_int_equal(r.bytes_total, 0);
        uint64_t seed = 21;
        float k[16], v[16], q[32], out[32], ref[32];
        for (int64_t t = 0; t < ctx + 100; t++) {
            for (int i = 0; i < 16; i++) {
                k[i] = frand(&seed);
                v[i] = frand(&seed);
            }
            for (int i = 0; i < 32; i++) q[i] = frand(&seed);
            for (int l = 0; l < 2; l++) {
                assert_int_equal(tg_kvcache_append(a, l, t, k, v), t < ctx);
                tg_kvcache_append(b, l, t, k, v);
                if (t >= ctx) continue;
                test_attend(a, l, t, q, out, 2);
                test_attend(b, l, t, q, ref, 2);
                assert_memory_equal(out, ref, sizeof out);
            }
            tg_kvcache_report(a, t + 1, &r);
            const int64_t want = t < 512 ? 512 : t < 1024 ? 1024 : t < 2048 ? 2048 : ctx;
            assert_int_equal(r.allocated_for, want);
            size_t store, meta;
            int64_t n;
            tg_kvcache_alloc_stats(a, &store, &meta, &n);
            assert_int_equal(store, r.bytes_total);
        }
        size_t sa, sb, m;
        int64_t n;
        tg_kvcache_alloc_stats(a, &sa, &m, &n);
        tg_kvcache_alloc_stats(b, &sb, &m, &n);
        assert_int_equal(sa, sb);
        assert_int_equal(sa, tg_kvcache_bytes_for(&shape, &p, ctx, &err));
        tg_kvcache_free(a);
        tg_kvcache_free(b);
    }
}

/* Re-positioning with a window far beyond what is stored (issue 11, 4c): the default scheme builds no table at all
 * (window keys rotated at their positions on append), and the slot_rope reference caps its table at
 * TG_REPOSITION_TABLE_SLOTS instead of building it for the whole window up front; keys at slots past the table are
 * still rotated exactly as tg_rope rotates them at their slot (== their position here, with no sinks). */
static void test_reposition_table_capped(void **state) {
    (void)state;
    enum { D = 8 };
    tg_cache_shape shape = small_shape(1, 1, 1, D, 64);
    tg_cache_params p = tg_cache_default_params();
    p.window = (int64_t)1 << 24;
    p.sink = 0;
    p.rope_positions = TG_ROPE_POSITIONS_REPOSITION;
    tg_error err = {0};
    tg_kvcache *d = tg_kvcache_new(&shape, &p, &err);
    assert_non_null(d);
    assert_null(d->rope_tab);
    assert_null(d->sink_cos);
    tg_kvcache_free(d);
    tg_kvcache *c = tg_kvcache_new_slot_rope(&shape, &p, &err);
    assert_non_null(c);
    assert_int_equal(c->rope_tab->n_pos, TG_REPOSITION_TABLE_SLOTS);
    const int64_t T = TG_REPOSITION_TABLE_SLOTS + 40;
    float k[D], v[D];
    for (int64_t t = 0; t < T; t++) {
        for (int i = 0; i < D; i++) {
            k[i] = (float)((t * 7 + i * 3) % 11) - 5.0f;
            v[i] = (float)i;
        }
        tg_kvcache_append(c, 0, t, k, v);
    }
    float *keys = malloc((size_t)T * D * sizeof *keys);
    assert_non_null(keys);
    assert_int_equal(tg_kvcache_read_back(c, 0, T - 1, keys, NULL, NULL), T);
    for (int64_t t = TG_REPOSITION_TABLE_SLOTS - 2; t < T; t++) {
        for (int i = 0; i < D; i++) k[i] = (float)((t * 7 + i * 3) % 11) - 5.0f;
        tg_rope(k, 1, D, t, 10000.0f, TG_ROPE_HALF);
        assert_memory_equal(keys + t * D, k, sizeof k);
    }
    free(keys);
    tg_kvcache_free(c);
}

/* The memory check (issue 11, 4e): a cache larger than max_memory, or than the machine's memory by default, is
 * refused before anything is allocated, with both numbers (a bounded cache by tg_kvcache_new, an unbounded one when
 * it would grow past the limit); a negative limit turns it off. */
static void test_max_memory(void **state) {
    (void)state;
    tg_cache_shape shape = small_shape(2, 2, 1, 8, 1024);
    tg_cache_params p = tg_cache_default_params();
    tg_error err = {0};
    p.max_memory = 1000; /* the full cache needs 2 layers x 2 x 1024 x 8 x 4 = 128 KiB, its first chunk 16 KiB */
    tg_kvcache *c = tg_kvcache_new(&shape, &p, &err);
    assert_non_null(c);
    assert_false(tg_kvcache_reserve(c, 1024, &err));
    assert_int_equal(err.code, TG_ERR_CACHE_MEMORY_LIMIT);
    assert_string_equal(err.msg, "KV cache needs 128.00 KiB to hold 1024 tokens, more than the memory limit 1000 B");
    tg_kvcache_free(c);
    p.max_memory = 128 << 10;
    c = tg_kvcache_new(&shape, &p, &err);
    assert_non_null(c);
    assert_true(tg_kvcache_reserve(c, 1024, &err));
    tg_kvcache_free(c);
    p.max_memory = 1000, p.window = 1000; /* bounded: refused up front */
    assert_null(tg_kvcache_new(&shape, &p, &err));
    assert_int_equal(err.code, TG_ERR_CACHE_MEMORY_LIMIT);
    assert_non_null(strstr(err.msg, ", more than the memory limit 1000 B"));
    /* 2^40 tokens of a bounded window: 2^40 x 2 x 2 x 8 x 4 bytes = 128 TiB, more than any test machine has */
    p = tg_cache_default_params();
    p.window = (int64_t)1 << 40;
    assert_null(tg_kvcache_new(&shape, &p, &err));
    assert_int_equal(err.code, TG_ERR_CACHE_MEMORY);
    assert_non_null(strstr(err.msg, "KV cache needs 128.00 TiB but the machine has "));
    assert_null(strstr(err.msg, "--")); /* the library's terms; the CLI names --max-memory */
    /* the cache table still answers for such a policy: it allocates nothing */
    assert_true(tg_kvcache_bytes_for(&shape, &p, 100, &err) > 0);
}

/* ---- policy: validation, budget, banner ------------------------------------------------------------------------ */

/* The policy is rejected with `code`, in the cache's own terms (the CLI words it with its flags). */
static void expect_invalid(tg_cache_params p, tg_error_code code) {
    tg_cache_shape shape = small_shape(2, 4, 2, 16, 512);
    tg_error err = {0};
    tg_kvcache *c = tg_kvcache_new(&shape, &p, &err);
    if (c) fail_msg("accepted an invalid policy (expected error code %d)", (int)code);
    if (err.code != code) fail_msg("error \"%s\" has code %d, not %d", err.msg, (int)err.code, (int)code);
    if (strncmp(err.msg, "KV cache: ", 10) != 0 || strstr(err.msg, "--"))
        fail_msg("error \"%s\" is not in the cache's terms", err.msg);
}

static void test_invalid_policies_have_codes(void **state) {
    (void)state;
    tg_cache_params d = tg_cache_default_params(), p;
    p = d, p.sink = 4; /* explicit sink without a window */
    expect_invalid(p, TG_ERR_CACHE_SINK_WITHOUT_WINDOW);
    p = d, p.residual = 48; /* not a multiple of 32 */
    expect_invalid(p, TG_ERR_CACHE_RESIDUAL_NOT_MULTIPLE);
    p = d, p.residual = -32;
    expect_invalid(p, TG_ERR_CACHE_RESIDUAL);
    p = d, p.group_size = -2; /* -1 is TG_KV_GROUP_AUTO */
    expect_invalid(p, TG_ERR_CACHE_GROUP_SIZE);
    p = d, p.window = -5;
    expect_invalid(p, TG_ERR_CACHE_WINDOW);
    p = d, p.sink = -2, p.window = 8;
    expect_invalid(p, TG_ERR_CACHE_SINK);
    p = d, p.budget_bytes = 100; /* not even the sinks */
    expect_invalid(p, TG_ERR_CACHE_BUDGET_TOO_SMALL);
    p = d, p.budget_bytes = -1;
    expect_invalid(p, TG_ERR_CACHE_BUDGET);
    p = d, p.budget_bytes = 1 << 20, p.window = 64;
    expect_invalid(p, TG_ERR_CACHE_BUDGET_AND_WINDOW);
    p = d, p.key_precision = (tg_kv_precision)17;
    expect_invalid(p, TG_ERR_CACHE_KEY_PRECISION);
    p = d, p.value_precision = (tg_kv_precision)-1;
    expect_invalid(p, TG_ERR_CACHE_VALUE_PRECISION);
    p = d, p.residual_precision = TG_KV_INT4;
    expect_invalid(p, TG_ERR_CACHE_RESIDUAL_PRECISION);
    p = d, p.window = 8, p.rope_positions = (tg_rope_positions)7;
    expect_invalid(p, TG_ERR_OTHER);
    /* valid corners: sink 0 with a window, group 0 with any residual, re-positioning without a window */
    tg_cache_shape shape = small_shape(2, 4, 2, 16, 512);
    tg_error err = {0};
    tg_cache_params ok[4] = {d, d, d, d};
    ok[0].sink = 0, ok[0].window = 10;
    ok[1].group_size = 0, ok[1].residual = 100, ok[1].key_precision = TG_KV_INT4;
    ok[2].rope_positions = TG_ROPE_POSITIONS_REPOSITION;
    ok[3].sink = 0; /* explicit 0 sinks and no window: nothing to keep, nothing wrong */
    for (int i = 0; i < 4; i++) {
        tg_kvcache *c = tg_kvcache_new(&shape, &ok[i], &err);
        if (!c) fail_msg("valid policy %d rejected: %s", i, err.msg);
        tg_kvcache_free(c);
    }
}

static void test_budget_chooses_largest_window(void **state) {
    (void)state;
    tg_cache_shape shape = small_shape(4, 8, 4, 32, 2048);
    const int64_t budgets[] = {60000, 200000, 1000000, 100000000};
    for (int kp = TG_KV_FP32; kp <= TG_KV_INT2; kp++)
        for (size_t b = 0; b < sizeof budgets / sizeof budgets[0]; b++) {
            tg_cache_params p = tg_cache_default_params();
            p.key_precision = p.value_precision = (tg_kv_precision)kp;
            p.budget_bytes = budgets[b];
            tg_error err = {0};
            tg_kvcache *c = tg_kvcache_new(&shape, &p, &err);
            if (!c) {
                assert_int_equal(err.code, TG_ERR_CACHE_BUDGET_TOO_SMALL); /* too small for this precision */
                continue;
            }
            tg_cache_report r;
            tg_kvcache_report(c, 0, &r);
            const int64_t W = c->g.window;
            assert_true(W >= 1 && W <= 2048);
            assert_true(r.bytes_total <= (size_t)budgets[b]);
            assert_non_null(strstr(r.policy, "--kv-budget"));
            if (W < 2048) { /* one more token of window would not fit */
                tg_cache_params q = p;
                q.budget_bytes = 0;
                q.window = W + 1;
                assert_true(tg_kvcache_bytes_for(&shape, &q, 1 << 20, &err) > (size_t)budgets[b]);
            }
            tg_kvcache_free(c);
        }
}

static void test_policy_string_and_names(void **state) {
    (void)state;
    tg_cache_shape shape = small_shape(2, 4, 2, 16, 4096);
    tg_cache_params p = tg_cache_default_params();
    p.key_precision = p.value_precision = TG_KV_INT4;
    p.window = 256;
    tg_error err = {0};
    tg_kvcache *c = tg_kvcache_new(&shape, &p, &err);
    assert_non_null(c);
    tg_cache_report r;
    tg_kvcache_report(c, 0, &r);
    assert_string_equal(r.policy, "K int4 / V int4 (KIVI, group 32, no residual: the newest group's keys on "
                                  "provisional scales), StreamingLLM sink 4 + window 256 (re-positioned RoPE; stored <= 291 "
                                  "with group slack), sinks fp16");
    assert_int_equal(r.capacity, 291);
    tg_kvcache_free(c);
    /* KIVI's published setting, by flags, with the keys at their original positions */
    p.group_size = 32, p.residual = 128, p.residual_precision = TG_KV_FP32;
    p.rope_positions = TG_ROPE_POSITIONS_ORIGINAL;
    c = tg_kvcache_new(&shape, &p, &err);
    assert_non_null(c);
    tg_kvcache_report(c, 0, &r);
    assert_string_equal(r.policy, "K int4 / V int4 (KIVI, group 32, residual 128), StreamingLLM sink 4 + window 256 "
                                  "(vanilla RoPE; stored <= 291 with group slack), sinks fp32");
    tg_kvcache_free(c);
    /* int2's automatic residual: one group, of half the automatic size */
    p = tg_cache_default_params();
    p.key_precision = p.value_precision = TG_KV_INT2;
    p.window = 256;
    c = tg_kvcache_new(&shape, &p, &err);
    assert_non_null(c);
    tg_kvcache_report(c, 0, &r);
    assert_string_equal(r.policy, "K int2 / V int2 (KIVI, group 16, residual 16 at fp16), K and V grids clipped, StreamingLLM sink 4 + "
                                  "window 256 (re-positioned RoPE; stored <= 275 with group slack), sinks fp16");
    tg_kvcache_free(c);
    /* unbounded: the default and original say nothing; re-positioning asked for says it does nothing */
    p = tg_cache_default_params();
    for (int rp = TG_ROPE_POSITIONS_DEFAULT; rp <= TG_ROPE_POSITIONS_ORIGINAL; rp++) {
        p.rope_positions = (tg_rope_positions)rp;
        c = tg_kvcache_new(&shape, &p, &err);
        assert_non_null(c);
        tg_kvcache_report(c, 0, &r);
        assert_string_equal(r.policy, rp == TG_ROPE_POSITIONS_REPOSITION
                                          ? "K fp32 / V fp32, unbounded (context 4096); re-positioning has no "
                                            "effect without a window"
                                          : "K fp32 / V fp32, unbounded (context 4096)");
        tg_kvcache_free(c);
    }

    for (int i = TG_KV_FP32; i <= TG_KV_INT2; i++) {
        tg_kv_precision back;
        assert_true(tg_kv_precision_parse(tg_kv_precision_name((tg_kv_precision)i), &back));
        assert_int_equal(back, i);
    }
    tg_kv_precision x = TG_KV_INT8;
    assert_false(tg_kv_precision_parse("int3", &x));
    assert_false(tg_kv_precision_parse(NULL, &x));
    assert_int_equal(x, TG_KV_INT8);
    assert_string_equal(tg_kv_precision_name((tg_kv_precision)42), "unknown");
    tg_cache_params d = tg_cache_default_params();
    assert_int_equal(d.group_size, TG_KV_GROUP_AUTO);
    assert_int_equal(d.residual, TG_KV_RESIDUAL_AUTO);
    assert_int_equal(d.residual_precision, TG_KV_FP16);
    assert_int_equal(d.window, 0);
    assert_int_equal(d.rope_positions, TG_ROPE_POSITIONS_DEFAULT);
}

/* The cache table grows with n_tokens when unbounded and stops at the StreamingLLM bound. */
static void test_bytes_for_table(void **state) {
    (void)state;
    tg_cache_shape shape = small_shape(4, 8, 4, 32, 512);
    for (int kp = TG_KV_FP32; kp <= TG_KV_INT2; kp++) {
        tg_cache_params u = tg_cache_default_params(), s;
        u.key_precision = u.value_precision = (tg_kv_precision)kp;
        s = u;
        s.window = 256;
        tg_error err = {0};
        size_t prev = 0, bound = 0;
        for (int64_t T = 128; T <= 8192; T *= 2) {
            size_t bu = tg_kvcache_bytes_for(&shape, &u, T, &err), bs = tg_kvcache_bytes_for(&shape, &s, T, &err);
            assert_true(bu > prev);
            assert_true(bs <= bu);
            if (T >= 512) {
                if (bound) assert_int_equal(bs, bound);
                bound = bs;
            }
            prev = bu;
        }
        if (kp == TG_KV_FP32) assert_int_equal(tg_kvcache_bytes_for(&shape, &u, 1000, &err), 4 * 1000 * 4 * 32 * 2 * 4);
    }
}

/* Long histories are split into shares (pieces run separately, combined with their max and sum): attention over
 * 2,600 tokens (five shares) equals the naive attention over the read-back within 1e-4, the scalar reference within
 * 1e-5, and combining one share per kv-head (computed by hand through the piece API) within 1e-5. Every precision,
 * head dims 16 (two AVX2 chunks) and 40 (a chunk of 8 after the 32s), plain and KIVI groups with a residual. */
static void test_split_shares_match(void **state) {
    (void)state;
    const int NH = 6, H = 2, T = 2600;
    const int dims[] = {16, 40};
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
        const int D = dims[di], HD = H * D;
        for (int kp = TG_KV_FP32; kp <= TG_KV_INT2; kp++) {
            tg_cache_shape shape = small_shape(1, NH, H, D, T + 8);
            tg_cache_params p = tg_cache_default_params();
            p.key_precision = p.value_precision = (tg_kv_precision)kp;
            tg_error err = {0};
            tg_kvcache *c = tg_kvcache_new(&shape, &p, &err);
            if (!c) fail_msg("tg_kvcache_new: %s", err.msg);
            uint64_t seed = 99;
            float *k = malloc((size_t)HD * sizeof(float)), *v = malloc((size_t)HD * sizeof(float));
            float *q = malloc((size_t)NH * D * sizeof(float)), *out = malloc((size_t)NH * D * sizeof(float));
            float *ref = malloc((size_t)NH * D * sizeof(float)), *one = malloc((size_t)NH * D * sizeof(float));
            float *qr = malloc((size_t)NH * D * sizeof(float)), *want = malloc((size_t)NH * D * sizeof(float));
            float *kb = malloc((size_t)T * HD * sizeof(float)), *vb = malloc((size_t)T * HD * sizeof(float));
            bool *vis = malloc((size_t)T * sizeof(bool));
            float *work = malloc(tg_kvcache_work_floats(c) * sizeof(float));
            float *part = malloc(tg_kvcache_part_floats(c) * sizeof(float));
            assert_true(k && v && q && out && ref && one && qr && want && kb && vb && vis && work && part);
            for (int t = 0; t < T; t++) {
                for (int i = 0; i < HD; i++) {
                    k[i] = frand(&seed);
                    v[i] = frand(&seed);
                }
                tg_kvcache_append(c, 0, t, k, v);
            }
            for (int i = 0; i < NH * D; i++) q[i] = 2.0f * frand(&seed);
            const int64_t pos = T - 1;
            assert_int_equal(tg_kvcache_attend_splits(c, 0, pos), 5);
            test_attend(c, 0, pos, q, out, 2);
            tg_kvcache_set_simd(c, false);
            test_attend(c, 0, pos, q, ref, 1);
            tg_kvcache_set_simd(c, true);
            /* one share per kv-head, by hand */
            tg_kvcache_query(c, 0, pos, q, qr);
            for (int h = 0; h < H; h++) {
                tg_kvcache_attend_piece(c, 0, pos, qr, h, 0, 1, part, work);
                tg_kvcache_attend_combine(c, part, 1, one + h * (NH / H) * D);
            }
            const int64_t stored = tg_kvcache_read_back(c, 0, pos, kb, vb, NULL);
            assert_int_equal(stored, T);
            for (int64_t t = 0; t < T; t++) vis[t] = true;
            memcpy(qr, q, (size_t)NH * D * sizeof(float));
            tg_rope(qr, NH, D, pos, 10000.0f, TG_ROPE_HALF);
            naive_attend(qr, kb, vb, vis, T, NH, H, D, want);
            const float dn = max_abs_diff(out, want, NH * D), ds = max_abs_diff(out, ref, NH * D);
            const float d1 = max_abs_diff(out, one, NH * D);
            if (!(dn < 1e-4f && ds < 1e-5f && d1 < 1e-5f))
                fail_msg("%s D %d: |split - naive| %g, |split - scalar| %g, |split - one share| %g",
                         tg_kv_precision_name((tg_kv_precision)kp), D, (double)dn, (double)ds, (double)d1);
            free(k), free(v), free(q), free(out), free(ref), free(one), free(qr), free(want), free(kb), free(vb);
            free(vis), free(work), free(part);
            tg_kvcache_free(c);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp32_unbounded_matches_naive),
        cmocka_unit_test(test_split_shares_match),
        cmocka_unit_test(test_unbounded_every_precision),
        cmocka_unit_test(test_streaming_vanilla_every_precision),
        cmocka_unit_test(test_streaming_reposition_every_precision),
        cmocka_unit_test(test_streaming_slot_reference_every_precision),
        cmocka_unit_test(test_future_tokens_and_window_masked),
        cmocka_unit_test(test_constant_and_zero_kv_finite),
        cmocka_unit_test(test_tiny_and_large_ranges_finite),
        cmocka_unit_test(test_eviction_geometry_sweep),
        cmocka_unit_test(test_byte_accounting),
        cmocka_unit_test(test_memory_never_grows),
        cmocka_unit_test(test_reposition_table_capped),
        cmocka_unit_test(test_max_memory),
        cmocka_unit_test(test_unbounded_grows_in_chunks),
        cmocka_unit_test(test_unbounded_whole_doubles),
        cmocka_unit_test(test_invalid_policies_have_codes),
        cmocka_unit_test(test_budget_chooses_largest_window),
        cmocka_unit_test(test_policy_string_and_names),
        cmocka_unit_test(test_bytes_for_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
