/* test_name_map.c — util/name_map.h: names found, absent names not, duplicates reported (kept or replaced), the
 * empty name, a map grown to its capacity, and sizes that overflow refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "util/name_map.h"

static tg_name_ref name_at(const void *entries, size_t i) {
    const char *const *names = entries;
    return (tg_name_ref){names[i], strlen(names[i])};
}

static void test_put_find(void **state) {
    (void)state;
    const char *names[] = {"blk.0.attn_q.weight", "", "token_embd.weight", "blk.0.attn_q.weight", "a", "b"};
    tg_name_map m;
    assert_true(tg_name_map_init(&m, 6));
    assert_int_equal(tg_name_map_put(&m, name_at, names, 0, false), SIZE_MAX);
    assert_int_equal(tg_name_map_put(&m, name_at, names, 1, false), SIZE_MAX);
    assert_int_equal(tg_name_map_put(&m, name_at, names, 2, false), SIZE_MAX);
    assert_int_equal(tg_name_map_put(&m, name_at, names, 3, false), 0); /* duplicate of 0, 0 kept */
    assert_int_equal(tg_name_map_find(&m, name_at, names, "blk.0.attn_q.weight", 19), 0);
    assert_int_equal(tg_name_map_find(&m, name_at, names, "", 0), 1);
    assert_int_equal(tg_name_map_find(&m, name_at, names, "token_embd.weight", 17), 2);
    assert_int_equal(tg_name_map_find(&m, name_at, names, "token_embd.weigh", 16), SIZE_MAX);
    assert_int_equal(tg_name_map_find(&m, name_at, names, "a", 1), SIZE_MAX);
    assert_int_equal(tg_name_map_put(&m, name_at, names, 3, true), 0); /* replaced by 3 */
    assert_int_equal(tg_name_map_find(&m, name_at, names, "blk.0.attn_q.weight", 19), 3);
    tg_name_map_free(&m);
    tg_name_map_free(&m); /* twice: a no-op */
    tg_name_map_free(NULL);
}

static void test_many(void **state) {
    (void)state;
    enum { N = 3000 };
    static char buf[N][16];
    const char *names[N];
    for (int i = 0; i < N; i++) {
        snprintf(buf[i], sizeof buf[i], "t%d", i);
        names[i] = buf[i];
    }
    tg_name_map m;
    assert_true(tg_name_map_init(&m, N));
    for (size_t i = 0; i < N; i++) assert_int_equal(tg_name_map_put(&m, name_at, names, i, false), SIZE_MAX);
    for (size_t i = 0; i < N; i++) assert_int_equal(tg_name_map_find(&m, name_at, names, names[i], strlen(names[i])), i);
    assert_int_equal(tg_name_map_find(&m, name_at, names, "t3000", 5), SIZE_MAX);
    tg_name_map_free(&m);
}

static void test_refused_sizes(void **state) {
    (void)state;
    tg_name_map m;
    assert_false(tg_name_map_init(&m, SIZE_MAX));
    assert_false(tg_name_map_init(&m, SIZE_MAX / 4));
    assert_int_equal(tg_name_map_find(&m, name_at, NULL, "x", 1), SIZE_MAX); /* a failed map finds nothing */
    tg_name_map_free(&m);
    assert_true(tg_name_map_init(&m, 0)); /* an empty map is fine */
    assert_int_equal(tg_name_map_find(&m, name_at, NULL, "x", 1), SIZE_MAX);
    tg_name_map_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_find),
        cmocka_unit_test(test_many),
        cmocka_unit_test(test_refused_sizes),
    };
    return cmocka_run_group_tests_name("name_map", tests, NULL, NULL);
}
