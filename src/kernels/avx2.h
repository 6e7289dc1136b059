/* avx2.h — internal to src/kernels: the AVX2 + FMA + F16C kernels and the macro that says whether they exist.
 * Only the dispatch files (matmul.c, vec.c, quant.c) include this; everything else calls the portable entry
 * points, which fall back to scalar code when the build target lacks these instruction sets. */
#ifndef TG_KERNELS_AVX2_H
#define TG_KERNELS_AVX2_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/quant.h"
#include "kernels/tensor.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define TG_KERNELS_AVX2 1
#else
#define TG_KERNELS_AVX2 0
#endif

#if TG_KERNELS_AVX2

/* The largest tile tg_avx2_tile accepts: nr rows of W times nt activation vectors, nr * nt <= 8 and
 * nr, nt <= 4. */
#define TG_TILE_MAX_ROWS 4
#define TG_TILE_MAX_VECS 4

/* y[t * ldy + r] = dot(row r of W, activation t) for r < nr, t < nt.
 * w:  nr rows of `type`, row r at w + r * w_stride bytes (any alignment).
 * x:  nt activation rows at x + t * x_stride bytes: float[cols] for F32/F16/BF16 weights, tg_q8x_block[cols/32]
 *     for Q8_0/Q4_0 weights (integer dot products). cols is a multiple of 32 for the block types.
 * Supported (nr, nt): nt == 1 with nr in 1..4, or nr in 1..2 with nt in 1..4. */
void tg_avx2_tile(tg_dtype type, const uint8_t *w, size_t w_stride, int nr, const uint8_t *x, size_t x_stride, int nt,
                  int64_t cols, float *y, size_t ldy);

/* Bit-for-bit tg_quantize_q8x_ref (quant.h), eight lanes at a time. */
void tg_avx2_quantize_q8x(const float *x, tg_q8x_block *dst, int64_t n);

/* The vec.h primitives of the same names without the tg_ prefix's dispatch; identical contracts (any n, unaligned
 * pointers, scalar tails for n % 8). */
float tg_avx2_dot_f32(const float *a, const float *b, int64_t n);
void tg_avx2_axpy_f32(float a, const float *x, float *y, int64_t n);
void tg_avx2_scale_f32(float *x, float a, int64_t n);
float tg_avx2_dot_f16(const uint16_t *a, const float *b, int64_t n);
void tg_avx2_axpy_f16(float a, const uint16_t *x, float *y, int64_t n);
void tg_avx2_f16_to_f32_row(const uint16_t *src, float *dst, int64_t n);
void tg_avx2_f32_to_f16_row(const float *src, uint16_t *dst, int64_t n);

#endif
#endif
