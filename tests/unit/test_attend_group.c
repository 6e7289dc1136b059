/* test_attend_group.c — the grouped prefill pieces (tg_kvcache_attend_group) give the bits of one piece per token
 * (tg_kvcache_attend_piece, one share), and are refused where they do not apply. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kvcache/kvcache.h"
#include "tinygpt.h"

/* Deterministic pseudo-random floats in [-1, 1) (xorshift). */
static float frand(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (float)((*s >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

static tg_cache_shape shape_of(int n_heads, int n_kv_heads, int head_dim, int64_t ctx, const int *layer_window) {
    tg_cache_shape s = {
        .n_layers = 1,
        .n_heads = n_heads,
        .n_kv_heads = n_kv_heads,
        .head_dim = head_dim,
        .rope_theta = 10000.0f,
        .rope_style = TG_ROPE_HALF,
        .context_length = ctx,
        .layer_window = layer_window,
    };
    return s;
}

/* A cache of T random tokens (special: some keys and values inf / NaN, so that scores overflow and outputs go NaN). */
static tg_kvcache *filled_cache(int NH, int H, int D, int T, tg_kv_precision prec, bool special, const int *window) {
    tg_cache_shape shape = shape_of(NH, H, D, T + 8, window);
    tg_cache_params p = tg_cache_default_params();
    p.key_precision = p.value_precision = prec;
    tg_error err = {0};
    tg_kvcache *c = tg_kvcache_new(&shape, &p, &err);
    if (!c) fail_msg("tg_kvcache_new: %s", err.msg);
    uint64_t seed = 1234 + (uint64_t)(NH * 131 + H * 17 + D);
    float *k = malloc((size_t)H * D * sizeof(float)), *v = malloc((size_t)H * D * sizeof(float));
    assert_true(k && v);
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < H * D; i++) {
            k[i] = 3.0f * frand(&seed);
            v[i] = frand(&seed);
        }
        if (special && t == 21) k[1] = INFINITY;  /* kv-head 0: scores of +-inf (and NaN after the max) */
        if (special && t == 40) v[D + 2] = NAN;   /* kv-head 1: a NaN value */
        if (special && t == 45) k[D] = -INFINITY; /* kv-head 1 */
        assert_true(tg_kvcache_append(c, 0, t, k, v));
    }
    free(k), free(v);
    return c;
}

/* Every group of up to tg_kvcache_group_tokens tokens starting at each position against one piece per token:
 * memcmp of the parts (m, l, o), NaN payloads included. */
static void check_groups(int NH, int H, int D, int T, tg_kv_precision prec, bool special) {
    tg_kvcache *c = filled_cache(NH, H, D, T, prec, special, NULL);
    const int G = tg_kvcache_group_tokens(c);
    if (G == 0) { /* built without the AVX-512 kernels: nothing is grouped */
        assert_false(tg_kvcache_attend_group_ok(c, 0, 0, 2));
        tg_kvcache_free(c);
        return;
    }
    assert_true(G >= 1 && G <= 8);
    const size_t pf = tg_kvcache_part_floats(c), qd = (size_t)NH * (size_t)D;
    uint64_t seed = 77;
    float *q = malloc((size_t)T * qd * sizeof(float)), *qr = malloc((size_t)T * qd * sizeof(float));
    float *want = malloc((size_t)G * pf * sizeof(float)), *got = malloc((size_t)G * pf * sizeof(float));
    float *work = malloc(tg_kvcache_work_floats(c) * sizeof(float));
    float *gwork = malloc(tg_kvcache_group_work_floats(c, G) * sizeof(float));
    assert_true(q && qr && want && got && work && gwork);
    for (size_t i = 0; i < (size_t)T * qd; i++) q[i] = 2.0f * frand(&seed);
    if (special) q[5 * qd] = 1e30f; /* token 5, head 0: scores overflow to inf */
    for (int t = 0; t < T; t++) tg_kvcache_query(c, 0, t, q + (size_t)t * qd, qr + (size_t)t * qd);
    int groups = 0;
    for (int pos0 = 0; pos0 < T; pos0++)
        for (int nq = 1; nq <= G && pos0 + nq <= T; nq++) {
            assert_true(tg_kvcache_attend_group_ok(c, 0, pos0, nq));
            for (int h = 0; h < H; h++) {
                memset(got, 0x5a, (size_t)G * pf * sizeof(float));
                tg_kvcache_attend_group(c, 0, pos0, nq, qr + (size_t)pos0 * qd, qd, h, got, pf, gwork);
                for (int j = 0; j < nq; j++) {
                    tg_kvcache_attend_piece(c, 0, pos0 + j, qr + (size_t)(pos0 + j) * qd, h, 0, 1, want + j * pf, work);
                    if (memcmp(want + j * pf, got + j * pf, pf * sizeof(float)) != 0) {
                        size_t i = 0;
                        while (memcmp(want + j * pf + i, got + j * pf + i, sizeof(float)) == 0) i++;
                        fail_msg("%s NH %d H %d D %d: group at %d of %d, token %d, kv-head %d: float %zu is %a, one "
                                 "piece gives %a",
                                 tg_kv_precision_name(prec), NH, H, D, pos0, nq, pos0 + j, h, i,
                                 (double)got[j * pf + i], (double)want[j * pf + i]);
                    }
                }
                groups++;
            }
        }
    assert_true(groups > 0);
    free(q), free(qr), free(want), free(got), free(work), free(gwork);
    tg_kvcache_free(c);
}

/* Head dims 16 (one 16-column pass), 32 (the bundled model), 48 (32 + 16) and 64; one to eight tokens per group
 * (gq 8, 5, 3, 2, 1: a lone head paired with itself where the group's heads are odd); 70 tokens: blocks of 32 and 8
 * rows with tails; fp32 rows read in place, fp16 / bf16 widened. */
static void test_group_equals_pieces(void **state) {
    (void)state;
    static const int cfg[][3] = {{8, 4, 32}, {4, 2, 16}, {6, 2, 48}, {4, 4, 64}, {10, 2, 32}, {3, 1, 16}, {8, 1, 32}};
    for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++)
        for (int p = TG_KV_FP32; p <= TG_KV_BF16; p++) check_groups(cfg[i][0], cfg[i][1], cfg[i][2], 70, (tg_kv_precision)p, false);
}

/* Infinite keys (scores of inf, so exp(inf - inf) = NaN sums), a NaN value and an overflowing query: the same bits. */
static void test_group_non_finite(void **state) {
    (void)state;
    for (int p = TG_KV_FP32; p <= TG_KV_BF16; p++) check_groups(8, 4, 32, 50, (tg_kv_precision)p, true);
}

/* Refused: KIVI codes, a sliding-window layer, more than one share, a head dim that is not a multiple of 16. */
static void test_group_refusals(void **state) {
    (void)state;
    tg_kvcache *c = filled_cache(8, 4, 32, 40, TG_KV_FP16, false, NULL);
    const bool have = tg_kvcache_group_tokens(c) > 0;
    assert_int_equal(tg_kvcache_attend_group_ok(c, 0, 10, 4), have);
    tg_kvcache_free(c);
    c = filled_cache(8, 4, 32, 40, TG_KV_INT8, false, NULL);
    assert_false(tg_kvcache_attend_group_ok(c, 0, 10, 4));
    tg_kvcache_free(c);
    static const int window[1] = {16};
    c = filled_cache(8, 4, 32, 40, TG_KV_FP16, false, window);
    assert_false(tg_kvcache_attend_group_ok(c, 0, 30, 4));
    tg_kvcache_free(c);
    c = filled_cache(4, 2, 16, 1100, TG_KV_FP32, false, NULL);
    assert_int_equal(tg_kvcache_attend_group_ok(c, 0, 100, 2), have);
    assert_false(tg_kvcache_attend_group_ok(c, 0, 1090, 2)); /* two shares at this depth */
    tg_kvcache_free(c);
    c = filled_cache(4, 2, 8, 40, TG_KV_FP32, false, NULL);
    assert_false(tg_kvcache_attend_group_ok(c, 0, 10, 2));
    tg_kvcache_free(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_group_equals_pieces),
        cmocka_unit_test(test_group_non_finite),
        cmocka_unit_test(test_group_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
