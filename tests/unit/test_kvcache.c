/* test_kvcache.c — the KV cache through its header API: fused attention against naive attention (over the raw
 * inputs for fp32, over the read-back K/V for every precision), StreamingLLM eviction, re-positioning, YOCO sharing,
 * sliding windows, policy validation, byte accounting and flat memory. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/ops.h"
#include "kvcache/cache_internal.h"
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
    tg_error err = {{0}};
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
        tg_kvcache_attend(c, 0, t, q, out, 1);
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp32_unbounded_matches_naive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
