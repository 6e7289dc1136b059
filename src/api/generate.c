/* generate.c — tg_generate: a prompt through the session, then the generation step's tokens handed to a callback
 * as text, each evaluated in turn (the loop of `tinygpt sample`, for programs that link the library). */
#include <stdlib.h>

#include "api/session_internal.h"
#include "tinygpt.h"
#include "util/error.h"

/* Everything one call owns, freed together. */
typedef struct {
    float *logits;
    tg_generator *gen;
} generate_run;

static int64_t run_end(generate_run *r, int64_t result) {
    free(r->logits);
    tg_generator_free(r->gen);
    return result;
}

int64_t tg_generate(tg_session *s, tg_sampler *sampler, const int32_t *prompt, size_t n_prompt,
                    int64_t max_tokens, tg_token_fn on_token, void *user, tg_error *err) {
    if (!s || !sampler) {
        tg_fail(err, "tg_generate: no session or no sampler");
        return -1;
    }
    if (!prompt || n_prompt == 0) {
        tg_fail(err, "tg_generate: the prompt is empty (give at least BOS)");
        return -1;
    }
    const tg_model *model = tg_session_model(s);
    generate_run r = {0};
    r.logits = malloc((size_t)tg_vocab_size(model) * sizeof *r.logits);
    if (!r.logits) {
        tg_fail(err, "out of memory");
        return run_end(&r, -1);
    }
    tg_generator_params gp = tg_generator_default_params();
    gp.max_tokens = max_tokens > 0 ? max_tokens : 0;
    r.gen = tg_generator_new(model, sampler, &gp, err);
    if (!r.gen) return run_end(&r, -1);
    if ((int64_t)n_prompt > tg_session_remaining(s)) {
        tg_fail_code(err, TG_ERR_CONTEXT_FULL, "the prompt is %zu tokens but the context holds %lld more", n_prompt,
                     (long long)tg_session_remaining(s));
        return run_end(&r, -1);
    }
    if (!tg_session_eval(s, prompt, n_prompt, NULL, r.logits, err)) return run_end(&r, -1);
    if (!tg_generator_start(r.gen, prompt, n_prompt, false, NULL, NULL, err)) return run_end(&r, -1);

    tg_gen_token t = {.stop = max_tokens > 0 ? TG_GEN_GOING : TG_GEN_MAX_TOKENS};
    bool go_on = true;
    while (go_on && t.stop == TG_GEN_GOING) {
        if (!tg_generator_step(r.gen, r.logits, &t, err)) return run_end(&r, -1);
        if (t.stop == TG_GEN_END || t.stop == TG_GEN_STOP_STRING) break;
        if (on_token && !on_token(t.id, t.text, t.len, user)) go_on = false;
        if (tg_session_remaining(s) < 1) break; /* an unbounded cache is full */
        /* the session's abort callback (not the generator's): asked once the token is handed out, after on_token,
         * which it may watch */
        if (tg_session_aborted(s)) {
            tg_fail_code(err, TG_ERR_ABORTED, "aborted after %lld generated tokens",
                         (long long)tg_generator_count(r.gen));
            return run_end(&r, -1);
        }
        /* the last token too (max_tokens or the callback's stop): the session then holds all the text */
        if (!tg_session_eval_token(s, t.id, r.logits, err)) return run_end(&r, -1);
    }
    if (!tg_generator_finish(r.gen, &t, err)) return run_end(&r, -1);
    if (t.len > 0 && on_token) (void)on_token(-1, t.text, t.len, user);
    return run_end(&r, tg_generator_count(r.gen));
}
