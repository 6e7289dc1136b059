/* random_model.c — test support: random in-memory models (random_model.h). */
#include "random_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/quant.h"
#include "util/error.h"

struct random_model {
    struct tg_model m;
    void **bufs; /* every allocation, freed together */
    size_t n_bufs, cap_bufs;
    uint64_t rng;
};

static void *must(void *p) {
    if (!p) {
        fprintf(stderr, "random_model: out of memory\n");
        abort();
    }
    return p;
}

static float rnd(random_model *s) { /* uniform in [-1, 1) */
    s->rng ^= s->rng << 13;
    s->rng ^= s->rng >> 7;
    s->rng ^= s->rng << 17;
    return (float)((s->rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static void *keep(random_model *s, size_t bytes) {
    if (s->n_bufs == s->cap_bufs) {
        s->cap_bufs = s->cap_bufs ? 2 * s->cap_bufs : 64;
        s->bufs = must(realloc(s->bufs, s->cap_bufs * sizeof *s->bufs));
    }
    void *p = must(calloc(1, bytes));
    s->bufs[s->n_bufs++] = p;
    return p;
}

/* rows x cols of uniform values times scale, stored as type (F32, or Q8_0 / Q4_0 quantised from the same values). */
static tg_tensor matrix(random_model *s, int64_t rows, int64_t cols, float scale, tg_dtype type) {
    float *f = must(malloc((size_t)(rows * cols) * sizeof *f));
    for (int64_t i = 0; i < rows * cols; i++) f[i] = rnd(s) * scale;
    tg_tensor t = {type, rows, cols, NULL, 0};
    if (type == TG_DT_F32) {
        float *d = keep(s, (size_t)(rows * cols) * sizeof *d);
        memcpy(d, f, (size_t)(rows * cols) * sizeof *d);
        t.data = d;
    } else {
        const size_t rb = tg_row_bytes(type, cols);
        if ((type != TG_DT_Q8_0 && type != TG_DT_Q4_0) || rb == 0) {
            fprintf(stderr, "random_model: weights F32, Q8_0 or Q4_0 only\n");
            abort();
        }
        uint8_t *d = keep(s, rb * (size_t)rows);
        for (int64_t r = 0; r < rows; r++)
            (type == TG_DT_Q8_0 ? tg_quantize_row_q8_0 : tg_quantize_row_q4_0)(f + r * cols, d + (size_t)r * rb, cols);
        t.data = d;
    }
    free(f);
    return t;
}

static float *norm(random_model *s, int64_t n) {
    float *p = keep(s, (size_t)n * sizeof *p);
    for (int64_t i = 0; i < n; i++) p[i] = 1.0f + 0.2f * rnd(s);
    return p;
}

random_model *random_model_new(int ctx, uint64_t seed, bool llama3) {
    return random_model_new_typed(ctx, TG_DT_F32, seed, llama3);
}

random_model *random_model_new_typed(int ctx, tg_dtype type, uint64_t seed, bool llama3) {
    random_model *s = must(calloc(1, sizeof *s));
    s->rng = seed * 2654435761u + 1;
    tg_hparams *hp = &s->m.hp;
    snprintf(hp->architecture, sizeof hp->architecture, "llama");
    hp->n_layers = 2;
    hp->d_model = 64;
    hp->n_heads = 4;
    hp->n_kv_heads = 2;
    hp->head_dim = 16;
    hp->ffn_dim = 96;
    hp->vocab_size = 96;
    hp->context_length = ctx;
    hp->rope_theta = 10000.0f;
    hp->norm_eps = 1e-5f;
    hp->rope_style = TG_ROPE_HALF;
    hp->kv_source = keep(s, (size_t)hp->n_layers * sizeof(int));
    for (int l = 0; l < hp->n_layers; l++) hp->kv_source[l] = l;
    if (llama3) {
        hp->rope_scaling = (tg_rope_scaling){.type = TG_ROPE_SCALING_LLAMA3, .factor = 8.0, .low_freq_factor = 1.0,
                                             .high_freq_factor = 4.0, .original_context = ctx / 4};
        double *f = keep(s, (size_t)(hp->head_dim / 2) * sizeof *f);
        tg_rope_inv_freq(hp->head_dim, hp->rope_theta, &hp->rope_scaling, f);
        hp->rope_inv_freq = f;
    }
    const int64_t d = hp->d_model, qd = hp->n_heads * hp->head_dim, kvd = hp->n_kv_heads * hp->head_dim;
    const float sd = 1.0f / sqrtf((float)d);
    s->m.has_weights = true;
    s->m.tok_embd = matrix(s, hp->vocab_size, d, 1.0f, TG_DT_F32);
    s->m.out_norm = norm(s, d);
    s->m.lm_head = matrix(s, hp->vocab_size, d, sd, type);
    s->m.layers = keep(s, (size_t)hp->n_layers * sizeof *s->m.layers);
    for (int l = 0; l < hp->n_layers; l++) {
        tg_layer_weights *w = &s->m.layers[l];
        w->attn_norm = norm(s, d);
        w->wq = matrix(s, qd, d, 2.0f * sd, type);
        w->wk = matrix(s, kvd, d, 2.0f * sd, type);
        w->wv = matrix(s, kvd, d, sd, type);
        w->wo = matrix(s, d, qd, 1.0f / sqrtf((float)qd), type);
        w->ffn_norm = norm(s, d);
        w->w_gate = matrix(s, hp->ffn_dim, d, sd, type);
        w->w_up = matrix(s, hp->ffn_dim, d, sd, type);
        w->w_down = matrix(s, d, hp->ffn_dim, 1.0f / sqrtf((float)hp->ffn_dim), type);
    }
    return s;
}

const struct tg_model *random_model_get(const random_model *r) { return &r->m; }

void random_model_repack(random_model *s) {
    tg_error err = {0};
    if (!tg_model_repack(&s->m, "random model", &err)) {
        fprintf(stderr, "random_model: %s\n", err.msg);
        abort();
    }
}

void random_model_free(random_model *s) {
    if (!s) return;
    tg_model_repack_free(&s->m);
    for (size_t i = 0; i < s->n_bufs; i++) free(s->bufs[i]);
    free(s->bufs);
    free(s);
}

int32_t *random_model_text(int n, int vocab, uint64_t seed) {
    int32_t *ids = must(malloc((size_t)n * sizeof *ids));
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 7;
    for (int i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        ids[i] = (i >= 24 && x % 3 != 0) ? ids[i - 24] : (int32_t)(x % (uint64_t)vocab);
    }
    return ids;
}
