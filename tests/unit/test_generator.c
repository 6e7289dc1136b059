/* test_generator.c — the generation step (tg_generator, src/generate/generator.c) driven by hand-made logits, so
 * that every sampled id is known: the text equals the detokeniser's; a stop string split over several tokens ends
 * the text exactly before it and nothing of it is handed out, also past the step that completed it; text that might
 * start a stop string is held back and released at the end; end-of-turn ids (the model's EOS, a chat template's
 * markers from tg_chat_end_ids) end a generation without being handed out unless ignore_eos; the abort callback,
 * max_tokens, unpickable logits and the prompt's echo. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tinygpt.h"

static const char MODEL[] = "tests/data/fixtures/smollm2";
static const char TEXT[] = "Once upon a time there was a little girl";

typedef struct {
    tg_model *model;
    tg_sampler *sampler; /* greedy: the argmax of the one-hot logits below */
    float *logits;       /* [vocab] */
    int32_t vocab;
    int32_t *ids;        /* [n] TEXT's ids */
    size_t n;
    int32_t bos;         /* the prompt: one token */
    char expect[256];    /* TEXT as the detokeniser gives it after the prompt */
    size_t expect_len;
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    tg_error err = {0};
    f->model = tg_model_load(MODEL, &err);
    if (!f->model) fail_msg("%s", err.msg);
    f->vocab = tg_vocab_size(f->model);
    tg_sampler_params sp = tg_sampler_default_params();
    sp.temperature = 0;
    f->sampler = tg_sampler_new(&sp, f->vocab, &err);
    f->logits = malloc((size_t)f->vocab * sizeof *f->logits);
    assert_non_null(f->sampler);
    assert_non_null(f->logits);
    assert_true(tg_tokenize(f->model, TEXT, strlen(TEXT), false, &f->ids, &f->n, &err));
    assert_true(f->n >= 6);
    f->bos = f->ids[0]; /* any id does as the prompt */
    tg_detok *d = tg_detok_new(f->model, &err);
    assert_non_null(d);
    tg_detok_skip_prompt(d, &f->bos, 1);
    for (size_t i = 0; i < f->n; i++) {
        const char *t;
        size_t l;
        tg_detok_push(d, f->ids[i], &t, &l);
        assert_true(f->expect_len + l < sizeof f->expect);
        memcpy(f->expect + f->expect_len, t, l);
        f->expect_len += l;
    }
    tg_detok_free(d);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    tg_sampler_free(f->sampler);
    tg_model_free(f->model);
    free(f->logits);
    free(f->ids);
    free(f);
    return 0;
}

/* Logits whose argmax is id. */
static const float *one_hot(fixture *f, int32_t id) {
    for (int32_t i = 0; i < f->vocab; i++) f->logits[i] = 0.0f;
    f->logits[id] = 10.0f;
    return f->logits;
}

/* The outcome of a generation: the text of every step and of the end, the stop of each step. */
typedef struct {
    char text[512];
    size_t len;
    size_t steps_len;         /* the bytes the steps handed out, before tg_generator_finish */
    tg_gen_stop stops[64];    /* [n_steps] */
    int32_t handed[64];
    int n_steps;
    tg_gen_stop end;          /* tg_generator_finish's */
} outcome;

static void add(outcome *o, const tg_gen_token *t) {
    assert_true(o->len + t->len < sizeof o->text);
    memcpy(o->text + o->len, t->text, t->len);
    o->len += t->len;
}

/* Starts g after the prompt and steps through ids[n] (one step each, evaluating nothing), then finishes. */
static void drive(fixture *f, tg_generator *g, const int32_t *ids, size_t n, outcome *o) {
    memset(o, 0, sizeof *o);
    tg_error err = {0};
    assert_true(tg_generator_start(g, &f->bos, 1, false, NULL, NULL, &err));
    for (size_t i = 0; i < n; i++) {
        tg_gen_token t;
        assert_true(tg_generator_step(g, one_hot(f, ids[i]), &t, &err));
        o->stops[o->n_steps] = t.stop;
        o->handed[o->n_steps++] = t.id;
        add(o, &t);
    }
    o->steps_len = o->len;
    tg_gen_token t;
    assert_true(tg_generator_finish(g, &t, &err));
    assert_int_equal(t.id, -1);
    o->end = t.stop;
    add(o, &t);
}

static tg_generator *make(fixture *f, const tg_generator_params *p) {
    tg_error err = {0};
    tg_generator *g = tg_generator_new(f->model, f->sampler, p, &err);
    if (!g) fail_msg("%s", err.msg);
    return g;
}

static void test_plain_text(void **state) {
    fixture *f = *state;
    tg_generator_params p = tg_generator_default_params();
    tg_generator *g = make(f, &p);
    outcome o;
    drive(f, g, f->ids, f->n, &o);
    assert_int_equal(o.len, f->expect_len);
    assert_memory_equal(o.text, f->expect, f->expect_len);
    for (int i = 0; i < o.n_steps; i++) {
        assert_int_equal(o.stops[i], TG_GEN_GOING);
        assert_int_equal(o.handed[i], f->ids[i]);
    }
    assert_int_equal(tg_generator_count(g), (int64_t)f->n);
    /* echo: the prompt's text comes first, and a generator runs a second generation from the start */
    const char *text = NULL;
    size_t len = 0;
    tg_error err = {0};
    assert_true(tg_generator_start(g, f->ids, 2, true, &text, &len, &err));
    assert_true(len > 0 && len < f->expect_len);
    assert_memory_equal(text, f->expect, len); /* the text of TEXT's first two tokens */
    assert_int_equal(tg_generator_count(g), 0);
    tg_generator_free(g);
}

/* A stop string that starts inside one token and ends inside a later one. */
static void test_stop_string_across_tokens(void **state) {
    fixture *f = *state;
    const char *stop = "e there wa";
    const char *at = strstr(f->expect, stop);
    assert_non_null(at);
    const size_t cut = (size_t)(at - f->expect);
    const char *stops[] = {"never appears", stop};
    tg_generator_params p = tg_generator_default_params();
    p.stops = stops;
    p.n_stops = 2;
    tg_generator *g = make(f, &p);
    outcome o;
    drive(f, g, f->ids, f->n, &o);
    assert_int_equal(o.len, cut);
    assert_memory_equal(o.text, f->expect, cut);
    assert_int_equal(o.steps_len, cut); /* all of it from the steps: nothing held back at the end */
    int hit = -1;
    for (int i = 0; i < o.n_steps && hit < 0; i++)
        if (o.stops[i] == TG_GEN_STOP_STRING) hit = i;
    assert_true(hit > 0);
    assert_int_equal(o.handed[hit], f->ids[hit]); /* the token that completed it is handed out (not its text) */
    for (int i = 0; i < hit; i++) assert_int_equal(o.stops[i], TG_GEN_GOING);
    for (int i = hit + 1; i < o.n_steps; i++) { /* after the end, a step hands out nothing */
        assert_int_equal(o.stops[i], TG_GEN_STOP_STRING);
        assert_int_equal(o.handed[i], -1);
    }
    assert_int_equal(o.end, TG_GEN_STOP_STRING);
    assert_int_equal(tg_generator_count(g), hit + 1);
    tg_generator_free(g);
}

/* The text ends with the start of a stop string: held back while it might complete, released by the end. */
static void test_held_back_released_at_end(void **state) {
    fixture *f = *state;
    const char *stops[] = {"girlfriend"}; /* TEXT ends with "girl" */
    tg_generator_params p = tg_generator_default_params();
    p.stops = stops;
    p.n_stops = 1;
    p.max_tokens = (int64_t)f->n;
    tg_generator *g = make(f, &p);
    outcome o;
    drive(f, g, f->ids, f->n, &o);
    assert_int_equal(o.stops[o.n_steps - 1], TG_GEN_MAX_TOKENS);
    assert_int_equal(o.steps_len, f->expect_len - 4); /* "girl" held back */
    assert_int_equal(o.len, f->expect_len);
    assert_memory_equal(o.text, f->expect, f->expect_len);
    assert_int_equal(o.end, TG_GEN_MAX_TOKENS);
    tg_generator_free(g);
}

static void test_end_ids(void **state) {
    fixture *f = *state;
    tg_error err = {0};
    tg_chat *chat = tg_chat_open(MODEL, "chatml", &err);
    assert_non_null(chat);
    int32_t end[8];
    const size_t n_end = tg_chat_end_ids(chat, f->model, end, 8);
    tg_chat_free(chat);
    int32_t im_end = -1;
    for (size_t i = 0; i < n_end; i++)
        if (!tg_token_is_eos(f->model, end[i])) im_end = end[i];
    int32_t *tok = NULL;
    size_t n_tok = 0;
    assert_true(tg_tokenize(f->model, "<|im_end|>", 10, false, &tok, &n_tok, &err));
    assert_int_equal(n_tok, 1);
    if (im_end < 0) im_end = tok[0]; /* <|im_end|> is EOS itself: it ends a reply anyway */
    assert_int_equal(im_end, tok[0]);
    free(tok);

    tg_generator_params p = tg_generator_default_params();
    p.end_ids = &im_end;
    p.n_end_ids = 1;
    tg_generator *g = make(f, &p);
    const int32_t ids[] = {f->ids[0], f->ids[1], im_end, f->ids[2]};
    outcome o;
    drive(f, g, ids, 4, &o);
    assert_int_equal(o.stops[0], TG_GEN_GOING);
    assert_int_equal(o.stops[2], TG_GEN_END);
    assert_int_equal(o.handed[2], -1);
    assert_int_equal(o.handed[3], -1);
    assert_int_equal(tg_generator_count(g), 2);
    assert_null(memchr(o.text, '<', o.len));
    tg_generator_free(g);

    /* the model's EOS ends a generation; with ignore_eos it is handed out like any token */
    const int32_t eos = tg_token_eos(f->model);
    assert_true(eos >= 0);
    const int32_t with_eos[] = {f->ids[0], eos, f->ids[1]};
    p = tg_generator_default_params();
    g = make(f, &p);
    drive(f, g, with_eos, 3, &o);
    assert_int_equal(o.stops[1], TG_GEN_END);
    assert_int_equal(o.end, TG_GEN_END);
    tg_generator_free(g);
    p.ignore_eos = true;
    g = make(f, &p);
    drive(f, g, with_eos, 3, &o);
    assert_int_equal(o.stops[1], TG_GEN_GOING);
    assert_int_equal(o.handed[1], eos);
    assert_int_equal(tg_generator_count(g), 3);
    tg_generator_free(g);
}

static bool abort_on_third(void *user) {
    int *calls = user;
    return ++*calls >= 3;
}

static void test_abort_and_max_tokens(void **state) {
    fixture *f = *state;
    int calls = 0;
    tg_generator_params p = tg_generator_default_params();
    p.abort = abort_on_third;
    p.abort_user = &calls;
    tg_generator *g = make(f, &p);
    outcome o;
    drive(f, g, f->ids, 5, &o);
    assert_int_equal(o.stops[1], TG_GEN_GOING);
    assert_int_equal(o.stops[2], TG_GEN_ABORTED); /* asked after each handed-out token */
    assert_int_equal(o.handed[2], f->ids[2]);
    assert_int_equal(o.handed[3], -1);
    assert_int_equal(calls, 3);
    assert_int_equal(o.end, TG_GEN_ABORTED);
    tg_generator_free(g);

    p = tg_generator_default_params();
    p.max_tokens = 3;
    g = make(f, &p);
    drive(f, g, f->ids, 5, &o);
    assert_int_equal(o.stops[1], TG_GEN_GOING);
    assert_int_equal(o.stops[2], TG_GEN_MAX_TOKENS);
    assert_int_equal(o.handed[3], -1);
    assert_int_equal(tg_generator_count(g), 3);
    tg_generator_free(g);
}

static void test_errors(void **state) {
    fixture *f = *state;
    tg_generator_params p = tg_generator_default_params();
    tg_generator *g = make(f, &p);
    tg_error err = {0};
    assert_true(tg_generator_start(g, &f->bos, 1, false, NULL, NULL, &err));
    for (int32_t i = 0; i < f->vocab; i++) f->logits[i] = -INFINITY;
    tg_gen_token t;
    assert_false(tg_generator_step(g, f->logits, &t, &err));
    assert_non_null(strstr(err.msg, "no finite logits"));
    tg_generator_free(g);
    tg_generator_free(NULL);
    p.max_tokens = -1;
    assert_null(tg_generator_new(f->model, f->sampler, &p, &err));
    assert_null(tg_generator_new(f->model, NULL, &p, &err));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_text),       cmocka_unit_test(test_stop_string_across_tokens),
        cmocka_unit_test(test_held_back_released_at_end), cmocka_unit_test(test_end_ids),
        cmocka_unit_test(test_abort_and_max_tokens), cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
