/* test_cli_text.c — unit tests of the CLI's text helpers (src/cli/text.c, linked in: it is the tool's, not the
 * library's): UTF-8 stepping with invalid bytes, table cells (the compare stack overflow: one lead byte followed by
 * hundreds of continuation bytes), Markdown escaping, padding, line splitting and the size limit of text files. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli/text.h"

static void test_char_len(void **state) {
    (void)state;
    assert_int_equal(tg_utf8_char_len("a", 1), 1);
    assert_int_equal(tg_utf8_char_len("\xc3\xa9", 2), 2);
    assert_int_equal(tg_utf8_char_len("\xe2\x82\xac", 3), 3);
    assert_int_equal(tg_utf8_char_len("\xf0\x9f\x98\x80", 4), 4);
    /* a lead byte and many continuation bytes: the character is the first two bytes, never more than 4 */
    assert_int_equal(tg_utf8_char_len("\xc3\x80\x80\x80\x80\x80", 6), 2);
    assert_int_equal(tg_utf8_char_len("\x80\x80", 2), 1);        /* a lone continuation byte */
    assert_int_equal(tg_utf8_char_len("\xe2\x82", 2), 1);        /* cut short */
    assert_int_equal(tg_utf8_char_len("\xc0\xaf", 2), 1);        /* overlong */
    assert_int_equal(tg_utf8_char_len("\xed\xa0\x80", 3), 1);    /* surrogate */
    assert_int_equal(tg_utf8_char_len("\xf4\x90\x80\x80", 4), 1); /* above U+10FFFF */
    assert_int_equal(tg_utf8_char_len("\xff", 1), 1);
    assert_false(tg_utf8_char_valid("\x80", 1));
    assert_true(tg_utf8_char_valid("\xe2\x82\xac", 3));
    assert_int_equal(tg_utf8_count("a\xc3\xa9\x80\xe2\x82\xac", 7), 4);
}

/* A cell into a heap buffer of exactly cap bytes (ASan reports a write past it). */
static size_t cell(const char *p, size_t max_chars, bool md, size_t cap, char *copy, size_t copy_cap) {
    char *buf = malloc(cap);
    assert_non_null(buf);
    size_t used = tg_text_cell(p, max_chars, md, buf, cap);
    assert_true(used < cap);
    assert_int_equal(strlen(buf), used);
    snprintf(copy, copy_cap, "%s", buf);
    free(buf);
    return used;
}

static void test_cell_hostile_line(void **state) {
    (void)state;
    /* finding 2: a lead byte, then 600 continuation bytes, into compare's 256-byte cell */
    char p[700];
    p[0] = 'a';
    p[1] = (char)0xc3;
    memset(p + 2, 0x80, 600);
    p[602] = '\0';
    char out[512];
    size_t used = cell(p, 40, false, 256, out, sizeof out);
    /* 'a', U+00C0 (c3 80), then 38 lone continuation bytes as U+FFFD, then the ellipsis */
    assert_int_equal(used, 1 + 2 + 38 * 3 + 3);
    assert_memory_equal(out, "a\xc3\x80\xef\xbf\xbd", 6);
    assert_memory_equal(out + used - 3, "\xe2\x80\xa6", 3);
    for (size_t cap = 1; cap < 64; cap++) cell(p, 40, cap & 1, cap, out, sizeof out);
}

static void test_cell_cut_and_escape(void **state) {
    (void)state;
    char out[256];
    cell("short", 40, false, 256, out, sizeof out);
    assert_string_equal(out, "short");
    cell("abcdef", 3, false, 256, out, sizeof out);
    assert_string_equal(out, "abc\xe2\x80\xa6");
    cell("a|b", 40, true, 256, out, sizeof out);
    assert_string_equal(out, "a\\|b");
    cell("a|b", 40, false, 256, out, sizeof out);
    assert_string_equal(out, "a|b");
    cell("tab\there\x1b", 40, false, 256, out, sizeof out);
    assert_string_equal(out, "tab?here?");
    /* too small for the next character: cut with the ellipsis where it fits, never a partial character */
    cell("\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac", 40, false, 8, out, sizeof out);
    assert_string_equal(out, "\xe2\x82\xac\xe2\x80\xa6");
    cell("abc", 40, false, 1, out, sizeof out);
    assert_string_equal(out, "");
    cell("abc", 40, false, 4, out, sizeof out);
    assert_string_equal(out, "\xe2\x80\xa6");
}

static void test_print_padded(void **state) {
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    tg_print_padded(f, "\xe2\x82\xac|", 4);
    tg_print_padded(f, "toolong", 3);
    fclose(f);
    assert_int_equal(len, 4 + 2 + 7);
    assert_memory_equal(buf, "\xe2\x82\xac|  toolong", len);
    free(buf);
}

static void test_lines(void **state) {
    (void)state;
    const char text[] = "one\r\n\n\r\ntwo\0hidden\nthree";
    char **lines = NULL;
    size_t n = 0;
    assert_true(tg_text_lines(text, sizeof text - 1, &lines, &n));
    assert_int_equal(n, 3);
    assert_string_equal(lines[0], "one");
    assert_string_equal(lines[1], "two");
    assert_string_equal(lines[2], "three");
    tg_text_lines_free(lines, n);
    assert_true(tg_text_lines("", 0, &lines, &n));
    assert_int_equal(n, 0);
    tg_text_lines_free(lines, n);
}

static void test_read_limit(void **state) {
    (void)state;
    char path[] = "/tmp/tinygpt-text-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "0123456789", 10), 10);
    close(fd);
    char msg[512];
    size_t len = 0;
    char *t = tg_read_text_file(path, 10, &len, msg, sizeof msg);
    assert_non_null(t);
    assert_int_equal(len, 10);
    assert_string_equal(t, "0123456789");
    free(t);
    assert_null(tg_read_text_file(path, 9, &len, msg, sizeof msg));
    assert_non_null(strstr(msg, path));
    assert_non_null(strstr(msg, "9-byte limit"));
    unlink(path);
    assert_null(tg_read_text_file(path, 10, &len, msg, sizeof msg));
    assert_non_null(strstr(msg, "No such file"));
    /* an endless device: the incremental reader stops where asked, the whole-file reader at the limit */
    tg_text_reader r;
    assert_true(tg_text_reader_open(&r, "/dev/zero", TG_TEXT_FILE_LIMIT, msg, sizeof msg));
    assert_true(tg_text_reader_fill(&r, "/dev/zero", 100000, msg, sizeof msg));
    assert_int_equal(r.len, 100000);
    assert_false(r.eof);
    tg_text_reader_close(&r);
    assert_null(tg_read_text_file("/dev/zero", (size_t)1 << 20, &len, msg, sizeof msg));
    assert_string_equal(msg, "/dev/zero: larger than the 1 MiB limit for a text file");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_char_len),         cmocka_unit_test(test_cell_hostile_line),
        cmocka_unit_test(test_cell_cut_and_escape), cmocka_unit_test(test_print_padded),
        cmocka_unit_test(test_lines),            cmocka_unit_test(test_read_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
