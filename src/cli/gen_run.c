/* gen_run.c — the model, session, sampler, generator and logits of `sample` and `chat` (gen_run.h). */
#include "cli/gen_run.h"

#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cache_errors.h"

int tg_gen_run_open(tg_gen_run *r, const tg_cache_params *cache, int threads, const tg_sampler_params *sp,
                    const tg_generator_params *gp) {
    tg_error err = {0};
    r->session = tg_session_new(r->model, cache, threads, &err);
    if (!r->session) {
        tg_cli_word_error(&err, cache);
        return tg_runtime_error("%s", err.msg);
    }
    r->sampler = tg_sampler_new(sp, tg_vocab_size(r->model), &err);
    if (r->sampler) r->gen = tg_generator_new(r->model, r->sampler, gp, &err);
    if (!r->sampler || !r->gen) return tg_runtime_error("%s", err.msg);
    r->logits = malloc((size_t)tg_vocab_size(r->model) * sizeof *r->logits);
    return r->logits ? TG_EXIT_OK : tg_runtime_error("out of memory");
}

void tg_gen_run_free(tg_gen_run *r) {
    tg_generator_free(r->gen);
    tg_sampler_free(r->sampler);
    tg_session_free(r->session);
    tg_model_free(r->model);
    free(r->logits);
    memset(r, 0, sizeof *r);
}
