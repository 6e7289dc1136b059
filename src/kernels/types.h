/* types.h — the weight-format table: everything tinygpt knows about one weight type's storage, in one row, free of
 * any instruction set (its block size, bytes, names, reference decoder and encoder). The readers (format/), the model
 * loader and the kernel driver (matmul.c) look a type up here; no other file knows a block size, a ggml type number
 * or a per-element decoder. Its fast kernels are a separate row per instruction set (kernels.h).
 *
 * Adding a type: one tg_dtype value (tensor.h), one row in types.c (its reference decoder and non-finite finder),
 * optionally its fast kernels in the tables of kernels.h, and a test. A type without fast kernels in the table in use
 * runs on the generic scalar path, which is exact up to fp32 accumulation. */
#ifndef TG_KERNELS_TYPES_H
#define TG_KERNELS_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/quant.h"
#include "kernels/tensor.h"

/* The form the fast kernels of a type take their activations in (tg_act in matmul.h). */
typedef enum {
    TG_ACT_F32 = 0, /* float rows */
    TG_ACT_Q8X,     /* tg_q8x_block rows (and tg_q8x_pack8 groups for prefill); block_elems a multiple of TG_QK */
    TG_ACT_Q8K,     /* tg_q8k_block rows (the K-quants); block_elems a multiple of TG_Q8K_ELEMS */
} tg_act_form;

/* Decode kernel: y[r] = dot(row r of W, x) for r < nr, row r at w + r * w_stride bytes (any alignment); x is
 * float[cols] (TG_ACT_F32), tg_q8x_block[cols / 32] (TG_ACT_Q8X) or tg_q8k_block[cols / 256] (TG_ACT_Q8K). */
typedef void (*tg_gemv_fn)(const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols, float *y);
/* Prefill tile for TG_ACT_F32 types: y[t * ldy + r] = dot(row r of W, activation t) for r < nr <= 4,
 * t < nt <= the table's tile_vecs (kernels.h: 4, or 8 on AVX-512);
 * activation t is float[cols] at x + t * x_stride bytes. */
typedef void (*tg_tile_fn)(const uint8_t *w, size_t w_stride, int nr, const uint8_t *x, size_t x_stride, int nt,
                           int64_t cols, float *y, size_t ldy);
/* Prefill for TG_ACT_Q8X types: y[t * ldy + r] for r < nr, t < n, activations packed eight tokens wide. */
typedef void (*tg_gemm_q8x_fn)(const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8x_pack8 *xp, int64_t nb,
                               int64_t n, float *y, size_t ldy);
/* Prefill for TG_ACT_Q8X types that take the activation rows as they are: token t's nb blocks at xq + t * nb. */
typedef void (*tg_gemm_q8x_rows_fn)(const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8x_block *xq, int64_t nb,
                                    int64_t n, float *y, size_t ldy);
/* Decode and prefill for TG_ACT_Q8X types over weights in the repacked layout (kernels/repack.h): y[t * ldy + r] for
 * the rows of `groups` whole groups of sixteen at w (rb: the file's bytes per row) and t < n; token t's nb blocks at
 * x + t * nb. */
typedef void (*tg_repacked_fn)(const uint8_t *w, size_t rb, int64_t groups, const tg_q8x_block *x, int64_t nb,
                               int64_t n, float *y, size_t ldy);
/* Prefill for TG_ACT_Q8K types: y[t * ldy + r] for r < nr, t < n; token t's nsup super-blocks at xk + t * nsup. Each
 * weight super-block is read once for several tokens. */
typedef void (*tg_gemm_q8k_fn)(const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8k_block *xk, int64_t nsup,
                               int64_t n, float *y, size_t ldy);

typedef struct {
    const char *name;              /* as GGUF tools and the banner spell it: "Q8_0" */
    int ggml_type;                 /* ggml's type number in GGUF files; -1: not read from GGUF */
    const char *safetensors_dtype; /* the dtype string of a safetensors header; NULL: not read from safetensors */
    int64_t block_elems;           /* elements per block (1 for the scalar types); a row holds whole blocks */
    size_t block_bytes;            /* bytes per block */
    size_t align;                  /* alignment the kernels need of row data */
    /* The plain reference: out[n] = elements 0..n-1 of a row (n a multiple of block_elems), src at any alignment.
     * Exact: every stored value is representable in fp32. */
    void (*decode_row)(const uint8_t *src, float *out, int64_t n);
    /* Index of the first of n elements (n a multiple of block_elems) that decodes to NaN or an infinity, or -1;
     * a bit test, no decoding. */
    int64_t (*first_non_finite)(const uint8_t *src, int64_t n);
    /* The reference encoder: n floats (a multiple of block_elems) into a row at dst (any alignment), rounding to
     * nearest (quant.h says how for the block types); NULL for a type tinygpt reads but never writes. */
    void (*encode_row)(const float *x, uint8_t *dst, int64_t n);
    /* The form the type's fast kernels take activations in, on every instruction set (kernels.h holds the
     * kernels themselves, one row per type and instruction set). */
    tg_act_form act;
} tg_weight_type;

/* The row of `type`; NULL if type is not a tg_dtype below TG_DT_COUNT. */
const tg_weight_type *tg_weight_type_of(tg_dtype type);
/* The dtype of a ggml type number, or of a safetensors dtype string; false if no row reads it. */
bool tg_dtype_from_ggml(uint32_t ggml_type, tg_dtype *out);
bool tg_dtype_from_safetensors(const char *dtype, tg_dtype *out);
/* "F32, F16, BF16, Q8_0, Q4_0": the names of the types a reader accepts (safetensors = true: those with a
 * safetensors dtype; false: those with a ggml number), into buf[n] (truncated, always terminated when n > 0). */
void tg_weight_type_names(bool safetensors, char *buf, size_t n);

/* out[n] = the values of n elements of a row of `type` (the table's reference decoder). */
void tg_dequantize_row(tg_dtype type, const void *src, float *out, int64_t n);

#endif
