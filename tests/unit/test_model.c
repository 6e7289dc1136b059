/* test_model.c — model loading from synthetic GGUF files (gguf_builder) and Hugging Face folders written here:
 * hyper-parameters, shape and name errors, unsupported architectures and RoPE scaling, tied and untied output
 * heads, vocab-only files, and the same random weights giving the same logits through both formats (GGUF with
 * llama.cpp's Q/K row permutation and interleaved RoPE, HF with rotate-half) and through F16 / Q8_0 files. */
#include <jansson.h>
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
#include "model/model.h"
#include "tinygpt.h"
#include "test_model_util.h"
#include "util/half.h"

/* ---- a set of random weights ---- */

#define MAX_TENSORS 64

typedef struct {
    char gguf[64], hf[96];
    int64_t rows, cols; /* rows = 1 for a norm (1-D) */
    float *data;        /* [rows, cols] in Hugging Face row order */
    int permute_heads;  /* > 0: Q/K rows to permute for GGUF over this many heads */
} wtensor;

typedef struct {
    int n_layers, d, n_heads, n_kv_heads, head_dim, ffn, ctx;
    bool tied;
    int n;
    wtensor t[MAX_TENSORS];
} wset;

/* The tokenizer both formats carry: the 256 byte-level symbols, "Ġt" (one merge) and <|endoftext|>. */
#define N_VOCAB 258
#define EOT_ID 257

static uint64_t rng_state = 88172645463325252ull;
static float rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static void add_tensor(wset *w, const char *gguf, const char *hf, int64_t rows, int64_t cols, bool norm,
                       int permute_heads) {
    assert_true(w->n < MAX_TENSORS);
    wtensor *t = &w->t[w->n++];
    snprintf(t->gguf, sizeof t->gguf, "%s", gguf);
    snprintf(t->hf, sizeof t->hf, "%s", hf);
    t->rows = rows;
    t->cols = cols;
    t->permute_heads = permute_heads;
    t->data = malloc((size_t)(rows * cols) * sizeof(float));
    float scale = norm ? 0.2f : 1.0f / sqrtf((float)cols);
    for (int64_t i = 0; i < rows * cols; i++) t->data[i] = (norm ? 1.0f : 0.0f) + scale * rnd();
}

static void wset_init(wset *w, int n_layers, int d, int n_heads, int n_kv_heads, int head_dim, int ffn, bool tied) {
    memset(w, 0, sizeof *w);
    w->n_layers = n_layers;
    w->d = d;
    w->n_heads = n_heads;
    w->n_kv_heads = n_kv_heads;
    w->head_dim = head_dim;
    w->ffn = ffn;
    w->ctx = 64;
    w->tied = tied;
    int qd = n_heads * head_dim, kvd = n_kv_heads * head_dim;
    add_tensor(w, "token_embd.weight", "model.embed_tokens.weight", N_VOCAB, d, false, 0);
    add_tensor(w, "output_norm.weight", "model.norm.weight", 1, d, true, 0);
    if (!tied) add_tensor(w, "output.weight", "lm_head.weight", N_VOCAB, d, false, 0);
    char g[64], h[96];
    for (int l = 0; l < n_layers; l++) {
#define LAYER(gs, hs, rows, cols, norm, perm)                                                                        \
    snprintf(g, sizeof g, "blk.%d.%s", l, gs);                                                                       \
    snprintf(h, sizeof h, "model.layers.%d.%s", l, hs);                                                              \
    add_tensor(w, g, h, rows, cols, norm, perm)
        LAYER("attn_norm.weight", "input_layernorm.weight", 1, d, true, 0);
        LAYER("attn_q.weight", "self_attn.q_proj.weight", qd, d, false, n_heads);
        LAYER("attn_k.weight", "self_attn.k_proj.weight", kvd, d, false, n_kv_heads);
        LAYER("attn_v.weight", "self_attn.v_proj.weight", kvd, d, false, 0);
        LAYER("attn_output.weight", "self_attn.o_proj.weight", d, qd, false, 0);
        LAYER("ffn_norm.weight", "post_attention_layernorm.weight", 1, d, true, 0);
        LAYER("ffn_gate.weight", "mlp.gate_proj.weight", ffn, d, false, 0);
        LAYER("ffn_up.weight", "mlp.up_proj.weight", ffn, d, false, 0);
        LAYER("ffn_down.weight", "mlp.down_proj.weight", d, ffn, false, 0);
#undef LAYER
    }
}

static void wset_free(wset *w) {
    for (int i = 0; i < w->n; i++) free(w->t[i].data);
}

static const wtensor *wset_find(const wset *w, const char *hf_name) {
    for (int i = 0; i < w->n; i++)
        if (strcmp(w->t[i].hf, hf_name) == 0) return &w->t[i];
    fail_msg("no tensor %s", hf_name);
    return NULL;
}

static int64_t wset_params(const wset *w) {
    int64_t n = 0;
    for (int i = 0; i < w->n; i++) n += w->t[i].rows * w->t[i].cols;
    return n;
}

/* ---- the byte-level vocabulary ---- */

/* GPT-2's bytes_to_unicode: printable bytes map to themselves, the others to 256, 257, ... in order. */
static void byte_symbol(int byte, char out[4]) {
    int cp = byte, n = 0;
    bool printable = (byte >= 33 && byte <= 126) || (byte >= 161 && byte <= 172) || (byte >= 174 && byte <= 255);
    if (!printable) {
        for (int b = 0; b < byte; b++)
            if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) n++;
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

static char *dup_str(const char *s) {
    char *d = malloc(strlen(s) + 1);
    return strcpy(d, s);
}

/* token strings [N_VOCAB], malloc'd */
static char **vocab_tokens(void) {
    char **t = calloc(N_VOCAB, sizeof *t);
    for (int b = 0; b < 256; b++) {
        t[b] = calloc(4, 1);
        byte_symbol(b, t[b]);
    }
    t[256] = dup_str("\xC4\xA0t"); /* "Ġt" */
    t[EOT_ID] = dup_str("<|endoftext|>");
    return t;
}

static void vocab_free(char **t) {
    for (int i = 0; i < N_VOCAB; i++) free(t[i]);
    free(t);
}

/* ---- writing a GGUF file ---- */

typedef struct {
    const char *arch;         /* general.architecture (default "llama") */
    const char *skip;         /* GGUF name of a tensor to leave out */
    const char *bad_shape;    /* GGUF name of a tensor written with one row too many */
    const char *omit_key;     /* a llama.* key suffix to leave out */
    const char *rope_scaling; /* llama.rope.scaling.type */
    float rope_factor;        /* > 0: llama.rope.scaling.factor */
    const float *rope_freqs;  /* [head_dim / 2]: a rope_freqs.weight tensor (llama.cpp's Llama 3.1 factors) */
    bool extra_output;        /* write output.weight even for a tied set */
    uint32_t type;            /* matrices' ggml type (F32 default) */
    bool no_tensors;          /* vocab-only */
    uint32_t vocab_size_key;  /* llama.vocab_size to write (0: none) */
} gguf_opts;

static void quantize_q8_0(const float *x, int64_t n, uint8_t *out) {
    for (int64_t b = 0; b < n / 32; b++) {
        float amax = 0;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[b * 32 + i]));
        float dd = amax / 127.0f;
        uint16_t h = tg_f32_to_f16(dd);
        float dq = tg_f16_to_f32(h);
        memcpy(out + b * 34, &h, 2);
        for (int i = 0; i < 32; i++) {
            float q = dq > 0 ? roundf(x[b * 32 + i] / dq) : 0.0f;
            out[b * 34 + 2 + i] = (uint8_t)(int8_t)fmaxf(-127.0f, fminf(127.0f, q));
        }
    }
}

static void add_meta_u32(gguf_builder *b, const gguf_opts *o, const char *suffix, uint32_t v) {
    if (o->omit_key && strcmp(o->omit_key, suffix) == 0) return;
    char key[96];
    snprintf(key, sizeof key, "llama.%s", suffix);
    gguf_builder_add_u32(b, key, v);
}

static void write_gguf(const wset *w, const gguf_opts *o, const char *path) {
    gguf_builder *b = gguf_builder_new();
    gguf_builder_add_str(b, "general.architecture", o->arch ? o->arch : "llama");
    add_meta_u32(b, o, "block_count", (uint32_t)w->n_layers);
    add_meta_u32(b, o, "context_length", (uint32_t)w->ctx);
    add_meta_u32(b, o, "embedding_length", (uint32_t)w->d);
    add_meta_u32(b, o, "feed_forward_length", (uint32_t)w->ffn);
    add_meta_u32(b, o, "attention.head_count", (uint32_t)w->n_heads);
    add_meta_u32(b, o, "attention.head_count_kv", (uint32_t)w->n_kv_heads);
    if (w->head_dim != w->d / w->n_heads) add_meta_u32(b, o, "attention.key_length", (uint32_t)w->head_dim);
    add_meta_u32(b, o, "rope.dimension_count", (uint32_t)w->head_dim);
    gguf_builder_add_f32(b, "llama.rope.freq_base", 10000.0f);
    if (!(o->omit_key && strcmp(o->omit_key, "attention.layer_norm_rms_epsilon") == 0))
        gguf_builder_add_f32(b, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    if (o->rope_scaling) gguf_builder_add_str(b, "llama.rope.scaling.type", o->rope_scaling);
    if (o->rope_factor > 0) gguf_builder_add_f32(b, "llama.rope.scaling.factor", o->rope_factor);
    if (o->rope_freqs) {
        const int64_t ne[1] = {w->head_dim / 2};
        gguf_builder_add_tensor(b, "rope_freqs.weight", GGUF_BUILDER_F32, 1, ne, o->rope_freqs);
    }
    if (o->vocab_size_key) gguf_builder_add_u32(b, "llama.vocab_size", o->vocab_size_key);
    char **tokens = vocab_tokens();
    gguf_builder_add_str(b, "tokenizer.ggml.model", "gpt2");
    gguf_builder_add_str(b, "tokenizer.ggml.pre", "gpt-2");
    gguf_builder_add_arr_str(b, "tokenizer.ggml.tokens", N_VOCAB, (const char *const *)tokens);
    int32_t types[N_VOCAB];
    for (int i = 0; i < N_VOCAB; i++) types[i] = i == EOT_ID ? 3 : 1;
    gguf_builder_add_arr_i32(b, "tokenizer.ggml.token_type", N_VOCAB, types);
    const char *merges[1] = {"\xC4\xA0 t"};
    gguf_builder_add_arr_str(b, "tokenizer.ggml.merges", 1, merges);
    gguf_builder_add_u32(b, "tokenizer.ggml.bos_token_id", EOT_ID);
    gguf_builder_add_u32(b, "tokenizer.ggml.eos_token_id", EOT_ID);
    vocab_free(tokens);

    for (int i = 0; i < w->n && !o->no_tensors; i++) {
        const wtensor *t = &w->t[i];
        if (o->skip && strcmp(o->skip, t->gguf) == 0) continue;
        int64_t rows = t->rows + (o->bad_shape && strcmp(o->bad_shape, t->gguf) == 0 ? 1 : 0);
        float *f = calloc((size_t)(rows * t->cols), sizeof *f);
        for (int64_t r = 0; r < t->rows; r++) {
            int64_t src = r;
            if (t->permute_heads > 0) { /* llama.cpp's permute: row h*hd + 2i + j <- row h*hd + j*hd/2 + i */
                int64_t hd = t->rows / t->permute_heads, h = r / hd, within = r % hd;
                src = h * hd + (within % 2) * (hd / 2) + within / 2;
            }
            memcpy(f + r * t->cols, t->data + src * t->cols, (size_t)t->cols * sizeof(float));
        }
        bool norm = t->rows == 1;
        uint32_t type = norm ? GGUF_BUILDER_F32 : o->type;
        int64_t ne[2] = {t->cols, rows};
        if (type == GGUF_BUILDER_F32) {
            gguf_builder_add_tensor(b, t->gguf, type, norm ? 1 : 2, ne, f);
        } else if (type == GGUF_BUILDER_F16) {
            uint16_t *h = malloc((size_t)(rows * t->cols) * 2);
            for (int64_t k = 0; k < rows * t->cols; k++) h[k] = tg_f32_to_f16(f[k]);
            gguf_builder_add_tensor(b, t->gguf, type, 2, ne, h);
            free(h);
        } else {
            uint8_t *q = malloc((size_t)(rows * t->cols / 32 * 34));
            quantize_q8_0(f, rows * t->cols, q);
            gguf_builder_add_tensor(b, t->gguf, type, 2, ne, q);
            free(q);
        }
        free(f);
    }
    if (w->tied && o->extra_output && !o->no_tensors) {
        int64_t ne[2] = {w->d, N_VOCAB};
        gguf_builder_add_tensor(b, "output.weight", GGUF_BUILDER_F32, 2, ne, w->t[0].data);
    }
    assert_true(gguf_builder_write(b, path));
    gguf_builder_free(b);
}

/* ---- writing a Hugging Face folder ---- */

static void write_safetensors(const wset *w, const char *path, const char *skip) {
    json_t *hdr = json_object();
    size_t off = 0;
    for (int i = 0; i < w->n; i++) {
        const wtensor *t = &w->t[i];
        if (skip && strcmp(skip, t->hf) == 0) continue;
        size_t nb = (size_t)(t->rows * t->cols) * 4;
        json_t *e = json_pack("{s:s, s:o, s:[I, I]}", "dtype", "F32", "shape",
                              t->rows == 1 ? json_pack("[I]", (json_int_t)t->cols)
                                           : json_pack("[I, I]", (json_int_t)t->rows, (json_int_t)t->cols),
                              "data_offsets", (json_int_t)off, (json_int_t)(off + nb));
        json_object_set_new(hdr, t->hf, e);
        off += nb;
    }
    char *js = json_dumps(hdr, JSON_COMPACT);
    json_decref(hdr);
    size_t hl = strlen(js), padded = (hl + 7) / 8 * 8;
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint64_t n = padded;
    fwrite(&n, 8, 1, f);
    fwrite(js, 1, hl, f);
    for (size_t i = hl; i < padded; i++) fputc(' ', f);
    for (int i = 0; i < w->n; i++) {
        const wtensor *t = &w->t[i];
        if (skip && strcmp(skip, t->hf) == 0) continue;
        fwrite(t->data, 4, (size_t)(t->rows * t->cols), f);
    }
    fclose(f);
    free(js);
}

static void write_tokenizer_json(const char *path) {
    char **tokens = vocab_tokens();
    json_t *vocab = json_object();
    for (int i = 0; i < EOT_ID; i++) json_object_set_new(vocab, tokens[i], json_integer(i));
    json_t *root = json_pack(
        "{s:s, s:[{s:i, s:s, s:b, s:b, s:b, s:b, s:b}], s:n, s:{s:s, s:b, s:b, s:b}, s:n, s:{s:s, s:b, s:b, s:b},"
        " s:{s:s, s:n, s:n, s:n, s:n, s:b, s:b, s:o, s:[s]}}",
        "version", "1.0", "added_tokens", "id", EOT_ID, "content", "<|endoftext|>", "single_word", 0, "lstrip", 0,
        "rstrip", 0, "normalized", 0, "special", 1, "normalizer", "pre_tokenizer", "type", "ByteLevel",
        "add_prefix_space", 0, "trim_offsets", 1, "use_regex", 1, "post_processor", "decoder", "type", "ByteLevel",
        "add_prefix_space", 1, "trim_offsets", 1, "use_regex", 1, "model", "type", "BPE", "dropout",
        "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", 0, "byte_fallback", 0, "vocab",
        vocab, "merges", "\xC4\xA0 t");
    assert_non_null(root);
    assert_int_equal(json_dump_file(root, path, 0), 0);
    json_decref(root);
    vocab_free(tokens);
}

/* config.json for w; `extra` (a JSON object text or NULL) is merged over the defaults. */
static void write_config(const wset *w, const char *path, const char *arch, const char *extra) {
    json_t *c = json_pack("{s:[s], s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:f, s:i, s:i, s:b, s:f, s:s}",
                          "architectures", arch, "model_type", "llama", "hidden_size", w->d, "intermediate_size",
                          w->ffn, "num_hidden_layers", w->n_layers, "num_attention_heads", w->n_heads,
                          "num_key_value_heads", w->n_kv_heads, "head_dim", w->head_dim, "rms_norm_eps", 1e-5,
                          "max_position_embeddings", w->ctx, "vocab_size", N_VOCAB, "tie_word_embeddings", w->tied,
                          "rope_theta", 10000.0, "hidden_act", "silu");
    assert_non_null(c);
    if (extra) {
        json_error_t je;
        json_t *e = json_loads(extra, 0, &je);
        assert_non_null(e);
        json_object_update(c, e);
        json_decref(e);
    }
    assert_int_equal(json_dump_file(c, path, 0), 0);
    json_decref(c);
}

/* A Hugging Face folder in a new temp dir (caller removes it). */
static char *write_hf(const wset *w, const char *arch, const char *extra_config, const char *skip) {
    char *dir = gguf_builder_tmpdir();
    assert_non_null(dir);
    char *p = gguf_builder_path(dir, "config.json");
    write_config(w, p, arch, extra_config);
    free(p);
    p = gguf_builder_path(dir, "model.safetensors");
    write_safetensors(w, p, skip);
    free(p);
    p = gguf_builder_path(dir, "tokenizer.json");
    write_tokenizer_json(p);
    free(p);
    return dir;
}

/* ---- helpers ---- */

typedef struct {
    char *dir, *path;
} tmpfile_t;

static tmpfile_t gguf_file(const wset *w, const gguf_opts *o) {
    tmpfile_t t;
    t.dir = gguf_builder_tmpdir();
    assert_non_null(t.dir);
    t.path = gguf_builder_path(t.dir, "model.gguf");
    write_gguf(w, o, t.path);
    return t;
}

static void tmp_remove(tmpfile_t *t) {
    gguf_builder_rmdir(t->dir);
    free(t->dir);
    free(t->path);
}

/* Loading must fail with a message containing every one of the (NULL-terminated) fragments. */
static void expect_load_error(const char *path, ...) {
    tg_error err = {0};
    tg_model *m = tg_model_load(path, &err);
    if (m) {
        tg_model_free(m);
        fail_msg("%s loaded, expected an error", path);
    }
    va_list ap;
    va_start(ap, path);
    for (const char *frag; (frag = va_arg(ap, const char *)) != NULL;)
        if (!strstr(err.msg, frag)) fail_msg("error \"%s\" lacks \"%s\"", err.msg, frag);
    va_end(ap);
}

static void expect_gguf_error(const wset *w, const gguf_opts *o, const char *frag1, const char *frag2) {
    tmpfile_t t = gguf_file(w, o);
    expect_load_error(t.path, frag1, frag2, (const char *)NULL);
    tmp_remove(&t);
}

/* Logits [n, vocab] of a fixed sequence of n <= 64 tokens, prefilled at once (malloc'd). */
static float *run_logits(const tg_model *m, int n) {
    tg_error err = {0};
    tg_session *s = tg_session_new(m, NULL, 1, &err);
    if (!s) fail_msg("tg_session_new: %s", err.msg);
    int32_t ids[64];
    assert_true(n <= 64);
    for (int i = 0; i < n; i++) ids[i] = (int32_t)((i * 37 + 11) % N_VOCAB);
    float *out = malloc((size_t)n * N_VOCAB * sizeof(float));
    if (!tg_session_eval(s, ids, (size_t)n, out, NULL, &err)) fail_msg("eval: %s", err.msg);
    tg_session_free(s);
    return out;
}

static double max_diff(const float *a, const float *b, size_t n) {
    double mx = 0;
    for (size_t i = 0; i < n; i++) {
        double dd = fabs((double)a[i] - (double)b[i]);
        if (!(dd <= mx)) mx = dd;
    }
    return mx;
}

/* ---- tests: GGUF ---- */

static void test_gguf_loads_hparams_and_info(void **state) {
    (void)state;
    wset w;
    wset_init(&w, 2, 32, 4, 2, 16, 64, false);
    gguf_opts o = {.type = GGUF_BUILDER_F32};
    tmpfile_t t = gguf_file(&w, &o);
    tg_model *m = load_model(t.path);
    const tg_hparams *hp = &m->hp;
    assert_string_equal(hp->architecture, "llama");
    assert_int_equal(hp->n_layers, 2);
    assert_int_equal(hp->d_model, 32);
    assert_int_equal(hp->n_heads, 4);
    assert_int_equal(hp->n_kv_heads, 2);
    assert_int_equal(hp->head_dim, 16);
    assert_int_equal(hp->ffn_dim, 64);
    assert_int_equal(hp->vocab_size, N_VOCAB);
    assert_int_equal(hp->context_length, 64);
    assert_int_equal(hp->rope_style, TG_ROPE_INTERLEAVED);
    assert_true(fabsf(hp->norm_eps - 1e-5f) < 1e-12f);
    assert_true(hp->rope_theta == 10000.0f);
    assert_false(hp->tied_embeddings);
    assert_int_equal(hp->kv_source[0], 0);
    assert_int_equal(hp->kv_source[1], 1);
    assert_ptr_not_equal(m->lm_head.data, m->tok_embd.data);
    /* the norms are owned f32 copies equal to the file's */
    assert_true(max_diff(m->layers[1].ffn_norm, wset_find(&w, "model.layers.1.post_attention_layernorm.weight")->data,
                         32) == 0.0);
    tg_model_info info;
    tg_model_get_info(m, &info);
    assert_string_equal(info.weight_types, "F32");
    assert_int_equal(info.n_params, wset_params(&w));
    assert_int_equal(info.weight_bytes, 4 * (wset_params(&w) - N_VOCAB * 32)); /* the embedding is looked up */
    assert_int_equal(info.n_kv_layers, 2);
    assert_int_equal(info.vocab_size, N_VOCAB);
    assert_int_equal(tg_vocab_size(m), N_VOCAB);
    assert_true(info.has_weights);
    assert_int_equal(tg_token_eos(m), EOT_ID);
    assert_ptr_equal(tg_model_tokenizer(m), m->tokenizer);
    tg_model_free(m);
    tmp_remove(&t);
    wset_free(&w);
}

static void test_gguf_tied_output(void **state) {
    (void)state;
    wset w;
    wset_init(&w, 1, 32, 2, 2, 16, 32, true);
    gguf_opts o = {.type = GGUF_BUILDER_F16};
    tmpfile_t t = gguf_file(&w, &o);
    tg_model *m = load_model(t.path);
    assert_true(m->hp.tied_embeddings);
    assert_ptr_equal(m->lm_head.data, m->tok_embd.data);
    tg_model_info info;
    tg_model_get_info(m, &info);
    assert_true(info.tied_embeddings);
    assert_string_equal(info.weight_types, "F16 (+F32 norms)");
    assert_int_equal(info.n_params, wset_params(&w));
    int64_t norm_params = 3 * 32; /* attn + ffn norm of the one layer, the output norm */
    assert_int_equal(info.weight_bytes, 2 * (wset_params(&w) - norm_params) + 4 * norm_params); /* tied: all read */
    tg_model_free(m);
    tmp_remove(&t);
    wset_free(&w);
}

static void test_gguf_shape_mismatch(void **state) {
    (void)state;
    wset w;
    wset_init(&w, 2, 32, 4, 2, 8, 64, false);
    gguf_opts o = {.type = GGUF_BUILDER_F32, .bad_shape = "blk.1.attn_k.weight"};
    expect_gguf_error(&w, &o, "blk.1.attn_k.weight", "expected [16, 32]");
    o.bad_shape = "blk.0.ffn_down.weight";
    expect_gguf_error(&w, &o, "blk.0.ffn_down.weight", "[33, 64]");
    o.bad_shape = "token_embd.weight";
    expect_gguf_error(&w, &o, "token_embd.weight", "expected [258, 32]");
    wset_free(&w);
}

static void test_gguf_missing_tensor(void **state) {
    (void)state;
    wset w;
    wset_init(&w, 2, 32, 4, 4, 8, 64, false);
    gguf_opts o = {.type = GGUF_BUILDER_F32, .skip = "blk.1.ffn_up.weight"};
    expect_gguf_error(&w, &o, "blk.1.ffn_up.weight", "not found");
    o.skip = "output_norm.weight";
    expect_gguf_error(&w, &o, "output_norm.weight", "not found");
    wset_free(&w);
}

static void test_gguf_bad_metadata(void **state) {
    (void)state;
    wset w;
    wset_init(&w, 1, 32, 4, 4, 8, 64, false);
    gguf_opts o = {.type = GGUF_BUILDER_F32, .arch = "gpt2"};
    expect_gguf_error(&w, &o, "unsupported architecture 'gpt2'", NULL);
    o.arch = NULL;
    o.omit_key = "block_count";
    expect_gguf_error(&w, &o, "llama.block_count", NULL);
    o.omit_key = "attention.layer_norm_rms_epsilon";
    expect_gguf_error(&w, &o, "layer_norm_rms_epsilon", NULL);
    o.omit_key = NULL;
    o.rope_scaling = "yarn";
    expect_gguf_error(&w, &o, "rope scaling type 'yarn' is not supported", NULL);
    o.rope_scaling = NULL;
    o.vocab_size_key = 200;
    expect_gguf_error(&w, &o, "the tokenizer has 258 tokens but llama.vocab_size is 200", NULL);
    o.vocab_size_key = 300; /* a padded vocabulary: the embedding must then have 300 rows */
    expect_gguf_error(&w, &o, "token_embd.weight", "expected [300, 32]");
    o.vocab_size_key = N_VOCAB;
    o.rope_scaling = "none";
    tmpfile_t t = gguf_file(&w, &o);
    tg_model *m = load_model(t.path);
    tg_model_free(m);
    tmp_remove(&t);
    wset_free(&w);
}

static void test_gguf_vocab_only(void **state) {
    (void)state;
    wset w;
    wset_init(&w, 1, 32, 4, 4, 8, 64, false);
    gguf_opts o = {.no_tensors = true, .arch = "gpt2"};
    tmpfile_t t = gguf_file(&w, &o);
    tg_model *m = load_model(t.path);
    assert_false(m->has_weights);
    tg_model_info info;
    tg_model_get_info(m, &info);
    assert_false(info.has_weights);
    assert_string_equal(info.architecture, "gpt2");
    assert_int_equal(info.vocab_size, N_VOCAB);
    tg_error err = {0};
    assert_null(tg_session_new(m, NULL, 1, &err));
    assert_non_null(strstr(err.msg, "no weights"));
    tg_model_free(m);
    tmp_remove(&t);
    wset_free(&w);
}

/* The vocab-only files of llama.cpp's test suite load (their tokenizers are exercised elsewhere). */
static void test_gguf_vocab_only_llama_cpp_files(void **state) {
    (void)state;
    const char *files[] = {"/work/shared/testdata/vocab/ggml-vocab-llama-spm.gguf",
                           "/work/shared/testdata/vocab/ggml-vocab-gpt-2.gguf"};
    const int vocab[] = {32000, 50257};
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(files[i], "rb");
        if (!f) continue; /* the shared test data is optional outside the project machine */
        fclose(f);
        tg_model *m = load_model(files[i]);
        tg_model_info info;
        tg_model_get_info(m, &info);
        assert_false(info.has_weights);
        assert_int_equal(info.vocab_size, vocab[i]);
        assert_int_equal(tg_vocab_size(m), vocab[i]);
        tg_model_free(m);
    }
}

static void test_not_a_model(void **state) {
    (void)state;
    char *dir = gguf_builder_tmpdir();
    char *p = gguf_builder_path(dir, "notes.txt");
    assert_true(gguf_builder_write_bytes(p, "hello, world", 12));
    expect_load_error(p, "not a model (expected a GGUF file or a Hugging Face folder)", (const char *)NULL);
    expect_load_error(dir, "config.json", (const char *)NULL); /* a folder without config.json */
    expect_load_error("/dev/null", "not a model", (const char *)NULL);
    free(p);
    p = gguf_builder_path(dir, "missing.gguf");
    expect_load_error(p, "missing.gguf", "cannot open", (const char *)NULL);
    free(p);
    gguf_builder_rmdir(dir);
    free(dir);
}

/* ---- tests: Hugging Face ---- */

static void test_hf_loads(void **state) {
    (void)state;
    wset w;
    wset_init(&w, 2, 32, 4, 2, 16, 64, false);
    char *dir = write_hf(&w, "MistralForCausalLM", "{\"sliding_window\": 7}", NULL);
    tg_model *m = load_model(dir);
    const tg_hparams *hp = &m->hp;
    assert_string_equal(hp->architecture, "mistral");
    assert_int_equal(hp->head_dim, 16);
    assert_int_equal(hp->n_kv_heads, 2);
    assert_int_equal(hp->sliding_window, 7);
    assert_int_equal(hp->rope_style, TG_ROPE_HALF);
    assert_false(hp->tied_embeddings);
    tg_model_info info;
    tg_model_get_info(m, &info);
    assert_string_equal(info.weight_types, "F32");
    assert_int_equal(info.n_params, wset_params(&w));
    assert_int_equal(info.sliding_window, 7);
    tg_model_free(m);
    gguf_builder_rmdir(dir);
    free(dir);
    wset_free(&w);
}

static void test_hf_config_variants(void **state) {
    (void)state;
    wset w;
    wset_init(&w, 1, 32, 4, 4, 8, 32, true);
    /* tied, no head_dim / num_key_value_heads / sliding_window for Llama, rope_parameters with a default type */
    char *dir = write_hf(&w, "LlamaForCausalLM",
                         "{\"head_dim\": null, \"num_key_value_heads\": null, \"sliding_window\": 5, \"rope_theta\": "
                         "null, \"rope_parameters\": {\"rope_theta\": 500000.0, \"rope_type\": \"default\"}}",
                         NULL);
    tg_model *m = load_model(dir);
    assert_int_equal(m->hp.head_dim, 8);
    assert_int_equal(m->hp.n_kv_heads, 4);
    assert_int_equal(m->hp.sliding_window, 0);
    assert_true(m->hp.rope_theta == 500000.0f);
    assert_true(m->hp.tied_embeddings);
    assert_ptr_equal(m->lm_head.data, m->tok_embd.data);
    tg_model_free(m);
    gguf_builder_rmdir(dir);
    free(dir);
    wset_free(&w);
}

static void expect_hf_error(const wset *w, const char *arch, const char *extra, const char *skip, const char *frag) {
    char *dir = write_hf(w, arch, extra, skip);
    expect_load_error(dir, frag, (const char *)NULL);
    gguf_builder_rmdir(dir);
    free(dir);
}

static void test_hf_errors(void **state) {
    (void)state;
    wset w;
    wset_init(&w, 1, 32, 4, 4, 8, 32, false);
    expect_hf_error(&w, "GPT2LMHeadModel", NULL, NULL, "unsupported architecture 'GPT2LMHeadModel'");
    expect_hf_error(&w, "LlamaForCausalLM", "{\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0}}", NULL,
                    "rope_scaling type 'yarn' is not supported");
    expect_hf_error(&w, "LlamaForCausalLM", "{\"rope_parameters\": {\"rope_type\": \"dynamic\", \"factor\": 8.0}}",
                    NULL, "rope_parameters type 'dynamic' is not supported (supported: default, linear, llama3)");
    expect_hf_error(&w, "LlamaForCausalLM", "{\"rope_parameters\": {\"rope_type\": \"llama3\", \"factor\": 8.0}}",
                    NULL, "rope_parameters type 'llama3' needs \"low_freq_factor\"");
    expect_hf_error(&w, "LlamaForCausalLM",
                    "{\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 4, "
                    "\"high_freq_factor\": 4, \"original_max_position_embeddings\": 16}}",
                    NULL, "\"high_freq_factor\" 4 must exceed \"low_freq_factor\" 4");
    expect_hf_error(&w, "LlamaForCausalLM", "{\"rope_scaling\": {\"type\": \"linear\", \"factor\": -2.0}}", NULL,
                    "rope_scaling \"factor\" must be a positive number");
    expect_hf_error(&w, "LlamaForCausalLM", "{\"rope_scaling\": {\"type\": \"linear\"}}", NULL,
                    "rope_scaling type 'linear' needs \"factor\"");
    expect_hf_error(&w, "LlamaForCausalLM",
                    "{\"rope_parameters\": {\"full_attention\": {\"rope_type\": \"default\"}}}", NULL,
                    "rope_parameters per layer type ('full_attention') is not supported");
    expect_hf_error(&w, "LlamaForCausalLM", "{\"partial_rotary_factor\": 0.5, \"rope_parameters\": {\"rope_type\": "
                    "\"default\", \"partial_rotary_factor\": 0.5}}", NULL, "partial RoPE) is not supported");
    expect_hf_error(&w, "LlamaForCausalLM", "{\"hidden_size\": 64}", NULL, "model.embed_tokens.weight");
    expect_hf_error(&w, "LlamaForCausalLM", "{\"num_key_value_heads\": 3}", NULL, "must divide");
    expect_hf_error(&w, "LlamaForCausalLM", "{\"hidden_act\": \"gelu\"}", NULL, "hidden_act 'gelu'");
    expect_hf_error(&w, "LlamaForCausalLM", "{\"attention_bias\": true}", NULL, "attention_bias");
    expect_hf_error(&w, "LlamaForCausalLM", "{\"num_hidden_layers\": \"two\"}", NULL, "num_hidden_layers");
    expect_hf_error(&w, "LlamaForCausalLM", NULL, "lm_head.weight", "lm_head.weight");
    expect_hf_error(&w, "LlamaForCausalLM", NULL, "model.layers.0.mlp.up_proj.weight",
                    "model.layers.0.mlp.up_proj.weight");
    expect_hf_error(&w, "LlamaForCausalLM", "{\"intermediate_size\": 48}", NULL, "model.layers.0.mlp.gate_proj");
    wset_free(&w);
}

/* ---- the same weights through both formats ---- */

static void test_hf_and_gguf_agree(void **state) {
    (void)state;
    wset w;
    wset_init(&w, 2, 32, 4, 2, 16, 64, false);
    char *dir = write_hf(&w, "LlamaForCausalLM", NULL, NULL);
    gguf_opts o = {.type = GGUF_BUILDER_F32};
    tmpfile_t t32 = gguf_file(&w, &o);
    o.type = GGUF_BUILDER_F16;
    tmpfile_t t16 = gguf_file(&w, &o);
    o.type = GGUF_BUILDER_Q8_0;
    tmpfile_t tq8 = gguf_file(&w, &o);
    tg_model *hf = load_model(dir), *g32 = load_model(t32.path), *g16 = load_model(t16.path), *gq8 = load_model(tq8.path);
    int n = 12;
    size_t count = (size_t)n * N_VOCAB;
    float *a = run_logits(hf, n), *b = run_logits(g32, n), *c = run_logits(g16, n), *d = run_logits(gq8, n);
    double d32 = max_diff(a, b, count), d16 = max_diff(a, c, count), dq8 = max_diff(a, d, count);
    /* logits are O(1) here: F16 weights round to 2^-11 relative, Q8_0 to about 1/254 of each block's maximum */
    if (!(d32 <= 1e-4)) fail_msg("HF vs GGUF F32: max diff %g", d32);
    if (!(d16 <= 5e-3)) fail_msg("HF vs GGUF F16: max diff %g", d16);
    if (!(dq8 <= 0.1)) fail_msg("HF vs GGUF Q8_0: max diff %g", dq8);
    assert_true(d16 > 0.0); /* the files really differ */
    tg_model_info info;
    tg_model_get_info(gq8, &info);
    assert_string_equal(info.weight_types, "Q8_0 (+F32 norms)");

    /* the two tokenizers are the same */
    int32_t *i1 = NULL, *i2 = NULL;
    size_t n1 = 0, n2 = 0;
    tg_error err = {0};
    if (!tg_tokenize(hf, "at tea", 6, false, &i1, &n1, &err)) fail_msg("tokenize: %s", err.msg);
    if (!tg_tokenize(g32, "at tea", 6, false, &i2, &n2, &err)) fail_msg("tokenize: %s", err.msg);
    assert_int_equal(n1, n2);
    assert_memory_equal(i1, i2, n1 * sizeof *i1);
    free(i1);
    free(i2);

    free(a), free(b), free(c), free(d);
    tg_model_free(hf);
    tg_model_free(g32);
    tg_model_free(g16);
    tg_model_free(gq8);
    tmp_remove(&t32);
    tmp_remove(&t16);
    tmp_remove(&tq8);
    gguf_builder_rmdir(dir);
    free(dir);
    wset_free(&w);
}

/* llama.cpp's convert_hf_to_gguf.py for Llama 3.1: the factor each pair's frequency is divided by. */
static void llama_cpp_rope_freqs(int head_dim, double theta, double factor, double low, double high, double old_ctx,
                                 float *out) {
    const double pi = 3.14159265358979323846;
    for (int i = 0; i < head_dim / 2; i++) {
        const double freq = 1.0 / pow(theta, 2.0 * i / head_dim), wavelen = 2 * pi / freq;
        if (wavelen < old_ctx / high) out[i] = 1.0f;
        else if (wavelen > old_ctx / low) out[i] = (float)factor;
        else {
            const double smooth = (old_ctx / wavelen - low) / (high - low);
            out[i] = (float)(1.0 / ((1 - smooth) / factor + smooth));
        }
    }
}

/* The same weights with Llama 3.1 RoPE scaling as a Hugging Face config (rope_scaling llama3) and as llama.cpp
 * writes it (rope_freqs.weight), and with linear scaling both ways, give the same logits; unscaled they differ. */
static void test_rope_scaling_hf_and_gguf_agree(void **state) {
    (void)state;
    wset w;
    wset_init(&w, 2, 32, 4, 2, 16, 64, false);
    const int n = 60;
    const size_t count = (size_t)n * N_VOCAB;
    char *hf3 = write_hf(&w, "LlamaForCausalLM", "{\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0, "
                         "\"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, \"original_max_position_embeddings\": 64}}",
                         NULL);
    char *hf_lin = write_hf(&w, "LlamaForCausalLM", "{\"rope_parameters\": {\"rope_type\": \"linear\", \"factor\": 4.0}}",
                            NULL);
    float freqs[8];
    llama_cpp_rope_freqs(16, 10000.0, 8.0, 1.0, 4.0, 64.0, freqs);
    /* the pairs span the rule's regions: pair 0 kept, 1 and 2 smoothed, 3.. divided */
    assert_true(freqs[0] == 1.0f && freqs[1] > 1.0f && freqs[2] < 8.0f && freqs[3] == 8.0f && freqs[7] == 8.0f);
    gguf_opts o3 = {.type = GGUF_BUILDER_F32, .rope_freqs = freqs};
    gguf_opts o_lin = {.type = GGUF_BUILDER_F32, .rope_scaling = "linear", .rope_factor = 4.0f};
    gguf_opts o_plain = {.type = GGUF_BUILDER_F32};
    tmpfile_t g3 = gguf_file(&w, &o3), g_lin = gguf_file(&w, &o_lin), g_plain = gguf_file(&w, &o_plain);
    tg_model *m_hf3 = load_model(hf3), *m_g3 = load_model(g3.path), *m_hl = load_model(hf_lin), *m_gl = load_model(g_lin.path),
             *m_gp = load_model(g_plain.path);
    tg_model_info info;
    tg_model_get_info(m_g3, &info);
    assert_string_equal(info.rope_scaling, "rope_freqs.weight factors (Llama 3.1 form)");
    tg_model_get_info(m_gl, &info);
    assert_string_equal(info.rope_scaling, "linear (factor 4)");
    float *a = run_logits(m_hf3, n), *b = run_logits(m_g3, n), *c = run_logits(m_hl, n), *d = run_logits(m_gl, n),
          *e = run_logits(m_gp, n);
    const double d3 = max_diff(a, b, count), dl = max_diff(c, d, count), dp = max_diff(a, e, count);
    /* F32 weights: only the rounding of rope_freqs.weight to f32 and summation order differ */
    if (!(d3 <= 1e-4)) fail_msg("llama3: HF vs GGUF rope_freqs: max diff %g", d3);
    if (!(dl <= 1e-4)) fail_msg("linear: HF vs GGUF: max diff %g", dl);
    if (!(dp > 1e-3)) fail_msg("llama3 vs unscaled: max diff only %g", dp);
    free(a), free(b), free(c), free(d), free(e);
    tg_model_free(m_hf3), tg_model_free(m_g3), tg_model_free(m_hl), tg_model_free(m_gl), tg_model_free(m_gp);
    tmp_remove(&g3), tmp_remove(&g_lin), tmp_remove(&g_plain);
    gguf_builder_rmdir(hf3), gguf_builder_rmdir(hf_lin);
    free(hf3), free(hf_lin);

    /* bad GGUF scalings: one line each */
    o_lin.rope_scaling = "yarn";
    expect_gguf_error(&w, &o_lin, "rope scaling type 'yarn' is not supported (supported: none, linear", NULL);
    o_lin.rope_scaling = "linear";
    o_lin.rope_factor = 0.0f;
    expect_gguf_error(&w, &o_lin, "rope scaling type 'linear' without llama.rope.scaling.factor", NULL);
    freqs[3] = 0.0f;
    expect_gguf_error(&w, &o3, "rope_freqs.weight[3] = 0 must be a positive number", NULL);
    wset_free(&w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gguf_loads_hparams_and_info),
        cmocka_unit_test(test_gguf_tied_output),
        cmocka_unit_test(test_gguf_shape_mismatch),
        cmocka_unit_test(test_gguf_missing_tensor),
        cmocka_unit_test(test_gguf_bad_metadata),
        cmocka_unit_test(test_gguf_vocab_only),
        cmocka_unit_test(test_gguf_vocab_only_llama_cpp_files),
        cmocka_unit_test(test_not_a_model),
        cmocka_unit_test(test_hf_loads),
        cmocka_unit_test(test_hf_config_variants),
        cmocka_unit_test(test_hf_errors),
        cmocka_unit_test(test_hf_and_gguf_agree),
        cmocka_unit_test(test_rope_scaling_hf_and_gguf_agree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
