/* http.h — the HTTP side of `tinygpt serve` on libmicrohttpd (one thread per connection): routes, the body limit,
 * the bearer key, and the plain responses (health, models, metrics, errors). Generation is generate.h's. */
#ifndef TG_SERVE_HTTP_H
#define TG_SERVE_HTTP_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "chat/conversation.h"
#include "serve/admission.h"
#include "serve/job.h"
#include "serve/metrics.h"
#include "serve/request.h"
#include "serve/scheduler.h"
#include "tinygpt.h"

/* Everything a request handler needs; filled by cmd_serve.c, read-only while serving except where noted. */
typedef struct {
    const char *host;
    int port;                  /* 0: any free port (tg_http_port says which) */
    int64_t max_body;          /* bytes; a larger body gets 413 */
    unsigned max_connections;  /* open at once, below the descriptors the process may open */
    unsigned max_connections_per_ip;
    double request_timeout;    /* seconds a connection has to deliver a request (watchdog.h) */
    const char *api_key;       /* NULL: no key; else every route but /health needs "Authorization: Bearer KEY" */
    const tg_model *model;
    const char *model_id;      /* the name /v1/models lists and requests may name */
    const char *model_path;    /* also accepted as a request's model */
    int64_t model_context;     /* the model's training context */
    tg_chat_conv *conv;        /* the chat template (NULL: the model has none and --chat-template was not given) */
    int32_t end_ids[TG_JOB_MAX_END_IDS]; /* the chat template's end-of-turn ids */
    size_t n_end_ids;
    tg_cache_params cache;     /* the server's per-session policy */
    size_t session_bytes;      /* its bytes: the most a request's own policy may need */
    int64_t max_tokens;        /* a request's default and most generated tokens */
    int64_t max_prompt_tokens; /* a request's most prompt tokens, bounded cache or not (more: 400) */
    size_t max_token_bytes;    /* the most text bytes one token stands for (> 0): a prompt longer than
                                * max_prompt_tokens * max_token_bytes is refused before it is tokenised */
    tg_sched *sched;
    tg_prep prep;              /* parsing and tokenising bounded (admission.h); under prep_mu, waited on with prep_cv */
    pthread_mutex_t prep_mu;
    pthread_cond_t prep_cv;
    tg_metrics *metrics;
    atomic_bool draining;      /* SIGTERM: /health answers 503, generation requests 503 */
    int64_t created;           /* seconds since the epoch, for /v1/models */
    atomic_llong next_id;      /* completion ids */
    atomic_int in_flight;      /* generation requests being answered (handlers waiting, streams open) */
} tg_server;

typedef struct tg_http tg_http;

/* Starts listening (host:port) on its own threads. NULL with msg filled when the address cannot be used. */
tg_http *tg_http_start(tg_server *srv, char *msg, size_t cap);
int tg_http_port(const tg_http *h);
/* Closes every connection (streams must have ended: their jobs done) and stops the threads. */
void tg_http_stop(tg_http *h);

/* Queues body[len] (copied) with status and content type; counts the status in the metrics. */
enum MHD_Result tg_http_send(tg_server *srv, struct MHD_Connection *c, unsigned status, const char *content_type,
                             const char *body, size_t len);
/* Queues OpenAI's error object for e (with Retry-After: 1 on 503). */
enum MHD_Result tg_http_send_error(tg_server *srv, struct MHD_Connection *c, const tg_serve_error *e);
/* Whether the client of connection c has gone: its connection reset or closed both ways (a non-blocking look at its
 * socket; a client that only shut down its sending half has not gone). */
bool tg_http_client_gone(struct MHD_Connection *c);

#endif
