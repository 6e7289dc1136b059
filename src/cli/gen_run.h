/* gen_run.h — what `tinygpt sample` and `tinygpt chat` hold while they generate: the model, its session, the sampler
 * and the generation step over it (tg_generator), the logits; made and freed together. */
#ifndef TG_CLI_GEN_RUN_H
#define TG_CLI_GEN_RUN_H

#include "tinygpt.h"

typedef struct {
    tg_model *model;
    tg_session *session;
    tg_sampler *sampler;
    tg_generator *gen;
    float *logits;      /* [vocab] the distribution after the last evaluated token */
} tg_gen_run;

/* With r->model loaded: the session of cache (threads as --threads), the sampler of sp, the generator of gp over it,
 * the logits. TG_EXIT_OK, or TG_EXIT_ERROR with the message printed (a cache error in the flags' terms). */
int tg_gen_run_open(tg_gen_run *r, const tg_cache_params *cache, int threads, const tg_sampler_params *sp,
                    const tg_generator_params *gp);
/* Frees everything, the model too; every part may be NULL. */
void tg_gen_run_free(tg_gen_run *r);

#endif
