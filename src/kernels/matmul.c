/* matmul.c — y = W x for every weight type: the scalar reference, the row lookup, and the threaded, cache-blocked
 * driver that hands tiles to the kernels of the table in use (kernels.h: AVX2, AVX-512, or the scalar paths).
 *
 * Precision: F32/F16/BF16 fast paths accumulate in fp32 over 8 lanes (error ~ cols/8 * 2^-24 * sum|w*x| at worst).
 * Q8_0/Q4_0 fast paths quantise the activations to 8 bits per 32-element block first (tg_q8x_block, llama.cpp's
 * Q8_0 blocks with their fp16 scale): each x[j] moves by at most d/2 + 127 |fp16(d) - d| <= 0.56 d with
 * d = max|x_block| / 127, so the result differs from the exact product by at most sum_j |w_j| * 0.56 d_block(j),
 * plus fp32 rounding; so do Q4_1/Q5_0/Q5_1/IQ4_NL. The K-quants (Q2_K..Q6_K) take
 * 256-element blocks (tg_q8k_block), the same bound with d per 256 elements. The scalar reference dequantises W
 * exactly and accumulates in double.
 *
 * Why the integer path for Q8_0/Q4_0: decoding Q8_0 is memory-bound either way (integer, or dequantise-to-float then
 * FMA), Q4_0 decodes faster with integers, and prefill runs well above the float types' rate (bench/kernels.c;
 * docs/PERFORMANCE.md). matmul must match matvec, so both use it. The GGUF block types gained the same way over
 * their float-activation kernels (docs/PERFORMANCE.md, K-quant files). */
#include "kernels/matmul.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "kernels/repack.h"
#include "kernels/types.h"
#include "util/thread_pool.h"

/* Tokens from which tg_matmul_rows widens float rows once per call (tg_act.wide) rather than in every tile. */
#define TG_WIDE_MIN_TOKENS 8

/* Below this many multiply-adds a product runs on the calling thread: waking a team costs a few microseconds. */
#define TG_PARALLEL_MIN_WORK ((int64_t)1 << 17)
/* A block of W rows that one thread sweeps over all tokens is sized to stay in L2 (about this many bytes). */
#define TG_ROW_BLOCK_BYTES ((size_t)96 * 1024)

/* Elements decoded at a time by the scalar paths: a whole number of blocks of every type (block_elems divides it or
 * equals it; types.c's rows have 1 or 32), so a row is decoded piecewise on the stack without allocating. */
#define TG_DECODE_CHUNK 256

/* The elements [j0, j0 + chunk) of row r into buf, chunk = min(TG_DECODE_CHUNK, cols - j0) rounded to blocks; a
 * repacked row block by block, each as the file held it (tg_repack_block). */
static int64_t decode_chunk(const tg_weight_type *wt, const tg_tensor *w, int64_t r, int64_t j0, float *buf) {
    const int64_t n = w->cols - j0 < TG_DECODE_CHUNK ? w->cols - j0 : TG_DECODE_CHUNK;
    if (r < tg_repack_plain_from(w)) {
        uint8_t blk[64]; /* a Q8_0 / Q4_0 block */
        for (int64_t j = 0; j < n; j += wt->block_elems) {
            tg_repack_block(w, r, (j0 + j) / wt->block_elems, blk);
            wt->decode_row(blk, buf + j, wt->block_elems);
        }
        return n;
    }
    const uint8_t *row = (const uint8_t *)w->data + (size_t)r * tg_row_bytes(w->type, w->cols);
    wt->decode_row(row + (size_t)(j0 / wt->block_elems) * wt->block_bytes, buf, n);
    return n;
}

/* Row r of w . x, exact up to one rounding (the reference). */
static float ref_dot(const tg_weight_type *wt, const tg_tensor *w, int64_t r, const float *x) {
    float buf[TG_DECODE_CHUNK];
    double s = 0.0;
    for (int64_t j0 = 0, n; j0 < w->cols; j0 += n) {
        n = decode_chunk(wt, w, r, j0, buf);
        for (int64_t j = 0; j < n; j++) s += (double)buf[j] * (double)x[j0 + j];
    }
    return (float)s;
}

/* y[t * ldy + r - r0] for r in [r0, r1), t < n: the reference for every activation row. */
static void ref_rows(const tg_weight_type *wt, const tg_tensor *w, const float *x, int64_t n, int64_t r0, int64_t r1,
                     float *y, size_t ldy) {
    for (int64_t t = 0; t < n; t++)
        for (int64_t r = r0; r < r1; r++)
            y[(size_t)t * ldy + (size_t)(r - r0)] = ref_dot(wt, w, r, x + (size_t)t * (size_t)w->cols);
}

void tg_matvec_ref(const tg_tensor *w, const float *x, float *y) {
    ref_rows(tg_weight_type_of(w->type), w, x, 1, 0, w->rows, y, 0);
}

void tg_tensor_get_row(const tg_tensor *w, int64_t r, float *out) {
    const tg_weight_type *wt = tg_weight_type_of(w->type);
    for (int64_t j0 = 0, n; j0 < w->cols; j0 += n) n = decode_chunk(wt, w, r, j0, out + j0);
}

/* The generic path of a type without fast kernels (every type in the scalar table), for float activations:
 * y[t * ldy + r] = row r . activation t for r < nr, t < nt, accumulated in fp32 in column order; the same order for
 * one activation or many, so prefill still gives the bits of decoding. */
static void scalar_rows(const tg_weight_type *wt, const tg_tensor *w, int64_t r0, int64_t nr, const float *x,
                        size_t xs, int64_t nt, int64_t cols, float *y, size_t ldy) {
    float buf[TG_DECODE_CHUNK];
    for (int64_t r = 0; r < nr; r++) {
        for (int64_t t = 0; t < nt; t++) {
            const float *xt = x + (size_t)t * xs;
            float s = 0.0f;
            for (int64_t j0 = 0, n; j0 < cols; j0 += n) {
                n = decode_chunk(wt, w, r0 + r, j0, buf);
                for (int64_t j = 0; j < n; j++) s += buf[j] * xt[j0 + j];
            }
            y[(size_t)t * ldy + (size_t)r] = s;
        }
    }
}

/* The activation form the fast kernels of `t` take, TG_ACT_F32 when it has none (the generic path takes floats). */
static tg_act_form fast_form(const tg_cpu_kernels *k, tg_dtype t) {
    const tg_weight_type *wt = tg_weight_type_of(t);
    return wt && k->type[t].gemv ? wt->act : TG_ACT_F32;
}

/* Bytes of the Q8_0-form blocks of n rows (with the packed copy when n > 1). */
static size_t q8x_bytes(int64_t n, int64_t cols) {
    const size_t nb = (size_t)(cols / TG_QK), groups = (size_t)(n + 7) / 8;
    return (size_t)n * nb * sizeof(tg_q8x_block) + (n > 1 ? groups * nb * sizeof(tg_q8x_pack8) : 0);
}

size_t tg_wide_bytes(int64_t nr, int64_t cols) {
    if (!tg_kernels()->tile_widen || nr <= 0 || cols <= 0 || cols % 8 != 0) return 0;
    return (size_t)((nr + 1) / 2) * 2 * (size_t)cols * sizeof(float);
}

size_t tg_act_scratch_bytes(int64_t n, int64_t cols) {
    if (!tg_kernels()->quant_acts || n <= 0 || cols < TG_QK) return 0;
    const size_t q8k = (size_t)n * (size_t)(cols / TG_Q8K_ELEMS) * sizeof(tg_q8k_block);
    return q8x_bytes(n, cols) + q8k; /* both forms at once (tg_act_prepare_types) */
}

tg_act tg_act_prepare_types(const tg_dtype *types, int n_types, const float *x, int64_t n, int64_t cols,
                            void *scratch) {
    tg_act a = {.x = x, .xq = NULL, .xp = NULL, .xk = NULL, .n = n, .cols = cols, .wide = NULL, .wide_bytes = 0};
    const tg_cpu_kernels *k = tg_kernels();
    bool want_q8x = false, want_q8k = false, want_pack = false;
    for (int i = 0; i < n_types; i++) {
        const tg_act_form form = fast_form(k, types[i]);
        want_q8k |= form == TG_ACT_Q8K;
        if (form == TG_ACT_Q8X) {
            want_q8x = true;
            want_pack |= n > 1 && !k->type[types[i]].gemm_q8x_rows; /* the others take the rows as they are */
        }
    }
    if (!k->quant_acts || !scratch) return a;
    /* the Q8_0 form first (where tg_act_prepare of one such type puts it), the K-quant form after it */
    uint8_t *at = scratch;
    if (want_q8x) {
        const int64_t nb = cols / TG_QK;
        tg_q8x_block *xq = (tg_q8x_block *)(void *)at;
        for (int64_t t = 0; t < n; t++) k->quantize_q8x(x + (size_t)t * (size_t)cols, xq + (size_t)t * (size_t)nb, cols);
        a.xq = xq;
        if (want_pack) {
            tg_q8x_pack8 *xp = (tg_q8x_pack8 *)(void *)(xq + (size_t)n * (size_t)nb);
            for (int64_t g = 0; g * 8 < n; g++)
                tg_pack8_q8x(xq + (size_t)g * 8 * (size_t)nb, nb, (int)(n - g * 8 < 8 ? n - g * 8 : 8), nb,
                             xp + (size_t)g * (size_t)nb);
            a.xp = xp;
        }
        at += q8x_bytes(n, cols);
    }
    if (want_q8k) {
        const int64_t nsup = cols / TG_Q8K_ELEMS;
        tg_q8k_block *xk = (tg_q8k_block *)(void *)at;
        for (int64_t t = 0; t < n; t++)
            k->quantize_q8k(x + (size_t)t * (size_t)cols, xk + (size_t)t * (size_t)nsup, nsup * TG_Q8K_ELEMS);
        a.xk = xk;
    }
    return a;
}

tg_act tg_act_prepare(tg_dtype type, const float *x, int64_t n, int64_t cols, void *scratch) {
    return tg_act_prepare_types(&type, 1, x, n, cols, scratch);
}

void tg_matmul_rows(const tg_tensor *w, const tg_act *a, int64_t r0, int64_t r1, float *y, size_t ldy) {
    if (r1 <= r0 || a->n <= 0) return;
    const tg_weight_type *wt = tg_weight_type_of(w->type);
    const tg_cpu_kernels *kern = tg_kernels();
    const tg_type_kernels *kt = &kern->type[w->type];
    const int64_t cols = w->cols;
    const size_t rb = tg_row_bytes(w->type, cols);
    const uint8_t *wdata = (const uint8_t *)w->data + (size_t)r0 * rb;
    const int64_t nr = r1 - r0;
    const bool unprepared = (wt->act == TG_ACT_Q8X && !a->xq) || (wt->act == TG_ACT_Q8K && !a->xk);
    const int64_t plain = tg_repack_plain_from(w);
    if (r0 < plain) { /* repacked rows: whole groups in their kernel; a start off a group, a part of one or no
                       * prepared activation through the reference */
        const int64_t G = w->row_group, end = r1 < plain ? r1 : plain;
        int64_t next;
        if (kt->repacked && !unprepared && r0 % G == 0 && end - r0 >= G) {
            const int64_t groups = (end - r0) / G;
            kt->repacked(wdata, rb, groups, a->xq, cols / TG_QK, a->n, y, ldy);
            next = r0 + groups * G;
        } else {
            next = !unprepared && (r0 / G + 1) * G < end ? (r0 / G + 1) * G : end;
            ref_rows(wt, w, a->x, a->n, r0, next, y, ldy);
        }
        tg_matmul_rows(w, a, next, r1, y + (next - r0), ldy);
        return;
    }
    if (wt->act != TG_ACT_F32 && (!kt->gemv || unprepared)) { /* no kernels, or x not in their form: exact reference */
        ref_rows(wt, w, a->x, a->n, r0, r1, y, ldy);
        return;
    }
    if (!kt->gemv) { /* a float-activation type without fast kernels */
        scalar_rows(wt, w, r0, nr, a->x, (size_t)cols, a->n, cols, y, ldy);
        return;
    }
    const bool quant = wt->act == TG_ACT_Q8X;
    if (a->n == 1) {
        const void *x = wt->act == TG_ACT_Q8K ? (const void *)a->xk : quant ? (const void *)a->xq : (const void *)a->x;
        kt->gemv(wdata, rb, nr, x, cols, y);
        return;
    }
    if (wt->act == TG_ACT_Q8K) {
        kt->gemm_q8k(wdata, rb, nr, a->xk, cols / TG_Q8K_ELEMS, a->n, y, ldy);
        return;
    }
    if (quant) {
        if (kt->gemm_q8x_rows) kt->gemm_q8x_rows(wdata, rb, nr, a->xq, cols / TG_QK, a->n, y, ldy);
        else if (a->xp) kt->gemm_q8x(wdata, rb, nr, a->xp, cols / TG_QK, a->n, y, ldy);
        else /* prepared for one token only: decode each token */
            for (int64_t t = 0; t < a->n; t++)
                kt->gemv(wdata, rb, nr, a->xq + (size_t)t * (size_t)(cols / TG_QK), cols, y + (size_t)t * ldy);
        return;
    }
    /* Prefill with float weights: tiles of rows x tokens (6 x 8 on AVX-512, where one register holds two rows'
     * accumulators; 4 x 4 where 32 registers hold 16 accumulators; 2 x 4 with 16 registers); the block of rows stays
     * in cache while every token passes over it. */
    const int tile_rows = kern->tile_rows, tile_vecs = kern->tile_vecs;
    const uint8_t *x = (const uint8_t *)a->x;
    const size_t xs = (size_t)cols * sizeof(float);
    /* Enough tokens to repay widening the rows once (and room for them): every tile then loads its weights as they
     * are, instead of widening 8 columns of two rows each time a group of tokens passes (same values, same bits). */
    const size_t wide_need = tg_wide_bytes(nr, cols);
    if (kern->tile_widen && a->wide && wide_need && a->wide_bytes >= wide_need && a->n >= TG_WIDE_MIN_TOKENS) {
        for (int64_t t0 = 0; t0 < a->n; t0 += tile_vecs) { /* the first eight tokens widen the rows as they pass */
            const int nt = (int)(a->n - t0 < tile_vecs ? a->n - t0 : tile_vecs);
            for (int64_t r = 0; r < nr; r += tile_rows) { /* tile_rows is even: a tile starts on a pair */
                const int k = (int)(nr - r < tile_rows ? nr - r : tile_rows);
                float *wp = a->wide + (size_t)(r / 2) * 2 * (size_t)cols;
                if (t0 == 0)
                    kern->tile_widen(w->type, wdata + (size_t)r * rb, rb, k, x, xs, cols, y + (size_t)r, ldy, wp);
                else
                    kern->tile_wide(wp, k, x + (size_t)t0 * xs, xs, nt, cols, y + (size_t)t0 * ldy + (size_t)r, ldy);
            }
        }
        return;
    }
    for (int64_t t0 = 0; t0 < a->n; t0 += tile_vecs) {
        const int nt = (int)(a->n - t0 < tile_vecs ? a->n - t0 : tile_vecs);
        for (int64_t r = 0; r < nr; r += tile_rows) {
            const int k = (int)(nr - r < tile_rows ? nr - r : tile_rows);
            kt->tile(wdata + (size_t)r * rb, rb, k, x + (size_t)t0 * xs, xs, nt, cols, y + (size_t)t0 * ldy + (size_t)r,
                     ldy);
        }
    }
}

/* Y[n, rows] = X[n, cols] W^T with X prepared. The team's threads split W into blocks of rows (multiples of 8),
 * thread t taking blocks t, t + threads, ...; each thread sweeps its block over every token, so a W block is read
 * from memory once and reused from cache for all n tokens. */
typedef struct {
    const tg_tensor *w;
    const tg_act *a;
    float *y;
    int64_t block, n_blocks;
    int threads;
} blocks_run;

static void run_share(void *ctx, int t) {
    const blocks_run *b = ctx;
    const int64_t rows = b->w->rows;
    for (int64_t ib = t; ib < b->n_blocks; ib += b->threads) {
        const int64_t r0 = ib * b->block;
        const int64_t r1 = r0 + b->block < rows ? r0 + b->block : rows;
        tg_matmul_rows(b->w, b->a, r0, r1, b->y + r0, (size_t)rows);
    }
}

static void run_blocks(const tg_tensor *w, const tg_act *a, float *y, tg_pool *pool) {
    const int64_t rows = w->rows, cols = w->cols, n = a->n;
    const size_t rb = tg_row_bytes(w->type, cols);
    int64_t block = rb ? (int64_t)(TG_ROW_BLOCK_BYTES / rb) : 0;
    if (block < 16) block = 16;
    if (block > 256) block = 256;
    block -= block % (w->row_group > 8 ? w->row_group : 8); /* whole groups of repacked rows */
    blocks_run b = {w, a, y, block, (rows + block - 1) / block, tg_pool_threads(pool)};
    if (b.threads == 1 || b.n_blocks == 1 || rows * cols * n < TG_PARALLEL_MIN_WORK) {
        b.threads = 1;
        run_share(&b, 0);
        return;
    }
    tg_pool_run(pool, run_share, &b); /* members past n_blocks find nothing to do */
}

void tg_matmul(const tg_tensor *w, const float *x, int64_t n, float *y, tg_pool *pool) {
    if (n <= 0 || w->rows <= 0) return;
    const size_t scratch_bytes = fast_form(tg_kernels(), w->type) != TG_ACT_F32 ? tg_act_scratch_bytes(n, w->cols) : 0;
    void *scratch = scratch_bytes ? malloc(scratch_bytes) : NULL;
    /* without scratch (the scalar table, or out of memory) quantised weights take the exact reference path */
    tg_act a = tg_act_prepare(w->type, x, n, w->cols, scratch);
    run_blocks(w, &a, y, pool);
    free(scratch);
}

void tg_matvec(const tg_tensor *w, const float *x, float *y, tg_pool *pool) { tg_matmul(w, x, 1, y, pool); }
