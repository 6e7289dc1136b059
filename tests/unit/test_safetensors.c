/* test_safetensors.c — the safetensors reader: round trips through safetensors_builder (single file, folder,
 * sharded index), views, and malformed headers, offsets, shapes, dtypes and shard sets, each failing cleanly with a
 * message that names the problem. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "format/safetensors.h"
#include "gguf_builder.h"
#include "safetensors_builder.h"

typedef struct {
    char *dir;
    char *path; /* dir/model.safetensors */
} fixture;

static int setup(void **state) {
    fixture *fx = calloc(1, sizeof *fx);
    if (!fx) return -1;
    fx->dir = gguf_builder_tmpdir();
    if (!fx->dir) return -1;
    fx->path = gguf_builder_path(fx->dir, "model.safetensors");
    *state = fx;
    return 0;
}

static int teardown(void **state) {
    fixture *fx = *state;
    gguf_builder_rmdir(fx->dir);
    free(fx->path);
    free(fx->dir);
    free(fx);
    return 0;
}

/* Each test starts from an empty folder. */
static int clean(void **state) {
    fixture *fx = *state;
    gguf_builder_rmdir(fx->dir);
    return mkdir(fx->dir, 0700);
}

/* One line containing `where` and every NULL-terminated phrase. */
static void check_message(const tg_error *err, const char *where, ...) {
    if (where && !strstr(err->msg, where)) fail_msg("message \"%s\" lacks \"%s\"", err->msg, where);
    assert_null(strchr(err->msg, '\n'));
    va_list ap;
    va_start(ap, where);
    for (const char *want; (want = va_arg(ap, const char *)) != NULL;)
        if (!strstr(err->msg, want)) fail_msg("message \"%s\" lacks \"%s\"", err->msg, want);
    va_end(ap);
}

/* Writes a raw file and expects open_file to fail with the phrases. */
#define EXPECT_RAW_FAIL(fx, header, data, n, ...)                                                                   \
    do {                                                                                                            \
        assert_true(safetensors_builder_write_raw((fx)->path, (header), (data), (n)));                             \
        tg_error err_ = {0};                                                                                      \
        tg_safetensors *st_ = tg_safetensors_open_file((fx)->path, &err_);                                          \
        if (st_) {                                                                                                  \
            tg_safetensors_close(st_);                                                                              \
            fail_msg("a malformed file opened: %s", (header));                                                     \
        }                                                                                                           \
        check_message(&err_, (fx)->path, __VA_ARGS__, (const char *)NULL);                                          \
    } while (0)

static float g_f32[3][4] = {{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}};
static const uint16_t g_f16[5] = {0x3c00, 0x4000, 0xc000, 0x0000, 0x7bff};
static const uint16_t g_bf16[4] = {0x3f80, 0x4000, 0xc000, 0x0000};
static const int64_t g_i64[2] = {7, -7};

static safetensors_builder *sample(void) {
    safetensors_builder *b = safetensors_builder_new();
    assert_true(safetensors_builder_add(b, "w.f32", "F32", 2, (int64_t[]){3, 4}, g_f32));
    assert_true(safetensors_builder_add(b, "v.f16", "F16", 1, (int64_t[]){5}, g_f16));
    assert_true(safetensors_builder_add(b, "w.bf16", "BF16", 2, (int64_t[]){2, 2}, g_bf16));
    assert_true(safetensors_builder_add(b, "ids", "I64", 1, (int64_t[]){2}, g_i64));
    assert_true(safetensors_builder_add(b, "t.3d", "F32", 3, (int64_t[]){2, 1, 2}, NULL));
    assert_true(safetensors_builder_add(b, "scalar", "F32", 0, NULL, g_f32));
    assert_false(safetensors_builder_add(b, "bad", "Q4", 1, (int64_t[]){2}, NULL));
    safetensors_builder_add_metadata(b, "format", "pt");
    return b;
}

/* Checks the tensors of sample() through st. */
static void check_sample(tg_safetensors *st) {
    assert_int_equal(tg_safetensors_count(st), 6);
    const tg_st_tensor *t = tg_safetensors_find(st, "w.f32");
    assert_non_null(t);
    assert_string_equal(t->name, "w.f32");
    assert_string_equal(t->dtype, "F32");
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->shape[0], 3);
    assert_int_equal(t->shape[1], 4);
    assert_int_equal(t->nbytes, sizeof g_f32);
    assert_memory_equal(t->data, g_f32, sizeof g_f32);
    assert_null(tg_safetensors_find(st, "w.f3"));
    assert_null(tg_safetensors_find(st, "__metadata__"));
    assert_null(tg_safetensors_at(st, 6));
    for (size_t i = 0; i < 6; i++) {
        const tg_st_tensor *a = tg_safetensors_at(st, i);
        assert_ptr_equal(tg_safetensors_find(st, a->name), a);
    }
    t = tg_safetensors_find(st, "ids");
    assert_string_equal(t->dtype, "I64");
    assert_memory_equal(t->data, g_i64, sizeof g_i64);
    assert_int_equal(tg_safetensors_find(st, "scalar")->n_dims, 0);
    assert_int_equal(tg_safetensors_find(st, "scalar")->nbytes, 4);

    tg_tensor v;
    tg_error err = {0};
    assert_true(tg_safetensors_view(st, "w.f32", 3, 4, &v, &err));
    assert_int_equal(v.type, TG_DT_F32);
    assert_int_equal(v.rows, 3);
    assert_int_equal(v.cols, 4);
    assert_memory_equal(v.data, g_f32, sizeof g_f32);
    assert_true(tg_safetensors_view(st, "v.f16", 1, 5, &v, &err));
    assert_int_equal(v.type, TG_DT_F16);
    assert_memory_equal(v.data, g_f16, sizeof g_f16);
    assert_true(tg_safetensors_view(st, "w.bf16", -1, -1, &v, &err));
    assert_int_equal(v.type, TG_DT_BF16);
    assert_int_equal(v.rows, 2);
    assert_memory_equal(v.data, g_bf16, sizeof g_bf16);
    assert_true(tg_safetensors_view(st, "scalar", 1, 1, &v, &err));

    assert_false(tg_safetensors_view(st, "w.f32", 4, 3, &v, &err));
    check_message(&err, "'w.f32'", "shape [3, 4]", "expected [4, 3]", (const char *)NULL);
    assert_false(tg_safetensors_view(st, "ids", 1, 2, &v, &err));
    check_message(&err, "'ids'", "dtype I64", "not supported", (const char *)NULL);
    assert_false(tg_safetensors_view(st, "t.3d", -1, -1, &v, &err));
    check_message(&err, "'t.3d'", "3 dimensions", (const char *)NULL);
    assert_false(tg_safetensors_view(st, "missing", 1, 1, &v, &err));
    check_message(&err, "'missing' not found", (const char *)NULL);
}

static void test_single_file(void **state) {
    fixture *fx = *state;
    safetensors_builder *b = sample();
    assert_true(safetensors_builder_write(b, fx->path));
    safetensors_builder_free(b);
    tg_error err = {0};
    tg_safetensors *st = tg_safetensors_open_file(fx->path, &err);
    if (!st) fail_msg("%s", err.msg);
    check_sample(st);
    tg_safetensors_close(st);

    st = tg_safetensors_open_dir(fx->dir, &err); /* the folder form finds model.safetensors */
    if (!st) fail_msg("%s", err.msg);
    check_sample(st);
    tg_safetensors_close(st);
    tg_safetensors_close(NULL);
}

static void test_sharded(void **state) {
    fixture *fx = *state;
    safetensors_builder *b = sample();
    assert_true(safetensors_builder_write_sharded(b, fx->dir, 3));
    safetensors_builder_free(b);
    tg_error err = {0};
    tg_safetensors *st = tg_safetensors_open_dir(fx->dir, &err);
    if (!st) fail_msg("%s", err.msg);
    check_sample(st);
    tg_safetensors_close(st);

    /* an index entry naming the wrong shard */
    char *index = gguf_builder_path(fx->dir, "model.safetensors.index.json");
    char *text = NULL;
    FILE *f = fopen(index, "rb");
    assert_non_null(f);
    text = calloc(1, 1 << 16);
    assert_non_null(text);
    size_t n = fread(text, 1, (1 << 16) - 1, f);
    fclose(f);
    assert_true(n > 0);
    char *hit = strstr(text, "\"w.f32\": \"model-00001-of-00003");
    assert_non_null(hit);
    hit[strlen("\"w.f32\": \"model-0000")] = '2';
    assert_true(gguf_builder_write_bytes(index, text, n));
    assert_null(tg_safetensors_open_dir(fx->dir, &err));
    check_message(&err, index, "'w.f32'", "listed in shard 'model-00002-of-00003.safetensors'", "not in it",
                  (const char *)NULL);

    /* a missing shard */
    b = sample();
    assert_true(safetensors_builder_write_sharded(b, fx->dir, 3));
    safetensors_builder_free(b);
    char *shard = gguf_builder_path(fx->dir, "model-00003-of-00003.safetensors");
    assert_int_equal(unlink(shard), 0);
    assert_null(tg_safetensors_open_dir(fx->dir, &err));
    check_message(&err, index, "shard 'model-00003-of-00003.safetensors'", "missing", (const char *)NULL);

    /* the same tensor in two shards */
    b = safetensors_builder_new();
    assert_true(safetensors_builder_add(b, "x", "F32", 1, (int64_t[]){1}, g_f32));
    assert_true(safetensors_builder_write(b, shard));
    char *shard1 = gguf_builder_path(fx->dir, "model-00001-of-00003.safetensors");
    assert_true(safetensors_builder_write(b, shard1));
    safetensors_builder_free(b);
    assert_null(tg_safetensors_open_dir(fx->dir, &err));
    check_message(&err, "duplicate tensor 'x'", (const char *)NULL);

    /* malformed index files */
    assert_true(gguf_builder_write_bytes(index, "{\"weight_map\": ", 15));
    assert_null(tg_safetensors_open_dir(fx->dir, &err));
    check_message(&err, index, "bad JSON", (const char *)NULL);
    const char *no_map = "{\"metadata\": {}}";
    assert_true(gguf_builder_write_bytes(index, no_map, strlen(no_map)));
    assert_null(tg_safetensors_open_dir(fx->dir, &err));
    check_message(&err, index, "weight_map", (const char *)NULL);
    const char *escape = "{\"weight_map\": {\"x\": \"../model-00001-of-00003.safetensors\"}}";
    assert_true(gguf_builder_write_bytes(index, escape, strlen(escape)));
    assert_null(tg_safetensors_open_dir(fx->dir, &err));
    check_message(&err, index, "'x'", "not a plain file name", (const char *)NULL);
    const char *absolute = "{\"weight_map\": {\"x\": \"/etc/passwd\"}}";
    assert_true(gguf_builder_write_bytes(index, absolute, strlen(absolute)));
    assert_null(tg_safetensors_open_dir(fx->dir, &err));
    check_message(&err, index, "'x'", "'/etc/passwd' is not a plain file name", (const char *)NULL);
    const char *not_str = "{\"weight_map\": {\"x\": 3}}";
    assert_true(gguf_builder_write_bytes(index, not_str, strlen(not_str)));
    assert_null(tg_safetensors_open_dir(fx->dir, &err));
    check_message(&err, index, "'x'", (const char *)NULL);
    free(shard1);
    free(shard);
    free(text);
    free(index);
}

static void test_no_weights(void **state) {
    fixture *fx = *state;
    char *sub = gguf_builder_path(fx->dir, "empty-model");
    tg_error err = {0};
    assert_null(tg_safetensors_open_dir(sub, &err));
    check_message(&err, sub, "model.safetensors", "model.safetensors.index.json", (const char *)NULL);
    assert_null(tg_safetensors_open_file(sub, &err));
    check_message(&err, sub, (const char *)NULL);
    free(sub);
}

static void test_bad_header_length(void **state) {
    fixture *fx = *state;
    tg_error err = {0};
    assert_true(gguf_builder_write_bytes(fx->path, "\x10\0\0", 3));
    assert_null(tg_safetensors_open_file(fx->path, &err));
    check_message(&err, fx->path, "truncated", (const char *)NULL);
    uint8_t big[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '{', '}'};
    assert_true(gguf_builder_write_bytes(fx->path, big, sizeof big));
    assert_null(tg_safetensors_open_file(fx->path, &err));
    check_message(&err, fx->path, "bad header length:", "limit of 100000000 bytes", (const char *)NULL);
    if (strstr(err.msg, "18446744073709551615")) fail_msg("the message echoes the first bytes: %s", err.msg);
    uint8_t past[16] = {9, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '};
    assert_true(gguf_builder_write_bytes(fx->path, past, sizeof past));
    assert_null(tg_safetensors_open_file(fx->path, &err));
    check_message(&err, fx->path, "bad header length 9", "exceeds the file size", (const char *)NULL);
    uint8_t zero[8] = {0};
    assert_true(gguf_builder_write_bytes(fx->path, zero, sizeof zero));
    assert_null(tg_safetensors_open_file(fx->path, &err));
    check_message(&err, fx->path, "bad header length 0", (const char *)NULL);
}

static void test_bad_json(void **state) {
    fixture *fx = *state;
    EXPECT_RAW_FAIL(fx, "{\"a\": {\"dtype\": ", NULL, 0, "bad JSON header");
    EXPECT_RAW_FAIL(fx, "[1, 2]", NULL, 0, "bad JSON header", "not an object");
    EXPECT_RAW_FAIL(fx,
                    "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                    "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                    "\0\0\0\0", 4, "bad JSON header", "duplicate");
    EXPECT_RAW_FAIL(fx, "{\"__metadata__\": 3}", NULL, 0, "__metadata__");
    EXPECT_RAW_FAIL(fx, "{\"a\": 3}", NULL, 0, "'a'", "not a JSON object");
}

static void test_bad_tensors(void **state) {
    fixture *fx = *state;
    const uint8_t data[64] = {0};
    EXPECT_RAW_FAIL(fx, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", data, 8, "truncated",
                    "'a'", "data_offsets [0, 16) extend past the end of the data section (8 bytes)");
    EXPECT_RAW_FAIL(fx, "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,12]}}", data, 16, "'a'",
                    "hold 12 bytes", "need 16");
    EXPECT_RAW_FAIL(fx, "{\"a\":{\"dtype\":\"F16\",\"shape\":[2,3],\"data_offsets\":[4,4]}}", data, 16, "'a'",
                    "hold 0 bytes", "F16 need 12");
    EXPECT_RAW_FAIL(fx, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", data, 16, "'a'",
                    "end before they begin");
    EXPECT_RAW_FAIL(fx, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", data, 16, "'a'",
                    "data_offsets");
    EXPECT_RAW_FAIL(fx, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", data, 16, "'a'",
                    "data_offsets");
    EXPECT_RAW_FAIL(fx, "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", data, 16, "'a'",
                    "shape[0]");
    EXPECT_RAW_FAIL(fx, "{\"a\":{\"dtype\":\"F32\",\"shape\":[\"4\"],\"data_offsets\":[0,16]}}", data, 16, "'a'",
                    "shape[0]");
    EXPECT_RAW_FAIL(fx, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,4]}}", data, 16, "'a'",
                    "5 dimensions");
    EXPECT_RAW_FAIL(fx, "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", data, 16, "'a'", "shape");
    EXPECT_RAW_FAIL(fx, "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", data, 16, "'a'", "dtype");
    EXPECT_RAW_FAIL(fx, "{\"a\":{\"dtype\":\"Q4_K\",\"shape\":[1],\"data_offsets\":[0,4]}}", data, 16, "'a'",
                    "unknown dtype 'Q4_K'");
    EXPECT_RAW_FAIL(fx,
                    "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],"
                    "\"data_offsets\":[0,4]}}",
                    data, 16, "'a'", "overflows");
    EXPECT_RAW_FAIL(fx, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,18446744073709551615]}}", data,
                    16, "bad JSON header");
}

/* The data section must be tiled exactly: overlaps, holes and trailing bytes are refused naming the tensors; the
 * tensors may be listed in any order and empty tensors may share an offset. */
static void test_tiling(void **state) {
    fixture *fx = *state;
    const uint8_t data[64] = {0};
    EXPECT_RAW_FAIL(fx,
                    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                    "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                    data, 12, "tensors 'a' and 'b' overlap", "[4, 12)");
    EXPECT_RAW_FAIL(fx,
                    "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                    "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
                    data, 8, "tensors 'a' and 'b' overlap");
    EXPECT_RAW_FAIL(fx,
                    "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                    "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                    data, 12, "a hole", "[4, 8)", "'a' and 'b'");
    EXPECT_RAW_FAIL(fx, "{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", data, 8, "a hole",
                    "[0, 4)", "the start and 'b'");
    EXPECT_RAW_FAIL(fx, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", data, 12,
                    "8 bytes of data after the last tensor 'a'");
    EXPECT_RAW_FAIL(fx, "{}", data, 4, "4 bytes of data after a header that lists no tensors");
    /* listed out of order, with two empty tensors at one offset: fine */
    assert_true(safetensors_builder_write_raw(fx->path,
                                              "{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
                                              "\"e\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
                                              "\"f\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
                                              "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                                              data, 8));
    tg_error err = {0};
    tg_safetensors *st = tg_safetensors_open_file(fx->path, &err);
    if (!st) fail_msg("a tiled file was refused: %s", err.msg);
    assert_int_equal(tg_safetensors_count(st), 4);
    tg_safetensors_close(st);
}

/* An unaligned F32 tensor parses, but its view is refused; F16 data at an even address is fine. */
static void test_alignment(void **state) {
    fixture *fx = *state;
    const uint8_t data[16] = {0};
    /* header of 61 bytes: the data section starts at 69, odd */
    const char *h = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}       ";
    assert_true(safetensors_builder_write_raw(fx->path, h, data, 8));
    tg_error err = {0};
    tg_safetensors *st = tg_safetensors_open_file(fx->path, &err);
    if (!st) fail_msg("%s", err.msg);
    tg_tensor v;
    if ((uintptr_t)tg_safetensors_find(st, "a")->data % 4 != 0) {
        assert_false(tg_safetensors_view(st, "a", 1, 2, &v, &err));
        check_message(&err, fx->path, "'a'", "not aligned", (const char *)NULL);
    } else {
        fail_msg("expected an unaligned data section (header of %zu bytes)", strlen(h));
    }
    tg_safetensors_close(st);
}

/* Every prefix of a valid file fails cleanly; single-byte changes never crash. */
static void test_prefixes_and_mutations(void **state) {
    fixture *fx = *state;
    safetensors_builder *b = sample();
    assert_true(safetensors_builder_write(b, fx->path));
    safetensors_builder_free(b);
    FILE *f = fopen(fx->path, "rb");
    assert_non_null(f);
    uint8_t buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    assert_true(n > 64 && n < sizeof buf);
    tg_error err = {0};
    for (size_t len = 0; len < n; len++) {
        assert_true(gguf_builder_write_bytes(fx->path, buf, len));
        err.msg[0] = '\0';
        tg_safetensors *st = tg_safetensors_open_file(fx->path, &err);
        if (st) {
            tg_safetensors_close(st);
            fail_msg("a %zu-byte prefix of a %zu-byte file opened", len, n);
        }
        assert_true(strlen(err.msg) > 0);
    }
    size_t opened = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t orig = buf[i];
        const uint8_t values[] = {0x00, 0xff, '9', '"'};
        for (size_t k = 0; k < sizeof values; k++) {
            if (values[k] == orig) continue;
            buf[i] = values[k];
            assert_true(gguf_builder_write_bytes(fx->path, buf, n));
            tg_safetensors *st = tg_safetensors_open_file(fx->path, &err);
            if (st) {
                opened++;
                tg_safetensors_close(st);
            } else {
                failed++;
            }
        }
        buf[i] = orig;
    }
    assert_true(opened > 0);
    assert_true(failed > 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_single_file, clean),       cmocka_unit_test_setup(test_sharded, clean),
        cmocka_unit_test_setup(test_no_weights, clean),        cmocka_unit_test_setup(test_bad_header_length, clean),
        cmocka_unit_test_setup(test_bad_json, clean),          cmocka_unit_test_setup(test_bad_tensors, clean),
        cmocka_unit_test_setup(test_alignment, clean),         cmocka_unit_test_setup(test_tiling, clean),
        cmocka_unit_test_setup(test_prefixes_and_mutations, clean),
    };
    return cmocka_run_group_tests_name("safetensors", tests, setup, teardown);
}
