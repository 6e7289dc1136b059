/* metrics.h — the server's counters and the time-to-first-token histogram, and GET /metrics in Prometheus's text
 * format (version 0.0.4). Thread-safe: every call takes the metrics' own mutex. */
#ifndef TG_SERVE_METRICS_H
#define TG_SERVE_METRICS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "serve/park.h"

#define TG_METRICS_TTFT_BUCKETS 9
#define TG_METRICS_STATUSES 9

typedef struct {
    pthread_mutex_t mu;
    int64_t by_status[TG_METRICS_STATUSES]; /* responses by status: 200, 400, 401, 404, 405, 413, 500, 503, other */
    int64_t prompt_tokens, generated_tokens, steps;
    int64_t ttft_count[TG_METRICS_TTFT_BUCKETS]; /* cumulative at render time; per bucket here */
    double ttft_sum;
    int64_t ttft_n;
    double tokens_per_s; /* generated tokens per second over the last second or more of decoding */
} tg_metrics;

/* What the scheduler reports at render time. */
typedef struct {
    int64_t active, queued, max_sessions, queue_cap;
    int64_t kv_bytes_used, kv_budget;
    tg_park_stats park; /* parked conversations (park.h) */
} tg_metrics_gauges;

void tg_metrics_init(tg_metrics *m);
void tg_metrics_destroy(tg_metrics *m);
void tg_metrics_response(tg_metrics *m, int status);
void tg_metrics_tokens(tg_metrics *m, int64_t prompt, int64_t generated);
void tg_metrics_step(tg_metrics *m);
void tg_metrics_set_rate(tg_metrics *m, double tokens_per_s);
void tg_metrics_ttft(tg_metrics *m, double seconds);
/* The text of GET /metrics (malloc'ed), or NULL when memory runs out. */
char *tg_metrics_render(tg_metrics *m, const tg_metrics_gauges *g, size_t *len);

#endif
