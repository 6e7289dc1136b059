/* matmul.h — y = W x for every weight type, one vector (decode) or a batch of rows (prefill). */
#ifndef TG_KERNELS_MATMUL_H
#define TG_KERNELS_MATMUL_H

#include "kernels/tensor.h"

/* y[rows] = W[rows, cols] x[cols]. Threads: up to n_threads OpenMP threads split the rows. */
void tg_matvec(const tg_tensor *w, const float *x, float *y, int n_threads);
/* Y[n, rows] = X[n, cols] W^T, cache-blocked; equal to n calls of tg_matvec within float rounding. */
void tg_matmul(const tg_tensor *w, const float *x, int64_t n, float *y, int n_threads);
/* Plain scalar references (tests compare the fast paths against these). */
void tg_matvec_ref(const tg_tensor *w, const float *x, float *y);
/* out[cols] = row r of W as floats (embedding lookup). */
void tg_tensor_get_row(const tg_tensor *w, int64_t r, float *out);

#endif
