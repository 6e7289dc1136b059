/* model.c — deciding what a path is (GGUF file or Hugging Face folder), binding format-independent weight views,
 * model info, and the tokenizer entry points of the public API. */
#define _POSIX_C_SOURCE 200809L
#include "model/model.h"
#include "model/layer_pattern.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/matmul.h"
#include "kernels/types.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/model_file.h"

/* Largest layer count we accept from a file: far beyond any real model, small enough that per-layer arrays
 * allocated before the tensors are looked at stay tiny. */
#define TG_MAX_LAYERS 65536

/* The model's owned buffers (converted norms...), freed together with the model. */
typedef struct {
    void **ptrs; /* [n] */
    size_t n, cap;
} tg_owned;

void *tg_model_alloc(struct tg_model *m, size_t bytes) {
    tg_owned *o = m->owned;
    if (!o) {
        o = calloc(1, sizeof *o);
        if (!o) return NULL;
        m->owned = o;
    }
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 16;
        void **p = realloc(o->ptrs, cap * sizeof *p);
        if (!p) return NULL;
        o->ptrs = p;
        o->cap = cap;
    }
    void *buf = calloc(bytes ? bytes : 1, 1);
    if (!buf) return NULL;
    o->ptrs[o->n++] = buf;
    return buf;
}

float *tg_model_alloc_f32(struct tg_model *m, size_t n) {
    return n > SIZE_MAX / sizeof(float) ? NULL : tg_model_alloc(m, n * sizeof(float));
}

bool tg_model_set_rope_freqs(struct tg_model *m, tg_error *err) {
    tg_hparams *hp = &m->hp;
    if (hp->arch && hp->arch->program_rope) return tg_model_set_layer_rope(m, err);
    if (!tg_rope_is_scaled(&hp->rope_scaling)) return true;
    double *f = tg_model_alloc(m, (size_t)(hp->head_dim / 2) * sizeof(double));
    if (!f) return tg_fail(err, "out of memory");
    tg_rope_inv_freq(hp->head_dim, hp->rope_theta, &hp->rope_scaling, f);
    hp->rope_inv_freq = f;
    return true;
}

static void owned_free(tg_owned *o) {
    if (!o) return;
    for (size_t i = 0; i < o->n; i++) free(o->ptrs[i]);
    free(o->ptrs);
    free(o);
}

bool tg_model_init_kv_source(struct tg_model *m, tg_error *err) {
    int n = m->hp.n_layers;
    if (n < 0 || n > TG_MAX_LAYERS) return tg_fail(err, "bad layer count %d", n);
    free(m->hp.kv_source);
    m->hp.kv_source = malloc((size_t)(n > 0 ? n : 1) * sizeof(int));
    if (!m->hp.kv_source) return tg_fail(err, "out of memory");
    for (int l = 0; l < n; l++) m->hp.kv_source[l] = l;
    return true;
}

bool tg_kv_source_check(const int *kv_source, int n_layers, const char *where, tg_error *err) {
    for (int l = 0; l < n_layers; l++) {
        const int s = kv_source[l];
        if (s < 0 || s > l)
            return tg_fail(err, "%s: kv_source[%d] = %d must be a layer in [0, %d] (a layer reads its own K/V or an "
                                "earlier layer's)", where, l, s, l);
        /* s < l was checked at its own index, so kv_source[s] is in range */
        if (kv_source[s] != s)
            return tg_fail(err, "%s: kv_source[%d] = %d, but layer %d does not hold K/V (it reads layer %d's)", where,
                           l, s, s, kv_source[s]);
    }
    return true;
}

bool tg_hparams_validate(const tg_hparams *hp, const char *where, tg_error *err) {
    if (hp->n_layers < 1 || hp->n_layers > TG_MAX_LAYERS)
        return tg_fail(err, "%s: layer count %d out of range [1, %d]", where, hp->n_layers, TG_MAX_LAYERS);
    if (hp->d_model < 1) return tg_fail(err, "%s: embedding size %d must be positive", where, hp->d_model);
    if (hp->n_heads < 1) return tg_fail(err, "%s: head count %d must be positive", where, hp->n_heads);
    if (hp->n_kv_heads < 1 || hp->n_kv_heads > hp->n_heads || hp->n_heads % hp->n_kv_heads != 0)
        return tg_fail(err, "%s: key/value head count %d must divide the head count %d", where, hp->n_kv_heads,
                       hp->n_heads);
    if (hp->head_dim < 2 || hp->head_dim % 2 != 0)
        return tg_fail(err, "%s: head size %d must be a positive even number", where, hp->head_dim);
    int64_t qd;
    if (!tg_mul_i64(hp->n_heads, hp->head_dim, &qd) || qd > INT_MAX)
        return tg_fail(err, "%s: %d heads of size %d overflow", where, hp->n_heads, hp->head_dim);
    if (hp->ffn_dim < 1) return tg_fail(err, "%s: feed-forward size %d must be positive", where, hp->ffn_dim);
    if (hp->vocab_size < 1) return tg_fail(err, "%s: vocabulary size %d must be positive", where, hp->vocab_size);
    if (hp->context_length < 1)
        return tg_fail(err, "%s: context length %d must be positive", where, hp->context_length);
    if (hp->sliding_window < 0)
        return tg_fail(err, "%s: sliding window %d must not be negative", where, hp->sliding_window);
    if (!(hp->rope_theta > 0.0f) || !isfinite(hp->rope_theta))
        return tg_fail(err, "%s: RoPE base %g must be positive", where, (double)hp->rope_theta);
    if (!(hp->norm_eps >= 0.0f) || !isfinite(hp->norm_eps))
        return tg_fail(err, "%s: RMSNorm epsilon %g must be a non-negative number", where, (double)hp->norm_eps);
    return true;
}

/* ---- binding the weights ---- */

typedef struct {
    int64_t params_by_type[TG_DT_COUNT]; /* matrix parameters per weight type */
    int norm_type;                       /* type of the norms in the file, -1 before the first */
    int64_t n_params;
    int64_t bytes_per_token;             /* bytes of every tensor a decoded token reads in full */
} bind_stats;

/* Elements and stored bytes of t (its shape was already checked against the file size, so neither overflows). */
static void count_tensor(bind_stats *s, const tg_tensor *t, bool read_per_token) {
    int64_t n = t->rows * t->cols;
    s->n_params += n;
    if (read_per_token) s->bytes_per_token += t->rows * (int64_t)tg_row_bytes(t->type, t->cols);
}

static bool bind_matrix(const tg_view_fn view, const void *ctx, const char *name, int64_t rows, int64_t cols,
                        tg_tensor *out, bind_stats *s, bool read_per_token, tg_error *err) {
    if (!view(ctx, name, rows, cols, out, err)) return false;
    if ((unsigned)out->type < TG_DT_COUNT) s->params_by_type[out->type] += rows * cols;
    count_tensor(s, out, read_per_token);
    return true;
}

/* A fused matrix [sum rows[i], cols] (Phi-3's [q | k | v], [gate | up]) bound once and viewed as its n parts, part
 * i rows [rows[0] + ... + rows[i - 1], + rows[i]) (rows are stored whole, so a part is a pointer into the file). */
static bool bind_fused(const tg_view_fn view, const void *ctx, const char *name, const int64_t *rows, int n,
                       int64_t cols, tg_tensor **outs, bind_stats *s, tg_error *err) {
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += rows[i];
    tg_tensor whole;
    if (!bind_matrix(view, ctx, name, total, cols, &whole, s, true, err)) return false;
    const size_t rb = tg_row_bytes(whole.type, cols);
    for (int i = 0, r0 = 0; i < n; r0 += (int)rows[i], i++) {
        *outs[i] = whole;
        outs[i]->rows = rows[i];
        outs[i]->data = (const uint8_t *)whole.data + (size_t)r0 * rb;
    }
    return true;
}

/* A vector of d elements (a norm's weight, a bias): an owned f32 copy. */
static bool bind_vec(struct tg_model *m, const tg_view_fn view, const void *ctx, const char *name, int64_t d,
                     float **out, bind_stats *s, tg_error *err) {
    tg_tensor t;
    if (!view(ctx, name, 1, d, &t, err)) return false;
    float *buf = tg_model_alloc_f32(m, (size_t)d);
    if (!buf) return tg_fail(err, "out of memory converting %s", name);
    tg_tensor_get_row(&t, 0, buf); /* out: [d] f32 */
    if (s->norm_type < 0) s->norm_type = (int)t.type;
    count_tensor(s, &t, true);
    *out = buf;
    return true;
}

/* "F16 (+F32 norms)": the matrix types by parameter count, then the norms' type when it differs. */
static void summarise_types(const bind_stats *s, char *out, size_t cap) {
    bool used[TG_DT_COUNT] = {false};
    size_t len = 0;
    int first = -1;
    out[0] = '\0';
    for (;;) {
        int best = -1;
        for (int t = 0; t < TG_DT_COUNT; t++)
            if (!used[t] && s->params_by_type[t] > 0 && (best < 0 || s->params_by_type[t] > s->params_by_type[best]))
                best = t;
        if (best < 0) break;
        used[best] = true;
        if (first < 0) first = best;
        int w = snprintf(out + len, cap - len, "%s%s", len ? " + " : "", tg_dtype_name((tg_dtype)best));
        if (w < 0 || (size_t)w >= cap - len) return;
        len += (size_t)w;
    }
    if (s->norm_type >= 0 && s->norm_type != first)
        snprintf(out + len, cap - len, " (+%s norms)", tg_dtype_name((tg_dtype)s->norm_type));
}

static void layer_name(char *buf, size_t cap, const char *prefix, int layer, const char *suffix) {
    snprintf(buf, cap, "%s%d.%s", prefix, layer, suffix);
}

/* Layer l's vectors beside its matrices that its architecture row asks for: the q/k/v biases (k, v only when the
 * layer holds its own K/V), the per-head q/k norms. */
static bool bind_layer_vecs(struct tg_model *m, const tg_weight_names *names, tg_view_fn view, const void *ctx, int l,
                            bind_stats *s, tg_error *err) {
    const tg_hparams *hp = &m->hp;
    tg_layer_weights *w = &m->layers[l];
    const int64_t qd = (int64_t)hp->n_heads * hp->head_dim, kvd = (int64_t)hp->n_kv_heads * hp->head_dim;
    const bool own_kv = hp->kv_source[l] == l, bias = hp->arch && hp->arch->qkv_bias;
    const bool qk = hp->arch && hp->arch->qk_norm, post = hp->arch && hp->arch->post_norms;
    const struct {
        bool want;
        const char *name;
        int64_t n;
        float **out;
    } vecs[] = {
        {bias, names->bq, qd, &w->bq},
        {bias && own_kv, names->bk, kvd, &w->bk},
        {bias && own_kv, names->bv, kvd, &w->bv},
        {qk, names->q_norm, hp->head_dim, &w->q_norm}, {qk && own_kv, names->k_norm, hp->head_dim, &w->k_norm},
        {post, names->post_attn_norm, hp->d_model, &w->post_attn_norm},
        {post, names->post_ffn_norm, hp->d_model, &w->post_ffn_norm},
    };
    char name[256];
    for (size_t i = 0; i < sizeof vecs / sizeof vecs[0]; i++) {
        if (!vecs[i].want) continue;
        layer_name(name, sizeof name, names->layer_prefix, l, vecs[i].name);
        if (!bind_vec(m, view, ctx, name, vecs[i].n, vecs[i].out, s, err)) return false;
    }
    return true;
}

bool tg_model_bind_weights(struct tg_model *m, const tg_weight_names *names, tg_view_fn view, const void *ctx,
                           tg_error *err) {
    const tg_hparams *hp = &m->hp;
    int64_t d = hp->d_model, ff = hp->ffn_dim, vocab = hp->vocab_size;
    int64_t qd = (int64_t)hp->n_heads * hp->head_dim;     /* validated to fit */
    int64_t kvd = (int64_t)hp->n_kv_heads * hp->head_dim; /* <= qd */
    bind_stats s;
    memset(&s, 0, sizeof s);
    s.norm_type = -1;

    m->layers = calloc((size_t)hp->n_layers, sizeof *m->layers);
    if (!m->layers) return tg_fail(err, "out of memory");
    if (!bind_matrix(view, ctx, names->tok_embd, vocab, d, &m->tok_embd, &s, hp->tied_embeddings, err)) return false;
    if (!bind_vec(m, view, ctx, names->out_norm, d, &m->out_norm, &s, err)) return false;
    if (hp->tied_embeddings) {
        m->lm_head = m->tok_embd;
    } else if (!bind_matrix(view, ctx, names->lm_head, vocab, d, &m->lm_head, &s, true, err)) {
        return false;
    }
    char name[256];
    for (int l = 0; l < hp->n_layers; l++) {
        tg_layer_weights *w = &m->layers[l];
        const char *p = names->layer_prefix;
        layer_name(name, sizeof name, p, l, names->attn_norm);
        if (!bind_vec(m, view, ctx, name, d, &w->attn_norm, &s, err)) return false;
        const bool fused = hp->arch && hp->arch->fused_qkv;
        if (fused) {
            const int64_t qkv_rows[] = {qd, kvd, kvd}, gu_rows[] = {ff, ff};
            tg_tensor *qkv[] = {&w->wq, &w->wk, &w->wv}, *gu[] = {&w->w_gate, &w->w_up};
            layer_name(name, sizeof name, p, l, names->wqkv);
            if (!bind_fused(view, ctx, name, qkv_rows, 3, d, qkv, &s, err)) return false;
            layer_name(name, sizeof name, p, l, names->w_gate_up);
            if (!bind_fused(view, ctx, name, gu_rows, 2, d, gu, &s, err)) return false;
        }
        layer_name(name, sizeof name, p, l, names->wq);
        if (!fused && !bind_matrix(view, ctx, name, qd, d, &w->wq, &s, true, err)) return false;
        if (hp->kv_source[l] == l && !fused) {
            layer_name(name, sizeof name, p, l, names->wk);
            if (!bind_matrix(view, ctx, name, kvd, d, &w->wk, &s, true, err)) return false;
            layer_name(name, sizeof name, p, l, names->wv);
            if (!bind_matrix(view, ctx, name, kvd, d, &w->wv, &s, true, err)) return false;
        }
        if (!bind_layer_vecs(m, names, view, ctx, l, &s, err)) return false;
        layer_name(name, sizeof name, p, l, names->wo);
        if (!bind_matrix(view, ctx, name, d, qd, &w->wo, &s, true, err)) return false;
        layer_name(name, sizeof name, p, l, names->ffn_norm);
        if (!bind_vec(m, view, ctx, name, d, &w->ffn_norm, &s, err)) return false;
        layer_name(name, sizeof name, p, l, names->w_gate);
        if (!fused && !bind_matrix(view, ctx, name, ff, d, &w->w_gate, &s, true, err)) return false;
        layer_name(name, sizeof name, p, l, names->w_up);
        if (!fused && !bind_matrix(view, ctx, name, ff, d, &w->w_up, &s, true, err)) return false;
        layer_name(name, sizeof name, p, l, names->w_down);
        if (!bind_matrix(view, ctx, name, d, ff, &w->w_down, &s, true, err)) return false;
    }
    m->n_params = s.n_params;
    m->weight_bytes = s.bytes_per_token;
    summarise_types(&s, m->weight_types, sizeof m->weight_types);
    m->has_weights = true;
    return true;
}

/* ---- finiteness of the weights ---- */

/* Index (row-major) of the first element of t that is NaN or infinite, or -1 (the type table's bit test). */
static int64_t first_non_finite_weight(const tg_tensor *t) {
    const tg_weight_type *wt = tg_weight_type_of(t->type);
    return wt ? wt->first_non_finite(t->data, t->rows * t->cols) : -1; /* n from a shape checked against the file */
}

static bool check_finite(const tg_tensor *t, const char *path, const char *what, int layer, tg_error *err) {
    if (!t->data) return true;
    const int64_t i = first_non_finite_weight(t);
    if (i < 0) return true;
    char where[32] = "";
    if (layer >= 0) snprintf(where, sizeof where, " of layer %d", layer);
    return tg_fail(err, "%s: the %s weights%s hold a NaN or infinite value (row %lld, column %lld)", path, what, where,
                   (long long)(i / t->cols), (long long)(i % t->cols));
}

static bool check_finite_norm(const float *w, int64_t d, const char *path, const char *what, int layer,
                              tg_error *err) {
    const tg_tensor t = {.type = TG_DT_F32, .rows = 1, .cols = d, .data = w};
    return check_finite(&t, path, what, layer, err);
}

/* Rejects a model whose weights hold NaN or Inf (which would only show as non-finite logits later): one pass over
 * every weight, memory-bound. */
static bool check_weights_finite(const tg_model *m, const char *path, tg_error *err) {
    const int64_t d = m->hp.d_model;
    if (!check_finite(&m->tok_embd, path, "token embedding", -1, err) ||
        !check_finite_norm(m->out_norm, d, path, "output norm", -1, err) ||
        (!m->hp.tied_embeddings && !check_finite(&m->lm_head, path, "output", -1, err)))
        return false;
    for (int l = 0; l < m->hp.n_layers; l++) {
        const tg_layer_weights *w = &m->layers[l];
        if (!check_finite_norm(w->attn_norm, d, path, "attention norm", l, err) ||
            !check_finite(&w->wq, path, "query", l, err) || !check_finite(&w->wk, path, "key", l, err) ||
            !check_finite(&w->wv, path, "value", l, err) || !check_finite(&w->wo, path, "attention output", l, err) ||
            !check_finite_norm(w->ffn_norm, d, path, "feed-forward norm", l, err) ||
            !check_finite(&w->w_gate, path, "gate", l, err) || !check_finite(&w->w_up, path, "up", l, err) ||
            !check_finite(&w->w_down, path, "down", l, err))
            return false;
        const int64_t qd = (int64_t)m->hp.n_heads * m->hp.head_dim, kvd = (int64_t)m->hp.n_kv_heads * m->hp.head_dim;
        const struct {
            const float *v;
            int64_t n;
            const char *what;
        } vecs[] = {{w->bq, qd, "query bias"}, {w->bk, kvd, "key bias"}, {w->bv, kvd, "value bias"},
                    {w->q_norm, m->hp.head_dim, "query norm"}, {w->k_norm, m->hp.head_dim, "key norm"}};
        for (size_t i = 0; i < sizeof vecs / sizeof vecs[0]; i++)
            if (vecs[i].v && !check_finite_norm(vecs[i].v, vecs[i].n, path, vecs[i].what, l, err)) return false;
    }
    return true;
}

/* ---- loading and freeing ---- */

tg_model *tg_model_load(const char *path, tg_error *err) { return tg_model_load_for(path, TG_NEED_ALL, err); }

tg_model *tg_model_load_for(const char *path, tg_model_need need, tg_error *err) {
    if (!path || !*path) {
        tg_fail(err, "no model path given");
        return NULL;
    }
    /* stat never blocks; a regular file is then opened non-blocking (model_file.h), so a FIFO or device given as
     * the model is refused at once, even if the path changes in between. */
    struct stat st;
    if (stat(path, &st) != 0) {
        tg_fail(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    bool is_dir = S_ISDIR(st.st_mode), is_gguf = false;
    if (!is_dir && !S_ISREG(st.st_mode)) {
        tg_fail(err, "%s: not a model (%s; expected a GGUF file or a Hugging Face folder)", path,
                S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISCHR(st.st_mode) ? "a character device"
                : S_ISBLK(st.st_mode) ? "a block device" : S_ISSOCK(st.st_mode) ? "a socket" : "not a regular file");
        return NULL;
    }
    if (!is_dir) {
        size_t size;
        int fd = tg_file_open_regular(path, &size, NULL, err);
        if (fd < 0) return NULL;
        char magic[4];
        is_gguf = read(fd, magic, 4) == 4 && memcmp(magic, "GGUF", 4) == 0;
        close(fd);
        if (!is_gguf) {
            tg_fail(err, "%s: not a model (expected a GGUF file or a Hugging Face folder)", path);
            return NULL;
        }
    }
    tg_model *m = calloc(1, sizeof *m);
    if (!m) {
        tg_fail(err, "out of memory");
        return NULL;
    }
    m->config_bos = -1;
    bool ok = is_dir ? tg_model_load_hf(m, path, need, err) : tg_model_load_gguf(m, path, err);
    /* TG_NEED_CONFIG describes the model without reading its weights' values */
    if (ok && m->has_weights && need != TG_NEED_CONFIG)
        ok = check_weights_finite(m, path, err) && tg_model_repack(m, path, err);
    if (ok && m->has_weights) ok = tg_model_set_rope_freqs(m, err);
    if (!ok) {
        tg_model_free(m);
        return NULL;
    }
    return m;
}

void tg_model_free(tg_model *m) {
    if (!m) return;
    tg_tokenizer_free(m->tokenizer);
    free(m->layers);
    free(m->hp.kv_source);
    owned_free(m->owned);
    tg_model_repack_free(m);
    tg_gguf_close(m->gguf);
    tg_safetensors_close(m->st);
    free(m);
}

void tg_model_get_info(const tg_model *m, tg_model_info *info) {
    memset(info, 0, sizeof *info);
    if (!m) return;
    const tg_hparams *hp = &m->hp;
    snprintf(info->architecture, sizeof info->architecture, "%s", hp->architecture);
    snprintf(info->weight_types, sizeof info->weight_types, "%s", m->has_weights ? m->weight_types : "none");
    info->n_params = m->n_params;
    info->weight_bytes = m->weight_bytes;
    info->n_layers = hp->n_layers;
    info->n_heads = hp->n_heads;
    info->n_kv_heads = hp->n_kv_heads;
    info->head_dim = hp->head_dim;
    info->d_model = hp->d_model;
    info->ffn_dim = hp->ffn_dim;
    info->vocab_size = tg_vocab_size(m);
    info->context_length = hp->context_length;
    info->sliding_window = hp->sliding_window;
    info->rope_theta = hp->rope_theta;
    info->norm_eps = hp->norm_eps;
    info->tied_embeddings = hp->tied_embeddings;
    info->has_weights = m->has_weights;
    int n_kv = 0;
    for (int l = 0; l < hp->n_layers && hp->kv_source; l++) n_kv += hp->kv_source[l] == l;
    info->n_kv_layers = n_kv;
    info->has_tokenizer = m->tokenizer != NULL;
    tg_rope_scaling_describe(&hp->rope_scaling, info->rope_scaling, sizeof info->rope_scaling);
    snprintf(info->absent, sizeof info->absent, "%s", m->absent);
    tg_layer_pattern_describe(hp, info->layer_pattern, sizeof info->layer_pattern);
    tg_family_describe(hp, info->family, sizeof info->family);
}

int64_t tg_hparams_param_count(const tg_hparams *hp) {
    const int64_t d = hp->d_model, ff = hp->ffn_dim, vocab = hp->vocab_size;
    int64_t qd, kvd, embd, attn_q, attn_kv, ffn, layer_kv, total;
    if (!tg_mul_i64(hp->n_heads, hp->head_dim, &qd) || !tg_mul_i64(hp->n_kv_heads, hp->head_dim, &kvd) ||
        !tg_mul_i64(vocab, d, &embd) || !tg_mul_i64(2 * qd, d, &attn_q) || !tg_mul_i64(2 * kvd, d, &attn_kv) ||
        !tg_mul_i64(3 * ff, d, &ffn))
        return -1;
    /* embedding (+ the untied output head) and the output norm */
    if (!tg_mul_i64(embd, hp->tied_embeddings ? 1 : 2, &total) || !tg_add_i64(total, d, &total)) return -1;
    for (int l = 0; l < hp->n_layers; l++) {
        /* two norms, q and o, k and v unless the layer reads another's (YOCO), the three feed-forward matrices */
        const bool own_kv = !hp->kv_source || hp->kv_source[l] == l;
        /* the architecture's vectors: q/k/v biases, per-head q/k norms (bind_layer_vecs) */
        int64_t vecs = 0;
        if (hp->arch && hp->arch->qkv_bias) vecs += qd + (own_kv ? 2 * kvd : 0);
        if (hp->arch && hp->arch->qk_norm) vecs += (int64_t)hp->head_dim * (own_kv ? 2 : 1);
        if (hp->arch && hp->arch->post_norms) vecs += 2 * d;
        if (!tg_add_i64(2 * d + attn_q, own_kv ? attn_kv : 0, &layer_kv) || !tg_add_i64(layer_kv, ffn, &layer_kv) ||
            !tg_add_i64(layer_kv, vecs, &layer_kv) || !tg_add_i64(total, layer_kv, &total))
            return -1;
    }
    return total;
}

bool tg_model_add_eos(struct tg_model *m, int32_t id, const char *where, tg_error *err) {
    if (id < 0) return true;
    for (int i = 0; i < m->n_eos_ids; i++)
        if (m->eos_ids[i] == id) return true;
    if (m->n_eos_ids == TG_MAX_EOS_IDS)
        return tg_fail(err, "%s: more than %d end-of-sequence ids", where, TG_MAX_EOS_IDS);
    m->eos_ids[m->n_eos_ids++] = id;
    return true;
}

size_t tg_token_eos_ids(const tg_model *m, const int32_t **ids) {
    if (ids) *ids = m ? m->eos_ids : NULL;
    return m ? (size_t)m->n_eos_ids : 0;
}

bool tg_token_is_eos(const tg_model *m, int32_t id) {
    if (!m || id < 0) return false;
    for (int i = 0; i < m->n_eos_ids; i++)
        if (m->eos_ids[i] == id) return true;
    return false;
}

void tg_model_generation_defaults(const tg_model *m, tg_generation_defaults *out) {
    memset(out, 0, sizeof *out);
    if (m) *out = m->gen;
}

/* ---- tokenizer entry points ---- */

const tg_tokenizer *tg_model_tokenizer(const tg_model *m) { return m ? m->tokenizer : NULL; }

bool tg_tokenize(const tg_model *m, const char *text, size_t len, bool add_bos, int32_t **ids, size_t *n_ids,
                 tg_error *err) {
    if (!m || !m->tokenizer) return tg_fail(err, "no tokenizer loaded");
    return tg_tokenizer_encode(m->tokenizer, text, len, add_bos, ids, n_ids, err);
}

bool tg_tokenize_max(const tg_model *m, const char *text, size_t len, bool add_bos, size_t max_ids, int32_t **ids,
                     size_t *n_ids, tg_error *err) {
    bool over;
    if (!m || !m->tokenizer) return tg_fail(err, "no tokenizer loaded");
    return tg_tokenizer_encode_max(m->tokenizer, text, len, add_bos, max_ids, ids, n_ids, &over, err);
}

int32_t tg_token_bos(const tg_model *m) {
    if (!m) return -1;
    return m->tokenizer ? tg_tokenizer_bos(m->tokenizer) : m->config_bos;
}

int32_t tg_token_eos(const tg_model *m) {
    if (!m) return -1;
    if (m->tokenizer) return tg_tokenizer_eos(m->tokenizer);
    return m->n_eos_ids > 0 ? m->eos_ids[0] : -1;
}

tg_detok *tg_detok_new(const tg_model *m, tg_error *err) {
    return tg_tokenizer_detok_new(m ? m->tokenizer : NULL, err);
}

bool tg_model_adds_bos(const tg_model *m) { return m && m->tokenizer && tg_tokenizer_adds_bos(m->tokenizer); }

/* The number of logits per row: the model's vocabulary (which may exceed the tokenizer's when padded). A vocab-only
 * model without a vocabulary size reports the tokenizer's. */
int32_t tg_vocab_size(const tg_model *m) {
    if (!m) return 0;
    if (m->hp.vocab_size > 0) return m->hp.vocab_size;
    return m->tokenizer ? tg_tokenizer_vocab_size(m->tokenizer) : 0;
}
