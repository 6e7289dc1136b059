/* ops.h — the small element-wise kernels of the transformer: RMSNorm, RoPE, SwiGLU (softmax: vec.h's
 * tg_exp_shift_sum and the attention in src/kvcache). */
#ifndef TG_KERNELS_OPS_H
#define TG_KERNELS_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "tinygpt.h"

/* out[n] = x * scale * weight with scale = 1 / sqrt(mean(x^2) + eps), rounded as llama.cpp and transformers round
 * it: the squares in fp32 summed in double, the mean and the scale in fp32 (within an ulp of the exact scale).
 * out may alias x. */
void tg_rmsnorm(float *out, const float *x, const float *weight, int64_t n, float eps);

/* tg_rmsnorm of each of the n_heads head_dim-wide vectors of x, in place, with the one weight [head_dim] (the
 * per-head query / key norm of Qwen3). */
void tg_rmsnorm_heads(float *x, int64_t n_heads, int64_t head_dim, const float *weight, float eps);

/* y[i] += b[i] for i < n (a bias). */
void tg_add_bias(float *y, const float *b, int64_t n);

typedef enum {
    TG_ROPE_HALF = 0,    /* Hugging Face rotate_half: pairs (i, i + d/2) */
    TG_ROPE_INTERLEAVED, /* llama.cpp "normal" (GGUF llama, Q/K rows permuted by the converter): pairs (2i, 2i+1) */
} tg_rope_style;

/* Rotates each of n_heads vectors x[h*head_dim .. +head_dim) by position pos (theta^(-2i/d) frequencies).
 * head_dim must be even. Pair i (0 <= i < head_dim/2) turns by the angle pos * theta^(-2i/head_dim), computed in
 * double so that large positions (1e5 and beyond) keep full fp32 accuracy in cos/sin:
 *   (a, b) -> (a cos - b sin, a sin + b cos), with (a, b) = (x[i], x[i + d/2]) for HALF, (x[2i], x[2i+1]) for
 *   INTERLEAVED. The two styles are the same rotation of a vector whose halves are interleaved (see the tests). */
void tg_rope(float *x, int n_heads, int head_dim, int64_t pos, float theta, tg_rope_style style);

/* The cos / sin of every pair's angle at position pos, c[head_dim/2] and s[head_dim/2], exactly as tg_rope computes
 * them; tg_rope_apply then rotates with them, bit-for-bit tg_rope. For callers that rotate several vectors at one
 * position (a token's keys and queries) and compute the trigonometry once. */
void tg_rope_angles(int head_dim, int64_t pos, float theta, float *c, float *s);
/* The same with the frequencies given: angle pos * inv_freq[i] (a model that scales its RoPE frequencies). */
void tg_rope_angles_freqs(int head_dim, int64_t pos, const double *inv_freq, float *c, float *s);
void tg_rope_apply(float *x, int n_heads, int head_dim, const float *c, const float *s, tg_rope_style style);

/* Precomputed RoPE cos/sin for positions [0, n_pos): applying it gives bit-for-bit the result of tg_rope without
 * any trigonometry, which matters when keys are rotated at read time (StreamingLLM re-positioning). */
typedef struct {
    int head_dim;
    int64_t n_pos;
    double *inv_freq; /* [head_dim/2] angle per position of pair i */
    float *cos_tab;   /* [n_pos, head_dim/2] */
    float *sin_tab;   /* [n_pos, head_dim/2] */
} tg_rope_table;

/* Builds the table for frequencies theta^(-2i/head_dim). head_dim even and > 0, n_pos >= 0 (0 = no table: every
 * apply computes cos/sin directly). Returns NULL and fills err on bad arguments or out of memory. */
tg_rope_table *tg_rope_table_new(int head_dim, float theta, int64_t n_pos, tg_error *err);
/* Same with caller-chosen frequencies inv_freq[head_dim / 2] (copied): a model that scales them (Llama 3.1's
 * llama3 rule, linear, GGUF rope_freqs.weight; the KV cache's re-positioning table then uses them). */
tg_rope_table *tg_rope_table_new_freqs(int head_dim, const double *inv_freq, int64_t n_pos, tg_error *err);
void tg_rope_table_free(tg_rope_table *t);
/* tg_rope with the table's frequencies; pos >= n_pos (or < 0) is computed directly, still exact. */
void tg_rope_table_apply(const tg_rope_table *t, float *x, int n_heads, int64_t pos, tg_rope_style style);

/* gate[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)). Never NaN from large |g|: silu(-inf) = 0,
 * silu(+inf) = +inf, silu(g) -> -0 for very negative finite g. (A NaN or an Inf times 0 still gives NaN.) */
void tg_swiglu(float *gate, const float *up, int64_t n);

/* gate[i] = gelu_tanh(gate[i]) * up[i], gelu_tanh(g) = g / 2 (1 + tanh(sqrt(2 / pi) (g + 0.044715 g^3))) (GeGLU,
 * Gemma), computed in float as g * sigmoid(2 sqrt(2 / pi) (g + 0.044715 g^3)) (kernels.h): within 1e-6 relative of
 * the double formula plus 2e-7 |g up| absolute (left of 0, z's own rounding goes into exp(-z)); 0 far left (-inf included), +inf at +inf, NaN stays NaN. */
void tg_geglu_tanh(float *gate, const float *up, int64_t n);

/* x[i] = cap * tanh(x[i] / cap) (Gemma 2's soft-cap of the logits), cap > 0. */
void tg_softcap(float *x, float cap, int64_t n);

/* The first rot_dims dims of each of the n_heads head_dim-wide heads of x rotated with c / s [rot_dims / 2]
 * (tg_rope_angles_freqs(rot_dims, ...)) in style's pairs; the other dims kept (partial rotary, Phi-4-mini). */
void tg_rope_heads(float *x, int n_heads, int head_dim, int rot_dims, const float *c, const float *s,
                   tg_rope_style style);

#endif
