/* test_types.c — the weight-format table (kernels/types.h): every row is consistent with itself and with the readers'
 * lookups, its non-finite finder agrees with its reference decoder, and in every kernel table this CPU runs
 * (kernels/kernels.h) a type has either no fast kernels or all that its activation form needs. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/quant.h"
#include "kernels/kernels.h"
#include "kernels/types.h"

static void test_rows_consistent(void **state) {
    (void)state;
    for (int t = 0; t < TG_DT_COUNT; t++) {
        const tg_weight_type *wt = tg_weight_type_of((tg_dtype)t);
        assert_non_null(wt);
        assert_non_null(wt->name);
        assert_non_null(wt->decode_row);
        assert_non_null(wt->first_non_finite);
        assert_true(wt->block_elems >= 1 && wt->block_elems <= 256 && 256 % wt->block_elems == 0);
        assert_true(wt->block_bytes >= 1 && wt->align >= 1);
        assert_string_equal(tg_dtype_name((tg_dtype)t), wt->name);
        assert_int_equal(tg_row_bytes((tg_dtype)t, wt->block_elems * 3), 3 * wt->block_bytes);
        if (wt->block_elems > 1) assert_int_equal(tg_row_bytes((tg_dtype)t, wt->block_elems + 1), 0);
        if (wt->act == TG_ACT_Q8X) assert_int_equal(wt->block_elems % TG_QK, 0);
        if (wt->act == TG_ACT_Q8K) assert_int_equal(wt->block_elems % TG_Q8K_ELEMS, 0);
        for (int isa = 0; isa < TG_ISA_COUNT; isa++) {
            const tg_cpu_kernels *k = tg_kernels_for((tg_isa)isa);
            if (!k) continue;
            const tg_type_kernels *kt = &k->type[t];
            /* all fast kernels or none */
            const bool any = kt->gemv || kt->tile || kt->gemm_q8x || kt->gemm_q8x_rows || kt->gemm_q8k;
            if (!any) continue;
            assert_true(kt->gemv_rows == 8 || kt->gemv_rows == 16); /* a decode unit's rows are a multiple of it */
            assert_non_null(kt->gemv);
            const int n_prefill = !!kt->tile + !!kt->gemm_q8x + !!kt->gemm_q8x_rows + !!kt->gemm_q8k;
            assert_int_equal(n_prefill, 1); /* exactly the prefill kernel of its activation form */
            if (wt->act == TG_ACT_F32) assert_non_null(kt->tile);
            else if (wt->act == TG_ACT_Q8X) assert_true(kt->gemm_q8x || kt->gemm_q8x_rows);
            else assert_non_null(kt->gemm_q8k);
        }
        tg_dtype back;
        if (wt->ggml_type >= 0) {
            assert_true(tg_dtype_from_ggml((uint32_t)wt->ggml_type, &back));
            assert_int_equal(back, t);
        }
        if (wt->safetensors_dtype) {
            assert_true(tg_dtype_from_safetensors(wt->safetensors_dtype, &back));
            assert_int_equal(back, t);
        }
    }
    assert_null(tg_weight_type_of(TG_DT_COUNT));
    assert_string_equal(tg_dtype_name(TG_DT_COUNT), "?");
    tg_dtype dt;
    assert_false(tg_dtype_from_ggml(12345, &dt));
    assert_false(tg_dtype_from_safetensors("F8_E4M3", &dt));
}

static void test_known_numbers(void **state) {
    (void)state;
    /* ggml's numbering and block sizes, which files depend on */
    const struct {
        tg_dtype t;
        int ggml;
        int64_t elems;
        size_t bytes;
    } want[] = {{TG_DT_F32, 0, 1, 4}, {TG_DT_F16, 1, 1, 2}, {TG_DT_BF16, 30, 1, 2}, {TG_DT_Q8_0, 8, 32, 34},
                {TG_DT_Q4_0, 2, 32, 18}, {TG_DT_Q4_1, 3, 32, 20}, {TG_DT_Q5_0, 6, 32, 22}, {TG_DT_Q5_1, 7, 32, 24},
                {TG_DT_Q2_K, 10, 256, 84}, {TG_DT_Q3_K, 11, 256, 110}, {TG_DT_Q4_K, 12, 256, 144},
                {TG_DT_Q5_K, 13, 256, 176}, {TG_DT_Q6_K, 14, 256, 210}, {TG_DT_IQ4_NL, 20, 32, 18}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const tg_weight_type *wt = tg_weight_type_of(want[i].t);
        assert_int_equal(wt->ggml_type, want[i].ggml);
        assert_int_equal(wt->block_elems, want[i].elems);
        assert_int_equal(wt->block_bytes, want[i].bytes);
    }
    char buf[128];
    tg_weight_type_names(false, buf, sizeof buf);
    assert_string_equal(buf, "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL");
    tg_weight_type_names(true, buf, sizeof buf);
    assert_string_equal(buf, "F32, F16, BF16");
    tg_weight_type_names(false, buf, 6); /* truncated, terminated */
    assert_int_equal(strlen(buf), 5);
}

/* For every type: random bytes, with some forced to all-ones (NaN/Inf patterns in any float field): the finder's
 * answer is the first element the reference decoder makes non-finite. */
static void test_non_finite_matches_decoder(void **state) {
    (void)state;
    uint64_t s = 7;
    for (int t = 0; t < TG_DT_COUNT; t++) {
        const tg_weight_type *wt = tg_weight_type_of((tg_dtype)t);
        const int64_t n = 8 * wt->block_elems;
        const size_t bytes = (size_t)(n / wt->block_elems) * wt->block_bytes;
        uint8_t *raw = malloc(bytes);
        float *out = malloc((size_t)n * sizeof *out);
        assert_true(raw && out);
        for (int trial = 0; trial < 200; trial++) {
            for (size_t i = 0; i < bytes; i++) {
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                raw[i] = (uint8_t)(s >> 56);
                if (((s >> 20) & 31) == 0) raw[i] = 0xff;
                else if (((s >> 20) & 31) < 20) raw[i] &= 0x3f; /* mostly finite */
            }
            wt->decode_row(raw, out, n);
            int64_t first = -1;
            for (int64_t i = 0; i < n && first < 0; i++)
                if (!isfinite(out[i])) first = i;
            assert_int_equal(wt->first_non_finite(raw, n), first);
        }
        free(raw);
        free(out);
    }
}

/* Every encoder against its decoder: decode(encode(x)) within the format's rounding of x (per block: F32 exact,
 * F16 2^-11 and BF16 2^-8 relative, Q8_0 one step d = amax/127 plus the fp16 rounding of d, Q4_0 one step
 * amax/8 plus the same). */
static void test_encode_decode(void **state) {
    (void)state;
    enum { N = 256 };
    float x[N], y[N];
    uint64_t s = 11;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(s >> 11) * 0x1.0p-53 * 2.0 - 1.0) * (i % 64 == 0 ? 100.0f : 1.0f);
    }
    x[5] = 0.0f;
    for (int t = 0; t < TG_DT_COUNT; t++) {
        const tg_weight_type *wt = tg_weight_type_of((tg_dtype)t);
        if (!wt->encode_row) continue;
        uint8_t row[N * 4];
        assert_true(tg_row_bytes((tg_dtype)t, N) <= sizeof row);
        wt->encode_row(x, row, N);
        wt->decode_row(row, y, N);
        for (int b = 0; b < N / 32; b++) {
            float amax = 0.0f;
            for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[32 * b + j]));
            for (int j = 0; j < 32; j++) {
                const int i = 32 * b + j;
                double tol = t == TG_DT_F32    ? 0.0
                             : t == TG_DT_F16  ? fabs(x[i]) * 0x1.0p-11
                             : t == TG_DT_BF16 ? fabs(x[i]) * 0x1.0p-8
                             : t == TG_DT_Q8_0 ? amax / 127.0 * 1.01
                                               : amax / 8.0 * 1.01;
                if (fabs((double)y[i] - (double)x[i]) > tol)
                    fail_msg("%s element %d: %.9g -> %.9g (tol %.3g)", wt->name, i, (double)x[i], (double)y[i], tol);
            }
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_consistent),
        cmocka_unit_test(test_known_numbers),
        cmocka_unit_test(test_non_finite_matches_decoder),
        cmocka_unit_test(test_encode_decode),
    };
    return cmocka_run_group_tests_name("types", tests, NULL, NULL);
}
