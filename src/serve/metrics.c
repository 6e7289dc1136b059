/* metrics.c — counters, gauges and a histogram in Prometheus's text format (metrics.h). */
#include "serve/metrics.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double TTFT_LE[TG_METRICS_TTFT_BUCKETS - 1] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
static const int STATUSES[TG_METRICS_STATUSES - 1] = {200, 400, 401, 404, 405, 413, 500, 503};

void tg_metrics_init(tg_metrics *m) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
}

void tg_metrics_destroy(tg_metrics *m) { pthread_mutex_destroy(&m->mu); }

void tg_metrics_response(tg_metrics *m, int status) {
    int i = 0;
    while (i < TG_METRICS_STATUSES - 1 && STATUSES[i] != status) i++;
    pthread_mutex_lock(&m->mu);
    m->by_status[i]++;
    pthread_mutex_unlock(&m->mu);
}

void tg_metrics_tokens(tg_metrics *m, int64_t prompt, int64_t generated) {
    pthread_mutex_lock(&m->mu);
    m->prompt_tokens += prompt;
    m->generated_tokens += generated;
    pthread_mutex_unlock(&m->mu);
}

void tg_metrics_step(tg_metrics *m) {
    pthread_mutex_lock(&m->mu);
    m->steps++;
    pthread_mutex_unlock(&m->mu);
}

void tg_metrics_set_rate(tg_metrics *m, double tokens_per_s) {
    pthread_mutex_lock(&m->mu);
    m->tokens_per_s = tokens_per_s;
    pthread_mutex_unlock(&m->mu);
}

void tg_metrics_ttft(tg_metrics *m, double seconds) {
    int b = 0;
    while (b < TG_METRICS_TTFT_BUCKETS - 1 && seconds > TTFT_LE[b]) b++;
    pthread_mutex_lock(&m->mu);
    m->ttft_count[b]++;
    m->ttft_sum += seconds;
    m->ttft_n++;
    pthread_mutex_unlock(&m->mu);
}

typedef struct {
    char *p;
    size_t len, cap;
    bool oom;
} text_buf;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void put(text_buf *b, const char *fmt, ...) {
    if (b->oom) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        const int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if ((size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        char *q = realloc(b->p, b->cap * 2 + (size_t)n);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = b->cap * 2 + (size_t)n;
    }
}

char *tg_metrics_render(tg_metrics *m, const tg_metrics_gauges *g, size_t *len) {
    text_buf b = {malloc(4096), 0, 4096, false};
    if (!b.p) return NULL;
    pthread_mutex_lock(&m->mu);
    const tg_metrics s = *m;
    pthread_mutex_unlock(&m->mu);
    /* the integer series, one row each: name, help, type, value */
    const struct {
        const char *name, *help, *type;
        long long value;
    } rows[] = {
        {"sessions_active", "Sessions being decoded (admitted, holding their KV cache).", "gauge", g->active},
        {"sessions_queued", "Requests waiting for KV budget or a session slot.", "gauge", g->queued},
        {"sessions_max", "Most sessions decoded at once (--max-sessions).", "gauge", g->max_sessions},
        {"queue_capacity", "Most requests waiting (--queue).", "gauge", g->queue_cap},
        {"kv_bytes_in_use", "KV cache bytes allocated by the active sessions.", "gauge", g->kv_bytes_used},
        {"kv_bytes_budget", "KV cache bytes all sessions together may hold (--kv-budget).", "gauge", g->kv_budget},
        {"prompt_tokens_total", "Prompt tokens evaluated.", "counter", s.prompt_tokens},
        {"generated_tokens_total", "Tokens generated.", "counter", s.generated_tokens},
        {"batch_steps_total", "Batched forward passes run.", "counter", s.steps},
        {"prefix_hits_total", "Requests that continued a parked conversation (only their new tokens prefilled).",
         "counter", g->park.hits},
        {"prefix_misses_total", "Requests with cache_prompt that found no parked conversation their prompt extends.",
         "counter", g->park.misses},
        {"prefix_reused_tokens_total", "Prompt tokens taken from parked conversations instead of prefilled.",
         "counter", g->park.reused_tokens},
        {"prefix_prompt_hits_total", "Hits on the state where a conversation's prompt ended (the history came back "
         "with the reply as other tokens than generated: the reply re-read).", "counter", g->park.prompt_hits},
        {"park_held_bytes", "Bytes of the prompt states running sessions hold for parking (at most --park-budget, "
         "apart from the parked ones).", "gauge", g->park.held_bytes},
        {"park_disk_refused_total", "Files in --park-dir that were no usable snapshot.", "counter",
         g->park.disk_refused},
        {"park_write_errors_total", "Parked conversations lost because their file could not be written.", "counter",
         g->park.write_errors},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        put(&b, "# HELP tinygpt_%s %s\n# TYPE tinygpt_%s %s\ntinygpt_%s %lld\n", rows[i].name, rows[i].help,
            rows[i].name, rows[i].type, rows[i].name, rows[i].value);
    /* the parked conversations by tier */
    const struct {
        const char *name, *help, *type;
        long long ram, disk;
    } tiers[] = {
        {"parked_bytes", "Bytes of parked conversations (snapshots and token lists; --park-budget, --park-disk-budget).",
         "gauge", g->park.ram_bytes, g->park.disk_bytes},
        {"parked_conversations", "Conversations parked for continuation.", "gauge", g->park.ram_count,
         g->park.disk_count},
        {"parked_states", "Parked states: a conversation parks where it ended and where its prompt ended.", "gauge",
         g->park.ram_states, g->park.disk_states},
        {"park_evictions_total", "Parked conversations evicted for lack of room (ram: moved to disk or dropped; disk: "
         "file removed).", "counter", g->park.ram_evictions, g->park.disk_evictions},
    };
    for (size_t i = 0; i < sizeof tiers / sizeof tiers[0]; i++)
        put(&b, "# HELP tinygpt_%s %s\n# TYPE tinygpt_%s %s\ntinygpt_%s{tier=\"ram\"} %lld\ntinygpt_%s{tier=\"disk\"} %lld\n",
            tiers[i].name, tiers[i].help, tiers[i].name, tiers[i].type, tiers[i].name, tiers[i].ram, tiers[i].name,
            tiers[i].disk);
    put(&b, "# HELP tinygpt_tokens_per_second Generated tokens per second, all sessions, over the last second.\n"
            "# TYPE tinygpt_tokens_per_second gauge\ntinygpt_tokens_per_second %.3f\n", s.tokens_per_s);
    put(&b, "# HELP tinygpt_http_responses_total Responses by HTTP status.\n"
            "# TYPE tinygpt_http_responses_total counter\n");
    for (int i = 0; i < TG_METRICS_STATUSES; i++) {
        if (i < TG_METRICS_STATUSES - 1)
            put(&b, "tinygpt_http_responses_total{code=\"%d\"} %lld\n", STATUSES[i], (long long)s.by_status[i]);
        else
            put(&b, "tinygpt_http_responses_total{code=\"other\"} %lld\n", (long long)s.by_status[i]);
    }
    put(&b, "# HELP tinygpt_time_to_first_token_seconds From the request's arrival to its first generated token.\n"
            "# TYPE tinygpt_time_to_first_token_seconds histogram\n");
    int64_t cum = 0;
    for (int i = 0; i < TG_METRICS_TTFT_BUCKETS; i++) {
        cum += s.ttft_count[i];
        if (i < TG_METRICS_TTFT_BUCKETS - 1)
            put(&b, "tinygpt_time_to_first_token_seconds_bucket{le=\"%g\"} %lld\n", TTFT_LE[i], (long long)cum);
        else
            put(&b, "tinygpt_time_to_first_token_seconds_bucket{le=\"+Inf\"} %lld\n", (long long)cum);
    }
    put(&b, "tinygpt_time_to_first_token_seconds_sum %.6f\ntinygpt_time_to_first_token_seconds_count %lld\n",
        s.ttft_sum, (long long)s.ttft_n);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}
