/* test_kernels.c — matvec/matmul for every weight type against the scalar reference, and Q8_0/Q4_0 block layouts.
 *
 * Tolerances (E = sum_j |w_j x_j| of the row being checked):
 *   fast F32/F16/BF16 vs reference:            |diff| <= 1e-5 * E  (fp32 accumulation of <= 300 terms needs ~5e-6)
 *   fast Q8_0/Q4_0/K-quants vs reference (exact x): |diff| <= sum_j |w_j| * d_x(j) / 2 * 1.001 + 1e-5 * E, d_x
 *                                               the activation block scale (32 elements for Q8_0/Q4_0, 256 for the
 *                                               K-quants: the integer path's x-quantisation bound)
 *   fast Q8_0/Q4_0/K-quants vs exact product with the quantised x (AVX2 only): |diff| <= 1e-5 * E
 *   matmul vs n matvecs, any split of the rows: bit-identical (one arithmetic order per output in every kernel)
 *   dequantisation of hand-made blocks:         exact. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/avx2.h"
#include "kernels/ggml_blocks.h"
#include "kernels/kernels.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "util/half.h"
#include "util/thread_pool.h"
#include "test_rng.h"

/* teams[n]: the production thread team (util/thread_pool.h) of n threads, the kind the forward pass runs on;
 * teams[1] = NULL, the calling thread alone. Built once by the group setup. */
static tg_pool *teams[4];

static int make_teams(void **state) {
    (void)state;
    teams[2] = tg_pool_new(2, NULL);
    teams[3] = tg_pool_new(3, NULL);
    return teams[2] && teams[3] ? 0 : -1;
}

static int free_teams(void **state) {
    (void)state;
    tg_pool_free(teams[2]);
    tg_pool_free(teams[3]);
    return 0;
}

/* ---- building test matrices ---------------------------------------------------------------------------------- */

/* A random [rows, cols] matrix of `type` in a malloc'ed buffer, placed at an odd byte offset (1) when misalign so
 * that the kernels' unaligned handling is exercised (UBSan checks alignment). Q8_0 / Q4_0 blocks are random
 * bytes (all 256 int8 values occur, including -128) with random fp16 scales of either sign; every other type is
 * uniform values through its reference encoder (types.h). *base receives the pointer to free. */
static void *make_matrix(rng_t *r, tg_dtype type, int64_t rows, int64_t cols, int misalign, void **base) {
    size_t rb = tg_row_bytes(type, cols);
    uint8_t *buf = malloc(rb * (size_t)rows + 1);
    assert_non_null(buf);
    *base = buf;
    uint8_t *p = buf + (misalign ? 1 : 0);
    const tg_weight_type *wt = tg_weight_type_of(type);
    float *v = malloc((size_t)cols * sizeof *v);
    assert_non_null(v);
    for (int64_t i = 0; i < rows; i++) {
        uint8_t *row = p + (size_t)i * rb;
        int scale_at[2];
        if (tg_ggml_scale_fields(type, scale_at)) { /* read-only GGUF block types: random codes, random small scales */
            for (size_t k = 0; k < rb; k++) row[k] = (uint8_t)rng_next(r);
            for (size_t b = 0; b < rb / wt->block_bytes; b++)
                for (int f = 0; f < 2 && scale_at[f] >= 0; f++) {
                    uint16_t d = tg_f32_to_f16(rng_unit(r) * (wt->block_elems > 32 ? 0.004f : 0.05f));
                    memcpy(row + b * wt->block_bytes + (size_t)scale_at[f], &d, 2);
                }
        } else if (type != TG_DT_Q8_0 && type != TG_DT_Q4_0) {
            assert_non_null(wt->encode_row); /* a type without an encoder needs its own case here */
            for (int64_t j = 0; j < cols; j++) v[j] = rng_unit(r);
            wt->encode_row(v, row, cols);
        } else {
            size_t bs = type == TG_DT_Q8_0 ? sizeof(tg_block_q8_0) : sizeof(tg_block_q4_0);
            for (size_t b = 0; b < rb / bs; b++) {
                uint8_t *blk = row + b * bs;
                uint16_t d = tg_f32_to_f16(rng_unit(r) * 0.05f);
                memcpy(blk, &d, 2);
                for (size_t k = 2; k < bs; k++) blk[k] = (uint8_t)rng_next(r);
            }
        }
    }
    free(v);
    return p;
}

static float *make_vec(rng_t *r, int64_t n) {
    float *x = malloc((size_t)n * sizeof(float) + 1);
    assert_non_null(x);
    for (int64_t i = 0; i < n; i++) x[i] = rng_unit(r);
    /* a few larger outliers, as real activations have */
    if (n > 4) x[n / 3] *= 8.0f;
    return x;
}

/* E = sum_j |w_j x_j| for row r (exact dequantisation via tg_tensor_get_row). */
static double abs_dot(const tg_tensor *w, int64_t r, const float *x, float *tmp) {
    tg_tensor_get_row(w, r, tmp);
    double e = 0.0;
    for (int64_t j = 0; j < w->cols; j++) e += fabs((double)tmp[j] * x[j]);
    return e;
}

/* Whether the fast kernels of t take quantised activations (the x-quantisation bound applies), and whether t stores
 * blocks (cols a multiple of 32). */
static bool is_quant(tg_dtype t) { return tg_weight_type_of(t)->act != TG_ACT_F32; }
/* A row length for t: `scalar` for the scalar types, `blocked` (a multiple of 32) for the 32-element block types, one
 * to three 256-element super-blocks (chosen by blocked) for the K-quants. */
static int64_t cols_for(tg_dtype t, int64_t blocked, int64_t scalar) {
    const int64_t be = tg_weight_type_of(t)->block_elems;
    return be == 1 ? scalar : be == 32 ? blocked : be * (blocked / 32 % 3 + 1);
}

/* ---- hand-made blocks ------------------------------------------------------------------------------------------ */

/* v rounded to fp16 and back */
static float f16r(float v) { return tg_f16_to_f32(tg_f32_to_f16(v)); }

/* What a unit activation becomes for weights of `type` on the table in use: 127 * fp16(1/127) where its kernels
 * quantise activations, 1 where the type takes the exact generic path (the scalar table). */
static float act_scale(tg_dtype type) {
    const tg_cpu_kernels *k = tg_kernels();
    return k->quant_acts && k->type[type].gemv ? 127.0f * f16r(1.0f / 127.0f) : 1.0f;
}

static void test_q8_0_dequant_exact(void **state) {
    (void)state;
    /* two blocks: d = 0.5 (fp16 0x3800) with q = -128..-97 then d = -0.25 (0xb400) with q = 0, 1, -1, 2, -2, ... */
    uint8_t buf[2 * 34 + 1];
    uint8_t *p = buf + 1; /* odd address */
    uint16_t d0 = 0x3800, d1 = 0xb400;
    memcpy(p, &d0, 2);
    for (int j = 0; j < 32; j++) p[2 + j] = (uint8_t)(int8_t)(-128 + j);
    memcpy(p + 34, &d1, 2);
    for (int j = 0; j < 32; j++) p[36 + j] = (uint8_t)(int8_t)(j % 2 ? (j + 1) / 2 : -(j / 2));
    float out[64];
    tg_dequantize_row(TG_DT_Q8_0, p, out, 64);
    for (int j = 0; j < 32; j++) assert_true(out[j] == 0.5f * (float)(-128 + j));
    for (int j = 0; j < 32; j++) assert_true(out[32 + j] == -0.25f * (float)(j % 2 ? (j + 1) / 2 : -(j / 2)));
    /* the same values through the tensor view and through the reference matvec with unit vectors */
    tg_tensor t = {TG_DT_Q8_0, 1, 64, p, 0};
    float row[64];
    tg_tensor_get_row(&t, 0, row);
    assert_memory_equal(row, out, sizeof out);
    float e[64] = {0}, y;
    for (int j = 0; j < 64; j += 7) {
        e[j] = 1.0f;
        tg_matvec_ref(&t, e, &y);
        assert_true(y == out[j]);
        /* the integer path scales by d_w * fp16(1/127) * 127 (the activation's scale in fp16, as llama.cpp's); the
         * scalar table's generic path is the exact reference */
        tg_matvec(&t, e, &y, NULL);
        assert_true(fabsf(y - out[j] * act_scale(t.type)) <= 1e-6f * fabsf(out[j]));
        e[j] = 0.0f;
    }
}

static void test_q4_0_dequant_exact(void **state) {
    (void)state;
    /* byte j holds low nibble j (element j) and high nibble 15 - j (element j + 16): value = d * (nibble - 8) */
    uint8_t buf[2 * 18];
    uint16_t d0 = 0x3400, d1 = 0xc000; /* 0.25, -2.0 */
    memcpy(buf, &d0, 2);
    memcpy(buf + 18, &d1, 2);
    for (int j = 0; j < 16; j++) {
        buf[2 + j] = (uint8_t)(j | ((15 - j) << 4));
        buf[20 + j] = (uint8_t)(((j * 5) & 15) | (((j * 3 + 1) & 15) << 4));
    }
    float out[64];
    tg_dequantize_row(TG_DT_Q4_0, buf, out, 64);
    for (int j = 0; j < 16; j++) {
        assert_true(out[j] == 0.25f * (float)(j - 8));
        assert_true(out[j + 16] == 0.25f * (float)(7 - j));
        assert_true(out[32 + j] == -2.0f * (float)(((j * 5) & 15) - 8));
        assert_true(out[48 + j] == -2.0f * (float)(((j * 3 + 1) & 15) - 8));
    }
    assert_true(out[0] == -2.0f && out[15] == 1.75f && out[16] == 1.75f && out[31] == -2.0f);
    tg_tensor t = {TG_DT_Q4_0, 1, 64, buf, 0};
    float e[64] = {0}, y;
    for (int j = 0; j < 64; j += 5) {
        e[j] = 1.0f;
        tg_matvec_ref(&t, e, &y);
        assert_true(y == out[j]);
        tg_matvec(&t, e, &y, teams[2]); /* d_w * fp16(1/127) * 127, as for Q8_0 */
        assert_true(fabsf(y - out[j] * act_scale(t.type)) <= 1e-6f * fabsf(out[j]));
        e[j] = 0.0f;
    }
}

static void test_float_types_get_row(void **state) {
    (void)state;
    uint8_t buf[3 * 4 + 1];
    uint16_t h[3] = {0x3c00, 0xc000, 0x0001}; /* 1, -2, smallest subnormal */
    memcpy(buf + 1, h, 6);
    tg_tensor t = {TG_DT_F16, 1, 3, buf + 1, 0};
    float out[3];
    tg_tensor_get_row(&t, 0, out);
    assert_true(out[0] == 1.0f && out[1] == -2.0f && out[2] == 0x1.0p-24f);
    uint16_t b[3] = {0x3f80, 0xc040, 0x7f80}; /* 1, -3, +inf */
    memcpy(buf + 1, b, 6);
    t.type = TG_DT_BF16;
    tg_tensor_get_row(&t, 0, out);
    assert_true(out[0] == 1.0f && out[1] == -3.0f && isinf(out[2]) && out[2] > 0);
}

/* ---- quantisers -------------------------------------------------------------------------------------------------- */

static void test_quantize_rows_roundtrip(void **state) {
    (void)state;
    rng_t r = {1};
    enum { N = 32 * 9 };
    float x[N], y[N];
    for (int i = 0; i < N; i++) x[i] = rng_unit(&r) * (1.0f + (float)(i / 32));
    for (int i = 64; i < 96; i++) x[i] = 0.0f;  /* an all-zero block */
    for (int i = 96; i < 128; i++) x[i] = 0.3f; /* an all-equal block */
    uint8_t q8[N / 32 * 34], q4[N / 32 * 18];
    tg_quantize_row_q8_0(x, q8, N);
    tg_dequantize_row(TG_DT_Q8_0, q8, y, N);
    for (int b = 0; b < N / 32; b++) {
        uint16_t dh;
        memcpy(&dh, q8 + 34 * b, 2);
        float d = tg_f16_to_f32(dh);
        for (int j = 0; j < 32; j++) {
            float err = fabsf(x[32 * b + j] - y[32 * b + j]);
            assert_true(isfinite(y[32 * b + j]));
            /* round to nearest: d/2, plus clamping at 127 when fp16 rounding made d slightly small */
            assert_true(err <= 0.5f * d * 1.01f + 1e-7f);
        }
    }
    for (int j = 64; j < 96; j++) assert_true(y[j] == 0.0f);
    tg_quantize_row_q4_0(x, q4, N);
    tg_dequantize_row(TG_DT_Q4_0, q4, y, N);
    for (int b = 0; b < N / 32; b++) {
        uint16_t dh;
        memcpy(&dh, q4 + 18 * b, 2);
        float d = fabsf(tg_f16_to_f32(dh));
        for (int j = 0; j < 32; j++) {
            /* the 16 levels are -8d..7d: values on the side opposite the largest one may clip by up to d */
            assert_true(fabsf(x[32 * b + j] - y[32 * b + j]) <= d * 1.01f + 1e-7f);
        }
    }
    for (int j = 64; j < 96; j++) assert_true(y[j] == 0.0f);
    for (int j = 96; j < 128; j++) assert_true(fabsf(y[j] - 0.3f) < 1e-3f); /* m = 0.3 maps to -8 * d exactly */
}

/* max|x| / 127 over the 32 elements at xb: the fp32 scale the Q8_0 activation form rounds to fp16. */
static float q8x_d32(const float *xb) {
    float amax = 0.0f;
    for (int j = 0; j < TG_QK; j++) amax = fmaxf(amax, fabsf(xb[j]));
    return amax / 127.0f;
}

static void test_quantize_q8x_simd_matches_ref(void **state) {
    (void)state;
    rng_t r = {2};
    enum { N = 32 * 34 };
    float *x = make_vec(&r, N);
    for (int i = 0; i < 32; i++) x[i] = 0.0f;
    for (int i = 32; i < 64; i++) x[i] = (i % 2 ? 1.0f : -1.0f) * 1e-30f;
    x[70] = -1e30f;                                                  /* fp16 overflows: the fp32 d is kept */
    for (int i = 96; i < 128; i++) x[i] = (float)(i - 100) * 1.3e-5f; /* d an fp16 subnormal */
    tg_q8x_block a[N / 32], b[N / 32];
    tg_quantize_q8x_ref(x, a, N);
    tg_quantize_q8x(x, b, N);
    for (int i = 0; i < N / 32; i++) {
        assert_true(a[i].d == b[i].d);
        assert_true(a[i].s == b[i].s);
        assert_memory_equal(a[i].q, b[i].q, 32);
        int32_t sum = 0;
        for (int j = 0; j < 32; j++) sum += a[i].q[j];
        assert_int_equal(a[i].sum, sum);
        assert_int_equal(b[i].sum, sum);
        const float d32 = q8x_d32(x + 32 * i);
        for (int j = 0; j < 32; j++) {
            float xe = x[32 * i + j], xq = a[i].d * (float)a[i].q[j];
            assert_true(fabsf(xe - xq) <= (0.5f * d32 + 127.0f * fabsf(a[i].d - d32)) * 1.0001f);
        }
    }
    assert_true(a[0].d == 0.0f);
    assert_true(a[1].d == 0.0f && a[1].q[0] != 0); /* 1e-30 / 127 rounds to fp16 zero, as in llama.cpp */
    assert_true(a[2].d == q8x_d32(x + 64));          /* Inf in fp16: fp32 kept */
    assert_true(a[3].d > 0.0f && a[3].d < 0x1p-14f && a[3].d != q8x_d32(x + 96));
    free(x);
}

/* llama.cpp's quantize_row_q8_1 (the AVX2 path, which its Q8_0 quantiser shares but for s), restated: the largest
 * magnitude m, d = m / 127, id = 127 / m, q = round-half-even(x * id), the block's d = fp16(d) and s = fp16(d * sum q).
 * tinygpt's blocks must hold exactly those codes and values, so that the Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL
 * dot products' integer sums and scale products are llama.cpp's. */
static void test_quantize_q8x_is_llamacpps(void **state) {
    (void)state;
    rng_t r = {12};
    enum { N = 32 * 64 };
    float *x = make_vec(&r, N);
    for (int i = 0; i < N; i++) x[i] *= (float)(1 + i / 32) * 0.21f + (i / 32 == 5 ? -0.2f : 0.0f);
    tg_q8x_block *a = malloc(N / 32 * sizeof *a);
    assert_non_null(a);
    tg_quantize_q8x(x, a, N);
    int d_rounded = 0;
    for (int b = 0; b < N / 32; b++) {
        const float *xb = x + 32 * b;
        float m = 0.0f;
        for (int j = 0; j < 32; j++) m = fmaxf(m, fabsf(xb[j]));
        const float d = m / 127.0f, id = m != 0.0f ? 127.0f / m : 0.0f;
        int sum = 0;
        for (int j = 0; j < 32; j++) {
            const int q = (int)nearbyintf(xb[j] * id);
            assert_int_equal(a[b].q[j], q);
            sum += q;
        }
        assert_true(a[b].d == f16r(d));
        assert_true(a[b].s == f16r(d * (float)sum));
        d_rounded += a[b].d != d;
    }
    assert_true(d_rounded > 0); /* the former fp32 d would fail above: the test sees the difference */
    free(a);
    free(x);
}

/* The K-quants' activation form: the vectorised quantiser equals the reference bit for bit (zero, tiny and huge
 * blocks included), the 16-code sums are the sums of the codes, and every element is within d / 2. */
static void test_quantize_q8k_simd_matches_ref(void **state) {
    (void)state;
    rng_t r = {9};
    enum { N = 256 * 5 };
    float *x = make_vec(&r, N);
    for (int i = 0; i < 256; i++) x[i] = 0.0f;
    for (int i = 256; i < 512; i++) x[i] = (i % 2 ? 1.0f : -1.0f) * 1e-30f;
    x[700] = -1e30f;
    tg_q8k_block *a = malloc(N / 256 * sizeof *a), *b = malloc(N / 256 * sizeof *b);
    assert_true(a && b);
    tg_quantize_q8k_ref(x, a, N);
    tg_quantize_q8k(x, b, N);
    for (int i = 0; i < N / 256; i++) {
        assert_true(a[i].d == b[i].d);
        assert_memory_equal(a[i].q, b[i].q, 256);
        assert_memory_equal(a[i].bsums, b[i].bsums, sizeof a[i].bsums);
        for (int g = 0; g < 16; g++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) sum += a[i].q[16 * g + j];
            assert_int_equal(a[i].bsums[g], sum);
        }
        for (int j = 0; j < 256; j++) {
            float xe = x[256 * i + j], xq = a[i].d * (float)a[i].q[j];
            assert_true(fabsf(xe - xq) <= 0.5f * a[i].d * 1.0001f);
        }
    }
    assert_true(a[0].d == 0.0f);
    free(a);
    free(b);
    free(x);
}

/* llama.cpp's quantize_row_q8_K_ref, restated: the signed element of largest magnitude m, iscale = -127 / m,
 * q = nearest_int(iscale * x) (round half to even through the 1.5 * 2^23 trick), d = 1 / iscale. tinygpt's blocks
 * must give the same codes up to one sign per block and exactly the same products d * q, so that the K-quant dot
 * products' integer sums and per-block scales are llama.cpp's. */
static void test_quantize_q8k_is_llamacpps(void **state) {
    (void)state;
    rng_t r = {11};
    enum { N = 256 * 32 };
    float *x = make_vec(&r, N);
    for (int i = 0; i < N; i++) x[i] *= (float)(1 + i / 256) * 0.37f; /* a different scale per block */
    x[300] = -5.0f;                                                      /* a negative extreme */
    tg_q8k_block *a = malloc(N / 256 * sizeof *a);
    assert_non_null(a);
    tg_quantize_q8k(x, a, N);
    int rescaled = 0;
    for (int b = 0; b < N / 256; b++) {
        const float *xb = x + 256 * b;
        float amax = 0.0f, mx = 0.0f;
        for (int j = 0; j < 256; j++)
            if (fabsf(xb[j]) > amax) amax = fabsf(xb[j]), mx = xb[j];
        const float iscale = -127.0f / mx, d = 1 / iscale;
        const float sign = mx > 0 ? -1.0f : 1.0f;
        rescaled += d * sign != amax / 127.0f; /* where 1 / (127 / amax) is not amax / 127 */
        assert_true(a[b].d == sign * d);
        for (int j = 0; j < 256; j++) {
            float v = iscale * xb[j] + 12582912.0f;
            int32_t bits;
            memcpy(&bits, &v, 4);
            const int q = (bits & 0x007fffff) - 0x00400000;
            assert_int_equal(a[b].q[j], (int)sign * (q < 127 ? q : 127));
            assert_true(a[b].d * (float)a[b].q[j] == d * (float)(q < 127 ? q : 127));
        }
    }
    assert_true(rescaled > 0); /* the old d = amax / 127 would fail above: the test sees the difference */
    free(a);
    free(x);
}

/* ---- matvec / matmul ------------------------------------------------------------------------------------------ */

static int q32_m_at(tg_dtype t) { return t == TG_DT_Q4_1 || t == TG_DT_Q5_1 ? 2 : -1; }
/* x as the integer path of w's type sees it: each element's dequantised activation code and its error bound (the
 * reference quantisers of the activation form: tg_q8x_block or, for the K-quants, tg_q8k_block): |x - xd| <= err. */
static void quantised_x(const tg_tensor *w, const float *x, double *xd, double *err) {
    if (tg_weight_type_of(w->type)->act == TG_ACT_Q8K) {
        const int64_t nb = w->cols / TG_Q8K_ELEMS;
        tg_q8k_block *xk = malloc((size_t)nb * sizeof *xk);
        assert_non_null(xk);
        tg_quantize_q8k_ref(x, xk, w->cols);
        for (int64_t j = 0; j < w->cols; j++) {
            const tg_q8k_block *b = &xk[j / TG_Q8K_ELEMS];
            err[j] = 0.5 * b->d;
            xd[j] = (double)b->d * b->q[j % TG_Q8K_ELEMS];
        }
        free(xk);
        return;
    }
    const int64_t nb = w->cols / TG_QK;
    tg_q8x_block *xq = malloc((size_t)nb * sizeof *xq);
    assert_non_null(xq);
    tg_quantize_q8x_ref(x, xq, w->cols);
    for (int64_t j = 0; j < w->cols; j++) {
        const tg_q8x_block *b = &xq[j / TG_QK];
        const double d32 = q8x_d32(x + j / TG_QK * TG_QK);
        err[j] = 0.5 * d32 + 127.0 * fabs((double)b->d - d32);
        xd[j] = (double)b->d * b->q[j % TG_QK];
    }
    free(xq);
}

/* The x-quantisation error bound for row r: sum_j |w_j| * err_j (*bound), and the exact product of row r with
 * the quantised x, what the integer path computes up to fp32 rounding (returned). For Q4_1 / Q5_1 the offset m of
 * each block multiplies s = fp16(d * sum) rather than the sum of the elements' fp16(d) q. */
static double dot_with_qx(const tg_tensor *w, int64_t r, const float *x, float *tmp, double *bound) {
    double *xd = malloc((size_t)w->cols * sizeof *xd), *err = malloc((size_t)w->cols * sizeof *err);
    assert_true(xd && err);
    quantised_x(w, x, xd, err);
    tg_tensor_get_row(w, r, tmp);
    double s = 0.0, bnd = 0.0;
    for (int64_t j = 0; j < w->cols; j++) {
        s += (double)tmp[j] * xd[j];
        bnd += fabs((double)tmp[j]) * err[j];
    }
    if (q32_m_at(w->type) >= 0) {
        const tg_weight_type *wt = tg_weight_type_of(w->type);
        const uint8_t *row = (const uint8_t *)w->data + (size_t)r * tg_row_bytes(w->type, w->cols);
        tg_q8x_block *xq = malloc((size_t)(w->cols / TG_QK) * sizeof *xq);
        assert_non_null(xq);
        tg_quantize_q8x_ref(x, xq, w->cols);
        for (int64_t b = 0; b < w->cols / TG_QK; b++) {
            uint16_t mh;
            memcpy(&mh, row + (size_t)b * wt->block_bytes + (size_t)q32_m_at(w->type), 2);
            const double m = tg_f16_to_f32(mh), ds = xq[b].s, d32 = q8x_d32(x + b * TG_QK);
            const double corr = m * (ds - (double)xq[b].d * xq[b].sum);
            s += corr;
            bnd += fabs(corr) + fabs(m) * fabs(ds - d32 * xq[b].sum);
        }
        free(xq);
    }
    free(xd);
    free(err);
    *bound = bnd;
    return s;
}

static void check_matvec(rng_t *r, tg_dtype type, int64_t rows, int64_t cols) {
    void *base;
    tg_tensor w = {type, rows, cols, make_matrix(r, type, rows, cols, (int)(rows & 1), &base), 0};
    float *x = make_vec(r, cols);
    float *ref = malloc((size_t)rows * sizeof(float));
    float *y1 = malloc((size_t)rows * sizeof(float));
    float *y2 = malloc((size_t)rows * sizeof(float));
    float *tmp = malloc((size_t)cols * sizeof(float));
    assert_true(ref && y1 && y2 && tmp);
    tg_matvec_ref(&w, x, ref);
    tg_matvec(&w, x, y1, NULL);
    tg_matvec(&w, x, y2, teams[2]);
    /* rows are never split between threads, so the thread count cannot change a result */
    assert_memory_equal(y1, y2, (size_t)rows * sizeof(float));
    tg_matvec(&w, x, y2, teams[3]);
    assert_memory_equal(y1, y2, (size_t)rows * sizeof(float));
    for (int64_t i = 0; i < rows; i++) {
        double e = abs_dot(&w, i, x, tmp);
        double tol = 1e-5 * e;
        if (is_quant(type) && tg_kernels()->quant_acts && tg_kernels()->type[type].gemv) {
            double bound;
            double exact_q = dot_with_qx(&w, i, x, tmp, &bound);
            tol += bound * 1.001;
            if (fabs(y1[i] - exact_q) > 1e-5 * e)
                fail_msg("%s %lldx%lld row %lld: fast %.9g vs exact-with-quantised-x %.9g", tg_dtype_name(type),
                         (long long)rows, (long long)cols, (long long)i, (double)y1[i], exact_q);
        }
        if (fabs((double)y1[i] - (double)ref[i]) > tol)
            fail_msg("%s %lldx%lld row %lld: fast %.9g vs ref %.9g (tol %.3g)", tg_dtype_name(type), (long long)rows,
                     (long long)cols, (long long)i, (double)y1[i], (double)ref[i], tol);
    }
    free(base);
    free(x);
    free(ref);
    free(y1);
    free(y2);
    free(tmp);
}

static void test_matvec_float_types(void **state) {
    (void)state;
    rng_t r = {3};
    const int64_t rows[] = {1, 2, 3, 5, 7, 17, 33};
    const int64_t cols[] = {1, 3, 7, 8, 9, 31, 67, 259};
    const tg_dtype types[] = {TG_DT_F32, TG_DT_F16, TG_DT_BF16};
    for (size_t t = 0; t < 3; t++)
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
            for (size_t j = 0; j < sizeof cols / sizeof cols[0]; j++) check_matvec(&r, types[t], rows[i], cols[j]);
}

static void test_matvec_quant_types(void **state) {
    (void)state;
    rng_t r = {4};
    const int64_t rows[] = {1, 2, 3, 5, 7, 17, 33};
    const int64_t cols[] = {32, 64, 96, 288};
    const tg_dtype types[] = {TG_DT_Q8_0, TG_DT_Q4_0};
    for (size_t t = 0; t < 2; t++)
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
            for (size_t j = 0; j < sizeof cols / sizeof cols[0]; j++) check_matvec(&r, types[t], rows[i], cols[j]);
}

/* The GGUF block types (float activations): fast vs reference within 1e-5 * E, one to three blocks per row. */
static void test_matvec_ggml_types(void **state) {
    (void)state;
    rng_t r = {8};
    const int64_t rows[] = {1, 2, 3, 5, 8, 17, 33};
    const tg_dtype types[] = {TG_DT_Q4_1, TG_DT_Q5_0, TG_DT_Q5_1, TG_DT_Q2_K,  TG_DT_Q3_K,
                              TG_DT_Q4_K, TG_DT_Q5_K, TG_DT_Q6_K, TG_DT_IQ4_NL};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
            for (int64_t k = 1; k <= 3; k++)
                check_matvec(&r, types[t], rows[i], k * tg_weight_type_of(types[t])->block_elems);
}

/* Large enough to cross the threading threshold (rows * cols >= 2^17) with a ragged last row block. */
static void test_matvec_threaded_sizes(void **state) {
    (void)state;
    rng_t r = {5};
    for (int t = 0; t < TG_DT_COUNT; t++) check_matvec(&r, (tg_dtype)t, 1031, cols_for((tg_dtype)t, 160, 160));
}

static void check_matmul(rng_t *r, tg_dtype type, int64_t rows, int64_t cols, int64_t n, int threads) {
    void *base;
    tg_tensor w = {type, rows, cols, make_matrix(r, type, rows, cols, 0, &base), 0};
    float *x = make_vec(r, n * cols);
    float *y = malloc((size_t)(n * rows) * sizeof(float));
    float *yv = malloc((size_t)rows * sizeof(float));
    float *tmp = malloc((size_t)cols * sizeof(float));
    assert_true(y && yv && tmp);
    tg_matmul(&w, x, n, y, teams[threads]);
    for (int64_t t = 0; t < n; t++) {
        tg_matvec(&w, x + t * cols, yv, NULL);
        for (int64_t i = 0; i < rows; i++) {
            /* one arithmetic order per (row, activation) in every kernel: the bits agree */
            if (memcmp(&y[t * rows + i], &yv[i], sizeof(float)) != 0)
                fail_msg("%s matmul n=%lld token %lld row %lld: %.9g vs matvec %.9g", tg_dtype_name(type),
                         (long long)n, (long long)t, (long long)i, (double)y[t * rows + i], (double)yv[i]);
        }
    }
    (void)tmp;
    free(base);
    free(x);
    free(y);
    free(yv);
    free(tmp);
}

static void test_matmul_equals_matvecs(void **state) {
    (void)state;
    rng_t r = {6};
    /* up to 9: one packed group of eight and a ragged one; 17, 33, 40: the AVX-512 kernels' registers of sixteen
     * tokens, two per pass, a last register with only its lower group */
    const int64_t ns[] = {1, 2, 3, 4, 5, 9, 17, 33, 40};
    for (int t = 0; t < TG_DT_COUNT; t++) {
        int64_t cols = cols_for((tg_dtype)t, 96, 45);
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
            check_matmul(&r, (tg_dtype)t, 7, cols, ns[k], 1);
            check_matmul(&r, (tg_dtype)t, 13, cols, ns[k], 2);
        }
        check_matmul(&r, (tg_dtype)t, 517, cols_for((tg_dtype)t, 128, 131), 7, 2); /* threaded, ragged */
        check_matmul(&r, (tg_dtype)t, 517, cols_for((tg_dtype)t, 128, 131), 9, 3);
    }
}

/* tg_matmul_rows over any split of the rows, for one activation (decode kernels) and for chunks of 2..19 (prefill
 * tiles, packed groups of 8, two at a time, with a ragged last group), equals tg_matmul bit for bit; the preparation never needs
 * more scratch than tg_act_scratch_bytes says. */
static void test_matmul_rows_splits(void **state) {
    (void)state;
    rng_t r = {7};
    const int64_t rows = 45, ns[] = {1, 2, 7, 8, 9, 16, 19};
    for (int ty = 0; ty < TG_DT_COUNT; ty++) {
        const tg_dtype type = (tg_dtype)ty;
        const int64_t cols = cols_for(type, 160, 77);
        void *base;
        tg_tensor w = {type, rows, cols, make_matrix(&r, type, rows, cols, 1, &base), 0};
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
            const int64_t n = ns[k];
            float *x = make_vec(&r, n * cols);
            float *want = malloc((size_t)(n * rows) * sizeof(float)), *got = malloc((size_t)(n * rows) * sizeof(float));
            const size_t sb = tg_act_scratch_bytes(n, cols);
            uint8_t *scratch = malloc(sb + 1);
            assert_true(want && got && scratch);
            tg_matmul(&w, x, n, want, NULL);
            tg_act a = tg_act_prepare(type, x, n, cols, sb ? scratch : NULL);
            const int64_t cuts[] = {0, 1, 4, 11, 12, 13, 30, 45};
            for (size_t c = 0; c + 1 < sizeof cuts / sizeof cuts[0]; c++)
                tg_matmul_rows(&w, &a, cuts[c], cuts[c + 1], got + cuts[c], (size_t)rows);
            if (memcmp(want, got, (size_t)(n * rows) * sizeof(float)) != 0)
                fail_msg("%s n=%lld: rows computed in pieces differ from one call", tg_dtype_name(type), (long long)n);
            free(x);
            free(want);
            free(got);
            free(scratch);
        }
        free(base);
    }
}

/* An activation prepared for another quantised form (tg_act_prepare for one type): a K-quant weight against the Q8_0
 * form, and a Q8_0 weight against the K-quant form, take the exact reference path. */
static void test_matmul_rows_other_form(void **state) {
    (void)state;
    rng_t r = {10};
    const int64_t rows = 9, cols = 512;
    const tg_dtype pairs[][2] = {{TG_DT_Q4_K, TG_DT_Q8_0}, {TG_DT_Q8_0, TG_DT_Q6_K}, {TG_DT_Q4_1, TG_DT_Q5_K}};
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
        void *base;
        tg_tensor w = {pairs[k][0], rows, cols, make_matrix(&r, pairs[k][0], rows, cols, 0, &base), 0};
        float *x = make_vec(&r, cols), want[9], got[9];
        const size_t sb = tg_act_scratch_bytes(1, cols);
        uint8_t *scratch = malloc(sb + 1);
        assert_non_null(scratch);
        tg_act a = tg_act_prepare(pairs[k][1], x, 1, cols, sb ? scratch : NULL);
        tg_matmul_rows(&w, &a, 0, rows, got, (size_t)rows);
        tg_matvec_ref(&w, x, want);
        assert_memory_equal(want, got, sizeof want);
        free(scratch);
        free(x);
        free(base);
    }
}

/* One input prepared for the weights of several types (tg_act_prepare_types: a layer's Q / K / V or gate / up whose
 * types take different activation forms, as llama-quantize's IQ4_NL preset writes attn_v in Q5_K): each weight gets
 * the bits it gets from an input prepared for its own type alone (tg_matmul), for one token and for a chunk — none
 * falls back to the exact float path (which is not what llama.cpp computes). */
static void test_matmul_rows_mixed_forms(void **state) {
    (void)state;
    rng_t r = {11};
    const int64_t rows = 13, cols = 512, ns[] = {1, 9};
    const tg_dtype sets[][3] = {{TG_DT_IQ4_NL, TG_DT_IQ4_NL, TG_DT_Q5_K},
                                {TG_DT_Q6_K, TG_DT_Q4_1, TG_DT_F16},
                                {TG_DT_Q8_0, TG_DT_Q4_K, TG_DT_Q5_0}};
    for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++)
        for (size_t in = 0; in < sizeof ns / sizeof ns[0]; in++) {
            const int64_t n = ns[in];
            float *x = make_vec(&r, n * cols);
            const size_t sb = tg_act_scratch_bytes(n, cols);
            uint8_t *scratch = malloc(sb + 1);
            assert_true(x && scratch);
            tg_act a = tg_act_prepare_types(sets[k], 3, x, n, cols, sb ? scratch : NULL);
            for (int i = 0; i < 3; i++) {
                void *base;
                tg_tensor w = {sets[k][i], rows, cols, make_matrix(&r, sets[k][i], rows, cols, 0, &base), 0};
                float want[9 * 13], got[9 * 13];
                tg_matmul(&w, x, n, want, NULL);
                tg_matmul_rows(&w, &a, 0, rows, got, (size_t)rows);
                if (memcmp(want, got, (size_t)(n * rows) * sizeof(float)) != 0)
                    fail_msg("%s among %s/%s/%s, n=%lld: not the bits of its own preparation",
                             tg_dtype_name(sets[k][i]), tg_dtype_name(sets[k][0]), tg_dtype_name(sets[k][1]),
                             tg_dtype_name(sets[k][2]), (long long)n);
                free(base);
            }
            free(scratch);
            free(x);
        }
}

/* tg_matmul_rows with room for widened float rows (tg_act.wide, the forward pass's per-thread scratch) gives the bits
 * of the tiles that widen as they go, for every row split (odd counts: a row paired with itself) and token count;
 * too little room, or columns not a multiple of 8, take the plain tiles. */
static void test_matmul_rows_wide(void **state) {
    (void)state;
    rng_t r = {12};
    const tg_dtype types[] = {TG_DT_F32, TG_DT_F16, TG_DT_BF16};
    const int64_t rows = 29, ns[] = {1, 7, 8, 9, 17, 40};
    const int64_t colss[] = {96, 77};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
        for (size_t ci = 0; ci < 2; ci++) {
            const tg_dtype type = types[ti];
            const int64_t cols = colss[ci];
            void *base;
            tg_tensor w = {type, rows, cols, make_matrix(&r, type, rows, cols, 0, &base), 0};
            const size_t wb = tg_wide_bytes(rows, cols);
            assert_true(ci == 0 ? wb >= (size_t)(rows * cols) * sizeof(float) || wb == 0 : wb == 0);
            float *wide = wb ? aligned_alloc(64, (wb + 63) / 64 * 64) : NULL;
            for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
                const int64_t n = ns[k];
                float *x = make_vec(&r, n * cols);
                float *want = malloc((size_t)(n * rows) * sizeof(float)), *got = malloc((size_t)(n * rows) * sizeof(float));
                assert_true(want && got && (wide || !wb));
                tg_matmul(&w, x, n, want, NULL);
                tg_act a = tg_act_prepare(type, x, n, cols, NULL);
                a.wide = wide;
                const int64_t cuts[] = {0, 5, 6, 13, 29};
                for (size_t c = 0; c + 1 < sizeof cuts / sizeof cuts[0]; c++) {
                    a.wide_bytes = c == 2 ? tg_wide_bytes(cuts[c + 1] - cuts[c], cols) / 2 : wb; /* once too small */
                    tg_matmul_rows(&w, &a, cuts[c], cuts[c + 1], got + cuts[c], (size_t)rows);
                }
                if (memcmp(want, got, (size_t)(n * rows) * sizeof(float)) != 0)
                    fail_msg("%s cols=%lld n=%lld: widened rows differ", tg_dtype_name(type), (long long)cols,
                             (long long)n);
                free(x);
                free(want);
                free(got);
            }
            free(wide);
            free(base);
        }
}

/* The 512-bit K-quant kernels (two rows per register) give the 256-bit kernels' bits, decode and prefill, for every
 * row parity and token count (gemv_kquant_avx512.c's claim; the other tests see only the kernel the table picks). */
static void test_kquant_512_equals_256(void **state) {
    (void)state;
#if TG_HAVE_KQ512
    typedef void (*gemv_fn)(const uint8_t *, size_t, int64_t, const void *, int64_t, float *);
    typedef void (*gemm_fn)(const uint8_t *, size_t, int64_t, const tg_q8k_block *, int64_t, int64_t, float *, size_t);
    const struct {
        tg_dtype type;
        gemv_fn gemv[2];
        gemm_fn gemm[2];
    } kinds[] = {
        {TG_DT_Q4_K, {tg_avx2_gemv_q4_k, tg_avx512_gemv_q4_k}, {tg_avx2_gemm_q8k_q4_k, tg_avx512_gemm_q8k_q4_k}},
        {TG_DT_Q5_K, {tg_avx2_gemv_q5_k, tg_avx512_gemv_q5_k}, {tg_avx2_gemm_q8k_q5_k, tg_avx512_gemm_q8k_q5_k}},
        {TG_DT_Q6_K, {tg_avx2_gemv_q6_k, tg_avx512_gemv_q6_k}, {tg_avx2_gemm_q8k_q6_k, tg_avx512_gemm_q8k_q6_k}},
    };
    rng_t r = {11};
    const int64_t rows = 13, cols = 3 * TG_QK_K, nmax = 9;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        void *base;
        const uint8_t *w = make_matrix(&r, kinds[k].type, rows, cols, 1, &base);
        const size_t ws = tg_row_bytes(kinds[k].type, cols);
        float *x = make_vec(&r, nmax * cols);
        tg_q8k_block *xk = malloc(tg_act_scratch_bytes(nmax, cols));
        float y[2][9 * 13];
        assert_non_null(xk);
        tg_act a = tg_act_prepare(kinds[k].type, x, nmax, cols, xk);
        for (int64_t nr = 1; nr <= rows; nr++) { /* decode: groups of 4 / 8 rows, a pair, an odd row */
            for (int v = 0; v < 2; v++) kinds[k].gemv[v](w, ws, nr, a.xk, cols, y[v]);
            if (memcmp(y[0], y[1], (size_t)nr * sizeof(float)) != 0)
                fail_msg("%s gemv rows=%lld: 512-bit != 256-bit", tg_dtype_name(kinds[k].type), (long long)nr);
            for (int64_t n = 1; n <= nmax; n++) {
                for (int v = 0; v < 2; v++) kinds[k].gemm[v](w, ws, nr, a.xk, cols / TG_QK_K, n, y[v], (size_t)nr);
                if (memcmp(y[0], y[1], (size_t)(n * nr) * sizeof(float)) != 0)
                    fail_msg("%s gemm rows=%lld n=%lld: 512-bit != 256-bit", tg_dtype_name(kinds[k].type),
                             (long long)nr, (long long)n);
            }
        }
        free(base);
        free(x);
        free(xk);
    }
#else
    skip();
#endif
}

static void test_matmul_empty(void **state) {
    (void)state;
    float w[4] = {1, 2, 3, 4}, x[2] = {1, 1}, y[2] = {-7, -7};
    tg_tensor t = {TG_DT_F32, 2, 2, w, 0};
    tg_matmul(&t, x, 0, y, teams[2]);
    assert_true(y[0] == -7.0f && y[1] == -7.0f);
    tg_matvec(&t, x, y, NULL); /* no team: the calling thread */
    assert_true(y[0] == 3.0f && y[1] == 7.0f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q8_0_dequant_exact),
        cmocka_unit_test(test_q4_0_dequant_exact),
        cmocka_unit_test(test_float_types_get_row),
        cmocka_unit_test(test_quantize_rows_roundtrip),
        cmocka_unit_test(test_quantize_q8x_simd_matches_ref),
        cmocka_unit_test(test_quantize_q8x_is_llamacpps),
        cmocka_unit_test(test_quantize_q8k_simd_matches_ref),
        cmocka_unit_test(test_quantize_q8k_is_llamacpps),
        cmocka_unit_test(test_matvec_float_types),
        cmocka_unit_test(test_matvec_quant_types),
        cmocka_unit_test(test_matvec_ggml_types),
        cmocka_unit_test(test_matvec_threaded_sizes),
        cmocka_unit_test(test_matmul_equals_matvecs),
        cmocka_unit_test(test_matmul_rows_splits),
        cmocka_unit_test(test_matmul_rows_other_form),
        cmocka_unit_test(test_matmul_rows_mixed_forms),
        cmocka_unit_test(test_matmul_empty),
        cmocka_unit_test(test_kquant_512_equals_256),
        cmocka_unit_test(test_matmul_rows_wide),
    };
    return cmocka_run_group_tests_name("kernels", tests, make_teams, free_teams);
}
