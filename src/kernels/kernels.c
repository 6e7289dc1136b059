/* kernels.c — the scalar kernel table (portable C, the reference: no fast weight kernels, so matmul.c takes its
 * generic paths) and the one-time choice of the table every caller uses (kernels.h). */
#include "kernels/kernels.h"

#include <math.h>
#include <pthread.h>

#include "tinygpt.h"
#include "util/half.h"

static void axpy_f32(float a, const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}

static void scale_f32(float *x, float a, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] *= a;
}

static void f16_to_f32_row(const uint16_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = tg_f16_to_f32(src[i]);
}

static void f32_to_f16_row(const float *src, uint16_t *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = tg_f32_to_f16(src[i]);
}

static int64_t bf16_to_f32_row(const uint16_t *src, float *dst, int64_t n) {
    for (int64_t i = 0; i < n; i++) dst[i] = tg_bf16_to_f32(src[i]);
    return n;
}

static int64_t max_skip_nan(const float *x, int64_t n, float *m) {
    float best = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (x[i] > best) best = x[i];
    *m = best;
    return n;
}

static float exp_shift_sum(float *x, int64_t n, float m) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] = expf(x[i] - m));
    return (float)sum;
}

/* silu(g) = g * sigmoid(g); for g -> -inf, exp(-g) overflows to +inf and g / inf is -0, except g = -inf itself. */
static inline float silu(float g) {
    if (g == -INFINITY) return 0.0f;
    return g / (1.0f + expf(-g));
}

static void swiglu(float *gate, const float *up, int64_t n) {
    for (int64_t i = 0; i < n; i++) gate[i] = silu(gate[i]) * up[i];
}

/* gelu_tanh(g) = g / 2 (1 + tanh(z / 2)) = g * sigmoid(z), z = 2 sqrt(2 / pi) (g + 0.044715 g^3) = g (GELU_C1 +
 * GELU_C3 g^2); 0 where exp(-z) overflows (g -> -inf, -inf included, which g / inf would make NaN). */
static inline float gelu_tanh(float g) {
    const float z = g * (GELU_C1 + GELU_C3 * g * g);
    return -z > GELU_EXP_MAX ? 0.0f : g / (1.0f + expf(-z));
}

static void geglu_tanh(float *gate, const float *up, int64_t n) {
    for (int64_t i = 0; i < n; i++) gate[i] = gelu_tanh(gate[i]) * up[i];
}

static const tg_cpu_kernels scalar = {
    .isa = TG_ISA_SCALAR,
    .name = "scalar",
    /* .type: every row NULL, the generic paths */
    .quant_acts = false,
    .tile_rows = 2,
    .tile_vecs = 4,
    .tile_widen = NULL,
    .tile_wide = NULL,
    .quantize_q8x = tg_quantize_q8x_ref,
    .quantize_q8k = tg_quantize_q8k_ref,
    .axpy_f32 = axpy_f32,
    .scale_f32 = scale_f32,
    .f16_to_f32_row = f16_to_f32_row,
    .f32_to_f16_row = f32_to_f16_row,
    .bf16_to_f32_row = bf16_to_f32_row,
    .max_skip_nan = max_skip_nan,
    .exp_shift_sum = exp_shift_sum,
    .swiglu = swiglu,
    .geglu_tanh = geglu_tanh,
};

const tg_cpu_kernels *tg_kernels_for(tg_isa isa) {
    const tg_isa best = tg_cpu_features_get()->best;
    if ((unsigned)isa >= TG_ISA_COUNT || isa > best) return NULL;
    if (isa != TG_ISA_SCALAR && tg_isa_arch(isa) != tg_isa_arch(best)) return NULL;
    switch (isa) {
    case TG_ISA_AVX2: return tg_cpu_kernels_avx2();
#if defined(__x86_64__)
    case TG_ISA_AVX512: return tg_cpu_kernels_avx512();
#endif
    case TG_ISA_NEON: return tg_cpu_kernels_neon();
    case TG_ISA_DOTPROD: return tg_cpu_kernels_dotprod();
    case TG_ISA_I8MM: return tg_cpu_kernels_i8mm();
    case TG_ISA_SCALAR: return &scalar;
    default: return NULL;
    }
}

/* The choice, made once (pthread_once) and const afterwards: the features' isa, or the best table below it that this
 * build has. */
static const tg_cpu_kernels *chosen;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void choose(void) {
    const tg_cpu_kernels *k = NULL;
    for (int isa = (int)tg_cpu_features_get()->isa; !k && isa >= 0; isa--) k = tg_kernels_for((tg_isa)isa);
    chosen = k;
}

const tg_cpu_kernels *tg_kernels(void) {
    pthread_once(&once, choose);
    return chosen;
}

const char *tg_kernel_isa(void) { return tg_kernels()->name; }
