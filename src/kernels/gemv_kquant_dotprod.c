/* gemv_kquant_dotprod.c — the K-quant kernels of the dotprod table (kquant_neon_inline.h with sdot; the Makefile
 * compiles this file with ARMv8.2 dotprod). Compiled without it (another architecture), the file holds nothing. */
#include "util/cpu_features.h"

#if TG_HAVE_DOTPROD
#define KQ_NAME(x) tg_dotprod_##x
#include "kernels/kquant_neon_inline.h"
#endif
