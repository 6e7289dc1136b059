/* bench/kernels.c — checks each fast matvec against the reference, then times matvec (GB/s of weights) and matmul
 * (GFLOP/s) per weight type (tests/cli/test_bench_programs.sh runs it at a tiny size). Matvec streams W from memory
 * (copies of it totalling well over the L3 cache), as decoding a real model does; "cpu GB/s" divides by CPU time
 * per thread instead of wall time, which is steadier on a shared machine. A type with kernels for the repacked
 * layout (kernels/repack.h: Q8_0 / Q4_0 with AVX-512 VNNI) is measured twice, in the file's layout and repacked
 * ("Q8_0 rp"), as the model loader holds it.
 *
 * Threads: the production team (util/thread_pool.h), the one the forward pass runs on, so this measures the path
 * production runs.
 *
 * Build and run from the repository root: `make bench-programs` (release flags, on the release library), then
 *   build/release/bench/kernels [rows cols n_tokens threads pool_MiB types]
 * types: a comma-separated list of type names, any case (e.g. q8_0,f16), to run only those. Matmul cycles through
 * the same copies of W as matvec (from DRAM by default, as batched decoding of a large model reads them); "mm cpu
 * GFLOP/s" divides by CPU time per thread.
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */

#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/ggml_blocks.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "kernels/repack.h"
#include "kernels/types.h"
#include "util/half.h"
#include "util/thread_pool.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU time of the whole process (all threads): on a shared machine, wall time includes time spent descheduled. */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static float unit(uint64_t *s) { return (float)((double)(next(s) >> 11) * 0x1.0p-53 * 2.0 - 1.0); }

/* Random weights of `type`: uniform values through the type's reference encoder (types.h), or, for the GGUF block
 * types tinygpt only reads (ggml_blocks.h), random codes with small random fp16 scales; NULL for any other type. */
static void *make_weights(tg_dtype type, int64_t rows, int64_t cols, uint64_t *s) {
    const tg_weight_type *wt = tg_weight_type_of(type);
    size_t rb = tg_row_bytes(type, cols);
    int scale_at[2];
    const bool random_blocks = !wt->encode_row && tg_ggml_scale_fields(type, scale_at);
    if ((!wt->encode_row && !random_blocks) || rb == 0) return NULL;
    uint8_t *w = malloc(rb * (size_t)rows);
    float *tmp = malloc((size_t)cols * sizeof(float));
    if (!w || !tmp) {
        free(w);
        free(tmp);
        return NULL;
    }
    if (random_blocks) {
        for (size_t i = 0; i < rb * (size_t)rows; i++) w[i] = (uint8_t)next(s);
        for (size_t b = 0; b < rb * (size_t)rows / wt->block_bytes; b++)
            for (int f = 0; f < 2 && scale_at[f] >= 0; f++) {
                const uint16_t h = tg_f32_to_f16(unit(s) * 0.001f);
                memcpy(w + b * wt->block_bytes + (size_t)scale_at[f], &h, 2);
            }
        free(tmp);
        return w;
    }
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t j = 0; j < cols; j++) tmp[j] = unit(s) * 0.05f;
        wt->encode_row(tmp, w + (size_t)r * rb, cols);
    }
    free(tmp);
    return w;
}

int main(int argc, char **argv) {
    int64_t rows = argc > 1 ? atoll(argv[1]) : 4096;
    int64_t cols = argc > 2 ? atoll(argv[2]) : 4096;
    int64_t ntok = argc > 3 ? atoll(argv[3]) : 32;
    int threads = argc > 4 ? atoi(argv[4]) : 2;
    double pool_mib = argc > 5 ? atof(argv[5]) : 512.0; /* 512 MiB: from DRAM; ~20 MiB: a small model from L3 */
    const char *only = argc > 6 ? argv[6] : NULL;
    uint64_t seed = 42;
    float *x = malloc((size_t)(cols * ntok) * sizeof(float));
    float *y = malloc((size_t)(rows * ntok) * sizeof(float));
    float *yr = malloc((size_t)rows * sizeof(float));
    tg_pool *team = tg_pool_new(threads, NULL);
    if (!x || !y || !yr || !team) return 1;
    threads = tg_pool_threads(team);
    for (int64_t i = 0; i < cols * ntok; i++) x[i] = unit(&seed);
    printf("W [%lld, %lld], matmul over %lld tokens, %d threads\n", (long long)rows, (long long)cols,
           (long long)ntok, threads);
    printf("%-8s %8s %9s %10s %12s %12s %10s %14s\n", "type", "max relerr", "mv ms", "mv GB/s", "mv cpu GB/s",
           "mm ms/token", "mm GFLOP/s", "mm cpu GFLOP/s");
    for (int t = 0; t < TG_DT_COUNT; t++) {
        tg_dtype type = (tg_dtype)t;
        if (only) {
            const char *name = tg_dtype_name(type), *p = only;
            const size_t len = strlen(name);
            bool listed = false;
            while (*p && !listed) {
                const size_t n = strcspn(p, ",");
                listed = n == len;
                for (size_t i = 0; listed && i < n; i++) listed = tolower((unsigned char)p[i]) == tolower((unsigned char)name[i]);
                p += n + (p[n] == ',');
            }
            if (!listed) continue;
        }
        void *data = make_weights(type, rows, cols, &seed);
        if (!data) {
            printf("%-6s (no encoder or no memory: skipped)\n", tg_dtype_name(type));
            continue;
        }
        for (int rp = 0; rp < (tg_repack_available(type) ? 2 : 1); rp++) { /* the file's layout, then repacked */
            tg_tensor w = {type, rows, cols, data, 0};
            if (rp) {
                uint8_t *packed = malloc(tg_row_bytes(type, cols) * (size_t)rows);
                if (!packed) return 1;
                tg_repack_rows(type, data, packed, rows, cols);
                w.data = packed;
                w.row_group = TG_REPACK_ROWS;
            }
            /* check first (relative to the largest |y|, a few hundred rows are enough) */
            tg_tensor head = w;
            head.rows = rows < 256 ? rows : 256;
            tg_matvec_ref(&head, x, yr);
            tg_matvec(&head, x, y, team);
            double maxerr = 0.0, ymax = 0.0;
            for (int64_t i = 0; i < head.rows; i++) ymax = fmax(ymax, fabs(yr[i]));
            for (int64_t i = 0; i < head.rows; i++) maxerr = fmax(maxerr, fabs(y[i] - yr[i]) / ymax);
            /* matvec: copies of W totalling >= pool_mib (512 MiB >> L3 by default), cycled through, about 0.5 s */
            double bytes = (double)tg_row_bytes(type, cols) * (double)rows;
            int n_copies = (int)(pool_mib * 1048576.0 / bytes) + 1;
            uint8_t *pool = malloc((size_t)bytes * (size_t)n_copies);
            if (!pool) return 1;
            for (int c = 0; c < n_copies; c++) memcpy(pool + (size_t)c * (size_t)bytes, w.data, (size_t)bytes);
            int reps = 0;
            double t0 = now_s(), c0 = cpu_s(), t1;
            do {
                tg_tensor wc = w;
                wc.data = pool + (size_t)(reps % n_copies) * (size_t)bytes;
                tg_matvec(&wc, x, y, team);
                reps++;
                t1 = now_s();
            } while (t1 - t0 < 0.5);
            double mv = (t1 - t0) / reps, mv_cpu = (cpu_s() - c0) / reps / threads;
            /* matmul over the same copies */
            reps = 0;
            t0 = now_s();
            c0 = cpu_s();
            do {
                tg_tensor wc = w;
                wc.data = pool + (size_t)(reps % n_copies) * (size_t)bytes;
                tg_matmul(&wc, x, ntok, y, team);
                reps++;
                t1 = now_s();
            } while (t1 - t0 < 0.3);
            double mm = (t1 - t0) / reps, mm_cpu = (cpu_s() - c0) / reps / threads;
            free(pool);
            const double flop = 2.0 * (double)rows * (double)cols * (double)ntok;
            char label[16];
            snprintf(label, sizeof label, "%s%s", tg_dtype_name(type), rp ? " rp" : "");
            printf("%-8s %8.2e %9.3f %10.2f %12.2f %12.3f %10.2f %14.2f\n", label, maxerr, mv * 1e3, bytes / mv / 1e9,
                   bytes / mv_cpu / 1e9, mm * 1e3 / (double)ntok, flop / mm / 1e9, flop / mm_cpu / 1e9);
            if (rp) free((void *)w.data);
        }
        free(data);
    }
    tg_pool_free(team);
    free(x);
    free(y);
    free(yr);
    return 0;
}
