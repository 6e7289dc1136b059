/* test_gguf.c — the GGUF reader: every metadata type round-trips through gguf_builder, alignment, tensor views,
 * a battery of malformed and truncated files (each must fail cleanly with a message naming the problem), and the
 * real vocab-only files from the shared test data. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "format/gguf.h"
#include "gguf_builder.h"

typedef struct {
    char *dir;
    char *path; /* dir/t.gguf, rewritten by each test */
} fixture;

static int setup(void **state) {
    fixture *fx = calloc(1, sizeof *fx);
    if (!fx) return -1;
    fx->dir = gguf_builder_tmpdir();
    if (!fx->dir) return -1;
    fx->path = gguf_builder_path(fx->dir, "t.gguf");
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

static tg_gguf *open_built(fixture *fx, const gguf_builder *b, tg_error *err) {
    assert_true(gguf_builder_write(b, fx->path));
    return tg_gguf_open(fx->path, err);
}

static tg_gguf *open_bytes(fixture *fx, const uint8_t *p, size_t n, tg_error *err) {
    assert_true(gguf_builder_write_bytes(fx->path, p, n));
    return tg_gguf_open(fx->path, err);
}

/* The message is one line that names the file and contains every one of the NULL-terminated key phrases. */
static void check_message(const fixture *fx, const tg_error *err, ...) {
    assert_non_null(strstr(err->msg, fx->path));
    assert_null(strchr(err->msg, '\n'));
    va_list ap;
    va_start(ap, err);
    for (const char *want; (want = va_arg(ap, const char *)) != NULL;) {
        if (!strstr(err->msg, want)) fail_msg("message \"%s\" lacks \"%s\"", err->msg, want);
    }
    va_end(ap);
}

/* Builds b, expects the open to fail with a message holding the given phrases, frees b. */
#define EXPECT_FAIL(fx, b, ...)                                                                                     \
    do {                                                                                                            \
        tg_error err_ = {0};                                                                                      \
        tg_gguf *g_ = open_built((fx), (b), &err_);                                                                 \
        if (g_) {                                                                                                   \
            tg_gguf_close(g_);                                                                                      \
            fail_msg("a malformed file opened");                                                                    \
        }                                                                                                           \
        check_message((fx), &err_, __VA_ARGS__, (const char *)NULL);                                                \
        gguf_builder_free(b);                                                                                       \
    } while (0)

static bool str_eq(tg_gguf_str s, const char *want) { return s.len == strlen(want) && memcmp(s.ptr, want, s.len) == 0; }

/* ---- metadata round trip ------------------------------------------------------------------------------------- */

static void test_every_metadata_type(void **state) {
    fixture *fx = *state;
    gguf_builder *b = gguf_builder_new();
    gguf_builder_add_u8(b, "t.u8", 250);
    gguf_builder_add_i8(b, "t.i8", -120);
    gguf_builder_add_u16(b, "t.u16", 65000);
    gguf_builder_add_i16(b, "t.i16", -32000);
    gguf_builder_add_u32(b, "t.u32", 4000000000u);
    gguf_builder_add_i32(b, "t.i32", -2000000000);
    gguf_builder_add_f32(b, "t.f32", 1.5e-5f);
    gguf_builder_add_bool(b, "t.bool", true);
    gguf_builder_add_str(b, "t.str", "llama");
    gguf_builder_add_u64(b, "t.u64", 0xffffffffffffffffull);
    gguf_builder_add_i64(b, "t.i64", -9000000000000ll);
    gguf_builder_add_f64(b, "t.f64", 10000.25);
    gguf_builder_add_strn(b, "t.empty", "", 0);
    const char *strs[] = {"<unk>", "", "\xe2\x96\x81the", "a b"};
    gguf_builder_add_arr_str(b, "a.str", 4, strs);
    const float f32s[] = {0.5f, -1.25f, 3e38f};
    gguf_builder_add_arr_f32(b, "a.f32", 3, f32s);
    const int32_t i32s[] = {1, -2, 2147483647};
    gguf_builder_add_arr_i32(b, "a.i32", 3, i32s);
    const uint8_t bools[] = {1, 0, 1};
    gguf_builder_add_arr(b, "a.bool", GGUF_BUILDER_T_BOOL, 3, bools);
    const uint16_t u16s[] = {1, 65535};
    gguf_builder_add_arr(b, "a.u16", GGUF_BUILDER_T_U16, 2, u16s);
    const int8_t i8s[] = {-128, 127};
    gguf_builder_add_arr(b, "a.i8", GGUF_BUILDER_T_I8, 2, i8s);
    const uint64_t u64s[] = {7, 0x8000000000000000ull};
    gguf_builder_add_arr(b, "a.u64", GGUF_BUILDER_T_U64, 2, u64s);
    const double f64s[] = {0.1, -2.5};
    gguf_builder_add_arr(b, "a.f64", GGUF_BUILDER_T_F64, 2, f64s);
    gguf_builder_add_arr(b, "a.empty", GGUF_BUILDER_T_U32, 0, NULL);
    /* [[1, 2], []] as u32 arrays: outer type ARRAY, count 2, then two (type, count, elems) records */
    const uint8_t nested[] = {9, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0,              /* ARRAY of 2 arrays */
                              4, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, /* u32 [1, 2] */
                              4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};           /* u32 [] */
    gguf_builder_add_raw(b, "a.nested", GGUF_BUILDER_T_ARRAY, nested, sizeof nested);

    tg_error err = {0};
    tg_gguf *g = open_built(fx, b, &err);
    if (!g) fail_msg("%s", err.msg);
    gguf_builder_free(b);
    assert_int_equal(tg_gguf_version(g), 3);
    assert_string_equal(tg_gguf_path(g), fx->path);
    assert_int_equal(tg_gguf_n_kv(g), 23);
    assert_int_equal(tg_gguf_n_tensors(g), 0);
    assert_true(str_eq(tg_gguf_kv_key(g, 0), "t.u8"));
    assert_int_equal(tg_gguf_kv_type(g, 0), TG_GGUF_U8);
    assert_int_equal(tg_gguf_kv_type(g, 8), TG_GGUF_STRING);
    assert_int_equal(tg_gguf_kv_type(g, 9), TG_GGUF_U64);
    assert_int_equal(tg_gguf_kv_type(g, 13), TG_GGUF_ARRAY);
    assert_true(str_eq(tg_gguf_kv_key(g, 22), "a.nested"));

    int64_t v;
    assert_true(tg_gguf_get_i64(g, "t.u8", &v) && v == 250);
    assert_true(tg_gguf_get_i64(g, "t.i8", &v) && v == -120);
    assert_true(tg_gguf_get_i64(g, "t.u16", &v) && v == 65000);
    assert_true(tg_gguf_get_i64(g, "t.i16", &v) && v == -32000);
    assert_true(tg_gguf_get_i64(g, "t.u32", &v) && v == 4000000000ll);
    assert_true(tg_gguf_get_i64(g, "t.i32", &v) && v == -2000000000);
    assert_true(tg_gguf_get_i64(g, "t.i64", &v) && v == -9000000000000ll);
    assert_false(tg_gguf_get_i64(g, "t.u64", &v)); /* does not fit int64 */
    assert_false(tg_gguf_get_i64(g, "t.f32", &v)); /* not an integer */
    assert_false(tg_gguf_get_i64(g, "t.bool", &v));
    assert_false(tg_gguf_get_i64(g, "absent", &v));
    float f;
    assert_true(tg_gguf_get_f32(g, "t.f32", &f) && f == 1.5e-5f);
    assert_true(tg_gguf_get_f32(g, "t.f64", &f) && f == 10000.25f);
    assert_false(tg_gguf_get_f32(g, "t.u32", &f));
    bool bv = false;
    assert_true(tg_gguf_get_bool(g, "t.bool", &bv) && bv);
    assert_false(tg_gguf_get_bool(g, "t.u8", &bv));
    tg_gguf_str s;
    assert_true(tg_gguf_get_str(g, "t.str", &s) && str_eq(s, "llama"));
    assert_true(tg_gguf_get_str(g, "t.empty", &s) && s.len == 0);
    assert_false(tg_gguf_get_str(g, "t.u32", &s));
    assert_true(tg_gguf_has(g, "t.f64"));
    assert_false(tg_gguf_has(g, "t.f6"));
    assert_false(tg_gguf_has(g, "t.f640"));

    tg_gguf_array a;
    assert_false(tg_gguf_get_array(g, "t.str", &a));
    assert_true(tg_gguf_get_array(g, "a.str", &a));
    assert_int_equal(a.elem_type, TG_GGUF_STRING);
    assert_int_equal(a.count, 4);
    for (int i = 0; i < 4; i++) assert_true(str_eq(tg_gguf_array_str(&a, (uint64_t)i), strs[i]));
    assert_int_equal(tg_gguf_array_str(&a, 4).len, 0); /* out of range */
    assert_true(tg_gguf_get_array(g, "a.f32", &a));
    assert_int_equal(a.count, 3);
    for (int i = 0; i < 3; i++) assert_true(tg_gguf_array_f32(&a, (uint64_t)i) == f32s[i]);
    assert_true(tg_gguf_get_array(g, "a.i32", &a));
    for (int i = 0; i < 3; i++) assert_int_equal(tg_gguf_array_i64(&a, (uint64_t)i), i32s[i]);
    assert_int_equal(tg_gguf_array_str(&a, 0).len, 0); /* wrong type */
    assert_true(tg_gguf_get_array(g, "a.bool", &a));
    assert_int_equal(a.elem_type, TG_GGUF_BOOL);
    for (int i = 0; i < 3; i++) assert_int_equal(tg_gguf_array_i64(&a, (uint64_t)i), bools[i]);
    assert_true(tg_gguf_get_array(g, "a.u16", &a));
    assert_int_equal(tg_gguf_array_i64(&a, 1), 65535);
    assert_true(tg_gguf_get_array(g, "a.i8", &a));
    assert_int_equal(tg_gguf_array_i64(&a, 0), -128);
    assert_true(tg_gguf_get_array(g, "a.u64", &a));
    assert_int_equal(tg_gguf_array_i64(&a, 0), 7);
    assert_true(tg_gguf_array_i64(&a, 1) == INT64_MAX); /* saturates */
    assert_true(tg_gguf_get_array(g, "a.f64", &a));
    assert_true(tg_gguf_array_f32(&a, 1) == -2.5f);
    assert_true(tg_gguf_get_array(g, "a.empty", &a));
    assert_int_equal(a.count, 0);
    assert_int_equal(tg_gguf_array_i64(&a, 0), 0);
    assert_true(tg_gguf_get_array(g, "a.nested", &a));
    assert_int_equal(a.elem_type, TG_GGUF_ARRAY);
    assert_int_equal(a.count, 2);
    tg_gguf_close(g);
}

/* A 100k-entry string array (tokenizer sized): every element comes back through the O(1) index. */
static void test_large_string_array(void **state) {
    fixture *fx = *state;
    enum { N = 100000 };
    char(*text)[16] = malloc(sizeof(char[16]) * N);
    const char **strs = malloc(sizeof *strs * N);
    assert_non_null(text);
    assert_non_null(strs);
    for (int i = 0; i < N; i++) {
        snprintf(text[i], sizeof text[i], "tok%d", i);
        strs[i] = text[i];
    }
    gguf_builder *b = gguf_builder_new();
    gguf_builder_add_arr_str(b, "tokenizer.ggml.tokens", N, strs);
    tg_error err = {0};
    tg_gguf *g = open_built(fx, b, &err);
    if (!g) fail_msg("%s", err.msg);
    gguf_builder_free(b);
    tg_gguf_array a;
    assert_true(tg_gguf_get_array(g, "tokenizer.ggml.tokens", &a));
    assert_int_equal(a.count, N);
    for (int i = N - 1; i >= 0; i -= 7) assert_true(str_eq(tg_gguf_array_str(&a, (uint64_t)i), strs[i]));
    tg_gguf_close(g);
    free(strs);
    free(text);
}

/* ---- tensors and alignment ----------------------------------------------------------------------------------- */

static void test_tensor_views(void **state) {
    fixture *fx = *state;
    float w[3][64];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 64; c++) w[r][c] = (float)(r * 100 + c);
    uint16_t h[5] = {0x3c00, 0x4000, 0xc000, 0x0000, 0x7bff};
    uint8_t q8[2][34], q4[18], k4[144];
    for (size_t i = 0; i < sizeof q8; i++) ((uint8_t *)q8)[i] = (uint8_t)(i * 7);
    for (size_t i = 0; i < sizeof q4; i++) q4[i] = (uint8_t)(i + 1);
    memset(k4, 0x11, sizeof k4);
    gguf_builder *b = gguf_builder_new();
    gguf_builder_add_str(b, "general.architecture", "llama");
    assert_int_equal(gguf_builder_add_tensor(b, "w.f32", GGUF_BUILDER_F32, 2, (int64_t[]){64, 3}, w), 0);
    assert_int_equal(gguf_builder_add_tensor(b, "v.f16", GGUF_BUILDER_F16, 1, (int64_t[]){5}, h), 1);
    assert_int_equal(gguf_builder_add_tensor(b, "w.q8", GGUF_BUILDER_Q8_0, 2, (int64_t[]){32, 2}, q8), 2);
    assert_int_equal(gguf_builder_add_tensor(b, "w.q4", GGUF_BUILDER_Q4_0, 2, (int64_t[]){32, 1}, q4), 3);
    assert_int_equal(gguf_builder_add_tensor(b, "w.bf16", GGUF_BUILDER_BF16, 2, (int64_t[]){2, 2}, h), 4);
    assert_int_equal(gguf_builder_add_tensor(b, "w.q4k", GGUF_BUILDER_Q4_K, 1, (int64_t[]){256}, k4), 5);
    assert_int_equal(gguf_builder_add_tensor(b, "w.3d", GGUF_BUILDER_F32, 3, (int64_t[]){4, 2, 2}, NULL), 6);
    assert_int_equal(gguf_builder_add_tensor(b, "w.iq2", GGUF_BUILDER_IQ2_XXS, 1, (int64_t[]){256}, NULL), 7);
    assert_int_equal(gguf_builder_add_tensor(b, "w.bad", GGUF_BUILDER_Q8_0, 1, (int64_t[]){33}, NULL), -1);

    tg_error err = {0};
    tg_gguf *g = open_built(fx, b, &err);
    if (!g) fail_msg("%s", err.msg);
    gguf_builder_free(b);
    assert_int_equal(tg_gguf_n_tensors(g), 8);
    assert_int_equal(tg_gguf_alignment(g), 32);
    assert_int_equal(tg_gguf_data_offset(g) % 32, 0);

    const tg_gguf_tensor *t = tg_gguf_tensor_at(g, 0);
    assert_non_null(t);
    assert_true(str_eq(t->name, "w.f32"));
    assert_int_equal(t->n_dims, 2);
    assert_int_equal(t->ne[0], 64);
    assert_int_equal(t->ne[1], 3);
    assert_int_equal(t->ne[2], 1);
    assert_int_equal(t->nbytes, sizeof w);
    assert_null(tg_gguf_tensor_at(g, 8));
    assert_ptr_equal(tg_gguf_find_tensor(g, "w.q4k"), tg_gguf_tensor_at(g, 5));
    assert_int_equal(tg_gguf_find_tensor(g, "w.q4k")->nbytes, 144);
    assert_null(tg_gguf_find_tensor(g, "w.f3"));

    tg_tensor v;
    assert_true(tg_gguf_tensor_view(g, "w.f32", 3, 64, &v, &err));
    assert_int_equal(v.type, TG_DT_F32);
    assert_int_equal(v.rows, 3);
    assert_int_equal(v.cols, 64);
    assert_memory_equal(v.data, w, sizeof w);
    assert_true(tg_gguf_tensor_view(g, "v.f16", 1, 5, &v, &err));
    assert_int_equal(v.type, TG_DT_F16);
    assert_memory_equal(v.data, h, sizeof h);
    assert_true(tg_gguf_tensor_view(g, "w.q8", 2, 32, &v, &err));
    assert_int_equal(v.type, TG_DT_Q8_0);
    assert_memory_equal(v.data, q8, sizeof q8);
    assert_true(tg_gguf_tensor_view(g, "w.q4", -1, -1, &v, &err));
    assert_int_equal(v.type, TG_DT_Q4_0);
    assert_int_equal(v.rows, 1);
    assert_memory_equal(v.data, q4, sizeof q4);
    assert_true(tg_gguf_tensor_view(g, "w.bf16", 2, 2, &v, &err));
    assert_int_equal(v.type, TG_DT_BF16);
    for (uint64_t i = 0; i < tg_gguf_n_tensors(g); i++)
        assert_int_equal((tg_gguf_tensor_at(g, i)->data - (const uint8_t *)tg_gguf_tensor_at(g, 0)->data) % 32, 0);

    assert_false(tg_gguf_tensor_view(g, "w.f32", 64, 3, &v, &err));
    check_message(fx, &err, "w.f32", "shape [3, 64]", "expected [64, 3]", (const char *)NULL);
    assert_false(tg_gguf_tensor_view(g, "w.f32", -1, 65, &v, &err));
    check_message(fx, &err, "expected [any, 65]", (const char *)NULL);
    assert_true(tg_gguf_tensor_view(g, "w.q4k", 1, 256, &v, &err)); /* the K-quants are table rows */
    assert_int_equal(v.type, TG_DT_Q4_K);
    assert_memory_equal(v.data, k4, sizeof k4);
    assert_false(tg_gguf_tensor_view(g, "w.iq2", 1, 256, &v, &err));
    check_message(fx, &err, "w.iq2", "IQ2_XXS", "not supported", (const char *)NULL);
    assert_false(tg_gguf_tensor_view(g, "w.3d", -1, -1, &v, &err));
    check_message(fx, &err, "w.3d", "[4, 2, 2, 1]", (const char *)NULL);
    assert_false(tg_gguf_tensor_view(g, "nope", 1, 1, &v, &err));
    check_message(fx, &err, "'nope' not found", (const char *)NULL);
    tg_gguf_close(g);
}

static void test_alignment(void **state) {
    fixture *fx = *state;
    float x[3] = {1, 2, 3};
    gguf_builder *b = gguf_builder_new();
    gguf_builder_set_alignment(b, 256);
    gguf_builder_add_tensor(b, "a", GGUF_BUILDER_F32, 1, (int64_t[]){3}, x);
    gguf_builder_add_tensor(b, "b", GGUF_BUILDER_F32, 1, (int64_t[]){3}, x);
    tg_error err = {0};
    tg_gguf *g = open_built(fx, b, &err);
    if (!g) fail_msg("%s", err.msg);
    gguf_builder_free(b);
    assert_int_equal(tg_gguf_alignment(g), 256);
    assert_int_equal(tg_gguf_data_offset(g) % 256, 0);
    const uint8_t *d0 = tg_gguf_tensor_at(g, 0)->data, *d1 = tg_gguf_tensor_at(g, 1)->data;
    assert_int_equal(d1 - d0, 256);
    assert_memory_equal(d1, x, sizeof x);
    tg_gguf_close(g);

    /* alignment 1 is legal GGUF, but an F32 tensor at an odd address cannot be viewed */
    b = gguf_builder_new();
    gguf_builder_set_alignment(b, 1);
    gguf_builder_add_u8(b, "pad", 0);
    gguf_builder_add_tensor(b, "a", GGUF_BUILDER_F32, 1, (int64_t[]){3}, x);
    g = open_built(fx, b, &err);
    if (!g) fail_msg("%s", err.msg);
    gguf_builder_free(b);
    tg_tensor v;
    if ((uintptr_t)tg_gguf_tensor_at(g, 0)->data % 4 != 0) {
        assert_false(tg_gguf_tensor_view(g, "a", 1, 3, &v, &err));
        check_message(fx, &err, "not aligned", (const char *)NULL);
    } else {
        assert_true(tg_gguf_tensor_view(g, "a", 1, 3, &v, &err));
    }
    tg_gguf_close(g);

    b = gguf_builder_new();
    gguf_builder_set_alignment(b, 24);
    EXPECT_FAIL(fx, b, "general.alignment = 24", "power of two");
    b = gguf_builder_new();
    gguf_builder_set_alignment(b, 0);
    EXPECT_FAIL(fx, b, "general.alignment = 0", "power of two");
    b = gguf_builder_new();
    gguf_builder_add_str(b, "general.alignment", "32");
    EXPECT_FAIL(fx, b, "general.alignment", "string");
}

static void test_vocab_only_and_v2(void **state) {
    fixture *fx = *state;
    gguf_builder *b = gguf_builder_new();
    gguf_builder_set_version(b, 2);
    gguf_builder_add_u32(b, "x", 1);
    tg_error err = {0};
    tg_gguf *g = open_built(fx, b, &err);
    if (!g) fail_msg("%s", err.msg);
    assert_int_equal(tg_gguf_version(g), 2);
    assert_int_equal(tg_gguf_n_tensors(g), 0);
    tg_gguf_close(g);
    gguf_builder_free(b);

    b = gguf_builder_new(); /* no metadata, no tensors: the 24-byte header alone */
    g = open_built(fx, b, &err);
    if (!g) fail_msg("%s", err.msg);
    assert_int_equal(tg_gguf_n_kv(g), 0);
    tg_gguf_close(g);
    gguf_builder_free(b);
}

/* ---- malformed files ----------------------------------------------------------------------------------------- */

static void test_bad_magic_and_version(void **state) {
    fixture *fx = *state;
    gguf_builder *b = gguf_builder_new();
    gguf_builder_add_u32(b, "x", 1);
    size_t n;
    uint8_t *p = gguf_builder_bytes(b, &n);
    gguf_builder_free(b);
    tg_error err = {0};
    p[0] = 'X';
    assert_null(open_bytes(fx, p, n, &err));
    check_message(fx, &err, "not a GGUF file", "bad magic", (const char *)NULL);
    free(p);

    assert_null(open_bytes(fx, (const uint8_t *)"", 0, &err));
    check_message(fx, &err, "bad magic", (const char *)NULL);

    b = gguf_builder_new();
    gguf_builder_set_version(b, 1);
    EXPECT_FAIL(fx, b, "unsupported GGUF version 1");
    b = gguf_builder_new();
    gguf_builder_set_version(b, 4);
    EXPECT_FAIL(fx, b, "unsupported GGUF version 4");
    b = gguf_builder_new();
    gguf_builder_set_version(b, 0x03000000u);
    EXPECT_FAIL(fx, b, "big-endian");

    char *missing = gguf_builder_path(fx->dir, "missing.gguf");
    assert_null(tg_gguf_open(missing, &err));
    assert_non_null(strstr(err.msg, "missing.gguf"));
    free(missing);
}

/* A small file with metadata of several kinds and two tensors. */
static gguf_builder *small_file(void) {
    gguf_builder *b = gguf_builder_new();
    gguf_builder_add_str(b, "general.architecture", "llama");
    gguf_builder_add_u32(b, "llama.block_count", 2);
    gguf_builder_add_f32(b, "eps", 1e-5f);
    const char *strs[] = {"a", "bc", "def"};
    gguf_builder_add_arr_str(b, "tokens", 3, strs);
    const int32_t ids[] = {1, 2};
    gguf_builder_add_arr_i32(b, "ids", 2, ids);
    float w[2][32];
    for (int i = 0; i < 64; i++) w[i / 32][i % 32] = (float)i;
    gguf_builder_add_tensor(b, "w", GGUF_BUILDER_F32, 2, (int64_t[]){32, 2}, w);
    gguf_builder_add_tensor(b, "norm", GGUF_BUILDER_F32, 1, (int64_t[]){8}, NULL);
    return b;
}

/* Every prefix of a valid file fails cleanly (or, for a prefix that is itself a whole valid file, opens). */
static void test_every_prefix(void **state) {
    fixture *fx = *state;
    gguf_builder *b = small_file();
    size_t n;
    uint8_t *p = gguf_builder_bytes(b, &n);
    gguf_builder_free(b);
    tg_error err = {0};
    tg_gguf *g = open_bytes(fx, p, n, &err);
    if (!g) fail_msg("%s", err.msg);
    tg_gguf_close(g);
    size_t failures = 0;
    for (size_t len = 0; len < n; len++) {
        err.msg[0] = '\0';
        g = open_bytes(fx, p, len, &err);
        if (g) {
            /* only acceptable if every tensor still lies inside the prefix */
            for (uint64_t i = 0; i < tg_gguf_n_tensors(g); i++) {
                const tg_gguf_tensor *t = tg_gguf_tensor_at(g, i);
                assert_true((size_t)(t->data - (const uint8_t *)tg_gguf_tensor_at(g, 0)->data) + t->nbytes +
                                tg_gguf_data_offset(g) <= len);
            }
            tg_gguf_close(g);
            continue;
        }
        failures++;
        assert_true(strlen(err.msg) > 0);
        assert_null(strchr(err.msg, '\n'));
        if (len >= 24 && !strstr(err.msg, "truncated"))
            fail_msg("prefix of %zu bytes: message without \"truncated\": %s", len, err.msg);
    }
    assert_true(failures >= n - 64); /* at most the trailing padding of the last tensor may be cut */
    free(p);
}

/* Overwriting single bytes of a valid file never crashes the reader (under ASan/UBSan). */
static void test_byte_mutations(void **state) {
    fixture *fx = *state;
    gguf_builder *b = small_file();
    size_t n;
    uint8_t *p = gguf_builder_bytes(b, &n);
    gguf_builder_free(b);
    const uint8_t values[] = {0x00, 0xff, 0x80, 0x07};
    size_t opened = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t orig = p[i];
        for (size_t k = 0; k < sizeof values; k++) {
            if (values[k] == orig) continue;
            p[i] = values[k];
            tg_error err = {0};
            tg_gguf *g = open_bytes(fx, p, n, &err);
            if (g) {
                opened++;
                tg_gguf_close(g);
            } else {
                failed++;
                assert_true(strlen(err.msg) > 0);
            }
        }
        p[i] = orig;
    }
    assert_true(failed > 0);
    assert_true(opened > 0); /* e.g. changed tensor data or string contents */
    free(p);
}

static void test_huge_counts(void **state) {
    fixture *fx = *state;
    gguf_builder *b = gguf_builder_new();
    uint8_t s[16] = {0};
    uint64_t big = 0x7fffffffffffff00ull;
    memcpy(s, &big, 8); /* string length, then 8 bytes of text */
    gguf_builder_add_raw(b, "name", GGUF_BUILDER_T_STRING, s, sizeof s);
    EXPECT_FAIL(fx, b, "'name'", "string length 9223372036854775552");

    b = gguf_builder_new();
    uint8_t arr[12 + 8] = {6, 0, 0, 0}; /* f32 array, count, then 8 bytes */
    memcpy(arr + 4, &big, 8);
    gguf_builder_add_raw(b, "scores", GGUF_BUILDER_T_ARRAY, arr, sizeof arr);
    EXPECT_FAIL(fx, b, "'scores'", "array count 9223372036854775552");

    b = gguf_builder_new();
    uint8_t sarr[12] = {8, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}; /* string array, count 2^64-1 */
    gguf_builder_add_raw(b, "tokens", GGUF_BUILDER_T_ARRAY, sarr, sizeof sarr);
    EXPECT_FAIL(fx, b, "'tokens'", "array count 18446744073709551615");

    b = gguf_builder_new(); /* a key whose length field is huge */
    gguf_builder_add_u32(b, "x", 1);
    size_t n;
    uint8_t *p = gguf_builder_bytes(b, &n);
    gguf_builder_free(b);
    memset(p + 24, 0xee, 8);
    tg_error err = {0};
    assert_null(open_bytes(fx, p, n, &err));
    check_message(fx, &err, "key of metadata entry 0", "string length", (const char *)NULL);
    memcpy(p + 24, "\x01\0\0\0\0\0\0\0", 8);
    memset(p + 16, 0xff, 8); /* n_kv = 2^64 - 1 */
    assert_null(open_bytes(fx, p, n, &err));
    check_message(fx, &err, "18446744073709551615 metadata entries", (const char *)NULL);
    memset(p + 16, 0, 8);
    memset(p + 8, 0xff, 8); /* n_tensors = 2^64 - 1 */
    assert_null(open_bytes(fx, p, n, &err));
    check_message(fx, &err, "18446744073709551615 tensor infos", (const char *)NULL);
    memcpy(p + 8, "\x01\0\0\0\0\0\0\0", 8); /* one tensor info promised, none present */
    assert_null(open_bytes(fx, p, n, &err));
    check_message(fx, &err, "tensor infos", (const char *)NULL);
    free(p);
}

static void test_bad_values(void **state) {
    fixture *fx = *state;
    gguf_builder *b = gguf_builder_new();
    gguf_builder_add_raw(b, "flag", GGUF_BUILDER_T_BOOL, "\x02", 1);
    EXPECT_FAIL(fx, b, "'flag'", "invalid bool value 2");

    b = gguf_builder_new();
    gguf_builder_add_raw(b, "odd", 13, "\0\0\0\0", 4);
    EXPECT_FAIL(fx, b, "'odd'", "unknown value type 13");

    b = gguf_builder_new();
    gguf_builder_add_raw(b, "odd", GGUF_BUILDER_T_ARRAY, "\x20\0\0\0\0\0\0\0\0\0\0\0", 12);
    EXPECT_FAIL(fx, b, "'odd'", "unknown value type 32");

    /* arrays nested 9 deep, the innermost empty */
    uint8_t deep[9 * 12];
    for (int i = 0; i < 9; i++) {
        uint8_t *r = deep + i * 12;
        memset(r, 0, 12);
        r[0] = i < 8 ? GGUF_BUILDER_T_ARRAY : GGUF_BUILDER_T_U8;
        r[4] = i < 8 ? 1 : 0;
    }
    b = gguf_builder_new();
    gguf_builder_add_raw(b, "deep", GGUF_BUILDER_T_ARRAY, deep, sizeof deep);
    EXPECT_FAIL(fx, b, "'deep'", "nested more than 8 deep");
    b = gguf_builder_new(); /* 8 deep is fine */
    gguf_builder_add_raw(b, "deep", GGUF_BUILDER_T_ARRAY, deep + 12, sizeof deep - 12);
    tg_error err = {0};
    tg_gguf *g = open_built(fx, b, &err);
    if (!g) fail_msg("%s", err.msg);
    tg_gguf_close(g);
    gguf_builder_free(b);

    b = gguf_builder_new();
    gguf_builder_add_u32(b, "llama.block_count", 2);
    gguf_builder_add_u32(b, "llama.block_count", 3);
    EXPECT_FAIL(fx, b, "duplicate metadata key 'llama.block_count'");
}

static void test_bad_tensors(void **state) {
    fixture *fx = *state;
    gguf_builder *b = gguf_builder_new();
    gguf_builder_add_tensor_raw(b, "t5", GGUF_BUILDER_F32, 5, (uint64_t[]){1, 1, 1, 1, 1}, NULL, 4);
    EXPECT_FAIL(fx, b, "'t5'", "n_dims 5");

    b = gguf_builder_new();
    gguf_builder_add_tensor_raw(b, "t0", GGUF_BUILDER_F32, 0, NULL, NULL, 4);
    EXPECT_FAIL(fx, b, "'t0'", "n_dims 0");

    b = gguf_builder_new();
    gguf_builder_add_tensor_raw(b, "big", GGUF_BUILDER_F32, 3, (uint64_t[]){1ull << 32, 1ull << 32, 4}, NULL, 0);
    EXPECT_FAIL(fx, b, "'big'", "element count overflows");

    b = gguf_builder_new();
    gguf_builder_add_tensor_raw(b, "neg", GGUF_BUILDER_F32, 1, (uint64_t[]){0x8000000000000000ull}, NULL, 0);
    EXPECT_FAIL(fx, b, "'neg'", "out of range");

    b = gguf_builder_new(); /* 2^60 elements: the byte size fits size_t, the file does not hold it */
    gguf_builder_add_tensor_raw(b, "bytes", GGUF_BUILDER_F32, 2, (uint64_t[]){1ull << 30, 1ull << 30}, NULL, 0);
    EXPECT_FAIL(fx, b, "'bytes'", "extends past the end of the file");
    b = gguf_builder_new(); /* 2^62 elements fit int64, 2^64 bytes do not fit size_t */
    gguf_builder_add_tensor_raw(b, "bytes2", GGUF_BUILDER_F32, 1, (uint64_t[]){1ull << 62}, NULL, 0);
    EXPECT_FAIL(fx, b, "'bytes2'", "byte size overflows");

    b = gguf_builder_new();
    int i = gguf_builder_add_tensor(b, "far", GGUF_BUILDER_F32, 1, (int64_t[]){8}, NULL);
    gguf_builder_set_tensor_offset(b, i, 4096);
    EXPECT_FAIL(fx, b, "truncated", "tensor 'far' data [offset", "32 bytes) extends past the end of the file");

    b = gguf_builder_new();
    i = gguf_builder_add_tensor(b, "huge_off", GGUF_BUILDER_F32, 1, (int64_t[]){8}, NULL);
    gguf_builder_set_tensor_offset(b, i, 0xffffffffffffffe0ull);
    EXPECT_FAIL(fx, b, "'huge_off'", "extends past the end of the file");

    b = gguf_builder_new();
    gguf_builder_add_tensor(b, "a", GGUF_BUILDER_F32, 1, (int64_t[]){8}, NULL);
    i = gguf_builder_add_tensor(b, "mis", GGUF_BUILDER_F32, 1, (int64_t[]){8}, NULL);
    gguf_builder_set_tensor_offset(b, i, 36);
    EXPECT_FAIL(fx, b, "'mis'", "offset 36 is not a multiple of the alignment 32");

    b = gguf_builder_new();
    gguf_builder_add_tensor_raw(b, "odd_type", 99, 1, (uint64_t[]){4}, NULL, 16);
    EXPECT_FAIL(fx, b, "'odd_type'", "unknown ggml type 99");
    b = gguf_builder_new();
    gguf_builder_add_tensor_raw(b, "removed_type", 4, 1, (uint64_t[]){32}, NULL, 32);
    EXPECT_FAIL(fx, b, "'removed_type'", "unknown ggml type 4");

    b = gguf_builder_new();
    gguf_builder_add_tensor_raw(b, "q", GGUF_BUILDER_Q8_0, 1, (uint64_t[]){48}, NULL, 64);
    EXPECT_FAIL(fx, b, "'q'", "ne0 = 48", "Q8_0 block size 32");

    b = gguf_builder_new();
    gguf_builder_add_tensor(b, "blk.0.attn_q.weight", GGUF_BUILDER_F32, 1, (int64_t[]){8}, NULL);
    gguf_builder_add_tensor(b, "x", GGUF_BUILDER_F32, 1, (int64_t[]){8}, NULL);
    gguf_builder_add_tensor(b, "blk.0.attn_q.weight", GGUF_BUILDER_F32, 1, (int64_t[]){8}, NULL);
    EXPECT_FAIL(fx, b, "duplicate tensor name 'blk.0.attn_q.weight'");

    b = gguf_builder_new(); /* tensor name length past the end */
    gguf_builder_add_tensor(b, "w", GGUF_BUILDER_F32, 1, (int64_t[]){8}, NULL);
    size_t n;
    uint8_t *p = gguf_builder_bytes(b, &n);
    gguf_builder_free(b);
    memset(p + 24, 0x7f, 8);
    tg_error err = {0};
    assert_null(open_bytes(fx, p, n, &err));
    check_message(fx, &err, "name of tensor info 0", "string length", (const char *)NULL);
    free(p);
}

/* ---- real files ---------------------------------------------------------------------------------------------- */

static void check_vocab_file(const char *file, const char *model, uint64_t n_tokens) {
    const char *dir = getenv("TG_SHARED_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/testdata/vocab/%s", dir && *dir ? dir : "../shared", file);
    FILE *f = fopen(path, "rb");
    if (!f) {
        print_message("skipping: %s not found (set TG_SHARED_DIR)\n", path);
        skip();
    }
    fclose(f);
    tg_error err = {0};
    tg_gguf *g = tg_gguf_open(path, &err);
    if (!g) fail_msg("%s", err.msg);
    assert_int_equal(tg_gguf_n_tensors(g), 0);
    tg_gguf_str s;
    assert_true(tg_gguf_get_str(g, "tokenizer.ggml.model", &s));
    assert_true(str_eq(s, model));
    tg_gguf_array tokens, types;
    assert_true(tg_gguf_get_array(g, "tokenizer.ggml.tokens", &tokens));
    assert_int_equal(tokens.elem_type, TG_GGUF_STRING);
    assert_int_equal(tokens.count, n_tokens);
    assert_true(tg_gguf_get_array(g, "tokenizer.ggml.token_type", &types));
    assert_int_equal(types.count, n_tokens);
    int64_t bos;
    assert_true(tg_gguf_get_i64(g, "tokenizer.ggml.bos_token_id", &bos));
    assert_true(bos >= 0 && (uint64_t)bos < n_tokens);
    uint64_t total = 0;
    for (uint64_t i = 0; i < tokens.count; i++) {
        tg_gguf_str t = tg_gguf_array_str(&tokens, i);
        assert_true(t.len > 0 && t.len <= 256); /* the longest gpt-2 token is 256 bytes */
        total += t.len;
    }
    assert_true(total > n_tokens);
    tg_gguf_close(g);
}

static void test_vocab_llama_spm(void **state) {
    (void)state;
    check_vocab_file("ggml-vocab-llama-spm.gguf", "llama", 32000);
}

static void test_vocab_gpt2(void **state) {
    (void)state;
    check_vocab_file("ggml-vocab-gpt-2.gguf", "gpt2", 50257);
}

static void test_type_table(void **state) {
    (void)state;
    size_t be, bb;
    assert_string_equal(tg_gguf_type_name(0), "F32");
    assert_string_equal(tg_gguf_type_name(30), "BF16");
    assert_string_equal(tg_gguf_type_name(14), "Q6_K");
    assert_string_equal(tg_gguf_type_name(4), "unknown");
    assert_string_equal(tg_gguf_type_name(1000), "unknown");
    assert_true(tg_gguf_type_layout(8, &be, &bb) && be == 32 && bb == 34);
    assert_true(tg_gguf_type_layout(2, &be, &bb) && be == 32 && bb == 18);
    assert_true(tg_gguf_type_layout(12, &be, &bb) && be == 256 && bb == 144);
    assert_false(tg_gguf_type_layout(31, &be, &bb));
    assert_string_equal(tg_gguf_value_type_name(TG_GGUF_STRING), "string");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_metadata_type), cmocka_unit_test(test_large_string_array),
        cmocka_unit_test(test_tensor_views),        cmocka_unit_test(test_alignment),
        cmocka_unit_test(test_vocab_only_and_v2),   cmocka_unit_test(test_bad_magic_and_version),
        cmocka_unit_test(test_every_prefix),        cmocka_unit_test(test_byte_mutations),
        cmocka_unit_test(test_huge_counts),         cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_bad_tensors),         cmocka_unit_test(test_vocab_llama_spm),
        cmocka_unit_test(test_vocab_gpt2),          cmocka_unit_test(test_type_table),
    };
    return cmocka_run_group_tests_name("gguf", tests, setup, teardown);
}
