/* bench/kquant_dram_ab.c — two builds of gemv_kquant_avx2.c (symbols prefixed A_ and B_ by bench/kquant-ab.sh
 * --dram) streaming W from DRAM on T threads, against a plain streaming read of the same memory: the fraction of the
 * read bandwidth each build's decode kernel reaches, the figure `tinygpt bench`'s roofline asks for. Not part of
 * the tests.
 *
 * W: Q4_K and Q6_K rows of 2048 columns (TinyLlama's d_model), 256 MiB per thread, random codes with small scales.
 * Each round runs the three variants in turn (XOR read, A, B; the order rotates every round), every thread over
 * its own share in units of 256 rows (one kernel call each, as the forward's decode units are), and times each
 * variant's pass from a barrier to the last thread's end. On a shared machine the bandwidth moves from second to
 * second; variants a few tens of milliseconds apart see nearly the same machine, so the per-round ratios (A / XOR,
 * B / XOR, B / A), medians over the rounds, are the figures to read. Also checks that A and B give the same bits.
 *
 * kquant_dram_ab [threads [rounds [unit_rows]]] */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/avx2.h"
#include "kernels/quant.h"
#include "util/half.h"

static int64_t UNIT_ROWS = 256; /* rows per kernel call */

typedef void (*gemv_fn)(const uint8_t *, size_t, int64_t, const void *, int64_t, float *);
#define D(v)                                                                                                        \
    void v##_tg_avx2_gemv_q4_k(const uint8_t *, size_t, int64_t, const void *, int64_t, float *);                   \
    void v##_tg_avx2_gemv_q6_k(const uint8_t *, size_t, int64_t, const void *, int64_t, float *);
D(A)
D(B)
#undef D

#define COLS 2048
#define MAX_THREADS 16
#define MAX_ROUNDS 201

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct {
    pthread_barrier_t *start, *end;
    const uint8_t *w; /* this thread's share */
    size_t bytes, rb;
    const tg_q8k_block *x;
    float *y;
    gemv_fn fn[2];
    int variant; /* set by the main thread between barriers: 0 XOR, 1 A, 2 B, -1 quit */
    uint64_t sink;
} worker;

static void *work(void *p) {
    worker *k = p;
    for (;;) {
        pthread_barrier_wait(k->start);
        if (k->variant < 0) return NULL;
        if (k->variant == 0) {
            uint64_t a = 0;
            const uint64_t *q = (const void *)k->w;
            for (size_t i = 0; i < k->bytes / 8; i++) a ^= q[i];
            k->sink ^= a;
        } else {
            const int64_t rows = (int64_t)(k->bytes / k->rb);
            for (int64_t r = 0; r < rows; r += UNIT_ROWS)
                k->fn[k->variant - 1](k->w + (size_t)r * k->rb, k->rb, rows - r < UNIT_ROWS ? rows - r : UNIT_ROWS,
                                      k->x, COLS, k->y);
        }
        pthread_barrier_wait(k->end);
    }
}

static int cmp_d(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv) {
    const int T = argc > 1 ? atoi(argv[1]) : 2;
    const int rounds = argc > 2 ? atoi(argv[2]) : 21;
    if (argc > 3) UNIT_ROWS = atoll(argv[3]);
    if (T < 1 || T > MAX_THREADS || rounds < 1 || rounds > MAX_ROUNDS || UNIT_ROWS < 1) {
        fprintf(stderr, "usage: kquant_dram_ab [threads 1..%d [rounds 1..%d [unit_rows]]]\n", MAX_THREADS, MAX_ROUNDS);
        return 2;
    }
    struct {
        const char *name;
        gemv_fn fn[2];
        size_t bb;
        int sc0, sc1;
    } ty[] = {{"Q4_K", {A_tg_avx2_gemv_q4_k, B_tg_avx2_gemv_q4_k}, 144, 0, 2},
              {"Q6_K", {A_tg_avx2_gemv_q6_k, B_tg_avx2_gemv_q6_k}, 210, 208, -1}};
    uint64_t s = 1;
    float *xf = malloc(COLS * sizeof *xf);
    tg_q8k_block *xk = malloc(sizeof *xk * COLS / 256);
    float *yv[2] = {malloc(256 * sizeof(float)), malloc(256 * sizeof(float))};
    if (!xf || !xk || !yv[0] || !yv[1]) return 1;
    for (int i = 0; i < COLS; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        xf[i] = (float)((int)(s >> 40) % 1000) / 1000.f;
    }
    tg_quantize_q8k(xf, xk, COLS);
    printf("W rows of %d columns, %d MiB per thread, %d threads, units of %lld rows, %d rounds\n", COLS, 256, T,
           (long long)UNIT_ROWS, rounds);
    for (unsigned k = 0; k < sizeof ty / sizeof ty[0]; k++) {
        const size_t rb = ty[k].bb * COLS / 256, per = ((size_t)256 << 20) / rb * rb;
        pthread_barrier_t start, end;
        pthread_barrier_init(&start, NULL, (unsigned)T + 1);
        pthread_barrier_init(&end, NULL, (unsigned)T + 1);
        worker wk[MAX_THREADS];
        pthread_t th[MAX_THREADS];
        for (int t = 0; t < T; t++) {
            uint8_t *w = malloc(per);
            float *y = malloc((size_t)UNIT_ROWS * sizeof *y);
            if (!w || !y) return 1;
            for (size_t i = 0; i < per; i++) {
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                w[i] = (uint8_t)(s >> 33);
            }
            for (size_t b = 0; b < per / ty[k].bb; b++) {
                const uint16_t h = tg_f32_to_f16(0.001f);
                memcpy(w + b * ty[k].bb + ty[k].sc0, &h, 2);
                if (ty[k].sc1 >= 0) memcpy(w + b * ty[k].bb + ty[k].sc1, &h, 2);
            }
            wk[t] = (worker){&start, &end, w, per, rb, xk, y, {ty[k].fn[0], ty[k].fn[1]}, 0, 0};
            pthread_create(&th[t], NULL, work, &wk[t]);
        }
        /* the same bits: the first 256 rows of thread 0's share */
        for (int v = 0; v < 2; v++) ty[k].fn[v](wk[0].w, rb, 256, xk, COLS, yv[v]);
        const bool same = memcmp(yv[0], yv[1], 256 * sizeof(float)) == 0;
        double gbs[3][MAX_ROUNDS], ra[MAX_ROUNDS], rbx[MAX_ROUNDS], rba[MAX_ROUNDS];
        for (int r = -1; r < rounds; r++) { /* round -1 warms up */
            double t[3];
            for (int i = 0; i < 3; i++) {
                const int v = (i + (r < 0 ? 0 : r)) % 3;
                for (int j = 0; j < T; j++) wk[j].variant = v;
                pthread_barrier_wait(&start);
                const double t0 = now();
                pthread_barrier_wait(&end);
                t[v] = now() - t0;
            }
            if (r < 0) continue;
            for (int v = 0; v < 3; v++) gbs[v][r] = (double)per * T / t[v] / 1e9;
            ra[r] = t[0] / t[1];
            rbx[r] = t[0] / t[2];
            rba[r] = t[1] / t[2];
        }
        for (int j = 0; j < T; j++) wk[j].variant = -1;
        pthread_barrier_wait(&start);
        for (int j = 0; j < T; j++) {
            pthread_join(th[j], NULL);
            free((void *)wk[j].w);
            free(wk[j].y);
        }
        pthread_barrier_destroy(&start);
        pthread_barrier_destroy(&end);
        const double mx = median(gbs[0], rounds), m_a = median(gbs[1], rounds), m_b = median(gbs[2], rounds);
        printf("%s  GB/s (medians): XOR %.2f  A %.2f  B %.2f   of XOR: A %.3f  B %.3f   B/A %.3fx  %s\n", ty[k].name,
               mx, m_a, m_b, median(ra, rounds), median(rbx, rounds), median(rba, rounds),
               same ? "same bits" : "DIFFERENT BITS");
    }
    free(xf);
    free(xk);
    free(yv[0]);
    free(yv[1]);
    return 0;
}
