/* test_cache_sizes.c — issue 14's rule on the bundled models (models/tinygpt-flagship.gguf, models/tinygpt-yoco.gguf)
 * under the default KIVI flags: every quantised cache (int8 / int4 / int2, keys and values alike or mixed) allocates
 * fewer bytes than a bf16 cache with the same length policy, at every window 16, 32, ..., 65536 (sink 4) and every
 * unbounded cache of T = 16 ... 65536 tokens and of the model's full context; and the ratios of the targets
 * at sink 4 + window 256 and at the full context (int8 <= 0.65, int4 <= 0.42, int2 <= 0.32 of bf16). Bytes from
 * tg_cache_bytes (the closed form tg_kvcache_new allocates by) and, where a session is affordable, from a session's
 * report (bytes really allocated), which must agree. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "tinygpt.h"

static const char *const MODELS[] = {"models/tinygpt-flagship.gguf", "models/tinygpt-yoco.gguf"};

static const struct {
    tg_kv_precision k, v;
    double target; /* the ratio to bf16 at sink 4 + window 256 and at the full context (0: only < 1) */
    int64_t from;  /* the smallest window / context checked: a plain fp16 / bf16 store beside a KIVI one is sized
                    * with the group slack of eviction (G - 1 rows), which outweighs what the KIVI half saves at a
                    * window of 16 or 32 */
} PRECISIONS[] = {
    {TG_KV_INT8, TG_KV_INT8, 0.65, 16}, {TG_KV_INT4, TG_KV_INT4, 0.42, 16}, {TG_KV_INT2, TG_KV_INT2, 0.32, 16},
    {TG_KV_INT8, TG_KV_INT4, 0.0, 16},  {TG_KV_INT4, TG_KV_INT8, 0.0, 16},  {TG_KV_INT8, TG_KV_INT2, 0.0, 16},
    {TG_KV_INT2, TG_KV_INT8, 0.0, 16},  {TG_KV_INT4, TG_KV_INT2, 0.0, 16},  {TG_KV_INT2, TG_KV_INT4, 0.0, 16},
    {TG_KV_INT4, TG_KV_FP16, 0.0, 64},  {TG_KV_BF16, TG_KV_INT2, 0.0, 64},
};
#define N_PRECISIONS (sizeof PRECISIONS / sizeof PRECISIONS[0])

static tg_cache_params policy(tg_kv_precision k, tg_kv_precision v, int64_t window) {
    tg_cache_params p = tg_cache_default_params();
    p.key_precision = k;
    p.value_precision = v;
    p.window = window;
    if (window > 0) p.sink = 4;
    return p;
}

/* tg_cache_bytes for a history long enough to reach the bound (bounded), or of exactly `tokens` (unbounded). */
static size_t bytes_of(const tg_model *m, const tg_cache_params *p, int64_t tokens) {
    tg_error err = {0};
    size_t b = tg_cache_bytes(m, p, tokens, &err);
    if (b == 0) fail_msg("tg_cache_bytes: %s", err.msg);
    return b;
}

/* The bytes a session with this policy really allocates (its report), checked against tg_cache_bytes. */
static size_t session_bytes(const tg_model *m, const tg_cache_params *p, int64_t tokens) {
    tg_error err = {0};
    tg_session *s = tg_session_new(m, p, 1, &err);
    if (!s) fail_msg("tg_session_new: %s", err.msg);
    /* an unbounded cache grows as tokens arrive: its chunks for `tokens` (at most its context), allocated now */
    if (!tg_session_reserve(s, tokens, &err)) fail_msg("tg_session_reserve: %s", err.msg);
    tg_cache_report r;
    tg_session_cache_report(s, &r);
    tg_session_free(s);
    assert_int_equal(r.bytes_total, bytes_of(m, p, tokens));
    return r.bytes_total;
}

static void check_model(const char *path) {
    tg_error err = {0};
    tg_model *m = tg_model_load(path, &err);
    if (!m) fail_msg("%s: %s", path, err.msg);
    tg_model_info info;
    tg_model_get_info(m, &info);
    const int64_t ctx = info.context_length;
    for (size_t i = 0; i < N_PRECISIONS; i++) {
        const tg_kv_precision k = PRECISIONS[i].k, v = PRECISIONS[i].v;
        for (int64_t n = PRECISIONS[i].from; n <= 65536; n *= 2) {
            /* sink 4 + window n, past its bound */
            tg_cache_params q = policy(k, v, n), b = policy(TG_KV_BF16, TG_KV_BF16, n);
            const size_t qb = bytes_of(m, &q, 4 * n + 1000), bb = bytes_of(m, &b, 4 * n + 1000);
            if (!(qb < bb))
                fail_msg("%s: K %s / V %s, sink 4 + window %lld: %zu bytes, not below bf16's %zu", path,
                         tg_kv_precision_name(k), tg_kv_precision_name(v), (long long)n, qb, bb);
            /* an unbounded cache of n tokens (a context of n) */
            tg_cache_params qu = policy(k, v, 0), bu = policy(TG_KV_BF16, TG_KV_BF16, 0);
            const size_t qub = bytes_of(m, &qu, n), bub = bytes_of(m, &bu, n);
            if (!(qub < bub))
                fail_msg("%s: K %s / V %s, unbounded %lld tokens: %zu bytes, not below bf16's %zu", path,
                         tg_kv_precision_name(k), tg_kv_precision_name(v), (long long)n, qub, bub);
            if (n <= 1024) { /* the session allocates what the table says */
                session_bytes(m, &q, 4 * n + 1000);
                session_bytes(m, &b, 4 * n + 1000);
            }
        }
        /* the full context, allocated by a session */
        tg_cache_params qf = policy(k, v, 0), bf = policy(TG_KV_BF16, TG_KV_BF16, 0);
        const size_t full_q = session_bytes(m, &qf, ctx), full_b = session_bytes(m, &bf, ctx);
        assert_true(full_q < full_b);
        tg_cache_params q256 = policy(k, v, 256), b256 = policy(TG_KV_BF16, TG_KV_BF16, 256);
        const size_t w_q = session_bytes(m, &q256, 2000), w_b = session_bytes(m, &b256, 2000);
        const double r_full = (double)full_q / (double)full_b, r_256 = (double)w_q / (double)w_b;
        printf("%s: K %s / V %s: %.3fx of bf16 at sink 4 + window 256, %.3fx at the full context %lld\n", path,
               tg_kv_precision_name(k), tg_kv_precision_name(v), r_256, r_full, (long long)ctx);
        if (PRECISIONS[i].target > 0.0 && !(r_256 <= PRECISIONS[i].target && r_full <= PRECISIONS[i].target))
            fail_msg("%s: %s misses its target %.2fx of bf16 (%.3fx at window 256, %.3fx at the full context)", path,
                     tg_kv_precision_name(k), PRECISIONS[i].target, r_256, r_full);
    }
    tg_model_free(m);
}

static void test_smaller_than_bf16_at_every_size(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof MODELS / sizeof MODELS[0]; i++) check_model(MODELS[i]);
}

/* The published KIVI setting stays reachable by flags, and is the larger cache of the two at window 256. */
static void test_kivi_published_setting(void **state) {
    (void)state;
    tg_error err = {0};
    tg_model *m = tg_model_load(MODELS[0], &err);
    if (!m) fail_msg("%s: %s", MODELS[0], err.msg);
    tg_cache_params d = policy(TG_KV_INT4, TG_KV_INT4, 256), k = d;
    k.group_size = 32, k.residual = 128, k.residual_precision = TG_KV_FP32;
    tg_session *s = tg_session_new(m, &k, 1, &err);
    assert_non_null(s);
    tg_cache_report r;
    tg_session_cache_report(s, &r);
    assert_non_null(strstr(r.policy, "group 32, residual 128)"));
    assert_true(r.bytes_total > bytes_of(m, &d, 2000));
    tg_session_free(s);
    tg_model_free(m);
}

/* --kv-budget 1M on the bundled model (issue 14): the window a budget buys at int4 is at least 2.4x fp16's, at int2
 * at least 3x, every cache within the budget. */
static void test_budget_buys_tokens(void **state) {
    (void)state;
    tg_error err = {0};
    tg_model *m = tg_model_load(MODELS[0], &err);
    if (!m) fail_msg("%s: %s", MODELS[0], err.msg);
    const tg_kv_precision ps[] = {TG_KV_FP16, TG_KV_INT8, TG_KV_INT4, TG_KV_INT2};
    int64_t window[4];
    for (int i = 0; i < 4; i++) {
        tg_cache_params p = policy(ps[i], ps[i], 0);
        p.budget_bytes = 1 << 20;
        tg_session *s = tg_session_new(m, &p, 1, &err);
        if (!s) fail_msg("%s: %s", tg_kv_precision_name(ps[i]), err.msg);
        tg_cache_report r;
        tg_session_cache_report(s, &r);
        assert_true(r.bytes_total <= (size_t)p.budget_bytes);
        window[i] = r.window;
        printf("--kv-budget 1M, %s: window %lld, at most %lld tokens held, %zu bytes\n", tg_kv_precision_name(ps[i]),
               (long long)r.window, (long long)r.capacity, r.bytes_total);
        tg_session_free(s);
    }
    assert_true(window[2] * 10 >= window[0] * 24);
    assert_true(window[3] >= window[0] * 3);
    tg_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_smaller_than_bf16_at_every_size),
        cmocka_unit_test(test_kivi_published_setting),
        cmocka_unit_test(test_budget_buys_tokens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
