/* neon.h — internal to src/kernels: the aarch64 kernels (gemv_neon.c, gemv_q32_neon.c, gemv_q32_dotprod.c,
 * gemm_q32_i8mm.c, the K-quant files) and their tables (kernels_neon.c). Every kernel follows the canonical
 * arithmetic order of kernels/arith_order.h, so its results are the AVX2 kernels' bits on the same inputs, and a
 * row's result never depends on which kernel or which grouping of rows or tokens computed it (prefill in chunks ==
 * decoding token by token). Declared for every build; defined where the files were compiled for aarch64
 * (TG_HAVE_NEON / TG_HAVE_DOTPROD / TG_HAVE_I8MM, util/cpu_features.h). */
#ifndef TG_KERNELS_NEON_H
#define TG_KERNELS_NEON_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/quant.h"
#include "kernels/tensor.h"

/* Float weights (tg_gemv_fn and tg_tile_fn contracts, types.h): F32, F16 and BF16 rows against fp32 activations;
 * the tiles take nr <= 4 rows and nt <= 4 activations. */
void tg_neon_gemv_f32(const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols, float *y);
void tg_neon_gemv_f16(const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols, float *y);
void tg_neon_gemv_bf16(const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols, float *y);
void tg_neon_tile_f32(const uint8_t *w, size_t w_stride, int nr, const uint8_t *x, size_t x_stride, int nt,
                      int64_t cols, float *y, size_t ldy);
void tg_neon_tile_f16(const uint8_t *w, size_t w_stride, int nr, const uint8_t *x, size_t x_stride, int nt,
                      int64_t cols, float *y, size_t ldy);
void tg_neon_tile_bf16(const uint8_t *w, size_t w_stride, int nr, const uint8_t *x, size_t x_stride, int nt,
                       int64_t cols, float *y, size_t ldy);
/* Elementwise primitives of vec.h (the scalar table's bits: a multiply then an add, never fused). */
void tg_neon_axpy_f32(float a, const float *x, float *y, int64_t n);
void tg_neon_scale_f32(float *x, float a, int64_t n);
int64_t tg_neon_bf16_to_f32_row(const uint16_t *src, float *dst, int64_t n);

/* Q8_0 / Q4_0 weights against tg_q8x_block activations (tg_gemv_fn; tg_gemm_q8x_rows_fn: token t's blocks at
 * xq + t * nb): the integer dot product of each block exact in int32, widening multiplies (smull / sadalp) in the
 * NEON files, sdot in the dotprod ones. */
void tg_neon_gemv_q8_0(const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols, float *y);
void tg_neon_gemv_q4_0(const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols, float *y);
void tg_neon_gemm_q8_0(const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8x_block *xq, int64_t nb, int64_t n,
                       float *y, size_t ldy);
void tg_neon_gemm_q4_0(const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8x_block *xq, int64_t nb, int64_t n,
                       float *y, size_t ldy);
void tg_dotprod_gemv_q8_0(const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols, float *y);
void tg_dotprod_gemv_q4_0(const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols, float *y);
void tg_dotprod_gemm_q8_0(const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8x_block *xq, int64_t nb,
                          int64_t n, float *y, size_t ldy);
void tg_dotprod_gemm_q4_0(const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8x_block *xq, int64_t nb,
                          int64_t n, float *y, size_t ldy);
/* The i8mm table's Q8_0 / Q4_0 prefill (tg_gemm_q8x_rows_fn; gemm_q32_i8mm.c): smmla tiles of four rows by four
 * tokens, each result the bits of the dotprod gemv on that row and token. */
void tg_i8mm_gemm_q8_0(const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8x_block *xq, int64_t nb, int64_t n,
                       float *y, size_t ldy);
void tg_i8mm_gemm_q4_0(const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8x_block *xq, int64_t nb, int64_t n,
                       float *y, size_t ldy);

/* K-quant weights (Q2_K .. Q6_K) against tg_q8k_block activations (tg_gemv_fn; tg_gemm_q8k_fn: token t's
 * super-blocks at xk + t * nsup): kquant_neon_inline.h, the bits of the AVX2 kernels (gemv_kquant_avx2.c), with
 * widening multiplies in the NEON file and sdot in the dotprod one. */
void tg_neon_gemv_q2_k(const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols, float *y);
void tg_neon_gemm_q8k_q2_k(const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8k_block *xk, int64_t nsup,
                           int64_t n, float *y, size_t ldy);
void tg_neon_gemv_q3_k(const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols, float *y);
void tg_neon_gemm_q8k_q3_k(const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8k_block *xk, int64_t nsup,
                           int64_t n, float *y, size_t ldy);
void tg_neon_gemv_q4_k(const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols, float *y);
void tg_neon_gemm_q8k_q4_k(const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8k_block *xk, int64_t nsup,
                           int64_t n, float *y, size_t ldy);
void tg_neon_gemv_q5_k(const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols, float *y);
void tg_neon_gemm_q8k_q5_k(const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8k_block *xk, int64_t nsup,
                           int64_t n, float *y, size_t ldy);
void tg_neon_gemv_q6_k(const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols, float *y);
void tg_neon_gemm_q8k_q6_k(const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8k_block *xk, int64_t nsup,
                           int64_t n, float *y, size_t ldy);
void tg_dotprod_gemv_q2_k(const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols, float *y);
void tg_dotprod_gemm_q8k_q2_k(const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8k_block *xk, int64_t nsup,
                              int64_t n, float *y, size_t ldy);
void tg_dotprod_gemv_q3_k(const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols, float *y);
void tg_dotprod_gemm_q8k_q3_k(const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8k_block *xk, int64_t nsup,
                              int64_t n, float *y, size_t ldy);
void tg_dotprod_gemv_q4_k(const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols, float *y);
void tg_dotprod_gemm_q8k_q4_k(const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8k_block *xk, int64_t nsup,
                              int64_t n, float *y, size_t ldy);
void tg_dotprod_gemv_q5_k(const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols, float *y);
void tg_dotprod_gemm_q8k_q5_k(const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8k_block *xk, int64_t nsup,
                              int64_t n, float *y, size_t ldy);
void tg_dotprod_gemv_q6_k(const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols, float *y);
void tg_dotprod_gemm_q8k_q6_k(const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8k_block *xk, int64_t nsup,
                              int64_t n, float *y, size_t ldy);

#endif
