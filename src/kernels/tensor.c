/* tensor.c — sizes and names of the weight types. */
#include "kernels/tensor.h"

size_t tg_row_bytes(tg_dtype type, int64_t cols) {
    if (cols < 0) return 0;
    size_t n = (size_t)cols;
    switch (type) {
    case TG_DT_F32: return n * 4;
    case TG_DT_F16:
    case TG_DT_BF16: return n * 2;
    case TG_DT_Q8_0: return n % TG_QK ? 0 : n / TG_QK * 34;
    case TG_DT_Q4_0: return n % TG_QK ? 0 : n / TG_QK * 18;
    default: return 0;
    }
}

const char *tg_dtype_name(tg_dtype type) {
    static const char *const names[TG_DT_COUNT] = {"F32", "F16", "BF16", "Q8_0", "Q4_0"};
    return (unsigned)type < TG_DT_COUNT ? names[type] : "?";
}
