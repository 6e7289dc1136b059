/* bandwidth.c — the memory's read bandwidth measured on the production thread team (tinygpt.h:
 * tg_measure_read_bandwidth), for the roofline of `tinygpt bench`.
 *
 * A roofline must bound what a kernel can read, so the probe takes the best of several read patterns, not one: a
 * plain sequential read (what the hardware prefetcher alone gives) and several interleaved streams per thread with
 * software prefetch ahead of each (what the weight kernels do: 4-8 rows in flight, prefetched into cache). On the
 * AMD EPYC guest of docs/PERFORMANCE.md, two threads: `tinygpt bench` measured 42-46 GB/s with the plain read alone
 * (below the 44-46 GB/s the K-quant decode kernels read) and 53-70 GB/s with the prefetched streams added. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "tinygpt.h"
#include "util/thread_pool.h"

/* One read pattern of a thread's share: `streams` interleaved sub-ranges read 64 bytes at a time, each prefetched
 * `ahead` bytes in front of its reads (0 = no software prefetch; streams 1, ahead 0 = a plain sequential read). */
typedef struct {
    int streams;
    size_t ahead;
} read_pattern;

static const read_pattern patterns[] = {{1, 0}, {4, 2048}, {8, 4096}};

typedef struct {
    uint64_t *buf;
    size_t n;
    int threads;
    bool fill;           /* the first run writes every element (touching each page from the thread that reads it) */
    read_pattern pattern;
    uint64_t acc[256];   /* per-thread XOR of its share (threads <= 256) */
} bw_run;

enum { LINE_WORDS = 8 }; /* 64 bytes */

static void share(void *ctx, int t) {
    bw_run *r = ctx;
    const size_t lo = r->n * (size_t)t / (size_t)r->threads, hi = r->n * (size_t)(t + 1) / (size_t)r->threads;
    if (r->fill) {
        for (size_t i = lo; i < hi; i++) r->buf[i] = i;
        return;
    }
    uint64_t acc[LINE_WORDS] = {0}; /* XOR reductions vectorise into wide loads and do no other work */
    const size_t streams = (size_t)r->pattern.streams, ahead = r->pattern.ahead / sizeof(uint64_t);
    const size_t len = (hi - lo) / streams / LINE_WORDS * LINE_WORDS; /* words per stream, whole lines */
    for (size_t o = 0; o < len; o += LINE_WORDS)
        for (size_t s = 0; s < streams; s++) {
            const uint64_t *p = r->buf + lo + s * len + o;
            if (ahead) __builtin_prefetch(p + ahead, 0, 3); /* may run past the buffer: a prefetch never faults */
            for (int k = 0; k < LINE_WORDS; k++) acc[k] ^= p[k];
        }
    for (size_t i = lo + streams * len; i < hi; i++) acc[0] ^= r->buf[i]; /* the words the streams left over */
    uint64_t x = 0;
    for (int k = 0; k < LINE_WORDS; k++) x ^= acc[k];
    r->acc[t] = x;
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
    for (int rep = 0; rep < 3; rep++)
        for (size_t k = 0; k < sizeof patterns / sizeof patterns[0]; k++) {
            r.pattern = patterns[k];
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
