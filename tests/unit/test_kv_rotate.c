/* test_kv_rotate.c — the per-head Walsh–Hadamard rotation of KIVI caches (rotate.h, issue #51).
 *  - the plain FWHT against the Hadamard matrix written out (H[i][j] = (-1)^popcount(i & j)); R orthogonal (norms
 *    kept, R^T R x = x within 1e-6 relative) for power-of-two and block (24, 48, 96) head dims;
 *  - rotated float attention equals unrotated: an unbounded int8 cache whose residual holds every token (fp32
 *    residual: nothing is quantised) gives the same outputs rotated and not, within 2e-5 absolute on outputs of
 *    unit-range values (the rotations' float rounding: a few ulps per transform), with a layer that reads another's
 *    K/V (YOCO); bounded (sinks + window, evicting; re-positioned and original RoPE: its residual is capped by the
 *    window, so its oldest groups are quantised) rotated against unrotated int8 within 1e-2, int8's error (a rotation
 *    applied wrongly to a sink or a window key costs O(1)); read-back returns the rows unrotated;
 *  - the rotated integer path (AVX2 integer kernels) against the scalar float reference over the same rotated
 *    codes, within twice the bounds test_attend_int uses unrotated (rotated rows span about twice the range);
 *  - float stores are never rotated: an fp16 cache gives the same bits with rotation on and off. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kvcache/cache_internal.h"
#include "kvcache/kvcache.h"
#include "kvcache/rotate.h"
#include "attend_team.h"

static double urand(uint64_t *s) { /* uniform in [0, 1) */
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (double)(*s >> 11) / 9007199254740992.0;
}

static void test_fwht(void **state) {
    (void)state;
    uint64_t seed = 7;
    for (int n = 1; n <= 64; n *= 2) {
        float x[64], y[64];
        for (int i = 0; i < n; i++) x[i] = y[i] = (float)(2.0 * urand(&seed) - 1.0);
        tg_fwht_ref(y, n);
        for (int i = 0; i < n; i++) {
            double s = 0.0;
            for (int j = 0; j < n; j++) s += (__builtin_popcount((unsigned)(i & j)) & 1 ? -1.0 : 1.0) * x[j];
            assert_true(fabs(s - y[i]) <= 1e-5 * n);
        }
    }
    const int dims[] = {8, 16, 24, 48, 64, 96, 128};
    const int blocks[] = {8, 16, 8, 16, 64, 32, 128};
    for (size_t d = 0; d < sizeof dims / sizeof dims[0]; d++) {
        const int D = dims[d];
        assert_int_equal(tg_rot_block(D), blocks[d]);
        float sign[128], sign2[128], x[128], y[128];
        tg_rot_signs(sign, 3, 1, D);
        tg_rot_signs(sign2, 3, 2, D);
        assert_true(memcmp(sign, sign2, (size_t)D * sizeof(float)) != 0); /* heads differ */
        double n0 = 0.0, n1 = 0.0;
        for (int i = 0; i < D; i++) x[i] = y[i] = i == 3 ? 40.0f : (float)(2.0 * urand(&seed) - 1.0); /* an outlier */
        for (int i = 0; i < D; i++) n0 += (double)x[i] * x[i];
        tg_rot_apply(y, sign, D);
        float most = 0.0f;
        for (int i = 0; i < D; i++) {
            n1 += (double)y[i] * y[i];
            most = fabsf(y[i]) > most ? fabsf(y[i]) : most;
        }
        assert_true(most < 40.0f * 0.75f); /* the outlier spread over its block */
        tg_rot_inverse(y, sign, D);
        double e = 0.0;
        for (int i = 0; i < D; i++) e += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
        assert_true(sqrt(e) <= 1e-6 * sqrt(n1));
        assert_true(fabs(n1 - n0) <= 1e-5 * n0); /* orthogonal: the norm kept */
    }
}

/* Outputs of caches a (rotated) and b (not) over the same random tokens, every `every` tokens, for both layers
 * (layer 1 reads layer 0's K/V when yoco); the largest |a - b|. */
static float compare_caches(tg_kvcache *a, tg_kvcache *b, int NH, int H, int D, int T, int every, bool yoco,
                            uint64_t seed) {
    const int HD = H * D;
    float *k = malloc((size_t)HD * sizeof(float)), *v = malloc((size_t)HD * sizeof(float));
    float *q = malloc((size_t)NH * D * sizeof(float)), *oa = malloc((size_t)NH * D * sizeof(float));
    float *ob = malloc((size_t)NH * D * sizeof(float));
    assert_true(k && v && q && oa && ob);
    float worst = 0.0f;
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < HD; i++) {
            k[i] = (float)(2.0 * urand(&seed) - 1.0);
            v[i] = (float)(2.0 * urand(&seed) - 1.0);
        }
        k[1] = 6.0f; /* an outlier key channel */
        for (int l = 0; l < (yoco ? 1 : 2); l++) {
            assert_true(tg_kvcache_append(a, l, t, k, v));
            assert_true(tg_kvcache_append(b, l, t, k, v));
        }
        if (t % every != every - 1 && t != T - 1) continue;
        for (int l = 0; l < 2; l++) {
            for (int i = 0; i < NH * D; i++) q[i] = (float)(4.0 * urand(&seed) - 2.0);
            test_attend(a, l, t, q, oa, 2);
            test_attend(b, l, t, q, ob, 1);
            for (int i = 0; i < NH * D; i++) {
                assert_true(isfinite(oa[i]));
                const float d = fabsf(oa[i] - ob[i]);
                worst = d > worst ? d : worst;
            }
        }
    }
    free(k), free(v), free(q), free(oa), free(ob);
    return worst;
}

static void test_rotated_float_equals_unrotated(void **state) {
    (void)state;
    const int dims[] = {16, 24, 64};
    for (size_t di = 0; di < 3; di++)
        for (int bounded = 0; bounded < 3; bounded++)
            for (int yoco = 0; yoco < 2; yoco++) {
                const int D = dims[di], NH = 4, H = 2, T = 300;
                const int src[2] = {0, 0};
                tg_cache_shape shape = {.n_layers = 2, .n_heads = NH, .n_kv_heads = H, .head_dim = D,
                                        .rope_theta = 10000.0f, .rope_style = TG_ROPE_HALF, .context_length = 512,
                                        .kv_source = yoco ? src : NULL};
                tg_cache_params p = tg_cache_default_params();
                p.key_precision = p.value_precision = TG_KV_INT8;
                p.residual_precision = TG_KV_FP32;
                p.group_size = 32;
                p.residual = 512; /* every token stays in the fp32 residual */
                if (bounded) {
                    p.sink = 4;
                    p.window = 64;
                    p.residual = 64; /* the residual is capped by the window: the oldest groups get quantised */
                    p.rope_positions = bounded == 1 ? TG_ROPE_POSITIONS_REPOSITION : TG_ROPE_POSITIONS_ORIGINAL;
                }
                tg_error err = {0};
                p.rotate = TG_KV_ROTATE_ON;
                tg_kvcache *a = tg_kvcache_new(&shape, &p, &err);
                if (!a) fail_msg("tg_kvcache_new: %s", err.msg);
                p.rotate = TG_KV_ROTATE_OFF;
                tg_kvcache *b = tg_kvcache_new(&shape, &p, &err);
                if (!b) fail_msg("tg_kvcache_new: %s", err.msg);
                assert_true(a->g.rot_k && a->g.rot_v && !b->g.rot_k && !b->g.rot_v);
                /* unbounded: nothing quantised, float rounding only; bounded: both int8 caches quantise their
                 * oldest groups, each within int8's error of the float rows (a half-step of a grid, 4e-3 on unit-range
                 * rows, 2.4e-2 on the outlier channel), rotated rows on other grids than unrotated ones */
                const float tol = bounded ? 1e-2f : 2e-5f;
                const float worst = compare_caches(a, b, NH, H, D, T, 37, yoco, 11 + di + 10 * bounded);
                if (!(worst <= tol))
                    fail_msg("D %d bounded %d yoco %d: |rotated - reference| %g > %g", D, bounded, yoco,
                             (double)worst, (double)tol);
                /* read-back: unrotated keys and values, as the unrotated cache holds them */
                const int64_t n = tg_kvcache_stored(a), HD = (int64_t)H * D;
                float *ka = malloc((size_t)(n * HD) * sizeof(float)), *kb = malloc((size_t)(n * HD) * sizeof(float));
                float *va = malloc((size_t)(n * HD) * sizeof(float)), *vb = malloc((size_t)(n * HD) * sizeof(float));
                assert_true(ka && kb && va && vb);
                assert_int_equal(tg_kvcache_read_back(a, 0, T - 1, ka, va, NULL), n);
                assert_int_equal(tg_kvcache_read_back(b, 0, T - 1, kb, vb, NULL), n);
                for (int64_t i = 0; i < n * HD; i++) { /* bounded: int8 codes of rows up to 6 (the outlier) */
                    assert_true(fabsf(ka[i] - kb[i]) <= (bounded ? 0.05f : 1e-5f) * (1.0f + fabsf(kb[i])));
                    assert_true(fabsf(va[i] - vb[i]) <= (bounded ? 0.02f : 1e-5f));
                }
                free(ka), free(kb), free(va), free(vb);
                tg_kvcache_free(a);
                tg_kvcache_free(b);
            }
}

static void test_rotated_int_path(void **state) {
    (void)state;
    const tg_kv_precision precs[] = {TG_KV_INT8, TG_KV_INT4, TG_KV_INT2};
    /* twice test_attend_int's bounds for the same kernels: its rows are in [-1, 1]; rotated, a row of 64 such values
     * spreads to about twice that range, and the kernels' roundings scale with the rows' grids */
    const float tols[] = {2e-4f, 1.2e-2f, 1.2e-2f};
    for (size_t pi = 0; pi < 3; pi++)
        for (int bounded = 0; bounded < 2; bounded++) {
            const int D = 64, NH = 6, H = 2, HD = H * D, T = 700;
            tg_cache_shape shape = {.n_layers = 1, .n_heads = NH, .n_kv_heads = H, .head_dim = D,
                                    .rope_theta = 10000.0f, .rope_style = TG_ROPE_HALF, .context_length = T + 8};
            tg_cache_params p = tg_cache_default_params();
            p.key_precision = p.value_precision = precs[pi];
            p.group_size = 16;
            p.rotate = TG_KV_ROTATE_ON;
            if (bounded) {
                p.sink = 4;
                p.window = 300;
            }
            tg_error err = {0};
            tg_kvcache *c = tg_kvcache_new(&shape, &p, &err);
            if (!c) fail_msg("tg_kvcache_new: %s", err.msg);
            assert_true(c->g.rot_k && c->g.rot_v);
            uint64_t seed = 3 + pi + 10 * bounded;
            float *k = malloc((size_t)HD * sizeof(float)), *v = malloc((size_t)HD * sizeof(float));
            float *q = malloc((size_t)NH * D * sizeof(float)), *a = malloc((size_t)NH * D * sizeof(float));
            float *ref = malloc((size_t)NH * D * sizeof(float));
            assert_true(k && v && q && a && ref);
            float worst = 0.0f;
            for (int t = 0; t < T; t++) {
                for (int i = 0; i < HD; i++) {
                    k[i] = (float)(2.0 * urand(&seed) - 1.0);
                    v[i] = (float)(2.0 * urand(&seed) - 1.0);
                }
                assert_true(tg_kvcache_append(c, 0, t, k, v));
                if (t % 89 != 88 && t != T - 1) continue;
                for (int i = 0; i < NH * D; i++) q[i] = (float)(4.0 * urand(&seed) - 2.0);
                test_attend(c, 0, t, q, a, 2);
                tg_kvcache_set_simd(c, false);
                test_attend(c, 0, t, q, ref, 1);
                tg_kvcache_set_simd(c, true);
                for (int i = 0; i < NH * D; i++) {
                    assert_true(isfinite(a[i]));
                    const float d = fabsf(a[i] - ref[i]);
                    worst = d > worst ? d : worst;
                }
            }
            if (!(worst <= tols[pi]))
                fail_msg("%s bounded %d: |rotated integer path - scalar reference| %g > %g",
                         tg_kv_precision_name(precs[pi]), bounded, (double)worst, (double)tols[pi]);
            free(k), free(v), free(q), free(a), free(ref);
            tg_kvcache_free(c);
        }
}

static void test_float_stores_not_rotated(void **state) {
    (void)state;
    const int D = 32, NH = 4, H = 2;
    tg_cache_shape shape = {.n_layers = 2, .n_heads = NH, .n_kv_heads = H, .head_dim = D, .rope_theta = 10000.0f,
                            .rope_style = TG_ROPE_HALF, .context_length = 256};
    tg_cache_params p = tg_cache_default_params();
    p.key_precision = p.value_precision = TG_KV_FP16;
    tg_error err = {0};
    p.rotate = TG_KV_ROTATE_ON;
    tg_kvcache *a = tg_kvcache_new(&shape, &p, &err);
    p.rotate = TG_KV_ROTATE_OFF;
    tg_kvcache *b = tg_kvcache_new(&shape, &p, &err);
    assert_non_null(a);
    assert_non_null(b);
    assert_false(a->g.rot_k || a->g.rot_v);
    assert_true(compare_caches(a, b, NH, H, D, 200, 23, false, 9) == 0.0f);
    p.rotate = (tg_kv_rotate)7;
    assert_null(tg_kvcache_new(&shape, &p, &err));
    p.key_precision = p.value_precision = TG_KV_INT4; /* values only: the keys keep their own channels */
    p.rotate = TG_KV_ROTATE_VALUES;
    tg_kvcache *c = tg_kvcache_new(&shape, &p, &err);
    assert_non_null(c);
    assert_true(!c->g.rot_k && c->g.rot_v);
    tg_kvcache_free(c);
    tg_kvcache_free(a);
    tg_kvcache_free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fwht),
        cmocka_unit_test(test_rotated_float_equals_unrotated),
        cmocka_unit_test(test_rotated_int_path),
        cmocka_unit_test(test_float_stores_not_rotated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
