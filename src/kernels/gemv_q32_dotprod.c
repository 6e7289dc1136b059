/* gemv_q32_dotprod.c — the Q8_0 / Q4_0 kernels of the dotprod table (q32_neon_inline.h with sdot; the Makefile
 * compiles this file with ARMv8.2 dotprod). Compiled without it (another architecture), the file holds nothing. */
#include "util/cpu_features.h"

#if TG_HAVE_DOTPROD
#define Q32_NAME(x) tg_dotprod_##x
#include "kernels/q32_neon_inline.h"
#endif
