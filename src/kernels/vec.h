/* vec.h — dense vector primitives for attention and friends: dot products, axpy, scaling, fp16 row conversion.
 * Each call runs in the kernel table in use (kernels.h: AVX2 + FMA + F16C, AVX-512 or scalar, chosen at run
 * time; the conversions and the maximum give the same bits in every table, the rest within their stated bounds).
 * Pointers may be unaligned; n may be any non-negative count (no multiple-of-8 requirement); in/out arrays must not
 * overlap unless stated. */
#ifndef TG_KERNELS_VEC_H
#define TG_KERNELS_VEC_H

#include <stdint.h>

/* y[i] += a * x[i]. */
void tg_axpy_f32(float a, const float *x, float *y, int64_t n);
/* x[i] *= a, in place. */
void tg_scale_f32(float *x, float a, int64_t n);
/* dst[i] = f16 -> f32 of src[i] (exact). */
void tg_f16_to_f32_row(const uint16_t *src, float *dst, int64_t n);
/* dst[i] = f32 -> f16 of src[i], round to nearest even; overflow gives Inf, NaN stays NaN (payload may differ). */
void tg_f32_to_f16_row(const float *src, uint16_t *dst, int64_t n);
/* dst[i] = bf16 -> f32 of src[i] (exact). */
void tg_bf16_to_f32_row(const uint16_t *src, float *dst, int64_t n);
/* dst[i] = f32 -> bf16 of src[i], round to nearest even; NaN stays NaN. */
void tg_f32_to_bf16_row(const float *src, uint16_t *dst, int64_t n);

/* x[i] = exp(x[i] - m) in place; returns the sum of the results (partial sums in fp32 over at most 64 elements,
 * added in double). Within 2 ulp of expf per element on the SIMD path; results below about 1e-38 (x - m < -87.3,
 * including -inf) are 0; NaN stays NaN. The softmax building block: m is the maximum, so every x - m <= 0. */
float tg_exp_shift_sum(float *x, int64_t n, float m);

/* The largest of x[0..n) skipping NaN; -inf when n == 0 or every element is NaN (exact: any order gives it). */
float tg_max_skip_nan(const float *x, int64_t n);

#endif
