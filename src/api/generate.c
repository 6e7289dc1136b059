/* generate.c — tg_generate: a prompt through the session, then sampled tokens handed to a callback as text, each
 * evaluated in turn (the loop of `tinygpt sample`, for programs that link the library). */
#include <stdlib.h>

#include "api/session_internal.h"
#include "tinygpt.h"
#include "util/error.h"

/* Everything one call owns, freed together. */
typedef struct {
    float *logits;
    tg_detok *detok;
} generate_run;

static int64_t run_end(generate_run *r, int64_t result) {
    free(r->logits);
    tg_detok_free(r->detok);
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
    r.detok = tg_detok_new(model, err);
    if (!r.detok) return run_end(&r, -1);
    if ((int64_t)n_prompt > tg_session_remaining(s)) {
        tg_fail_code(err, TG_ERR_CONTEXT_FULL, "the prompt is %zu tokens but the context holds %lld more", n_prompt,
                     (long long)tg_session_remaining(s));
        return run_end(&r, -1);
    }
    if (!tg_session_eval(s, prompt, n_prompt, NULL, r.logits, err)) return run_end(&r, -1);
    tg_detok_skip_prompt(r.detok, prompt, n_prompt);
    for (size_t i = 0; i < n_prompt; i++) tg_sampler_accept(sampler, prompt[i]);

    const char *text = NULL;
    size_t len = 0;
    int64_t generated = 0;
    bool go_on = true;
    while (go_on && generated < max_tokens) {
        const int32_t id = tg_sampler_sample(sampler, r.logits);
        if (id < 0) {
            tg_fail(err, "the model produced no finite logits");
            return run_end(&r, -1);
        }
        if (tg_token_is_eos(model, id)) break;
        generated++;
        tg_detok_push(r.detok, id, &text, &len);
        if (on_token && !on_token(id, text, len, user)) go_on = false;
        if (tg_session_remaining(s) < 1) break; /* an unbounded cache is full */
        if (tg_session_aborted(s)) {
            tg_fail_code(err, TG_ERR_ABORTED, "aborted after %lld generated tokens", (long long)generated);
            return run_end(&r, -1);
        }
        if (!tg_session_eval_token(s, id, r.logits, err)) return run_end(&r, -1);
    }
    tg_detok_flush(r.detok, &text, &len);
    if (len > 0 && on_token) (void)on_token(-1, text, len, user);
    return run_end(&r, generated);
}
