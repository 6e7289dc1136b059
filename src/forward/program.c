/* program.c — the Llama-family forward pass written once, as operations in the order of its maths (program.h); an
 * architecture's differences come from its row (model/arch.h), not from branches in a backend. */
#include "forward/program.h"

#include <math.h>
#include <stdlib.h>

#include "model/layer_pattern.h"

#include "util/error.h"

/* Appends op; false when memory runs out (the program is then unusable). */
static bool emit(tg_program *p, tg_op op) {
    if (p->n == p->cap) {
        const int cap = p->cap ? 2 * p->cap : 64;
        tg_op *ops = realloc(p->ops, (size_t)cap * sizeof *ops);
        if (!ops) return false;
        p->ops = ops;
        p->cap = cap;
    }
    p->ops[p->n++] = op;
    return true;
}

static tg_op op(tg_op_kind kind, tg_val out, tg_val in) {
    return (tg_op){.kind = kind, .out = out, .in = in, .in2 = in, .layer = -1};
}

static tg_op norm(tg_val out, tg_val in, const float *w, const tg_arch *a) {
    tg_op o = op(TG_OP_NORM, out, in);
    (void)a;
    o.norm_w = w;
    o.norm = TG_NORM_RMS; /* the model holds the multiplier (arch.h) */
    return o;
}

static tg_op matmul(tg_val out, const tg_tensor *w, tg_val in) {
    tg_op o = op(TG_OP_MATMUL, out, in);
    o.w = w;
    return o;
}

/* The model's row; a model built by hand with none (the unit tests' random models) is Llama. */
static const tg_arch *arch_of(const struct tg_model *m) { return m->hp.arch ? m->hp.arch : tg_arch_by_name("llama"); }

/* Layer l: pre-norm attention, then a pre-norm gated feed-forward, each added to the residual stream. */
static bool layer(tg_program *p, const struct tg_model *m, int l) {
    const tg_arch *a = arch_of(m);
    const tg_layer_weights *w = &m->layers[l];
    const bool own_kv = m->hp.kv_source[l] == l;
    tg_op rope = op(TG_OP_ROPE_APPEND, TG_VAL_Q, TG_VAL_Q), attend = op(TG_OP_ATTEND, TG_VAL_ATT, TG_VAL_Q);
    rope.layer = attend.layer = l;
    rope.own_kv = own_kv;
    tg_op glu = op(TG_OP_GLU, TG_VAL_GATE, TG_VAL_GATE);
    glu.in2 = TG_VAL_UP;
    glu.glu = a->glu;
    bool ok = true;
    /* h = norm(x); q = h Wq, k = h Wk, v = h Wv (a layer reading shared K/V has no k, v of its own) */
    ok = ok && emit(p, norm(TG_VAL_H, TG_VAL_X, w->attn_norm, a));
    ok = ok && emit(p, matmul(TG_VAL_Q, &w->wq, TG_VAL_H));
    if (own_kv) {
        ok = ok && emit(p, matmul(TG_VAL_K, &w->wk, TG_VAL_H));
        ok = ok && emit(p, matmul(TG_VAL_V, &w->wv, TG_VAL_H));
    }
    /* q += bq, k += bk, v += bv (Qwen2); each head of q and k normalised (Qwen3) */
    const struct {
        bool on;
        tg_op_kind kind;
        tg_val v;
        const float *w;
    } extras[] = {
        {a->qkv_bias, TG_OP_BIAS, TG_VAL_Q, w->bq}, {a->qkv_bias && own_kv, TG_OP_BIAS, TG_VAL_K, w->bk},
        {a->qkv_bias && own_kv, TG_OP_BIAS, TG_VAL_V, w->bv}, {a->qk_norm, TG_OP_HEAD_NORM, TG_VAL_Q, w->q_norm},
        {a->qk_norm && own_kv, TG_OP_HEAD_NORM, TG_VAL_K, w->k_norm},
    };
    for (size_t i = 0; i < sizeof extras / sizeof extras[0]; i++) {
        if (!extras[i].on) continue;
        tg_op e = op(extras[i].kind, extras[i].v, extras[i].v);
        e.bias = extras[i].kind == TG_OP_BIAS ? extras[i].w : NULL;
        e.norm_w = extras[i].kind == TG_OP_HEAD_NORM ? extras[i].w : NULL;
        e.norm = TG_NORM_RMS;
        ok = ok && emit(p, e);
    }
    /* program_rope rows: q, k rotated with the layer's own frequencies, q scaled (the cache's rotation is then the
     * identity) */
    const double *freq = m->hp.layer_freq && m->hp.layer_rope[l] ? m->hp.layer_freq + (size_t)l * (size_t)(m->hp.rope_dims / 2)
                                                                   : NULL;
    const float qf = a->program_rope ? tg_layer_rope_q_factor(&m->hp) : 1.0f;
    if (freq || qf != 1.0f) {
        tg_op r = op(TG_OP_ROPE, TG_VAL_Q, TG_VAL_Q);
        r.layer = l;
        r.freq = freq;
        if (freq && m->hp.layer_freq_long) {
            r.freq_long = m->hp.layer_freq_long + (freq - m->hp.layer_freq);
            r.long_from = m->hp.rope_original_context;
        }
        r.scale = qf;
        r.rope_mul = m->hp.rope_attn_factor > 0.0f ? m->hp.rope_attn_factor : 1.0f;
        r.own_kv = own_kv;
        ok = ok && emit(p, r);
    }
    /* q, k = rope(q, k) at each row's position; the cache += k, v; att = softmax(q K^T / sqrt(head_dim)) V */
    ok = ok && emit(p, rope);
    ok = ok && emit(p, attend);
    /* x = x + att Wo (Gemma: x + norm(att Wo)) */
    ok = ok && emit(p, matmul(TG_VAL_T, &w->wo, TG_VAL_ATT));
    if (a->post_norms) ok = ok && emit(p, norm(TG_VAL_T, TG_VAL_T, w->post_attn_norm, a));
    ok = ok && emit(p, op(TG_OP_ADD, TG_VAL_X, TG_VAL_T));
    /* h = norm(x); x = x + (act(h Wgate) * (h Wup)) Wdown */
    ok = ok && emit(p, norm(TG_VAL_H, TG_VAL_X, w->ffn_norm, a));
    ok = ok && emit(p, matmul(TG_VAL_GATE, &w->w_gate, TG_VAL_H));
    ok = ok && emit(p, matmul(TG_VAL_UP, &w->w_up, TG_VAL_H));
    ok = ok && emit(p, glu);
    ok = ok && emit(p, matmul(TG_VAL_T, &w->w_down, TG_VAL_GATE));
    if (a->post_norms) ok = ok && emit(p, norm(TG_VAL_T, TG_VAL_T, w->post_ffn_norm, a));
    ok = ok && emit(p, op(TG_OP_ADD, TG_VAL_X, TG_VAL_T));
    return ok;
}

bool tg_program_build(tg_program *p, const struct tg_model *m, tg_error *err) {
    *p = (tg_program){0};
    tg_op embed = op(TG_OP_EMBED, TG_VAL_X, TG_VAL_X), scale = op(TG_OP_SCALE, TG_VAL_X, TG_VAL_X);
    embed.w = &m->tok_embd;
    scale.scale = (float)sqrt((double)m->hp.d_model);
    /* x = embedding(ids) (Gemma: * sqrt(d_model), rounded to a float as transformers does); the layers;
     * logits = norm(x) W_out (Gemma 2: soft-capped) */
    bool ok = emit(p, embed);
    if (arch_of(m)->embed_scale) ok = ok && emit(p, scale);
    for (int l = 0; ok && l < m->hp.n_layers; l++) ok = layer(p, m, l);
    ok = ok && emit(p, norm(TG_VAL_H, TG_VAL_X, m->out_norm, arch_of(m)));
    ok = ok && emit(p, matmul(TG_VAL_LOGITS, &m->lm_head, TG_VAL_H));
    tg_op cap = op(TG_OP_SOFTCAP, TG_VAL_LOGITS, TG_VAL_LOGITS);
    cap.scale = m->hp.final_softcap;
    if (m->hp.final_softcap > 0.0f) ok = ok && emit(p, cap);
    if (ok) return true;
    tg_program_free(p);
    return tg_fail(err, "out of memory for the model program");
}

void tg_program_free(tg_program *p) {
    free(p->ops);
    *p = (tg_program){0};
}

const char *tg_op_name(tg_op_kind kind) {
    static const char *const names[TG_OP_COUNT] = {"embed", "norm", "matmul",    "rope/append", "attend", "glu",
                                                   "add",   "bias", "head norm", "scale",       "rope",   "softcap"};
    return kind < TG_OP_COUNT ? names[kind] : "?";
}
