/* test_kivi.c — the KIVI quantiser on its own: the q-range table, fp16 directed rounding, (scale, zero) fitting,
 * round trips for every integer precision (error <= half a step), constant and all-zero slices, scales at the
 * 1e-5 floor, NaN inputs and packing (attention on the codes is test_kvcache.c's). */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kvcache/kivi.h"
#include "kvcache/precision.h"
#include "util/half.h"

static const tg_kv_precision INTS[3] = {TG_KV_INT8, TG_KV_INT4, TG_KV_INT2};

static float frand(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (float)((*s >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

/* The allowed round-trip error for a widened step s at magnitude m: half a step, plus fp32 rounding of the
 * affine arithmetic (a few ulps of the operands). */
static float allowed(float s, float m) { return 0.5f * s * (1.0f + 1e-6f) + 8.0f * FLT_EPSILON * m; }

static void test_range_table(void **state) {
    (void)state;
    const int bits[3] = {8, 4, 2};
    for (int i = 0; i < 3; i++) {
        const tg_kivi_range *r = tg_kivi_range_of(INTS[i]);
        assert_non_null(r);
        assert_int_equal(r->precision, INTS[i]);
        assert_int_equal(r->bits, bits[i]);
        assert_true(r->qmin < 0 && r->qmax > 0);              /* never collapsed (bug class 3) */
        assert_int_equal(r->qmax - r->qmin + 1, 1 << bits[i]); /* uses every code */
        assert_true(tg_kivi_is_quantized(INTS[i]));
    }
    assert_int_equal(tg_kivi_range_of(TG_KV_INT8)->qmin, -128);
    assert_int_equal(tg_kivi_range_of(TG_KV_INT8)->qmax, 127);
    assert_int_equal(tg_kivi_range_of(TG_KV_INT4)->qmin, -8);
    assert_int_equal(tg_kivi_range_of(TG_KV_INT4)->qmax, 7);
    assert_int_equal(tg_kivi_range_of(TG_KV_INT2)->qmin, -2);
    assert_int_equal(tg_kivi_range_of(TG_KV_INT2)->qmax, 1);
    assert_null(tg_kivi_range_of(TG_KV_FP32));
    assert_null(tg_kivi_range_of(TG_KV_FP16));
    assert_null(tg_kivi_range_of(TG_KV_BF16));
    assert_int_equal(tg_kivi_row_bytes(tg_kivi_range_of(TG_KV_INT4), 7), 4);
    assert_int_equal(tg_kivi_row_bytes(tg_kivi_range_of(TG_KV_INT2), 9), 3);
}

/* Directed fp16 rounding: the result is on the right side of x and its neighbour towards x is not. */
static void test_f16_directed_rounding(void **state) {
    (void)state;
    uint64_t seed = 3;
    for (int i = 0; i < 20000; i++) {
        float x = frand(&seed) * powf(2.0f, (float)(i % 40) - 26.0f);
        uint16_t d = tg_kivi_f16_down(x), u = tg_kivi_f16_up(x);
        float fd = tg_f16_to_f32(d), fu = tg_f16_to_f32(u);
        assert_true(fd <= x && fu >= x);
        assert_true(fu - fd <= fabsf(x) * 2e-3f + 6e-8f); /* adjacent (or equal) fp16 values */
    }
    assert_true(tg_f16_to_f32(tg_kivi_f16_down(-1e-9f)) < 0.0f);
    assert_true(tg_f16_to_f32(tg_kivi_f16_up(1e-9f)) > 0.0f);
    assert_float_equal(tg_f16_to_f32(tg_kivi_f16_down(1e9f)), 65504.0f, 0.0f);
    assert_float_equal(tg_f16_to_f32(tg_kivi_f16_up(-1e9f)), -65504.0f, 0.0f);
}

/* The fitted grid spans [lo, hi] for ranges over many magnitudes, and its scale is at least the floor. */
static void test_fit_covers_range(void **state) {
    (void)state;
    uint64_t seed = 11;
    for (int p = 0; p < 3; p++) {
        const tg_kivi_range *r = tg_kivi_range_of(INTS[p]);
        const int L = r->qmax - r->qmin;
        for (int i = 0; i < 5000; i++) {
            float m = powf(10.0f, (float)(i % 11) - 7.0f); /* 1e-7 .. 1e3 */
            float a = m * frand(&seed), b = m * frand(&seed);
            float lo = fminf(a, b), hi = fmaxf(a, b);
            uint16_t sh, zh;
            tg_kivi_fit(r, lo, hi, &sh, &zh);
            float s = tg_f16_to_f32(sh), z = tg_f16_to_f32(zh);
            assert_true(isfinite(s) && isfinite(z));
            assert_true(s >= TG_KIVI_SCALE_FLOOR);
            assert_true(z <= lo);
            assert_true(z + (float)L * s >= hi);
        }
    }
}

/* Round trip of per-token rows and per-channel groups: every element within half a step of its own scale; the
 * codes reach qmax, and qmin whenever fp16 can place the zero within half a step below the minimum (always for data
 * around 0; an offset of 1 with a span of 0.1 at int8 has a step finer than fp16's spacing at 1, and then the grid
 * starts a little lower — still within half a step everywhere). */
static void test_round_trip_every_precision(void **state) {
    (void)state;
    enum { N = 64, G = 32 };
    uint64_t seed = 17;
    float x[G][N], back[N];
    uint8_t rows[G][N], row[N];
    uint16_t sc[N], zr[N];
    for (int p = 0; p < 3; p++) {
        const tg_kivi_range *r = tg_kivi_range_of(INTS[p]);
        const int L = r->qmax - r->qmin;
        for (int trial = 0; trial < 50; trial++) {
            const float mag = trial % 2 ? 3.0f : 0.05f, off = trial % 3 ? 0.0f : 1.0f;
            for (int t = 0; t < G; t++)
                for (int i = 0; i < N; i++) x[t][i] = off + mag * frand(&seed);
            /* per token */
            for (int t = 0; t < G; t++) {
                uint16_t s16, z16;
                tg_kivi_quantize_row(r, x[t], N, row, &s16, &z16);
                const float s = tg_f16_to_f32(s16), z = tg_f16_to_f32(z16);
                tg_kivi_dequantize_row(r, row, N, s, z, back);
                bool lo = false, hi = false;
                float xmin = x[t][0];
                for (int i = 0; i < N; i++) {
                    int u = tg_kivi_get(row, r->bits, i);
                    xmin = fminf(xmin, x[t][i]);
                    lo |= u == 0;
                    hi |= u == L;
                    if (!(fabsf(back[i] - x[t][i]) <= allowed(s, fabsf(x[t][i]) + fabsf(z))))
                        fail_msg("%s row: x %g -> %g, step %g", tg_kv_precision_name(INTS[p]), (double)x[t][i],
                                 (double)back[i], (double)s);
                }
                assert_true(hi); /* q reaches qmax */
                /* and qmin, unless fp16 cannot put the zero within half a step below the minimum */
                if (xmin - z < 0.49f * s || off == 0.0f) assert_true(lo);
            }
            /* per channel over a group */
            tg_kivi_quantize_channels(r, &x[0][0], N, G, N, &rows[0][0], sc, zr);
            for (int i = 0; i < N; i++) {
                const float s = tg_f16_to_f32(sc[i]), z = tg_f16_to_f32(zr[i]);
                bool lo = false, hi = false;
                float xmin = x[0][i];
                for (int t = 0; t < G; t++) {
                    const size_t rb = tg_kivi_row_bytes(r, N);
                    xmin = fminf(xmin, x[t][i]);
                    int u = tg_kivi_get(&rows[0][0] + t * rb, r->bits, i);
                    lo |= u == 0;
                    hi |= u == L;
                    float b = (float)u * s + z;
                    if (!(fabsf(b - x[t][i]) <= allowed(s, fabsf(x[t][i]) + fabsf(z))))
                        fail_msg("%s channel: x %g -> %g, step %g", tg_kv_precision_name(INTS[p]), (double)x[t][i],
                                 (double)b, (double)s);
                }
                assert_true(hi);
                if (xmin - z < 0.49f * s || off == 0.0f) assert_true(lo);
            }
            /* the channel dequantiser agrees with the per-element formula */
            const size_t rb = tg_kivi_row_bytes(r, N);
            tg_kivi_dequantize_row_channels(r, &rows[0][0] + 5 * rb, N, sc, zr, back);
            for (int i = 0; i < N; i++)
                assert_float_equal(back[i],
                                   (float)tg_kivi_get(&rows[0][0] + 5 * rb, r->bits, i) * tg_f16_to_f32(sc[i]) +
                                       tg_f16_to_f32(zr[i]),
                                   0.0f);
        }
    }
}

/* Bug class 1: min == max (all zeros, fp16-representable constants) reproduces the values exactly, never NaN;
 * an arbitrary constant comes back within half a step. Bug class 2: ranges near the 1e-5 floor (fp16 subnormal
 * scales) stay finite and within a step. */
static void test_constant_and_tiny_slices(void **state) {
    (void)state;
    const float exact[] = {0.0f, 1.5f, -3.25f, 1024.0f, -0.0f};
    float x[16], back[16];
    uint8_t row[16];
    for (int p = 0; p < 3; p++) {
        const tg_kivi_range *r = tg_kivi_range_of(INTS[p]);
        for (size_t e = 0; e < sizeof exact / sizeof exact[0]; e++) {
            for (int i = 0; i < 16; i++) x[i] = exact[e];
            uint16_t s, z;
            tg_kivi_quantize_row(r, x, 16, row, &s, &z);
            tg_kivi_dequantize_row(r, row, 16, tg_f16_to_f32(s), tg_f16_to_f32(z), back);
            for (int i = 0; i < 16; i++) assert_float_equal(back[i], exact[e], 0.0f);
            uint16_t sc[16], zr[16];
            tg_kivi_quantize_channels(r, x, 1, 16, 1, row, sc, zr); /* one channel, 16 tokens */
            for (int t = 0; t < 16; t++)
                assert_float_equal((float)tg_kivi_get(row + t * tg_kivi_row_bytes(r, 1), r->bits, 0) *
                                           tg_f16_to_f32(sc[0]) + tg_f16_to_f32(zr[0]),
                                   exact[e], 0.0f);
        }
        /* a constant that fp16 cannot hold */
        for (int i = 0; i < 16; i++) x[i] = 0.1f;
        uint16_t s, z;
        tg_kivi_quantize_row(r, x, 16, row, &s, &z);
        tg_kivi_dequantize_row(r, row, 16, tg_f16_to_f32(s), tg_f16_to_f32(z), back);
        for (int i = 0; i < 16; i++) assert_true(fabsf(back[i] - 0.1f) <= allowed(tg_f16_to_f32(s), 0.2f));
        /* ranges around the scale floor: 1e-5 * levels and below */
        const float spans[] = {1e-7f, 1e-6f, 1e-5f, 3e-5f, 1e-4f};
        uint64_t seed = 23;
        for (size_t k = 0; k < sizeof spans / sizeof spans[0]; k++) {
            for (int i = 0; i < 16; i++) x[i] = 2e-5f + spans[k] * frand(&seed);
            tg_kivi_quantize_row(r, x, 16, row, &s, &z);
            const float sf = tg_f16_to_f32(s), zf = tg_f16_to_f32(z);
            assert_true(sf >= TG_KIVI_SCALE_FLOOR && isfinite(sf) && isfinite(zf));
            tg_kivi_dequantize_row(r, row, 16, sf, zf, back);
            for (int i = 0; i < 16; i++) {
                assert_true(isfinite(back[i]));
                assert_true(fabsf(back[i] - x[i]) <= allowed(sf, 1e-4f));
            }
        }
    }
}

/* NaN and infinite inputs never reach an integer conversion: codes stay in range, scale and zero finite. */
static void test_non_finite_inputs(void **state) {
    (void)state;
    float x[8] = {NAN, 1.0f, -1.0f, INFINITY, -INFINITY, 0.5f, NAN, 0.0f};
    uint8_t row[8];
    for (int p = 0; p < 3; p++) {
        const tg_kivi_range *r = tg_kivi_range_of(INTS[p]);
        uint16_t s, z;
        tg_kivi_quantize_row(r, x, 8, row, &s, &z);
        assert_true(isfinite(tg_f16_to_f32(s)) && isfinite(tg_f16_to_f32(z)));
        for (int i = 0; i < 8; i++) {
            int u = tg_kivi_get(row, r->bits, i);
            assert_true(u >= 0 && u <= r->qmax - r->qmin);
        }
    }
    float nan_row[4] = {NAN, NAN, NAN, NAN};
    uint16_t s, z;
    tg_kivi_quantize_row(tg_kivi_range_of(TG_KV_INT4), nan_row, 4, row, &s, &z);
    assert_true(isfinite(tg_f16_to_f32(s)) && isfinite(tg_f16_to_f32(z)));
}

/* The plain reference of tg_kivi_fit_slice's search: the weighted squared error (in double; each value's times
 * 1 + edge u^2, u its place in [lo, hi] from -1 to 1) of the slice on the grid of the clip (i, j) of [lo, hi], fitted
 * as kivi.c fits it. */
static double clip_error(const tg_kivi_range *r, const float *x, int n, size_t stride, float lo, float hi, int i,
                         int j, double edge) {
    const float span = hi - lo, a = lo + span * ((float)i / TG_KIVI_CLIP_DIV),
                b = hi - span * ((float)j / TG_KIVI_CLIP_DIV);
    uint16_t s16, z16;
    tg_kivi_fit(r, a, b, &s16, &z16);
    const double s = tg_f16_to_f32(s16), z = tg_f16_to_f32(z16), L = r->qmax - r->qmin;
    double e = 0.0;
    for (int t = 0; t < n; t++) {
        const double v = x[(size_t)t * stride], w = 1.0 + edge * pow((v - 0.5 * (lo + hi)) / (0.5 * (hi - lo)), 2);
        const double u = fmin(fmax(round((v - z) / s), 0.0), L);
        e += (u * s + z - v) * (u * s + z - v) * w;
    }
    return e;
}

/* The clipped fit (kivi.h's clip): on bell-shaped slices with outliers, per channel (keys: ends weighted by
 * TG_KIVI_CLIP_KEY_EDGE) and per token (values: plain squared error), its grid is within fp32 rounding of the best
 * of every clip it tries (the plain search above, in double) and never worse than the whole range's; at int2 it
 * lowers the values' summed squared error by at least a fifth on average; its codes stay in range; constant and NaN
 * slices come back as without it; int8 / int4 / int2 all covered. */
static void test_clipped_fit(void **state) {
    (void)state;
    enum { N = 32 };
    uint64_t seed = 99;
    float x[N][N];
    uint8_t rows[N][N];
    uint16_t sc[N], zr[N];
    for (int p = 0; p < 3; p++) {
        const tg_kivi_range *r = &tg_kv_traits_of(INTS[p])->clip_range, *plain = tg_kivi_range_of(INTS[p]);
        assert_true(r->clip && !plain->clip && r->bits == plain->bits && r->qmin == plain->qmin);
        double clipped = 0.0, whole = 0.0;
        for (int trial = 0; trial < 40; trial++) {
            for (int t = 0; t < N; t++)
                for (int c = 0; c < N; c++) { /* a sum of uniforms (bell-shaped), an outlier now and then */
                    const float g = frand(&seed) + frand(&seed) + frand(&seed);
                    x[t][c] = (trial % 3 == 0 ? 0.01f : 1.0f) * (g + ((t * 7 + c) % 29 == 0 ? 4.0f * g : 0.0f));
                }
            tg_kivi_quantize_channels(r, &x[0][0], N, N, N, &rows[0][0], sc, zr);
            for (int c = 0; c < N; c++) { /* channel c: N tokens, stride N */
                float lo = x[0][c], hi = x[0][c];
                for (int t = 1; t < N; t++) lo = fminf(lo, x[t][c]), hi = fmaxf(hi, x[t][c]);
                double best = INFINITY;
                const double edge = TG_KIVI_CLIP_KEY_EDGE;
                for (int i = 0; i <= TG_KIVI_CLIP_STEPS; i++)
                    for (int j = 0; j <= TG_KIVI_CLIP_STEPS; j++)
                        best = fmin(best, clip_error(r, &x[0][c], N, N, lo, hi, i, j, edge));
                const double full = clip_error(r, &x[0][c], N, N, lo, hi, 0, 0, edge);
                const double s = tg_f16_to_f32(sc[c]), z = tg_f16_to_f32(zr[c]), L = r->qmax - r->qmin;
                double got = 0.0;
                for (int t = 0; t < N; t++) {
                    const int u = tg_kivi_get(&rows[0][0] + (size_t)t * tg_kivi_row_bytes(r, N), r->bits, c);
                    assert_true(u >= 0 && u <= (int)L);
                    const double w = 1.0 + edge * pow((x[t][c] - 0.5 * (lo + hi)) / (0.5 * (hi - lo)), 2);
                    got += ((double)u * s + z - x[t][c]) * ((double)u * s + z - x[t][c]) * w;
                }
                if (!(got <= best * (1.0 + 1e-4) + 1e-12 && got <= full * (1.0 + 1e-4) + 1e-12))
                    fail_msg("%s channel %d: error %g, best clip %g, whole range %g", tg_kv_precision_name(INTS[p]),
                             c, got, best, full);
            }
            for (int t = 0; t < N; t++) { /* per token: row t */
                uint16_t s16, z16;
                tg_kivi_quantize_row(r, x[t], N, rows[t], &s16, &z16);
                float lo = x[t][0], hi = x[t][0];
                for (int c = 1; c < N; c++) lo = fminf(lo, x[t][c]), hi = fmaxf(hi, x[t][c]);
                double best = INFINITY;
                for (int i = 0; i <= TG_KIVI_CLIP_STEPS; i++)
                    for (int j = 0; j <= TG_KIVI_CLIP_STEPS; j++)
                        best = fmin(best, clip_error(r, x[t], N, 1, lo, hi, i, j, 0.0));
                const double full = clip_error(r, x[t], N, 1, lo, hi, 0, 0, 0.0);
                const double s = tg_f16_to_f32(s16), z = tg_f16_to_f32(z16);
                double got = 0.0;
                for (int c = 0; c < N; c++) {
                    const int u = tg_kivi_get(rows[t], r->bits, c);
                    got += ((double)u * s + z - x[t][c]) * ((double)u * s + z - x[t][c]);
                }
                if (!(got <= best * (1.0 + 1e-4) + 1e-12))
                    fail_msg("%s row %d: error %g, best clip %g", tg_kv_precision_name(INTS[p]), t, got, best);
                clipped += got / (full + 1e-30);
                whole += 1.0;
            }
        }
        if (INTS[p] == TG_KV_INT2 && !(clipped / whole <= 0.8))
            fail_msg("int2: the clipped rows' squared error is %.3f of the whole range's on average", clipped / whole);
        /* constant slices exact, NaN slices finite, as without the clip */
        float c16[16], back[16];
        uint8_t row[16];
        uint16_t s, z;
        for (int i = 0; i < 16; i++) c16[i] = -3.25f;
        tg_kivi_quantize_row(r, c16, 16, row, &s, &z);
        tg_kivi_dequantize_row(r, row, 16, tg_f16_to_f32(s), tg_f16_to_f32(z), back);
        for (int i = 0; i < 16; i++) assert_float_equal(back[i], -3.25f, 0.0f);
        const float odd[8] = {NAN, 1.0f, -1.0f, INFINITY, -INFINITY, 0.5f, NAN, 0.0f};
        tg_kivi_quantize_row(r, odd, 8, row, &s, &z);
        assert_true(isfinite(tg_f16_to_f32(s)) && isfinite(tg_f16_to_f32(z)));
    }
}

/* Packing: every code of every position survives, neighbours untouched. */
static void test_packing(void **state) {
    (void)state;
    uint8_t row[16];
    for (int p = 0; p < 3; p++) {
        const tg_kivi_range *r = tg_kivi_range_of(INTS[p]);
        const int L = r->qmax - r->qmin, n = 128 / r->bits;
        memset(row, 0, sizeof row);
        for (int i = 0; i < n; i++) tg_kivi_put(row, r->bits, i, (i * 5 + 3) % (L + 1));
        for (int i = 0; i < n; i++) assert_int_equal(tg_kivi_get(row, r->bits, i), (i * 5 + 3) % (L + 1));
        tg_kivi_put(row, r->bits, 3, L);
        tg_kivi_put(row, r->bits, 3, 0);
        for (int i = 0; i < n; i++) assert_int_equal(tg_kivi_get(row, r->bits, i), i == 3 ? 0 : (i * 5 + 3) % (L + 1));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_range_table),
        cmocka_unit_test(test_f16_directed_rounding),
        cmocka_unit_test(test_fit_covers_range),
        cmocka_unit_test(test_round_trip_every_precision),
        cmocka_unit_test(test_constant_and_tiny_slices),
        cmocka_unit_test(test_non_finite_inputs),
        cmocka_unit_test(test_packing),
        cmocka_unit_test(test_clipped_fit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
