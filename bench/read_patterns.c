/* bench/read_patterns.c — how fast the memory streams a weight matrix in the orders the decode kernels read it, with
 * no arithmetic: what bounds a GEMV kernel whose loads are its only cost. tests/cli/test_bench_programs.sh runs it
 * small.
 *
 * A decode kernel takes a group of R contiguous rows (row bytes W) through their blocks together: block b of row 0,
 * block b of row 1, ..., then block b + 1. Patterns, each over a buffer of contiguous rows split between the threads:
 *   plain       one sequential read, the hardware prefetcher alone (no software prefetch);
 *   rows-L2     group order; each step prefetches its blocks of the rows one group ahead into L2 (the decode
 *               kernels' scheme up to session 11: the same lines in the same strided order, one group early);
 *   stream-L1   group order; each step prefetches the group's bytes-per-step of the NEXT group into L1 in address
 *               order (tg_prefetch_next, kernels/avx2_inline.h: the scheme of the AVX-512 decode kernels since
 *               session 12);
 *   split2-L1,  stream-L1 over two / four sub-ranges of the thread's share at once, a group from each in turn (as
 *   split4-L1   if a kernel took its rows from distant places: more DRAM streams in flight);
 *   probe4      the bandwidth probe's four-stream pattern (src/util/bandwidth.c): four long sub-ranges, 64 bytes of
 *               each in turn, each prefetched 2 KB ahead.
 * Each thread reads its half with 64-byte loads folded by XOR. Prints the median and best GB/s per pattern and thread
 * count over interleaved repetitions.
 *
 * Build and run from the repository root: `make bench-programs`, then (tests/cli/test_bench_programs.sh runs it small)
 *   build/release/bench/read_patterns [row_bytes rows_per_group block_bytes buffer_MiB reps]
 * Defaults: 1152 4 128 1024 7 (a 2048-column Q4_K row, the Q4_K kernel's two pairs, half a super-block's codes).
 * The Q8_0 kernel's groups: 2176 16 64; a Q6_K kernel's: 1680 8 256 (block bytes need not match a format's: the
 * pattern is what matters).
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */

#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { PLAIN, ROWS_L2, STREAM_L1, SPLIT2_L1, SPLIT4_L1, PROBE4, N_PATTERNS };
static const char *const pattern_names[N_PATTERNS] = {"plain", "rows-L2", "stream-L1", "split2-L1", "split4-L1",
                                                      "probe4"};

typedef struct {
    const uint8_t *buf; /* this thread's rows */
    size_t bytes;
    size_t row_bytes, block_bytes;
    int rows_per_group, pattern;
    uint64_t folded; /* the XOR of what it read, so that the loads are not optimised away */
} job;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void *read_share(void *arg) {
    job *j = arg;
    __m256i acc = _mm256_setzero_si256();
    if (j->pattern == PLAIN) {
        for (size_t o = 0; o + 64 <= j->bytes; o += 64) {
            acc = _mm256_xor_si256(acc, _mm256_loadu_si256((const __m256i *)(const void *)(j->buf + o)));
            acc = _mm256_xor_si256(acc, _mm256_loadu_si256((const __m256i *)(const void *)(j->buf + o + 32)));
        }
    } else if (j->pattern == PROBE4) {
        const size_t len = j->bytes / 4 / 64 * 64;
        for (size_t o = 0; o < len; o += 64)
            for (size_t k = 0; k < 4; k++) {
                const uint8_t *p = j->buf + k * len + o;
                _mm_prefetch((const char *)p + 2048, _MM_HINT_T0);
                acc = _mm256_xor_si256(acc, _mm256_loadu_si256((const __m256i *)(const void *)p));
                acc = _mm256_xor_si256(acc, _mm256_loadu_si256((const __m256i *)(const void *)(p + 32)));
            }
    } else if (j->pattern == SPLIT2_L1 || j->pattern == SPLIT4_L1) {
        const size_t R = (size_t)j->rows_per_group, W = j->row_bytes, B = j->block_bytes;
        const size_t group = R * W, steps = W / B, K = j->pattern == SPLIT2_L1 ? 2 : 4;
        const size_t len = j->bytes / K / group * group;
        for (size_t g0 = 0; g0 < len; g0 += group)
            for (size_t k = 0; k < K; k++) {
                const uint8_t *g = j->buf + k * len + g0, *next = g + group;
                for (size_t s = 0; s < steps; s++) {
                    for (size_t o = 0; o < R * B; o += 64) _mm_prefetch((const char *)next + o, _MM_HINT_T0);
                    next += R * B;
                    for (size_t r = 0; r < R; r++) {
                        const uint8_t *p = g + r * W + s * B;
                        for (size_t o = 0; o < B; o += 64) {
                            acc = _mm256_xor_si256(acc, _mm256_loadu_si256((const __m256i *)(const void *)(p + o)));
                            acc = _mm256_xor_si256(acc,
                                                   _mm256_loadu_si256((const __m256i *)(const void *)(p + o + 32)));
                        }
                    }
                }
            }
    } else {
        const size_t R = (size_t)j->rows_per_group, W = j->row_bytes, B = j->block_bytes;
        const size_t group = R * W, steps = W / B;
        for (size_t g0 = 0; g0 + group <= j->bytes; g0 += group) {
            const uint8_t *g = j->buf + g0, *next = g + group;
            for (size_t s = 0; s < steps; s++) {
                if (j->pattern == STREAM_L1) {
                    for (size_t o = 0; o < R * B; o += 64) _mm_prefetch((const char *)next + o, _MM_HINT_T0);
                    next += R * B;
                }
                for (size_t r = 0; r < R; r++) {
                    const uint8_t *p = g + r * W + s * B;
                    for (size_t o = 0; o < B; o += 64) {
                        if (j->pattern == ROWS_L2) _mm_prefetch((const char *)p + group + o, _MM_HINT_T1);
                        acc = _mm256_xor_si256(acc, _mm256_loadu_si256((const __m256i *)(const void *)(p + o)));
                        acc = _mm256_xor_si256(acc, _mm256_loadu_si256((const __m256i *)(const void *)(p + o + 32)));
                    }
                }
            }
        }
    }
    uint64_t lanes[4];
    memcpy(lanes, &acc, sizeof lanes);
    j->folded = lanes[0] ^ lanes[1] ^ lanes[2] ^ lanes[3];
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    const long row_bytes = argc > 1 ? atol(argv[1]) : 1152, rows = argc > 2 ? atol(argv[2]) : 4;
    const long block_bytes = argc > 3 ? atol(argv[3]) : 128, mib = argc > 4 ? atol(argv[4]) : 1024;
    const int reps = argc > 5 ? atoi(argv[5]) : 7;
    if (row_bytes < 64 || rows < 1 || rows > 64 || block_bytes < 64 || block_bytes % 64 || row_bytes % block_bytes ||
        mib < 64 || mib > 16384 || reps < 1 || reps > 99) {
        fprintf(stderr, "usage: %s [row_bytes rows_per_group block_bytes buffer_MiB reps]\n"
                        "  row_bytes a multiple of block_bytes, block_bytes a multiple of 64, 1..64 rows, "
                        "64..16384 MiB, 1..99 reps\n", argv[0]);
        return 2;
    }
    const size_t bytes = (size_t)mib << 20;
    uint8_t *buf = aligned_alloc(64, bytes);
    if (!buf) {
        fprintf(stderr, "out of memory for %ld MiB\n", mib);
        return 1;
    }
    for (size_t i = 0; i < bytes; i++) buf[i] = (uint8_t)(i * 131u);
    double gbs[N_PATTERNS][2][99];
    uint64_t sink = 0;
    for (int rep = 0; rep < reps; rep++)
        for (int p = 0; p < N_PATTERNS; p++)
            for (int threads = 1; threads <= 2; threads++) {
                job jobs[2];
                pthread_t tid[2];
                const size_t share = bytes / (size_t)threads;
                const double t0 = now_s();
                for (int t = 0; t < threads; t++) {
                    jobs[t] = (job){buf + share * (size_t)t, share, (size_t)row_bytes, (size_t)block_bytes, (int)rows,
                                    p, 0};
                    pthread_create(&tid[t], NULL, read_share, &jobs[t]);
                }
                for (int t = 0; t < threads; t++) {
                    pthread_join(tid[t], NULL);
                    sink ^= jobs[t].folded;
                }
                gbs[p][threads - 1][rep] = (double)bytes / (now_s() - t0) / 1e9;
            }
    printf("rows of %ld bytes, %ld per group, blocks of %ld bytes; %ld MiB; %d repetitions, interleaved (check %llx)\n",
           row_bytes, rows, block_bytes, mib, reps, (unsigned long long)(sink & 0xff));
    printf("%-10s %16s %16s\n", "pattern", "1 thread GB/s", "2 threads GB/s");
    for (int p = 0; p < N_PATTERNS; p++) {
        printf("%-10s", pattern_names[p]);
        for (int t = 0; t < 2; t++) {
            qsort(gbs[p][t], (size_t)reps, sizeof(double), cmp_double);
            printf("   med %5.1f max %5.1f", gbs[p][t][reps / 2], gbs[p][t][reps - 1]);
        }
        printf("\n");
    }
    free(buf);
    return 0;
}
