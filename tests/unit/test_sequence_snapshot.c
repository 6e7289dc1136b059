/* test_sequence_snapshot.c — a batch's sequence saved and restored (issue 53, the server's parking): a sequence
 * advanced through a tg_batch in chunks, saved with its tokens, restored into a new sequence, continued: its logits
 * are the same bits as the original's continued and as a session's fed the whole history, for int4 / int8 / fp16
 * caches unbounded and StreamingLLM (the history overflowing the window); a session's snapshot restores into a
 * sequence and a sequence's into a session (one format); tg_snapshot_tokens gives the tokens and refuses a cut or
 * damaged buffer; wrong token counts and another policy are refused with the sequence unchanged. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tinygpt.h"
#include "test_model_util.h"

static const char SMOL[] = "tests/data/fixtures/smollm2";

static tg_sequence *new_seq(const tg_model *m, const tg_cache_params *p) {
    tg_error err = {0};
    tg_sequence *q = tg_sequence_new(m, p, &err);
    if (!q) fail_msg("%s", err.msg);
    return q;
}

/* Feeds ids[n] to q in chunks of `chunk` (logits of the last token into last). */
static void feed(tg_batch *b, tg_sequence *q, const int32_t *ids, size_t n, int chunk, float *last) {
    tg_error err = {0};
    for (size_t at = 0; at < n;) {
        int c = (int)(n - at < (size_t)chunk ? n - at : (size_t)chunk);
        if (c > tg_sequence_max_chunk(q)) c = tg_sequence_max_chunk(q);
        tg_batch_item it = {q, ids + at, c, at + (size_t)c == n ? last : NULL, false};
        if (!tg_batch_eval(b, &it, 1, &err)) fail_msg("%s", err.msg);
        at += (size_t)c;
    }
}

/* x[nx] into a sequence (chunks of 5), saved, restored into a new one; y[ny] then fed to both (chunks of 3) and the
 * whole x ++ y to a session: the last logits equal bit for bit; the tokens come back. */
static void round_trip(const tg_model *m, const tg_cache_params *p, size_t nx, size_t ny, const char *what) {
    const int32_t V = tg_vocab_size(m);
    int32_t *xy = malloc((nx + ny) * sizeof *xy);
    float *a = malloc((size_t)V * sizeof *a), *b = malloc((size_t)V * sizeof *b), *c = malloc((size_t)V * sizeof *c);
    assert_true(xy && a && b && c);
    some_ids(xy, nx + ny, V, (uint32_t)(nx * 7 + ny));
    tg_error err = {0};
    tg_batch *batch = tg_batch_new(m, p, 16, 1, &err);
    if (!batch) fail_msg("%s: %s", what, err.msg);
    tg_sequence *q = new_seq(m, p), *r = new_seq(m, p);
    feed(batch, q, xy, nx, 5, NULL);
    void *buf = NULL;
    size_t len = 0;
    if (!tg_sequence_save(q, xy, nx, NULL, &buf, &len, &err)) fail_msg("%s: %s", what, err.msg);
    int32_t *ids = NULL;
    size_t n = 0;
    if (!tg_sequence_restore(r, buf, len, NULL, &ids, &n, &err)) fail_msg("%s: %s", what, err.msg);
    assert_int_equal(n, nx);
    assert_memory_equal(ids, xy, nx * sizeof *xy);
    assert_int_equal(tg_sequence_position(r), (int64_t)nx);
    free(ids);
    int32_t *peek = NULL;
    assert_true(tg_snapshot_tokens(buf, len, &peek, &n, &err));
    assert_int_equal(n, nx);
    assert_memory_equal(peek, xy, nx * sizeof *xy);
    free(peek);
    feed(batch, q, xy + nx, ny, 3, a);
    feed(batch, r, xy + nx, ny, 3, b);
    tg_session *s = tg_session_new(m, p, 1, &err);
    if (!s) fail_msg("%s: %s", what, err.msg);
    assert_true(tg_session_eval(s, xy, nx + ny, NULL, c, &err));
    if (memcmp(a, b, (size_t)V * sizeof *a) != 0) fail_msg("%s: restored logits differ", what);
    if (memcmp(a, c, (size_t)V * sizeof *a) != 0) fail_msg("%s: differs from a session fed the whole history", what);
    tg_session_free(s);
    free(buf);
    tg_sequence_free(q);
    tg_sequence_free(r);
    tg_batch_free(batch);
    free(xy);
    free(a);
    free(b);
    free(c);
}

static void test_round_trips(void **state) {
    (void)state;
    tg_model *m = load_model(SMOL);
    const tg_kv_precision precs[] = {TG_KV_FP16, TG_KV_INT8, TG_KV_INT4};
    for (size_t k = 0; k < sizeof precs / sizeof precs[0]; k++) {
        for (int bounded = 0; bounded < 2; bounded++) {
            tg_cache_params p = tg_cache_default_params();
            p.key_precision = p.value_precision = precs[k];
            if (bounded) p.window = 24; /* sinks 4 + 24: most of the history evicted */
            char what[64];
            snprintf(what, sizeof what, "%s %s", tg_kv_precision_name(precs[k]), bounded ? "window 24" : "unbounded");
            round_trip(m, &p, 70, 9, what);
        }
    }
    tg_model_free(m);
}

/* One format: a session's snapshot restores into a sequence and the other way round. */
static void test_session_and_sequence(void **state) {
    (void)state;
    tg_model *m = load_model(SMOL);
    const int32_t V = tg_vocab_size(m);
    tg_cache_params p = tg_cache_default_params();
    p.key_precision = p.value_precision = TG_KV_INT4;
    p.window = 16;
    int32_t ids[50];
    some_ids(ids, 50, V, 5);
    tg_error err = {0};
    tg_session *s = tg_session_new(m, &p, 1, &err), *s2 = tg_session_new(m, &p, 1, &err);
    assert_non_null(s);
    assert_non_null(s2);
    assert_true(tg_session_eval(s, ids, 40, NULL, NULL, &err));
    void *buf = NULL, *buf2 = NULL;
    size_t len = 0, len2 = 0, n = 0;
    assert_true(tg_session_save(s, NULL, &buf, &len, &err));
    tg_sequence *q = new_seq(m, &p);
    int32_t *got = NULL;
    assert_true(tg_sequence_restore(q, buf, len, NULL, &got, &n, &err));
    assert_int_equal(n, 40);
    assert_true(tg_sequence_save(q, got, n, NULL, &buf2, &len2, &err));
    assert_int_equal(len2, len);
    assert_memory_equal(buf2, buf, len); /* the same bytes */
    assert_true(tg_session_restore(s2, buf2, len2, NULL, &err));
    assert_int_equal(tg_session_position(s2), 40);
    /* a wrong token count is refused */
    void *bad = NULL;
    size_t bad_len = 0;
    assert_false(tg_sequence_save(q, got, 39, NULL, &bad, &bad_len, &err));
    assert_null(bad);
    /* another policy: refused, the sequence unchanged */
    tg_cache_params other = p;
    other.window = 32;
    tg_sequence *o = new_seq(m, &other);
    assert_false(tg_sequence_restore(o, buf, len, NULL, NULL, NULL, &err));
    assert_int_equal(err.code, TG_ERR_SNAPSHOT_POLICY);
    assert_int_equal(tg_sequence_position(o), 0);
    /* cut or damaged: tg_snapshot_tokens refuses */
    int32_t *peek = NULL;
    assert_false(tg_snapshot_tokens(buf, len - 1, &peek, &n, &err));
    assert_int_equal(err.code, TG_ERR_SNAPSHOT_CORRUPT);
    ((uint8_t *)buf)[len / 2] ^= 0x10;
    assert_false(tg_snapshot_tokens(buf, len, &peek, &n, &err));
    assert_false(tg_sequence_restore(q, buf, len, NULL, NULL, NULL, &err));
    assert_int_equal(err.code, TG_ERR_SNAPSHOT_CORRUPT);
    assert_int_equal(tg_sequence_position(q), 40); /* refused before anything changed */
    assert_null(peek);
    free(got);
    free(buf);
    free(buf2);
    tg_sequence_free(q);
    tg_sequence_free(o);
    tg_session_free(s);
    tg_session_free(s2);
    tg_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_session_and_sequence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
