/* rope_scaling.h — the RoPE frequency scalings a model may declare (Hugging Face rope_scaling / rope_parameters
 * types "linear" and "llama3"; GGUF rope.scaling.type "linear" and the per-pair factors of rope_freqs.weight) and
 * the per-pair frequencies they give. The KV cache only sees the resulting frequencies. */
#ifndef TG_MODEL_ROPE_SCALING_H
#define TG_MODEL_ROPE_SCALING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    TG_ROPE_SCALING_NONE = 0, /* theta^(-2i/head_dim) ("default") */
    TG_ROPE_SCALING_LINEAR,   /* every frequency divided by factor (position interpolation) */
    TG_ROPE_SCALING_LLAMA3,   /* Llama 3.1: long wavelengths divided by factor, short kept, a smooth ramp between */
    TG_ROPE_SCALING_LONGROPE, /* Phi-3: per-pair divisors (freq_factors: the long ones when the model's context passes
                               * original_context, else the short ones) and an attention factor (tg_hparams) */
} tg_rope_scaling_type;

typedef struct {
    tg_rope_scaling_type type;
    double factor;                            /* LINEAR, LLAMA3: > 0 */
    double low_freq_factor, high_freq_factor; /* LLAMA3: 0 < low < high */
    int64_t original_context;                 /* LLAMA3, LONGROPE: the pre-training context (> 0) */
    const float *freq_factors;                /* optional [head_dim / 2]: pair i's frequency is also divided by
                                               * freq_factors[i] (GGUF rope_freqs.weight, llama.cpp's Llama 3.1
                                               * form); owned by the model */
} tg_rope_scaling;

/* True when s changes any frequency (a type other than NONE, or per-pair factors). */
bool tg_rope_is_scaled(const tg_rope_scaling *s);

/* inv_freq[i], i < head_dim / 2: theta^(-2i/head_dim) (in double, as the unscaled cache computes it) scaled by s.
 * LLAMA3 follows transformers' _compute_llama3_parameters: with wavelen = 2 pi / f, low_wl = original_context /
 * low_freq_factor, high_wl = original_context / high_freq_factor: wavelen < high_wl keeps f; wavelen > low_wl
 * gives f / factor; otherwise, with smooth = (original_context / wavelen - low_freq_factor) / (high_freq_factor -
 * low_freq_factor), (1 - smooth) f / factor + smooth f. (transformers computes this in float32; here in double.) */
void tg_rope_inv_freq(int head_dim, float theta, const tg_rope_scaling *s, double *inv_freq);

/* One line for `info`: "none", "linear (factor 4)", "llama3 (factor 32, low 1, high 4, original context 8192)",
 * with " + rope_freqs.weight factors" when per-pair factors are set. */
void tg_rope_scaling_describe(const tg_rope_scaling *s, char *out, size_t cap);

#endif
