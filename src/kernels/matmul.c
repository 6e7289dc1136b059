/* matmul.c — y = W x for every weight type: the scalar reference, the row lookup, and the threaded, cache-blocked
 * driver that hands tiles to the AVX2 micro-kernels (or to scalar code when the target has no AVX2).
 *
 * Precision: F32/F16/BF16 fast paths accumulate in fp32 over 8 lanes (error ~ cols/8 * 2^-24 * sum|w*x| at worst).
 * Q8_0/Q4_0 fast paths quantise the activations to 8 bits per 32-element block first (tg_q8x_block): each x[j]
 * moves by at most d/2 = max|x_block| / 254, so the result differs from the exact product by at most
 * sum_j |w_j| * d_block(j) / 2, plus fp32 rounding. The scalar reference dequantises W exactly and accumulates in
 * double.
 *
 * Why the integer path for Q8_0/Q4_0 (bench/kernels.c, 4096 x 4096, one thread): decoding Q8_0 is memory-bound
 * either way (integer and dequantise-to-float-then-FMA both ~1.2 ms), Q4_0 decodes 1.75x faster with integers
 * (0.73 vs 1.28 ms), and prefill reaches 65-80 GFLOP/s against at most ~53 for the float types. matmul must match
 * matvec, so both use it. */
#include "kernels/matmul.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/avx2.h"
#include "kernels/quant.h"
#include "util/half.h"

/* Below this many multiply-adds a product runs on the calling thread: waking a team costs a few microseconds. */
#define TG_PARALLEL_MIN_WORK ((int64_t)1 << 17)
/* A block of W rows that one thread sweeps over all tokens is sized to stay in L2 (about this many bytes). */
#define TG_ROW_BLOCK_BYTES ((size_t)96 * 1024)

/* Element j of a row of `type` as fp32 (exact). */
static float row_elem(tg_dtype type, const uint8_t *row, int64_t j) {
    uint16_t h;
    switch (type) {
    case TG_DT_F32: {
        float f;
        memcpy(&f, row + 4 * j, 4);
        return f;
    }
    case TG_DT_F16: memcpy(&h, row + 2 * j, 2); return tg_f16_to_f32(h);
    case TG_DT_BF16: memcpy(&h, row + 2 * j, 2); return tg_bf16_to_f32(h);
    case TG_DT_Q8_0: {
        const uint8_t *blk = row + (size_t)(j / TG_QK) * sizeof(tg_block_q8_0);
        memcpy(&h, blk, 2);
        return tg_f16_to_f32(h) * (float)(int8_t)blk[2 + j % TG_QK];
    }
    case TG_DT_Q4_0: {
        const uint8_t *blk = row + (size_t)(j / TG_QK) * sizeof(tg_block_q4_0);
        int i = (int)(j % TG_QK);
        int nib = i < TG_QK / 2 ? (blk[2 + i] & 0x0f) : (blk[2 + i - TG_QK / 2] >> 4);
        memcpy(&h, blk, 2);
        return tg_f16_to_f32(h) * (float)(nib - 8);
    }
    default: return 0.0f;
    }
}

void tg_matvec_ref(const tg_tensor *w, const float *x, float *y) {
    const size_t rb = tg_row_bytes(w->type, w->cols);
    const uint8_t *base = w->data;
    for (int64_t r = 0; r < w->rows; r++) {
        const uint8_t *row = base + (size_t)r * rb;
        double s = 0.0;
        for (int64_t j = 0; j < w->cols; j++) s += (double)row_elem(w->type, row, j) * (double)x[j];
        y[r] = (float)s;
    }
}

void tg_tensor_get_row(const tg_tensor *w, int64_t r, float *out) {
    const size_t rb = tg_row_bytes(w->type, w->cols);
    tg_dequantize_row(w->type, (const uint8_t *)w->data + (size_t)r * rb, out, w->cols);
}

static bool is_quant(tg_dtype t) { return t == TG_DT_Q8_0 || t == TG_DT_Q4_0; }

/* One tile of float weights: y[t * ldy + r] = row r of w . activation t, for r < nr, t < nt; x rows are float[cols].
 * Without AVX2 it also serves every type for one activation (decode), in plain scalar code. */
static void tile(tg_dtype type, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs, int nt, int64_t cols,
                 float *y, size_t ldy) {
#if TG_KERNELS_AVX2
    tg_avx2_tile(type, w, ws, nr, x, xs, nt, cols, y, ldy);
#else
    for (int r = 0; r < nr; r++) {
        for (int t = 0; t < nt; t++) {
            const float *xt = (const float *)(const void *)(x + (size_t)t * xs);
            const uint8_t *row = w + (size_t)r * ws;
            float s = 0.0f;
            for (int64_t j = 0; j < cols; j++) s += row_elem(type, row, j) * xt[j];
            y[(size_t)t * ldy + (size_t)r] = s;
        }
    }
#endif
}

size_t tg_act_scratch_bytes(int64_t n, int64_t cols) {
    if (!TG_KERNELS_AVX2 || n <= 0 || cols < TG_QK) return 0;
    const size_t nb = (size_t)(cols / TG_QK), groups = (size_t)(n + 7) / 8;
    return (size_t)n * nb * sizeof(tg_q8x_block) + (n > 1 ? groups * nb * sizeof(tg_q8x_pack8) : 0);
}

tg_act tg_act_prepare(tg_dtype type, const float *x, int64_t n, int64_t cols, void *scratch) {
    tg_act a = {.x = x, .xq = NULL, .xp = NULL, .n = n, .cols = cols};
    if (TG_KERNELS_AVX2 && is_quant(type) && scratch) {
        const int64_t nb = cols / TG_QK;
        tg_q8x_block *xq = scratch;
        for (int64_t t = 0; t < n; t++) tg_quantize_q8x(x + (size_t)t * (size_t)cols, xq + (size_t)t * (size_t)nb, cols);
        a.xq = xq;
        if (n > 1) {
            tg_q8x_pack8 *xp = (tg_q8x_pack8 *)(void *)(xq + (size_t)n * (size_t)nb);
            for (int64_t g = 0; g * 8 < n; g++)
                tg_pack8_q8x(xq + (size_t)g * 8 * (size_t)nb, nb, (int)(n - g * 8 < 8 ? n - g * 8 : 8), nb,
                             xp + (size_t)g * (size_t)nb);
            a.xp = xp;
        }
    }
    return a;
}

void tg_matmul_rows(const tg_tensor *w, const tg_act *a, int64_t r0, int64_t r1, float *y, size_t ldy) {
    if (r1 <= r0 || a->n <= 0) return;
    const int64_t cols = w->cols;
    const size_t rb = tg_row_bytes(w->type, cols);
    const uint8_t *wdata = (const uint8_t *)w->data + (size_t)r0 * rb;
    const int64_t nr = r1 - r0;
    if (is_quant(w->type) && !a->xq) { /* not prepared (or no AVX2): the exact reference, row by row */
        for (int64_t t = 0; t < a->n; t++) {
            tg_tensor part = {w->type, nr, cols, wdata};
            tg_matvec_ref(&part, a->x + (size_t)t * (size_t)cols, y + (size_t)t * ldy);
        }
        return;
    }
    const uint8_t *x = is_quant(w->type) ? (const uint8_t *)a->xq : (const uint8_t *)a->x;
    const size_t xs = is_quant(w->type) ? (size_t)(cols / TG_QK) * sizeof(tg_q8x_block) : (size_t)cols * sizeof(float);
#if TG_KERNELS_AVX2
    if (a->n == 1) {
        tg_avx2_gemv(w->type, wdata, rb, nr, x, cols, y);
        return;
    }
    if (is_quant(w->type) && a->xp) {
        tg_avx2_gemm_quant(w->type, wdata, rb, nr, a->xp, cols / TG_QK, a->n, y, ldy);
        return;
    }
#endif
    /* Prefill with float weights: tiles of rows x 4 tokens (4 rows where 32 vector registers hold 16 accumulators);
     * the block of rows stays in cache while every token passes over it. */
#if defined(__AVX512VL__)
    const int tile_rows = 4, tile_vecs = a->n == 1 ? 1 : 4;
#else
    const int tile_rows = a->n == 1 ? 4 : 2, tile_vecs = a->n == 1 ? 1 : 4;
#endif
    for (int64_t t0 = 0; t0 < a->n; t0 += tile_vecs) {
        const int nt = (int)(a->n - t0 < tile_vecs ? a->n - t0 : tile_vecs);
        for (int64_t r = 0; r < nr; r += tile_rows) {
            const int k = (int)(nr - r < tile_rows ? nr - r : tile_rows);
            tile(w->type, wdata + (size_t)r * rb, rb, k, x + (size_t)t0 * xs, xs, nt, cols, y + (size_t)t0 * ldy + (size_t)r,
                 ldy);
        }
    }
}

/* Y[n, rows] = X[n, cols] W^T with X prepared. Threads split W into blocks of rows (multiples of 8);
 * each thread sweeps its block over every token, so a W block is read from memory once and reused from cache for
 * all n tokens. */
static void run_blocks(const tg_tensor *w, const tg_act *a, float *y, int n_threads) {
    const int64_t rows = w->rows, cols = w->cols, n = a->n;
    const size_t rb = tg_row_bytes(w->type, cols);
    int64_t block = rb ? (int64_t)(TG_ROW_BLOCK_BYTES / rb) : 0;
    if (block < 16) block = 16;
    if (block > 256) block = 256;
    block -= block % 8;
    const int64_t n_blocks = (rows + block - 1) / block;
    int threads = n_threads < 1 ? 1 : n_threads;
    if (threads > n_blocks) threads = (int)n_blocks;
    if (rows * cols * n < TG_PARALLEL_MIN_WORK) threads = 1;

#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
    for (int64_t ib = 0; ib < n_blocks; ib++) {
        const int64_t r0 = ib * block;
        const int64_t r1 = r0 + block < rows ? r0 + block : rows;
        tg_matmul_rows(w, a, r0, r1, y + r0, (size_t)rows);
    }
}

void tg_matmul(const tg_tensor *w, const float *x, int64_t n, float *y, int n_threads) {
    if (n <= 0 || w->rows <= 0) return;
    const size_t scratch_bytes = is_quant(w->type) ? tg_act_scratch_bytes(n, w->cols) : 0;
    void *scratch = scratch_bytes ? malloc(scratch_bytes) : NULL;
    /* without scratch (no AVX2, or out of memory) quantised weights take the exact reference path */
    tg_act a = tg_act_prepare(w->type, x, n, w->cols, scratch);
    run_blocks(w, &a, y, n_threads);
    free(scratch);
}

void tg_matvec(const tg_tensor *w, const float *x, float *y, int n_threads) { tg_matmul(w, x, 1, y, n_threads); }
