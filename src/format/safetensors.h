/* safetensors.h — a validating reader of one or more .safetensors files (a sharded set via its index.json). */
#ifndef TG_FORMAT_SAFETENSORS_H
#define TG_FORMAT_SAFETENSORS_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/tensor.h"
#include "tinygpt.h"

typedef struct tg_safetensors tg_safetensors;

/* Opens a Hugging Face folder's weights: model.safetensors, or every shard named by model.safetensors.index.json.
 * Validates the header length, the JSON header (jansson), every dtype, shape product and data_offsets against the
 * file size (checked arithmetic). NULL with a message naming the file and the problem. */
tg_safetensors *tg_safetensors_open_dir(const char *dir, tg_error *err);
/* Opens a single .safetensors file. */
tg_safetensors *tg_safetensors_open_file(const char *path, tg_error *err);
void tg_safetensors_close(tg_safetensors *st);

typedef struct {
    const char *name;
    const char *dtype;   /* "F32", "F16", "BF16", ... as in the header (a static string) */
    int n_dims;
    int64_t shape[4];
    const void *data;    /* inside the mapping */
    size_t nbytes;
} tg_st_tensor;

size_t tg_safetensors_count(const tg_safetensors *st);
const tg_st_tensor *tg_safetensors_at(const tg_safetensors *st, size_t i);
const tg_st_tensor *tg_safetensors_find(const tg_safetensors *st, const char *name);
/* View of tensor `name` as [rows, cols] (1-D tensors: rows = 1) in F32/F16/BF16. False with a message naming the
 * tensor and problem (absent, unsupported dtype named, shape mismatch, more than 2 dimensions, data not aligned
 * for the dtype). A negative expect_rows / expect_cols is not checked. */
bool tg_safetensors_view(const tg_safetensors *st, const char *name, int64_t expect_rows, int64_t expect_cols,
                         tg_tensor *out, tg_error *err);

#endif
