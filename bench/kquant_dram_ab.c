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
 * KQ_PAGES=huge in the environment puts W (of the read and of both kernels) in 2 MiB pages (MADV_HUGEPAGE on
 * 2 MiB-aligned memory; the count of AnonHugePages it got is printed); KQ_PAGES=both keeps a copy of W in each kind
 * of page and runs all three variants on each in every round (six variants), so that the two page sizes are
 * compared on the same machine state: the 2 MiB rows' "of XOR" figures are fractions of the 2 MiB read.
 *
 * kquant_dram_ab [threads [rounds [unit_rows]]] */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/mman.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/avx2.h"
#include "kernels/quant.h"
#include "util/half.h"
#include "ab_util.h"

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

typedef struct {
    pthread_barrier_t *start, *end;
    const uint8_t *wp[2]; /* this thread's share: in malloc's pages, and (or only, wp[0] == wp[1]) in 2 MiB pages */
    size_t bytes, rb;
    const tg_q8k_block *x;
    float *y;
    gemv_fn fn[2];
    int variant; /* set by the main thread between barriers: 0 XOR, 1 A, 2 B (+ 3: on wp[1]), -1 quit */
    uint64_t sink;
} worker;

static void *work(void *p) {
    worker *k = p;
    for (;;) {
        pthread_barrier_wait(k->start);
        if (k->variant < 0) return NULL;
        const uint8_t *w = k->wp[k->variant / 3];
        if (k->variant % 3 == 0) {
            uint64_t a = 0;
            const uint64_t *q = (const void *)w;
            for (size_t i = 0; i < k->bytes / 8; i++) a ^= q[i];
            k->sink ^= a;
        } else {
            const int64_t rows = (int64_t)(k->bytes / k->rb);
            for (int64_t r = 0; r < rows; r += UNIT_ROWS)
                k->fn[k->variant % 3 - 1](w + (size_t)r * k->rb, k->rb, rows - r < UNIT_ROWS ? rows - r : UNIT_ROWS,
                                      k->x, COLS, k->y);
        }
        pthread_barrier_wait(k->end);
    }
}

/* W of `bytes`: malloc's, or 2 MiB-aligned memory advised to be backed by 2 MiB pages. */
static uint8_t *alloc_w(size_t bytes, bool huge) {
    if (!huge) return malloc(bytes);
    const size_t hp = (size_t)2 << 20, n = (bytes + hp - 1) / hp * hp;
    uint8_t *w = aligned_alloc(hp, n);
    if (w && madvise(w, n, MADV_HUGEPAGE) != 0) perror("madvise");
    return w;
}

/* AnonHugePages of this process in kB (smaps_rollup), -1 if unreadable. */
static long anon_huge_kb(void) {
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1) break;
    fclose(f);
    return kb;
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
    const char *pages = getenv("KQ_PAGES") ? getenv("KQ_PAGES") : "small";
    const bool huge = strcmp(pages, "huge") == 0, both = strcmp(pages, "both") == 0;
    const int NV = both ? 6 : 3;
    printf("W rows of %d columns, %d MiB per thread, %d threads, units of %lld rows, %d rounds, pages: %s\n", COLS,
           256, T, (long long)UNIT_ROWS, rounds, both ? "malloc's and 2 MiB" : huge ? "2 MiB" : "malloc's");
    for (unsigned k = 0; k < sizeof ty / sizeof ty[0]; k++) {
        const size_t rb = ty[k].bb * COLS / 256, per = ((size_t)256 << 20) / rb * rb;
        pthread_barrier_t start, end;
        pthread_barrier_init(&start, NULL, (unsigned)T + 1);
        pthread_barrier_init(&end, NULL, (unsigned)T + 1);
        worker wk[MAX_THREADS];
        pthread_t th[MAX_THREADS];
        for (int t = 0; t < T; t++) {
            uint8_t *w = alloc_w(per, huge);
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
            uint8_t *w2 = w;
            if (both) {
                if (!(w2 = alloc_w(per, true))) return 1;
                memcpy(w2, w, per);
            }
            wk[t] = (worker){&start, &end, {w, w2}, per, rb, xk, y, {ty[k].fn[0], ty[k].fn[1]}, 0, 0};
            pthread_create(&th[t], NULL, work, &wk[t]);
        }
        /* the same bits: the first 256 rows of thread 0's share */
        for (int v = 0; v < 2; v++) ty[k].fn[v](wk[0].wp[0], rb, 256, xk, COLS, yv[v]);
        if (huge || both) printf("AnonHugePages: %ld MiB\n", anon_huge_kb() / 1024);
        const bool same = memcmp(yv[0], yv[1], 256 * sizeof(float)) == 0;
        double gbs[6][MAX_ROUNDS], ra[2][MAX_ROUNDS], rbx[2][MAX_ROUNDS], rba[2][MAX_ROUNDS], rh[3][MAX_ROUNDS];
        for (int r = -1; r < rounds; r++) { /* round -1 warms up */
            double t[6];
            for (int i = 0; i < NV; i++) {
                const int v = (i + (r < 0 ? 0 : r)) % NV;
                for (int j = 0; j < T; j++) wk[j].variant = v;
                pthread_barrier_wait(&start);
                const double t0 = ab_seconds();
                pthread_barrier_wait(&end);
                t[v] = ab_seconds() - t0;
            }
            if (r < 0) continue;
            for (int v = 0; v < NV; v++) gbs[v][r] = (double)per * T / t[v] / 1e9;
            for (int p = 0; p < NV / 3; p++) {
                ra[p][r] = t[3 * p] / t[3 * p + 1];
                rbx[p][r] = t[3 * p] / t[3 * p + 2];
                rba[p][r] = t[3 * p + 1] / t[3 * p + 2];
            }
            if (both)
                for (int v = 0; v < 3; v++) rh[v][r] = t[v] / t[v + 3];
        }
        for (int j = 0; j < T; j++) wk[j].variant = -1;
        pthread_barrier_wait(&start);
        for (int j = 0; j < T; j++) {
            pthread_join(th[j], NULL);
            if (wk[j].wp[1] != wk[j].wp[0]) free((void *)wk[j].wp[1]);
            free((void *)wk[j].wp[0]);
            free(wk[j].y);
        }
        pthread_barrier_destroy(&start);
        pthread_barrier_destroy(&end);
        for (int p = 0; p < NV / 3; p++) {
            const double mx = median(gbs[3 * p], rounds), m_a = median(gbs[3 * p + 1], rounds),
                         m_b = median(gbs[3 * p + 2], rounds);
            printf("%s%s  GB/s (medians): XOR %.2f  A %.2f  B %.2f   of XOR: A %.3f  B %.3f   B/A %.3fx  %s\n",
                   ty[k].name, both ? (p ? " 2M" : " 4K") : "", mx, m_a, m_b, median(ra[p], rounds),
                   median(rbx[p], rounds), median(rba[p], rounds), same ? "same bits" : "DIFFERENT BITS");
        }
        if (both)
            printf("%s  2 MiB pages / malloc's (speed, medians of per-round ratios): XOR %.3fx  A %.3fx  B %.3fx\n",
                   ty[k].name, median(rh[0], rounds), median(rh[1], rounds), median(rh[2], rounds));
    }
    free(xf);
    free(xk);
    free(yv[0]);
    free(yv[1]);
    return 0;
}
