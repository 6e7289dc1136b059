/* matmul.h — y = W x for every weight type, one vector (decode) or a batch of rows (prefill). */
#ifndef TG_KERNELS_MATMUL_H
#define TG_KERNELS_MATMUL_H

#include "kernels/quant.h"
#include "kernels/tensor.h"
#include "kernels/types.h"
#include "util/thread_pool.h"

/* Preconditions for every function here: w is a valid view (w->type < TG_DT_COUNT, rows >= 0, cols > 0, and
 * tg_row_bytes(w->type, w->cols) != 0, i.e. cols is a multiple of 32 for Q8_0/Q4_0; the model loader checks this),
 * w->data holds rows * tg_row_bytes bytes at any alignment, and x, y do not overlap.
 *
 * Precision of the fast paths against the exact product (tg_matvec_ref is exact up to one final rounding):
 *   F32 / F16 / BF16: fp32 accumulation, error below about 2^-24 * cols/8 * sum_j |w_j x_j|.
 *   Q8_0 / Q4_0: x is first quantised to 8 bits per 32-element block with an fp16 scale (integer dot products, as
 *   llama.cpp), which adds at most sum_j |w_j| * max|x_block(j)| * 0.56 / 127 on top of the fp32 rounding.
 *   Q2_K..Q6_K: the same with 256-element activation blocks (tg_q8k_block): at most sum_j |w_j| * max|x_sup(j)| / 254.
 * Threads: the members of `pool` (the production team, util/thread_pool.h; NULL = the calling thread alone)
 * split the rows; products smaller than about 128K multiply-adds run on the calling thread. Results do not depend
 * on the team's size. */

/* y[rows] = W[rows, cols] x[cols]. */
void tg_matvec(const tg_tensor *w, const float *x, float *y, tg_pool *pool);
/* Y[n, rows] = X[n, cols] W^T (row t of Y is W times row t of X), cache-blocked: each block of W rows is reused
 * from cache for every token. Equal bit for bit to n calls of tg_matvec (one arithmetic order per output, see
 * tg_matmul_rows). n <= 0 does nothing. Q8_0/Q4_0 allocate about n * cols * 80/32 bytes of scratch (the forward pass uses tg_act_prepare with its own scratch instead); if that
 * allocation fails the result is computed by the (slow, exact) reference instead, so the call never fails. */
void tg_matmul(const tg_tensor *w, const float *x, int64_t n, float *y, tg_pool *pool);
/* ---- building blocks for callers that split the rows among their own threads (the forward pass) ---- */

/* n activation rows prepared for the kernels of one weight type. */
typedef struct {
    const float *x;                 /* [n, cols] */
    const tg_q8x_block *xq;     /* [n, cols / 32]: x quantised for Q8_0 / Q4_0 weights; NULL otherwise */
    const tg_q8x_pack8 *xp;     /* [ceil(n / 8), cols / 32]: the same, eight tokens interleaved (n > 1 only) */
    const tg_q8k_block *xk;     /* [n, cols / 256]: x quantised for the K-quant weights; NULL otherwise */
    int64_t n, cols;
    /* Optional room (set by the caller after preparing, one per thread) where tg_matmul_rows may widen the float
     * weight rows of a call to fp32 once for all n tokens (tg_wide_bytes(r1 - r0, cols) bytes, 64-byte aligned);
     * NULL: the tiles widen every row as they pass. The same bits either way. */
    float *wide;
    size_t wide_bytes;
} tg_act;

/* Bytes of tg_act.wide that tg_matmul_rows needs to widen nr float rows of cols columns; 0 where the kernels have
 * no widened tiles (no AVX-512) or cols is not a multiple of 8. */
size_t tg_wide_bytes(int64_t nr, int64_t cols);

/* Bytes of scratch tg_act_prepare / tg_act_prepare_types may need for n rows of cols columns: room for the Q8_0
 * form and the K-quant form at once (0 when no kernel needs any). */
size_t tg_act_scratch_bytes(int64_t n, int64_t cols);
/* Prepares x [n, cols] for weights of `type`: for Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL quantises every row into
 * scratch as xq (and xp), for the K-quants as xk (tg_act_scratch_bytes(n, cols) bytes, 4-byte aligned; NULL scratch
 * leaves xq and xk NULL and those types then take the exact reference path, as does a weight whose form the
 * activation was not prepared in). Never allocates. The result points into x and scratch. */
tg_act tg_act_prepare(tg_dtype type, const float *x, int64_t n, int64_t cols, void *scratch);
/* The same for one input that weights of n_types types multiply (the queries, keys and values of a layer; gate and
 * up): every form those types' kernels take, each once (a file whose attn_v is Q5_K and attn_q IQ4_NL gets both the
 * Q8_0 and the K-quant form, as llama.cpp quantises the input for each weight's own type). tg_act_prepare(t, ...) is
 * tg_act_prepare_types(&t, 1, ...): the same blocks at the same place. */
tg_act tg_act_prepare_types(const tg_dtype *types, int n_types, const float *x, int64_t n, int64_t cols,
                            void *scratch);
/* Y[t * ldy + (r - r0)] = row r of W . activation t for r in [r0, r1), t < a->n, on the calling thread; a was
 * prepared for w->type and w->cols. One activation (n == 1) takes the decode kernels, more take the prefill tiles;
 * all follow one arithmetic order per (row, activation), so a result depends neither on how the rows are split nor
 * on n (prefilling a chunk gives the bits of decoding its tokens one at a time). Never allocates. */
void tg_matmul_rows(const tg_tensor *w, const tg_act *a, int64_t r0, int64_t r1, float *y, size_t ldy);

/* Plain scalar references (tests compare the fast paths against these): exact dequantisation of W, accumulation
 * in double, one rounding to fp32 per output. */
void tg_matvec_ref(const tg_tensor *w, const float *x, float *y);
/* out[cols] = row r of W as floats (embedding lookup); exact for every type. 0 <= r < rows. */
void tg_tensor_get_row(const tg_tensor *w, int64_t r, float *out);

#endif
