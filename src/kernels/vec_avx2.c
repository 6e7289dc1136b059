/* vec_avx2.c — AVX2 + FMA + F16C versions of the vector primitives in vec.h (scalar tails for n % 8). */
#include "kernels/avx2.h"
#include "kernels/kernels.h"

#if TG_HAVE_AVX2

#include <immintrin.h>
#include <math.h>

#include "util/half.h"

static inline float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline __m256 load8_f16(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}

void tg_avx2_axpy_f32(float a, const float *x, float *y, int64_t n) {
    const __m256 av = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}

void tg_avx2_scale_f32(float *x, float a, int64_t n) {
    const __m256 av = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(av, _mm256_loadu_ps(x + i)));
    for (; i < n; i++) x[i] *= a;
}

void tg_avx2_f16_to_f32_row(const uint16_t *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, load8_f16(src + i));
    for (; i < n; i++) dst[i] = tg_f16_to_f32(src[i]);
}

int64_t tg_avx2_bf16_to_f32_row(const uint16_t *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)(src + i)));
        _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
    }
    return i;
}

void tg_avx2_f32_to_f16_row(const float *src, uint16_t *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(dst + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) dst[i] = tg_f32_to_f16(src[i]);
}

/* The scheme's constants, one list for the 8- and 16-lane versions (the same bits lane for lane). */
#define EXP_HI 88.3762626647949f
#define EXP_LO (-87.3365447504f)
#define EXP_LOG2E 1.44269504088896341f
#define EXP_LN2_HI 0.693359375f
#define EXP_LN2_LO (-2.12194440e-4f)
#define EXP_P0 1.9875691500e-4f
#define EXP_P1 1.3981999507e-3f
#define EXP_P2 8.3334519073e-3f
#define EXP_P3 4.1665795894e-2f
#define EXP_P4 1.6666665459e-1f
#define EXP_P5 5.0000001201e-1f

/* The scheme, written once for both widths, after `under` (x < EXP_LO) is taken: clamp x to [lo, EXP_HI] (NaN
 * passes through: it is the second operand), k = ROUND(x * log2 e) to nearest, x -= k * ln 2 in two parts, the
 * polynomial into y, y *= 2^k. P is the intrinsic prefix (_mm256, _mm512), B the register width in bits. */
#define EXP_SCHEME(P, B, ROUND, x, lo, k, y)                                                                       \
    do {                                                                                                           \
        x = P##_min_ps(P##_set1_ps(EXP_HI), P##_max_ps(lo, x));                                                    \
        k = ROUND(P##_mul_ps(x, P##_set1_ps(EXP_LOG2E)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);           \
        x = P##_fnmadd_ps(k, P##_set1_ps(EXP_LN2_HI), x);                                                          \
        x = P##_fnmadd_ps(k, P##_set1_ps(EXP_LN2_LO), x);                                                          \
        y = P##_set1_ps(EXP_P0);                                                                                   \
        y = P##_fmadd_ps(y, x, P##_set1_ps(EXP_P1));                                                               \
        y = P##_fmadd_ps(y, x, P##_set1_ps(EXP_P2));                                                               \
        y = P##_fmadd_ps(y, x, P##_set1_ps(EXP_P3));                                                               \
        y = P##_fmadd_ps(y, x, P##_set1_ps(EXP_P4));                                                               \
        y = P##_fmadd_ps(y, x, P##_set1_ps(EXP_P5));                                                               \
        y = P##_fmadd_ps(y, P##_mul_ps(x, x), P##_add_ps(x, P##_set1_ps(1.0f)));                                   \
        y = P##_mul_ps(y, P##_castsi##B##_ps(P##_slli_epi32(P##_add_epi32(P##_cvtps_epi32(k), P##_set1_epi32(127)), \
                                                            23)));                                                 \
    } while (0)

/* exp of eight floats: Cephes' single-precision scheme (round x / ln 2 to k, reduce with a two-part ln 2, a
 * degree-6 polynomial, scale by 2^k), within 2 ulp of expf on [-87.3, 88.3]. Below -87.3 (including -inf) the result
 * is 0, above 88.3 it saturates near FLT_MAX (only reached by callers that never pass such values), NaN stays NaN. */
__m256 tg_avx2_exp_ps(__m256 x) {
    const __m256 lo = _mm256_set1_ps(EXP_LO);
    const __m256 under = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    __m256 k, y;
    EXP_SCHEME(_mm256, 256, _mm256_round_ps, x, lo, k, y);
    return _mm256_andnot_ps(under, y);
}

int64_t tg_avx2_max_skip_nan(const float *x, int64_t n, float *m) {
    __m256 a = _mm256_set1_ps(-INFINITY), b = a;
    int64_t i = 0;
    /* max_ps(x, m) is m when x is NaN: NaN never enters */
    for (; i + 16 <= n; i += 16) {
        a = _mm256_max_ps(_mm256_loadu_ps(x + i), a);
        b = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), b);
    }
    for (; i + 8 <= n; i += 8) a = _mm256_max_ps(_mm256_loadu_ps(x + i), a);
    a = _mm256_max_ps(a, b);
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    *m = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
    return i;
}

#if defined(__AVX512F__)
/* tg_avx2_exp_ps on sixteen floats: the same operations lane for lane (the same bits, half the instructions). */
static inline __m512 exp16_ps(__m512 x) {
    const __m512 lo = _mm512_set1_ps(EXP_LO);
    const __mmask16 under = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    __m512 k, y;
    EXP_SCHEME(_mm512, 512, _mm512_roundscale_ps, x, lo, k, y);
    return _mm512_maskz_mov_ps((__mmask16)~under, y);
}
#endif

float tg_avx2_exp_shift_sum(float *x, int64_t n, float m) {
    const __m256 mv = _mm256_set1_ps(m);
    double sum = 0.0;
    int64_t i = 0;
    while (i + 8 <= n) {
        /* fp32 partial sums over at most 64 elements (eight vectors of 8 lanes, in order), then into the double
         * total; with AVX-512 two vectors' exps at a time, added one after the other as before */
        __m256 acc = _mm256_setzero_ps();
        int k = 0;
#if defined(__AVX512F__)
        for (const __m512 mw = _mm512_set1_ps(m); k < 8 && i + 16 <= n; k += 2, i += 16) {
            const __m512 e = exp16_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), mw));
            _mm512_storeu_ps(x + i, e);
            acc = _mm256_add_ps(acc, _mm512_castps512_ps256(e));
            acc = _mm256_add_ps(acc, _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1)));
        }
#endif
        for (; k < 8 && i + 8 <= n; k++, i += 8) {
            const __m256 e = tg_avx2_exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv));
            _mm256_storeu_ps(x + i, e);
            acc = _mm256_add_ps(acc, e);
        }
        sum += (double)hsum_ps(acc);
    }
    for (; i < n; i++) sum += (double)(x[i] = expf(x[i] - m));
    return (float)sum;
}

void tg_avx2_swiglu(float *gate, const float *up, int64_t n) {
    const __m256 neg_lim = _mm256_set1_ps(-87.0f), one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 g = _mm256_loadu_ps(gate + i);
        const __m256 e = tg_avx2_exp_ps(_mm256_xor_ps(g, sign));
        __m256 s = _mm256_div_ps(g, _mm256_add_ps(one, e));
        s = _mm256_andnot_ps(_mm256_cmp_ps(g, neg_lim, _CMP_LT_OQ), s); /* silu -> 0 far left, -inf included */
        _mm256_storeu_ps(gate + i, _mm256_mul_ps(s, _mm256_loadu_ps(up + i)));
    }
    for (; i < n; i++) {
        const float g = gate[i];
        gate[i] = (g == -INFINITY ? 0.0f : g / (1.0f + expf(-g))) * up[i];
    }
}

void tg_avx2_geglu_tanh(float *gate, const float *up, int64_t n) {
    const __m256 c1 = _mm256_set1_ps(GELU_C1), c3 = _mm256_set1_ps(GELU_C3), one = _mm256_set1_ps(1.0f);
    const __m256 exp_max = _mm256_set1_ps(GELU_EXP_MAX), sign = _mm256_set1_ps(-0.0f);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 g = _mm256_loadu_ps(gate + i);
        const __m256 nz = _mm256_xor_ps(_mm256_mul_ps(g, _mm256_fmadd_ps(c3, _mm256_mul_ps(g, g), c1)), sign);
        __m256 s = _mm256_div_ps(g, _mm256_add_ps(one, tg_avx2_exp_ps(nz)));
        s = _mm256_andnot_ps(_mm256_cmp_ps(nz, exp_max, _CMP_GT_OQ), s); /* gelu -> 0 far left, -inf included */
        _mm256_storeu_ps(gate + i, _mm256_mul_ps(s, _mm256_loadu_ps(up + i)));
    }
    for (; i < n; i++) {
        const float g = gate[i], z = g * (GELU_C1 + GELU_C3 * g * g);
        gate[i] = (-z > GELU_EXP_MAX ? 0.0f : g / (1.0f + expf(-z))) * up[i];
    }
}

#else
typedef int tg_vec_avx2_unused; /* ISO C forbids an empty translation unit */
#endif
