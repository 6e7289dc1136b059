/* openai.c — OpenAI's response objects built with jansson (openai.h). */
#include "serve/openai.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>


/* The length (1..4) of the well-formed UTF-8 character at s[0..n) (n > 0), or 0: a bad lead or continuation byte,
 * an overlong form, a surrogate, beyond U+10FFFF, or cut short. */
static size_t utf8_char(const unsigned char *s, size_t n) {
    const unsigned c = s[0];
    size_t len;
    unsigned cp;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
    else return 0;
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
        return 0;
    return len;
}

/* text[len] as a JSON string, each invalid UTF-8 byte replaced by U+FFFD. NULL when memory runs out. */
static json_t *text_value(const char *text, size_t len) {
    json_t *s = json_stringn(text ? text : "", text ? len : 0);
    if (s || !text) return s;
    char *clean = malloc(len * 3 + 1);
    if (!clean) return NULL;
    size_t out = 0;
    for (size_t i = 0; i < len;) {
        const size_t n = utf8_char((const unsigned char *)text + i, len - i);
        if (n == 0) {
            memcpy(clean + out, "\xEF\xBF\xBD", 3);
            out += 3;
            i++;
        } else {
            memcpy(clean + out, text + i, n);
            out += n;
            i += n;
        }
    }
    s = json_stringn(clean, out);
    free(clean);
    return s;
}

static char *dump(json_t *v) {
    if (!v) return NULL;
    char *s = json_dumps(v, JSON_COMPACT);
    json_decref(v);
    return s;
}

static json_t *usage_value(const tg_oai_usage *u) {
    return json_pack("{s:I, s:I, s:I, s:{s:I}}", "prompt_tokens", (json_int_t)u->prompt_tokens, "completion_tokens",
                     (json_int_t)u->completion_tokens, "total_tokens",
                     (json_int_t)(u->prompt_tokens + u->completion_tokens), "prompt_tokens_details",
                     "cached_tokens", (json_int_t)u->cached_tokens);
}

/* llama-server's counts: prompt tokens reused from a cache, prompt tokens evaluated, tokens generated. */
static json_t *timings_value(const tg_oai_usage *u) {
    return json_pack("{s:I, s:I, s:I, s:f}", "cache_n", (json_int_t)u->cached_tokens, "prompt_n",
                     (json_int_t)(u->prompt_tokens - u->cached_tokens), "predicted_n",
                     (json_int_t)u->completion_tokens, "restore_ms", u->restore_ms);
}

char *tg_oai_error(const tg_serve_error *e) {
    json_t *param = e->param ? json_string(e->param) : json_null();
    json_t *code = e->code ? json_string(e->code) : json_null();
    return dump(json_pack("{s:{s:o, s:s, s:o, s:o}}", "error", "message", text_value(e->message, strlen(e->message)),
                          "type", e->type ? e->type : "server_error", "param", param, "code", code));
}

/* One choice: a completion's {"text"} or a chat's {"message"} / {"delta"}. */
static json_t *choice(const tg_oai_meta *m, const char *text, size_t len, const char *finish, bool stream,
                      int first_chat) {
    json_t *t = text_value(text, len);
    json_t *fr = finish ? json_string(finish) : json_null();
    if (m->kind == TG_SERVE_COMPLETION)
        return json_pack("{s:i, s:o, s:n, s:o}", "index", 0, "text", t, "logprobs", "finish_reason", fr);
    if (!stream)
        return json_pack("{s:i, s:{s:s, s:o}, s:n, s:o}", "index", 0, "message", "role", "assistant", "content", t,
                         "logprobs", "finish_reason", fr);
    json_t *delta = first_chat ? json_pack("{s:s, s:o}", "role", "assistant", "content", t)
                               : json_pack("{s:o}", "content", t);
    return json_pack("{s:i, s:o, s:n, s:o}", "index", 0, "delta", delta, "logprobs", "finish_reason", fr);
}

static const char *object_name(const tg_oai_meta *m, bool stream) {
    if (m->kind == TG_SERVE_COMPLETION) return "text_completion";
    return stream ? "chat.completion.chunk" : "chat.completion";
}

char *tg_oai_response(const tg_oai_meta *m, const char *text, size_t len, const char *finish_reason,
                      const tg_oai_usage *u) {
    return dump(json_pack("{s:s, s:s, s:I, s:s, s:[o], s:o, s:o, s:n}", "id", m->id, "object",
                          object_name(m, false), "created", (json_int_t)m->created, "model", m->model, "choices",
                          choice(m, text, len, finish_reason, false, 0), "usage", usage_value(u), "timings",
                          timings_value(u), "system_fingerprint"));
}

char *tg_oai_chunk(const tg_oai_meta *m, const char *text, size_t len, const char *finish_reason, int first_chat) {
    return dump(json_pack("{s:s, s:s, s:I, s:s, s:[o], s:n}", "id", m->id, "object", object_name(m, true), "created",
                          (json_int_t)m->created, "model", m->model, "choices",
                          choice(m, text, len, finish_reason, true, first_chat), "system_fingerprint"));
}

char *tg_oai_usage_chunk(const tg_oai_meta *m, const tg_oai_usage *u) {
    return dump(json_pack("{s:s, s:s, s:I, s:s, s:[], s:o, s:o}", "id", m->id, "object", object_name(m, true),
                          "created", (json_int_t)m->created, "model", m->model, "choices", "usage", usage_value(u),
                          "timings", timings_value(u)));
}

char *tg_oai_models(const char *model_id, int64_t created) {
    return dump(json_pack("{s:s, s:[{s:s, s:s, s:I, s:s}]}", "object", "list", "data", "id", model_id, "object",
                          "model", "created", (json_int_t)created, "owned_by", "tinygpt"));
}
