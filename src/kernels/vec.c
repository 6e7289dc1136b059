/* vec.c — dispatch and scalar versions of the vector primitives in vec.h. */
#include "kernels/vec.h"

#include <math.h>

#include "kernels/avx2.h"
#include "util/half.h"

void tg_axpy_f32(float a, const float *x, float *y, int64_t n) {
#if TG_HAVE_AVX2
    tg_avx2_axpy_f32(a, x, y, n);
#else
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
#endif
}

void tg_scale_f32(float *x, float a, int64_t n) {
#if TG_HAVE_AVX2
    tg_avx2_scale_f32(x, a, n);
#else
    for (int64_t i = 0; i < n; i++) x[i] *= a;
#endif
}

void tg_f16_to_f32_row(const uint16_t *src, float *dst, int64_t n) {
#if TG_HAVE_AVX2
    tg_avx2_f16_to_f32_row(src, dst, n);
#else
    for (int64_t i = 0; i < n; i++) dst[i] = tg_f16_to_f32(src[i]);
#endif
}

void tg_f32_to_f16_row(const float *src, uint16_t *dst, int64_t n) {
#if TG_HAVE_AVX2
    tg_avx2_f32_to_f16_row(src, dst, n);
#else
    for (int64_t i = 0; i < n; i++) dst[i] = tg_f32_to_f16(src[i]);
#endif
}

void tg_bf16_to_f32_row(const uint16_t *src, float *dst, int64_t n) {
    int64_t i = 0;
#if TG_HAVE_AVX2
    i = tg_avx2_bf16_to_f32_row(src, dst, n);
#endif
    for (; i < n; i++) dst[i] = tg_bf16_to_f32(src[i]);
}

void tg_f32_to_bf16_row(const float *src, uint16_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = tg_f32_to_bf16(src[i]);
}

float tg_max_skip_nan(const float *x, int64_t n) {
    int64_t i = 0;
    float m = -INFINITY;
#if TG_HAVE_AVX2
    i = tg_avx2_max_skip_nan(x, n, &m);
#endif
    for (; i < n; i++)
        if (x[i] > m) m = x[i];
    return m;
}

float tg_exp_shift_sum(float *x, int64_t n, float m) {
#if TG_HAVE_AVX2
    return tg_avx2_exp_shift_sum(x, n, m);
#else
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] = expf(x[i] - m));
    return (float)sum;
#endif
}
