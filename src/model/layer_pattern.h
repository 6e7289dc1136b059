/* layer_pattern.h — what differs from layer to layer: the descriptions `info` prints (the model's own sliding
 * windows, layers without RoPE, a family's extras), and the RoPE of the rows whose model program rotates q and k
 * itself (tg_arch.program_rope): each layer's pair frequencies (Gemma 3's local and global bases, SmolLM3's layers without RoPE, partial rotary, LongRoPE
 * factors), computed once from the hyper-parameters. */
#ifndef TG_MODEL_LAYER_PATTERN_H
#define TG_MODEL_LAYER_PATTERN_H

#include <stdbool.h>

#include "model/model.h"

/* For a program_rope row: fills hp.layer_rope when the file gave none (every layer global; Gemma 3: its sliding
 * layers local), hp.layer_freq [n_layers][rope_dims / 2] (LongRoPE: with the short factors, and hp.layer_freq_long
 * with the long ones for the positions >= the original context, as transformers rotates a token at its position
 * when it is fed one at a time) and hp.rope_inv_freq = zeros (the cache's rotation is then
 * the identity: cos 0 = 1, sin 0 = 0 exactly). Nothing for other rows. hp must be validated. */
bool tg_model_set_layer_rope(struct tg_model *m, tg_error *err);

/* The queries' factor the program applies before the cache's 1 / sqrt(head_dim): query_scale * sqrt(head_dim)
 * (1 when query_scale is 0). (LongRoPE's attention factor scales cos and sin instead: the rotated dims only.) */
float tg_layer_rope_q_factor(const tg_hparams *hp);

/* One line: which layers the model itself windows and which attend to everything (a cache policy's window bounds
 * those), e.g. "sliding 4096 on 13 layers; full on 13: 1, 3, ..., 25"; and the layers without RoPE. */
void tg_layer_pattern_describe(const tg_hparams *hp, char *out, size_t cap);

/* One line of what the family adds to Llama's layer (Gemma: "embedding x sqrt(d), post-norms, GeGLU (tanh), query
 * scale 256^-1/2, ..."); "" for none. */
void tg_family_describe(const tg_hparams *hp, char *out, size_t cap);

#endif
