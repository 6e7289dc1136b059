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

/* The largest tile tg_avx2_tile accepts: nr <= 4 rows of W times nt <= 4 activation vectors. */
#define TG_TILE_MAX_ROWS 4
#define TG_TILE_MAX_VECS 4

/* The prefill tile for float weights (F32/F16/BF16): y[t * ldy + r] = dot(row r of W, activation t) for r < nr,
 * t < nt. w: nr rows of `type`, row r at w + r * w_stride bytes (any alignment); x: nt rows of float[cols] at
 * x + t * x_stride bytes. Same arithmetic as tg_avx2_gemv per (row, activation). */
void tg_avx2_tile(tg_dtype type, const uint8_t *w, size_t w_stride, int nr, const uint8_t *x, size_t x_stride, int nt,
                  int64_t cols, float *y, size_t ldy);

/* The decode kernel: y[r] = dot(row r of W, x) for r < nr (any nr >= 0), row r at w + r * w_stride bytes (any
 * alignment). x: float[cols] for F32/F16/BF16, tg_q8x_block[cols/32] for Q8_0/Q4_0 (cols a multiple of 32). Every
 * row's result follows the canonical order of avx2_inline.h, whichever rows are computed together. */
void tg_avx2_gemv(tg_dtype type, const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols,
                  float *y);

/* The prefill kernel for Q8_0 / Q4_0 weights: y[t * ldy + r] for rows r < nr and tokens t < n, x in groups of
 * eight packed activations (xp[g * nb + b] = block b of tokens 8g..8g+7; tg_pack8_q8x). Same arithmetic as
 * tg_avx2_gemv per (row, token). */
void tg_avx2_gemm_quant(tg_dtype type, const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8x_pack8 *xp,
                        int64_t nb, int64_t n, float *y, size_t ldy);

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
/* bf16 -> f32 for the first n - n % 8 elements; returns how many it converted (the caller does the tail). */
int64_t tg_avx2_bf16_to_f32_row(const uint16_t *src, float *dst, int64_t n);
/* vec.h's tg_exp_shift_sum and ops.h's tg_swiglu, eight lanes at a time (same contracts and edge cases). */
float tg_avx2_exp_shift_sum(float *x, int64_t n, float m);
void tg_avx2_swiglu(float *gate, const float *up, int64_t n);

#endif
#endif
