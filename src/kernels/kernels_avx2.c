/* kernels_avx2.c — the AVX2 + FMA + F16C kernel table (kernels.h), and, compiled a second time with the AVX-512 set
 * (isa_avx512_names.h renames it tg_cpu_kernels_avx512), the AVX-512 table: the same rows, whose kernels then take
 * their 512-bit paths, with the AVX-512-only kernels (sixteen-row Q8_0 / Q4_0 decode and the repacked layout,
 * two-row-per-register K-quants, widened float tiles). Compiled without these sets (another architecture, `make
 * check-generic`), it has no table. */
#include "kernels/kernels.h"

#include "kernels/avx2.h"

#if TG_HAVE_AVX2 && (!defined(TG_ISA_VARIANT_AVX512) || TG_HAVE_AVX512)

#define FAST(gemv, tile) {gemv, tile, NULL, NULL, NULL, 8, NULL}
/* Q8_0 / Q4_0: gemv_avx2.c's sixteen-row kernel where AVX-512 VNNI is there (quant_rows16), and the repacked
 * layout's (gemv_repacked_avx512.c), else eight rows */
#if TG_HAVE_KQ512
#define FAST_Q32(t) {tg_avx2_gemv_##t, NULL, tg_avx2_gemm_##t, NULL, NULL, 16, tg_avx512_repacked_##t}
#define FAST_K512(t) {tg_avx512_gemv_##t, NULL, NULL, NULL, tg_avx512_gemm_q8k_##t, 8, NULL}
#else
#define FAST_Q32(t) {tg_avx2_gemv_##t, NULL, tg_avx2_gemm_##t, NULL, NULL, 8, NULL}
#define FAST_K512(t) FAST_K(t)
#endif
#define FAST_X(t) {tg_avx2_gemv_##t, NULL, NULL, tg_avx2_gemm_q8x_##t, NULL, 8, NULL}
#define FAST_K(t) {tg_avx2_gemv_##t, NULL, NULL, NULL, tg_avx2_gemm_q8k_##t, 8, NULL}

static const tg_cpu_kernels table = {
#if TG_HAVE_AVX512
    .isa = TG_ISA_AVX512,
    .name = "avx512",
#else
    .isa = TG_ISA_AVX2,
    .name = "avx2",
#endif
    .type =
        {
            [TG_DT_F32] = FAST(tg_avx2_gemv_f32, tg_avx2_tile_f32),
            [TG_DT_F16] = FAST(tg_avx2_gemv_f16, tg_avx2_tile_f16),
            [TG_DT_BF16] = FAST(tg_avx2_gemv_bf16, tg_avx2_tile_bf16),
            [TG_DT_Q8_0] = FAST_Q32(q8_0),
            [TG_DT_Q4_0] = FAST_Q32(q4_0),
            [TG_DT_Q4_1] = FAST_X(q4_1),
            [TG_DT_Q5_0] = FAST_X(q5_0),
            [TG_DT_Q5_1] = FAST_X(q5_1),
            [TG_DT_Q2_K] = FAST_K(q2_k),
            [TG_DT_Q3_K] = FAST_K(q3_k),
            [TG_DT_Q4_K] = FAST_K512(q4_k),
            [TG_DT_Q5_K] = FAST_K512(q5_k),
            [TG_DT_Q6_K] = FAST_K512(q6_k),
            [TG_DT_IQ4_NL] = FAST_X(iq4_nl),
        },
    .quant_acts = true,
    /* 6 x 8 where one 512-bit register holds two rows' accumulators; 2 x 4 with 16 registers */
#if TG_TILE_AVX512
    .tile_rows = 6,
    .tile_widen = tg_avx512_tile_widen,
    .tile_wide = tg_avx512_tile_wide,
#else
    .tile_rows = 2,
    .tile_widen = NULL,
    .tile_wide = NULL,
#endif
    .tile_vecs = TG_TILE_MAX_VECS,
    .quantize_q8x = tg_avx2_quantize_q8x,
    .quantize_q8k = tg_avx2_quantize_q8k,
    .axpy_f32 = tg_avx2_axpy_f32,
    .scale_f32 = tg_avx2_scale_f32,
    .f16_to_f32_row = tg_avx2_f16_to_f32_row,
    .f32_to_f16_row = tg_avx2_f32_to_f16_row,
    .bf16_to_f32_row = tg_avx2_bf16_to_f32_row,
    .max_skip_nan = tg_avx2_max_skip_nan,
    .exp_shift_sum = tg_avx2_exp_shift_sum,
    .swiglu = tg_avx2_swiglu,
    .geglu_tanh = tg_avx2_geglu_tanh,
};

const tg_cpu_kernels *tg_cpu_kernels_avx2(void) { return &table; }

#else

const tg_cpu_kernels *tg_cpu_kernels_avx2(void) { return NULL; }

#endif
