/* test_stop_text.c — the stop-string filter (src/generate/stop_text.c, inside the library): the text before a stop
 * string is printed and nothing of the stop string, also when it arrives split over many pieces; a tail that could
 * start a stop string is held back until it cannot; several stop strings, the earliest wins. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "generate/stop_text.h"

/* Feeds pieces (NULL-terminated) and returns everything released (flushed at the end unless stopped). */
static char *run(const char *const *stops, size_t n, const char *const *pieces, bool *stopped) {
    tg_stop_text f;
    tg_stop_text_init(&f, stops, n);
    static char all[1024];
    size_t len = 0;
    *stopped = false;
    for (size_t i = 0; pieces[i] && !*stopped; i++) {
        const char *out;
        size_t out_len;
        bool oom;
        *stopped = tg_stop_text_push(&f, pieces[i], strlen(pieces[i]), &out, &out_len, &oom);
        assert_false(oom);
        if (out_len) memcpy(all + len, out, out_len);
        len += out_len;
    }
    if (!*stopped) {
        const char *out;
        size_t out_len;
        tg_stop_text_flush(&f, &out, &out_len);
        if (out_len) memcpy(all + len, out, out_len);
        len += out_len;
    }
    all[len] = '\0';
    tg_stop_text_free(&f);
    return all;
}

static void test_stop_split_over_pieces(void **state) {
    (void)state;
    const char *stops[] = {"altar"};
    bool stopped;
    const char *p1[] = {"upon the a", "l", "ta", "r of the LORD", NULL};
    assert_string_equal(run(stops, 1, p1, &stopped), "upon the ");
    assert_true(stopped);
    const char *p2[] = {"the al", "so good", NULL}; /* "al" held back, then released */
    assert_string_equal(run(stops, 1, p2, &stopped), "the also good");
    assert_false(stopped);
    const char *p3[] = {"ends with alt", NULL}; /* held back, flushed at the end */
    assert_string_equal(run(stops, 1, p3, &stopped), "ends with alt");
    assert_false(stopped);
}

static void test_holds_back_only_possible_starts(void **state) {
    (void)state;
    const char *stops[] = {"\n\n"};
    tg_stop_text f;
    tg_stop_text_init(&f, stops, 1);
    const char *out;
    size_t n;
    bool oom;
    assert_false(tg_stop_text_push(&f, "line\n", 5, &out, &n, &oom));
    assert_int_equal(n, 4); /* the newline could start "\n\n" */
    assert_false(tg_stop_text_push(&f, "next", 4, &out, &n, &oom));
    assert_int_equal(n, 5);
    assert_memory_equal(out, "\nnext", 5);
    assert_true(tg_stop_text_push(&f, "\n\nmore", 6, &out, &n, &oom));
    assert_int_equal(n, 0);
    assert_true(tg_stop_text_push(&f, "after", 5, &out, &n, &oom)); /* stays stopped */
    assert_int_equal(n, 0);
    tg_stop_text_free(&f);
}

static void test_earliest_of_several(void **state) {
    (void)state;
    const char *stops[] = {"World", "lo W", ""};
    bool stopped;
    const char *p[] = {"Hel", "lo World", NULL};
    assert_string_equal(run(stops, 3, p, &stopped), "Hel");
    assert_true(stopped);
    const char *none[] = {"", NULL};
    assert_string_equal(run(stops + 2, 1, none, &stopped), ""); /* an empty stop string never matches */
    assert_false(stopped);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stop_split_over_pieces),
        cmocka_unit_test(test_holds_back_only_possible_starts),
        cmocka_unit_test(test_earliest_of_several),
    };
    return cmocka_run_group_tests_name("stop_text", tests, NULL, NULL);
}
