/* attend_table_avx2.c — the AVX2 attention and KIVI-append kernel table (attend_kernels.h), and, compiled a second
 * time with the AVX-512 set (kernels/isa_avx512_names.h renames it tg_attn_kernels_avx512), the AVX-512 table: the
 * same kernels taking their 512-bit paths (float runs, integer tiles with VNNI) and the prefill-group kernels.
 * Compiled without these sets, it has no table. */
#include "kvcache/attend_kernels.h"
#include "kvcache/kivi_avx2.h"

#if TG_HAVE_AVX2 && (!defined(TG_ISA_VARIANT_AVX512) || TG_HAVE_AVX512)

static const tg_attn_kernels table = {
#if TG_HAVE_AVX512
    .isa = TG_ISA_AVX512,
    .group_widen = tg_attn512_group_widen,
    .group_scores = tg_attn512_group_scores,
    .group_values = tg_attn512_group_values,
#else
    .isa = TG_ISA_AVX2,
#endif
    .fold = tg_attn_avx2_fold,
    .scores = tg_attn_avx2_scores,
    .values = tg_attn_avx2_values,
    .widen = tg_attn_avx2_widen,
    .runs = tg_attn_avx2_runs,
    .scores_rows = tg_attn_avx2_scores_rows,
    .values_rows = tg_attn_avx2_values_rows,
    .int_keys = tg_attn_int_keys,
    .int_values = tg_attn_int_values,
    .int_prefetch_tile = tg_attn_int_prefetch_tile,
    .int_prefetch_scales = tg_attn_int_prefetch_scales,
    .kivi_key_misses = tg_kivi_avx2_key_misses,
    .kivi_key_row = tg_kivi_avx2_key_row,
    .kivi_recode_key_channel = tg_kivi_avx2_recode_key_channel,
    .kivi_key_group = tg_kivi_avx2_key_group,
    .kivi_value_row = tg_kivi_avx2_value_row,
};

const tg_attn_kernels *tg_attn_kernels_avx2(void) { return &table; }

#else

const tg_attn_kernels *tg_attn_kernels_avx2(void) { return NULL; }

#endif
