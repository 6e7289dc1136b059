/* bench/attention.c — decode attention alone: one token's attention over every layer of a cache filled to a depth
 * with random keys and values, per cache precision, on one thread (the forward pass gives each thread whole
 * kv-heads, so one thread's time per kv-head is what a team divides). Reports milliseconds of CPU per token and the
 * cache bytes that token reads; the weights' share of decoding is not in it (tinygpt bench measures the whole).
 * Precisions are interleaved per repetition; medians. tests/cli/test_bench_programs.sh runs it at a tiny size.
 *
 * Build and run from the repository root: `make bench-programs`, then
 *   build/release/bench/attention [depth layers heads kv_heads head_dim reps precisions]
 * Defaults: the TinyLlama-1.1B shape (22 layers, 32 query heads, 4 kv-heads, head dim 64) at depth 16384, 5
 * repetitions of 8 tokens, "fp16,int8,int4,int2".
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvcache/kvcache.h"

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static float urand(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((*s >> 40) * (1.0 / 16777216.0));
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    tg_kvcache *c;
    tg_kv_precision prec;
    size_t bytes;
} bench_cache;

int main(int argc, char **argv) {
    const int64_t depth = argc > 1 ? atoll(argv[1]) : 16384;
    const int L = argc > 2 ? atoi(argv[2]) : 22, NH = argc > 3 ? atoi(argv[3]) : 32, H = argc > 4 ? atoi(argv[4]) : 4;
    const int D = argc > 5 ? atoi(argv[5]) : 64, reps = argc > 6 ? atoi(argv[6]) : 5;
    char precs[256];
    snprintf(precs, sizeof precs, "%s", argc > 7 ? argv[7] : "fp16,int8,int4,int2");
    if (depth < 1 || L < 1 || H < 1 || NH % H != 0 || D < 8 || reps < 1) {
        fprintf(stderr, "bench_attention: bad arguments\n");
        return 1;
    }
    bench_cache caches[8];
    int n = 0;
    for (char *tok = strtok(precs, ","); tok && n < 8; tok = strtok(NULL, ",")) {
        tg_kv_precision p;
        if (!tg_kv_precision_parse(tok, &p)) {
            fprintf(stderr, "bench_attention: unknown precision '%s'\n", tok);
            return 1;
        }
        caches[n++].prec = p;
    }
    const tg_cache_shape shape = {.n_layers = L, .n_heads = NH, .n_kv_heads = H, .head_dim = D,
                                  .rope_theta = 10000.0f, .rope_style = TG_ROPE_HALF, .context_length = depth + 16};
    float *k = malloc((size_t)H * D * sizeof(float)), *v = malloc((size_t)H * D * sizeof(float));
    float *q = malloc((size_t)NH * D * sizeof(float)), *q_rot = malloc((size_t)NH * D * sizeof(float));
    if (!k || !v || !q || !q_rot) return 1;
    uint64_t seed = 1;
    for (int i = 0; i < n; i++) {
        tg_cache_params p = tg_cache_default_params();
        p.key_precision = p.value_precision = caches[i].prec;
        tg_error err = {0};
        caches[i].c = tg_kvcache_new(&shape, &p, &err);
        if (!caches[i].c) {
            fprintf(stderr, "bench_attention: %s\n", err.msg);
            return 1;
        }
        for (int64_t t = 0; t < depth; t++)
            for (int l = 0; l < L; l++) {
                for (int j = 0; j < H * D; j++) {
                    k[j] = 2.0f * urand(&seed) - 1.0f;
                    v[j] = 2.0f * urand(&seed) - 1.0f;
                }
                if (!tg_kvcache_append(caches[i].c, l, t, k, v)) {
                    fprintf(stderr, "bench_attention: the cache refused token %lld\n", (long long)t);
                    return 1;
                }
            }
        tg_cache_report r;
        tg_kvcache_report(caches[i].c, depth, &r);
        caches[i].bytes = r.bytes_in_use;
    }
    size_t work_floats = 0, part_floats = 0;
    for (int i = 0; i < n; i++) {
        if (tg_kvcache_work_floats(caches[i].c) > work_floats) work_floats = tg_kvcache_work_floats(caches[i].c);
        if (tg_kvcache_part_floats(caches[i].c) > part_floats) part_floats = tg_kvcache_part_floats(caches[i].c);
    }
    float *work = malloc(work_floats * sizeof(float)), *parts = malloc(part_floats * sizeof(float));
    float *out = malloc((size_t)NH * D * sizeof(float));
    double *ms = malloc((size_t)n * (size_t)reps * sizeof(double));
    if (!work || !parts || !out || !ms) return 1;
    const int tokens = 8;
    const int64_t pos = depth - 1;
    for (int r = 0; r < reps; r++)
        for (int i = 0; i < n; i++) {
            tg_kvcache *c = caches[i].c;
            const double t0 = cpu_s();
            for (int tk = 0; tk < tokens; tk++)
                for (int l = 0; l < L; l++) {
                    for (int j = 0; j < NH * D; j++) q[j] = 2.0f * urand(&seed) - 1.0f;
                    tg_kvcache_query(c, l, pos, q, q_rot);
                    for (int h = 0; h < H; h++) {
                        tg_kvcache_attend_piece(c, l, pos, q_rot, h, 0, 1, parts, work);
                        tg_kvcache_attend_combine(c, parts, 1, out + (int64_t)h * (NH / H) * D);
                    }
                }
            ms[i * reps + r] = 1e3 * (cpu_s() - t0) / tokens;
        }
    printf("attention at depth %lld: %d layers, %d query heads, %d kv-heads, head dim %d; one thread, CPU ms per "
           "token, medians of %d x %d tokens\n",
           (long long)depth, L, NH, H, D, reps, tokens);
    printf("%-6s %10s %12s %10s\n", "cache", "ms/token", "cache MB", "GB/s");
    for (int i = 0; i < n; i++) {
        qsort(ms + i * reps, (size_t)reps, sizeof(double), cmp_double);
        const double med = ms[i * reps + reps / 2], mb = (double)caches[i].bytes / 1e6;
        printf("%-6s %10.3f %12.1f %10.2f\n", tg_kv_precision_name(caches[i].prec), med, mb, mb / med);
        tg_kvcache_free(caches[i].c);
    }
    free(k), free(v), free(q), free(q_rot), free(work), free(parts), free(out), free(ms);
    return 0;
}
