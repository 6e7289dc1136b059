/* model.h — hyper-parameters and per-layer weight views of a Llama-family model, independent of the file format. */
#ifndef TG_MODEL_H
#define TG_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "format/gguf.h"
#include "format/safetensors.h"
#include "kernels/ops.h"
#include "kernels/tensor.h"
#include "model/arch.h"
#include "model/rope_scaling.h"
#include "tinygpt.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    char architecture[32];
    const tg_arch *arch;      /* the family's row (arch.h); NULL only for a vocab-only file of another family */
    int n_layers;
    int d_model;
    int n_heads, n_kv_heads, head_dim; /* head_dim may differ from d_model / n_heads (explicit head_dim) */
    int ffn_dim;
    int vocab_size;
    int context_length;
    int sliding_window;       /* 0 = none */
    int *layer_window;        /* [n_layers] the model's window of each layer (0: none; owned by the model); NULL:
                               * sliding_window on every layer (Gemma 2/3: on the sliding layers only) */
    float attn_softcap;       /* scores s -> c tanh(s / c) before the softmax (Gemma 2); 0: none */
    float final_softcap;      /* the same on the logits (Gemma 2); 0: none */
    float query_scale;        /* the queries' factor before attention (Gemma: query_pre_attn_scalar^-1/2); 0:
                               * 1 / sqrt(head_dim) */
    float rope_theta_local;   /* Gemma 3: the RoPE base of the sliding layers (unscaled); 0: rope_theta */
    int rope_dims;            /* the dims of each head that rotate (partial rotary, Phi-4-mini); 0: head_dim */
    float rope_attn_factor;   /* LongRoPE: the factor on cos and sin (on q and k); 0: 1 */
    const float *rope_long, *rope_short; /* LongRoPE: [rope_dims / 2] each pair's divisor, by position (owned) */
    int64_t rope_original_context;       /* LongRoPE: the first position rotated with the long factors */
    unsigned char *layer_rope;/* [n_layers] program_rope rows: 0 the layer does not rotate (SmolLM3), 1 global,
                               * 2 local (Gemma 3's sliding layers); owned by the model */
    const double *layer_freq; /* program_rope rows: [n_layers][rope_dims / 2] each layer's pair frequencies (owned;
                               * model/layer_rope.h); LongRoPE: with the short factors */
    const double *layer_freq_long; /* LongRoPE: [n_layers][rope_dims / 2] with the long factors, for the positions
                                    * >= rope_original_context (owned); NULL: layer_freq at every position */
    float rope_theta;
    float norm_eps;
    tg_rope_style rope_style; /* HALF for Hugging Face weights, INTERLEAVED for llama.cpp-converted GGUF */
    tg_rope_scaling rope_scaling;  /* NONE unless the file declares a scaling */
    const double *rope_inv_freq;   /* [head_dim / 2] the scaled frequencies (owned by the model); NULL = unscaled */
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
    float *bq, *bk, *bv;         /* [n_heads * head_dim], [n_kv_heads * head_dim] x 2: biases (qkv_bias; else NULL) */
    float *q_norm, *k_norm;      /* [head_dim] the per-head norms of q and k (qk_norm; else NULL) */
    float *post_attn_norm, *post_ffn_norm; /* [d_model] the norms of the block outputs (post_norms; else NULL) */
} tg_layer_weights;

/* The most end-of-sequence ids a model keeps (real configs list up to three). */
#define TG_MAX_EOS_IDS 16

struct tg_model {
    tg_hparams hp;
    bool has_weights;
    tg_tensor tok_embd;          /* [vocab, d_model] */
    float *out_norm;             /* [d_model] */
    tg_tensor lm_head;           /* [vocab, d_model]; equals tok_embd when tied */
    tg_layer_weights *layers;    /* [n_layers] */
    tg_tokenizer *tokenizer;     /* NULL only for a folder loaded with TG_NEED_CONFIG that has no tokenizer.json */
    int32_t config_bos;          /* config.json's bos_token_id (-1: none): BOS when there is no tokenizer */
    int32_t eos_ids[TG_MAX_EOS_IDS]; /* every id that ends generation (tg_token_eos_ids) */
    int n_eos_ids;
    tg_generation_defaults gen;  /* generation_config.json's sampling settings */
    char absent[320];            /* TG_NEED_CONFIG: what the folder lacks (tg_model_info.absent) */
    int64_t n_params;
    int64_t weight_bytes;        /* bytes read per decoded token (tg_model_info.weight_bytes) */
    char weight_types[64];
    /* format handles that own the mappings */
    tg_gguf *gguf;
    tg_safetensors *st;
    void *owned;                 /* any converted copies (norms etc.), freed with the model */
    uint8_t *repacked;           /* the repacked matrices (tg_model_repack), repacked_bytes long; NULL: none */
    size_t repacked_bytes;
};

/* Moves every matrix the decode multiplies whose type has repacked kernels in this build (kernels/repack.h) into the
 * repacked layout, in one buffer of the model's (m->repacked), giving back the file's pages of each; the token
 * embedding only when tied (it is then the output matrix). Weights must be bound and checked. False (err names
 * `path`) only when the memory cannot be had. */
bool tg_model_repack(struct tg_model *m, const char *path, tg_error *err);
/* Frees m->repacked (tg_model_free calls it). */
void tg_model_repack_free(struct tg_model *m);

/* Format-specific loaders (called by tg_model_load after it has decided what `path` is). */
bool tg_model_load_gguf(struct tg_model *m, const char *path, tg_error *err);
bool tg_model_load_hf(struct tg_model *m, const char *dir, tg_model_need need, tg_error *err);

/* Adds id to the model's end-of-sequence ids unless it is there already (or negative); false with a message naming
 * `where` when more than TG_MAX_EOS_IDS are given. */
bool tg_model_add_eos(struct tg_model *m, int32_t id, const char *where, tg_error *err);

/* The parameters of the weight tensors hp implies (the shapes tg_model_bind_weights checks); -1 on overflow. */
int64_t tg_hparams_param_count(const tg_hparams *hp);

/* The model's tokenizer (never NULL for a loaded model); owned by the model. */
const tg_tokenizer *tg_model_tokenizer(const tg_model *m);

/* ---- helpers shared by the two loaders (model.c) ---- */

/* A zeroed buffer of `bytes` / a zeroed float buffer of n elements owned by the model (freed by tg_model_free);
 * NULL on allocation failure. */
void *tg_model_alloc(struct tg_model *m, size_t bytes);
float *tg_model_alloc_f32(struct tg_model *m, size_t n);

/* When hp.rope_scaling scales the frequencies: computes them once (hp.rope_inv_freq, owned by the model) for the
 * KV cache. hp must be validated (head_dim even, theta positive). */
bool tg_model_set_rope_freqs(struct tg_model *m, tg_error *err);

/* Sets kv_source to the identity (every layer holds its own K/V). hp->n_layers must be set. */
bool tg_model_init_kv_source(struct tg_model *m, tg_error *err);

/* Checks a cross-layer K/V map (YOCO, docs/yoco.md) of n_layers entries: every kv_source[l] in [0, l] (a layer reads
 * its own K/V or an earlier layer's) and every layer that is read holds its own (kv_source[kv_source[l]] ==
 * kv_source[l]). `where` names the file and the key for the message. */
bool tg_kv_source_check(const int *kv_source, int n_layers, const char *where, tg_error *err);

/* Checks the hyper-parameters of a model with weights: positive sizes, heads divisible by kv heads, even head_dim,
 * every derived product within int range. `where` names the file for the message. */
bool tg_hparams_validate(const tg_hparams *hp, const char *where, tg_error *err);

/* Fetches a [rows, cols] view of tensor `name` (rows = 1 for 1-D) in a format-specific way; false with a message
 * naming the tensor, the expected and the actual shape when absent or mis-shaped. */
typedef bool (*tg_view_fn)(const void *ctx, const char *name, int64_t rows, int64_t cols, tg_tensor *out,
                           tg_error *err);

/* Binds every weight of the model (hp must be filled and validated, kv_source set) through `view`: views for the
 * matrices, owned f32 copies for the norms, lm_head = tok_embd when hp.tied_embeddings. Fills n_params,
 * weight_bytes and weight_types and sets has_weights. */
bool tg_model_bind_weights(struct tg_model *m, const tg_weight_names *names, tg_view_fn view, const void *ctx,
                           tg_error *err);

#endif
