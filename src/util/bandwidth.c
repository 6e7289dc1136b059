/* bandwidth.c — the memory's read bandwidth measured on the production thread team (tinygpt.h: tg_bandwidth_probe,
 * tg_measure_read_bandwidth), for the roofline of `tinygpt bench`.
 *
 * A roofline must bound what a kernel can read, so the probe reads in several patterns, not one: a plain sequential
 * read (what the hardware prefetcher alone gives) and several interleaved streams per thread with software prefetch
 * ahead of each (what the weight kernels do: 4-8 rows in flight, prefetched into cache). On the AMD EPYC guest of
 * docs/PERFORMANCE.md, two threads: the plain read alone measured below what the K-quant decode kernels read, the
 * prefetched streams above it.
 *
 * A pass reads the buffer once in each pattern and returns each read's seconds; the caller sums passes. A rate is a
 * pattern's bytes over its summed seconds — a mean over the passes, never the best single read: on a shared guest the
 * best of a few reads of a few hundred MiB can be far above their median (bench/read_patterns.c; docs/PERFORMANCE.md,
 * Session 13), a bound that no sustained read, the probe's own included, comes near. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdlib.h>

#include "tinygpt.h"
#include "util/clock.h"
#include "util/thread_pool.h"

/* One read pattern of a thread's share: `streams` interleaved sub-ranges read 64 bytes at a time, each prefetched
 * `ahead` bytes in front of its reads (0 = no software prefetch; streams 1, ahead 0 = a plain sequential read). */
typedef struct {
    int streams;
    size_t ahead;
} read_pattern;

static const read_pattern patterns[TG_BANDWIDTH_PATTERNS] = {{1, 0}, {4, 2048}, {8, 4096}};

typedef struct {
    uint64_t *buf;
    size_t n;
    int threads;
    bool fill;           /* the first run writes every element (touching each page from the thread that reads it) */
    read_pattern pattern;
    uint64_t acc[256];   /* per-thread XOR of its share (threads <= 256) */
} bw_run;

struct tg_bandwidth_probe {
    bw_run run;
    tg_pool *pool;
};

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

tg_bandwidth_probe *tg_bandwidth_probe_new(int64_t mib, int n_threads) {
    if (mib <= 0 || (uint64_t)mib > SIZE_MAX / (1024 * 1024)) return NULL;
    if (n_threads <= 0) n_threads = tg_threads_all_cores();
    if (n_threads > 256) n_threads = 256;
    tg_bandwidth_probe *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->run.n = (size_t)mib * 1024 * 1024 / sizeof(uint64_t);
    p->run.fill = true;
    p->run.buf = malloc(p->run.n * sizeof *p->run.buf);
    p->pool = p->run.buf ? tg_pool_new(n_threads, NULL) : NULL;
    if (!p->pool) {
        tg_bandwidth_probe_free(p);
        return NULL;
    }
    p->run.threads = tg_pool_threads(p->pool);
    tg_pool_run(p->pool, share, &p->run);
    p->run.fill = false;
    return p;
}

int64_t tg_bandwidth_probe_bytes(const tg_bandwidth_probe *p) {
    return p ? (int64_t)(p->run.n * sizeof *p->run.buf) : 0;
}

void tg_bandwidth_probe_pass(tg_bandwidth_probe *p, double seconds[TG_BANDWIDTH_PATTERNS]) {
    volatile uint64_t sink = 0;
    for (int k = 0; k < TG_BANDWIDTH_PATTERNS; k++) {
        p->run.pattern = patterns[k];
        const double t0 = tg_monotonic_s();
        tg_pool_run(p->pool, share, &p->run);
        seconds[k] = tg_monotonic_s() - t0;
        for (int i = 0; i < p->run.threads; i++) sink ^= p->run.acc[i];
    }
    (void)sink;
}

double tg_bandwidth_rate(int64_t bytes, int64_t passes, const double seconds[TG_BANDWIDTH_PATTERNS]) {
    double best = 0.0;
    for (int k = 0; k < TG_BANDWIDTH_PATTERNS; k++)
        if (seconds[k] > 0 && (double)bytes * (double)passes / seconds[k] > best)
            best = (double)bytes * (double)passes / seconds[k];
    return best;
}

void tg_bandwidth_probe_free(tg_bandwidth_probe *p) {
    if (!p) return;
    tg_pool_free(p->pool);
    free(p->run.buf);
    free(p);
}

double tg_measure_read_bandwidth(int64_t mib, int n_threads) {
    tg_bandwidth_probe *p = tg_bandwidth_probe_new(mib, n_threads);
    if (!p) return 0.0;
    double sum[TG_BANDWIDTH_PATTERNS] = {0}, s[TG_BANDWIDTH_PATTERNS];
    enum { PASSES = 3 };
    for (int rep = 0; rep < PASSES; rep++) {
        tg_bandwidth_probe_pass(p, s);
        for (int k = 0; k < TG_BANDWIDTH_PATTERNS; k++) sum[k] += s[k];
    }
    const double rate = tg_bandwidth_rate(tg_bandwidth_probe_bytes(p), PASSES, sum);
    tg_bandwidth_probe_free(p);
    return rate;
}
