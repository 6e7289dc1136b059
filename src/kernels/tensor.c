/* tensor.c — sizes and names of the weight types, from the table (types.h). */
#include "kernels/tensor.h"

#include "kernels/types.h"

size_t tg_row_bytes(tg_dtype type, int64_t cols) {
    const tg_weight_type *wt = tg_weight_type_of(type);
    if (!wt || cols < 0 || cols % wt->block_elems != 0) return 0;
    return (size_t)(cols / wt->block_elems) * wt->block_bytes;
}

const char *tg_dtype_name(tg_dtype type) {
    const tg_weight_type *wt = tg_weight_type_of(type);
    return wt ? wt->name : "?";
}
