/* test_serve_parts.c — the server's pure parts without HTTP: the budget and queue accounting (serve/admission.c), the
 * request parser's fields, defaults and refusals (serve/request.c), and OpenAI's bodies (serve/openai.c). The HTTP
 * server itself is tested end to end by tests/cli/test_serve.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "serve/admission.h"
#include "serve/openai.h"
#include "serve/request.h"
#include "serve/watchdog.h"

#include <sys/socket.h>
#include <unistd.h>

static void test_admission_budget_queue_fifo(void **state) {
    (void)state;
    tg_admission a = {.budget = 100, .max_active = 3, .queue_cap = 2};
    assert_int_equal(tg_admission_offer(&a, 60), TG_ADMIT_NOW);
    assert_int_equal(a.used, 60);
    assert_int_equal(tg_admission_offer(&a, 50), TG_ADMIT_QUEUE); /* 110 > 100 */
    /* a small one that would fit still waits behind the queued one (FIFO) */
    assert_int_equal(tg_admission_offer(&a, 10), TG_ADMIT_QUEUE);
    assert_int_equal(tg_admission_offer(&a, 1), TG_ADMIT_FULL);
    assert_int_equal(a.queued, 2);
    assert_false(tg_admission_take(&a, 50));
    tg_admission_release(&a, 60);
    assert_int_equal(a.used, 0);
    assert_true(tg_admission_take(&a, 50));
    assert_true(tg_admission_take(&a, 10));
    assert_int_equal(a.queued, 0);
    assert_int_equal(a.active, 2);
    assert_int_equal(a.used, 60);
    /* the session limit binds as well as the bytes */
    assert_int_equal(tg_admission_offer(&a, 1), TG_ADMIT_NOW);
    assert_int_equal(tg_admission_offer(&a, 1), TG_ADMIT_QUEUE);
    tg_admission_leave_queue(&a);
    assert_int_equal(a.queued, 0);
    assert_true(a.used <= a.budget);
}

static tg_serve_request parse_ok(const char *body, tg_serve_kind kind) {
    tg_serve_request r;
    tg_serve_error e = {0};
    if (!tg_serve_request_parse(body, strlen(body), kind, &r, &e)) fail_msg("%s: %s", body, e.message);
    return r;
}

/* The prompt budget of a step is shared: a short prompt beside a huge one is prefilled in its first step, the
 * remainder goes round, no session gets more than it wants, and the budget is spent while anyone wants it. */
static void test_prefill_share_fair(void **state) {
    (void)state;
    int64_t give[4];
    const int64_t huge_short[2] = {64, 5}; /* a 1M-token prompt wants a whole chunk; a 5-token prompt wants 5 */
    tg_prefill_share(huge_short, 2, 64, 0, give);
    assert_int_equal(give[0], 59);
    assert_int_equal(give[1], 5);
    tg_prefill_share(huge_short, 2, 64, 1, give); /* whichever goes first */
    assert_int_equal(give[0], 59);
    assert_int_equal(give[1], 5);
    const int64_t three_big[3] = {64, 64, 64};
    tg_prefill_share(three_big, 3, 64, 0, give); /* 21 each, the remainder from the start */
    assert_int_equal(give[0], 22);
    assert_int_equal(give[1], 21);
    assert_int_equal(give[2], 21);
    tg_prefill_share(three_big, 3, 64, 2, give);
    assert_int_equal(give[0], 21);
    assert_int_equal(give[2], 22);
    const int64_t many[4] = {9, 9, 9, 9};
    int64_t got[4] = {0};
    for (int64_t step = 0; step < 4; step++) { /* a budget of 2 over 4 sessions: the turn goes round */
        tg_prefill_share(many, 4, 2, step * 2, give);
        for (int i = 0; i < 4; i++) got[i] += give[i];
    }
    for (int i = 0; i < 4; i++) assert_int_equal(got[i], 2);
    const int64_t small[3] = {1, 0, 2}; /* less wanted than the budget: everyone gets all */
    tg_prefill_share(small, 3, 64, 0, give);
    assert_int_equal(give[0], 1);
    assert_int_equal(give[1], 0);
    assert_int_equal(give[2], 2);
    tg_prefill_share(small, 0, 64, 0, give); /* nobody prefilling */
}

/* At most max_n bodies at once within the byte budget, but one body alone always gets in. */
static void test_prep_bounds(void **state) {
    (void)state;
    tg_prep p = {.budget = 100, .max_n = 2};
    assert_true(tg_prep_take(&p, 500)); /* alone: in, though over the budget */
    assert_false(tg_prep_take(&p, 1));
    tg_prep_give(&p, 500);
    assert_true(tg_prep_take(&p, 60));
    assert_false(tg_prep_take(&p, 50)); /* 110 > 100 */
    assert_true(tg_prep_take(&p, 40));
    assert_false(tg_prep_take(&p, 0)); /* max_n */
    tg_prep_give(&p, 60);
    tg_prep_give(&p, 40);
    assert_int_equal(p.n, 0);
    assert_int_equal(p.used, 0);
}

/* A connection that does not deliver its request in time has its socket shut down (the peer reads the end of the
 * stream: an event, not a sleep); one whose request is in is left alone while answered, and is due again once
 * answered. */
static void test_watchdog_shuts_late_sockets(void **state) {
    (void)state;
    tg_watchdog *w = tg_watchdog_start(0.05);
    assert_non_null(w);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    tg_watch *c = tg_watchdog_add(w, sv[0]);
    assert_non_null(c);
    char byte;
    assert_int_equal(read(sv[1], &byte, 1), 0); /* blocks until the watchdog shuts sv[0] down */
    tg_watchdog_forget(w, c);
    close(sv[0]);
    close(sv[1]);
    /* in, answered, then late again */
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    c = tg_watchdog_add(w, sv[0]);
    tg_watchdog_request_read(w, c);
    assert_int_equal(write(sv[0], "x", 1), 1); /* the answer goes out: the socket is still open */
    assert_int_equal(read(sv[1], &byte, 1), 1);
    tg_watchdog_answered(w, c);
    assert_int_equal(read(sv[1], &byte, 1), 0);
    tg_watchdog_forget(w, c);
    tg_watchdog_forget(w, NULL);
    close(sv[0]);
    close(sv[1]);
    tg_watchdog_stop(w);
    tg_watchdog_stop(NULL);
}

static void test_request_fields_and_defaults(void **state) {
    (void)state;
    tg_serve_request r = parse_ok("{\"prompt\": \"hi\"}", TG_SERVE_COMPLETION);
    assert_string_equal(r.prompt, "hi");
    assert_true(r.sp.temperature == 1.0f && r.sp.top_p == 1.0f && r.sp.top_k == 0 && r.sp.min_p == 0.0f);
    assert_int_equal(r.max_tokens, 0);
    assert_false(r.stream || r.seed_given || r.has_kv_quantize);
    assert_true(r.cache_prompt); /* llama-server's default */
    assert_int_equal(r.kv_window, -1);
    tg_serve_request_free(&r);
    r = parse_ok("{\"prompt\": \"hi\", \"cache_prompt\": false}", TG_SERVE_COMPLETION);
    assert_false(r.cache_prompt);
    tg_serve_request_free(&r);
    r = parse_ok("{\"model\": \"m\", \"prompt\": [\"one\"], \"max_tokens\": 7, \"temperature\": 0, \"top_p\": 0.5, "
                 "\"seed\": 42, \"stop\": [\"a\", \"bc\"], \"stream\": true, \"stream_options\": {\"include_usage\": "
                 "true}, \"ignore_eos\": true, \"top_k\": 3, \"min_p\": 0.1, \"kv_quantize\": \"int4\", "
                 "\"streaming_llm_window\": 64, \"streaming_llm_sink\": 2, \"user\": \"ignored\"}",
                 TG_SERVE_COMPLETION);
    assert_string_equal(r.model, "m");
    assert_string_equal(r.prompt, "one");
    assert_int_equal(r.max_tokens, 7);
    assert_true(r.sp.temperature == 0.0f && r.sp.top_p == 0.5f && r.sp.top_k == 3);
    assert_true(r.seed_given && r.sp.seed == 42);
    assert_int_equal(r.n_stops, 2);
    assert_string_equal(r.stops[1], "bc");
    assert_true(r.stream && r.include_usage && r.ignore_eos);
    assert_true(r.has_kv_quantize && r.kv_quantize == TG_KV_INT4);
    assert_int_equal(r.kv_window, 64);
    assert_int_equal(r.kv_sink, 2);
    tg_serve_request_free(&r);
    r = parse_ok("{\"prompt\": \"x\", \"n_predict\": -1}", TG_SERVE_COMPLETION);
    assert_int_equal(r.max_tokens, 0); /* the server's most */
    tg_serve_request_free(&r);
    r = parse_ok("{\"messages\": [{\"role\": \"system\", \"content\": null}, {\"role\": \"user\", \"content\": "
                 "[{\"type\": \"text\", \"text\": \"ab\"}, {\"type\": \"text\", \"text\": \"cd\"}]}]}",
                 TG_SERVE_CHAT);
    assert_int_equal(json_array_size(r.messages), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(r.messages, 1), "content")), "abcd");
    assert_string_equal(json_string_value(json_object_get(json_array_get(r.messages, 0), "content")), "");
    tg_serve_request_free(&r);
    /* the "off" values of the fields this server does not do are taken */
    r = parse_ok("{\"logit_bias\": {}, \"logprobs\": false, \"top_logprobs\": 0}", TG_SERVE_COMPLETION);
    tg_serve_request_free(&r);
    r = parse_ok("{\"logit_bias\": null, \"logprobs\": 0}", TG_SERVE_COMPLETION);
    tg_serve_request_free(&r);
}

static void test_request_refusals(void **state) {
    (void)state;
    static const struct {
        tg_serve_kind kind;
        const char *body, *param;
    } cases[] = {
        {TG_SERVE_COMPLETION, "{\"prompt\": ", NULL},
        {TG_SERVE_COMPLETION, "7", NULL},
        {TG_SERVE_COMPLETION, "{\"a\": 1, \"a\": 2}", NULL},
        {TG_SERVE_COMPLETION, "{\"prompt\": [1, 2]}", "prompt"},
        {TG_SERVE_COMPLETION, "{\"model\": 3}", "model"},
        {TG_SERVE_COMPLETION, "{\"temperature\": -1}", "temperature"},
        {TG_SERVE_COMPLETION, "{\"top_p\": 1.5}", "top_p"},
        {TG_SERVE_COMPLETION, "{\"min_p\": \"a\"}", "min_p"},
        {TG_SERVE_COMPLETION, "{\"top_k\": 1.5}", "top_k"},
        {TG_SERVE_COMPLETION, "{\"seed\": -1}", "seed"},
        {TG_SERVE_COMPLETION, "{\"max_tokens\": 0}", "max_tokens"},
        {TG_SERVE_COMPLETION, "{\"max_tokens\": \"5\"}", "max_tokens"},
        {TG_SERVE_COMPLETION, "{\"max_completion_tokens\": -2}", "max_completion_tokens"},
        {TG_SERVE_COMPLETION, "{\"n_predict\": -2}", "n_predict"},
        {TG_SERVE_COMPLETION, "{\"n\": 3}", "n"},
        {TG_SERVE_COMPLETION, "{\"stream\": 1}", "stream"},
        {TG_SERVE_COMPLETION, "{\"ignore_eos\": \"yes\"}", "ignore_eos"},
        {TG_SERVE_COMPLETION, "{\"stop\": \"\"}", "stop"},
        {TG_SERVE_COMPLETION, "{\"stop\": {}}", "stop"},
        {TG_SERVE_COMPLETION, "{\"stream_options\": 1}", "stream_options"},
        {TG_SERVE_COMPLETION, "{\"kv_quantize\": \"int3\"}", "kv_quantize"},
        {TG_SERVE_COMPLETION, "{\"streaming_llm_window\": 0}", "streaming_llm_window"},
        {TG_SERVE_COMPLETION, "{\"streaming_llm_sink\": -1}", "streaming_llm_sink"},
        {TG_SERVE_COMPLETION, "{\"logit_bias\": {\"5\": -100}}", "logit_bias"},
        {TG_SERVE_COMPLETION, "{\"logit_bias\": 3}", "logit_bias"},
        {TG_SERVE_COMPLETION, "{\"logprobs\": 2}", "logprobs"},
        {TG_SERVE_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"logprobs\": true}", "logprobs"},
        {TG_SERVE_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"top_logprobs\": 3}",
         "top_logprobs"},
        {TG_SERVE_CHAT, "{}", "messages"},
        {TG_SERVE_CHAT, "{\"messages\": []}", "messages"},
        {TG_SERVE_CHAT, "{\"messages\": [{\"content\": \"x\"}]}", "messages"},
        {TG_SERVE_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": 5}]}", "messages"},
        {TG_SERVE_CHAT, "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image\"}]}]}", "messages"},
    };
    /* a body of more JSON values than TG_SERVE_MAX_JSON_VALUES is refused before parsing; commas and brackets in
     * strings do not count */
    const size_t n_items = TG_SERVE_MAX_JSON_VALUES;
    char *big = malloc(n_items * 3 + 64);
    assert_non_null(big);
    size_t at = (size_t)sprintf(big, "{\"prompt\": \"x\", \"a\": [");
    for (size_t i = 0; i < n_items; i++) at += (size_t)sprintf(big + at, "%s{}", i ? "," : "");
    strcpy(big + at, "]}");
    tg_serve_request r0;
    tg_serve_error e0 = {0};
    assert_false(tg_serve_request_parse(big, strlen(big), TG_SERVE_COMPLETION, &r0, &e0));
    assert_int_equal(e0.status, 400);
    assert_non_null(strstr(e0.message, "JSON values"));
    tg_serve_request_free(&r0);
    at = (size_t)sprintf(big, "{\"prompt\": \"");
    for (size_t i = 0; i < n_items; i++) at += (size_t)sprintf(big + at, "[,{");
    strcpy(big + at, "\\\"\"}");
    r0 = parse_ok(big, TG_SERVE_COMPLETION);
    assert_int_equal(r0.prompt_len, n_items * 3 + 1);
    tg_serve_request_free(&r0);
    /* the server counts a body as its pieces arrive: any cut (an escape split from its character included) gives
     * the count of the whole */
    static const char pieces[] = "{\"a\": [1, {}, \"x,\\\",[{\"], \"b\": [[], {\"c\": \"\\\\\"}, 3]}";
    tg_json_count whole = {1, false, false};
    tg_json_count_feed(&whole, pieces, strlen(pieces));
    assert_int_equal(whole.values, 12);
    for (size_t cut = 0; cut <= strlen(pieces); cut++) {
        tg_json_count c = {1, false, false};
        tg_json_count_feed(&c, pieces, cut);
        tg_json_count_feed(&c, pieces + cut, strlen(pieces) - cut);
        assert_int_equal(c.values, whole.values);
    }
    free(big);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_serve_request r;
        tg_serve_error e = {0};
        if (tg_serve_request_parse(cases[i].body, strlen(cases[i].body), cases[i].kind, &r, &e))
            fail_msg("accepted: %s", cases[i].body);
        assert_int_equal(e.status, 400);
        assert_string_equal(e.type, "invalid_request_error");
        assert_true(e.message[0] != '\0');
        if (cases[i].param) {
            if (!e.param || strcmp(e.param, cases[i].param) != 0)
                fail_msg("%s: param %s, want %s", cases[i].body, e.param ? e.param : "(none)", cases[i].param);
        } else {
            assert_null(e.param);
        }
        tg_serve_request_free(&r);
    }
}

static void test_openai_bodies(void **state) {
    (void)state;
    tg_serve_error e;
    tg_serve_fail(&e, 400, "invalid_request_error", "max_tokens", "bad %d", 5);
    char *s = tg_oai_error(&e);
    assert_string_equal(s, "{\"error\":{\"message\":\"bad 5\",\"type\":\"invalid_request_error\","
                           "\"param\":\"max_tokens\",\"code\":null}}");
    free(s);
    const tg_oai_meta m = {TG_SERVE_CHAT, "chatcmpl-1", "tiny", 1};
    s = tg_oai_chunk(&m, "a\xff" "b", 3, NULL, 1); /* an invalid byte becomes U+FFFD */
    json_t *v = json_loads(s, 0, NULL);
    assert_non_null(v);
    json_t *delta = json_object_get(json_array_get(json_object_get(v, "choices"), 0), "delta");
    assert_string_equal(json_string_value(json_object_get(delta, "content")), "a\xEF\xBF\xBD" "b");
    assert_string_equal(json_string_value(json_object_get(delta, "role")), "assistant");
    assert_string_equal(json_string_value(json_object_get(v, "object")), "chat.completion.chunk");
    json_decref(v);
    free(s);
    const tg_oai_usage u = {10, 4, 7, 0.5};
    const tg_oai_meta mc = {TG_SERVE_COMPLETION, "cmpl-1", "tiny", 1};
    s = tg_oai_response(&mc, "xyz", 3, "length", &u);
    v = json_loads(s, 0, NULL);
    json_t *usage = json_object_get(v, "usage"), *timings = json_object_get(v, "timings");
    assert_int_equal(json_integer_value(json_object_get(usage, "total_tokens")), 14);
    /* OpenAI's cached prompt tokens and llama-server's counts: 7 reused, 3 prefilled, 4 generated */
    assert_int_equal(json_integer_value(json_object_get(json_object_get(usage, "prompt_tokens_details"),
                                                        "cached_tokens")), 7);
    assert_int_equal(json_integer_value(json_object_get(timings, "cache_n")), 7);
    assert_int_equal(json_integer_value(json_object_get(timings, "prompt_n")), 3);
    assert_int_equal(json_integer_value(json_object_get(timings, "predicted_n")), 4);
    assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(v, "choices"), 0), "text")),
                        "xyz");
    json_decref(v);
    free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_admission_budget_queue_fifo),
        cmocka_unit_test(test_prefill_share_fair),
        cmocka_unit_test(test_prep_bounds),
        cmocka_unit_test(test_watchdog_shuts_late_sockets),
        cmocka_unit_test(test_request_fields_and_defaults),
        cmocka_unit_test(test_request_refusals),
        cmocka_unit_test(test_openai_bodies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
