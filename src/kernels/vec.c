/* vec.c — the vector primitives of vec.h, each run by the kernel table in use (kernels.h; the scalar table's
 * versions are kernels.c's). */
#include "kernels/vec.h"

#include <math.h>

#include "kernels/kernels.h"
#include "util/half.h"

void tg_axpy_f32(float a, const float *x, float *y, int64_t n) { tg_kernels()->axpy_f32(a, x, y, n); }

void tg_scale_f32(float *x, float a, int64_t n) { tg_kernels()->scale_f32(x, a, n); }

void tg_f16_to_f32_row(const uint16_t *src, float *dst, int64_t n) { tg_kernels()->f16_to_f32_row(src, dst, n); }

void tg_f32_to_f16_row(const float *src, uint16_t *dst, int64_t n) { tg_kernels()->f32_to_f16_row(src, dst, n); }

void tg_bf16_to_f32_row(const uint16_t *src, float *dst, int64_t n) {
    for (int64_t i = tg_kernels()->bf16_to_f32_row(src, dst, n); i < n; i++) dst[i] = tg_bf16_to_f32(src[i]);
}

void tg_f32_to_bf16_row(const float *src, uint16_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = tg_f32_to_bf16(src[i]);
}

float tg_max_skip_nan(const float *x, int64_t n) {
    float m = -INFINITY;
    for (int64_t i = tg_kernels()->max_skip_nan(x, n, &m); i < n; i++)
        if (x[i] > m) m = x[i];
    return m;
}

float tg_exp_shift_sum(float *x, int64_t n, float m) { return tg_kernels()->exp_shift_sum(x, n, m); }
