/* tensor.h — a typed, read-only view of a weight matrix; the currency between model loading and the kernels. */
#ifndef TG_KERNELS_TENSOR_H
#define TG_KERNELS_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tinygpt.h"

typedef enum {
    TG_DT_F32 = 0,
    TG_DT_F16,
    TG_DT_BF16,
    TG_DT_Q8_0, /* ggml's blocks (quant.h) */
    TG_DT_Q4_0,
    TG_DT_Q4_1, /* the GGUF block types of kernels/ggml_blocks.h */
    TG_DT_Q5_0,
    TG_DT_Q5_1,
    TG_DT_Q2_K,
    TG_DT_Q3_K,
    TG_DT_Q4_K,
    TG_DT_Q5_K,
    TG_DT_Q6_K,
    TG_DT_IQ4_NL,
    TG_DT_COUNT
} tg_dtype; /* everything about each type is one row of the table in types.c (types.h) */

/* A row-major matrix [rows, cols]: row r starts at data + r * tg_row_bytes(type, cols). A vector is rows = 1.
 * Weight matrices are [out_features, in_features] (GGUF ne0 = cols). data points into a mapping or an owned
 * buffer that outlives the view. row_group 16 (TG_REPACK_ROWS): the rows are repacked in groups of sixteen for the
 * AVX-512 kernels (kernels/repack.h: the same bytes per group of rows, in another order); 0: as above. */
typedef struct {
    tg_dtype type;
    int64_t rows, cols;
    const void *data;
    int row_group;
} tg_tensor;

/* Bytes of one row of `cols` elements; 0 if cols is not a multiple of the type's block size (or type is invalid). */
size_t tg_row_bytes(tg_dtype type, int64_t cols);
const char *tg_dtype_name(tg_dtype type);

/* Whether a tensor `name` of `file` with shape [rows, cols] is what the model expects (want_rows / want_cols < 0:
 * any); otherwise false with "FILE: tensor 'NAME' has shape [r, c] (rows, cols), expected [R, C]" in err. The one
 * shape check of every reader. */
bool tg_tensor_check_shape(const char *file, const char *name, int64_t rows, int64_t cols, int64_t want_rows,
                           int64_t want_cols, tg_error *err);

#endif
