/* test_model_file.c — opening the files of a model (util/model_file.h, util/json_file.h): a FIFO, a directory or a
 * device is refused at once naming the file (a FIFO must not block: the test would hang), names and symlinks must
 * stay in the folder (a Hugging Face hub snapshot may point into its blobs/), and JSON errors name the file. */
#define _DEFAULT_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/json_file.h"
#include "util/model_file.h"

typedef struct {
    char dir[64];
} fixture;

static int setup(void **state) {
    fixture *fx = calloc(1, sizeof *fx);
    if (!fx) return -1;
    snprintf(fx->dir, sizeof fx->dir, "/tmp/tinygpt-mf-XXXXXX");
    if (!mkdtemp(fx->dir)) return -1;
    *state = fx;
    return 0;
}

static int teardown(void **state) {
    fixture *fx = *state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", fx->dir);
    int rc = system(cmd);
    free(fx);
    return rc == 0 ? 0 : -1;
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
}

static void expect_msg(const tg_error *err, const char *a, const char *b) {
    if (!strstr(err->msg, a) || (b && !strstr(err->msg, b)))
        fail_msg("message \"%s\" lacks \"%s\" / \"%s\"", err->msg, a, b ? b : "");
    assert_null(strchr(err->msg, '\n'));
}

static void test_special_files(void **state) {
    fixture *fx = *state;
    char fifo[128], dir[128];
    snprintf(fifo, sizeof fifo, "%s/config.json", fx->dir);
    snprintf(dir, sizeof dir, "%s/tokenizer.json", fx->dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(mkdir(dir, 0700), 0);
    tg_error err = {0};
    size_t size;
    bool missing = true;
    assert_int_equal(tg_file_open_regular(fifo, &size, &missing, &err), -1);
    expect_msg(&err, fifo, ": not a regular file (a FIFO)");
    assert_false(missing);
    assert_int_equal(tg_file_open_regular(dir, &size, &missing, &err), -1);
    expect_msg(&err, dir, ": is a directory");
    assert_int_equal(tg_file_open_regular("/dev/zero", &size, &missing, &err), -1);
    expect_msg(&err, "/dev/zero", "not a regular file (a character device)");
    assert_null(tg_json_load_path(fifo, 0, &missing, &err));
    expect_msg(&err, "config.json: not a regular file (a FIFO)", NULL);
    assert_null(tg_json_load_path(dir, 0, &missing, &err));
    expect_msg(&err, "tokenizer.json: is a directory", NULL);
    char nothere[128];
    snprintf(nothere, sizeof nothere, "%s/nothere.json", fx->dir);
    assert_null(tg_json_load_path(nothere, 0, &missing, &err));
    assert_true(missing);
    expect_msg(&err, nothere, "cannot open");
}

static json_t *parse(const char *text) {
    json_error_t je;
    return tg_json_parse(text, strlen(text), JSON_REJECT_DUPLICATES, &je);
}

/* Integers beyond json_int_t become reals of the same value (transformers' "no limit"); the limits themselves, and
 * digits inside strings, keys and reals, are untouched; malformed text still fails. */
static void test_json_big_integers(void **state) {
    (void)state;
    json_t *j = parse("{\"model_max_length\": 1000000000000000019884624838656, \"id\": 7,"
                      " \"ids\": [9223372036854775807, -9223372036854775808, 9223372036854775808, -9223372036854775809],"
                      " \"s\": \"12345678901234567890123 \\\" 99999999999999999999\", \"x\": 2.5,"
                      " \"99999999999999999999\": 1}");
    assert_non_null(j);
    const json_t *big = json_object_get(j, "model_max_length");
    assert_true(json_is_real(big));
    assert_true(json_real_value(big) == 1e30);
    assert_true(json_is_integer(json_object_get(j, "id")));
    assert_int_equal(json_integer_value(json_object_get(j, "id")), 7);
    const json_t *ids = json_object_get(j, "ids");
    assert_true(json_is_integer(json_array_get(ids, 0)));
    assert_true(json_integer_value(json_array_get(ids, 0)) == INT64_MAX);
    assert_true(json_is_integer(json_array_get(ids, 1)));
    assert_true(json_integer_value(json_array_get(ids, 1)) == INT64_MIN);
    assert_true(json_is_real(json_array_get(ids, 2)));
    assert_true(json_real_value(json_array_get(ids, 2)) == 9223372036854775808.0);
    assert_true(json_is_real(json_array_get(ids, 3)));
    assert_true(json_real_value(json_array_get(ids, 3)) == -9223372036854775809.0);
    assert_string_equal(json_string_value(json_object_get(j, "s")), "12345678901234567890123 \" 99999999999999999999");
    assert_true(json_is_real(json_object_get(j, "x")));
    assert_non_null(json_object_get(j, "99999999999999999999"));
    json_decref(j);
    /* still malformed: a huge integer does not make bad JSON good */
    assert_null(parse("{\"a\": 123456789012345678901234567890x}"));
    assert_null(parse("{\"a\": 0123456789012345678901234567890}"));
    assert_null(parse("[99999999999999999999999"));
    assert_null(parse("\"unterminated 99999999999999999999999"));
}

static void test_json(void **state) {
    fixture *fx = *state;
    char path[128];
    snprintf(path, sizeof path, "%s/x.json", fx->dir);
    write_file(path, "{\"a\": [1, 2}");
    tg_error err = {0};
    assert_null(tg_json_load_path(path, 0, NULL, &err));
    expect_msg(&err, path, ": bad JSON at line 1, column");
    write_file(path, "{\"a\": [1, 2]}");
    json_t *j = tg_json_load_path(path, 0, NULL, &err);
    assert_non_null(j);
    assert_int_equal(json_array_size(json_object_get(j, "a")), 2);
    json_decref(j);
    char *text;
    size_t len;
    assert_false(tg_file_read_all(path, 4, &text, &len, NULL, &err));
    expect_msg(&err, path, "over the limit of 4 bytes");
    assert_true(tg_file_read_all(path, 13, &text, &len, NULL, &err));
    assert_int_equal(len, 13);
    assert_int_equal(text[13], '\0');
    free(text);
}

static void test_names_and_symlinks(void **state) {
    fixture *fx = *state;
    char model[128], path[4096], p[512];
    snprintf(model, sizeof model, "%s/model", fx->dir);
    assert_int_equal(mkdir(model, 0700), 0);
    snprintf(p, sizeof p, "%s/real.safetensors", model);
    write_file(p, "x");
    snprintf(p, sizeof p, "%s/secret", fx->dir);
    write_file(p, "root:x:0:0");
    tg_error err = {0};
    bool missing;
    assert_true(tg_folder_file(model, "real.safetensors", NULL, path, sizeof path, &missing, &err));
    assert_false(missing);
    static const char *const bad[] = {"", ".", "..", "../secret", "/etc/passwd", "a/b"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_false(tg_folder_file(model, bad[i], "index.json", path, sizeof path, &missing, &err));
        expect_msg(&err, "index.json: ", "not a plain file name inside the folder");
    }
    assert_false(tg_folder_file(model, "absent.json", NULL, path, sizeof path, &missing, &err));
    assert_true(missing);
    /* a symlink inside the folder is followed; one that leaves it is refused by name without reading it */
    snprintf(p, sizeof p, "%s/in.safetensors", model);
    assert_int_equal(symlink("real.safetensors", p), 0);
    assert_true(tg_folder_file(model, "in.safetensors", NULL, path, sizeof path, &missing, &err));
    snprintf(p, sizeof p, "%s/out.safetensors", model);
    assert_int_equal(symlink("../secret", p), 0);
    assert_false(tg_folder_file(model, "out.safetensors", NULL, path, sizeof path, &missing, &err));
    expect_msg(&err, "out.safetensors: a symlink that leaves the model folder", NULL);
    assert_null(strstr(err.msg, "root:x"));
    snprintf(p, sizeof p, "%s/abs.json", model);
    assert_int_equal(symlink("/etc/passwd", p), 0);
    assert_false(tg_folder_file(model, "abs.json", NULL, path, sizeof path, &missing, &err));
    expect_msg(&err, "abs.json: a symlink that leaves the model folder", NULL);
    snprintf(p, sizeof p, "%s/dangling.json", model);
    assert_int_equal(symlink("nothere", p), 0);
    assert_false(tg_folder_file(model, "dangling.json", NULL, path, sizeof path, &missing, &err));
    assert_true(missing);
}

/* models--org--name/snapshots/<rev>/config.json -> ../../blobs/<hash>: the hub cache's layout is accepted; a link
 * from a snapshot to anywhere else, or from a folder not under snapshots/ into a blobs/ folder, is not. */
static void test_hub_snapshot(void **state) {
    fixture *fx = *state;
    char p[512], path[4096];
    snprintf(p, sizeof p, "%s/models--o--m", fx->dir);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/models--o--m/blobs", fx->dir);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/models--o--m/snapshots", fx->dir);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/models--o--m/snapshots/abc", fx->dir);
    assert_int_equal(mkdir(p, 0700), 0);
    snprintf(p, sizeof p, "%s/models--o--m/blobs/1234", fx->dir);
    write_file(p, "{}");
    snprintf(p, sizeof p, "%s/models--o--m/other", fx->dir);
    write_file(p, "{}");
    snprintf(p, sizeof p, "%s/models--o--m/snapshots/abc/config.json", fx->dir);
    assert_int_equal(symlink("../../blobs/1234", p), 0);
    snprintf(p, sizeof p, "%s/models--o--m/snapshots/abc/tokenizer.json", fx->dir);
    assert_int_equal(symlink("../../other", p), 0);
    char snap[256];
    snprintf(snap, sizeof snap, "%s/models--o--m/snapshots/abc", fx->dir);
    tg_error err = {0};
    bool missing;
    assert_true(tg_folder_file(snap, "config.json", NULL, path, sizeof path, &missing, &err));
    json_t *j = tg_json_load_path(path, 0, NULL, &err);
    assert_non_null(j);
    json_decref(j);
    assert_false(tg_folder_file(snap, "tokenizer.json", NULL, path, sizeof path, &missing, &err));
    expect_msg(&err, "tokenizer.json: a symlink that leaves the model folder", NULL);
    /* the same link from a folder that is not a snapshot */
    char plain[256];
    snprintf(plain, sizeof plain, "%s/models--o--m/notsnap", fx->dir);
    assert_int_equal(mkdir(plain, 0700), 0);
    snprintf(p, sizeof p, "%s/config.json", plain);
    assert_int_equal(symlink("../blobs/1234", p), 0);
    assert_false(tg_folder_file(plain, "config.json", NULL, path, sizeof path, &missing, &err));
    expect_msg(&err, "config.json: a symlink that leaves the model folder", NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_special_files, setup, teardown),
        cmocka_unit_test_setup_teardown(test_json, setup, teardown),
        cmocka_unit_test(test_json_big_integers),
        cmocka_unit_test_setup_teardown(test_names_and_symlinks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hub_snapshot, setup, teardown),
    };
    return cmocka_run_group_tests_name("model_file", tests, NULL, NULL);
}
