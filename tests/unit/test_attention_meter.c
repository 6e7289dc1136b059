/* test_attention_meter.c — the attention-sink meter against hand computations: on a cache whose keys are all zero
 * but the first token's (D = 2, so the one non-zero score is a * b * cos(angle) / sqrt(2) with the RoPE angle the
 * query-key distance), the shares of the first 1 / 4 / 16 visible tokens and of the newest 16 are closed forms, for
 * an unbounded cache over 2,600 tokens (five shares, combined), a vanilla StreamingLLM cache (the sink at its
 * distance) and a re-positioned one (the sink at its slot distance); on a tiny model whose query weights are zero
 * every head attends uniformly, so the meter's means are sums of N / visible, through the session API, unbounded and
 * streaming, and the summed / skipped query counts are exact. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gguf_builder.h"
#include "kvcache/kvcache.h"
#include "tinygpt.h"

/* ---- the cache, by hand ------------------------------------------------------------------------------------------ */

/* The shares the meter reports for the query at pos, through the piece API (every share of every kv-head). */
static void meter_shares(tg_kvcache *c, int64_t pos, const float *q, int NH, int H, int D, double *shares) {
    const int n_split = tg_kvcache_attend_splits(c, 0, pos), gq = NH / H;
    float *qr = malloc((size_t)NH * (size_t)D * sizeof(float));
    float *work = malloc(tg_kvcache_work_floats(c) * sizeof(float));
    float *part = malloc(tg_kvcache_part_floats(c) * sizeof(float));
    float *mass = malloc((size_t)n_split * (size_t)gq * TG_MASS_FLOATS * sizeof(float));
    assert_true(qr && work && part && mass);
    tg_kvcache_query(c, 0, pos, q, qr);
    for (int h = 0; h < H; h++) {
        for (int s = 0; s < n_split; s++) {
            tg_kvcache_attend_piece(c, 0, pos, qr, h, s, n_split, part, work);
            tg_kvcache_piece_mass(c, 0, pos, h, s, n_split, part, work, mass + (size_t)s * (size_t)gq * TG_MASS_FLOATS);
        }
        tg_kvcache_mass_combine(c, mass, n_split, shares + (size_t)h * (size_t)gq * TG_MASS_RANGES);
    }
    free(qr), free(work), free(part), free(mass);
}

/* Expected shares when one visible token (the first) has score s and the other n - 1 score 0. */
static void closed_form(double s, int64_t n, double want[TG_MASS_RANGES]) {
    const double e = exp(s), den = e + (double)(n - 1);
    want[0] = e / den;
    want[1] = (e + 3.0) / den;
    want[2] = (e + 15.0) / den;
    want[3] = 16.0 / den;
}

/* One layer, 2 query heads on 1 kv-head, D = 2; keys zero but token 0's (a, 0); values anything; queries (b, 0) and
 * (-b, 0). After T tokens the query at T - 1 sees the first token at RoPE distance `dist` (positions or slots; -1:
 * token 0 is not visible, every visible score is 0). */
static void check_one_sink(const tg_cache_params *p, int T, int64_t n_visible, int64_t dist, int want_splits) {
    const int NH = 2, H = 1, D = 2;
    const float a = 3.0f, b = 2.0f;
    tg_cache_shape shape = {.n_layers = 1, .n_heads = NH, .n_kv_heads = H, .head_dim = D, .rope_theta = 10000.0f,
                            .rope_style = TG_ROPE_HALF, .context_length = T + 8};
    tg_error err = {0};
    tg_kvcache *c = tg_kvcache_new(&shape, p, &err);
    if (!c) fail_msg("tg_kvcache_new: %s", err.msg);
    for (int t = 0; t < T; t++) {
        const float k[2] = {t == 0 ? a : 0.0f, 0.0f}, v[2] = {(float)t, 1.0f};
        tg_kvcache_append(c, 0, t, k, v);
    }
    assert_int_equal(tg_kvcache_attend_splits(c, 0, T - 1), want_splits);
    const float q[4] = {b, 0.0f, -b, 0.0f};
    double shares[2 * TG_MASS_RANGES];
    meter_shares(c, T - 1, q, NH, H, D, shares);
    for (int i = 0; i < NH; i++) {
        /* D = 2: one RoPE pair at frequency 1, so the score is q . R(dist) k / sqrt(2) = +-a b cos(dist) / sqrt(2) */
        const double s = dist < 0 ? 0.0 : (i == 0 ? 1.0 : -1.0) * a * b * cos((double)dist) / sqrt(2.0);
        double want[TG_MASS_RANGES];
        closed_form(s, n_visible, want);
        for (int r = 0; r < TG_MASS_RANGES; r++)
            if (fabs(shares[i * TG_MASS_RANGES + r] - want[r]) > 1e-5)
                fail_msg("head %d range %d: meter %.7f, by hand %.7f (T %d, visible %lld, distance %lld)", i, r,
                         shares[i * TG_MASS_RANGES + r], want[r], T, (long long)n_visible, (long long)dist);
    }
    tg_kvcache_free(c);
}

static void test_cache_by_hand(void **state) {
    (void)state;
    tg_cache_params p = tg_cache_default_params();
    /* unbounded, 2,600 tokens: five shares; the first token at distance 2599 */
    check_one_sink(&p, 2600, 2600, 2599, 5);
    /* also at fp16 (zeros and small integers are exact in fp16) */
    p.key_precision = p.value_precision = TG_KV_FP16;
    check_one_sink(&p, 2600, 2600, 2599, 5);
    p = tg_cache_default_params();
    /* StreamingLLM sink 4 + window 60, vanilla: 64 visible, the sink at its original distance */
    p.sink = 4;
    p.window = 60;
    check_one_sink(&p, 300, 64, 299, 1);
    /* re-positioned: the query at slot 63, the sink at slot 0 */
    p.reposition = true;
    check_one_sink(&p, 300, 64, 63, 1);
    /* window only: the first visible token is the oldest of the window (key zero): uniform over 60 */
    p = tg_cache_default_params();
    p.sink = 0;
    p.window = 60;
    check_one_sink(&p, 300, 60, -1, 1);
}

/* ---- a tiny model whose queries are zero: uniform attention ------------------------------------------------------- */

#define M_D 32
#define M_FF 64
#define M_HEADS 4
#define M_KV 2
#define M_HD 8
#define M_LAYERS 2
#define M_VOCAB 257

static void byte_symbol(int b, char out[4]) {
    int cp = b, n = 0;
    bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    if (!printable) {
        for (int i = 0; i < b; i++)
            if (!((i >= 33 && i <= 126) || (i >= 161 && i <= 172) || (i >= 174 && i <= 255))) n++;
        cp = 256 + n;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = 0;
    }
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

/* A tensor of random weights (norms near 1), or zeros. */
static void add(gguf_builder *b, const char *name, int64_t rows, int64_t cols, bool norm, bool zero) {
    float *x = malloc((size_t)(rows * cols) * sizeof *x);
    for (int64_t i = 0; i < rows * cols; i++) x[i] = zero ? 0.0f : norm ? 1.0f + 0.1f * rnd() : 0.3f * rnd();
    int64_t ne[2] = {cols, rows};
    assert_true(gguf_builder_add_tensor(b, name, GGUF_BUILDER_F32, norm ? 1 : 2, ne, x) >= 0);
    free(x);
}

static tg_model *tiny_model(bool zero_queries) {
    gguf_builder *b = gguf_builder_new();
    gguf_builder_add_str(b, "general.architecture", "llama");
    gguf_builder_add_u32(b, "llama.block_count", M_LAYERS);
    gguf_builder_add_u32(b, "llama.context_length", 256);
    gguf_builder_add_u32(b, "llama.embedding_length", M_D);
    gguf_builder_add_u32(b, "llama.feed_forward_length", M_FF);
    gguf_builder_add_u32(b, "llama.attention.head_count", M_HEADS);
    gguf_builder_add_u32(b, "llama.attention.head_count_kv", M_KV);
    gguf_builder_add_f32(b, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    char *tokens[M_VOCAB];
    int32_t types[M_VOCAB];
    for (int i = 0; i < 256; i++) {
        tokens[i] = calloc(4, 1);
        byte_symbol(i, tokens[i]);
        types[i] = 1;
    }
    tokens[256] = strdup("<|endoftext|>");
    types[256] = 3;
    gguf_builder_add_str(b, "tokenizer.ggml.model", "gpt2");
    gguf_builder_add_str(b, "tokenizer.ggml.pre", "gpt-2");
    gguf_builder_add_arr_str(b, "tokenizer.ggml.tokens", M_VOCAB, (const char *const *)tokens);
    gguf_builder_add_arr_i32(b, "tokenizer.ggml.token_type", M_VOCAB, types);
    const char *merges[1] = {"a b"};
    gguf_builder_add_arr_str(b, "tokenizer.ggml.merges", 1, merges);
    gguf_builder_add_u32(b, "tokenizer.ggml.eos_token_id", 256);
    for (int i = 0; i < M_VOCAB; i++) free(tokens[i]);
    add(b, "token_embd.weight", M_VOCAB, M_D, false, false);
    add(b, "output_norm.weight", 1, M_D, true, false);
    char name[64];
    for (int l = 0; l < M_LAYERS; l++) {
#define T(suffix, rows, cols, norm, zero)                                                                               \
    snprintf(name, sizeof name, "blk.%d." suffix ".weight", l);                                                        \
    add(b, name, rows, cols, norm, zero)
        T("attn_norm", 1, M_D, true, false);
        T("attn_q", M_HEADS * M_HD, M_D, false, zero_queries);
        T("attn_k", M_KV * M_HD, M_D, false, false);
        T("attn_v", M_KV * M_HD, M_D, false, false);
        T("attn_output", M_D, M_HEADS * M_HD, false, false);
        T("ffn_norm", 1, M_D, true, false);
        T("ffn_gate", M_FF, M_D, false, false);
        T("ffn_up", M_FF, M_D, false, false);
        T("ffn_down", M_D, M_FF, false, false);
#undef T
    }
    char *dir = gguf_builder_tmpdir();
    char *path = gguf_builder_path(dir, "m.gguf");
    assert_true(gguf_builder_write(b, path));
    gguf_builder_free(b);
    tg_error err = {0};
    tg_model *m = tg_model_load(path, &err);
    if (!m) fail_msg("tg_model_load: %s", err.msg);
    gguf_builder_rmdir(dir);
    free(path);
    free(dir);
    return m;
}

/* Runs ids[n] through a session with the meter on; fills st (copied out). */
static void metered_run(const tg_model *m, const tg_cache_params *p, const int32_t *ids, int n, int threads,
                        double *share_sum, int64_t *queries, int64_t *skipped) {
    tg_error err = {0};
    tg_session *s = tg_session_new(m, p, threads, &err);
    if (!s) fail_msg("tg_session_new: %s", err.msg);
    tg_attention_stats st;
    assert_false(tg_session_attention_stats(s, &st)); /* off until asked */
    assert_true(tg_session_meter_attention(s, &err));
    float *logits = malloc((size_t)n * M_VOCAB * sizeof(float));
    assert_non_null(logits);
    assert_true(tg_session_eval(s, ids, (size_t)n, logits, NULL, &err));
    assert_true(tg_session_attention_stats(s, &st));
    assert_int_equal(st.n_layers, M_LAYERS);
    assert_int_equal(st.n_heads, M_HEADS);
    memcpy(share_sum, st.share_sum, M_LAYERS * M_HEADS * TG_ATTN_RANGES * sizeof(double));
    memcpy(queries, st.queries, M_LAYERS * sizeof(int64_t));
    memcpy(skipped, st.skipped, M_LAYERS * sizeof(int64_t));
    free(logits);
    tg_session_free(s);
}

static void test_model_uniform(void **state) {
    (void)state;
    tg_model *m = tiny_model(true);
    enum { N = 150 };
    int32_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = (i * 37 + 11) % 256;
    double sum[M_LAYERS * M_HEADS * TG_ATTN_RANGES];
    int64_t q[M_LAYERS], sk[M_LAYERS];
    /* unbounded: the query at position p sees p + 1 tokens; summed from p = 31 */
    tg_cache_params p = tg_cache_default_params();
    metered_run(m, &p, ids, N, 2, sum, q, sk);
    double want[TG_ATTN_RANGES] = {0};
    for (int pos = 31; pos < N; pos++) {
        want[0] += 1.0 / (pos + 1);
        want[1] += 4.0 / (pos + 1);
        want[2] += 16.0 / (pos + 1);
        want[3] += 16.0 / (pos + 1);
    }
    for (int l = 0; l < M_LAYERS; l++) {
        assert_int_equal(q[l], N - 31);
        assert_int_equal(sk[l], 31);
        for (int h = 0; h < M_HEADS; h++)
            for (int r = 0; r < TG_ATTN_RANGES; r++)
                if (fabs(sum[(l * M_HEADS + h) * TG_ATTN_RANGES + r] - want[r]) > 1e-4)
                    fail_msg("unbounded layer %d head %d range %d: %.6f, by hand %.6f", l, h, r,
                             sum[(l * M_HEADS + h) * TG_ATTN_RANGES + r], want[r]);
    }
    /* StreamingLLM sink 4 + window 36, fp16 (no KIVI group slack): from position 39 on every query sees 40 tokens */
    p.sink = 4;
    p.window = 36;
    p.key_precision = p.value_precision = TG_KV_FP16;
    metered_run(m, &p, ids, N, 1, sum, q, sk);
    for (int r = 0; r < TG_ATTN_RANGES; r++) want[r] = 0.0;
    for (int pos = 31; pos < N; pos++) {
        const double vis = pos + 1 < 40 ? pos + 1 : 40;
        want[0] += 1.0 / vis;
        want[1] += 4.0 / vis;
        want[2] += 16.0 / vis;
        want[3] += 16.0 / vis;
    }
    for (int l = 0; l < M_LAYERS; l++) {
        assert_int_equal(q[l], N - 31);
        for (int h = 0; h < M_HEADS; h++)
            for (int r = 0; r < TG_ATTN_RANGES; r++)
                if (fabs(sum[(l * M_HEADS + h) * TG_ATTN_RANGES + r] - want[r]) > 1e-4)
                    fail_msg("streaming layer %d head %d range %d: %.6f, by hand %.6f", l, h, r,
                             sum[(l * M_HEADS + h) * TG_ATTN_RANGES + r], want[r]);
    }
    tg_model_free(m);
}

/* Real queries: the ranges nest (first 1 <= first 4 <= first 16 <= 1), and the meter does not depend on the thread
 * count or change the logits. */
static void test_model_random(void **state) {
    (void)state;
    tg_model *m = tiny_model(false);
    enum { N = 120 };
    int32_t ids[N];
    for (int i = 0; i < N; i++) ids[i] = (i * 53 + 7) % 256;
    double s1[M_LAYERS * M_HEADS * TG_ATTN_RANGES], s2[M_LAYERS * M_HEADS * TG_ATTN_RANGES];
    int64_t q[M_LAYERS], sk[M_LAYERS];
    tg_cache_params p = tg_cache_default_params();
    p.sink = 4;
    p.window = 44;
    metered_run(m, &p, ids, N, 1, s1, q, sk);
    metered_run(m, &p, ids, N, 2, s2, q, sk);
    for (int i = 0; i < M_LAYERS * M_HEADS; i++) {
        const double *r = s1 + i * TG_ATTN_RANGES;
        assert_true(r[0] >= 0.0 && r[0] <= r[1] + 1e-12 && r[1] <= r[2] + 1e-12 && r[2] <= (double)q[0] + 1e-9);
        assert_true(r[3] >= 0.0 && r[2] + r[3] <= (double)q[0] + 1e-9); /* disjoint when >= 32 are visible */
        for (int k = 0; k < TG_ATTN_RANGES; k++) assert_true(s1[i * TG_ATTN_RANGES + k] == s2[i * TG_ATTN_RANGES + k]);
    }
    /* the logits with the meter on are those with it off */
    tg_error err = {0};
    float *a = malloc((size_t)N * M_VOCAB * sizeof(float)), *b = malloc((size_t)N * M_VOCAB * sizeof(float));
    assert_true(a && b);
    for (int on = 0; on < 2; on++) {
        tg_session *s = tg_session_new(m, &p, 2, &err);
        assert_non_null(s);
        if (on) assert_true(tg_session_meter_attention(s, &err));
        assert_true(tg_session_eval(s, ids, N, on ? b : a, NULL, &err));
        tg_session_free(s);
    }
    assert_memory_equal(a, b, (size_t)N * M_VOCAB * sizeof(float));
    free(a), free(b);
    tg_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cache_by_hand),
        cmocka_unit_test(test_model_uniform),
        cmocka_unit_test(test_model_random),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
