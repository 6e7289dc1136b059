/* test_forward.c — the forward pass and the public session against an independent naive Llama written here
 * (plain loops in double precision, full attention recomputed from scratch for every token) on random tiny models:
 * logits equal within 1e-4. Also the session's boundary checks: context full, bad ids, non-finite logits. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "forward/forward.h"
#include "model/model.h"
#include "random_model.h"
#include "tinygpt.h"

#define LOGIT_TOL 1e-4

/* ---- a random in-memory model ---- */

typedef struct {
    struct tg_model m;
    float *blob;  /* every weight, f32 */
    size_t used, cap;
    uint64_t rng;
} synth;

static float rnd(synth *s) { /* uniform in [-1, 1) */
    s->rng ^= s->rng << 13;
    s->rng ^= s->rng >> 7;
    s->rng ^= s->rng << 17;
    return (float)((s->rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static float *take(synth *s, size_t n) {
    assert_true(s->used + n <= s->cap);
    float *p = s->blob + s->used;
    s->used += n;
    return p;
}

static tg_tensor rand_matrix(synth *s, int64_t rows, int64_t cols, float scale) {
    float *p = take(s, (size_t)(rows * cols));
    for (int64_t i = 0; i < rows * cols; i++) p[i] = rnd(s) * scale;
    tg_tensor t = {TG_DT_F32, rows, cols, p, 0};
    return t;
}

static float *rand_norm(synth *s, int64_t n) {
    float *p = take(s, (size_t)n);
    for (int64_t i = 0; i < n; i++) p[i] = 1.0f + 0.2f * rnd(s);
    return p;
}

typedef struct {
    int n_layers, d, n_heads, n_kv_heads, head_dim, ffn, vocab, ctx, window;
    tg_rope_style rope;
    bool tied;
    const int *kv_source; /* [n_layers] or NULL (every layer its own K/V) */
} synth_cfg;

static synth *synth_new(const synth_cfg *c, uint64_t seed) {
    synth *s = calloc(1, sizeof *s);
    assert_non_null(s);
    s->rng = seed * 2654435761u + 1;
    int64_t qd = (int64_t)c->n_heads * c->head_dim, kvd = (int64_t)c->n_kv_heads * c->head_dim;
    size_t per_layer = (size_t)(2 * c->d + qd * c->d * 2 + kvd * c->d * 2 + 3 * (int64_t)c->ffn * c->d);
    s->cap = per_layer * (size_t)c->n_layers + (size_t)(2 * (int64_t)c->vocab * c->d + c->d);
    s->blob = malloc(s->cap * sizeof(float));
    assert_non_null(s->blob);
    tg_hparams *hp = &s->m.hp;
    snprintf(hp->architecture, sizeof hp->architecture, "llama");
    hp->n_layers = c->n_layers;
    hp->d_model = c->d;
    hp->n_heads = c->n_heads;
    hp->n_kv_heads = c->n_kv_heads;
    hp->head_dim = c->head_dim;
    hp->ffn_dim = c->ffn;
    hp->vocab_size = c->vocab;
    hp->context_length = c->ctx;
    hp->sliding_window = c->window;
    hp->rope_theta = 10000.0f;
    hp->norm_eps = 1e-5f;
    hp->rope_style = c->rope;
    hp->tied_embeddings = c->tied;
    hp->kv_source = malloc((size_t)c->n_layers * sizeof(int));
    for (int l = 0; l < c->n_layers; l++) hp->kv_source[l] = c->kv_source ? c->kv_source[l] : l;
    s->m.has_weights = true;
    s->m.tok_embd = rand_matrix(s, c->vocab, c->d, 1.0f);
    s->m.out_norm = rand_norm(s, c->d);
    s->m.lm_head = c->tied ? s->m.tok_embd : rand_matrix(s, c->vocab, c->d, 1.0f / sqrtf((float)c->d));
    s->m.layers = calloc((size_t)c->n_layers, sizeof *s->m.layers);
    for (int l = 0; l < c->n_layers; l++) {
        tg_layer_weights *w = &s->m.layers[l];
        float sd = 1.0f / sqrtf((float)c->d);
        w->attn_norm = rand_norm(s, c->d);
        w->wq = rand_matrix(s, qd, c->d, 2.0f * sd);
        w->wk = rand_matrix(s, kvd, c->d, 2.0f * sd);
        w->wv = rand_matrix(s, kvd, c->d, sd);
        w->wo = rand_matrix(s, c->d, qd, 1.0f / sqrtf((float)qd));
        w->ffn_norm = rand_norm(s, c->d);
        w->w_gate = rand_matrix(s, c->ffn, c->d, sd);
        w->w_up = rand_matrix(s, c->ffn, c->d, sd);
        w->w_down = rand_matrix(s, c->d, c->ffn, 1.0f / sqrtf((float)c->ffn));
    }
    return s;
}

static void synth_free(synth *s) {
    if (!s) return;
    free(s->m.hp.kv_source);
    free(s->m.layers);
    free(s->blob);
    free(s);
}

/* ---- the naive reference: double precision, everything recomputed from the stored K/V of every position ---- */

typedef struct {
    const struct tg_model *m;
    double *k, *v; /* [n_layers, ctx, kvd]: post-RoPE keys and values of every position */
    int64_t ctx;
} naive;

static naive *naive_new(const struct tg_model *m) {
    naive *r = calloc(1, sizeof *r);
    r->m = m;
    r->ctx = m->hp.context_length;
    size_t n = (size_t)m->hp.n_layers * (size_t)r->ctx * (size_t)(m->hp.n_kv_heads * m->hp.head_dim);
    r->k = calloc(n, sizeof(double));
    r->v = calloc(n, sizeof(double));
    return r;
}

static void naive_free(naive *r) {
    free(r->k);
    free(r->v);
    free(r);
}

static double weight(const tg_tensor *t, int64_t r, int64_t c) { return ((const float *)t->data)[r * t->cols + c]; }

/* y[rows] = W x */
static void mv(const tg_tensor *w, const double *x, double *y) {
    for (int64_t r = 0; r < w->rows; r++) {
        double acc = 0;
        for (int64_t c = 0; c < w->cols; c++) acc += weight(w, r, c) * x[c];
        y[r] = acc;
    }
}

static void rmsnorm(double *out, const double *x, const float *w, int n, double eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    double inv = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++) out[i] = x[i] * inv * w[i];
}

/* Rotates n_heads vectors of size hd at position pos: HALF pairs (i, i + hd/2), INTERLEAVED pairs (2i, 2i+1). */
static void rope(double *x, int n_heads, int hd, int64_t pos, double theta, tg_rope_style style) {
    for (int h = 0; h < n_heads; h++) {
        double *v = x + h * hd;
        for (int i = 0; i < hd / 2; i++) {
            double ang = (double)pos * pow(theta, -2.0 * i / hd);
            int a = style == TG_ROPE_HALF ? i : 2 * i, b = style == TG_ROPE_HALF ? i + hd / 2 : 2 * i + 1;
            double x0 = v[a], x1 = v[b];
            v[a] = x0 * cos(ang) - x1 * sin(ang);
            v[b] = x0 * sin(ang) + x1 * cos(ang);
        }
    }
}

/* Logits [vocab] after token id at position pos (every earlier position already run). */
static void naive_token(naive *r, int32_t id, int64_t pos, float *logits) {
    const struct tg_model *m = r->m;
    const tg_hparams *hp = &m->hp;
    int d = hp->d_model, hd = hp->head_dim, qd = hp->n_heads * hd, kvd = hp->n_kv_heads * hd, ff = hp->ffn_dim;
    double *x = calloc((size_t)d, sizeof *x), *xb = calloc((size_t)d, sizeof *xb), *q = calloc((size_t)qd, 8);
    double *att = calloc((size_t)qd, 8), *tmp = calloc((size_t)d, 8), *g = calloc((size_t)ff, 8);
    double *u = calloc((size_t)ff, 8), *sc = calloc((size_t)(pos + 1), 8), *lg = calloc((size_t)hp->vocab_size, 8);
    for (int i = 0; i < d; i++) x[i] = weight(&m->tok_embd, id, i);
    for (int l = 0; l < hp->n_layers; l++) {
        const tg_layer_weights *w = &m->layers[l];
        rmsnorm(xb, x, w->attn_norm, d, hp->norm_eps);
        mv(&w->wq, xb, q);
        rope(q, hp->n_heads, hd, pos, hp->rope_theta, hp->rope_style);
        int src = hp->kv_source[l];
        double *kl = r->k + ((size_t)src * (size_t)r->ctx) * (size_t)kvd;
        double *vl = r->v + ((size_t)src * (size_t)r->ctx) * (size_t)kvd;
        if (src == l) {
            mv(&w->wk, xb, kl + pos * kvd);
            mv(&w->wv, xb, vl + pos * kvd);
            rope(kl + pos * kvd, hp->n_kv_heads, hd, pos, hp->rope_theta, hp->rope_style);
        }
        for (int h = 0; h < hp->n_heads; h++) {
            int kh = h / (hp->n_heads / hp->n_kv_heads);
            double mx = -INFINITY;
            for (int64_t p = 0; p <= pos; p++) {
                bool visible = hp->sliding_window <= 0 || pos - p < hp->sliding_window;
                double s = 0;
                for (int i = 0; i < hd; i++) s += q[h * hd + i] * kl[p * kvd + kh * hd + i];
                sc[p] = visible ? s / sqrt((double)hd) : -INFINITY;
                if (sc[p] > mx) mx = sc[p];
            }
            double sum = 0;
            for (int64_t p = 0; p <= pos; p++) sum += sc[p] = exp(sc[p] - mx);
            for (int i = 0; i < hd; i++) {
                double acc = 0;
                for (int64_t p = 0; p <= pos; p++) acc += sc[p] / sum * vl[p * kvd + kh * hd + i];
                att[h * hd + i] = acc;
            }
        }
        mv(&w->wo, att, tmp);
        for (int i = 0; i < d; i++) x[i] += tmp[i];
        rmsnorm(xb, x, w->ffn_norm, d, hp->norm_eps);
        mv(&w->w_gate, xb, g);
        mv(&w->w_up, xb, u);
        for (int i = 0; i < ff; i++) g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
        mv(&w->w_down, g, tmp);
        for (int i = 0; i < d; i++) x[i] += tmp[i];
    }
    rmsnorm(xb, x, m->out_norm, d, hp->norm_eps);
    mv(&m->lm_head, xb, lg);
    for (int i = 0; i < hp->vocab_size; i++) logits[i] = (float)lg[i];
    free(x), free(xb), free(q), free(att), free(tmp), free(g), free(u), free(sc), free(lg);
}

static double max_abs_diff(const float *a, const float *b, int64_t n) {
    double mx = 0;
    for (int64_t i = 0; i < n; i++) {
        double dd = fabs((double)a[i] - (double)b[i]);
        if (!(dd <= mx)) mx = dd; /* NaN propagates */
    }
    return mx;
}

static int32_t *random_ids(int n, int vocab, uint64_t seed) {
    int32_t *ids = malloc((size_t)n * sizeof *ids);
    for (int i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((seed >> 33) % (uint64_t)vocab);
    }
    return ids;
}

/* Prefill n_prompt tokens through the session (logits for every row), then decode n_decode more one by one;
 * every row is compared with the naive model. */
static void check_session_against_naive(const synth_cfg *c, int n_prompt, int n_decode, uint64_t seed) {
    synth *s = synth_new(c, seed);
    tg_error err = {0};
    tg_cache_params p = tg_cache_default_params();
    tg_session *sess = tg_session_new(&s->m, &p, 2, &err);
    if (!sess) fail_msg("tg_session_new: %s", err.msg);
    naive *ref = naive_new(&s->m);
    int V = c->vocab, n = n_prompt + n_decode;
    int32_t *ids = random_ids(n, V, seed + 7);
    float *got = malloc((size_t)n * (size_t)V * sizeof(float)), *want = malloc((size_t)V * sizeof(float));
    float *last = malloc((size_t)V * sizeof(float));
    if (!tg_session_eval(sess, ids, (size_t)n_prompt, got, last, &err)) fail_msg("eval: %s", err.msg);
    assert_int_equal(tg_session_position(sess), n_prompt);
    assert_true(max_abs_diff(last, got + (size_t)(n_prompt - 1) * (size_t)V, V) == 0.0);
    for (int t = n_prompt; t < n; t++) {
        if (!tg_session_eval(sess, ids + t, 1, NULL, got + (size_t)t * (size_t)V, &err)) fail_msg("eval: %s", err.msg);
    }
    double worst = 0;
    for (int t = 0; t < n; t++) {
        naive_token(ref, ids[t], t, want);
        double dd = max_abs_diff(got + (size_t)t * (size_t)V, want, V);
        if (!(dd <= worst)) worst = dd;
    }
    if (!(worst <= LOGIT_TOL)) fail_msg("max |logit - naive| = %g > %g", worst, LOGIT_TOL);
    free(ids), free(got), free(want), free(last);
    naive_free(ref);
    tg_session_free(sess);
    synth_free(s);
}

static const synth_cfg base_cfg = {
    .n_layers = 2, .d = 48, .n_heads = 4, .n_kv_heads = 2, .head_dim = 16, .ffn = 96, .vocab = 61, .ctx = 96,
    .window = 0, .rope = TG_ROPE_HALF, .tied = false,
};

/* GQA, head_dim * heads != d_model, rotate-half RoPE; a 70-token prompt spans two prefill chunks. */
static void test_forward_matches_naive_half(void **state) {
    (void)state;
    check_session_against_naive(&base_cfg, 70, 6, 1);
}

static void test_forward_matches_naive_interleaved(void **state) {
    (void)state;
    synth_cfg c = base_cfg;
    c.rope = TG_ROPE_INTERLEAVED;
    c.tied = true;
    check_session_against_naive(&c, 20, 5, 2);
}

/* Multi-head attention without GQA, three layers. */
static void test_forward_matches_naive_mha(void **state) {
    (void)state;
    synth_cfg c = base_cfg;
    c.n_layers = 3;
    c.n_kv_heads = 4;
    c.head_dim = 12;
    check_session_against_naive(&c, 9, 3, 3);
}

/* Mistral's sliding window: a token sees itself and the previous window-1 tokens. */
static void test_forward_matches_naive_sliding_window(void **state) {
    (void)state;
    synth_cfg c = base_cfg;
    c.window = 5;
    check_session_against_naive(&c, 12, 6, 4);
}

/* Cross-layer K/V sharing: layer 1 reads layer 0's keys and values (its own K/V projections are never used). */
static void test_forward_matches_naive_shared_kv(void **state) {
    (void)state;
    static const int src[3] = {0, 0, 2};
    synth_cfg c = base_cfg;
    c.n_layers = 3;
    c.kv_source = src;
    check_session_against_naive(&c, 10, 4, 12);
}

/* Prefill in one 64-token chunk equals token-by-token decoding (the forward pass directly, no session). */
static void test_forward_chunk_equals_single_tokens(void **state) {
    (void)state;
    synth *s = synth_new(&base_cfg, 5);
    tg_error err = {0};
    tg_cache_params p = tg_cache_default_params();
    tg_cache_shape shape = {
        .n_layers = s->m.hp.n_layers, .n_heads = s->m.hp.n_heads, .n_kv_heads = s->m.hp.n_kv_heads,
        .head_dim = s->m.hp.head_dim, .rope_theta = s->m.hp.rope_theta, .rope_style = s->m.hp.rope_style,
        .context_length = s->m.hp.context_length, .kv_source = NULL, .layer_window = NULL,
    };
    tg_kvcache *c1 = tg_kvcache_new(&shape, &p, &err), *c2 = tg_kvcache_new(&shape, &p, &err);
    assert_non_null(c1);
    assert_non_null(c2);
    tg_forward *f1 = tg_forward_new(&s->m, c1, 64, 1, &err), *f2 = tg_forward_new(&s->m, c2, 1, 2, &err);
    assert_non_null(f1);
    assert_non_null(f2);
    int n = 40, V = base_cfg.vocab;
    int32_t *ids = random_ids(n, V, 11);
    float *a = malloc((size_t)n * (size_t)V * sizeof(float)), *b = malloc((size_t)n * (size_t)V * sizeof(float));
    float *last = malloc((size_t)V * sizeof(float));
    tg_forward_chunk(f1, c1, ids, n, 0, a, last);
    for (int t = 0; t < n; t++) tg_forward_chunk(f2, c2, ids + t, 1, t, NULL, b + (size_t)t * (size_t)V);
    /* one arithmetic order per output in every kernel, attention split only by the tokens it sees: the same bits,
     * whatever the chunking and the thread count */
    double dd = max_abs_diff(a, b, (int64_t)n * V);
    if (!(dd == 0.0)) fail_msg("chunked (1 thread) vs single-token (2 threads) max diff %g", dd);
    assert_true(max_abs_diff(last, a + (size_t)(n - 1) * (size_t)V, V) == 0.0);
    free(ids), free(a), free(b), free(last);
    tg_forward_free(f1);
    tg_forward_free(f2);
    tg_kvcache_free(c1);
    tg_kvcache_free(c2);
    synth_free(s);
}

/* The same with Q8_0 and Q4_0 matrices (random_model.h), whose prefill runs the integer kernels' multi-token paths
 * (the i8mm table's smmla tiles on a CPU that has them) and whose decoding runs their one-token kernels: 40 tokens
 * in one chunk on one thread, and one by one on two, give the same logits bit for bit. */
static void test_forward_quantised_chunk_equals_single_tokens(void **state) {
    (void)state;
    const tg_dtype types[] = {TG_DT_Q8_0, TG_DT_Q4_0};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        random_model *r = random_model_new_typed(64, types[i], 7, false);
        const tg_model *m = random_model_get(r);
        tg_error err = {0};
        tg_cache_params p = tg_cache_default_params();
        tg_cache_shape shape = {
            .n_layers = m->hp.n_layers, .n_heads = m->hp.n_heads, .n_kv_heads = m->hp.n_kv_heads,
            .head_dim = m->hp.head_dim, .rope_theta = m->hp.rope_theta, .rope_style = m->hp.rope_style,
            .context_length = m->hp.context_length, .kv_source = NULL, .layer_window = NULL,
        };
        tg_kvcache *c1 = tg_kvcache_new(&shape, &p, &err), *c2 = tg_kvcache_new(&shape, &p, &err);
        assert_true(c1 && c2);
        tg_forward *f1 = tg_forward_new(m, c1, 64, 1, &err), *f2 = tg_forward_new(m, c2, 1, 2, &err);
        assert_true(f1 && f2);
        const int n = 40, V = m->hp.vocab_size;
        int32_t *ids = random_model_text(n, V, 13);
        float *a = malloc((size_t)n * (size_t)V * sizeof *a), *b = malloc((size_t)n * (size_t)V * sizeof *b);
        float *last = malloc((size_t)V * sizeof *last);
        assert_true(a && b && last);
        tg_forward_chunk(f1, c1, ids, n, 0, a, last);
        for (int t = 0; t < n; t++) tg_forward_chunk(f2, c2, ids + t, 1, t, NULL, b + (size_t)t * (size_t)V);
        if (memcmp(a, b, (size_t)n * (size_t)V * sizeof *a) != 0)
            fail_msg("%s: chunked (1 thread) vs single-token (2 threads) max diff %g", tg_dtype_name(types[i]),
                     max_abs_diff(a, b, (int64_t)n * V));
        free(ids), free(a), free(b), free(last);
        tg_forward_free(f1);
        tg_forward_free(f2);
        tg_kvcache_free(c1);
        tg_kvcache_free(c2);
        random_model_free(r);
    }
}

/* Past 1024 tokens a token's attention runs in several shares, and a lone decoded token's kv-heads are stored by the
 * units of their last shares while the other shares run (tg_kvcache_append_start / _head): the same bits as chunks
 * of 64 on one thread, whose appends are stored whole, for each codec that stores head by head (plain, KIVI with
 * provisional key grids, KIVI with a residual) and one that does not (one grid over the whole history). */
static void test_forward_deep_decode_equals_chunks(void **state) {
    (void)state;
    synth_cfg cfg = base_cfg;
    cfg.ctx = 1200;
    synth *s = synth_new(&cfg, 9);
    tg_cache_shape shape = {
        .n_layers = s->m.hp.n_layers, .n_heads = s->m.hp.n_heads, .n_kv_heads = s->m.hp.n_kv_heads,
        .head_dim = s->m.hp.head_dim, .rope_theta = s->m.hp.rope_theta, .rope_style = s->m.hp.rope_style,
        .context_length = s->m.hp.context_length, .kv_source = NULL, .layer_window = NULL,
    };
    const struct {
        tg_kv_precision k, v;
        int group, residual;
    } cases[] = {
        {TG_KV_FP16, TG_KV_FP16, TG_KV_GROUP_AUTO, TG_KV_RESIDUAL_AUTO},
        {TG_KV_INT4, TG_KV_INT4, TG_KV_GROUP_AUTO, TG_KV_RESIDUAL_AUTO},
        {TG_KV_INT2, TG_KV_INT2, TG_KV_GROUP_AUTO, TG_KV_RESIDUAL_AUTO},
        {TG_KV_INT8, TG_KV_FP16, 32, 64},
        {TG_KV_INT4, TG_KV_INT8, 0, 0},
    };
    enum { N = 1100, C = 64 };
    const int V = cfg.vocab;
    int32_t *ids = random_ids(N, V, 13);
    float *a = malloc((size_t)N * (size_t)V * sizeof(float)), *b = malloc((size_t)N * (size_t)V * sizeof(float));
    assert_non_null(a);
    assert_non_null(b);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tg_error err = {0};
        tg_cache_params p = tg_cache_default_params();
        p.key_precision = cases[i].k;
        p.value_precision = cases[i].v;
        p.group_size = cases[i].group;
        p.residual = cases[i].residual;
        tg_kvcache *c1 = tg_kvcache_new(&shape, &p, &err), *c2 = tg_kvcache_new(&shape, &p, &err);
        if (!c1 || !c2) fail_msg("case %zu: %s", i, err.msg);
        tg_forward *f1 = tg_forward_new(&s->m, c1, C, 1, &err), *f2 = tg_forward_new(&s->m, c2, 1, 2, &err);
        assert_non_null(f1);
        assert_non_null(f2);
        for (int t = 0; t < N; t += C)
            tg_forward_chunk(f1, c1, ids + t, N - t < C ? N - t : C, t, a + (size_t)t * (size_t)V, NULL);
        for (int t = 0; t < N; t++) tg_forward_chunk(f2, c2, ids + t, 1, t, NULL, b + (size_t)t * (size_t)V);
        for (int t = 0; t < N; t++) {
            const double dd = max_abs_diff(a + (size_t)t * (size_t)V, b + (size_t)t * (size_t)V, V);
            if (!(dd == 0.0)) fail_msg("case %zu, token %d: chunks (1 thread) vs decode (2 threads) max diff %g", i, t, dd);
        }
        tg_forward_free(f1);
        tg_forward_free(f2);
        tg_kvcache_free(c1);
        tg_kvcache_free(c2);
    }
    free(ids), free(a), free(b);
    synth_free(s);
}

/* Several caches (different policies, one needing token-by-token attention) advanced together by tg_forward_batch,
 * chunks of different sizes in one pass, give the bits of each decoded alone, token by token. */
static void test_forward_batch_equals_alone(void **state) {
    (void)state;
    synth *s = synth_new(&base_cfg, 7);
    tg_error err = {0};
    tg_cache_shape shape = {
        .n_layers = s->m.hp.n_layers, .n_heads = s->m.hp.n_heads, .n_kv_heads = s->m.hp.n_kv_heads,
        .head_dim = s->m.hp.head_dim, .rope_theta = s->m.hp.rope_theta, .rope_style = s->m.hp.rope_style,
        .context_length = s->m.hp.context_length, .kv_source = NULL, .layer_window = NULL,
    };
    enum { NS = 3, N = 24 };
    tg_cache_params p[NS];
    for (int i = 0; i < NS; i++) p[i] = tg_cache_default_params();
    p[1].key_precision = p[1].value_precision = TG_KV_INT4;
    p[1].sink = 2;
    p[1].window = 8; /* evicts: token by token */
    p[2].key_precision = p[2].value_precision = TG_KV_INT8;
    tg_kvcache *batched[NS], *alone[NS];
    for (int i = 0; i < NS; i++) {
        batched[i] = tg_kvcache_new(&shape, &p[i], &err);
        alone[i] = tg_kvcache_new(&shape, &p[i], &err);
        if (!batched[i] || !alone[i]) fail_msg("cache %d: %s", i, err.msg);
    }
    tg_forward *fb = tg_forward_new(&s->m, batched[0], 16, 2, &err), *fa = tg_forward_new(&s->m, alone[0], 1, 1, &err);
    assert_non_null(fb);
    assert_non_null(fa);
    const int V = base_cfg.vocab;
    int32_t *ids[NS];
    float *want[NS], *got[NS];
    for (int i = 0; i < NS; i++) {
        ids[i] = random_ids(N, V, 20 + (unsigned)i);
        want[i] = malloc((size_t)N * (size_t)V * sizeof(float));
        got[i] = malloc((size_t)V * sizeof(float));
        for (int t = 0; t < N; t++)
            tg_forward_chunk(fa, alone[i], ids[i] + t, 1, t, NULL, want[i] + (size_t)t * (size_t)V);
    }
    int done[NS] = {0};
    for (int step = 0; done[0] < N || done[1] < N || done[2] < N; step++) {
        tg_forward_seg seg[NS];
        int n_seg = 0, who[NS];
        for (int i = 0; i < NS; i++) {
            if (done[i] >= N) continue;
            int n = 1 + (i + step) % 4;
            if (n > N - done[i]) n = N - done[i];
            seg[n_seg] = (tg_forward_seg){batched[i], ids[i] + done[i], n, done[i], got[i]};
            who[n_seg++] = i;
        }
        assert_true(tg_forward_batch(fb, seg, n_seg));
        for (int k = 0; k < n_seg; k++) {
            const int i = who[k];
            done[i] += seg[k].n;
            double dd = max_abs_diff(got[i], want[i] + (size_t)(done[i] - 1) * (size_t)V, V);
            if (!(dd == 0.0))
                fail_msg("cache %d after %d tokens (step %d): batched vs alone max diff %g", i, done[i], step, dd);
        }
    }
    /* refusals: too many rows, one cache twice */
    tg_forward_seg two[2] = {{batched[0], ids[0], 1, N, NULL}, {batched[0], ids[0], 1, N + 1, NULL}};
    assert_false(tg_forward_batch(fb, two, 2));
    tg_forward_seg big = {batched[2], ids[2], 17, N, NULL};
    assert_false(tg_forward_batch(fb, &big, 1));
    for (int i = 0; i < NS; i++) {
        free(ids[i]), free(want[i]), free(got[i]);
        tg_kvcache_free(batched[i]);
        tg_kvcache_free(alone[i]);
    }
    tg_forward_free(fb);
    tg_forward_free(fa);
    synth_free(s);
}

/* A batch whose rows have different numbers of attention shares (one cache past depth 1024: two a kv-head; one near
 * its start: one), in fp32 and in int4 (whose new rows are stored by the pieces: the last shares first), gives the
 * bits of each cache decoded alone, and in fp32 the naive model's logits (a share left out would fail both ways). The
 * attention step hands out as many shares per row as its row with the most. */
static void test_forward_batch_mixed_shares(void **state) {
    (void)state;
    synth_cfg cfg = base_cfg;
    cfg.ctx = 1200;
    cfg.head_dim = 32; /* the integer kernels' head dims are multiples of 32 */
    synth *s = synth_new(&cfg, 11);
    tg_cache_shape shape = {
        .n_layers = s->m.hp.n_layers, .n_heads = s->m.hp.n_heads, .n_kv_heads = s->m.hp.n_kv_heads,
        .head_dim = s->m.hp.head_dim, .rope_theta = s->m.hp.rope_theta, .rope_style = s->m.hp.rope_style,
        .context_length = s->m.hp.context_length, .kv_source = NULL, .layer_window = NULL,
    };
    enum { DEEP = 1040, SHALLOW = 5, STEPS = 6, C = 64 };
    const int V = cfg.vocab;
    int32_t *ids = random_ids(DEEP + STEPS, V, 17);
    float *want = malloc((size_t)V * sizeof(float)), *got[2] = {malloc((size_t)V * sizeof(float)),
                                                                  malloc((size_t)V * sizeof(float))};
    assert_non_null(want);
    assert_non_null(got[0]);
    assert_non_null(got[1]);
    naive *ref = naive_new(&s->m);
    for (int t = 0; t < DEEP; t++) naive_token(ref, ids[t], t, want);
    const tg_kv_precision precs[] = {TG_KV_FP32, TG_KV_INT4};
    for (size_t i = 0; i < sizeof precs / sizeof precs[0]; i++) {
        tg_error err = {0};
        tg_cache_params p = tg_cache_default_params();
        p.key_precision = p.value_precision = precs[i];
        tg_kvcache *batched[2], *alone[2];
        for (int k = 0; k < 2; k++) {
            batched[k] = tg_kvcache_new(&shape, &p, &err);
            alone[k] = tg_kvcache_new(&shape, &p, &err);
            if (!batched[k] || !alone[k]) fail_msg("%s: %s", tg_kv_precision_name(precs[i]), err.msg);
        }
        tg_forward *fb = tg_forward_new(&s->m, batched[0], C, 2, &err), *fa = tg_forward_new(&s->m, alone[0], C, 1, &err);
        assert_non_null(fb);
        assert_non_null(fa);
        const int depth[2] = {DEEP, SHALLOW};
        for (int k = 0; k < 2; k++) /* the same chunks into both caches of a pair */
            for (int t = 0; t < depth[k]; t += C) {
                const int n = depth[k] - t < C ? depth[k] - t : C;
                tg_forward_chunk(fa, batched[k], ids + t, n, t, NULL, NULL);
                tg_forward_chunk(fa, alone[k], ids + t, n, t, NULL, NULL);
            }
        assert_int_equal(tg_kvcache_attend_splits(batched[0], 0, DEEP), 2);
        assert_int_equal(tg_kvcache_attend_splits(batched[1], 0, SHALLOW), 1);
        for (int step = 0; step < STEPS; step++) {
            tg_forward_seg seg[2];
            for (int k = 0; k < 2; k++)
                seg[k] = (tg_forward_seg){batched[k], ids + depth[k] + step, 1, depth[k] + step, got[k]};
            assert_true(tg_forward_batch(fb, seg, 2));
            for (int k = 0; k < 2; k++) {
                tg_forward_chunk(fa, alone[k], ids + depth[k] + step, 1, depth[k] + step, NULL, want);
                const double dd = max_abs_diff(want, got[k], V);
                if (!(dd == 0.0))
                    fail_msg("%s, cache %d, step %d: batched vs alone max diff %g", tg_kv_precision_name(precs[i]), k,
                             step, dd);
            }
            if (precs[i] == TG_KV_FP32) {
                naive_token(ref, ids[DEEP + step], DEEP + step, want);
                const double dn = max_abs_diff(want, got[0], V);
                if (!(dn <= LOGIT_TOL)) fail_msg("fp32, step %d: max |logit - naive| = %g > %g", step, dn, LOGIT_TOL);
            }
        }
        for (int k = 0; k < 2; k++) {
            tg_kvcache_free(batched[k]);
            tg_kvcache_free(alone[k]);
        }
        tg_forward_free(fb);
        tg_forward_free(fa);
    }
    free(ids), free(want), free(got[0]), free(got[1]);
    naive_free(ref);
    synth_free(s);
}

static void test_session_context_full(void **state) {
    (void)state;
    synth_cfg c = base_cfg;
    c.ctx = 20;
    synth *s = synth_new(&c, 6);
    tg_error err = {0};
    tg_cache_params p = tg_cache_default_params();
    tg_session *sess = tg_session_new(&s->m, &p, 1, &err);
    assert_non_null(sess);
    int32_t *ids = random_ids(21, c.vocab, 3);
    assert_int_equal(tg_session_remaining(sess), 20);
    assert_true(tg_session_eval(sess, ids, 15, NULL, NULL, &err));
    assert_int_equal(tg_session_remaining(sess), 5);
    assert_false(tg_session_eval(sess, ids, 6, NULL, NULL, &err));
    assert_int_equal(err.code, TG_ERR_CONTEXT_FULL);
    assert_string_equal(err.msg, "context window of 20 tokens is full");
    assert_int_equal(tg_session_position(sess), 15);
    assert_true(tg_session_eval(sess, ids, 5, NULL, NULL, &err));
    assert_int_equal(tg_session_remaining(sess), 0);
    assert_false(tg_session_eval(sess, ids, 1, NULL, NULL, &err));
    assert_non_null(strstr(err.msg, "is full"));
    free(ids);
    tg_session_free(sess);
    synth_free(s);
}

/* A StreamingLLM window bounds the cache: the session keeps going past the model's context. */
static void test_session_streaming_past_context(void **state) {
    (void)state;
    synth_cfg c = base_cfg;
    c.ctx = 20;
    synth *s = synth_new(&c, 10);
    tg_error err = {0};
    tg_cache_params p = tg_cache_default_params();
    p.sink = 4;
    p.window = 8;
    tg_session *sess = tg_session_new(&s->m, &p, 1, &err);
    if (!sess) fail_msg("tg_session_new: %s", err.msg);
    assert_int_equal(tg_session_remaining(sess), INT64_MAX);
    int n = 50;
    int32_t *ids = random_ids(n, c.vocab, 4);
    float *last = malloc((size_t)c.vocab * sizeof(float));
    if (!tg_session_eval(sess, ids, 30, NULL, last, &err)) fail_msg("eval: %s", err.msg);
    for (int t = 30; t < n; t++)
        if (!tg_session_eval(sess, ids + t, 1, NULL, last, &err)) fail_msg("eval at %d: %s", t, err.msg);
    assert_int_equal(tg_session_position(sess), n);
    tg_cache_report r;
    tg_session_cache_report(sess, &r);
    assert_int_equal(r.position, n);
    assert_true(r.stored <= 12);
    free(ids);
    free(last);
    tg_session_free(sess);
    synth_free(s);
}

static void test_session_bad_ids(void **state) {
    (void)state;
    synth *s = synth_new(&base_cfg, 7);
    tg_error err = {0};
    tg_session *sess = tg_session_new(&s->m, NULL, 1, &err);
    assert_non_null(sess);
    int32_t bad[2] = {3, base_cfg.vocab};
    assert_false(tg_session_eval(sess, bad, 2, NULL, NULL, &err));
    assert_non_null(strstr(err.msg, "outside the vocabulary"));
    bad[1] = -1;
    assert_false(tg_session_eval(sess, bad, 2, NULL, NULL, &err));
    assert_int_equal(tg_session_position(sess), 0);
    assert_true(tg_session_eval(sess, bad, 0, NULL, NULL, &err));
    tg_session_free(sess);
    synth_free(s);
}

static void test_session_non_finite_logits(void **state) {
    (void)state;
    synth *s = synth_new(&base_cfg, 8);
    ((float *)s->m.lm_head.data)[5 * base_cfg.d + 2] = NAN; /* row 5 of the output head */
    tg_error err = {0};
    tg_session *sess = tg_session_new(&s->m, NULL, 1, &err);
    assert_non_null(sess);
    int32_t ids[3] = {1, 2, 3};
    float *all = malloc(3 * (size_t)base_cfg.vocab * sizeof(float));
    assert_false(tg_session_eval(sess, ids, 3, all, NULL, &err));
    assert_string_equal(err.msg, "model produced non-finite logits at position 0");
    float *last = malloc((size_t)base_cfg.vocab * sizeof(float));
    assert_false(tg_session_eval(sess, ids, 1, NULL, last, &err));
    assert_string_equal(err.msg, "model produced non-finite logits at position 3");
    free(all);
    free(last);
    tg_session_free(sess);
    synth_free(s);
}

static void test_session_needs_weights(void **state) {
    (void)state;
    synth *s = synth_new(&base_cfg, 9);
    s->m.has_weights = false;
    tg_error err = {0};
    assert_null(tg_session_new(&s->m, NULL, 1, &err));
    assert_non_null(strstr(err.msg, "no weights"));
    assert_null(tg_session_new(NULL, NULL, 1, &err));
    synth_free(s);
}

int main(void) {
    /* TG_TEST_FILTER=glob runs the tests it names alone (make test-aarch64: the whole file is too slow emulated) */
    const char *filter = getenv("TG_TEST_FILTER");
    if (filter && *filter) cmocka_set_test_filter(filter);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forward_matches_naive_half),
        cmocka_unit_test(test_forward_matches_naive_interleaved),
        cmocka_unit_test(test_forward_matches_naive_mha),
        cmocka_unit_test(test_forward_matches_naive_sliding_window),
        cmocka_unit_test(test_forward_matches_naive_shared_kv),
        cmocka_unit_test(test_forward_chunk_equals_single_tokens),
        cmocka_unit_test(test_forward_quantised_chunk_equals_single_tokens),
        cmocka_unit_test(test_forward_deep_decode_equals_chunks),
        cmocka_unit_test(test_forward_batch_equals_alone),
        cmocka_unit_test(test_forward_batch_mixed_shares),
        cmocka_unit_test(test_session_context_full),
        cmocka_unit_test(test_session_streaming_past_context),
        cmocka_unit_test(test_session_bad_ids),
        cmocka_unit_test(test_session_non_finite_logits),
        cmocka_unit_test(test_session_needs_weights),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
