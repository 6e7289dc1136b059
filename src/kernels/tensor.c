/* tensor.c — sizes and names of the weight types (from the table, types.h) and the readers' shape check. */
#include "kernels/tensor.h"

#include <stdio.h>

#include "kernels/types.h"
#include "util/error.h"

size_t tg_row_bytes(tg_dtype type, int64_t cols) {
    const tg_weight_type *wt = tg_weight_type_of(type);
    if (!wt || cols < 0 || cols % wt->block_elems != 0) return 0;
    return (size_t)(cols / wt->block_elems) * wt->block_bytes;
}

const char *tg_dtype_name(tg_dtype type) {
    const tg_weight_type *wt = tg_weight_type_of(type);
    return wt ? wt->name : "?";
}

/* "N" or "any" for an expected dimension. */
static const char *dim_text(char *buf, size_t n, int64_t v) {
    if (v < 0) snprintf(buf, n, "any");
    else snprintf(buf, n, "%lld", (long long)v);
    return buf;
}

bool tg_tensor_check_shape(const char *file, const char *name, int64_t rows, int64_t cols, int64_t want_rows,
                           int64_t want_cols, tg_error *err) {
    if ((want_rows < 0 || rows == want_rows) && (want_cols < 0 || cols == want_cols)) return true;
    char r[24], c[24];
    return tg_fail(err, "%s: tensor '%s' has shape [%lld, %lld] (rows, cols), expected [%s, %s]", file, name,
                   (long long)rows, (long long)cols, dim_text(r, sizeof r, want_rows), dim_text(c, sizeof c, want_cols));
}
