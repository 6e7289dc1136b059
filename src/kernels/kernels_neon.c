/* kernels_neon.c — the aarch64 kernel tables (kernels.h): NEON (every aarch64 CPU), dotprod (ARMv8.2 sdot) and
 * i8mm (smmla). NEON starts as a copy of the scalar table (its exact activation quantisers and its vector
 * primitives, whose bits the vec.h contracts compare against) with the rows and primitives that have NEON kernels put
 * in: F32 / F16 / BF16 rows, Q8_0 / Q4_0 and K-quant (Q2_K .. Q6_K) rows (widening multiplies), axpy / scale / bf16
 * widening. dotprod is NEON's with sdot in the integer rows; i8mm is dotprod's with smmla in the Q8_0 / Q4_0
 * prefill (decoding keeps sdot: one token fills half of smmla's 2x2 tile). Built once (pthread_once) and const
 * afterwards. Compiled on another architecture, the file has no table. */
#include "kernels/kernels.h"

#include "kernels/neon.h"

#if TG_HAVE_NEON

#include <pthread.h>

static tg_cpu_kernels neon, dotprod, i8mm;
static pthread_once_t once = PTHREAD_ONCE_INIT;

#define FLOAT_ROW(t) {tg_neon_gemv_##t, tg_neon_tile_##t, NULL, NULL, NULL, 8, NULL}
#define Q32_ROW(isa, t) {tg_##isa##_gemv_##t, NULL, NULL, tg_##isa##_gemm_##t, NULL, 8, NULL}
#define KQ_ROW(isa, t) {tg_##isa##_gemv_##t, NULL, NULL, NULL, tg_##isa##_gemm_q8k_##t, 8, NULL}
#define KQ_ROWS(table, isa)                                                                                         \
    do {                                                                                                            \
        table.type[TG_DT_Q2_K] = (tg_type_kernels)KQ_ROW(isa, q2_k);                                                \
        table.type[TG_DT_Q3_K] = (tg_type_kernels)KQ_ROW(isa, q3_k);                                                \
        table.type[TG_DT_Q4_K] = (tg_type_kernels)KQ_ROW(isa, q4_k);                                                \
        table.type[TG_DT_Q5_K] = (tg_type_kernels)KQ_ROW(isa, q5_k);                                                \
        table.type[TG_DT_Q6_K] = (tg_type_kernels)KQ_ROW(isa, q6_k);                                                \
    } while (0)

static void build(void) {
    neon = *tg_kernels_for(TG_ISA_SCALAR);
    neon.isa = TG_ISA_NEON;
    neon.name = tg_isa_name(TG_ISA_NEON);
    neon.type[TG_DT_F32] = (tg_type_kernels)FLOAT_ROW(f32);
    neon.type[TG_DT_F16] = (tg_type_kernels)FLOAT_ROW(f16);
    neon.type[TG_DT_BF16] = (tg_type_kernels)FLOAT_ROW(bf16);
    neon.type[TG_DT_Q8_0] = (tg_type_kernels)Q32_ROW(neon, q8_0);
    neon.type[TG_DT_Q4_0] = (tg_type_kernels)Q32_ROW(neon, q4_0);
    KQ_ROWS(neon, neon);
    neon.quant_acts = true;
    neon.tile_rows = 2;
    neon.tile_vecs = 4;
    neon.axpy_f32 = tg_neon_axpy_f32;
    neon.scale_f32 = tg_neon_scale_f32;
    neon.bf16_to_f32_row = tg_neon_bf16_to_f32_row;
    dotprod = neon;
    dotprod.isa = TG_ISA_DOTPROD;
    dotprod.name = tg_isa_name(TG_ISA_DOTPROD);
    dotprod.type[TG_DT_Q8_0] = (tg_type_kernels)Q32_ROW(dotprod, q8_0);
    dotprod.type[TG_DT_Q4_0] = (tg_type_kernels)Q32_ROW(dotprod, q4_0);
    KQ_ROWS(dotprod, dotprod);
    i8mm = dotprod;
    i8mm.isa = TG_ISA_I8MM;
    i8mm.name = tg_isa_name(TG_ISA_I8MM);
    i8mm.type[TG_DT_Q8_0].gemm_q8x_rows = tg_i8mm_gemm_q8_0;
    i8mm.type[TG_DT_Q4_0].gemm_q8x_rows = tg_i8mm_gemm_q4_0;
}

const tg_cpu_kernels *tg_cpu_kernels_neon(void) {
    pthread_once(&once, build);
    return &neon;
}

const tg_cpu_kernels *tg_cpu_kernels_dotprod(void) {
    pthread_once(&once, build);
    return &dotprod;
}

const tg_cpu_kernels *tg_cpu_kernels_i8mm(void) {
    pthread_once(&once, build);
    return &i8mm;
}

#else

const tg_cpu_kernels *tg_cpu_kernels_neon(void) { return NULL; }
const tg_cpu_kernels *tg_cpu_kernels_dotprod(void) { return NULL; }
const tg_cpu_kernels *tg_cpu_kernels_i8mm(void) { return NULL; }

#endif
