/* request.c — the OpenAI request bodies: JSON parsed with jansson, every field of the right type and range, unknown
 * fields ignored (clients send many) except the few that change an answer's meaning and are not done here
 * (logit_bias, logprobs: 400). Defaults are OpenAI's: temperature 1, top_p 1 (top_k and min_p off). */
#include "serve/request.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INVALID "invalid_request_error"

bool tg_serve_fail(tg_serve_error *e, int status, const char *type, const char *param, const char *fmt, ...) {
    e->status = status;
    e->type = type;
    e->param = param;
    e->code = NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return false;
}

/* The field key of root, or NULL when it is absent or null (the request then keeps its default). */
static json_t *optional_field(json_t *root, const char *key) {
    json_t *v = json_object_get(root, key);
    return v && !json_is_null(v) ? v : NULL;
}

/* A number field in [lo, hi] into *out; absent or null leaves *out. */
static bool get_number(json_t *root, const char *key, double lo, double hi, double *out, tg_serve_error *e) {
    json_t *v = optional_field(root, key);
    if (!v) return true;
    if (!json_is_number(v)) return tg_serve_fail(e, 400, INVALID, key, "'%s' must be a number", key);
    const double d = json_number_value(v);
    if (!isfinite(d) || d < lo || d > hi)
        return tg_serve_fail(e, 400, INVALID, key, "'%s' is %g; it must be between %g and %g", key, d, lo, hi);
    *out = d;
    return true;
}

/* An integer field in [lo, hi] into *out; absent or null leaves *out. */
static bool get_int(json_t *root, const char *key, int64_t lo, int64_t hi, int64_t *out, tg_serve_error *e) {
    json_t *v = optional_field(root, key);
    if (!v) return true;
    if (!json_is_integer(v)) return tg_serve_fail(e, 400, INVALID, key, "'%s' must be an integer", key);
    const json_int_t i = json_integer_value(v);
    if (i < lo || i > hi)
        return tg_serve_fail(e, 400, INVALID, key, "'%s' is %lld; it must be between %lld and %lld", key,
                             (long long)i, (long long)lo, (long long)hi);
    *out = (int64_t)i;
    return true;
}

static bool get_bool(json_t *root, const char *key, bool *out, tg_serve_error *e) {
    json_t *v = optional_field(root, key);
    if (!v) return true;
    if (!json_is_boolean(v)) return tg_serve_fail(e, 400, INVALID, key, "'%s' must be true or false", key);
    *out = json_is_true(v);
    return true;
}

/* "stop": a string or an array of non-empty strings. */
static bool get_stops(json_t *root, tg_serve_request *r, tg_serve_error *e) {
    json_t *v = optional_field(root, "stop");
    if (!v) return true;
    if (json_is_string(v)) {
        if (json_string_length(v) == 0) return tg_serve_fail(e, 400, INVALID, "stop", "'stop' must not be empty");
        r->stops[r->n_stops++] = json_string_value(v);
        return true;
    }
    if (!json_is_array(v))
        return tg_serve_fail(e, 400, INVALID, "stop", "'stop' must be a string or an array of strings");
    if (json_array_size(v) > TG_SERVE_MAX_STOPS)
        return tg_serve_fail(e, 400, INVALID, "stop", "'stop' has %zu strings; at most %d", json_array_size(v),
                             TG_SERVE_MAX_STOPS);
    for (size_t i = 0; i < json_array_size(v); i++) {
        json_t *s = json_array_get(v, i);
        if (!json_is_string(s) || json_string_length(s) == 0)
            return tg_serve_fail(e, 400, INVALID, "stop", "'stop'[%zu] must be a non-empty string", i);
        r->stops[r->n_stops++] = json_string_value(s);
    }
    return true;
}

/* A message's content: a string, or an array of {"type": "text", "text": ...} parts (joined). NULL (e filled)
 * otherwise. Returns a new reference. */
static json_t *message_content(json_t *content, size_t i, tg_serve_error *e) {
    if (json_is_string(content)) return json_incref(content);
    if (json_is_null(content)) return json_string("");
    if (!json_is_array(content)) {
        tg_serve_fail(e, 400, INVALID, "messages",
                      "'messages'[%zu].content must be a string or an array of text parts", i);
        return NULL;
    }
    size_t total = 0;
    for (size_t k = 0; k < json_array_size(content); k++) {
        json_t *part = json_array_get(content, k), *text = json_object_get(part, "text");
        const char *type = json_string_value(json_object_get(part, "type"));
        if (!json_is_object(part) || !type || strcmp(type, "text") != 0 || !json_is_string(text)) {
            tg_serve_fail(e, 400, INVALID, "messages",
                          "'messages'[%zu].content[%zu] must be {\"type\": \"text\", \"text\": ...}", i, k);
            return NULL;
        }
        total += json_string_length(text);
    }
    char *joined = malloc(total + 1);
    if (!joined) {
        tg_serve_fail(e, 500, "server_error", NULL, "out of memory");
        return NULL;
    }
    size_t at = 0;
    for (size_t k = 0; k < json_array_size(content); k++) {
        json_t *text = json_object_get(json_array_get(content, k), "text");
        memcpy(joined + at, json_string_value(text), json_string_length(text));
        at += json_string_length(text);
    }
    json_t *s = json_stringn(joined, at);
    free(joined);
    if (!s) tg_serve_fail(e, 500, "server_error", NULL, "out of memory");
    return s;
}

static bool get_messages(json_t *root, tg_serve_request *r, tg_serve_error *e) {
    json_t *v = json_object_get(root, "messages");
    if (!json_is_array(v) || json_array_size(v) == 0)
        return tg_serve_fail(e, 400, INVALID, "messages", "'messages' must be a non-empty array of {role, content}");
    r->messages = json_array();
    if (!r->messages) return tg_serve_fail(e, 500, "server_error", NULL, "out of memory");
    for (size_t i = 0; i < json_array_size(v); i++) {
        json_t *m = json_array_get(v, i), *role = json_object_get(m, "role");
        if (!json_is_object(m) || !json_is_string(role))
            return tg_serve_fail(e, 400, INVALID, "messages",
                                 "'messages'[%zu] must be an object with a string 'role'", i);
        json_t *content = message_content(json_object_get(m, "content"), i, e);
        if (!content) return false;
        json_t *copy = json_pack("{s:O, s:o}", "role", role, "content", content);
        if (!copy || json_array_append_new(r->messages, copy) != 0)
            return tg_serve_fail(e, 500, "server_error", NULL, "out of memory");
    }
    return true;
}

/* "prompt": a string, or an array of exactly one string (token arrays are not taken). */
static bool get_prompt(json_t *root, tg_serve_request *r, tg_serve_error *e) {
    json_t *v = json_object_get(root, "prompt");
    if (!v || json_is_null(v)) {
        r->prompt = "";
        return true;
    }
    if (json_is_array(v) && json_array_size(v) == 1 && json_is_string(json_array_get(v, 0))) v = json_array_get(v, 0);
    if (!json_is_string(v))
        return tg_serve_fail(e, 400, INVALID, "prompt", "'prompt' must be a string (or an array of one string)");
    r->prompt = json_string_value(v);
    r->prompt_len = json_string_length(v);
    return true;
}

/* The sampling fields: OpenAI's and llama-server's names. */
static bool get_sampling(json_t *root, tg_serve_request *r, tg_serve_error *e) {
    double temperature = 1.0, top_p = 1.0, min_p = 0.0, repeat_penalty = 1.0;
    int64_t top_k = 0, seed = 0, repeat_last_n = 64, n = 1;
    if (!get_number(root, "temperature", 0, 100, &temperature, e) || !get_number(root, "top_p", 0, 1, &top_p, e) ||
        !get_number(root, "min_p", 0, 1, &min_p, e) || !get_int(root, "top_k", 0, INT32_MAX, &top_k, e) ||
        !get_int(root, "seed", 0, INT64_MAX, &seed, e) ||
        !get_number(root, "repeat_penalty", 0, 1e4, &repeat_penalty, e) ||
        !get_int(root, "repeat_last_n", 0, TG_SAMPLER_MAX_LAST_N, &repeat_last_n, e) ||
        !get_int(root, "n", 1, INT64_MAX, &n, e))
        return false;
    if (n != 1) return tg_serve_fail(e, 400, INVALID, "n", "'n' must be 1");
    r->sp = tg_sampler_default_params();
    r->sp.temperature = (float)temperature;
    r->sp.top_p = (float)top_p;
    r->sp.min_p = (float)min_p;
    r->sp.top_k = (int)top_k;
    r->sp.repeat_penalty = (float)repeat_penalty;
    r->sp.repeat_last_n = (int)repeat_last_n;
    r->sp.seed = (uint64_t)seed;
    json_t *sv = json_object_get(root, "seed");
    r->seed_given = sv && !json_is_null(sv);
    return true;
}

/* max_tokens (OpenAI), max_completion_tokens (OpenAI's newer chat name), n_predict (llama-server; -1 = the server's
 * most). */
static bool get_max_tokens(json_t *root, tg_serve_request *r, tg_serve_error *e) {
    static const char *const names[] = {"max_tokens", "max_completion_tokens"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        json_t *v = json_object_get(root, names[i]);
        if (!v || json_is_null(v)) continue;
        if (!json_is_integer(v)) return tg_serve_fail(e, 400, INVALID, names[i], "'%s' must be an integer", names[i]);
        if (json_integer_value(v) <= 0)
            return tg_serve_fail(e, 400, INVALID, names[i], "'%s' is %lld; it must be at least 1", names[i],
                                 (long long)json_integer_value(v));
        r->max_tokens = (int64_t)json_integer_value(v);
        return true;
    }
    json_t *v = json_object_get(root, "n_predict");
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v)) return tg_serve_fail(e, 400, INVALID, "n_predict", "'n_predict' must be an integer");
        const json_int_t n = json_integer_value(v);
        if (n == 0 || n < -1)
            return tg_serve_fail(e, 400, INVALID, "n_predict",
                                 "'n_predict' is %lld; it must be -1 (the server's most) or at least 1",
                                 (long long)n);
        r->max_tokens = n == -1 ? 0 : (int64_t)n;
    }
    return true;
}

/* The cache extension fields: kv_quantize (a precision for keys and values), streaming_llm_window,
 * streaming_llm_sink. */
static bool get_cache(json_t *root, tg_serve_request *r, tg_serve_error *e) {
    r->kv_window = r->kv_sink = -1;
    json_t *q = json_object_get(root, "kv_quantize");
    if (q && !json_is_null(q)) {
        if (!json_is_string(q) || !tg_kv_precision_parse(json_string_value(q), &r->kv_quantize))
            return tg_serve_fail(e, 400, INVALID, "kv_quantize",
                                 "'kv_quantize' must be one of fp32, fp16, bf16, int8, int4, int2");
        r->has_kv_quantize = true;
    }
    return get_int(root, "streaming_llm_window", 1, INT32_MAX, &r->kv_window, e) &&
           get_int(root, "streaming_llm_sink", 0, INT32_MAX, &r->kv_sink, e);
}

/* Fields this server does not do, refused rather than ignored (an answer that silently lacks them would mislead):
 * logit_bias (a non-empty object), logprobs (true, or a count above 0), top_logprobs (above 0). Their "off" values
 * (absent, null, {}, false, 0) are taken. */
static bool refuse_unsupported(json_t *root, tg_serve_error *e) {
    json_t *v = optional_field(root, "logit_bias");
    if (v && !(json_is_object(v) && json_object_size(v) == 0))
        return tg_serve_fail(e, 400, INVALID, "logit_bias", "'logit_bias' is not supported by this server");
    static const char *const counts[] = {"logprobs", "top_logprobs"};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        v = optional_field(root, counts[i]);
        if (v && !json_is_false(v) && !(json_is_integer(v) && json_integer_value(v) == 0))
            return tg_serve_fail(e, 400, INVALID, counts[i], "'%s' is not supported by this server", counts[i]);
    }
    return true;
}

void tg_json_count_feed(tg_json_count *c, const char *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        const char ch = p[i];
        if (c->escaped) {
            c->escaped = false;
        } else if (c->in_string) {
            if (ch == '\\') c->escaped = true;
            else if (ch == '"') c->in_string = false;
        } else if (ch == '"') {
            c->in_string = true;
        } else if (ch == '{' || ch == '[' || ch == ',') {
            c->values++;
        }
    }
}

bool tg_serve_request_parse(const char *body, size_t len, tg_serve_kind kind, tg_serve_request *r, tg_serve_error *e) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    tg_json_count count = {1, false, false};
    tg_json_count_feed(&count, body, len);
    if (count.values > TG_SERVE_MAX_JSON_VALUES)
        return tg_serve_fail(e, 400, INVALID, NULL, "the body has more than %d JSON values (objects, arrays, items)",
                             TG_SERVE_MAX_JSON_VALUES);
    json_error_t je;
    r->root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!r->root)
        return tg_serve_fail(e, 400, INVALID, NULL, "the body is not valid JSON: line %d, column %d: %s", je.line,
                             je.column, je.text);
    if (!json_is_object(r->root)) return tg_serve_fail(e, 400, INVALID, NULL, "the body must be a JSON object");
    json_t *model = json_object_get(r->root, "model");
    if (model && !json_is_null(model)) {
        if (!json_is_string(model)) return tg_serve_fail(e, 400, INVALID, "model", "'model' must be a string");
        r->model = json_string_value(model);
    }
    r->cache_prompt = true;
    if (!get_bool(r->root, "stream", &r->stream, e) || !get_bool(r->root, "cache_prompt", &r->cache_prompt, e) || !get_bool(r->root, "ignore_eos", &r->ignore_eos, e) ||
        !get_sampling(r->root, r, e) || !get_max_tokens(r->root, r, e) || !get_stops(r->root, r, e) ||
        !get_cache(r->root, r, e) || !refuse_unsupported(r->root, e))
        return false;
    json_t *so = json_object_get(r->root, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so))
            return tg_serve_fail(e, 400, INVALID, "stream_options", "'stream_options' must be an object");
        if (!get_bool(so, "include_usage", &r->include_usage, e)) return false;
    }
    return kind == TG_SERVE_CHAT ? get_messages(r->root, r, e) : get_prompt(r->root, r, e);
}

void tg_serve_request_free(tg_serve_request *r) {
    json_decref(r->messages);
    json_decref(r->root);
    memset(r, 0, sizeof *r);
}
