/* gemv_kquant_neon.c — the K-quant kernels of the NEON table (kquant_neon_inline.h with widening multiplies: every
 * aarch64 CPU). Compiled on another architecture, the file holds nothing. */
#include "util/cpu_features.h"

#if TG_HAVE_NEON
#define KQ_NAME(x) tg_neon_##x
#include "kernels/kquant_neon_inline.h"
#endif
