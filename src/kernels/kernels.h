/* kernels.h — the CPU kernel tables, one per instruction set: a kernel row per weight type (its fast decode and
 * prefill kernels; the type's ISA-neutral facts are its format row, types.h) and the vector primitives of vec.h /
 * ops.h / quant.h. Like ggml's type_traits (types.h) beside type_traits_cpu (here).
 *
 * Tables: scalar (kernels.c: no fast kernels, the generic paths), AVX2 + FMA + F16C (kernels_avx2.c) and AVX-512
 * (kernels_avx2.c compiled again with the AVX-512 set, with the *_avx512.c kernels; isa_avx512_names.h); aarch64
 * NEON, dotprod and i8mm (kernels_neon.c). Every table computes each
 * (row, activation) result in the canonical order of kernels/arith_order.h, so every table gives the same bits where
 * the tests say so (tests/unit/test_isa.c).
 *
 * Which table runs: tg_kernels(), chosen once per process from tg_cpu_features_get()->isa (cpu_features.h: the
 * CPU's best set, capped by TG_ISA); the table is const, so the choice is immutable after the first call. */
#ifndef TG_KERNELS_KERNELS_H
#define TG_KERNELS_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/quant.h"
#include "kernels/tensor.h"
#include "kernels/types.h"
#include "util/cpu_features.h"

/* GeGLU's gelu_tanh(g) = g * sigmoid(g (GELU_C1 + GELU_C3 g^2)) (ops.h), in every table: GELU_C1 = 2 sqrt(2 / pi),
 * GELU_C3 = GELU_C1 * 0.044715; 0 where the sigmoid's exp(-z) would pass GELU_EXP_MAX (its float overflow). */
#define GELU_C1 1.5957691216057308f
#define GELU_C3 0.07135481627260025f
#define GELU_EXP_MAX 88.0f

/* One weight type's kernels on one instruction set: all NULL (the generic scalar path) or all that the format
 * row's act needs (gemv + tile for TG_ACT_F32, gemv + gemm_q8x or gemm_q8x_rows for TG_ACT_Q8X, gemv + gemm_q8k
 * for TG_ACT_Q8K), so that prefill and decode follow one arithmetic order. */
typedef struct {
    tg_gemv_fn gemv;
    tg_tile_fn tile;
    tg_gemm_q8x_fn gemm_q8x;
    tg_gemm_q8x_rows_fn gemm_q8x_rows;
    tg_gemm_q8k_fn gemm_q8k;
    /* Rows the fast gemv takes at once (8 or 16): a decode step's units of rows are multiples of it, so that no
     * unit ends in rows that a narrower kernel must take. */
    int gemv_rows;
    /* The kernel of the repacked layout (kernels/repack.h), where this table has one: the model loader then repacks
     * the type's matrices. NULL: the file's layout only. */
    tg_repacked_fn repacked;
} tg_type_kernels;

/* Float-row prefill tile that also widens its rows to fp32 row pairs (matmul.c's wide path; contract in avx2.h). */
typedef void (*tg_tile_widen_fn)(tg_dtype type, const uint8_t *w, size_t w_stride, int nr, const uint8_t *x,
                                 size_t x_stride, int64_t cols, float *y, size_t ldy, float *dst);
typedef void (*tg_tile_wide_fn)(const float *wp, int nr, const uint8_t *x, size_t x_stride, int nt, int64_t cols,
                                float *y, size_t ldy);

typedef struct {
    tg_isa isa;
    const char *name; /* tg_isa_name(isa) */
    tg_type_kernels type[TG_DT_COUNT];
    /* Whether the fast kernels take quantised activations (tg_act_prepare quantises only then). */
    bool quant_acts;
    /* Float-type prefill: tiles of tile_rows W rows x tile_vecs activations (tile_rows even when tile_widen is set);
     * tile_widen / tile_wide (or NULL): the tiles over rows widened once per call (matmul.h's tg_act.wide). */
    int tile_rows, tile_vecs;
    tg_tile_widen_fn tile_widen;
    tg_tile_wide_fn tile_wide;
    /* Activation quantisers, bit for bit quant.h's references. */
    void (*quantize_q8x)(const float *x, tg_q8x_block *dst, int64_t n);
    void (*quantize_q8k)(const float *x, tg_q8k_block *dst, int64_t n);
    /* The vec.h / ops.h primitives of the same names (identical contracts and bits across tables where vec.h says
     * so). bf16_to_f32_row and max_skip_nan may stop short: they return how many elements they did, the caller does
     * the rest in scalar code. */
    void (*axpy_f32)(float a, const float *x, float *y, int64_t n);
    void (*scale_f32)(float *x, float a, int64_t n);
    void (*f16_to_f32_row)(const uint16_t *src, float *dst, int64_t n);
    void (*f32_to_f16_row)(const float *src, uint16_t *dst, int64_t n);
    int64_t (*bf16_to_f32_row)(const uint16_t *src, float *dst, int64_t n);
    int64_t (*max_skip_nan)(const float *x, int64_t n, float *m);
    float (*exp_shift_sum)(float *x, int64_t n, float m);
    void (*swiglu)(float *gate, const float *up, int64_t n);
    void (*geglu_tanh)(float *gate, const float *up, int64_t n);
} tg_cpu_kernels;

/* The table the kernels use in this process (see above); never NULL. */
const tg_cpu_kernels *tg_kernels(void);
/* The table of `isa` if this build has one and this CPU can run it (isa <= tg_cpu_features_get()->best), else NULL:
 * for tests and benchmarks that pit tables against each other. TG_ISA does not limit it. */
const tg_cpu_kernels *tg_kernels_for(tg_isa isa);

/* The instruction-set files' tables, NULL where this build compiled them without their instruction set (a build
 * for another architecture, `make check-generic`). Callers go through tg_kernels_for, which checks the CPU. */
const tg_cpu_kernels *tg_cpu_kernels_avx2(void);
const tg_cpu_kernels *tg_cpu_kernels_avx512(void);
/* kernels_neon.c's aarch64 tables (NEON, dotprod, i8mm). */
const tg_cpu_kernels *tg_cpu_kernels_neon(void);
const tg_cpu_kernels *tg_cpu_kernels_dotprod(void);
const tg_cpu_kernels *tg_cpu_kernels_i8mm(void);

#endif
