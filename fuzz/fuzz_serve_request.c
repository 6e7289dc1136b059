/* fuzz_serve_request.c — libFuzzer harness for the server's request bodies (src/serve/request.c) and the answers
 * built from them (src/serve/openai.c). The input is a POST body; it is parsed as a completion and as a chat request.
 * Checked: a refusal is a 400 with a message and the invalid_request_error type (or a 500 only for memory); an
 * accepted request's fields are in range (max_tokens >= 0, at most TG_SERVE_MAX_STOPS non-empty stops, sampling
 * settings in their ranges, n = 1); its prompt / message texts go into OpenAI bodies that are valid JSON whatever
 * bytes they hold. */
#include "fuzz_common.h"

#include <jansson.h>
#include <math.h>

#include "serve/openai.h"
#include "serve/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An OpenAI body built around text must parse back as JSON. */
static void check_bodies(tg_serve_kind kind, const char *text, size_t len) {
    const tg_oai_meta m = {kind, "id-1", "tiny", 1};
    const tg_oai_usage u = {1, 2};
    char *a = tg_oai_response(&m, text, len, "stop", &u);
    char *b = tg_oai_chunk(&m, text, len, NULL, 1);
    tg_serve_error e;
    tg_serve_fail(&e, 400, "invalid_request_error", NULL, "%.*s", (int)(len < 200 ? len : 200), text);
    char *c = tg_oai_error(&e);
    char *all[3] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        if (!all[i]) continue; /* out of memory */
        json_t *v = json_loads(all[i], 0, NULL);
        if (!v) abort();
        json_decref(v);
        free(all[i]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    for (int k = 0; k < 2; k++) {
        const tg_serve_kind kind = k ? TG_SERVE_CHAT : TG_SERVE_COMPLETION;
        tg_serve_request r;
        tg_serve_error e = {0};
        if (!tg_serve_request_parse((const char *)data, size, kind, &r, &e)) {
            if (!(e.status == 400 && e.message[0] && strcmp(e.type, "invalid_request_error") == 0) &&
                e.status != 500)
                abort();
            tg_serve_request_free(&r);
            continue;
        }
        if (r.max_tokens < 0 || r.n_stops > TG_SERVE_MAX_STOPS) abort();
        for (size_t i = 0; i < r.n_stops; i++)
            if (!r.stops[i] || !r.stops[i][0]) abort();
        if (!(r.sp.temperature >= 0 && r.sp.top_p >= 0 && r.sp.top_p <= 1 && r.sp.min_p >= 0 && r.sp.min_p <= 1 &&
              r.sp.top_k >= 0 && isfinite(r.sp.temperature)))
            abort();
        if (kind == TG_SERVE_COMPLETION) {
            check_bodies(kind, r.prompt, r.prompt_len);
        } else {
            for (size_t i = 0; i < json_array_size(r.messages); i++) {
                json_t *content = json_object_get(json_array_get(r.messages, i), "content");
                if (!json_is_string(content)) abort();
                check_bodies(kind, json_string_value(content), json_string_length(content));
            }
        }
        tg_serve_request_free(&r);
    }
    return 0;
}
