/* test_kvcache_codecs.c — the KV cache's tables: store codecs (which codec keeps which store, forcing one by name,
 * the test-only fp32-copy codec against the plain store) and eviction policies; and the schedule the cache publishes
 * (tg_kvcache_plan). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "attend_team.h"
#include "kvcache/codec.h"
#include "kvcache/eviction.h"
#include "kvcache/kvcache.h"
#include "tinygpt.h"
#include "util/half.h"

static tg_cache_shape shape_of(int n_layers, int64_t ctx, const int *kv_source) {
    tg_cache_shape s = {
        .n_layers = n_layers,
        .n_heads = 4,
        .n_kv_heads = 2,
        .head_dim = 16,
        .rope_theta = 10000.0f,
        .rope_style = TG_ROPE_HALF,
        .context_length = ctx,
        .kv_source = kv_source,
    };
    return s;
}

static tg_kvcache *make(const tg_cache_shape *shape, tg_cache_params p) {
    tg_error err = {0};
    tg_kvcache *c = tg_kvcache_new(shape, &p, &err);
    if (!c) fail_msg("cache rejected: %s", err.msg);
    return c;
}

static void test_table_picks_the_codec(void **state) {
    (void)state;
    const tg_cache_shape shape = shape_of(2, 256, NULL);
    struct {
        tg_kv_precision k, v;
        int group, residual;
        const char *kc, *vc;
    } cases[] = {
        {TG_KV_FP32, TG_KV_FP32, 32, 128, "plain", "plain"},
        {TG_KV_BF16, TG_KV_FP16, TG_KV_GROUP_AUTO, TG_KV_RESIDUAL_AUTO, "plain", "plain"},
        {TG_KV_INT4, TG_KV_INT8, 32, 128, "kivi-grouped", "kivi-grouped"},
        {TG_KV_INT2, TG_KV_FP16, 32, 32, "kivi-grouped", "plain"},
        {TG_KV_INT2, TG_KV_INT2, TG_KV_GROUP_AUTO, TG_KV_RESIDUAL_AUTO, "kivi-grouped", "kivi-grouped"},
        {TG_KV_INT4, TG_KV_INT8, TG_KV_GROUP_AUTO, TG_KV_RESIDUAL_AUTO, "kivi-provisional", "kivi-provisional"},
        {TG_KV_INT8, TG_KV_FP16, 32, 0, "kivi-provisional", "plain"},
        {TG_KV_INT4, TG_KV_INT4, 0, 0, "kivi-whole", "kivi-whole"},
        {TG_KV_FP32, TG_KV_INT2, 0, 0, "plain", "kivi-whole"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_cache_params p = tg_cache_default_params();
        p.key_precision = cases[i].k, p.value_precision = cases[i].v, p.group_size = cases[i].group;
        p.residual = cases[i].residual;
        tg_kvcache *c = make(&shape, p);
        assert_string_equal(c->g.k.codec->name, cases[i].kc);
        assert_string_equal(c->g.v.codec->name, cases[i].vc);
        assert_ptr_equal(tg_store_codec_named(cases[i].kc), c->g.k.codec);
        tg_kvcache_free(c);
    }
    assert_null(tg_store_codec_named("no-such-codec"));
    assert_null(tg_store_codec_named(NULL));
}

/* kivi-provisional (no residual) against kivi-grouped (a residual of one group): the values of every flushed token
 * are bit for bit the same (per-token quantisation does not depend on when it happens); a completed key group's
 * provisional grid covers all its values, and its rows come back within 3 half-steps of that grid; the group being
 * filled reads back within 3 half-steps of its current grid; no residual bytes. */
static void test_provisional_against_grouped(void **state) {
    (void)state;
    const int64_t T = 45, G = 8, H = 2, D = 16, HD = H * D;
    const tg_cache_shape shape = shape_of(1, 64, NULL);
    for (int prec = TG_KV_INT8; prec <= TG_KV_INT2; prec++) {
        tg_cache_params p = tg_cache_default_params();
        p.key_precision = p.value_precision = (tg_kv_precision)prec;
        p.group_size = (int)G;
        p.residual = 0;
        tg_kvcache *a = make(&shape, p);
        p.residual = (int)G;
        p.residual_precision = TG_KV_FP32; /* its groups quantise the inputs as they came */
        tg_kvcache *b = make(&shape, p);
        assert_string_equal(a->g.k.codec->name, "kivi-provisional");
        assert_string_equal(b->g.k.codec->name, "kivi-grouped");
        assert_int_equal(a->g.k.resid_bytes + a->g.v.resid_bytes, 0);
        float k[32], v[32], *kraw = calloc((size_t)(T * HD), sizeof(float));
        uint64_t seed = 99;
        for (int64_t t = 0; t < T; t++) {
            for (int i = 0; i < HD; i++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                k[i] = kraw[t * HD + i] = (float)((seed >> 40) % 20001) / 10000.0f - 1.0f + (float)(i % 3);
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                v[i] = (float)((seed >> 40) % 20001) / 10000.0f - 1.0f;
            }
            tg_kvcache_append(a, 0, t, k, v);
            tg_kvcache_append(b, 0, t, k, v);
        }
        float *ka = calloc((size_t)(T * HD), sizeof(float)), *va = calloc((size_t)(T * HD), sizeof(float));
        float *vb = calloc((size_t)(T * HD), sizeof(float));
        assert_int_equal(tg_kvcache_read_back(a, 0, T - 1, ka, va, NULL), T);
        assert_int_equal(tg_kvcache_read_back(b, 0, T - 1, NULL, vb, NULL), T);
        const int64_t flushed = b->layers[0].qend;
        assert_true(flushed >= T - 2 * G);
        assert_memory_equal(va, vb, (size_t)(flushed * HD) * sizeof(float));
        const tg_kivi_range *r = tg_kivi_range_of((tg_kv_precision)prec);
        const int levels = r->qmax - r->qmin;
        float rk[32];
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++) {
                memcpy(rk, kraw + t * HD + h * D, sizeof(float) * (size_t)D);
                tg_rope(rk, 1, (int)D, t, 10000.0f, TG_ROPE_HALF); /* keys are quantised after RoPE */
                const int64_t u = (t / G) % a->g.n_units, cu = a->g.k.chunk_units, uh = (u % cu) * H + h;
                for (int64_t c = 0; c < D; c++) {
                    const float s = tg_f16_to_f32(a->layers[0].k.scale[u / cu][uh * D + c]);
                    const float z = tg_f16_to_f32(a->layers[0].k.zero[u / cu][uh * D + c]);
                    assert_true(rk[c] >= z && rk[c] <= z + (float)levels * s); /* on the grid's span */
                    const float d = fabsf(ka[t * HD + h * D + c] - rk[c]);
                    if (!(d <= 1.5f * s + 1e-6f)) fail_msg("%s token %lld channel %lld: |dK| %g > 3 half-steps of %g",
                                                           tg_kv_precision_name((tg_kv_precision)prec), (long long)t,
                                                           (long long)c, (double)d, (double)s);
                }
            }
        free(kraw);
        free(ka);
        free(va);
        free(vb);
        tg_kvcache_free(a);
        tg_kvcache_free(b);
    }
}

/* Store s of caches a and b hold the same bytes: every chunk's data, scales and zeros. */
static void assert_same_store(const tg_store_geom *sg, const tg_store *a, const tg_store *b, const char *what) {
    assert_int_equal(a->n_alloc, b->n_alloc);
    for (int64_t k = 0; k < a->n_alloc; k++) {
        const size_t db = tg_store_chunk_data_bytes(sg, k), sb = tg_store_chunk_scale_bytes(sg, k) / 2;
        if (memcmp(a->data[k], b->data[k], db) || memcmp(a->scale[k], b->scale[k], sb) ||
            memcmp(a->zero[k], b->zero[k], sb))
            fail_msg("%s: chunk %lld differs between the AVX2 append and the scalar one", what, (long long)k);
    }
}

/* One element of token t, kv-head h, channel c of the hostile stream below (keys when key). */
static float hostile(uint64_t *seed, int64_t t, int64_t G, int64_t c, int levels, bool key) {
    *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
    const float r = (float)((*seed >> 40) % 20001) / 10000.0f - 1.0f;
    if (t % 11 == 3 && c % 5 == 1) return NAN;
    if (t % 13 == 5 && c % 7 == 2) return (c & 8) ? -INFINITY : INFINITY;
    if (t % 6 == 4 && c % 4 == 0) return (c & 4) ? -0.0f : 0.0f;
    if (t % 9 == 7) /* a row whose min (odd t) or max is a zero: -0 first, +0 later in another SIMD lane */
        return c == 1 ? -0.0f : c == 8 ? 0.0f : (t % 2 ? 0.5f + r * r : -0.5f - r * r);
    if (!key && t % 5 == 2) /* codes on exact half-steps: [1, 1 + levels / 4] on a grid of 1/4, points every 1/8 */
        return c == 0 ? 1.0f : c == 1 ? 1.0f + 0.25f * (float)levels : 1.0f + 0.125f * (float)((c * 7) % (8 * levels));
    return key ? r * (float)(1 + t % G) * (float)(1 + c % 3) : r; /* keys grow through the group: grids widen */
}

/* The AVX2 KIVI append (kivi_avx2.c) writes exactly the bytes of the scalar path, in both tiled codecs (provisional:
 * no residual; grouped: a residual of one group, flushed G rows at a time), with grids clipped or not: two caches, one with the SIMD paths
 * switched off, fed the same hostile rows (keys that widen their grids at every step, NaN, infinities, signed zeros,
 * rows whose minimum or maximum is a zero, values on exact half-steps), hold the same tiles, scales and zeros after
 * every append — unbounded and through a StreamingLLM ring that reuses its units. */
static void test_kivi_simd_bytes(void **state) {
    (void)state;
    for (int64_t D = 32; D <= 128; D *= 2)
        for (int prec = TG_KV_INT8; prec <= TG_KV_INT2; prec++)
            for (int G = 8; G <= 32; G *= 2)
                for (int variant = 0; variant < 8; variant++) {
                    const bool bounded = variant & 1, grouped = variant & 2, clip = variant & 4;
                    tg_cache_shape shape = shape_of(1, 128, NULL);
                    shape.head_dim = (int)D;
                    tg_cache_params p = tg_cache_default_params();
                    p.key_precision = p.value_precision = (tg_kv_precision)prec;
                    p.group_size = G;
                    p.residual = grouped ? G : 0;
                    if (bounded) p.sink = 4, p.window = 40;
                    p.clip = clip ? TG_KV_CLIP_ON : TG_KV_CLIP_OFF;
                    tg_kvcache *a = make(&shape, p), *b = make(&shape, p);
                    assert_true(a->g.k.range->clip == clip && a->g.v.range->clip == clip);
                    tg_kvcache_set_simd(b, false);
                    assert_string_equal(a->g.k.codec->name, grouped ? "kivi-grouped" : "kivi-provisional");
                    assert_true(a->g.k.tiled && a->g.v.tiled);
                    const int levels = a->g.k.range->qmax - a->g.k.range->qmin;
                    float k[2 * 128], v[2 * 128];
                    uint64_t seed = 7;
                    for (int64_t t = 0; t < 120; t++) {
                        for (int64_t i = 0; i < 2 * D; i++) {
                            k[i] = hostile(&seed, t, G, i % D, levels, true);
                            v[i] = hostile(&seed, t, G, i % D, levels, false);
                        }
                        assert_true(tg_kvcache_append(a, 0, t, k, v));
                        assert_true(tg_kvcache_append(b, 0, t, k, v));
                        char what[128];
                        snprintf(what, sizeof what, "%s %s D %lld G %d %s%s token %lld", a->g.k.codec->name,
                                 tg_kv_precision_name((tg_kv_precision)prec), (long long)D, G,
                                 bounded ? "sink 4 + window 40" : "unbounded", clip ? " clipped" : "",
                                 (long long)t);
                        assert_same_store(&a->g.k, &a->layers[0].k, &b->layers[0].k, what);
                        assert_same_store(&a->g.v, &a->layers[0].v, &b->layers[0].v, what);
                    }
                    tg_kvcache_free(a);
                    tg_kvcache_free(b);
                }
}

static void test_forcing_a_codec(void **state) {
    (void)state;
    const tg_cache_shape shape = shape_of(1, 64, NULL);
    tg_cache_params p = tg_cache_default_params();
    tg_error err = {0};
    /* forcing the codec the table picks changes nothing */
    tg_kvcache *c = tg_kvcache_new_with_codecs(&shape, &p, "plain", NULL, &err);
    assert_non_null(c);
    assert_string_equal(c->g.k.codec->name, "plain");
    assert_string_equal(c->g.v.codec->name, "plain");
    tg_kvcache_free(c);
    assert_null(tg_kvcache_new_with_codecs(&shape, &p, NULL, "fp64", &err));
    assert_non_null(strstr(err.msg, "no store codec named fp64"));
}

/* The eviction table: none without a window, StreamingLLM with one (a budget resolves into a window first). */
static void test_eviction_table(void **state) {
    (void)state;
    const tg_cache_shape shape = shape_of(2, 256, NULL);
    tg_cache_params p = tg_cache_default_params();
    assert_ptr_equal(tg_eviction_for(&p, 0), &tg_eviction_none);
    assert_ptr_equal(tg_eviction_for(&p, 16), &tg_eviction_streaming);
    tg_kvcache *c = make(&shape, p);
    assert_string_equal(c->g.eviction->name, "none");
    tg_kvcache_free(c);
    p.budget_bytes = 1 << 16;
    c = make(&shape, p);
    assert_string_equal(c->g.eviction->name, "streaming-llm");
    assert_true(c->g.window > 0 && c->g.sink == 4);
    tg_kvcache_free(c);
}

typedef struct {
    const tg_cache_shape *shape;
    tg_cache_params p;
    bool bounded, token_by_token;
    int max_chunk;
} plan_case;

static void test_plan(void **state) {
    (void)state;
    const int yoco[4] = {0, 1, 1, 1}; /* layers 2 and 3 read layer 1's K/V */
    const tg_cache_shape plain = shape_of(4, 512, NULL), shared = shape_of(4, 512, yoco);
    tg_cache_params d = tg_cache_default_params(), p;
    plan_case cases[8];
    int n = 0;
    p = d; /* fp32, unbounded: nothing an append does changes what an earlier token sees */
    cases[n++] = (plan_case){&plain, p, false, false, 0};
    p = d, p.window = 64; /* eviction */
    cases[n++] = (plan_case){&plain, p, true, true, 0};
    p = d, p.budget_bytes = 1 << 20; /* a budget is a window */
    cases[n++] = (plan_case){&plain, p, true, true, 0};
    p = d, p.key_precision = TG_KV_INT4; /* groups get quantised */
    cases[n++] = (plan_case){&plain, p, false, true, 0};
    p = d, p.value_precision = TG_KV_INT8, p.group_size = 0; /* whole history, values per token */
    cases[n++] = (plan_case){&plain, p, false, true, 0};
    p = d, p.key_precision = TG_KV_BF16, p.value_precision = TG_KV_FP16;
    cases[n++] = (plan_case){&shared, p, false, false, 0};
    p = d, p.window = 64; /* shared layers under eviction: one token per call */
    cases[n++] = (plan_case){&shared, p, true, true, 1};
    for (int i = 0; i < n; i++) {
        tg_kvcache *c = make(cases[i].shape, cases[i].p);
        const tg_cache_plan plan = tg_kvcache_plan(c);
        if (plan.bounded != cases[i].bounded || plan.token_by_token != cases[i].token_by_token ||
            plan.max_chunk != cases[i].max_chunk)
            fail_msg("case %d: plan {%d, %d, %d}, want {%d, %d, %d}", i, plan.bounded, plan.token_by_token,
                     plan.max_chunk, cases[i].bounded, cases[i].token_by_token, cases[i].max_chunk);
        tg_kvcache_free(c);
    }
    const tg_cache_plan none = tg_kvcache_plan(NULL);
    assert_false(none.bounded || none.token_by_token || none.max_chunk);
}

/* The test-only fp32-copy codec (token-major fp32 rows) reads back and attends bit for bit like the plain fp32
 * store, unbounded, under eviction and re-positioned. */
static void test_fp32_copy_equals_plain(void **state) {
    (void)state;
    enum { NH = 4, H = 2, D = 16, T = 90 };
    const tg_cache_shape shape = shape_of(1, 128, NULL);
    for (int policy = 0; policy < 3; policy++) {
        tg_cache_params p = tg_cache_default_params();
        if (policy > 0) p.window = 24, p.sink = 3;
        p.rope_positions = policy == 2 ? TG_ROPE_POSITIONS_REPOSITION : TG_ROPE_POSITIONS_ORIGINAL;
        tg_error err = {0};
        tg_kvcache *a = tg_kvcache_new(&shape, &p, &err);
        tg_kvcache *b = tg_kvcache_new_with_codecs(&shape, &p, "fp32-copy", "fp32-copy", &err);
        assert_non_null(a);
        assert_non_null(b);
        assert_string_equal(b->g.k.codec->name, "fp32-copy");
        uint64_t seed = 7;
        static float k[H * D], v[H * D], q[NH * D], oa[NH * D], ob[NH * D];
        static float ka[T * H * D], kb[T * H * D], va[T * H * D], vb[T * H * D];
        for (int t = 0; t < T && t < 128; t++) {
            for (int i = 0; i < H * D; i++) {
                seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
                k[i] = (float)(int32_t)(seed >> 32) / 2147483648.0f;
                v[i] = (float)(int32_t)(seed >> 16) / 2147483648.0f;
            }
            for (int i = 0; i < NH * D; i++) q[i] = k[i % (H * D)] * 0.5f - v[(i * 7) % (H * D)];
            tg_kvcache_append(a, 0, t, k, v);
            tg_kvcache_append(b, 0, t, k, v);
            test_attend(a, 0, t, q, oa, 1);
            test_attend(b, 0, t, q, ob, 2);
            assert_memory_equal(oa, ob, sizeof oa);
            const int64_t na = tg_kvcache_read_back(a, 0, t, ka, va, NULL);
            assert_int_equal(tg_kvcache_read_back(b, 0, t, kb, vb, NULL), na);
            assert_memory_equal(ka, kb, (size_t)na * H * D * sizeof(float));
            assert_memory_equal(va, vb, (size_t)na * H * D * sizeof(float));
        }
        tg_cache_report ra, rb;
        tg_kvcache_report(a, T, &ra);
        tg_kvcache_report(b, T, &rb);
        assert_int_equal(ra.bytes_total, rb.bytes_total);
        tg_kvcache_free(a);
        tg_kvcache_free(b);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_picks_the_codec),
        cmocka_unit_test(test_provisional_against_grouped),
        cmocka_unit_test(test_kivi_simd_bytes),
        cmocka_unit_test(test_forcing_a_codec),
        cmocka_unit_test(test_eviction_table),
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_fp32_copy_equals_plain),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
