/* program.h — the model as a program: the forward pass as a list of operations on named activations, written once
 * for every architecture (program.c) from the model's weights and its architecture row (model/arch.h). A backend
 * (forward/backend.h) executes the list; the program knows nothing of threads, units, kernels or devices. */
#ifndef TG_FORWARD_PROGRAM_H
#define TG_FORWARD_PROGRAM_H

#include <stdbool.h>

#include "model/model.h"

/* The activations a program names, for the call's rows (row t: the t-th token of the call). */
typedef enum {
    TG_VAL_X,      /* [rows, d_model] the residual stream */
    TG_VAL_H,      /* [rows, d_model] a normalised copy of x: the input of the products that follow */
    TG_VAL_Q,      /* [rows, n_heads * head_dim] queries */
    TG_VAL_K,      /* [rows, n_kv_heads * head_dim] keys */
    TG_VAL_V,      /* [rows, n_kv_heads * head_dim] values */
    TG_VAL_ATT,    /* [rows, n_heads * head_dim] the attention output */
    TG_VAL_T,      /* [rows, d_model] a block's output, before it joins the residual stream */
    TG_VAL_GATE,   /* [rows, ffn_dim] the gate projection, then the gated activation */
    TG_VAL_UP,     /* [rows, ffn_dim] the up projection */
    TG_VAL_LOGITS, /* [rows whose logits are wanted, vocab] */
    TG_VAL_COUNT
} tg_val;

typedef enum {
    TG_OP_EMBED,       /* out = rows of w picked by the tokens' ids */
    TG_OP_NORM,        /* out = norm(in) * norm_w (in = x, out = h; or in = out = t: a block output's post-norm) */
    TG_OP_MATMUL,      /* out = in . w^T: out[t, r] = row r of w . row t of in */
    TG_OP_ROPE_APPEND, /* layer's q, k rotated at each row's position, k and v appended to the row's cache (own_kv) */
    TG_OP_ATTEND,      /* out = attention of layer's queries over the row's cache (causal, its policy's window) */
    TG_OP_GLU,         /* out = act(in) * in2 elementwise (act: the architecture row's glu) */
    TG_OP_ADD,         /* out += in (the residual connection) */
    TG_OP_BIAS,        /* out += bias, on every row (in = out) */
    TG_OP_HEAD_NORM,   /* each head_dim-wide head of out normalised in place with norm_w [head_dim] (in = out) */
    TG_OP_SCALE,       /* out *= scale (in = out; the embedding's sqrt(d_model), Gemma) */
    TG_OP_ROPE,        /* layer's q (and k when own_kv) rotated in place at each row's position with freq [rope_dims
                        * / 2] (freq_long from position long_from) on the first rope_dims dims of each head, cos and sin times rope_mul (freq NULL: no
                        * rotation), then q *= scale (rows with
                        * program_rope; the cache's own rotation is then the identity) */
    TG_OP_SOFTCAP,     /* out = scale * tanh(out / scale) (in = out; Gemma 2's logits) */
    TG_OP_COUNT
} tg_op_kind;

typedef struct {
    tg_op_kind kind;
    tg_val out, in, in2;
    int layer;            /* ROPE_APPEND, ATTEND: the layer whose cache rows they use; else -1 */
    const tg_tensor *w;   /* EMBED, MATMUL: the matrix [out columns, in columns] */
    const float *norm_w;  /* NORM: the weight [d_model]; HEAD_NORM: [head_dim] */
    const float *bias;    /* BIAS: [out's row length] */
    const double *freq;   /* ROPE: [rope_dims / 2] the layer's pair frequencies (NULL: it does not rotate) */
    const double *freq_long; /* ROPE: [rope_dims / 2] those of the positions >= long_from (LongRoPE); NULL: none */
    int64_t long_from;    /* ROPE: the first position rotated with freq_long */
    float scale;          /* SCALE, SOFTCAP: the factor / the cap; ROPE: the queries' factor */
    float rope_mul;       /* ROPE: the factor on cos and sin, so on the rotated dims of q and of k (LongRoPE) */
    tg_arch_norm norm;    /* NORM, HEAD_NORM: always RMS (the model holds Gemma's 1 + w, arch.h) */
    tg_arch_glu glu;      /* GLU */
    bool own_kv;          /* ROPE_APPEND: the layer appends its own k, v (false: it reads kv_source's, YOCO); ROPE:
                           * the layer has keys of its own to rotate */
} tg_op;

typedef struct {
    tg_op *ops; /* [n] in the order of the maths */
    int n, cap;
} tg_program;

/* Writes the forward pass of model m (with weights): the embedding, every layer, the final norm and the output head.
 * False (err filled) when memory runs out. Free with tg_program_free. */
bool tg_program_build(tg_program *p, const struct tg_model *m, tg_error *err);
void tg_program_free(tg_program *p);

/* The name of an operation kind, for messages. */
const char *tg_op_name(tg_op_kind kind);

#endif
