/* arch.h — the architecture row: what one model family's layers are made of, as data (tensor names, norm kind,
 * biases, activation, RoPE, per-layer pattern), one row per family in one table (arch.c). The loaders find a file's
 * row by its declared name; the model program (forward/program.c) reads the row to write the layer's operations.
 * A field's zero value is Llama's, so a row names only where its family differs. */
#ifndef TG_ARCH_H
#define TG_ARCH_H

#include <stdbool.h>
#include <stddef.h>

/* The tensor names of one format. Layer tensors are named layer_prefix + N + "." + the suffix. */
typedef struct {
    const char *tok_embd, *out_norm, *lm_head;
    const char *layer_prefix;
    const char *attn_norm, *wq, *wk, *wv, *wo, *ffn_norm, *w_gate, *w_up, *w_down;
    const char *bq, *bk, *bv;     /* the q, k, v biases (rows with qkv_bias) */
    const char *q_norm, *k_norm;  /* the per-head q and k norms (rows with qk_norm) */
    const char *post_attn_norm, *post_ffn_norm; /* the norms of the attention / feed-forward outputs (post_norms) */
    const char *wqkv, *w_gate_up; /* the fused [q | k | v] and [gate | up] matrices (fused_qkv) */
} tg_weight_names;

/* How a norm scales: RMS: x / rms(x) * w (Llama); RMS_PLUS_ONE: x / rms(x) * (1 + w) (Gemma). The model holds the
 * multiplier: the Hugging Face loader adds the 1 when it copies a RMS_PLUS_ONE row's norms (llama.cpp's converter
 * has added it to a GGUF file's already), so the program's norms are all RMS. */
typedef enum { TG_NORM_RMS, TG_NORM_RMS_PLUS_ONE } tg_arch_norm;

/* The feed-forward's gated activation: act(x W_gate) * (x W_up). SILU: SwiGLU (Llama); GELU_TANH: GeGLU (Gemma). */
typedef enum { TG_GLU_SILU, TG_GLU_GELU_TANH } tg_arch_glu;

typedef struct {
    const char *name;            /* tg_hparams.architecture: "llama", "mistral" */
    const char *gguf_name;       /* GGUF general.architecture; NULL: no GGUF files of this family are read */
    const char *hf_names[3];     /* config.json "architectures"[0] values (NULL-terminated) */
    const char *hf_model_type;   /* config.json "model_type" when "architectures" is absent */
    tg_weight_names gguf, hf;    /* the tensor names in each format */
    int hf_default_context;      /* transformers' max_position_embeddings default for the family */
    bool hf_sliding_window;      /* config.json's "sliding_window" is read (Mistral); else it is no window */
    bool hf_window_flag;         /* ... only when "use_sliding_window" is true, on the layers from "max_window_layers"
                                  * on (Qwen2/3): a window on every layer or on none is read, a mix refused */
    bool gguf_rope_half;         /* llama.cpp keeps the Q/K rows in the file's order and rotates halves (NEOX) */
    tg_arch_norm norm;
    tg_arch_glu glu;
    bool qkv_bias;               /* biases on q, k, v (Qwen2) */
    bool qk_norm;                /* a norm of each head's query and key before RoPE (Qwen3) */
    bool post_norms;             /* norms of the attention and feed-forward outputs before the residual (Gemma 2/3) */
    bool fused_qkv;              /* one [q | k | v] and one [gate | up] matrix in the file (Phi-3) */
    bool embed_scale;            /* the embedding scaled by sqrt(d_model) (Gemma) */
    bool program_rope;           /* the model program rotates q and k (model/layer_rope.h: per-layer frequencies,
                                  * partial rotary, layers without RoPE, a query scale); the cache's RoPE is then
                                  * the identity */
    float gguf_rope_theta_local; /* llama.cpp's fixed RoPE base of the sliding layers (Gemma 3: 10000); 0: none */
    int gguf_big_layers;         /* llama.cpp scales the queries by (d_model / n_heads)^-1/2, not head_dim^-1/2, for
                                  * the model with this many layers (Gemma 2 / 3 27B); 0: never */
    int no_rope_interval;        /* layer l attends without RoPE when (l + 1) % no_rope_interval == 0, where the file
                                  * lists no "no_rope_layers" (SmolLM3: 4, llama.cpp's fixed step); 0: all rotate */
    int swa_pattern;             /* layer l is sliding unless (l + 1) % swa_pattern == 0 (Gemma 2: 2, Gemma 3: 6),
                                  * where the file lists no layer types; 0: the window applies to every layer */
    const char *hf_defaults;     /* JSON: transformers' config defaults for keys config.json may leave out (Gemma);
                                  * a config.json whose model is under "text_config" (Gemma3ForConditionalGeneration)
                                  * is read from that object over these defaults */
} tg_arch;

/* The row named `name` (tg_hparams.architecture), NULL when none. */
const tg_arch *tg_arch_by_name(const char *name);
/* The row whose GGUF general.architecture is the len bytes at `name`, NULL when none. */
const tg_arch *tg_arch_by_gguf(const char *name, size_t len);
/* The row with config.json "architectures"[0] `name` (hf_model_type: "model_type" instead), NULL when none. */
const tg_arch *tg_arch_by_hf(const char *name, bool hf_model_type);
/* Writes the supported names of one kind (GGUF names; HF architectures; HF model types), ", "-separated. */
void tg_arch_list(char *out, size_t size, int kind);
enum { TG_ARCH_LIST_GGUF, TG_ARCH_LIST_HF, TG_ARCH_LIST_HF_MODEL_TYPE };

#endif
