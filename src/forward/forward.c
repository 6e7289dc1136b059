/* forward.c — the Llama forward pass over a chunk of tokens: projections as matrix-matrix products for the whole
 * chunk, attention token by token through the KV cache (which owns RoPE, storage and masking). */
#include "forward/forward.h"

#include <stdlib.h>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "util/error.h"

struct tg_forward {
    const struct tg_model *m;
    int max_chunk;
    int n_threads;
    /* activations for up to max_chunk tokens (row t = token t of the chunk) */
    float *x;   /* [max_chunk, d_model] residual stream */
    float *xb;  /* [max_chunk, d_model] normalised input of a sub-layer */
    float *q;   /* [max_chunk, n_heads * head_dim] queries (pre-RoPE) */
    float *k;   /* [max_chunk, n_kv_heads * head_dim] keys (pre-RoPE) */
    float *v;   /* [max_chunk, n_kv_heads * head_dim] values */
    float *att; /* [max_chunk, n_heads * head_dim] attention output */
    float *xo;  /* [max_chunk, d_model] output of a sub-layer before the residual add */
    float *hg;  /* [max_chunk, ffn_dim] gate projection, then swiglu(gate, up) */
    float *hu;  /* [max_chunk, ffn_dim] up projection */
};

static float *alloc_rows(int rows, int64_t cols) { return calloc((size_t)rows * (size_t)cols, sizeof(float)); }

tg_forward *tg_forward_new(const struct tg_model *m, int max_chunk, int n_threads, tg_error *err) {
    if (!m || !m->has_weights) {
        tg_fail(err, "the model has no weights (a vocab-only file can tokenise but not run)");
        return NULL;
    }
    if (max_chunk < 1) {
        tg_fail(err, "chunk size %d must be positive", max_chunk);
        return NULL;
    }
    const tg_hparams *hp = &m->hp;
    tg_forward *f = calloc(1, sizeof *f);
    if (!f) {
        tg_fail(err, "out of memory");
        return NULL;
    }
    f->m = m;
    f->max_chunk = max_chunk;
    f->n_threads = n_threads;
    int64_t qd = (int64_t)hp->n_heads * hp->head_dim, kvd = (int64_t)hp->n_kv_heads * hp->head_dim;
    f->x = alloc_rows(max_chunk, hp->d_model);
    f->xb = alloc_rows(max_chunk, hp->d_model);
    f->q = alloc_rows(max_chunk, qd);
    f->k = alloc_rows(max_chunk, kvd);
    f->v = alloc_rows(max_chunk, kvd);
    f->att = alloc_rows(max_chunk, qd);
    f->xo = alloc_rows(max_chunk, hp->d_model);
    f->hg = alloc_rows(max_chunk, hp->ffn_dim);
    f->hu = alloc_rows(max_chunk, hp->ffn_dim);
    if (!f->x || !f->xb || !f->q || !f->k || !f->v || !f->att || !f->xo || !f->hg || !f->hu) {
        tg_forward_free(f);
        tg_fail(err, "out of memory for the forward pass scratch (%d tokens)", max_chunk);
        return NULL;
    }
    return f;
}

void tg_forward_free(tg_forward *f) {
    if (!f) return;
    free(f->x);
    free(f->xb);
    free(f->q);
    free(f->k);
    free(f->v);
    free(f->att);
    free(f->xo);
    free(f->hg);
    free(f->hu);
    free(f);
}

/* y[i] += x[i] for n elements */
static void add_into(float *y, const float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += x[i];
}

void tg_forward_chunk(tg_forward *f, tg_kvcache *cache, const int32_t *ids, int n, int64_t pos, float *logits_all,
                      float *logits_last) {
    const struct tg_model *m = f->m;
    const tg_hparams *hp = &m->hp;
    const int nt = f->n_threads;
    const int64_t d = hp->d_model, ff = hp->ffn_dim, vocab = hp->vocab_size;
    const int64_t qd = (int64_t)hp->n_heads * hp->head_dim, kvd = (int64_t)hp->n_kv_heads * hp->head_dim;
    if (n < 1 || n > f->max_chunk) return;

    /* token embeddings */
    for (int t = 0; t < n; t++) tg_tensor_get_row(&m->tok_embd, ids[t], f->x + t * d);

    for (int l = 0; l < hp->n_layers; l++) {
        const tg_layer_weights *w = &m->layers[l];
        const bool own_kv = hp->kv_source[l] == l;

        /* attention: rmsnorm -> q, k, v for the chunk -> per token: append k, v, attend q -> wo -> residual */
        for (int t = 0; t < n; t++) tg_rmsnorm(f->xb + t * d, f->x + t * d, w->attn_norm, d, hp->norm_eps);
        tg_matmul(&w->wq, f->xb, n, f->q, nt);
        if (own_kv) {
            tg_matmul(&w->wk, f->xb, n, f->k, nt);
            tg_matmul(&w->wv, f->xb, n, f->v, nt);
        }
        for (int t = 0; t < n; t++) {
            if (own_kv) tg_kvcache_append(cache, l, pos + t, f->k + t * kvd, f->v + t * kvd);
            tg_kvcache_attend(cache, l, pos + t, f->q + t * qd, f->att + t * qd, nt);
        }
        tg_matmul(&w->wo, f->att, n, f->xo, nt);
        add_into(f->x, f->xo, (int64_t)n * d);

        /* feed-forward: rmsnorm -> gate, up -> swiglu -> down -> residual */
        for (int t = 0; t < n; t++) tg_rmsnorm(f->xb + t * d, f->x + t * d, w->ffn_norm, d, hp->norm_eps);
        tg_matmul(&w->w_gate, f->xb, n, f->hg, nt);
        tg_matmul(&w->w_up, f->xb, n, f->hu, nt);
        tg_swiglu(f->hg, f->hu, (int64_t)n * ff);
        tg_matmul(&w->w_down, f->hg, n, f->xo, nt);
        add_into(f->x, f->xo, (int64_t)n * d);
    }

    /* final norm and the output head, only for the rows whose logits are wanted */
    if (logits_all) {
        for (int t = 0; t < n; t++) tg_rmsnorm(f->xb + t * d, f->x + t * d, m->out_norm, d, hp->norm_eps);
        tg_matmul(&m->lm_head, f->xb, n, logits_all, nt);
        if (logits_last) {
            for (int64_t i = 0; i < vocab; i++) logits_last[i] = logits_all[(int64_t)(n - 1) * vocab + i];
        }
    } else if (logits_last) {
        float *last = f->xb + (int64_t)(n - 1) * d;
        tg_rmsnorm(last, f->x + (int64_t)(n - 1) * d, m->out_norm, d, hp->norm_eps);
        tg_matvec(&m->lm_head, last, logits_last, nt);
    }
}
