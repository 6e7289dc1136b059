/* matmul.h — y = W x for every weight type, one vector (decode) or a batch of rows (prefill). */
#ifndef TG_KERNELS_MATMUL_H
#define TG_KERNELS_MATMUL_H

#include "kernels/tensor.h"

/* Preconditions for every function here: w is a valid view (w->type < TG_DT_COUNT, rows >= 0, cols > 0, and
 * tg_row_bytes(w->type, w->cols) != 0, i.e. cols is a multiple of 32 for Q8_0/Q4_0; the model loader checks this),
 * w->data holds rows * tg_row_bytes bytes at any alignment, and x, y do not overlap.
 *
 * Precision of the fast paths against the exact product (tg_matvec_ref is exact up to one final rounding):
 *   F32 / F16 / BF16: fp32 accumulation, error below about 2^-24 * cols/8 * sum_j |w_j x_j|.
 *   Q8_0 / Q4_0: x is first quantised to 8 bits per 32-element block (integer dot products, as llama.cpp), which
 *   adds at most sum_j |w_j| * max|x_block(j)| / 254 on top of the fp32 rounding.
 * Threads: up to n_threads OpenMP threads (n_threads < 1 means 1) split the rows; products smaller than about
 * 128K multiply-adds run on the calling thread. Results do not depend on n_threads. */

/* y[rows] = W[rows, cols] x[cols]. */
void tg_matvec(const tg_tensor *w, const float *x, float *y, int n_threads);
/* Y[n, rows] = X[n, cols] W^T (row t of Y is W times row t of X), cache-blocked: each block of W rows is reused
 * from cache for every token. Equal to n calls of tg_matvec within fp32 rounding (today each output is even summed
 * in the same order, so the bits agree; callers should not rely on that). n <= 0 does nothing. Q8_0/Q4_0 allocate
 * n * cols * 40/32 bytes of scratch; if that allocation fails the result is computed by the (slow, exact) reference
 * instead, so the call never fails. */
void tg_matmul(const tg_tensor *w, const float *x, int64_t n, float *y, int n_threads);
/* Plain scalar references (tests compare the fast paths against these): exact dequantisation of W, accumulation
 * in double, one rounding to fp32 per output. */
void tg_matvec_ref(const tg_tensor *w, const float *x, float *y);
/* out[cols] = row r of W as floats (embedding lookup); exact for every type. 0 <= r < rows. */
void tg_tensor_get_row(const tg_tensor *w, int64_t r, float *out);

#endif
