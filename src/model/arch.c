/* arch.c — the table of architecture rows (arch.h): one row per model family, looked up by the names files give. */
#include "model/arch.h"

#include <stdio.h>
#include <string.h>

/* llama.cpp's converter's tensor names (Llama and every family it writes in Llama's layout). */
#define GGUF_LLAMA_NAMES                                                                                            \
        .tok_embd = "token_embd.weight", .out_norm = "output_norm.weight", .lm_head = "output.weight",              \
        .layer_prefix = "blk.", .attn_norm = "attn_norm.weight", .wq = "attn_q.weight", .wk = "attn_k.weight",      \
        .wv = "attn_v.weight", .wo = "attn_output.weight", .ffn_norm = "ffn_norm.weight",                           \
        .w_gate = "ffn_gate.weight", .w_up = "ffn_up.weight", .w_down = "ffn_down.weight"

/* transformers' LlamaForCausalLM names (MistralForCausalLM's are the same), but for the feed-forward's norm. */
#define HF_COMMON_NAMES                                                                                             \
        .tok_embd = "model.embed_tokens.weight", .out_norm = "model.norm.weight", .lm_head = "lm_head.weight",      \
        .layer_prefix = "model.layers.", .attn_norm = "input_layernorm.weight", .wq = "self_attn.q_proj.weight",    \
        .wk = "self_attn.k_proj.weight", .wv = "self_attn.v_proj.weight", .wo = "self_attn.o_proj.weight",          \
        .w_gate = "mlp.gate_proj.weight", .w_up = "mlp.up_proj.weight", .w_down = "mlp.down_proj.weight"
#define HF_LLAMA_NAMES HF_COMMON_NAMES, .ffn_norm = "post_attention_layernorm.weight"

/* The q/k/v biases and the per-head q/k norms of llama.cpp's qwen2 / qwen3 and of transformers' Qwen2 / Qwen3. */
#define GGUF_QKV_BIAS .bq = "attn_q.bias", .bk = "attn_k.bias", .bv = "attn_v.bias"
#define HF_QKV_BIAS .bq = "self_attn.q_proj.bias", .bk = "self_attn.k_proj.bias", .bv = "self_attn.v_proj.bias"
#define GGUF_QK_NORM .q_norm = "attn_q_norm.weight", .k_norm = "attn_k_norm.weight"
#define HF_QK_NORM .q_norm = "self_attn.q_norm.weight", .k_norm = "self_attn.k_norm.weight"

/* Gemma 2 / 3: the norms of the block outputs; the feed-forward's pre-norm is pre_feedforward_layernorm. */
#define GGUF_POST_NORMS .post_attn_norm = "post_attention_norm.weight", .post_ffn_norm = "post_ffw_norm.weight"
#define HF_GEMMA_NORMS                                                                                              \
        .ffn_norm = "pre_feedforward_layernorm.weight", .post_attn_norm = "post_attention_layernorm.weight",        \
        .post_ffn_norm = "post_feedforward_layernorm.weight"

/* Phi-3: the fused [q | k | v] and [gate | up] matrices (llama.cpp keeps them fused, [gate | up] as ffn_up). */
#define GGUF_FUSED .wqkv = "attn_qkv.weight", .w_gate_up = "ffn_up.weight"
#define HF_FUSED .wqkv = "self_attn.qkv_proj.weight", .w_gate_up = "mlp.gate_up_proj.weight"

/* One row per family. The YOCO variant (docs/yoco.md) is Llama's row: its layers are Llama's, its layer map is
 * read by the loaders. */
static const tg_arch ARCHS[] = {
    {
        .name = "llama",
        .gguf_name = "llama",
        .hf_names = {"LlamaForCausalLM", "TinyGPTYocoForCausalLM", NULL},
        .hf_model_type = "llama",
        .gguf = {GGUF_LLAMA_NAMES},
        .hf = {HF_LLAMA_NAMES},
        .hf_default_context = 2048,
    },
    {
        .name = "mistral",
        .hf_names = {"MistralForCausalLM", NULL},
        .hf_model_type = "mistral",
        .gguf = {GGUF_LLAMA_NAMES},
        .hf = {HF_LLAMA_NAMES},
        .hf_default_context = 131072,
        .hf_sliding_window = true,
    },
    {
        .name = "qwen2",
        .gguf_name = "qwen2",
        .hf_names = {"Qwen2ForCausalLM", NULL},
        .hf_model_type = "qwen2",
        .gguf = {GGUF_LLAMA_NAMES, GGUF_QKV_BIAS},
        .hf = {HF_LLAMA_NAMES, HF_QKV_BIAS},
        .hf_default_context = 32768,
        .hf_sliding_window = true,
        .hf_window_flag = true,
        .gguf_rope_half = true,
        .qkv_bias = true,
    },
    {
        .name = "qwen3",
        .gguf_name = "qwen3",
        .hf_names = {"Qwen3ForCausalLM", NULL},
        .hf_model_type = "qwen3",
        .gguf = {GGUF_LLAMA_NAMES, GGUF_QK_NORM},
        .hf = {HF_LLAMA_NAMES, HF_QK_NORM},
        .hf_default_context = 32768,
        .hf_sliding_window = true,
        .hf_window_flag = true,
        .gguf_rope_half = true,
        .qk_norm = true,
    },
    {
        .name = "gemma2",
        .gguf_name = "gemma2",
        .hf_names = {"Gemma2ForCausalLM", NULL},
        .hf_model_type = "gemma2",
        .gguf = {GGUF_LLAMA_NAMES, GGUF_POST_NORMS},
        .hf = {HF_COMMON_NAMES, HF_GEMMA_NORMS},
        .hf_default_context = 8192,
        .gguf_rope_half = true,
        .norm = TG_NORM_RMS_PLUS_ONE,
        .glu = TG_GLU_GELU_TANH,
        .post_norms = true,
        .embed_scale = true,
        .program_rope = true,
        .swa_pattern = 2,
        .gguf_big_layers = 46,
        .hf_defaults = "{\"tie_word_embeddings\": true, \"query_pre_attn_scalar\": 256, \"head_dim\": 256, "
                       "\"attn_logit_softcapping\": 50.0, \"final_logit_softcapping\": 30.0, "
                       "\"sliding_window\": 4096, \"vocab_size\": 256000}",
    },
    {
        .name = "gemma3",
        .gguf_name = "gemma3",
        .hf_names = {"Gemma3ForCausalLM", "Gemma3ForConditionalGeneration", NULL},
        .hf_model_type = "gemma3_text",
        .gguf = {GGUF_LLAMA_NAMES, GGUF_POST_NORMS, GGUF_QK_NORM},
        .hf = {HF_COMMON_NAMES, HF_GEMMA_NORMS, HF_QK_NORM},
        .hf_default_context = 131072,
        .gguf_rope_half = true,
        .norm = TG_NORM_RMS_PLUS_ONE,
        .glu = TG_GLU_GELU_TANH,
        .qk_norm = true,
        .post_norms = true,
        .embed_scale = true,
        .program_rope = true,
        .swa_pattern = 6,
        .gguf_rope_theta_local = 10000.0f,
        .gguf_big_layers = 62,
        .hf_defaults = "{\"tie_word_embeddings\": true, \"vocab_size\": 262208, \"hidden_size\": 2304, "
                       "\"intermediate_size\": 9216, \"num_hidden_layers\": 26, \"num_attention_heads\": 8, "
                       "\"num_key_value_heads\": 4, \"head_dim\": 256, \"query_pre_attn_scalar\": 256, "
                       "\"rope_theta\": 1000000.0, \"rope_local_base_freq\": 10000.0, \"sliding_window\": 4096, "
                       "\"sliding_window_pattern\": 6, \"rms_norm_eps\": 1e-6, "
                       "\"hidden_activation\": \"gelu_pytorch_tanh\"}",
    },
    {
        .name = "phi3",
        .gguf_name = "phi3",
        .hf_names = {"Phi3ForCausalLM", NULL},
        .hf_model_type = "phi3",
        .gguf = {GGUF_LLAMA_NAMES, GGUF_FUSED},
        .hf = {HF_LLAMA_NAMES, HF_FUSED},
        .hf_default_context = 4096,
        .hf_sliding_window = true,
        .gguf_rope_half = true,
        .fused_qkv = true,
        .program_rope = true,
    },
    {
        .name = "smollm3",
        .gguf_name = "smollm3",
        .hf_names = {"SmolLM3ForCausalLM", NULL},
        .hf_model_type = "smollm3",
        .gguf = {GGUF_LLAMA_NAMES},
        .hf = {HF_LLAMA_NAMES},
        .hf_default_context = 32768,
        .hf_sliding_window = true,
        .hf_window_flag = true,
        .program_rope = true,
        .no_rope_interval = 4,
        .hf_defaults = "{\"tie_word_embeddings\": true}",
    },
};

#define N_ARCHS (sizeof ARCHS / sizeof ARCHS[0])

const tg_arch *tg_arch_by_name(const char *name) {
    for (size_t i = 0; i < N_ARCHS; i++)
        if (strcmp(ARCHS[i].name, name) == 0) return &ARCHS[i];
    return NULL;
}

const tg_arch *tg_arch_by_gguf(const char *name, size_t len) {
    for (size_t i = 0; i < N_ARCHS; i++) {
        const char *g = ARCHS[i].gguf_name;
        if (g && strlen(g) == len && memcmp(g, name, len) == 0) return &ARCHS[i];
    }
    return NULL;
}

const tg_arch *tg_arch_by_hf(const char *name, bool hf_model_type) {
    for (size_t i = 0; i < N_ARCHS; i++) {
        if (hf_model_type) {
            if (strcmp(ARCHS[i].hf_model_type, name) == 0) return &ARCHS[i];
            continue;
        }
        for (int j = 0; ARCHS[i].hf_names[j]; j++)
            if (strcmp(ARCHS[i].hf_names[j], name) == 0) return &ARCHS[i];
    }
    return NULL;
}

void tg_arch_list(char *out, size_t size, int kind) {
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < N_ARCHS; i++) {
        const char *one[3] = {ARCHS[i].gguf_name, ARCHS[i].hf_model_type, NULL};
        const char *const *names = kind == TG_ARCH_LIST_HF ? ARCHS[i].hf_names : one + (kind == TG_ARCH_LIST_GGUF ? 0 : 1);
        for (int j = 0; names[j] && (kind == TG_ARCH_LIST_HF || j < 1); j++) {
            int w = snprintf(out + used, size - used, "%s%s", used ? ", " : "", names[j]);
            if (w < 0 || (size_t)w >= size - used) return;
            used += (size_t)w;
        }
    }
}
