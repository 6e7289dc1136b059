/* ops.h — the small element-wise kernels of the transformer: RMSNorm, RoPE, softmax, SiLU. */
#ifndef TG_KERNELS_OPS_H
#define TG_KERNELS_OPS_H

#include <stdint.h>

/* out[n] = x / sqrt(mean(x^2) + eps) * weight; out may alias x. */
void tg_rmsnorm(float *out, const float *x, const float *weight, int64_t n, float eps);

typedef enum {
    TG_ROPE_HALF = 0,    /* Hugging Face rotate_half: pairs (i, i + d/2) */
    TG_ROPE_INTERLEAVED, /* llama.cpp "normal" (GGUF llama, Q/K rows permuted by the converter): pairs (2i, 2i+1) */
} tg_rope_style;

/* Rotates each of n_heads vectors x[h*head_dim .. +head_dim) by position pos (theta^(-2i/d) frequencies). */
void tg_rope(float *x, int n_heads, int head_dim, int64_t pos, float theta, tg_rope_style style);
/* In-place softmax of x[n] (max-subtracted). */
void tg_softmax(float *x, int64_t n);
/* gate[i] = silu(gate[i]) * up[i] */
void tg_swiglu(float *gate, const float *up, int64_t n);

#endif
