/* test_kv_precision.c — the KV precision traits table (src/kvcache/precision.c): one row per precision in enum
 * order, the public listing (count, names, parse, is_integer) read from it, consistent storage facts (bits, bytes
 * per unit, segment kind, q-range), and the plain rows' converters round-tripping within their precision. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kvcache/attend_kernels.h"
#include "kvcache/precision.h"

static void test_rows_in_enum_order(void **state) {
    (void)state;
    const int n = tg_kv_precision_count();
    assert_true(n >= TG_KV_INT2 + 1);
    for (int i = 0; i < n; i++) {
        const tg_kv_traits *t = tg_kv_traits_of((tg_kv_precision)i);
        assert_non_null(t);
        assert_int_equal(t->id, i);
        tg_kv_precision p = (tg_kv_precision)-1;
        assert_true(tg_kv_precision_parse(t->name, &p)); /* the listing's names parse back */
        assert_int_equal(p, i);
        assert_string_equal(tg_kv_precision_name((tg_kv_precision)i), t->name);
        assert_int_equal(tg_kv_precision_is_integer((tg_kv_precision)i), t->is_integer);
        for (int j = 0; j < i; j++) assert_string_not_equal(tg_kv_traits_of((tg_kv_precision)j)->name, t->name);
    }
    assert_null(tg_kv_traits_of((tg_kv_precision)n));
    assert_null(tg_kv_traits_of((tg_kv_precision)-1));
    assert_false(tg_kv_precision_parse("int9", NULL));
    assert_false(tg_kv_precision_parse(NULL, NULL));
    assert_string_equal(tg_kv_precision_name((tg_kv_precision)n), "unknown");
    assert_false(tg_kv_precision_is_integer((tg_kv_precision)n));
}

static void test_storage_facts(void **state) {
    (void)state;
    for (int i = 0; i < tg_kv_precision_count(); i++) {
        const tg_kv_traits *t = tg_kv_traits_of((tg_kv_precision)i);
        assert_int_equal((size_t)t->bits * (size_t)t->unit_elems, 8 * t->unit_bytes); /* a unit is whole bytes */
        if (t->is_integer) {
            assert_int_equal(t->seg_kind, TG_SEG_CODES);
            assert_null(t->put);
            assert_ptr_equal(tg_kivi_range_of(t->id), &t->range);
            assert_int_equal(t->range.precision, t->id);
            assert_int_equal(t->range.bits, t->bits);
            assert_true(t->range.qmin < 0 && t->range.qmax > 0);                /* never collapsed */
            assert_true(t->range.qmax - t->range.qmin + 1 <= 1 << t->bits);     /* codes fit their bits */
            assert_int_equal(tg_kivi_row_bytes(&t->range, 64), 64 / t->unit_elems * t->unit_bytes);
        } else {
            assert_int_not_equal(t->seg_kind, TG_SEG_CODES);
            assert_null(tg_kivi_range_of(t->id));
            assert_int_equal(t->auto_residual_groups, 0);
            assert_non_null(t->put);
            assert_non_null(t->get);
        }
    }
}

/* A plain row round-trips within its precision's rounding (fp32 exactly, fp16 / bf16 within half an ulp). */
static void test_plain_round_trip(void **state) {
    (void)state;
    float x[64], y[64];
    uint8_t buf[64 * 4];
    for (int k = 0; k < 64; k++) x[k] = sinf((float)k * 0.37f) * (float)(k + 1);
    for (int i = 0; i < tg_kv_precision_count(); i++) {
        const tg_kv_traits *t = tg_kv_traits_of((tg_kv_precision)i);
        if (t->is_integer) continue;
        memset(buf, 0xa5, sizeof buf);
        t->put(x, buf, 64);
        t->get(buf, y, 64);
        const float rel = t->bits == 32 ? 0.0f : t->id == TG_KV_FP16 ? 0x1p-11f : 0x1p-8f;
        for (int k = 0; k < 64; k++) assert_true(fabsf(y[k] - x[k]) <= rel * fabsf(x[k]));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_in_enum_order),
        cmocka_unit_test(test_storage_facts),
        cmocka_unit_test(test_plain_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
