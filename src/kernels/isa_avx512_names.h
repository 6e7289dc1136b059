/* isa_avx512_names.h — the names the AVX-512 build of the AVX2 sources gives their functions. The Makefile compiles
 * a few AVX2 kernel files twice: once with the AVX2 set (the AVX2 table) and once with the AVX-512 set, where their
 * code takes its 512-bit paths (the AVX-512 table); this header, forced into that second compile (-include), renames
 * every function they define, so that both builds link into one library. A name missing here is a duplicate symbol
 * at link time, never a silent mix-up. The *_avx512.c files are compiled with it too, so that they call the AVX-512
 * builds of the functions they share. */
#ifndef TG_KERNELS_ISA_AVX512_NAMES_H
#define TG_KERNELS_ISA_AVX512_NAMES_H

#define TG_ISA_VARIANT_AVX512 1

#define tg_avx2_gemv_bf16 tg_x512_avx2_gemv_bf16
#define tg_avx2_gemv_f16 tg_x512_avx2_gemv_f16
#define tg_avx2_gemv_f32 tg_x512_avx2_gemv_f32
#define tg_avx2_gemv_q4_0 tg_x512_avx2_gemv_q4_0
#define tg_avx2_gemv_q8_0 tg_x512_avx2_gemv_q8_0
#define tg_avx2_gemm_q8x_iq4_nl tg_x512_avx2_gemm_q8x_iq4_nl
#define tg_avx2_gemm_q8x_q4_1 tg_x512_avx2_gemm_q8x_q4_1
#define tg_avx2_gemm_q8x_q5_0 tg_x512_avx2_gemm_q8x_q5_0
#define tg_avx2_gemm_q8x_q5_1 tg_x512_avx2_gemm_q8x_q5_1
#define tg_avx2_gemv_iq4_nl tg_x512_avx2_gemv_iq4_nl
#define tg_avx2_gemv_q4_1 tg_x512_avx2_gemv_q4_1
#define tg_avx2_gemv_q5_0 tg_x512_avx2_gemv_q5_0
#define tg_avx2_gemv_q5_1 tg_x512_avx2_gemv_q5_1
#define tg_avx2_gemm_q8k_q2_k tg_x512_avx2_gemm_q8k_q2_k
#define tg_avx2_gemm_q8k_q3_k tg_x512_avx2_gemm_q8k_q3_k
#define tg_avx2_gemm_q8k_q4_k tg_x512_avx2_gemm_q8k_q4_k
#define tg_avx2_gemm_q8k_q5_k tg_x512_avx2_gemm_q8k_q5_k
#define tg_avx2_gemm_q8k_q6_k tg_x512_avx2_gemm_q8k_q6_k
#define tg_avx2_gemv_q2_k tg_x512_avx2_gemv_q2_k
#define tg_avx2_gemv_q3_k tg_x512_avx2_gemv_q3_k
#define tg_avx2_gemv_q4_k tg_x512_avx2_gemv_q4_k
#define tg_avx2_gemv_q5_k tg_x512_avx2_gemv_q5_k
#define tg_avx2_gemv_q6_k tg_x512_avx2_gemv_q6_k
#define tg_avx2_quantize_q8k tg_x512_avx2_quantize_q8k
#define tg_avx2_gemm_q4_0 tg_x512_avx2_gemm_q4_0
#define tg_avx2_gemm_q8_0 tg_x512_avx2_gemm_q8_0
#define tg_avx2_quantize_q8x tg_x512_avx2_quantize_q8x
#define tg_avx2_tile_bf16 tg_x512_avx2_tile_bf16
#define tg_avx2_tile_f16 tg_x512_avx2_tile_f16
#define tg_avx2_tile_f32 tg_x512_avx2_tile_f32
#define tg_attn_avx2_fold tg_x512_attn_avx2_fold
#define tg_attn_avx2_runs tg_x512_attn_avx2_runs
#define tg_attn_avx2_scores tg_x512_attn_avx2_scores
#define tg_attn_avx2_scores_rows tg_x512_attn_avx2_scores_rows
#define tg_attn_avx2_values tg_x512_attn_avx2_values
#define tg_attn_avx2_values_rows tg_x512_attn_avx2_values_rows
#define tg_attn_avx2_widen tg_x512_attn_avx2_widen
#define tg_attn_int_prefetch_tile tg_x512_attn_int_prefetch_tile
#define tg_attn_int_prefetch_scales tg_x512_attn_int_prefetch_scales
#define tg_attn_int_keys tg_x512_attn_int_keys
#define tg_attn_int_values tg_x512_attn_int_values
#define tg_cpu_kernels_avx2 tg_cpu_kernels_avx512
#define tg_attn_kernels_avx2 tg_attn_kernels_avx512

#endif
