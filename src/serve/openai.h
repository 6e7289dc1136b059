/* openai.h — OpenAI's response bodies as compact JSON text (malloc'ed; NULL when memory runs out): the error object,
 * completions and chat completions whole or as server-sent-event chunks, and the model list. Generated text that is
 * not valid UTF-8 has each invalid byte replaced by U+FFFD. */
#ifndef TG_SERVE_OPENAI_H
#define TG_SERVE_OPENAI_H

#include <stddef.h>
#include <stdint.h>

#include "serve/request.h"

/* What every response of one request shares. */
typedef struct {
    tg_serve_kind kind;
    const char *id;      /* "cmpl-..." / "chatcmpl-..." */
    const char *model;   /* the served model's id */
    int64_t created;     /* seconds since the epoch */
} tg_oai_meta;

typedef struct {
    int64_t prompt_tokens, completion_tokens;
    int64_t cached_tokens; /* of the prompt's, taken from a parked conversation (not prefilled) */
    double restore_ms;     /* the look-up and restore of that conversation */
} tg_oai_usage;

/* {"error": {"message", "type", "param", "code"}} */
char *tg_oai_error(const tg_serve_error *e);
/* The whole answer: text, finish_reason ("stop" / "length"), usage (with OpenAI's
 * prompt_tokens_details.cached_tokens) and llama-server's "timings" counts (cache_n: prompt tokens reused, prompt_n:
 * prompt tokens prefilled, predicted_n: generated; and restore_ms, the look-up and restore of a parked conversation). */
char *tg_oai_response(const tg_oai_meta *m, const char *text, size_t len, const char *finish_reason,
                      const tg_oai_usage *u);
/* One stream chunk: text (len may be 0), finish_reason NULL until the last; first_chat adds the assistant role
 * (the first chunk of a chat stream). */
char *tg_oai_chunk(const tg_oai_meta *m, const char *text, size_t len, const char *finish_reason, int first_chat);
/* The usage chunk of stream_options.include_usage: no choices, the usage (and the timings counts). */
char *tg_oai_usage_chunk(const tg_oai_meta *m, const tg_oai_usage *u);
/* {"object": "list", "data": [{"id", "object": "model", "created", "owned_by"}]} */
char *tg_oai_models(const char *model_id, int64_t created);

#endif
