/* gemv_q32_neon.c — the Q8_0 / Q4_0 kernels of the NEON table (q32_neon_inline.h with widening multiplies: every
 * aarch64 CPU). Compiled on another architecture, the file holds nothing. */
#include "util/cpu_features.h"

#if TG_HAVE_NEON
#define Q32_NAME(x) tg_neon_##x
#include "kernels/q32_neon_inline.h"
#endif
