/* bandwidth.c — the memory's read bandwidth measured on the production thread team (tinygpt.h:
 * tg_measure_read_bandwidth), for the roofline of `tinygpt bench`. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "tinygpt.h"
#include "util/thread_pool.h"

typedef struct {
    uint64_t *buf;
    size_t n;
    int threads;
    bool fill;           /* the first run writes every element (touching each page from the thread that reads it) */
    uint64_t acc[256];   /* per-thread XOR of its share (threads <= 256) */
} bw_run;

static void share(void *ctx, int t) {
    bw_run *r = ctx;
    const size_t lo = r->n * (size_t)t / (size_t)r->threads, hi = r->n * (size_t)(t + 1) / (size_t)r->threads;
    if (r->fill) {
        for (size_t i = lo; i < hi; i++) r->buf[i] = i;
        return;
    }
    uint64_t acc = 0; /* the XOR reduction vectorises into wide loads and does no other work */
    for (size_t i = lo; i < hi; i++) acc ^= r->buf[i];
    r->acc[t] = acc;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double tg_measure_read_bandwidth(int64_t mib, int n_threads) {
    if (mib <= 0 || (uint64_t)mib > SIZE_MAX / (1024 * 1024)) return 0.0;
    if (n_threads <= 0) n_threads = tg_threads_all_cores();
    if (n_threads > 256) n_threads = 256;
    bw_run r = {.n = (size_t)mib * 1024 * 1024 / sizeof(uint64_t), .fill = true};
    r.buf = malloc(r.n * sizeof *r.buf);
    tg_pool *pool = r.buf ? tg_pool_new(n_threads, NULL) : NULL;
    if (!pool) {
        free(r.buf);
        return 0.0;
    }
    r.threads = tg_pool_threads(pool);
    tg_pool_run(pool, share, &r);
    r.fill = false;
    double best = 0.0;
    volatile uint64_t sink = 0;
    for (int rep = 0; rep < 3; rep++) {
        const double t0 = now_s();
        tg_pool_run(pool, share, &r);
        const double t = now_s() - t0;
        for (int i = 0; i < r.threads; i++) sink ^= r.acc[i];
        if (t > 0 && (double)(r.n * sizeof *r.buf) / t > best) best = (double)(r.n * sizeof *r.buf) / t;
    }
    (void)sink;
    tg_pool_free(pool);
    free(r.buf);
    return best;
}
