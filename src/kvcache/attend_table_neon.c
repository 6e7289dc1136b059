/* attend_table_neon.c — the aarch64 attention tables (attend_kernels.h): NEON (every aarch64 CPU) with the float
 * block kernels (attend_neon.c), and dotprod with those and the integer KIVI kernels (attend_int_dotprod.c, compiled
 * with ARMv8.2 dotprod by the Makefile); i8mm is dotprod's under its own name (an i8mm CPU's weight table is
 * kernels_neon.c's i8mm, and the attention table follows the weight table's set). The KIVI-append entries and the
 * prefill-group and run kernels are NULL (the callers take their scalar paths; runs() is false). Compiled on another
 * architecture, the file has no table. */
#include "kvcache/attend_kernels.h"

#if TG_HAVE_NEON

#define FLOAT_BLOCKS                                                                                                  \
    .fold = tg_attn_neon_fold, .scores = tg_attn_neon_scores, .values = tg_attn_neon_values,                         \
    .widen = tg_attn_neon_widen, .runs = tg_attn_neon_runs

static const tg_attn_kernels neon = {
    .isa = TG_ISA_NEON,
    FLOAT_BLOCKS,
};

#define INT_TILES                                                                                                     \
    .int_keys = tg_attn_int_keys, .int_values = tg_attn_int_values, .int_prefetch_tile = tg_attn_int_prefetch_tile, \
    .int_prefetch_scales = tg_attn_int_prefetch_scales

static const tg_attn_kernels dotprod = {
    .isa = TG_ISA_DOTPROD,
    FLOAT_BLOCKS,
    INT_TILES,
};

static const tg_attn_kernels i8mm = {
    .isa = TG_ISA_I8MM,
    FLOAT_BLOCKS,
    INT_TILES,
};

const tg_attn_kernels *tg_attn_kernels_neon(void) { return &neon; }
const tg_attn_kernels *tg_attn_kernels_dotprod(void) { return &dotprod; }
const tg_attn_kernels *tg_attn_kernels_i8mm(void) { return &i8mm; }

#else

const tg_attn_kernels *tg_attn_kernels_neon(void) { return NULL; }
const tg_attn_kernels *tg_attn_kernels_dotprod(void) { return NULL; }
const tg_attn_kernels *tg_attn_kernels_i8mm(void) { return NULL; }

#endif
