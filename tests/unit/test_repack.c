/* test_repack.c — Q8_0 / Q4_0 weights in the repacked layout (kernels/repack.h) against the same weights in the
 * file's layout: every block reads back as the file held it, rows decode to the same floats, and the products
 * (decode, prefill of 2..19 tokens, any split of the rows at group boundaries, the threaded tg_matmul) have the
 * same bits — the layout changes where bytes are, never what is computed; so do a whole model's logits, prefilled
 * in one chunk on one thread and decoded token by token on two (the forward pass's units of whole groups). Rows
 * split off a group boundary, and an activation not prepared for the kernels, take the exact reference
 * (tg_matvec_ref's values). On a build without the repacked kernels (no AVX-512 VNNI) the layout is still checked;
 * the products are skipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "forward/forward.h"
#include "kernels/matmul.h"
#include "kernels/repack.h"
#include "kernels/types.h"
#include "random_model.h"
#include "util/half.h"
#include "util/thread_pool.h"

static uint64_t next_u64(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 11;
}

/* rows x cols of random blocks of `type` (every code byte, fp16 scales of either sign up to 0.05) */
static uint8_t *random_matrix(uint64_t *s, tg_dtype type, int64_t rows, int64_t cols) {
    const size_t rb = tg_row_bytes(type, cols), bw = tg_weight_type_of(type)->block_bytes;
    uint8_t *w = malloc(rb * (size_t)rows);
    assert_non_null(w);
    for (size_t i = 0; i < rb * (size_t)rows; i++) w[i] = (uint8_t)next_u64(s);
    for (size_t b = 0; b < rb * (size_t)rows / bw; b++) {
        const uint16_t d = tg_f32_to_f16((float)((double)(next_u64(s) % 2001) / 1000.0 - 1.0) * 0.05f);
        memcpy(w + b * bw, &d, 2);
    }
    return w;
}

static float *random_floats(uint64_t *s, int64_t n) {
    float *x = malloc((size_t)n * sizeof *x);
    assert_non_null(x);
    for (int64_t i = 0; i < n; i++) x[i] = (float)((double)(next_u64(s) % 2001) / 1000.0 - 1.0);
    return x;
}

static const tg_dtype types[] = {TG_DT_Q8_0, TG_DT_Q4_0};
static const int64_t shapes[][2] = {{16, 64}, {45, 160}, {64, 96}, {7, 64}}; /* groups and a tail; no group */

/* The layout: each block back as the file held it, each row decoding to the file's floats. */
static void test_blocks_and_rows_read_back(void **state) {
    (void)state;
    uint64_t s = 1;
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++)
        for (size_t h = 0; h < sizeof shapes / sizeof shapes[0]; h++) {
            const int64_t rows = shapes[h][0], cols = shapes[h][1];
            const size_t rb = tg_row_bytes(types[k], cols), bw = tg_weight_type_of(types[k])->block_bytes;
            uint8_t *w = random_matrix(&s, types[k], rows, cols), *p = malloc(rb * (size_t)rows);
            float *a = malloc((size_t)cols * sizeof *a), *b = malloc((size_t)cols * sizeof *b);
            assert_true(p && a && b);
            tg_repack_rows(types[k], w, p, rows, cols);
            const tg_tensor plain = {types[k], rows, cols, w, 0}, packed = {types[k], rows, cols, p, TG_REPACK_ROWS};
            assert_int_equal(tg_repack_plain_from(&packed), rows / 16 * 16);
            if (rows >= 16) assert_memory_not_equal(w, p, rb * 16); /* it did move the bytes */
            assert_memory_equal(w + rows / 16 * 16 * rb, p + rows / 16 * 16 * rb, (size_t)(rows % 16) * rb);
            for (int64_t r = 0; r < rows; r++) {
                for (int64_t blk = 0; blk < cols / 32; blk++) {
                    uint8_t got[64];
                    tg_repack_block(&packed, r, blk, got);
                    assert_memory_equal(got, w + (size_t)r * rb + (size_t)blk * bw, bw);
                }
                tg_tensor_get_row(&plain, r, a);
                tg_tensor_get_row(&packed, r, b);
                assert_memory_equal(a, b, (size_t)cols * sizeof *a);
            }
            free(w);
            free(p);
            free(a);
            free(b);
        }
}

/* y (n tokens) from tg_matmul_rows over the cuts of the rows (consecutive pairs) */
static void rows_in_pieces(const tg_tensor *w, const tg_act *a, const int64_t *cuts, size_t n_cuts, float *y) {
    for (size_t c = 0; c + 1 < n_cuts; c++)
        tg_matmul_rows(w, a, cuts[c], cuts[c + 1], y + cuts[c], (size_t)w->rows);
}

/* The products: the bits of the file's layout for one token and for chunks, in pieces of whole groups and whole. */
static void test_products_have_the_files_bits(void **state) {
    (void)state;
    if (!tg_repack_available(TG_DT_Q8_0)) skip();
    uint64_t s = 2;
    const int64_t ns[] = {1, 2, 7, 8, 9, 19};
    tg_pool *team = tg_pool_new(2, NULL);
    assert_non_null(team);
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++)
        for (size_t h = 0; h < sizeof shapes / sizeof shapes[0]; h++) {
            const int64_t rows = shapes[h][0], cols = shapes[h][1];
            const size_t rb = tg_row_bytes(types[k], cols);
            uint8_t *w = random_matrix(&s, types[k], rows, cols), *p = malloc(rb * (size_t)rows);
            assert_non_null(p);
            tg_repack_rows(types[k], w, p, rows, cols);
            const tg_tensor plain = {types[k], rows, cols, w, 0}, packed = {types[k], rows, cols, p, TG_REPACK_ROWS};
            for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
                const int64_t n = ns[i];
                float *x = random_floats(&s, n * cols);
                const size_t ybytes = (size_t)(n * rows) * sizeof(float);
                float *want = malloc(ybytes), *got = malloc(ybytes);
                const size_t sb = tg_act_scratch_bytes(n, cols);
                void *scratch = malloc(sb);
                assert_true(want && got && scratch);
                const tg_act a = tg_act_prepare(types[k], x, n, cols, scratch);
                tg_matmul_rows(&plain, &a, 0, rows, want, (size_t)rows);
                tg_matmul_rows(&packed, &a, 0, rows, got, (size_t)rows);
                assert_memory_equal(want, got, ybytes);
                const int64_t cuts[] = {0, rows >= 16 ? 16 : rows, rows >= 32 ? 32 : rows, rows};
                memset(got, 0, ybytes);
                rows_in_pieces(&packed, &a, cuts, 4, got);
                assert_memory_equal(want, got, ybytes);
                memset(got, 0, ybytes);
                tg_matmul(&packed, x, n, got, team);
                tg_matmul(&plain, x, n, want, team);
                assert_memory_equal(want, got, ybytes);
                free(x);
                free(want);
                free(got);
                free(scratch);
            }
            free(w);
            free(p);
        }
    tg_pool_free(team);
}

/* Off the groups: a piece that starts inside a group, and an activation the kernels cannot take (none prepared),
 * give the exact reference of those rows. */
static void test_off_the_groups_is_the_reference(void **state) {
    (void)state;
    uint64_t s = 3;
    const int64_t rows = 45, cols = 160;
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const size_t rb = tg_row_bytes(types[k], cols);
        uint8_t *w = random_matrix(&s, types[k], rows, cols), *p = malloc(rb * (size_t)rows);
        float *x = random_floats(&s, cols), ref[45], got[45];
        assert_non_null(p);
        tg_repack_rows(types[k], w, p, rows, cols);
        const tg_tensor plain = {types[k], rows, cols, w, 0}, packed = {types[k], rows, cols, p, TG_REPACK_ROWS};
        tg_matvec_ref(&plain, x, ref);
        tg_matvec_ref(&packed, x, got);
        assert_memory_equal(ref, got, sizeof ref);
        const tg_act bare = tg_act_prepare(types[k], x, 1, cols, NULL); /* no scratch: not quantised */
        tg_matmul_rows(&packed, &bare, 0, rows, got, (size_t)rows);
        assert_memory_equal(ref, got, sizeof ref);
        if (tg_repack_available(types[k])) {
            const size_t sb = tg_act_scratch_bytes(1, cols);
            void *scratch = malloc(sb);
            assert_non_null(scratch);
            const tg_act a = tg_act_prepare(types[k], x, 1, cols, scratch);
            tg_matmul_rows(&packed, &a, 3, 16, got + 3, (size_t)rows); /* inside the first group: the reference */
            assert_memory_equal(ref + 3, got + 3, 13 * sizeof(float));
            free(scratch);
        }
        free(w);
        free(p);
        free(x);
    }
}

/* logits [n, vocab] of ids through a fresh unbounded cache: one chunk (threads 1) or token by token (threads 2) */
static float *logits_of(const tg_model *m, const int32_t *ids, int n, bool chunk) {
    tg_error err = {0};
    const tg_cache_params p = tg_cache_default_params();
    const tg_cache_shape shape = {
        .n_layers = m->hp.n_layers, .n_heads = m->hp.n_heads, .n_kv_heads = m->hp.n_kv_heads,
        .head_dim = m->hp.head_dim, .rope_theta = m->hp.rope_theta, .rope_style = m->hp.rope_style,
        .context_length = m->hp.context_length, .kv_source = NULL, .layer_window = NULL,
    };
    tg_kvcache *c = tg_kvcache_new(&shape, &p, &err);
    assert_non_null(c);
    tg_forward *f = tg_forward_new(m, c, chunk ? n : 1, chunk ? 1 : 2, &err);
    assert_non_null(f);
    const int V = m->hp.vocab_size;
    float *out = malloc((size_t)n * (size_t)V * sizeof *out), *last = malloc((size_t)V * sizeof *last);
    assert_true(out && last);
    if (chunk) tg_forward_chunk(f, c, ids, n, 0, out, last);
    for (int t = 0; !chunk && t < n; t++) tg_forward_chunk(f, c, ids + t, 1, t, NULL, out + (size_t)t * (size_t)V);
    free(last);
    tg_forward_free(f);
    tg_kvcache_free(c);
    return out;
}

/* A model's matrices repacked (Q8_0): the logits of the file's layout, bit for bit, prefilled and decoded. */
static void test_model_logits_have_the_files_bits(void **state) {
    (void)state;
    if (!tg_repack_available(TG_DT_Q8_0)) skip();
    random_model *plain = random_model_new_typed(64, TG_DT_Q8_0, 5, false);
    random_model *packed = random_model_new_typed(64, TG_DT_Q8_0, 5, false);
    random_model_repack(packed);
    const tg_model *mp = random_model_get(plain), *mr = random_model_get(packed);
    assert_int_equal(mr->layers[0].w_gate.row_group, TG_REPACK_ROWS);
    assert_int_equal(mr->lm_head.row_group, TG_REPACK_ROWS);
    const int n = 40, V = mp->hp.vocab_size;
    int32_t *ids = random_model_text(n, V, 9);
    float *want = logits_of(mp, ids, n, true), *chunked = logits_of(mr, ids, n, true);
    float *single = logits_of(mr, ids, n, false);
    assert_memory_equal(want, chunked, (size_t)n * (size_t)V * sizeof *want);
    assert_memory_equal(want, single, (size_t)n * (size_t)V * sizeof *want);
    free(ids);
    free(want);
    free(chunked);
    free(single);
    random_model_free(plain);
    random_model_free(packed);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks_and_rows_read_back),
        cmocka_unit_test(test_products_have_the_files_bits),
        cmocka_unit_test(test_off_the_groups_is_the_reference),
        cmocka_unit_test(test_model_logits_have_the_files_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
