/* bench/kquant512_ab.c — two builds of gemv_kquant_avx512.c side by side in one process (symbols prefixed A_ and B_
 * by bench/kquant-ab.sh --avx512), timed alternately on the same W (256 rows x 2048 columns, in L2) and the same
 * activations: GB/s of W for the decode kernels (the best of 3000 alternating calls) and the B/A speed ratio of the
 * 16-token prefill kernels (the best of 200), and whether the two builds' outputs are the same bits. Not part of the
 * tests. */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/avx2.h"
#include "kernels/quant.h"
#include "util/half.h"
#include "ab_util.h"

typedef void (*gemv_fn)(const uint8_t *, size_t, int64_t, const void *, int64_t, float *);
typedef void (*gemm_fn)(const uint8_t *, size_t, int64_t, const tg_q8k_block *, int64_t, int64_t, float *, size_t);
#define DECLARE(v, t)                                                                                                 \
    void v##_tg_avx512_gemv_##t(const uint8_t *, size_t, int64_t, const void *, int64_t, float *);                  \
    void v##_tg_avx512_gemm_q8k_##t(const uint8_t *, size_t, int64_t, const tg_q8k_block *, int64_t, int64_t, float *, \
                                    size_t);
DECLARE(A, q4_k) DECLARE(A, q5_k) DECLARE(A, q6_k) DECLARE(B, q4_k) DECLARE(B, q5_k) DECLARE(B, q6_k)

int main(void) {
    uint64_t seed = 1; /* the stream of weights and activations */
    enum { ROWS = 256, COLS = 2048, TOKENS = 16 };
    const struct {
        const char *name;
        gemv_fn gemv[2];
        gemm_fn gemm[2];
        size_t block;
        int d0, d1; /* the fp16 scale fields set to a small value (-1: none) */
    } types[] = {
        {"Q4_K", {A_tg_avx512_gemv_q4_k, B_tg_avx512_gemv_q4_k}, {A_tg_avx512_gemm_q8k_q4_k, B_tg_avx512_gemm_q8k_q4_k}, 144, 0, 2},
        {"Q5_K", {A_tg_avx512_gemv_q5_k, B_tg_avx512_gemv_q5_k}, {A_tg_avx512_gemm_q8k_q5_k, B_tg_avx512_gemm_q8k_q5_k}, 176, 0, 2},
        {"Q6_K", {A_tg_avx512_gemv_q6_k, B_tg_avx512_gemv_q6_k}, {A_tg_avx512_gemm_q8k_q6_k, B_tg_avx512_gemm_q8k_q6_k}, 210, 208, -1},
    };
    float *x = malloc(sizeof(float) * COLS * TOKENS), *y[2], *ym[2];
    tg_q8k_block *xk = malloc(sizeof(tg_q8k_block) * COLS / 256 * TOKENS);
    for (int v = 0; v < 2; v++) {
        y[v] = malloc(sizeof(float) * ROWS);
        ym[v] = malloc(sizeof(float) * ROWS * TOKENS);
    }
    if (!x || !xk || !y[0] || !y[1] || !ym[0] || !ym[1]) return 1;
    for (int i = 0; i < COLS * TOKENS; i++) x[i] = (float)(ab_rand(&seed) % 1000) / 1000.0f - 0.5f;
    tg_quantize_q8k(x, xk, (int64_t)COLS * TOKENS);
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const size_t rb = types[k].block * COLS / 256;
        uint8_t *w = malloc(rb * ROWS);
        if (!w) return 1;
        for (size_t i = 0; i < rb * ROWS; i++) w[i] = (uint8_t)ab_rand(&seed);
        const uint16_t h = tg_f32_to_f16(0.001f);
        for (size_t b = 0; b < rb * ROWS / types[k].block; b++) {
            memcpy(w + b * types[k].block + types[k].d0, &h, 2);
            if (types[k].d1 >= 0) memcpy(w + b * types[k].block + types[k].d1, &h, 2);
        }
        double best[2] = {1e9, 1e9}, bestm[2] = {1e9, 1e9};
        for (int tr = 0; tr < 3000; tr++)
            for (int v = 0; v < 2; v++) {
                const double t0 = ab_seconds();
                types[k].gemv[v](w, rb, ROWS, xk, COLS, y[v]);
                const double t = ab_seconds() - t0;
                if (t < best[v]) best[v] = t;
            }
        for (int tr = 0; tr < 200; tr++)
            for (int v = 0; v < 2; v++) {
                const double t0 = ab_seconds();
                types[k].gemm[v](w, rb, ROWS, xk, COLS / 256, TOKENS, ym[v], ROWS);
                const double t = ab_seconds() - t0;
                if (t < bestm[v]) bestm[v] = t;
            }
        printf("%s  decode A %.1f  B %.1f GB/s  B/A %.3fx  %s   prefill (%d tokens) B/A %.3fx  %s\n", types[k].name,
               (double)(rb * ROWS) / best[0] / 1e9, (double)(rb * ROWS) / best[1] / 1e9, best[0] / best[1],
               memcmp(y[0], y[1], sizeof(float) * ROWS) ? "DIFFERENT" : "same bits", TOKENS, bestm[0] / bestm[1],
               memcmp(ym[0], ym[1], sizeof(float) * ROWS * TOKENS) ? "DIFFERENT" : "same bits");
        free(w);
    }
    return 0;
}
