/* avx2.h — internal to src/kernels: the AVX2 + FMA + F16C kernels, declared when TG_HAVE_AVX2 says they exist.
 * Only the dispatch files (types.c, matmul.c, vec.c, quant.c) include this; everything else calls the portable entry
 * points, which fall back to scalar code when the build target lacks these instruction sets (TG_HAVE_AVX2,
 * util/cpu_features.h). */
#ifndef TG_KERNELS_AVX2_H
#define TG_KERNELS_AVX2_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/quant.h"
#include "kernels/tensor.h"
#include "util/cpu_features.h"

#if TG_HAVE_AVX2

/* The largest tile tg_avx2_tile accepts: nr <= TG_TILE_MAX_ROWS rows of W times nt <= TG_TILE_MAX_VECS activation
 * vectors (6 x 8 where AVX-512 gives 32 registers of 16 lanes: one register holds two rows' 8-lane accumulators, see
 * matmul_avx2.c; 4 x 4 otherwise). */
#if defined(__AVX512F__)
#define TG_TILE_AVX512 1
#define TG_TILE_MAX_ROWS 6
#define TG_TILE_MAX_VECS 8
#else
#define TG_TILE_AVX512 0
#define TG_TILE_MAX_ROWS 4
#define TG_TILE_MAX_VECS 4
#endif

#if TG_TILE_AVX512
/* Float rows widened for the prefill tiles (matmul_avx2.c): rows of a F32 / F16 / BF16 matrix (cols % 8 == 0) as
 * fp32 row pairs, pair p = rows 2p and 2p + 1 (row 2p twice for an odd last row), 8 columns of each side by side:
 * wp[p * 2 * cols + 2 * k + i] = row 2p column k + i (i < 8), row 2p + 1 column k + i - 8 (8 <= i < 16), k a
 * multiple of 8; 64-byte aligned.
 * tg_avx512_tile_widen: tg_tile_fn's contract for nr <= 6 rows of `type` and eight activations (nt = 8), which also
 * writes those rows widened to dst (pairs 0 .. (nr - 1) / 2). tg_avx512_tile_wide: the contract on rows already
 * widened (pair p at wp + p * 2 * cols). Both give the bits of the tile on the stored rows. */
void tg_avx512_tile_widen(tg_dtype type, const uint8_t *w, size_t w_stride, int nr, const uint8_t *x, size_t x_stride,
                          int64_t cols, float *y, size_t ldy, float *dst);
void tg_avx512_tile_wide(const float *wp, int nr, const uint8_t *x, size_t x_stride, int nt, int64_t cols, float *y,
                         size_t ldy);
#endif

/* The kernels of the weight-type table (types.h; contracts of tg_gemv_fn, tg_tile_fn, tg_gemm_q8x_fn there), one
 * per type. Every (row, activation) result follows the canonical order of avx2_inline.h, whichever kernel and
 * whichever grouping of rows or tokens computed it. */
void tg_avx2_gemv_f32(const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols, float *y);
void tg_avx2_gemv_f16(const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols, float *y);
void tg_avx2_gemv_bf16(const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols, float *y);
void tg_avx2_gemv_q8_0(const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols, float *y);
void tg_avx2_gemv_q4_0(const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols, float *y);
void tg_avx2_tile_f32(const uint8_t *w, size_t w_stride, int nr, const uint8_t *x, size_t x_stride, int nt,
                      int64_t cols, float *y, size_t ldy);
void tg_avx2_tile_f16(const uint8_t *w, size_t w_stride, int nr, const uint8_t *x, size_t x_stride, int nt,
                      int64_t cols, float *y, size_t ldy);
void tg_avx2_tile_bf16(const uint8_t *w, size_t w_stride, int nr, const uint8_t *x, size_t x_stride, int nt,
                       int64_t cols, float *y, size_t ldy);
void tg_avx2_gemm_q8_0(const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8x_pack8 *xp, int64_t nb, int64_t n,
                       float *y, size_t ldy);
void tg_avx2_gemm_q4_0(const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8x_pack8 *xp, int64_t nb, int64_t n,
                       float *y, size_t ldy);

/* The 32-element GGUF block types of ggml_blocks.h (gemv_q32_avx2.c) against tg_q8x_block rows, and the K-quants
 * (gemv_kquant_avx2.c) against the tg_q8k_block form: x of the gemv is the form's blocks, cols / 32 or cols / 256 of
 * them (tg_gemv_fn); the prefill kernel takes n tokens' rows of nb blocks, token t's at xb + t * nb
 * (tg_gemm_q8x_rows_fn, tg_gemm_q8k_fn). */
#define TG_AVX2_DECLARE_GEMV_GEMM(t, form)                                                                         \
    void tg_avx2_gemv_##t(const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols, float *y);   \
    void tg_avx2_gemm_##form##_##t(const uint8_t *w, size_t w_stride, int64_t nr, const tg_##form##_block *xb,     \
                                   int64_t nb, int64_t n, float *y, size_t ldy);
TG_AVX2_DECLARE_GEMV_GEMM(q4_1, q8x)
TG_AVX2_DECLARE_GEMV_GEMM(q5_0, q8x)
TG_AVX2_DECLARE_GEMV_GEMM(q5_1, q8x)
TG_AVX2_DECLARE_GEMV_GEMM(iq4_nl, q8x)
TG_AVX2_DECLARE_GEMV_GEMM(q2_k, q8k)
TG_AVX2_DECLARE_GEMV_GEMM(q3_k, q8k)
TG_AVX2_DECLARE_GEMV_GEMM(q4_k, q8k)
TG_AVX2_DECLARE_GEMV_GEMM(q5_k, q8k)
TG_AVX2_DECLARE_GEMV_GEMM(q6_k, q8k)
#undef TG_AVX2_DECLARE_GEMV_GEMM

/* The same contracts for Q4_K, Q5_K and Q6_K with two rows per 512-bit register (gemv_kquant_avx512.c), where the
 * target has AVX-512 BW and VNNI; the same bits as the 256-bit kernels. */
#if defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__)
#define TG_HAVE_KQ512 1
#define TG_AVX512_DECLARE_KQUANT(t)                                                                                \
    void tg_avx512_gemv_##t(const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols, float *y); \
    void tg_avx512_gemm_q8k_##t(const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8k_block *xk,             \
                                int64_t nsup, int64_t n, float *y, size_t ldy);
TG_AVX512_DECLARE_KQUANT(q4_k)
TG_AVX512_DECLARE_KQUANT(q5_k)
TG_AVX512_DECLARE_KQUANT(q6_k)
#undef TG_AVX512_DECLARE_KQUANT
/* Q8_0 / Q4_0 in the repacked layout (repack.h, gemv_repacked_avx512.c): y[t * ldy + r] = row r . token t for the
 * rows of `groups` whole groups of sixteen at w (the file's row bytes rb) and t < n, token t's nb blocks at
 * x + t * nb; one arithmetic order per (row, token), the bits of tg_avx2_gemv_q8_0 / _q4_0 on the file's layout. */
void tg_avx512_repacked_q8_0(const uint8_t *w, size_t rb, int64_t groups, const tg_q8x_block *x, int64_t nb,
                             int64_t n, float *y, size_t ldy);
void tg_avx512_repacked_q4_0(const uint8_t *w, size_t rb, int64_t groups, const tg_q8x_block *x, int64_t nb,
                             int64_t n, float *y, size_t ldy);
#else
#define TG_HAVE_KQ512 0
#endif

/* Bit-for-bit tg_quantize_q8x_ref (quant.h), eight lanes at a time. */
void tg_avx2_quantize_q8x(const float *x, tg_q8x_block *dst, int64_t n);
/* Bit-for-bit tg_quantize_q8k_ref (quant.h). */
void tg_avx2_quantize_q8k(const float *x, tg_q8k_block *dst, int64_t n);

/* The vec.h primitives of the same names without the tg_ prefix's dispatch; identical contracts (any n, unaligned
 * pointers, scalar tails for n % 8). */
void tg_avx2_axpy_f32(float a, const float *x, float *y, int64_t n);
void tg_avx2_scale_f32(float *x, float a, int64_t n);
void tg_avx2_f16_to_f32_row(const uint16_t *src, float *dst, int64_t n);
void tg_avx2_f32_to_f16_row(const float *src, uint16_t *dst, int64_t n);
/* bf16 -> f32 for the first n - n % 8 elements; returns how many it converted (the caller does the tail). */
int64_t tg_avx2_bf16_to_f32_row(const uint16_t *src, float *dst, int64_t n);
/* vec.h's tg_exp_shift_sum and ops.h's tg_swiglu, eight lanes at a time (same contracts and edge cases). */
float tg_avx2_exp_shift_sum(float *x, int64_t n, float m);
/* vec.h's tg_max_skip_nan over the first n - n % 8 elements into *m (-inf when none); returns how many it read. */
int64_t tg_avx2_max_skip_nan(const float *x, int64_t n, float *m);
void tg_avx2_swiglu(float *gate, const float *up, int64_t n);
/* ops.h's tg_geglu_tanh, eight lanes at a time (the scalar table's formula and edge cases). */
void tg_avx2_geglu_tanh(float *gate, const float *up, int64_t n);

#endif
#endif
