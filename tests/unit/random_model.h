/* random_model.h — test support: a random in-memory Llama model with F32, Q8_0 or Q4_0 weights (2 layers, d 64, 4 heads / 2
 * kv-heads of 16, ffn 96, vocab 96), optionally with Llama 3 RoPE scaling, for tests that run the forward pass over
 * caches they make themselves. */
#ifndef TG_TESTS_RANDOM_MODEL_H
#define TG_TESTS_RANDOM_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"

typedef struct random_model random_model;

/* A model of context ctx from seed; llama3: its frequencies scaled by the Llama 3 rule (factor 8, low 1, high 4,
 * original context ctx / 4). Aborts the test on out of memory. */
random_model *random_model_new(int ctx, uint64_t seed, bool llama3);
/* The same with the matrices (all but the token embedding and the norms) stored as type: TG_DT_F32, TG_DT_Q8_0 or
 * TG_DT_Q4_0 (quantised from the same random values). */
random_model *random_model_new_typed(int ctx, tg_dtype type, uint64_t seed, bool llama3);
const struct tg_model *random_model_get(const random_model *r);
/* Its matrices in the repacked layout where the build has kernels for their type (tg_model_repack), as the model
 * loader holds a file's. */
void random_model_repack(random_model *r);
void random_model_free(random_model *r);

/* n token ids that repeat themselves with variations (attention has something to find), from seed. */
int32_t *random_model_text(int n, int vocab, uint64_t seed);

#endif
