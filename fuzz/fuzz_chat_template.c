/* fuzz_chat_template.c — libFuzzer harness for the chat-template engine (src/chat/): the input is a template
 * source, optionally followed by FUZZ_SEP and a JSON document — an array is the messages, an object the whole set
 * of render variables; anything else (or no second part) renders a fixed three-turn conversation. The template is
 * compiled with tighter limits than the defaults (so that one input stays fast) and rendered with and without
 * add_generation_prompt. Checks: a failure leaves a one-line message; a success returns NUL-terminated, valid
 * UTF-8 text within the output limit; and (when fuzzing, not when tests/unit replays the inputs) the budget is the
 * oracle for time: the render runs under a deadline of BUDGET_S seconds beside its 2,000,000 units of work, which take
 * a small fraction of that, so a render that meets the deadline did work nobody charged, and one that takes more than
 * twice the deadline ran a stretch where the clock is never read. */
#include "fuzz_common.h"

#include <jansson.h>

#include "chat/chat_template.h"
#include "util/clock.h"

/* A render of at most 2,000,000 work units (128 MB of bytes scanned, or 16 MB decoded code point by code point) takes
 * about a second or less under the fuzzing build's instrumentation, and a few times that on a loaded machine (timing
 * is an oracle only while fuzzing: the replay in tests/unit renames LLVMFuzzerTestOneInput and renders without a
 * deadline). */
#define BUDGET_S 5.0

static const char CHAT_DEFAULT_MESSAGES[] =
    "[{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi \\u00e9\\n\"},"
    " {\"role\": \"assistant\", \"content\": \" Hello \"}, {\"role\": \"user\", \"content\": \"Bye\"}]";

static json_t *chat_vars(const uint8_t *data, size_t size, bool have) {
    json_t *doc = have ? json_loadb((const char *)data, size, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, NULL) : NULL;
    if (json_is_object(doc)) return doc;
    json_t *messages = json_is_array(doc) ? doc : json_loads(CHAT_DEFAULT_MESSAGES, 0, NULL);
    if (messages != doc) json_decref(doc);
    json_t *vars = json_object();
    json_object_set_new(vars, "messages", messages);
    json_object_set_new(vars, "tools", json_null());
    json_object_set_new(vars, "bos_token", json_string("<s>"));
    json_object_set_new(vars, "eos_token", json_string("</s>"));
    return vars;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *part[2];
    size_t len[2];
    size_t n = fuzz_split(data, size, part, len, 2);
    tg_chat_limits lim = tg_chat_default_limits();
    lim.max_output_bytes = (size_t)1 << 20;
    lim.max_memory_bytes = (size_t)64 << 20;
    lim.max_iterations = 100000;
    lim.max_work = 2000000;
#ifndef LLVMFuzzerTestOneInput /* fuzzing, not the replay */
    lim.max_seconds = BUDGET_S;
#else
    lim.max_seconds = 0;
#endif
    tg_error err = {0};
    tg_chat_template *t = tg_chat_template_compile((const char *)part[0], len[0], &lim, &err);
    if (!t) {
        fuzz_check_error(&err, "tg_chat_template_compile");
        return 0;
    }
    json_t *vars = chat_vars(part[1], len[1], n == 2);
    const tg_chat_clock clock = {.now = 1796119200, .utc = true};
    for (int agp = 0; agp < 2; agp++) {
        json_object_set_new(vars, "add_generation_prompt", json_boolean(agp));
        size_t out_len = 0;
        err.msg[0] = '\0';
        const double t0 = tg_monotonic_s();
        char *out = tg_chat_template_render(t, vars, &clock, &out_len, &err);
#ifndef LLVMFuzzerTestOneInput /* fuzzing, not the replay */
        const double took = tg_monotonic_s() - t0;
        if (took > 2 * BUDGET_S)
            fuzz_die("tg_chat_template_render", "a render ran past twice its deadline (a stretch without the clock)");
        /* the deadline's message, and the time to go with it (a template's raise_exception may say the same words) */
        if (!out && took >= BUDGET_S && strstr(err.msg, "to render (the limit)"))
            fuzz_die("tg_chat_template_render", "2,000,000 units of work met the deadline (uncharged work)");
#else
        (void)t0;
#endif
        if (!out) {
            fuzz_check_error(&err, "tg_chat_template_render");
            continue;
        }
        if (out[out_len] != '\0') fuzz_die("tg_chat_template_render", "output not NUL-terminated");
        if (out_len > lim.max_output_bytes) fuzz_die("tg_chat_template_render", "output over the limit");
        if (!fuzz_utf8_valid((const uint8_t *)out, out_len)) fuzz_die("tg_chat_template_render", "invalid UTF-8");
        free(out);
    }
    json_decref(vars);
    tg_chat_template_free(t);
    return 0;
}
