/* generate.c — generation requests (generate.h). The handler runs on the connection's own thread: it waits for its
 * job (checking every WAIT_MS that the client is still there; one that has gone cancels the job, which the
 * scheduler drops at its next step), then answers; a stream's reader callback waits the same way for each new
 * piece of text. */
#define _POSIX_C_SOURCE 200809L

#include "serve/generate.h"

#include <errno.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/openai.h"
#include "util/clock.h"

#define WAIT_MS 50
#define INVALID "invalid_request_error"

/* Waits on j->cv (j->mu held) for up to WAIT_MS. */
static void wait_a_little(tg_job *j) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += WAIT_MS * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&j->cv, &j->mu, &ts);
}

/* Cancels j because its client has gone. */
static void cancel(tg_server *srv, tg_job *j) {
    atomic_store(&j->cancelled, true);
    tg_sched_poke(srv->sched);
}

/* Waits (j->mu held) until done(j) or the client goes; false (job cancelled) when it went. */
static bool wait_for(tg_server *srv, struct MHD_Connection *c, tg_job *j, bool (*done)(const tg_job *)) {
    while (!done(j)) {
        wait_a_little(j);
        if (done(j)) break;
        pthread_mutex_unlock(&j->mu);
        const bool gone = tg_http_client_gone(c);
        pthread_mutex_lock(&j->mu);
        if (gone) {
            cancel(srv, j);
            return false;
        }
    }
    return true;
}

static bool job_done(const tg_job *j) { return j->state == TG_JOB_DONE; }
static bool job_started(const tg_job *j) { return j->state != TG_JOB_QUEUED; }

/* ---- the prompt --------------------------------------------------------------------------------------------- */

/* A prompt of len text bytes that cannot fit the server's prompt cap (every token stands for at most max_token_bytes
 * bytes, so it is more tokens than the cap): refused without tokenising it (the work a million tokens would cost). */
static bool fits_by_bytes(tg_server *srv, size_t len, const char *param, tg_serve_error *e) {
    const uint64_t cap = (uint64_t)srv->max_prompt_tokens, per = srv->max_token_bytes;
    if (cap > (UINT64_MAX - 2) / per || len <= cap * per + 2) return true;
    return tg_serve_fail(e, 400, INVALID, param,
                         "the prompt is %zu bytes: more than the %lld tokens this server takes (--max-prompt-tokens) "
                         "can hold",
                         len, (long long)srv->max_prompt_tokens);
}

/* text tokenised into j's ids, stopping as soon as it gives more than the server's cap (a 4 MB prompt of one letter
 * is refused at the cap, not after 4 million symbols); false with e filled (400 naming param) */
static bool tokenize_capped(tg_server *srv, const char *text, size_t len, bool add_bos, tg_job *j, const char *param,
                            tg_serve_error *e) {
    tg_error err = {0};
    if (tg_tokenize_max(srv->model, text, len, add_bos, (size_t)srv->max_prompt_tokens, &j->ids, &j->n_ids, &err))
        return true;
    if (err.code == TG_ERR_TOO_MANY_TOKENS)
        return tg_serve_fail(e, 400, INVALID, param, "the prompt is more than %lld tokens; this server takes at most "
                             "%lld (--max-prompt-tokens)", (long long)srv->max_prompt_tokens,
                             (long long)srv->max_prompt_tokens);
    return tg_serve_fail(e, 400, INVALID, param, "%s", err.msg);
}

/* The prompt's ids into j (BOS first when the model adds it; an empty prompt is BOS alone). */
static bool completion_ids(tg_server *srv, const tg_serve_request *r, tg_job *j, tg_serve_error *e) {
    if (!fits_by_bytes(srv, r->prompt_len, "prompt", e)) return false;
    if (!tokenize_capped(srv, r->prompt, r->prompt_len, tg_model_adds_bos(srv->model), j, "prompt", e)) return false;
    if (j->n_ids > 0) return true;
    const int32_t bos = tg_token_bos(srv->model);
    if (bos < 0) return tg_serve_fail(e, 400, INVALID, "prompt", "the prompt is empty and the model has no BOS token");
    free(j->ids);
    j->ids = malloc(sizeof *j->ids);
    if (!j->ids) return tg_serve_fail(e, 500, "server_error", NULL, "out of memory");
    j->ids[0] = bos;
    j->n_ids = 1;
    return true;
}

/* A render's cancel (tg_chat_cancel): the request's client has gone or the server is stopping. */
typedef struct {
    tg_server *srv;
    struct MHD_Connection *conn;
} render_watch;

static bool render_stop(void *data) {
    const render_watch *w = data;
    return atomic_load(&w->srv->draining) || tg_http_client_gone(w->conn);
}

/* The conversation rendered with the model's template (as `tinygpt chat` renders its first turn) and tokenised; the
 * render is abandoned when the client leaves or the server begins to stop (then 503, or no answer: e->status 0). */
static bool chat_ids(tg_server *srv, struct MHD_Connection *c, const tg_serve_request *r, tg_job *j,
                     tg_serve_error *e) {
    if (!srv->conv)
        return tg_serve_fail(e, 400, INVALID, "messages",
                             "the model carries no chat template; start the server with --chat-template NAME");
    char msg[1200];
    size_t len = 0;
    /* no lock: a render reads the compiled template and writes only its own state, and its time is bounded by the
     * template limits (work, iterations, a wall-clock deadline), so no request waits for another's render */
    tg_chat_conv conv = *srv->conv;
    conv.messages = r->messages;
    render_watch watch = {srv, c};
    const tg_chat_cancel cancel = {render_stop, &watch};
    char *text = tg_chat_conv_render_cancel(&conv, true, &cancel, &len, msg, sizeof msg);
    if (!text && atomic_load(&srv->draining))
        return tg_serve_fail(e, 503, "server_error", NULL, "the server is shutting down");
    if (!text && tg_http_client_gone(c)) {
        e->status = 0; /* nobody to answer */
        return false;
    }
    if (!text) return tg_serve_fail(e, 400, INVALID, "messages", "%s", msg);
    if (!fits_by_bytes(srv, len, "messages", e)) {
        free(text);
        return false;
    }
    const char *bos = srv->conv->src.bos_token;
    const bool add_bos = tg_model_adds_bos(srv->model) && !(bos && *bos && strncmp(text, bos, strlen(bos)) == 0);
    const bool ok = tokenize_capped(srv, text, len, add_bos, j, "messages", e);
    free(text);
    if (!ok) return false;
    if (j->n_ids == 0) return tg_serve_fail(e, 400, INVALID, "messages", "the rendered conversation is empty");
    memcpy(j->end_ids, srv->end_ids, srv->n_end_ids * sizeof *j->end_ids);
    j->n_end_ids = srv->n_end_ids;
    return true;
}

/* ---- the job ------------------------------------------------------------------------------------------------ */

/* The request's cache policy (the server's with the request's fields), within the server's bytes per session. */
static bool cache_policy(tg_server *srv, const tg_serve_request *r, tg_job *j, tg_serve_error *e) {
    tg_cache_params p = srv->cache;
    if (r->has_kv_quantize) p.key_precision = p.value_precision = r->kv_quantize;
    if (r->kv_window > 0) {
        p.window = r->kv_window;
        p.budget_bytes = 0;
    }
    if (r->kv_sink >= 0) p.sink = r->kv_sink;
    tg_error err = {0};
    const size_t bytes = tg_sequence_bytes(srv->model, &p, &err);
    const char *param = r->kv_window > 0    ? "streaming_llm_window"
                        : r->kv_sink >= 0    ? "streaming_llm_sink"
                        : r->has_kv_quantize ? "kv_quantize"
                                             : NULL;
    if (bytes == 0) return tg_serve_fail(e, 400, INVALID, param, "the request's cache policy: %s", err.msg);
    if (bytes > srv->session_bytes)
        return tg_serve_fail(e, 400, INVALID, param,
                             "the request's cache policy needs %zu bytes, more than the server allows a session (%zu)",
                             bytes, srv->session_bytes);
    const bool bounded = p.window > 0 || p.budget_bytes > 0;
    const int64_t context = p.context > 0 ? p.context : srv->model_context;
    const char *prompt = r->kind == TG_SERVE_CHAT ? "messages" : "prompt";
    if (!bounded && (int64_t)j->n_ids > context)
        return tg_serve_fail(e, 400, INVALID, prompt, "the prompt is %zu tokens but the context holds %lld", j->n_ids,
                             (long long)context);
    if ((int64_t)j->n_ids > srv->max_prompt_tokens)
        return tg_serve_fail(e, 400, INVALID, prompt, "the prompt is %zu tokens; this server takes at most %lld "
                             "(--max-prompt-tokens)", j->n_ids, (long long)srv->max_prompt_tokens);
    j->cache = p;
    j->cache_bytes = bytes;
    return true;
}

/* The job of a parsed request from connection c, or NULL with e filled (e->status 0: the client has gone). */
static tg_job *make_job(tg_server *srv, struct MHD_Connection *c, const tg_serve_request *r, tg_serve_error *e) {
    if (r->model && strcmp(r->model, srv->model_id) != 0 && strcmp(r->model, srv->model_path) != 0) {
        tg_serve_fail(e, 400, INVALID, "model", "the model '%.200s' is not served here (this server serves '%.200s')",
                      r->model, srv->model_id);
        e->code = "model_not_found";
        return NULL;
    }
    if (r->max_tokens > srv->max_tokens) {
        tg_serve_fail(e, 400, INVALID, "max_tokens",
                      "max_tokens is %lld; this server generates at most %lld (--max-tokens)",
                      (long long)r->max_tokens, (long long)srv->max_tokens);
        return NULL;
    }
    tg_job *j = tg_job_new();
    if (!j) {
        tg_serve_fail(e, 500, "server_error", NULL, "out of memory");
        return NULL;
    }
    j->t_submit = tg_monotonic_s();
    j->max_tokens = r->max_tokens > 0 ? r->max_tokens : srv->max_tokens;
    j->ignore_eos = r->ignore_eos;
    j->cache_prompt = r->cache_prompt;
    j->sp = r->sp;
    if (!r->seed_given) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        j->sp.seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)atomic_load(&srv->next_id);
    }
    bool ok = r->kind == TG_SERVE_CHAT ? chat_ids(srv, c, r, j, e) : completion_ids(srv, r, j, e);
    ok = ok && cache_policy(srv, r, j, e);
    for (size_t i = 0; ok && i < r->n_stops; i++) {
        j->stops[i] = strdup(r->stops[i]);
        if (!j->stops[i]) ok = tg_serve_fail(e, 500, "server_error", NULL, "out of memory");
        else j->n_stops++;
    }
    if (!ok) {
        tg_job_unref(j);
        return NULL;
    }
    return j;
}

/* ---- answers ------------------------------------------------------------------------------------------------ */

static void make_meta(tg_server *srv, tg_serve_kind kind, char *id, size_t cap, tg_oai_meta *m) {
    const long long n = atomic_fetch_add(&srv->next_id, 1);
    snprintf(id, cap, "%s-%llx%04llx", kind == TG_SERVE_CHAT ? "chatcmpl" : "cmpl", (long long)time(NULL), n);
    *m = (tg_oai_meta){kind, id, srv->model_id, (int64_t)time(NULL)};
}

static enum MHD_Result send_json(tg_server *srv, struct MHD_Connection *c, char *body) {
    if (!body) return MHD_NO;
    const enum MHD_Result ok = tg_http_send(srv, c, 200, "application/json", body, strlen(body));
    free(body);
    return ok;
}

static enum MHD_Result job_error(tg_server *srv, struct MHD_Connection *c, const tg_job *j) {
    if (j->error_status == 499) return MHD_NO; /* nobody to answer */
    tg_serve_error e;
    tg_serve_fail(&e, j->error_status, j->error_status >= 500 ? "server_error" : INVALID, NULL, "%s", j->error);
    return tg_http_send_error(srv, c, &e);
}

/* A stream's state, owned by its response (freed by stream_free). */
typedef struct {
    tg_server *srv;
    tg_job *job;
    struct MHD_Connection *conn;
    tg_oai_meta meta;
    char id[48];
    int64_t prompt_tokens;
    bool include_usage;
    bool role_sent;   /* chat: the first chunk carries the role */
    bool ended;       /* [DONE] is in out */
    size_t sent;      /* bytes of the job's text already formatted */
    char *out;        /* formatted events not yet handed to MHD */
    size_t out_len, out_off, out_cap;
    bool oom;
} stream;

static void out_put(stream *s, const char *a, size_t n) {
    if (s->oom) return;
    if (s->out_len + n > s->out_cap) {
        size_t cap = s->out_cap ? s->out_cap : 1024;
        while (cap < s->out_len + n) cap *= 2;
        char *p = realloc(s->out, cap);
        if (!p) {
            s->oom = true;
            return;
        }
        s->out = p;
        s->out_cap = cap;
    }
    memcpy(s->out + s->out_len, a, n);
    s->out_len += n;
}

/* "data: JSON\n\n" (takes json; NULL = out of memory) */
static void out_event(stream *s, char *json) {
    if (!json) {
        s->oom = true;
        return;
    }
    out_put(s, "data: ", 6);
    out_put(s, json, strlen(json));
    out_put(s, "\n\n", 2);
    free(json);
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream *s = cls;
    for (;;) {
        if (s->oom) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (s->out_off < s->out_len) {
            size_t n = s->out_len - s->out_off < max ? s->out_len - s->out_off : max;
            memcpy(buf, s->out + s->out_off, n);
            s->out_off += n;
            return (ssize_t)n;
        }
        if (s->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        s->out_len = s->out_off = 0;
        tg_job *j = s->job;
        if (s->meta.kind == TG_SERVE_CHAT && !s->role_sent) {
            s->role_sent = true;
            out_event(s, tg_oai_chunk(&s->meta, "", 0, NULL, 1));
            continue;
        }
        pthread_mutex_lock(&j->mu);
        while (j->len == s->sent && j->state != TG_JOB_DONE) {
            wait_a_little(j);
            if (j->len != s->sent || j->state == TG_JOB_DONE) break;
            pthread_mutex_unlock(&j->mu);
            const bool gone = tg_http_client_gone(s->conn);
            pthread_mutex_lock(&j->mu);
            if (gone) {
                cancel(s->srv, j);
                pthread_mutex_unlock(&j->mu);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
        }
        const size_t n = j->len - s->sent;
        char *text = n ? malloc(n) : NULL;
        if (text) memcpy(text, j->text + s->sent, n);
        s->sent = j->len;
        const bool done = j->state == TG_JOB_DONE;
        const int status = j->error_status;
        const char *finish = j->finish_reason;
        char error[sizeof j->error];
        memcpy(error, j->error, sizeof error);
        const tg_oai_usage u = {s->prompt_tokens, j->completion_tokens, j->cached_tokens, j->restore_s * 1e3};
        pthread_mutex_unlock(&j->mu);
        if (n && !text) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (n) out_event(s, tg_oai_chunk(&s->meta, text, n, NULL, 0));
        free(text);
        if (done) {
            if (status == 499) return MHD_CONTENT_READER_END_WITH_ERROR;
            if (status) {
                tg_serve_error e;
                tg_serve_fail(&e, status, status >= 500 ? "server_error" : INVALID, NULL, "%s", error);
                out_event(s, tg_oai_error(&e));
            } else {
                out_event(s, tg_oai_chunk(&s->meta, "", 0, finish, 0));
                if (s->include_usage) out_event(s, tg_oai_usage_chunk(&s->meta, &u));
            }
            out_put(s, "data: [DONE]\n\n", 14);
            s->ended = true;
        }
    }
}

static void stream_free(void *cls) {
    stream *s = cls;
    pthread_mutex_lock(&s->job->mu);
    const bool done = s->job->state == TG_JOB_DONE;
    pthread_mutex_unlock(&s->job->mu);
    if (!done) cancel(s->srv, s->job); /* the connection ended before the job did */
    tg_job_unref(s->job);
    atomic_fetch_sub(&s->srv->in_flight, 1);
    free(s->out);
    free(s);
}

static enum MHD_Result start_stream(tg_server *srv, struct MHD_Connection *c, tg_serve_kind kind, bool include_usage,
                                    tg_job *j) {
    stream *s = calloc(1, sizeof *s);
    if (!s) {
        cancel(srv, j);
        tg_job_unref(j);
        atomic_fetch_sub(&srv->in_flight, 1);
        return MHD_NO;
    }
    s->srv = srv;
    s->job = j;
    s->conn = c;
    s->prompt_tokens = (int64_t)j->n_ids;
    s->include_usage = include_usage;
    make_meta(srv, kind, s->id, sizeof s->id, &s->meta);
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, s,
                                                                  stream_free);
    if (!resp) {
        stream_free(s);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(resp, "Cache-Control", "no-cache");
    const enum MHD_Result ok = MHD_queue_response(c, 200, resp);
    MHD_destroy_response(resp);
    tg_metrics_response(srv->metrics, 200);
    return ok;
}

/* Waits until the body of len bytes may be parsed and tokenised (srv->prep); false when the client went or the
 * server began to stop while it waited. */
static bool prep_enter(tg_server *srv, struct MHD_Connection *c, size_t len) {
    pthread_mutex_lock(&srv->prep_mu);
    bool in;
    while (!(in = tg_prep_take(&srv->prep, (int64_t)len))) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += WAIT_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&srv->prep_cv, &srv->prep_mu, &ts);
        if (tg_prep_take(&srv->prep, (int64_t)len)) {
            in = true;
            break;
        }
        pthread_mutex_unlock(&srv->prep_mu);
        const bool stop = tg_http_client_gone(c) || atomic_load(&srv->draining);
        pthread_mutex_lock(&srv->prep_mu);
        if (stop) break;
    }
    pthread_mutex_unlock(&srv->prep_mu);
    return in;
}

static void prep_leave(tg_server *srv, size_t len) {
    pthread_mutex_lock(&srv->prep_mu);
    tg_prep_give(&srv->prep, (int64_t)len);
    pthread_cond_broadcast(&srv->prep_cv);
    pthread_mutex_unlock(&srv->prep_mu);
}

/* The job of body[len] (parsed, rendered, tokenised under srv->prep; the parsed tree freed before the job runs), or
 * NULL with e filled (e->status 0: the client went while it waited; 503 when the server began to stop). */
static tg_job *prepare(tg_server *srv, struct MHD_Connection *c, tg_serve_kind kind, const char *body, size_t len,
                       bool *streamed, bool *include_usage, tg_serve_error *e) {
    if (!prep_enter(srv, c, len)) {
        /* SIGTERM while it waited its turn: answered, not dropped (an empty reply reads as a broken server) */
        if (atomic_load(&srv->draining)) tg_serve_fail(e, 503, "server_error", NULL, "the server is shutting down");
        else e->status = 0;
        return NULL;
    }
    tg_serve_request r;
    tg_job *j = NULL;
    if (tg_serve_request_parse(body, len, kind, &r, e)) j = make_job(srv, c, &r, e);
    *streamed = r.stream;
    *include_usage = r.include_usage;
    tg_serve_request_free(&r);
    prep_leave(srv, len);
#if defined(__GLIBC__)
    /* a large body's parse tree and tokeniser scratch went back to this thread's malloc arena, which glibc keeps: give
     * them back to the system so that RSS returns to the model + the KV in use after a burst */
    if (len >= ((size_t)1 << 20)) malloc_trim(0);
#endif
    return j;
}

static enum MHD_Result generate(tg_server *srv, struct MHD_Connection *c, tg_serve_kind kind, const char *body,
                                size_t len, bool *streaming) {
    tg_serve_error e = {0};
    if (atomic_load(&srv->draining)) {
        tg_serve_fail(&e, 503, "server_error", NULL, "the server is shutting down");
        return tg_http_send_error(srv, c, &e);
    }
    bool streamed = false, include_usage = false;
    tg_job *j = prepare(srv, c, kind, body, len, &streamed, &include_usage, &e);
    if (!j) return e.status ? tg_http_send_error(srv, c, &e) : MHD_NO;
    switch (tg_sched_submit(srv->sched, j)) {
    case TG_SUBMIT_OK: break;
    case TG_SUBMIT_FULL:
        tg_serve_fail(&e, 503, "server_error", NULL,
                      "the server is full: every session slot and queue place is taken (--kv-budget, --queue); retry");
        e.code = "server_overloaded";
        goto refuse;
    case TG_SUBMIT_STOPPING:
        tg_serve_fail(&e, 503, "server_error", NULL, "the server is shutting down");
        goto refuse;
    }
    enum MHD_Result res;
    pthread_mutex_lock(&j->mu);
    const bool present = wait_for(srv, c, j, streamed ? job_started : job_done);
    /* a stream that failed before its first token answers with the error's status, like a whole answer */
    const bool failed_early = j->state == TG_JOB_DONE && j->error_status != 0 && j->len == 0;
    pthread_mutex_unlock(&j->mu);
    if (!present) {
        res = MHD_NO;
    } else if (failed_early) {
        res = job_error(srv, c, j);
    } else if (streamed) {
        *streaming = true; /* stream_free ends the request */
        res = start_stream(srv, c, kind, include_usage, j); /* the stream owns j now */
        j = NULL;
    } else if (j->error_status) {
        res = job_error(srv, c, j);
    } else {
        char id[48];
        tg_oai_meta m;
        make_meta(srv, kind, id, sizeof id, &m);
        const tg_oai_usage u = {(int64_t)j->n_ids, j->completion_tokens, j->cached_tokens, j->restore_s * 1e3};
        res = send_json(srv, c, tg_oai_response(&m, j->text, j->len, j->finish_reason, &u));
    }
    tg_job_unref(j);
    return res;
refuse:
    tg_job_unref(j);
    return tg_http_send_error(srv, c, &e);
}

enum MHD_Result tg_serve_generate(tg_server *srv, struct MHD_Connection *c, tg_serve_kind kind, const char *body,
                                  size_t len) {
    atomic_fetch_add(&srv->in_flight, 1);
    bool streaming = false;
    const enum MHD_Result res = generate(srv, c, kind, body, len, &streaming);
    if (!streaming) atomic_fetch_sub(&srv->in_flight, 1);
    return res;
}
