/* test_sampler.c — the sampler against hand-computed softmax distributions: greedy, top-k, top-p, seeding,
 * empirical frequencies and non-finite logits. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tinygpt.h"

#define N_DRAWS 20000

static tg_sampler *make(float temperature, int top_k, float top_p, uint64_t seed, int32_t vocab) {
    tg_sampler_params p = {.temperature = temperature, .top_k = top_k, .top_p = top_p, .seed = seed};
    tg_sampler *s = tg_sampler_new(&p, vocab, NULL);
    assert_non_null(s);
    return s;
}

/* Reference softmax(logits / t) restricted to mask (1 = kept), in double. */
static void ref_probs(const float *logits, const int *mask, int n, double t, double *out) {
    double m = -INFINITY, sum = 0.0;
    for (int i = 0; i < n; i++)
        if (mask[i] && logits[i] / t > m) m = logits[i] / t;
    for (int i = 0; i < n; i++) {
        out[i] = mask[i] ? exp(logits[i] / t - m) : 0.0;
        sum += out[i];
    }
    for (int i = 0; i < n; i++) out[i] /= sum;
}

/* Draws N_DRAWS tokens and checks the frequencies against want[]: every id with want 0 is never drawn, the max
 * absolute difference is <= 0.015 (about 4 standard errors of a p = 0.5 frequency over 20k draws), and Pearson's
 * chi-square over the kept ids stays under the 0.999 quantile for its degrees of freedom (table below). */
static void check_frequencies(tg_sampler *s, const float *logits, const double *want, int n) {
    int counts[16] = {0};
    assert_true(n <= 16);
    for (int d = 0; d < N_DRAWS; d++) {
        int32_t id = tg_sampler_sample(s, logits);
        assert_true(id >= 0 && id < n);
        counts[id]++;
    }
    /* chi-square 0.999 quantiles for df = 1..10 */
    static const double chi999[] = {10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88, 29.59};
    double chi = 0.0, max_diff = 0.0;
    int df = -1;
    for (int i = 0; i < n; i++) {
        double f = (double)counts[i] / N_DRAWS;
        if (fabs(f - want[i]) > max_diff) max_diff = fabs(f - want[i]);
        if (want[i] == 0.0) {
            assert_int_equal(counts[i], 0);
            continue;
        }
        double e = want[i] * N_DRAWS;
        chi += (counts[i] - e) * (counts[i] - e) / e;
        df++;
    }
    assert_true(max_diff <= 0.015);
    if (df >= 1) assert_true(chi < chi999[df - 1]);
}

static void test_greedy_picks_argmax(void **state) {
    (void)state;
    const float logits[] = {0.1f, 2.5f, -1.0f, 2.4f, 0.0f};
    tg_sampler *s = make(0.0f, 0, 1.0f, 1, 5);
    for (int i = 0; i < 10; i++) assert_int_equal(tg_sampler_sample(s, logits), 1);
    tg_sampler_free(s);
}

static void test_greedy_ties_lowest_id(void **state) {
    (void)state;
    const float logits[] = {1.0f, 3.0f, -2.0f, 3.0f, 3.0f};
    tg_sampler *s = make(0.0f, 0, 1.0f, 1, 5);
    assert_int_equal(tg_sampler_sample(s, logits), 1);
    tg_sampler_free(s);
}

static void test_top_k_one_is_greedy(void **state) {
    (void)state;
    float logits[64];
    for (int i = 0; i < 64; i++) logits[i] = sinf((float)i * 1.7f) * 3.0f;
    tg_sampler *g = make(0.0f, 0, 1.0f, 0, 64);
    tg_sampler *s = make(1.5f, 1, 1.0f, 42, 64);
    int32_t want = tg_sampler_sample(g, logits);
    for (int i = 0; i < 200; i++) assert_int_equal(tg_sampler_sample(s, logits), want);
    /* also with a tie at the top: both pick the lowest id */
    logits[want + 1 < 64 ? want + 1 : 0] = logits[want];
    want = tg_sampler_sample(g, logits);
    for (int i = 0; i < 200; i++) assert_int_equal(tg_sampler_sample(s, logits), want);
    tg_sampler_free(g);
    tg_sampler_free(s);
}

static void test_tiny_top_p_is_greedy(void **state) {
    (void)state;
    float logits[100];
    for (int i = 0; i < 100; i++) logits[i] = cosf((float)i * 0.37f) * 2.0f;
    tg_sampler *g = make(0.0f, 0, 1.0f, 0, 100);
    tg_sampler *s = make(1.0f, 0, 1e-6f, 7, 100);
    tg_sampler *s0 = make(1.0f, 0, 0.0f, 7, 100);
    tg_sampler *sk = make(1.0f, 10, 1e-6f, 7, 100);
    int32_t want = tg_sampler_sample(g, logits);
    for (int i = 0; i < 200; i++) {
        assert_int_equal(tg_sampler_sample(s, logits), want);
        assert_int_equal(tg_sampler_sample(s0, logits), want);
        assert_int_equal(tg_sampler_sample(sk, logits), want);
    }
    tg_sampler_free(g);
    tg_sampler_free(s);
    tg_sampler_free(s0);
    tg_sampler_free(sk);
}

static void test_same_seed_same_draws(void **state) {
    (void)state;
    float logits[32];
    for (int i = 0; i < 32; i++) logits[i] = (float)(i % 7) * 0.3f;
    tg_sampler *a = make(1.0f, 0, 1.0f, 1234, 32);
    tg_sampler *b = make(1.0f, 0, 1.0f, 1234, 32);
    tg_sampler *c = make(1.0f, 0, 1.0f, 1235, 32);
    int differ = 0;
    for (int i = 0; i < 500; i++) {
        int32_t x = tg_sampler_sample(a, logits), y = tg_sampler_sample(b, logits), z = tg_sampler_sample(c, logits);
        assert_int_equal(x, y);
        differ += x != z;
    }
    assert_true(differ > 100); /* a different seed gives a different sequence */
    tg_sampler_free(a);
    tg_sampler_free(b);
    tg_sampler_free(c);
}

static void test_frequencies_match_softmax(void **state) {
    (void)state;
    const float logits[] = {1.0f, 2.0f, 0.5f, -1.0f, 1.5f, 0.0f, 2.2f, -0.3f};
    const int all[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    double want[8];
    const float temps[] = {1.0f, 0.7f, 1.8f};
    for (int t = 0; t < 3; t++) {
        ref_probs(logits, all, 8, temps[t], want);
        tg_sampler *s = make(temps[t], 0, 1.0f, 99 + (uint64_t)t, 8);
        check_frequencies(s, logits, want, 8);
        tg_sampler_free(s);
    }
}

static void test_top_k_renormalises(void **state) {
    (void)state;
    const float logits[] = {1.0f, 2.0f, 0.5f, -1.0f, 1.5f, 0.0f, 2.2f, -0.3f};
    const int top3[8] = {0, 1, 0, 0, 1, 0, 1, 0}; /* ids 6, 1, 4 */
    double want[8];
    ref_probs(logits, top3, 8, 1.0, want);
    tg_sampler *s = make(1.0f, 3, 1.0f, 5, 8);
    check_frequencies(s, logits, want, 8);
    tg_sampler_free(s);
}

static void test_top_p_keeps_smallest_nucleus(void **state) {
    (void)state;
    /* probabilities 0.4, 0.3, 0.2, 0.1 (logits are their logs): p = 0.65 keeps {0, 1} (0.4 < 0.65 <= 0.7) */
    const float logits[] = {logf(0.4f), logf(0.3f), logf(0.2f), logf(0.1f)};
    double want[4] = {0.4 / 0.7, 0.3 / 0.7, 0.0, 0.0};
    tg_sampler *s = make(1.0f, 0, 0.65f, 11, 4);
    check_frequencies(s, logits, want, 4);
    tg_sampler_free(s);
    /* p = 0.95 keeps all four */
    double all4[4] = {0.4, 0.3, 0.2, 0.1};
    s = make(1.0f, 0, 0.95f, 12, 4);
    check_frequencies(s, logits, all4, 4);
    tg_sampler_free(s);
    /* top-k 3, then top-p 0.8 over the renormalised top 3 (0.444, 0.333, 0.222): 0.444 + 0.333 = 0.778 < 0.8, so
     * all three stay */
    double k3[4] = {0.4 / 0.9, 0.3 / 0.9, 0.2 / 0.9, 0.0};
    s = make(1.0f, 3, 0.8f, 13, 4);
    check_frequencies(s, logits, k3, 4);
    tg_sampler_free(s);
    /* top-k 3 then top-p 0.75: 0.778 >= 0.75 keeps {0, 1} */
    s = make(1.0f, 3, 0.75f, 14, 4);
    check_frequencies(s, logits, want, 4);
    tg_sampler_free(s);
}

static void test_non_finite_logits(void **state) {
    (void)state;
    const float m_inf[] = {-INFINITY, 0.0f, -INFINITY, 0.0f, NAN};
    double want[5] = {0.0, 0.5, 0.0, 0.5, 0.0};
    tg_sampler *s = make(1.0f, 0, 1.0f, 3, 5);
    check_frequencies(s, m_inf, want, 5);
    tg_sampler *g = make(0.0f, 0, 1.0f, 3, 5);
    assert_int_equal(tg_sampler_sample(g, m_inf), 1);
    /* NaN first must not win greedy */
    const float nan_first[] = {NAN, -5.0f, -INFINITY, -7.0f, NAN};
    assert_int_equal(tg_sampler_sample(g, nan_first), 1);
    /* +inf: uniform over the +inf entries */
    const float p_inf[] = {3.0f, INFINITY, 1e30f, INFINITY, NAN};
    double want_inf[5] = {0.0, 0.5, 0.0, 0.5, 0.0};
    check_frequencies(s, p_inf, want_inf, 5);
    assert_int_equal(tg_sampler_sample(g, p_inf), 1);
    /* nothing drawable: -1 */
    const float none[] = {-INFINITY, NAN, -INFINITY, NAN, -INFINITY};
    assert_int_equal(tg_sampler_sample(s, none), -1);
    assert_int_equal(tg_sampler_sample(g, none), -1);
    tg_sampler_free(s);
    tg_sampler_free(g);
}

static void test_low_temperature_overflow(void **state) {
    (void)state;
    /* 3e38 / 0.01 overflows to +inf: treated as the limit (that id always wins) */
    const float logits[] = {1.0f, 3e38f, 2.0f};
    tg_sampler *s = make(0.01f, 0, 0.9f, 8, 3);
    for (int i = 0; i < 100; i++) assert_int_equal(tg_sampler_sample(s, logits), 1);
    tg_sampler_free(s);
}

static void test_invalid_params(void **state) {
    (void)state;
    tg_sampler_params p = tg_sampler_default_params();
    tg_error err = {0};
    assert_null(tg_sampler_new(&p, 0, &err));
    assert_string_equal(err.msg, "sampler: the vocabulary is empty");
    p.temperature = -1.0f;
    assert_null(tg_sampler_new(&p, 10, &err));
    assert_string_equal(err.msg, "sampler: the temperature must be a finite number >= 0");
    p.temperature = NAN;
    err.msg[0] = '\0';
    assert_null(tg_sampler_new(&p, 10, &err));
    assert_string_equal(err.msg, "sampler: the temperature must be a finite number >= 0");
    p = tg_sampler_default_params();
    p.top_p = 1.5f;
    assert_null(tg_sampler_new(&p, 10, &err));
    assert_string_equal(err.msg, "sampler: top-p must be in [0, 1]");
    p = tg_sampler_default_params();
    p.top_k = -2;
    assert_null(tg_sampler_new(&p, 10, &err));
    assert_string_equal(err.msg, "sampler: top-k must be >= 0");
    assert_null(tg_sampler_new(NULL, 10, &err));
    assert_string_equal(err.msg, "sampler: no parameters");
    assert_null(tg_sampler_new(NULL, 10, NULL)); /* no error slot: still refused */
    tg_sampler_free(NULL);
}

static void test_large_vocab_top_k_frequencies(void **state) {
    (void)state;
    /* 32000 ids with a few large logits: top-k 4 over the whole vocabulary matches the renormalised top 4. Only 4000
     * draws (each one heapifies the whole vocabulary), so the tolerance is 0.035: 4.4 standard errors of p = 0.5. */
    enum { V = 32000, DRAWS = 4000 };
    static float logits[V];
    for (int i = 0; i < V; i++) logits[i] = -3.0f + (float)(i % 13) * 0.1f;
    logits[31999] = 4.0f;
    logits[17] = 3.5f;
    logits[20000] = 3.0f;
    logits[5] = 3.0f; /* tie with 20000: the lower id (5) ranks first, but both are inside the top 4 */
    logits[6] = 2.9f;
    tg_sampler *s = make(1.0f, 4, 1.0f, 21, V);
    double e[4] = {exp(4.0), exp(3.5), exp(3.0), exp(3.0)};
    double sum = e[0] + e[1] + e[2] + e[3];
    int c31999 = 0, c17 = 0, c5 = 0, c20000 = 0;
    for (int d = 0; d < DRAWS; d++) {
        int32_t id = tg_sampler_sample(s, logits);
        if (id == 31999) c31999++;
        else if (id == 17) c17++;
        else if (id == 5) c5++;
        else if (id == 20000) c20000++;
        else fail_msg("drew id %d outside the top 4", (int)id);
    }
    assert_true(fabs((double)c31999 / DRAWS - e[0] / sum) <= 0.035);
    assert_true(fabs((double)c17 / DRAWS - e[1] / sum) <= 0.035);
    assert_true(fabs((double)c5 / DRAWS - e[2] / sum) <= 0.035);
    assert_true(fabs((double)c20000 / DRAWS - e[3] / sum) <= 0.035);
    tg_sampler_free(s);
}

/* llama.cpp's repeat penalty: a positive logit divided by the penalty, a negative one multiplied, once per id,
 * only for the ids among the last repeat_last_n accepted or sampled tokens. */
static void test_repeat_penalty(void **state) {
    (void)state;
    tg_sampler_params p = tg_sampler_default_params();
    p.temperature = 0.0f;
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = 2;
    tg_sampler *s = tg_sampler_new(&p, 4, NULL);
    assert_non_null(s);
    const float pos[4] = {5.0f, 4.0f, 1.0f, 0.0f};
    assert_int_equal(tg_sampler_sample(s, pos), 0); /* no history yet: the argmax */
    /* 0 was sampled and is remembered: 5 / 2 = 2.5 < 4 */
    assert_int_equal(tg_sampler_sample(s, pos), 1);
    /* history {0, 1}: 2.5 and 2.0 against 1 and 0 -> 0 again (2.5) */
    assert_int_equal(tg_sampler_sample(s, pos), 0);
    tg_sampler_free(s);

    s = tg_sampler_new(&p, 4, NULL);
    const float neg[4] = {-1.0f, -1.5f, -3.0f, -4.0f};
    tg_sampler_accept(s, 0); /* -1 * 2 = -2 < -1.5 */
    assert_int_equal(tg_sampler_sample(s, neg), 1);
    tg_sampler_free(s);

    /* the window: with repeat_last_n 1, only the latest token is penalised */
    p.repeat_last_n = 1;
    s = tg_sampler_new(&p, 4, NULL);
    tg_sampler_accept(s, 0);
    tg_sampler_accept(s, 3);
    assert_int_equal(tg_sampler_sample(s, pos), 0);
    /* the same id twice in the window is penalised once: 5 / 2 = 2.5 > 1 */
    tg_sampler_free(s);
    p.repeat_last_n = 4;
    s = tg_sampler_new(&p, 4, NULL);
    const float close[4] = {5.0f, 2.4f, 0.0f, 0.0f};
    tg_sampler_accept(s, 0);
    tg_sampler_accept(s, 0);
    tg_sampler_accept(s, 0);
    assert_int_equal(tg_sampler_sample(s, close), 0);
    tg_sampler_free(s);

    /* penalty 1 (and a zero-initialised struct) is off: the same draws as before the option existed */
    tg_sampler *a = make(0.9f, 0, 1.0f, 42, 5);
    p = tg_sampler_default_params();
    p.temperature = 0.9f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.seed = 42;
    tg_sampler *b = tg_sampler_new(&p, 5, NULL);
    const float l[5] = {1.0f, 0.5f, 0.2f, -0.3f, 0.9f};
    for (int i = 0; i < 200; i++) assert_int_equal(tg_sampler_sample(a, l), tg_sampler_sample(b, l));
    tg_sampler_free(a);
    tg_sampler_free(b);
}

/* min-p: ids whose probability is below min_p times the top one's are never drawn; the rest keep their softmax. */
static void test_min_p(void **state) {
    (void)state;
    tg_sampler_params p = tg_sampler_default_params();
    p.temperature = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.2f;
    p.seed = 7;
    tg_sampler *s = tg_sampler_new(&p, 4, NULL);
    assert_non_null(s);
    /* relative probabilities exp(l - max): 1, 0.5, 0.25, 0.1 -> the last one (< 0.2) is dropped */
    const float l[4] = {0.0f, logf(0.5f), logf(0.25f), logf(0.1f)};
    const double want[4] = {1.0 / 1.75, 0.5 / 1.75, 0.25 / 1.75, 0.0};
    check_frequencies(s, l, want, 4);
    tg_sampler_free(s);
}

static void test_invalid_new_params(void **state) {
    (void)state;
    tg_sampler_params p = tg_sampler_default_params();
    p.repeat_penalty = -1.0f;
    assert_null(tg_sampler_new(&p, 10, NULL));
    p = tg_sampler_default_params();
    p.repeat_penalty = INFINITY;
    assert_null(tg_sampler_new(&p, 10, NULL));
    p = tg_sampler_default_params();
    p.repeat_last_n = -1;
    assert_null(tg_sampler_new(&p, 10, NULL));
    p.repeat_last_n = TG_SAMPLER_MAX_LAST_N + 1;
    assert_null(tg_sampler_new(&p, 10, NULL));
    p = tg_sampler_default_params();
    p.min_p = 1.5f;
    tg_error err = {0};
    assert_null(tg_sampler_new(&p, 10, &err));
    assert_non_null(strstr(err.msg, "min-p"));
    p = tg_sampler_default_params();
    p.repeat_penalty = -2.0f;
    assert_null(tg_sampler_new(&p, 10, &err));
    assert_non_null(strstr(err.msg, "repeat penalty"));
    p = tg_sampler_default_params();
    p.min_p = NAN;
    assert_null(tg_sampler_new(&p, 10, NULL));
    tg_sampler_accept(NULL, 3); /* no crash */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_repeat_penalty),
        cmocka_unit_test(test_min_p),
        cmocka_unit_test(test_invalid_new_params),
        cmocka_unit_test(test_greedy_picks_argmax),
        cmocka_unit_test(test_greedy_ties_lowest_id),
        cmocka_unit_test(test_top_k_one_is_greedy),
        cmocka_unit_test(test_tiny_top_p_is_greedy),
        cmocka_unit_test(test_same_seed_same_draws),
        cmocka_unit_test(test_frequencies_match_softmax),
        cmocka_unit_test(test_top_k_renormalises),
        cmocka_unit_test(test_top_p_keeps_smallest_nucleus),
        cmocka_unit_test(test_non_finite_logits),
        cmocka_unit_test(test_low_temperature_overflow),
        cmocka_unit_test(test_invalid_params),
        cmocka_unit_test(test_large_vocab_top_k_frequencies),
    };
    return cmocka_run_group_tests_name("sampler", tests, NULL, NULL);
}
