/* bench/quant32_ab.c — two builds of gemv_avx2.c side by side in one process (symbols prefixed A_ and B_ by
 * bench/kquant-ab.sh --q32), timed alternately on the same W and the same activation: GB/s of W for the Q8_0 and Q4_0
 * decode kernels (the best of 3000 alternating calls) at two shapes that stay in L2 (1024 rows x 576 columns, the
 * SmolLM2-135M width; 256 x 2048, TinyLlama-1.1B's), the B/A speed ratio, and whether both builds give the same
 * bits. Not part of the tests. */
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
#define DECLARE(v, t) void v##_tg_avx2_gemv_##t(const uint8_t *, size_t, int64_t, const void *, int64_t, float *);
DECLARE(A, q8_0) DECLARE(A, q4_0) DECLARE(B, q8_0) DECLARE(B, q4_0)

int main(void) {
    uint64_t seed = 1; /* the stream of weights and activations */
    const struct {
        int rows, cols;
    } shapes[] = {{1024, 576}, {256, 2048}};
    const struct {
        const char *name;
        gemv_fn gemv[2];
        size_t block; /* bytes per 32 weights; the fp16 scale first */
    } types[] = {
        {"Q8_0", {A_tg_avx2_gemv_q8_0, B_tg_avx2_gemv_q8_0}, 34},
        {"Q4_0", {A_tg_avx2_gemv_q4_0, B_tg_avx2_gemv_q4_0}, 18},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int rows = shapes[s].rows, cols = shapes[s].cols;
        float *x = malloc(sizeof(float) * (size_t)cols), *y[2] = {malloc(sizeof(float) * (size_t)rows),
                                                                    malloc(sizeof(float) * (size_t)rows)};
        tg_q8x_block *xq = malloc(sizeof(tg_q8x_block) * (size_t)(cols / 32));
        if (!x || !y[0] || !y[1] || !xq) return 1;
        for (int i = 0; i < cols; i++) x[i] = (float)(ab_rand(&seed) % 1000) / 1000.0f - 0.5f;
        tg_quantize_q8x(x, xq, cols);
        for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
            const size_t rb = types[k].block * (size_t)cols / 32;
            uint8_t *w = malloc(rb * (size_t)rows);
            if (!w) return 1;
            for (size_t i = 0; i < rb * (size_t)rows; i++) w[i] = (uint8_t)ab_rand(&seed);
            const uint16_t h = tg_f32_to_f16(0.001f);
            for (size_t b = 0; b < rb * (size_t)rows / types[k].block; b++) memcpy(w + b * types[k].block, &h, 2);
            double best[2] = {1e9, 1e9};
            for (int tr = 0; tr < 3000; tr++)
                for (int v = 0; v < 2; v++) {
                    const double t0 = ab_seconds();
                    types[k].gemv[v](w, rb, rows, xq, cols, y[v]);
                    const double t = ab_seconds() - t0;
                    if (t < best[v]) best[v] = t;
                }
            printf("%s  %4d x %4d  decode A %.1f  B %.1f GB/s  B/A %.3fx  %s\n", types[k].name, rows, cols,
                   (double)(rb * (size_t)rows) / best[0] / 1e9, (double)(rb * (size_t)rows) / best[1] / 1e9,
                   best[0] / best[1], memcmp(y[0], y[1], sizeof(float) * (size_t)rows) ? "DIFFERENT" : "same bits");
            free(w);
        }
        free(x);
        free(y[0]);
        free(y[1]);
        free(xq);
    }
    return 0;
}
