/* test_snapshot.c — session snapshots (issue 53, docs/snapshot-format.md): a restored session's next logits equal
 * the original's bit for bit, and equal a fresh session's fed the whole history, for every KV precision x {unbounded,
 * StreamingLLM vanilla / re-positioned / quantised sinks, YOCO (tests/data/yoco-tiny) unbounded and bounded}; the
 * snapshot of a restored session is byte-identical to the original's; the sampler's state and the logits travel
 * with it; refusals (another model, another model of the same shape, another policy, another version, truncated,
 * a flipped byte) with their codes and the session unchanged; a loop of truncations and byte flips (with and without
 * the checksums repaired, so the structural checks are reached) that must never crash or read past the buffer
 * (ASan); files written atomically (no temporary left, an unwritable path refused). */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "tinygpt.h"
#include "test_model_util.h"

static const char SMOL[] = "tests/data/fixtures/smollm2";
static const char YOCO[] = "tests/data/yoco-tiny";
static const char YOCO_F32[] = "tests/data/yoco-tiny/model-f32.gguf";
static const char YOCO_F16[] = "tests/data/yoco-tiny/model-f16.gguf";

static tg_session *new_session(const tg_model *m, const tg_cache_params *p) {
    tg_error err = {0};
    tg_session *s = tg_session_new(m, p, 1, &err);
    if (!s) fail_msg("%s", err.msg);
    return s;
}

/* Saves after x[nx], restores into a fresh session, feeds y[ny] to both and to a fresh session fed x ++ y: the
 * logits of y must be the same bits in all three; the restored session's snapshot equals the original's. */
static void round_trip(const tg_model *m, const tg_cache_params *p, size_t nx, size_t ny, const char *what) {
    const int32_t V = tg_vocab_size(m);
    int32_t *xy = malloc((nx + ny) * sizeof *xy);
    float *a = malloc(ny * (size_t)V * sizeof *a), *b = malloc(ny * (size_t)V * sizeof *b),
          *c = malloc((nx + ny) * (size_t)V * sizeof *c);
    assert_true(xy && a && b && c);
    some_ids(xy, nx + ny, V, (uint32_t)(nx * 31 + ny));
    tg_error err = {0};
    tg_session *s = new_session(m, p), *r = new_session(m, p), *f = new_session(m, p);
    assert_true(tg_session_eval(s, xy, nx, NULL, NULL, &err));
    void *buf = NULL;
    size_t len = 0;
    if (!tg_session_save(s, NULL, &buf, &len, &err)) fail_msg("%s: %s", what, err.msg);
    if (!tg_session_restore(r, buf, len, NULL, &err)) fail_msg("%s: %s", what, err.msg);
    assert_int_equal(tg_session_position(r), (int64_t)nx);
    size_t n_tok = 0;
    const int32_t *tok = tg_session_tokens(r, &n_tok);
    assert_int_equal(n_tok, nx);
    assert_memory_equal(tok, xy, nx * sizeof *xy);
    void *buf2 = NULL;
    size_t len2 = 0;
    assert_true(tg_session_save(r, NULL, &buf2, &len2, &err));
    assert_int_equal(len2, len);
    if (memcmp(buf, buf2, len) != 0) fail_msg("%s: the restored session's snapshot differs", what);
    assert_true(tg_session_eval(s, xy + nx, ny, a, NULL, &err));
    assert_true(tg_session_eval(r, xy + nx, ny, b, NULL, &err));
    assert_true(tg_session_eval(f, xy, nx + ny, c, NULL, &err));
    if (memcmp(a, b, ny * (size_t)V * sizeof *a) != 0) fail_msg("%s: restored logits differ", what);
    if (memcmp(a, c + nx * (size_t)V, ny * (size_t)V * sizeof *a) != 0)
        fail_msg("%s: continued logits differ from a fresh session fed the whole history", what);
    free(buf);
    free(buf2);
    free(xy);
    free(a);
    free(b);
    free(c);
    tg_session_free(s);
    tg_session_free(r);
    tg_session_free(f);
}

static void test_round_trip_every_precision(void **state) {
    (void)state;
    tg_model *m = load_model(SMOL);
    for (int k = 0; k < tg_kv_precision_count(); k++) {
        for (int policy = 0; policy < 4; policy++) {
            tg_cache_params p = tg_cache_default_params();
            p.key_precision = p.value_precision = (tg_kv_precision)k;
            if (policy >= 1) p.window = 24; /* sinks 4 + 24: most of the history evicted */
            if (policy == 2) p.rope_positions = TG_ROPE_POSITIONS_ORIGINAL;
            if (policy == 3) p.quantize_sinks = tg_kv_precision_is_integer((tg_kv_precision)k);
            char what[64];
            snprintf(what, sizeof what, "%s policy %d", tg_kv_precision_name((tg_kv_precision)k), policy);
            round_trip(m, &p, 70, 9, what);
            round_trip(m, &p, 3, 5, what); /* inside the sinks / the first group */
        }
    }
    /* mixed precisions, a residual, an explicit group */
    tg_cache_params p = tg_cache_default_params();
    p.key_precision = TG_KV_INT4;
    p.value_precision = TG_KV_INT8;
    p.group_size = 8;
    p.residual = 16;
    round_trip(m, &p, 61, 7, "int4/int8 group 8 residual 16");
    p.window = 32;
    round_trip(m, &p, 100, 7, "int4/int8 group 8 residual 16 window 32");
    p = tg_cache_default_params();
    p.key_precision = p.value_precision = TG_KV_INT4;
    p.group_size = 0; /* whole-history scales: a store that doubles */
    round_trip(m, &p, 40, 6, "int4 group 0");
    /* rotated stores (--kv-rotate): saved as rotated codes, restored into the same rotation */
    p = tg_cache_default_params();
    p.key_precision = p.value_precision = TG_KV_INT2;
    p.rotate = TG_KV_ROTATE_ON;
    round_trip(m, &p, 50, 7, "int2 rotated");
    p.rotate = TG_KV_ROTATE_VALUES;
    p.window = 24;
    round_trip(m, &p, 70, 7, "int2 values rotated window 24");
    tg_model_free(m);
}

static void test_round_trip_yoco(void **state) {
    (void)state;
    tg_model *m = load_model(YOCO);
    for (int k = 0; k < tg_kv_precision_count(); k++) {
        for (int bounded = 0; bounded < 2; bounded++) {
            tg_cache_params p = tg_cache_default_params();
            p.key_precision = p.value_precision = (tg_kv_precision)k;
            if (bounded) p.window = 16;
            char what[64];
            snprintf(what, sizeof what, "yoco %s%s", tg_kv_precision_name((tg_kv_precision)k),
                     bounded ? " window 16" : "");
            round_trip(m, &p, 45, 6, what);
        }
    }
    tg_model_free(m);
}

/* A sampled generation goes on after a restore exactly as it would have: the PRNG and the repeat history travel. */
static void test_sampler_and_logits_travel(void **state) {
    (void)state;
    tg_model *m = load_model(SMOL);
    const int32_t V = tg_vocab_size(m);
    tg_error err = {0};
    tg_sampler_params sp = tg_sampler_default_params();
    sp.temperature = 1.0f;
    sp.repeat_penalty = 1.3f;
    sp.seed = 7;
    tg_sampler *sa = tg_sampler_new(&sp, V, &err), *sb = tg_sampler_new(&sp, V, &err);
    assert_true(sa && sb);
    int32_t x[20];
    some_ids(x, 20, V, 5);
    float *la = malloc((size_t)V * sizeof *la), *lb = malloc((size_t)V * sizeof *lb);
    tg_session *s = new_session(m, NULL), *r = new_session(m, NULL);
    assert_true(tg_session_eval(s, x, 20, NULL, la, &err));
    for (int i = 0; i < 20; i++) tg_sampler_accept(sa, x[i]);
    for (int i = 0; i < 3; i++) tg_sampler_sample(sa, la); /* move the PRNG on */
    void *buf;
    size_t len;
    const tg_snapshot_extras extras = {.sampler = sa, .logits = la, .app = "conversation", .app_len = 12};
    assert_true(tg_session_save(s, &extras, &buf, &len, &err));
    tg_snapshot_restore got = {.sampler = sb, .logits = lb, .want_app = true};
    assert_true(tg_session_restore(r, buf, len, &got, &err));
    assert_true(got.has_logits);
    assert_memory_equal(la, lb, (size_t)V * sizeof *la);
    assert_int_equal(got.app_len, 12);
    assert_memory_equal(got.app, "conversation", 12);
    free(got.app);
    for (int i = 0; i < 8; i++) {
        const int32_t ta = tg_sampler_sample(sa, la), tb = tg_sampler_sample(sb, lb);
        assert_int_equal(ta, tb);
        assert_true(tg_session_eval(s, &ta, 1, NULL, la, &err));
        assert_true(tg_session_eval(r, &tb, 1, NULL, lb, &err));
        assert_memory_equal(la, lb, (size_t)V * sizeof *la);
    }
    free(buf);
    free(la);
    free(lb);
    tg_sampler_free(sa);
    tg_sampler_free(sb);
    tg_session_free(s);
    tg_session_free(r);
    tg_model_free(m);
}

/* The header's checksum recomputed after the header was edited; the payload's after the payload was. */
static void fix_header_crc(uint8_t *p) {
    const uint32_t c = (uint32_t)crc32(crc32(0, Z_NULL, 0), p, 28);
    for (int i = 0; i < 4; i++) p[28 + i] = (uint8_t)(c >> (8 * i));
}
static void fix_crcs(uint8_t *p, size_t len) {
    const uint32_t c = (uint32_t)crc32(crc32(0, Z_NULL, 0), p + 32, (uInt)(len - 32));
    for (int i = 0; i < 4; i++) p[24 + i] = (uint8_t)(c >> (8 * i));
    fix_header_crc(p);
}

static void expect_refused(tg_session *r, const void *buf, size_t len, tg_error_code code, const char *words) {
    tg_error err = {0};
    const int64_t before = tg_session_position(r);
    assert_false(tg_session_restore(r, buf, len, NULL, &err));
    if (err.code != code) fail_msg("code %d, expected %d: %s", err.code, code, err.msg);
    if (words && !strstr(err.msg, words)) fail_msg("'%s' does not say '%s'", err.msg, words);
    assert_int_equal(tg_session_position(r), before); /* unchanged */
}

static void test_refusals(void **state) {
    (void)state;
    tg_model *m = load_model(SMOL), *y32 = load_model(YOCO_F32), *y16 = load_model(YOCO_F16);
    tg_error err = {0};
    int32_t x[30];
    some_ids(x, 30, tg_vocab_size(m), 9);
    tg_cache_params p4 = tg_cache_default_params(), p8 = p4;
    p4.key_precision = p4.value_precision = TG_KV_INT4;
    p8.key_precision = p8.value_precision = TG_KV_INT8;
    tg_session *s = new_session(m, &p4), *r = new_session(m, &p4);
    assert_true(tg_session_eval(s, x, 30, NULL, NULL, &err));
    assert_true(tg_session_eval(r, x, 7, NULL, NULL, &err)); /* holds something: a refusal must keep it */
    void *v;
    size_t len;
    assert_true(tg_session_save(s, NULL, &v, &len, &err));
    uint8_t *buf = v;

    tg_session *other_policy = new_session(m, &p8);
    expect_refused(other_policy, buf, len, TG_ERR_SNAPSHOT_POLICY, "key precision: int4 in the snapshot, int8 here");
    tg_session_free(other_policy);
    tg_cache_params pr = p4;
    pr.rotate = TG_KV_ROTATE_ON;
    tg_session *rotated = new_session(m, &pr);
    expect_refused(rotated, buf, len, TG_ERR_SNAPSHOT_POLICY, "keys rotated: no in the snapshot, yes here");
    tg_session_free(rotated);
    tg_cache_params pw = p4;
    pw.window = 64;
    tg_session *bounded = new_session(m, &pw);
    expect_refused(bounded, buf, len, TG_ERR_SNAPSHOT_POLICY, "another KV cache policy");
    tg_session_free(bounded);
    tg_session *other_model = new_session(y32, &p4);
    expect_refused(other_model, buf, len, TG_ERR_SNAPSHOT_MODEL, "another model");
    tg_session_free(other_model);
    /* the same shape, other weights: the fingerprint */
    tg_session *a32 = new_session(y32, NULL), *a16 = new_session(y16, NULL);
    void *yb;
    size_t ylen;
    int32_t yx[5] = {1, 2, 3, 4, 5};
    assert_true(tg_session_eval(a32, yx, 5, NULL, NULL, &err));
    assert_true(tg_session_save(a32, NULL, &yb, &ylen, &err));
    expect_refused(a16, yb, ylen, TG_ERR_SNAPSHOT_MODEL, "fingerprint");
    free(yb);
    tg_session_free(a32);
    tg_session_free(a16);

    uint8_t *copy = malloc(len);
    memcpy(copy, buf, len);
    copy[8] = 3; /* version 3 */
    fix_header_crc(copy);
    expect_refused(r, copy, len, TG_ERR_SNAPSHOT_VERSION, "format version 3");
    expect_refused(r, buf, len - 1, TG_ERR_SNAPSHOT_CORRUPT, "cut short");
    expect_refused(r, buf, 20, TG_ERR_SNAPSHOT_CORRUPT, "cut short");
    expect_refused(r, buf, 0, TG_ERR_SNAPSHOT_CORRUPT, "magic");
    memcpy(copy, buf, len);
    copy[len / 2] ^= 0x10;
    expect_refused(r, copy, len, TG_ERR_SNAPSHOT_CORRUPT, "checksum");
    memcpy(copy, buf, len);
    copy[0] = 'X';
    expect_refused(r, copy, len, TG_ERR_SNAPSHOT_CORRUPT, "magic");
    free(copy);
    free(buf);
    tg_session_free(s);
    tg_session_free(r);
    tg_model_free(m);
    tg_model_free(y32);
    tg_model_free(y16);
}

/* Truncations and byte flips: refused (the checksums), or, with the checksums repaired, refused or restored
 * (the structure checked, never read past); a restored session then evaluates without fault. */
static void test_damage_loop(void **state) {
    (void)state;
    tg_model *m = load_model(SMOL);
    const int32_t V = tg_vocab_size(m);
    tg_error err = {0};
    tg_cache_params p = tg_cache_default_params();
    p.key_precision = p.value_precision = TG_KV_INT4;
    p.window = 16;
    int32_t x[40];
    some_ids(x, 40, V, 11);
    tg_sampler_params sp = tg_sampler_default_params();
    tg_sampler *smp = tg_sampler_new(&sp, V, &err);
    float *logits = malloc((size_t)V * sizeof *logits);
    tg_session *s = new_session(m, &p), *r = new_session(m, &p);
    assert_true(tg_session_eval(s, x, 40, NULL, logits, &err));
    tg_sampler_accept(smp, x[39]);
    void *v;
    size_t len;
    const tg_snapshot_extras extras = {.sampler = smp, .logits = logits, .app = "x", .app_len = 1};
    assert_true(tg_session_save(s, &extras, &v, &len, &err));
    const uint8_t *buf = v;
    uint8_t *copy = malloc(len);
    for (size_t cut = 0; cut < len; cut += 1 + cut / 8) {
        assert_false(tg_session_restore(r, buf, cut, NULL, &err));
        assert_int_equal(err.code, TG_ERR_SNAPSHOT_CORRUPT);
    }
    uint32_t seed = 1;
    int restored = 0;
    for (int i = 0; i < 400; i++) {
        seed = seed * 1664525u + 1013904223u;
        /* the first 400 bytes hold every section header and the counters: flip there more often */
        const size_t at = i % 2 ? (seed >> 4) % (len < 400 ? len : 400) : (seed >> 4) % len;
        memcpy(copy, buf, len);
        copy[at] ^= (uint8_t)(1u << (seed >> 29));
        assert_false(tg_session_restore(r, copy, len, NULL, &err));
        if (at >= 32) fix_crcs(copy, len);
        tg_snapshot_restore out = {.sampler = smp, .logits = logits, .want_app = true};
        if (tg_session_restore(r, copy, len, &out, &err)) {
            free(out.app);
            restored++; /* a flip inside the stored data or the logits: still a usable session */
            const int32_t t = 1;
            tg_session_eval(r, &t, 1, NULL, logits, &err);
        } else if (err.code == TG_ERR_NONE) {
            fail_msg("a refusal without a code");
        }
    }
    assert_true(restored > 0);
    free(copy);
    free(v);
    free(logits);
    tg_sampler_free(smp);
    tg_session_free(s);
    tg_session_free(r);
    tg_model_free(m);
}

static void test_files(void **state) {
    (void)state;
    tg_model *m = load_model(SMOL);
    tg_error err = {0};
    char dir[] = "/tmp/tg-snapshot-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/a.snap", dir);
    int32_t x[12];
    some_ids(x, 12, tg_vocab_size(m), 4);
    tg_session *s = new_session(m, NULL), *r = new_session(m, NULL);
    assert_true(tg_session_eval(s, x, 12, NULL, NULL, &err));
    assert_true(tg_session_save_file(s, NULL, path, &err));
    assert_true(tg_session_eval(s, x, 3, NULL, NULL, &err));
    assert_true(tg_session_save_file(s, NULL, path, &err)); /* replaces it */
    assert_true(tg_session_restore_file(r, path, NULL, &err));
    assert_int_equal(tg_session_position(r), 15);
    /* nothing but the file is left in the directory */
    char cmd[160];
    snprintf(cmd, sizeof cmd, "test \"$(ls %s)\" = a.snap", dir);
    assert_int_equal(system(cmd), 0);
    char bad[160];
    snprintf(bad, sizeof bad, "%s/no/such/dir/a.snap", dir);
    assert_false(tg_session_save_file(s, NULL, bad, &err));
    assert_non_null(strstr(err.msg, bad));
    assert_false(tg_session_restore_file(r, bad, NULL, &err));
    assert_non_null(strstr(err.msg, bad));
    assert_int_equal(tg_session_position(r), 15);
    unlink(path);
    rmdir(dir);
    tg_session_free(s);
    tg_session_free(r);
    tg_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_every_precision),
        cmocka_unit_test(test_round_trip_yoco),
        cmocka_unit_test(test_sampler_and_logits_travel),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_damage_loop),
        cmocka_unit_test(test_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
