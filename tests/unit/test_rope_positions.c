/* test_rope_positions.c — the re-positioned RoPE scheme of a bounded cache (the default) against the scheme it
 * replaced, which the cache keeps as a test reference (tg_kvcache_new_slot_rope: every key stored pre-RoPE and
 * rotated to its cache slot when read, the query to its own slot). The default stores window keys rotated at their
 * absolute positions, as vanilla does, queries at their positions, and rotates only the pre-RoPE sinks, per query,
 * to (query position - query slot + sink index): every query-key distance is the reference's. Proven here:
 *  - fp32, through the forward pass of random models (plain and Llama 3 scaled RoPE): the same logits within 1e-5
 *    over 2,000 tokens past the context; the same bits for any thread count and for chunked prefill;
 *  - every precision (the two schemes quantise different keys, pre- vs post-RoPE, so their outputs differ by
 *    rounding): the fused attention equals the slot scheme computed in plain scalar code from the SAME stored
 *    values (dequantised, each key turned from where it is stored to its slot) within 1e-5;
 *  - far positions: sinks rotated at offsets of millions (and billions) equal tg_rope there bit for bit; 20,000
 *    tokens, and more sinks than the kept angles, stay equal to the reference. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "api/cache_shape.h"
#include "attend_team.h"
#include "forward/forward.h"
#include "kvcache/cache_internal.h"
#include "random_model.h"

static float frand(uint64_t *s) { /* uniform in [-1, 1) */
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (float)((*s >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double d = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double e = fabs((double)a[i] - (double)b[i]);
        if (!(e <= d)) d = e; /* NaN propagates */
    }
    return d;
}

/* ---- fp32 logits through the forward pass ------------------------------------------------------------------ */

typedef struct {
    tg_kvcache *cache;
    tg_forward *f;
} runner;

static runner runner_new(const struct tg_model *m, const tg_cache_params *p, bool slot_rope, int max_chunk,
                         int threads) {
    const tg_cache_shape shape = tg_model_cache_shape(m, m->hp.context_length, NULL);
    tg_error err = {0};
    runner r;
    r.cache = slot_rope ? tg_kvcache_new_slot_rope(&shape, p, &err) : tg_kvcache_new(&shape, p, &err);
    if (!r.cache) fail_msg("cache: %s", err.msg);
    r.f = tg_forward_new(m, r.cache, max_chunk, threads, &err);
    if (!r.f) fail_msg("forward: %s", err.msg);
    return r;
}

static void runner_free(runner *r) {
    tg_forward_free(r->f);
    tg_kvcache_free(r->cache);
}

static void check_logits(bool llama3) {
    enum { CTX = 64, PAST = 2000, T = CTX + PAST, CHUNK = 37 };
    random_model *rm = random_model_new(CTX, llama3 ? 11 : 3, llama3);
    const struct tg_model *m = random_model_get(rm);
    const int V = m->hp.vocab_size;
    int32_t *ids = random_model_text(T, V, 5);
    tg_cache_params p = tg_cache_default_params();
    p.sink = 4;
    p.window = CTX - 4; /* sinks + window = the context: nothing the model was not trained on, but evictions */
    runner def = runner_new(m, &p, false, 1, 1), ref = runner_new(m, &p, true, 1, 1);
    runner thr = runner_new(m, &p, false, 1, llama3 ? 1 : 3), chk = runner_new(m, &p, false, CHUNK, 2);
    float *a = malloc((size_t)V * sizeof *a), *b = malloc((size_t)V * sizeof *b), *c = malloc((size_t)V * sizeof *c);
    float *all = malloc((size_t)CHUNK * V * sizeof *all);
    assert_non_null(a), assert_non_null(b), assert_non_null(c), assert_non_null(all);
    double worst = 0.0;
    for (int t = 0; t < T; t++) {
        tg_forward_chunk(def.f, def.cache, ids + t, 1, t, NULL, a);
        tg_forward_chunk(ref.f, ref.cache, ids + t, 1, t, NULL, b);
        if (!llama3) tg_forward_chunk(thr.f, thr.cache, ids + t, 1, t, NULL, c);
        const double d = max_abs_diff(a, b, (size_t)V);
        if (!(d <= worst)) worst = d;
        if (!llama3 && memcmp(a, c, (size_t)V * sizeof *a) != 0) fail_msg("position %d: 3 threads differ from 1", t);
        /* chunked: CHUNK tokens per call, every row's logits */
        if (t % CHUNK == CHUNK - 1) tg_forward_chunk(chk.f, chk.cache, ids + t - (CHUNK - 1), CHUNK, t - (CHUNK - 1),
                                                     all, NULL);
        if (t % CHUNK == CHUNK - 1 && memcmp(all + (size_t)(CHUNK - 1) * V, a, (size_t)V * sizeof *a) != 0)
            fail_msg("position %d: chunks of %d differ from token by token", t, CHUNK);
    }
    fprintf(stderr, "fp32 logits%s, %d tokens (context %d): max |re-positioned - slot reference| = %.3g\n",
            llama3 ? " (llama3 RoPE)" : "", T, CTX, worst);
    if (!(worst <= 1e-5)) fail_msg("max |logit difference| %g > 1e-5", worst);
    assert_true(def.cache->layers[0].first >= PAST); /* it did evict */
    free(a), free(b), free(c), free(all);
    runner_free(&def), runner_free(&ref), runner_free(&thr), runner_free(&chk);
    free(ids);
    random_model_free(rm);
}

static void test_fp32_logits_equal_slot_reference(void **state) {
    (void)state;
    check_logits(false);
}

static void test_fp32_logits_equal_slot_reference_llama3(void **state) {
    (void)state;
    check_logits(true);
}

/* ---- every precision: the fused attention == the slot scheme over the same stored values --------------------- */

enum { NH = 4, H = 2, D = 16, HD = H * D };

/* Attention of the query q (pre-RoPE) of the token at pos in layer 0, computed from c's stored values in plain
 * scalar double arithmetic with the slot scheme: each stored key turned to its cache slot (sinks from their
 * pre-RoPE rows, window keys from their rotation at their position), the query to its slot stored - 1. */
static void slot_scheme_reference(const tg_kvcache *c, int64_t pos, const float *q, float *out) {
    const tg_layer_cache *L = &c->layers[0];
    const int64_t stored = L->n_sink + (L->n_appended - L->first);
    float *k = malloc((size_t)(stored * HD) * sizeof *k), *v = malloc((size_t)(stored * HD) * sizeof *v);
    int64_t *at = malloc((size_t)stored * sizeof *at);
    assert_non_null(k), assert_non_null(v), assert_non_null(at);
    assert_int_equal(tg_kvcache_read_back(c, 0, pos, NULL, NULL, at), stored);
    for (int64_t s = 0; s < stored; s++) {
        const bool sink = s < L->n_sink;
        const int64_t n = sink ? s : L->first + (s - L->n_sink);
        for (int h = 0; h < H; h++) {
            float *kr = k + (s * H + h) * D;
            tg_kvcache_load_row(c, L, true, sink, n, h, kr);
            tg_kvcache_load_row(c, L, false, sink, n, h, v + (s * H + h) * D);
            tg_rope(kr, 1, D, sink ? s : s - at[s], c->shape.rope_theta, c->shape.rope_style);
        }
    }
    float qr[NH * D];
    memcpy(qr, q, sizeof qr);
    tg_rope(qr, NH, D, stored - 1, c->shape.rope_theta, c->shape.rope_style);
    for (int i = 0; i < NH; i++) {
        const int h = i / (NH / H);
        double *sc = malloc((size_t)stored * sizeof *sc), m = -INFINITY, l = 0.0;
        assert_non_null(sc);
        for (int64_t s = 0; s < stored; s++) {
            double dot = 0.0;
            for (int e = 0; e < D; e++) dot += (double)qr[i * D + e] * (double)k[(s * H + h) * D + e];
            sc[s] = dot / sqrt((double)D);
            if (sc[s] > m) m = sc[s];
        }
        for (int e = 0; e < D; e++) out[i * D + e] = 0.0f;
        double o[D] = {0};
        for (int64_t s = 0; s < stored; s++) {
            const double w = exp(sc[s] - m);
            l += w;
            for (int e = 0; e < D; e++) o[e] += w * (double)v[(s * H + h) * D + e];
        }
        for (int e = 0; e < D; e++) out[i * D + e] = (float)(o[e] / l);
        free(sc);
    }
    free(k), free(v), free(at);
}

static double run_precision(tg_kv_precision kp, tg_kv_precision vp, int64_t sink, int64_t window, int T) {
    tg_cache_shape shape = {.n_layers = 1, .n_heads = NH, .n_kv_heads = H, .head_dim = D, .rope_theta = 10000.0f,
                            .rope_style = TG_ROPE_HALF, .context_length = 32};
    tg_cache_params p = tg_cache_default_params();
    p.key_precision = kp;
    p.value_precision = vp;
    p.sink = sink;
    p.window = window;
    tg_error err = {0};
    tg_kvcache *c = tg_kvcache_new(&shape, &p, &err);
    if (!c) fail_msg("tg_kvcache_new: %s", err.msg);
    assert_true(c->g.reposition && !c->g.slot_rope);
    uint64_t seed = 4242 + (uint64_t)kp * 7 + (uint64_t)vp;
    float k[HD], v[HD], q[NH * D], out[NH * D], out_scalar[NH * D], want[NH * D];
    double worst = 0.0;
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < HD; i++) {
            k[i] = frand(&seed);
            v[i] = frand(&seed);
        }
        for (int i = 0; i < NH * D; i++) q[i] = frand(&seed);
        tg_kvcache_append(c, 0, t, k, v);
        if (t >= 64 && t % 8 != 7) continue; /* every step while the sinks fill and the first evictions come */
        test_attend(c, 0, t, q, out, 1);
        slot_scheme_reference(c, t, q, want);
        const double d = max_abs_diff(out, want, NH * D);
        if (!(d <= worst)) worst = d;
        if (t % 16 == 15) { /* the scalar reference kernels too */
            tg_kvcache_set_simd(c, false);
            test_attend(c, 0, t, q, out_scalar, 1);
            tg_kvcache_set_simd(c, true);
            const double ds = max_abs_diff(out_scalar, want, NH * D);
            if (!(ds <= worst)) worst = ds;
        }
    }
    tg_kvcache_free(c);
    return worst;
}

static void test_every_precision_equals_slot_scheme(void **state) {
    (void)state;
    enum { PAST = 2000 };
    const tg_kv_precision mixed[][2] = {{TG_KV_INT4, TG_KV_FP16}, {TG_KV_BF16, TG_KV_INT2}, {TG_KV_INT8, TG_KV_INT4}};
    for (int kp = TG_KV_FP32; kp <= TG_KV_INT2 + 3; kp++) {
        const tg_kv_precision a = kp <= TG_KV_INT2 ? (tg_kv_precision)kp : mixed[kp - TG_KV_INT2 - 1][0];
        const tg_kv_precision b = kp <= TG_KV_INT2 ? (tg_kv_precision)kp : mixed[kp - TG_KV_INT2 - 1][1];
        const double d = run_precision(a, b, 4, 24, 32 + PAST);
        fprintf(stderr, "K %s / V %s, sink 4 + window 24, %d tokens: max |attention - slot scheme on the stored "
                "values| = %.3g\n", tg_kv_precision_name(a), tg_kv_precision_name(b), 32 + PAST, d);
        if (!(d <= 1e-5)) fail_msg("K %s / V %s: %g > 1e-5", tg_kv_precision_name(a), tg_kv_precision_name(b), d);
    }
}

/* ---- far positions ----------------------------------------------------------------------------------------- */

/* Sinks at offsets of millions (and billions) of tokens: the kept angles and the ones computed per read both equal
 * tg_rope at that position bit for bit (angles in double, rounded once). */
static void test_sink_rotation_far_positions(void **state) {
    (void)state;
    tg_cache_shape shape = {.n_layers = 1, .n_heads = NH, .n_kv_heads = H, .head_dim = D, .rope_theta = 500000.0f,
                            .rope_style = TG_ROPE_INTERLEAVED, .context_length = 32};
    tg_cache_params p = tg_cache_default_params();
    p.window = 8;
    tg_error err = {0};
    tg_kvcache *c = tg_kvcache_new(&shape, &p, &err);
    assert_non_null(c);
    const int64_t offsets[] = {0, 65535, 65536, 3000001, (int64_t)3 << 31};
    uint64_t seed = 9;
    for (size_t i = 0; i < sizeof offsets / sizeof offsets[0]; i++)
        for (int kept = 0; kept < 2; kept++) {
            if (kept) tg_kvcache_sink_angles(c, offsets[i]);
            for (int64_t j = 0; j < 4; j++) {
                float x[D], y[D];
                for (int e = 0; e < D; e++) x[e] = y[e] = frand(&seed);
                tg_kvcache_rotate_sink(c, x, j, offsets[i]);
                tg_rope(y, 1, D, offsets[i] + j, shape.rope_theta, shape.rope_style);
                assert_memory_equal(x, y, sizeof x);
            }
        }
    tg_kvcache_free(c);
}

/* The default against the reference cache over a long run (fp32, both fed the same keys), and with more sinks than
 * TG_SINK_ANGLE_ROWS (the rest rotated with angles computed per read). */
static void check_long_run(int64_t sink, int64_t window, int64_t T, int64_t every) {
    tg_cache_shape shape = {.n_layers = 1, .n_heads = NH, .n_kv_heads = H, .head_dim = D, .rope_theta = 10000.0f,
                            .rope_style = TG_ROPE_HALF, .context_length = 32};
    tg_cache_params p = tg_cache_default_params();
    p.sink = sink;
    p.window = window;
    tg_error err = {0};
    tg_kvcache *a = tg_kvcache_new(&shape, &p, &err), *b = tg_kvcache_new_slot_rope(&shape, &p, &err);
    assert_non_null(a);
    assert_non_null(b);
    assert_true(b->g.slot_rope);
    uint64_t seed = 31;
    float k[HD], v[HD], q[NH * D], oa[NH * D], ob[NH * D];
    double worst = 0.0;
    for (int64_t t = 0; t < T; t++) {
        for (int i = 0; i < HD; i++) {
            k[i] = frand(&seed);
            v[i] = frand(&seed);
        }
        tg_kvcache_append(a, 0, t, k, v);
        tg_kvcache_append(b, 0, t, k, v);
        if (t % every != every - 1 && t != T - 1) continue;
        for (int i = 0; i < NH * D; i++) q[i] = frand(&seed);
        test_attend(a, 0, t, q, oa, 1);
        test_attend(b, 0, t, q, ob, 1);
        const double d = max_abs_diff(oa, ob, NH * D);
        if (!(d <= worst)) worst = d;
    }
    fprintf(stderr, "fp32 sink %lld + window %lld, %lld tokens: max |re-positioned - slot reference| = %.3g\n",
            (long long)sink, (long long)window, (long long)T, worst);
    if (!(worst <= 1e-5)) fail_msg("%g > 1e-5", worst);
    tg_kvcache_free(a);
    tg_kvcache_free(b);
}

static void test_long_run_equals_slot_reference(void **state) {
    (void)state;
    check_long_run(4, 12, 20000, 500);
    check_long_run(TG_SINK_ANGLE_ROWS + 3, 5, TG_SINK_ANGLE_ROWS + 40, 7);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp32_logits_equal_slot_reference),
        cmocka_unit_test(test_fp32_logits_equal_slot_reference_llama3),
        cmocka_unit_test(test_every_precision_equals_slot_scheme),
        cmocka_unit_test(test_sink_rotation_far_positions),
        cmocka_unit_test(test_long_run_equals_slot_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
