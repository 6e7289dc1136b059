/* request.h — the body of POST /v1/completions and /v1/chat/completions, parsed and validated into what the
 * scheduler needs (OpenAI's fields, llama-server's extension names, the per-request cache fields), or the
 * OpenAI error (400) that names the field. */
#ifndef TG_SERVE_REQUEST_H
#define TG_SERVE_REQUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tinygpt.h"

/* The most stop strings a request may give. */
#define TG_SERVE_MAX_STOPS 16
/* The most JSON values a body may hold (a cheap scan refuses more before parsing: the tree costs tens of bytes a
 * value, so a 4 MB body of "{}," would take hundreds of MB). A chat of thousands of messages is far below it. */
#define TG_SERVE_MAX_JSON_VALUES 100000

/* The JSON values of a body at most (one per '{', '[' and ',' outside strings, plus one), counted as its pieces
 * arrive: the cheap scan behind TG_SERVE_MAX_JSON_VALUES, resumable, so that the server stops buffering a body as
 * soon as it has too many. Start from {1, false, false}. */
typedef struct {
    size_t values;
    bool in_string, escaped;
} tg_json_count;
void tg_json_count_feed(tg_json_count *c, const char *p, size_t n);

typedef enum { TG_SERVE_COMPLETION, TG_SERVE_CHAT } tg_serve_kind;

/* An OpenAI error: the HTTP status and the error object's fields. */
typedef struct {
    int status;          /* 400, 401, 404, 413, 500, 503 */
    char message[512];
    const char *type;    /* "invalid_request_error", "authentication_error", "server_error", ... */
    const char *param;   /* the field, or NULL */
    const char *code;    /* "model_not_found", ..., or NULL */
} tg_serve_error;

/* Fills e (status, type, param, message) and returns false. */
#if defined(__GNUC__)
__attribute__((format(printf, 5, 6)))
#endif
bool tg_serve_fail(tg_serve_error *e, int status, const char *type, const char *param, const char *fmt, ...);

typedef struct {
    tg_serve_kind kind;
    json_t *root;            /* the parsed body (owned); the strings below point into it */
    const char *model;       /* NULL when not given */
    const char *prompt;      /* completion: the prompt */
    size_t prompt_len;
    json_t *messages;        /* chat: [{role, content: string}] (content parts joined), owned */
    bool stream, include_usage;
    int64_t max_tokens;      /* 0 = not given (the server's default) */
    tg_sampler_params sp;    /* temperature, top_p, top_k, min_p, seed, repeat penalty */
    bool seed_given;
    bool ignore_eos;
    const char *stops[TG_SERVE_MAX_STOPS];
    size_t n_stops;
    /* per-request cache policy (extension fields); -1 / false = the server's */
    bool has_kv_quantize;
    tg_kv_precision kv_quantize;
    int64_t kv_window, kv_sink;
    bool cache_prompt;       /* llama-server's field (default true): continue a parked conversation the prompt
                              * extends; false: prefill the whole prompt */
} tg_serve_request;

/* Parses body[len] for kind. Types and ranges are checked here (the model name, the token limits and the cache
 * policy against the server's limits are checked by the caller). False with e filled (400) on anything wrong. */
bool tg_serve_request_parse(const char *body, size_t len, tg_serve_kind kind, tg_serve_request *r, tg_serve_error *e);
void tg_serve_request_free(tg_serve_request *r);

#endif
