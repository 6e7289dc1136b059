/* test_session_api.c — the library API of issue 15 on the smollm2 fixture (tests/data/fixtures/smollm2):
 * tg_session_reset (after any history, the same tokens give bit-identical logits to a fresh session, for plain,
 * KIVI, StreamingLLM, re-positioned and quantised-sink caches), the abort callback (asked before every forward call;
 * TG_ERR_ABORTED with the evaluated chunks kept), tg_generate (greedy text equals the hand-written loop; a callback
 * that stops; abort between tokens), a sampled run repeated after tg_session_reset + tg_sampler_reset, tg_chat (a
 * built-in template rendered as expected, errors), and every constructor filling tg_error when it fails. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tinygpt.h"
#include "test_model_util.h"

static const char MODEL[] = "tests/data/fixtures/smollm2";

static void test_reset_gives_fresh_results(void **state) {
    (void)state;
    tg_model *m = load_model(MODEL);
    const int32_t V = tg_vocab_size(m);
    enum { N = 40 };
    int32_t x[N], y[N];
    some_ids(x, N, V, 1);
    some_ids(y, N, V, 2);
    float *fresh = malloc((size_t)N * V * sizeof *fresh), *again = malloc((size_t)N * V * sizeof *again);
    assert_non_null(fresh);
    assert_non_null(again);
    for (int policy = 0; policy < 5; policy++) {
        tg_cache_params p = tg_cache_default_params();
        if (policy >= 1) p.key_precision = p.value_precision = policy == 4 ? TG_KV_INT2 : TG_KV_INT4;
        if (policy >= 2) p.window = 12; /* sinks 4 + 12: the history is evicted */
        /* policy 2: the keys at their original positions; 3: re-positioned (the default) */
        p.rope_positions = policy == 2 ? TG_ROPE_POSITIONS_ORIGINAL : TG_ROPE_POSITIONS_DEFAULT;
        if (policy == 4) p.quantize_sinks = true;
        tg_error err = {0};
        tg_session *s = tg_session_new(m, &p, 1, &err);
        assert_non_null(s);
        assert_true(tg_session_eval(s, x, N, fresh, NULL, &err));
        assert_true(tg_session_eval(s, y, N, NULL, NULL, &err)); /* more history */
        tg_session_reset(s);
        assert_int_equal(tg_session_position(s), 0);
        tg_cache_report r;
        tg_session_cache_report(s, &r);
        assert_int_equal(r.stored, 0);
        assert_true(tg_session_eval(s, x, N, again, NULL, &err));
        assert_memory_equal(fresh, again, (size_t)N * V * sizeof *fresh);
        tg_session_free(s);
    }
    free(fresh);
    free(again);
    tg_model_free(m);
}

typedef struct {
    int calls, stop_at;
} abort_state;

static bool abort_at(void *user) {
    abort_state *a = user;
    return ++a->calls >= a->stop_at;
}

static void test_abort_between_chunks(void **state) {
    (void)state;
    tg_model *m = load_model(MODEL);
    enum { N = 700 }; /* three prefill chunks (of 256), past the model's context: a larger cache */
    int32_t ids[N];
    some_ids(ids, N, tg_vocab_size(m), 3);
    tg_error err = {0};
    tg_cache_params p = tg_cache_default_params();
    p.context = N;
    tg_session *s = tg_session_new(m, &p, 1, &err);
    assert_non_null(s);
    abort_state a = {0, 3}; /* the third forward call is refused */
    tg_session_set_abort(s, abort_at, &a);
    assert_false(tg_session_eval(s, ids, N, NULL, NULL, &err));
    if (err.code != TG_ERR_ABORTED) fail_msg("%s", err.msg);
    assert_non_null(strstr(err.msg, "aborted"));
    assert_int_equal(a.calls, 3);
    const int64_t kept = tg_session_position(s);
    assert_true(kept > 0 && kept < N); /* two whole chunks */
    /* without the callback the session goes on from there */
    tg_session_set_abort(s, NULL, NULL);
    assert_true(tg_session_eval(s, ids + kept, (size_t)(N - kept), NULL, NULL, &err));
    assert_int_equal(tg_session_position(s), N);
    tg_session_free(s);
    tg_model_free(m);
}

typedef struct {
    int32_t ids[256];
    int n, stop_after;
    char text[4096];
    size_t len;
} collected;

static bool collect(int32_t id, const char *text, size_t len, void *user) {
    collected *c = user;
    if (id >= 0 && c->n < 256) c->ids[c->n++] = id;
    assert_true(c->len + len < sizeof c->text);
    memcpy(c->text + c->len, text, len);
    c->len += len;
    return c->stop_after == 0 || c->n < c->stop_after;
}

static void test_generate(void **state) {
    (void)state;
    tg_model *m = load_model(MODEL);
    const int32_t V = tg_vocab_size(m);
    tg_error err = {0};
    int32_t *prompt = NULL;
    size_t n_prompt = 0;
    assert_true(tg_tokenize(m, "The capital of France is", 24, tg_model_adds_bos(m), &prompt, &n_prompt, &err));
    tg_sampler_params sp = tg_sampler_default_params();
    sp.temperature = 0;
    tg_sampler *smp = tg_sampler_new(&sp, V, &err);
    tg_session *s = tg_session_new(m, NULL, 1, &err);
    assert_non_null(smp);
    assert_non_null(s);

    /* the reference: the hand-written greedy loop */
    enum { T = 20 };
    float *logits = malloc((size_t)V * sizeof *logits);
    assert_non_null(logits);
    assert_true(tg_session_eval(s, prompt, n_prompt, NULL, logits, &err));
    int32_t ref[T];
    int n_ref = 0;
    for (; n_ref < T; n_ref++) {
        int32_t id = tg_sampler_sample(smp, logits);
        if (tg_token_is_eos(m, id)) break;
        ref[n_ref] = id;
        assert_true(tg_session_eval(s, &id, 1, NULL, logits, &err));
    }
    assert_true(n_ref > 0);

    tg_session_reset(s);
    static collected c;
    memset(&c, 0, sizeof c);
    int64_t got = tg_generate(s, smp, prompt, n_prompt, T, collect, &c, &err);
    assert_int_equal(got, n_ref);
    assert_int_equal(c.n, n_ref);
    assert_memory_equal(c.ids, ref, (size_t)n_ref * sizeof *ref);
    /* the session holds the prompt and every generated token */
    assert_int_equal(tg_session_position(s), (int64_t)n_prompt + n_ref);

    /* a callback that says stop */
    tg_session_reset(s);
    memset(&c, 0, sizeof c);
    c.stop_after = 3;
    assert_int_equal(tg_generate(s, smp, prompt, n_prompt, T, collect, &c, &err), 3);
    assert_memory_equal(c.ids, ref, 3 * sizeof *ref);

    /* the abort callback, between tokens: the prompt's one forward call, then one per token */
    tg_session_reset(s);
    memset(&c, 0, sizeof c);
    abort_state a = {0, 3};
    tg_session_set_abort(s, abort_at, &a);
    assert_int_equal(tg_generate(s, smp, prompt, n_prompt, T, collect, &c, &err), -1);
    assert_int_equal(err.code, TG_ERR_ABORTED);
    assert_int_equal(c.n, 2);
    tg_session_set_abort(s, NULL, NULL);

    /* errors */
    assert_int_equal(tg_generate(s, smp, prompt, 0, T, NULL, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "empty"));
    assert_int_equal(tg_generate(NULL, smp, prompt, n_prompt, T, NULL, NULL, &err), -1);

    free(logits);
    free(prompt);
    tg_session_free(s);
    tg_sampler_free(smp);
    tg_model_free(m);
}

/* tg_session_reset + tg_sampler_reset: a sampled run with a repeat penalty repeats exactly. */
static void test_sampled_run_repeats_after_resets(void **state) {
    (void)state;
    tg_model *m = load_model(MODEL);
    tg_error err = {0};
    int32_t *prompt = NULL;
    size_t n_prompt = 0;
    assert_true(tg_tokenize(m, "Hello", 5, tg_model_adds_bos(m), &prompt, &n_prompt, &err));
    tg_sampler_params sp = tg_sampler_default_params();
    sp.seed = 1234;
    sp.repeat_penalty = 1.3f;
    tg_sampler *smp = tg_sampler_new(&sp, tg_vocab_size(m), &err);
    tg_session *s = tg_session_new(m, NULL, 1, &err);
    assert_non_null(smp);
    assert_non_null(s);
    static collected first, again;
    memset(&first, 0, sizeof first);
    memset(&again, 0, sizeof again);
    const int64_t n1 = tg_generate(s, smp, prompt, n_prompt, 24, collect, &first, &err);
    assert_true(n1 > 0);
    tg_session_reset(s);
    tg_sampler_reset(smp);
    assert_int_equal(tg_generate(s, smp, prompt, n_prompt, 24, collect, &again, &err), n1);
    assert_memory_equal(first.ids, again.ids, (size_t)n1 * sizeof first.ids[0]);
    assert_int_equal(first.len, again.len);
    assert_memory_equal(first.text, again.text, first.len);
    tg_sampler_reset(NULL);
    free(prompt);
    tg_session_free(s);
    tg_sampler_free(smp);
    tg_model_free(m);
}

static void test_chat(void **state) {
    (void)state;
    tg_error err = {0};
    tg_chat *c = tg_chat_open(MODEL, "chatml", &err);
    assert_non_null(c);
    const tg_chat_message msgs[] = {{"system", "Be brief."}, {"user", "Hi"}};
    size_t len = 0;
    char *text = tg_chat_render(c, msgs, 2, true, &len, &err);
    assert_non_null(text);
    const char want[] = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                        "<|im_start|>assistant\n";
    assert_string_equal(text, want);
    assert_int_equal(len, strlen(want));
    tg_model *m = load_model(MODEL);
    int32_t *ids = NULL;
    size_t n = 0;
    assert_true(tg_chat_tokenize(c, m, text, len, &ids, &n, &err));
    assert_true(n > 5);
    free(ids);
    tg_model_free(m);
    free(text);
    /* invalid UTF-8 content, a missing role */
    const tg_chat_message bad[] = {{"user", "\xff\xfe"}};
    assert_null(tg_chat_render(c, bad, 1, true, &len, &err));
    assert_non_null(strstr(err.msg, "UTF-8"));
    const tg_chat_message none[] = {{NULL, "x"}};
    assert_null(tg_chat_render(c, none, 1, true, &len, &err));
    tg_chat_free(c);

    memset(&err, 0, sizeof err);
    assert_null(tg_chat_open(MODEL, "no-such-template", &err));
    assert_non_null(strstr(err.msg, "chatml"));
    memset(&err, 0, sizeof err);
    assert_null(tg_chat_open("tests/data/no-such-model.gguf", NULL, &err));
    assert_true(err.msg[0] != '\0');
    tg_chat_free(NULL);
}

/* Every constructor that fails says why through tg_error. */
static void test_constructors_report(void **state) {
    (void)state;
    tg_error err;
    memset(&err, 0, sizeof err);
    assert_null(tg_model_load("tests/data/no-such-model.gguf", &err));
    assert_true(err.msg[0] != '\0');
    memset(&err, 0, sizeof err);
    assert_null(tg_model_load_for("tests/data/no-such-model.gguf", TG_NEED_TOKENIZER, &err));
    assert_true(err.msg[0] != '\0');
    memset(&err, 0, sizeof err);
    assert_null(tg_session_new(NULL, NULL, 1, &err));
    assert_true(err.msg[0] != '\0');
    memset(&err, 0, sizeof err);
    assert_null(tg_detok_new(NULL, &err));
    assert_true(err.msg[0] != '\0');
    memset(&err, 0, sizeof err);
    tg_sampler_params sp = tg_sampler_default_params();
    sp.top_p = 2;
    assert_null(tg_sampler_new(&sp, 100, &err));
    assert_true(err.msg[0] != '\0');
    memset(&err, 0, sizeof err);
    tg_model *m = load_model(MODEL);
    tg_cache_params p = tg_cache_default_params();
    p.sink = 4; /* without a window */
    assert_null(tg_session_new(m, &p, 1, &err));
    assert_int_equal(err.code, TG_ERR_CACHE_SINK_WITHOUT_WINDOW);
    tg_model_free(m);
    /* NULL handles are no-ops */
    tg_session_reset(NULL);
    tg_session_set_abort(NULL, NULL, NULL);
    assert_false(tg_session_aborted(NULL));
    assert_string_equal(tg_version(), TG_VERSION_STRING);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reset_gives_fresh_results),
        cmocka_unit_test(test_abort_between_chunks),
        cmocka_unit_test(test_generate),
        cmocka_unit_test(test_sampled_run_repeats_after_resets),
        cmocka_unit_test(test_chat),
        cmocka_unit_test(test_constructors_report),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
