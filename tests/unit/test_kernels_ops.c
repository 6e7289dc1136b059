/* test_kernels_ops.c — RMSNorm, RoPE (both styles, tables, the GGUF/HF permutation), SwiGLU and the vector
 * primitives of vec.h, against direct formulas evaluated in double / long double.
 *
 * Tolerances: rmsnorm 2e-6 relative per element; rope 2e-6 * |x| per element against a long-double formula (an
 * fp32 angle would be off by ~6e-3 rad at position 100,000 and fail); rope norm preserved within 1e-6 relative;
 * HALF vs INTERLEAVED-on-permuted and table vs direct: bit-exact; swiglu 1e-6 relative; axpy 1e-6; fp16/bf16 row conversions bit-exact against util/half.h. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/kernels.h"
#include "kernels/ops.h"
#include "kernels/vec.h"
#include "util/cpu_features.h"
#include "util/half.h"
#include "test_rng.h"


/* ---- rmsnorm ------------------------------------------------------------------------------------------------- */

static void test_rmsnorm(void **state) {
    (void)state;
    rng_t r = {11};
    enum { N = 37 };
    float x[N], w[N], out[N];
    for (int i = 0; i < N; i++) {
        x[i] = rng_unit(&r) * 3.0f;
        w[i] = 1.0f + rng_unit(&r) * 0.5f;
    }
    const float eps = 1e-5f;
    tg_rmsnorm(out, x, w, N, eps);
    double ss = 0.0;
    for (int i = 0; i < N; i++) ss += (double)x[i] * x[i];
    double inv = 1.0 / sqrt(ss / N + eps);
    for (int i = 0; i < N; i++) {
        double e = x[i] * inv * w[i];
        assert_true(fabs(out[i] - e) <= 2e-6 * fabs(e) + 1e-12);
    }
    /* in place gives the same bits */
    float y[N];
    memcpy(y, x, sizeof y);
    tg_rmsnorm(y, y, w, N, eps);
    assert_memory_equal(y, out, sizeof y);
    /* all zeros: eps keeps it finite */
    float z[4] = {0, 0, 0, 0}, o4[4];
    tg_rmsnorm(o4, z, w, 4, eps);
    for (int i = 0; i < 4; i++) assert_true(o4[i] == 0.0f);
}

/* llama.cpp's ggml_compute_forward_rms_norm_f32, restated: squares rounded to fp32, summed in double in order, the
 * mean and 1 / sqrt in fp32. tg_rmsnorm must give exactly its bits; over many rows the scale differs from the
 * correctly rounded double one somewhere, so the test sees a change back to double. */
static void test_rmsnorm_is_llamacpps(void **state) {
    (void)state;
    rng_t r = {13};
    enum { N = 96, ROWS = 200 };
    float x[N], w[N], out[N];
    for (int i = 0; i < N; i++) w[i] = 1.0f + rng_unit(&r) * 0.5f;
    const float eps = 1e-5f;
    int differs_from_double = 0;
    for (int row = 0; row < ROWS; row++) {
        for (int i = 0; i < N; i++) x[i] = rng_unit(&r) * (float)(1 + row % 7);
        tg_rmsnorm(out, x, w, N, eps);
        double sum = 0.0, exact = 0.0;
        for (int i = 0; i < N; i++) {
            sum += (double)(x[i] * x[i]);
            exact += (double)x[i] * (double)x[i];
        }
        const float mean = (float)(sum / N);
        const float scale = 1.0f / sqrtf(mean + eps);
        differs_from_double += scale != (float)(1.0 / sqrt(exact / N + (double)eps));
        for (int i = 0; i < N; i++) {
            const float e = x[i] * scale * w[i];
            assert_memory_equal(&out[i], &e, sizeof e);
        }
    }
    assert_true(differs_from_double > 0);
}

/* ---- rope ---------------------------------------------------------------------------------------------------- */

/* The rotation written from the definition, in long double. */
static void rope_expected(const float *x, double *out, int n_heads, int d, int64_t pos, float theta,
                          tg_rope_style style) {
    for (int h = 0; h < n_heads; h++) {
        for (int i = 0; i < d / 2; i++) {
            int ia = style == TG_ROPE_HALF ? i : 2 * i;
            int ib = style == TG_ROPE_HALF ? i + d / 2 : 2 * i + 1;
            long double f = powl((long double)theta, -2.0L * i / d);
            long double ang = (long double)pos * f;
            long double c = cosl(ang), s = sinl(ang);
            long double a = x[h * d + ia], b = x[h * d + ib];
            out[h * d + ia] = (double)(a * c - b * s);
            out[h * d + ib] = (double)(a * s + b * c);
        }
    }
}

static void test_rope_against_formula(void **state) {
    (void)state;
    rng_t r = {12};
    const int64_t positions[] = {0, 1, 7, 1000, 32767, 100000, 1000003};
    const int dims[] = {2, 8, 64, 128, 640};
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
        const int d = dims[di], nh = 3;
        float *x = malloc(sizeof(float) * (size_t)(nh * d));
        float *y = malloc(sizeof(float) * (size_t)(nh * d));
        double *e = malloc(sizeof(double) * (size_t)(nh * d));
        assert_true(x && y && e);
        for (int i = 0; i < nh * d; i++) x[i] = rng_unit(&r);
        for (int st = 0; st < 2; st++) {
            for (size_t pi = 0; pi < sizeof positions / sizeof positions[0]; pi++) {
                memcpy(y, x, sizeof(float) * (size_t)(nh * d));
                tg_rope(y, nh, d, positions[pi], 10000.0f, (tg_rope_style)st);
                rope_expected(x, e, nh, d, positions[pi], 10000.0f, (tg_rope_style)st);
                double n0 = 0.0, n1 = 0.0;
                for (int i = 0; i < nh * d; i++) {
                    if (fabs(y[i] - e[i]) > 2e-6)
                        fail_msg("rope d=%d style=%d pos=%lld i=%d: %.9g vs %.9g", d, st, (long long)positions[pi], i,
                                 (double)y[i], e[i]);
                    n0 += (double)x[i] * x[i];
                    n1 += (double)y[i] * y[i];
                }
                assert_true(fabs(sqrt(n1) - sqrt(n0)) <= 1e-6 * sqrt(n0));
                if (positions[pi] == 0) assert_memory_equal(x, y, sizeof(float) * (size_t)(nh * d));
            }
        }
        free(x);
        free(y);
        free(e);
    }
}

/* Rotating by p then by q is rotating by p + q (what relative-position attention relies on). */
static void test_rope_composes(void **state) {
    (void)state;
    rng_t r = {13};
    enum { D = 64, H = 2 };
    float a[H * D], b[H * D];
    for (int i = 0; i < H * D; i++) a[i] = b[i] = rng_unit(&r);
    tg_rope(a, H, D, 1234, 500000.0f, TG_ROPE_HALF);
    tg_rope(a, H, D, 4321, 500000.0f, TG_ROPE_HALF);
    tg_rope(b, H, D, 5555, 500000.0f, TG_ROPE_HALF);
    for (int i = 0; i < H * D; i++) assert_true(fabsf(a[i] - b[i]) <= 1e-5f);
}

/* llama.cpp's converter permutes each head's Q/K rows so that new row 2j = old row j and new row 2j+1 = old row
 * j + d/2. Then q_gguf = P q_hf, and INTERLEAVED(P q) must equal P HALF(q): the GGUF model and the HF model compute
 * the same attention. Exact, because both styles rotate the same (a, b) pairs by the same cos/sin. */
static void test_rope_half_equals_interleaved_on_permuted(void **state) {
    (void)state;
    rng_t r = {14};
    enum { D = 16, H = 4 };
    float q[H * D], pq[H * D], half_then_p[H * D];
    for (int i = 0; i < H * D; i++) q[i] = rng_unit(&r);
    const int64_t positions[] = {0, 3, 77, 100000};
    for (size_t k = 0; k < 4; k++) {
        for (int h = 0; h < H; h++)
            for (int j = 0; j < D / 2; j++) {
                pq[h * D + 2 * j] = q[h * D + j];
                pq[h * D + 2 * j + 1] = q[h * D + j + D / 2];
            }
        float hq[H * D];
        memcpy(hq, q, sizeof hq);
        tg_rope(hq, H, D, positions[k], 10000.0f, TG_ROPE_HALF);
        for (int h = 0; h < H; h++)
            for (int j = 0; j < D / 2; j++) {
                half_then_p[h * D + 2 * j] = hq[h * D + j];
                half_then_p[h * D + 2 * j + 1] = hq[h * D + j + D / 2];
            }
        tg_rope(pq, H, D, positions[k], 10000.0f, TG_ROPE_INTERLEAVED);
        assert_memory_equal(pq, half_then_p, sizeof pq);
    }
    /* and the styles really differ on the same unpermuted input */
    float a[D], b[D];
    for (int i = 0; i < D; i++) a[i] = b[i] = rng_unit(&r);
    tg_rope(a, 1, D, 5, 10000.0f, TG_ROPE_HALF);
    tg_rope(b, 1, D, 5, 10000.0f, TG_ROPE_INTERLEAVED);
    assert_memory_not_equal(a, b, sizeof a);
}

static void test_rope_table(void **state) {
    (void)state;
    tg_error err = {0};
    assert_null(tg_rope_table_new(7, 10000.0f, 16, &err));
    assert_true(strlen(err.msg) > 0);
    assert_null(tg_rope_table_new(8, 0.0f, 16, &err));
    tg_rope_table_free(NULL);
    rng_t r = {15};
    enum { D = 128, H = 3 };
    tg_rope_table *t = tg_rope_table_new(D, 10000.0f, 64, &err);
    assert_non_null(t);
    float x[H * D], a[H * D], b[H * D];
    for (int i = 0; i < H * D; i++) x[i] = rng_unit(&r);
    const int64_t positions[] = {0, 1, 63, 64, 100000, -3};
    for (int st = 0; st < 2; st++)
        for (size_t k = 0; k < sizeof positions / sizeof positions[0]; k++) {
            memcpy(a, x, sizeof x);
            memcpy(b, x, sizeof x);
            tg_rope(a, H, D, positions[k], 10000.0f, (tg_rope_style)st);
            tg_rope_table_apply(t, b, H, positions[k], (tg_rope_style)st);
            assert_memory_equal(a, b, sizeof a);
        }
    tg_rope_table_free(t);
}

/* ---- swiglu -------------------------------------------------------------------------------------------------- */

static void test_swiglu(void **state) {
    (void)state;
    float g[9] = {0.0f, 1.0f, -1.0f, 3.5f, -20.0f, 100.0f, -100.0f, -1000.0f, 1000.0f};
    float u[9] = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 0.25f, 7.0f, 2.0f, -1.0f};
    float o[9];
    memcpy(o, g, sizeof o);
    tg_swiglu(o, u, 9);
    for (int i = 0; i < 9; i++) {
        double e = (double)g[i] / (1.0 + exp(-(double)g[i])) * u[i];
        assert_true(isfinite(o[i]));
        assert_true(fabs(o[i] - e) <= 1e-6 * fabs(e) + 1e-30);
    }
    assert_true(o[7] == 0.0f);
    float gi[3] = {-INFINITY, INFINITY, -FLT_MAX}, ui[3] = {2.0f, 2.0f, 2.0f};
    tg_swiglu(gi, ui, 3);
    assert_true(gi[0] == 0.0f);
    assert_true(isinf(gi[1]) && gi[1] > 0);
    assert_true(gi[2] == 0.0f);
}

/* A long swiglu through the vector path (every lane position, values across the exp range) against the double
 * formula: 1e-6 relative (2 ulp of exp, a division and a product). */
static void test_swiglu_long(void **state) {
    (void)state;
    enum { N = 1003 };
    float g[N], u[N], o[N];
    for (int i = 0; i < N; i++) {
        g[i] = (float)(i - N / 2) * 0.2f;
        u[i] = 1.0f + (float)(i % 7) * 0.1f;
    }
    memcpy(o, g, sizeof o);
    tg_swiglu(o, u, N);
    for (int i = 0; i < N; i++) {
        double e = (double)g[i] / (1.0 + exp(-(double)g[i])) * u[i];
        if (!(fabs(o[i] - e) <= 1e-6 * fabs(e) + 1e-30)) fail_msg("swiglu(%g) = %.9g, want %.9g", (double)g[i], o[i], e);
    }
}

/* gelu_tanh in double, as transformers' gelu_pytorch_tanh writes it. */
static double gelu_tanh_ref(double g) {
    return 0.5 * g * (1.0 + tanh(0.79788456080286535588 * (g + 0.044715 * g * g * g)));
}

/* tg_geglu_tanh: the edge cases of ops.h, and a long run through the vector path (every lane position, values across
 * the sigmoid's range) against the double tanh formula: 1e-6 relative plus 2e-7 |g u| absolute (ops.h). */
static void test_geglu_tanh(void **state) {
    (void)state;
    float gi[5] = {-INFINITY, INFINITY, -FLT_MAX, 0.0f, NAN}, ui[5] = {2.0f, 2.0f, 2.0f, 2.0f, 2.0f};
    tg_geglu_tanh(gi, ui, 5);
    assert_true(gi[0] == 0.0f && gi[2] == 0.0f && gi[3] == 0.0f);
    assert_true(isinf(gi[1]) && gi[1] > 0);
    assert_true(gi[4] != gi[4]);
    enum { N = 1003 };
    float g[N], u[N], o[N];
    for (int i = 0; i < N; i++) {
        g[i] = (float)(i - N / 2) * 0.031f;
        u[i] = 1.0f + (float)(i % 7) * 0.1f;
    }
    memcpy(o, g, sizeof o);
    tg_geglu_tanh(o, u, N);
    for (int i = 0; i < N; i++) {
        const double e = gelu_tanh_ref(g[i]) * u[i];
        if (!(fabs(o[i] - e) <= 1e-6 * fabs(e) + 2e-7 * fabs((double)g[i] * u[i])))
            fail_msg("geglu_tanh(%g) = %.9g, want %.9g", (double)g[i], (double)o[i], e);
    }
}

/* tg_exp_shift_sum: each exp(x - m) within 2 ulp of the double exp (results below 1e-37 compared absolutely), -inf gives
 * 0, NaN stays NaN, and the sum within 1e-6 relative of the double sum. */
static void test_exp_shift_sum(void **state) {
    (void)state;
    enum { N = 2051 };
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    assert_true(x && y);
    for (int i = 0; i < N; i++) x[i] = -100.0f + (float)i * (100.0f / (float)(N - 1)) + (i % 3) * 1e-3f;
    x[7] = -INFINITY;
    const float m = 0.5f;
    memcpy(y, x, N * sizeof(float));
    float sum = tg_exp_shift_sum(y, N, m);
    double want_sum = 0.0;
    for (int i = 0; i < N; i++) {
        double e = exp((double)(x[i] - m)); /* the argument as the kernel sees it: x - m rounded to fp32 */
        want_sum += e;
        double tol = e > 1e-37 ? 2.5e-7 * e : 2e-38;
        if (!(fabs((double)y[i] - e) <= tol)) fail_msg("exp(%.9g) = %.9g, want %.9g", (double)x[i] - m, y[i], e);
    }
    assert_true(y[7] == 0.0f);
    assert_true(fabs((double)sum - want_sum) <= 1e-6 * want_sum);
    float z[9] = {0, 0, 0, NAN, 0, 0, 0, 0, 0};
    tg_exp_shift_sum(z, 9, 0.0f);
    assert_true(isnan(z[3]) && z[0] == 1.0f);
    assert_true(tg_exp_shift_sum(z, 0, 0.0f) == 0.0f);
    free(x);
    free(y);
}

/* The SIMD tg_exp_shift_sum's order, whatever the register width: each exp as an 8-element call computes it (a wider
 * kernel computes the same lanes; -inf, NaN and the clamps included), summed in fp32 per lane over blocks of eight
 * 8-element vectors, each block's lanes reduced as ((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)) into a double,
 * then the tail's expf. Bit for bit. (The scalar function sums in double: no order to check.) */
static void test_exp_shift_sum_order(void **state) {
    (void)state;
    /* a table with the scalar exp_shift_sum (the scalar one; the aarch64 ones for now) has no order to check */
    if (tg_kernels()->exp_shift_sum == tg_kernels_for(TG_ISA_SCALAR)->exp_shift_sum) skip();
    enum { N = 1100 };
    rng_t r = {29};
    float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float)), *e = malloc(N * sizeof(float));
    assert_true(x && y && e);
    for (int i = 0; i < N; i++) x[i] = 15.0f * (rng_unit(&r) - 1.0f); /* (-30, 0] */
    for (int64_t n = 0; n <= N; n += n < 200 ? 1 : 97) {
        const float m = -1.0f;
        memcpy(y, x, (size_t)n * sizeof(float));
        memcpy(e, x, (size_t)n * sizeof(float));
        const float sum = tg_exp_shift_sum(y, n, m);
        double want = 0.0;
        int64_t i = 0;
        while (i + 8 <= n) {
            float a[8] = {0};
            for (int k = 0; k < 8 && i + 8 <= n; k++, i += 8) {
                tg_exp_shift_sum(e + i, 8, m);
                for (int l = 0; l < 8; l++) a[l] += e[i + l];
            }
            want += (double)(((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7])));
        }
        for (; i < n; i++) want += (double)(e[i] = expf(e[i] - m));
        if (n && memcmp(y, e, (size_t)n * sizeof(float)))
            fail_msg("n %d: the exps differ from 8-element calls", (int)n);
        if (sum != (float)want) fail_msg("n %d: sum %.9g, in the 8-lane order %.9g", (int)n, (double)sum, want);
    }
    /* the special lanes: below the range, -inf, NaN, above the range (saturates), in both halves of a 16-lane step */
    const float special[] = {-100.0f, -INFINITY, NAN, 100.0f, -87.5f, 88.5f};
    for (int i = 0; i < 32; i++) x[i] = i % 3 == 0 ? special[(i / 3) % 6] : -0.5f * (float)i;
    memcpy(y, x, 32 * sizeof(float));
    memcpy(e, x, 32 * sizeof(float));
    tg_exp_shift_sum(y, 32, 0.0f);
    for (int i = 0; i < 32; i += 8) tg_exp_shift_sum(e + i, 8, 0.0f);
    if (memcmp(y, e, 32 * sizeof(float))) fail_msg("the special lanes' exps differ from 8-element calls");
    free(x), free(y), free(e);
}

/* ---- vec.h --------------------------------------------------------------------------------------------------- */

static void test_axpy_scale(void **state) {
    (void)state;
    rng_t r = {16};
    const int64_t ns[] = {0, 1, 7, 8, 9, 15, 16, 17, 31, 100, 1001};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        int64_t n = ns[k];
        float *a = malloc(sizeof(float) * (size_t)(n + 1)), *b = malloc(sizeof(float) * (size_t)(n + 1));
        float *y = malloc(sizeof(float) * (size_t)(n + 1));
        assert_true(a && b && y);
        /* +1: unaligned starts */
        float *a1 = a + 1, *b1 = b + 1;
        for (int64_t i = 0; i < n; i++) {
            a1[i] = rng_unit(&r);
            b1[i] = rng_unit(&r);
        }
        for (int64_t i = 0; i < n; i++) y[i] = b1[i];
        tg_axpy_f32(0.75f, a1, y, n);
        for (int64_t i = 0; i < n; i++) assert_true(fabsf(y[i] - (b1[i] + 0.75f * a1[i])) <= 1e-6f);
        for (int64_t i = 0; i < n; i++) y[i] = b1[i];
        tg_scale_f32(y, 0.125f, n);
        for (int64_t i = 0; i < n; i++) assert_true(y[i] == b1[i] * 0.125f);
        free(a);
        free(b);
        free(y);
    }
}

static void test_half_rows_exact(void **state) {
    (void)state;
    /* every fp16 value, widened by the row function and by the scalar helper */
    uint16_t *h = malloc(65536 * sizeof(uint16_t));
    float *f = malloc(65536 * sizeof(float));
    uint16_t *back = malloc(65536 * sizeof(uint16_t));
    assert_true(h && f && back);
    for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
    tg_f16_to_f32_row(h, f, 65536);
    for (int i = 0; i < 65536; i++) {
        float e = tg_f16_to_f32(h[i]);
        if (isnan(e)) assert_true(isnan(f[i]));
        else assert_true(tg_f32_to_bits(f[i]) == tg_f32_to_bits(e));
    }
    /* narrowing back is the identity on every non-NaN fp16 value */
    tg_f32_to_f16_row(f, back, 65536);
    for (int i = 0; i < 65536; i++)
        if (!isnan(f[i])) assert_true(back[i] == h[i]);
    /* random fp32 across the fp16 range (rounding, subnormals, overflow) against the scalar rounding */
    rng_t r = {17};
    for (int i = 0; i < 65536; i++) f[i] = rng_unit(&r) * ldexpf(1.0f, (int)(rng_next(&r) % 48) - 30);
    tg_f32_to_f16_row(f, back, 65536);
    for (int i = 0; i < 65536; i++) assert_true(back[i] == tg_f32_to_f16(f[i]));
    tg_f32_to_bf16_row(f, back, 65536);
    for (int i = 0; i < 65536; i++) assert_true(back[i] == tg_f32_to_bf16(f[i]));
    tg_bf16_to_f32_row(back, f, 65536);
    for (int i = 0; i < 65536; i++) assert_true(tg_f32_to_bits(f[i]) == (uint32_t)back[i] << 16);
    free(h);
    free(f);
    free(back);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_rmsnorm_is_llamacpps),
        cmocka_unit_test(test_rope_against_formula),
        cmocka_unit_test(test_rope_composes),
        cmocka_unit_test(test_rope_half_equals_interleaved_on_permuted),
        cmocka_unit_test(test_rope_table),
        cmocka_unit_test(test_swiglu),
        cmocka_unit_test(test_geglu_tanh),
        cmocka_unit_test(test_swiglu_long),
        cmocka_unit_test(test_exp_shift_sum),
        cmocka_unit_test(test_exp_shift_sum_order),
        cmocka_unit_test(test_axpy_scale),
        cmocka_unit_test(test_half_rows_exact),
    };
    return cmocka_run_group_tests_name("kernels_ops", tests, NULL, NULL);
}
