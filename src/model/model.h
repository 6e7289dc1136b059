/* model.h — hyper-parameters and per-layer weight views of a Llama-family model, independent of the file format. */
#ifndef TG_MODEL_H
#define TG_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "format/gguf.h"
#include "format/safetensors.h"
#include "kernels/ops.h"
#include "kernels/tensor.h"
#include "tinygpt.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    char architecture[32];
    int n_layers;
    int d_model;
    int n_heads, n_kv_heads, head_dim; /* head_dim may differ from d_model / n_heads (explicit head_dim) */
    int ffn_dim;
    int vocab_size;
    int context_length;
    int sliding_window;       /* 0 = none */
    float rope_theta;
    float norm_eps;
    tg_rope_style rope_style; /* HALF for Hugging Face weights, INTERLEAVED for llama.cpp-converted GGUF */
    bool tied_embeddings;
    /* YOCO / cross-layer sharing: kv_source[l] = the layer whose K/V layer l reads (l itself if it holds its own). */
    int *kv_source;           /* [n_layers] */
} tg_hparams;

typedef struct {
    float *attn_norm;            /* [d_model] (owned f32 copy) */
    tg_tensor wq;                /* [n_heads * head_dim, d_model] */
    tg_tensor wk;                /* [n_kv_heads * head_dim, d_model] (absent for a layer that reads shared K/V) */
    tg_tensor wv;                /* [n_kv_heads * head_dim, d_model] */
    tg_tensor wo;                /* [d_model, n_heads * head_dim] */
    float *ffn_norm;             /* [d_model] */
    tg_tensor w_gate;            /* [ffn_dim, d_model] */
    tg_tensor w_up;              /* [ffn_dim, d_model] */
    tg_tensor w_down;            /* [d_model, ffn_dim] */
} tg_layer_weights;

struct tg_model {
    tg_hparams hp;
    bool has_weights;
    tg_tensor tok_embd;          /* [vocab, d_model] */
    float *out_norm;             /* [d_model] */
    tg_tensor lm_head;           /* [vocab, d_model]; equals tok_embd when tied */
    tg_layer_weights *layers;    /* [n_layers] */
    tg_tokenizer *tokenizer;
    int64_t n_params;
    char weight_types[64];
    /* format handles that own the mappings */
    tg_gguf *gguf;
    tg_safetensors *st;
    void *owned;                 /* any converted copies (norms etc.), freed with the model */
};

/* Format-specific loaders (called by tg_model_load after it has decided what `path` is). */
bool tg_model_load_gguf(struct tg_model *m, const char *path, tg_error *err);
bool tg_model_load_hf(struct tg_model *m, const char *dir, tg_error *err);

#endif
