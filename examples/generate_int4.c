/* generate_int4.c — greedy generation through a bounded int4 KV cache, token by token with the session API.
 *
 *   generate_int4 MODEL PROMPT N
 *
 * Prints the N-token continuation of PROMPT to stdout (the text of `tinygpt sample MODEL --prompt PROMPT -n N
 * --temperature 0 --no-echo --kv-quantize int4 --streaming-llm-window 64`), then checks that the cache stayed bounded
 * and smaller than an fp32 one, and prints its report on stderr. Exit status 1 on any failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tinygpt.h>

static int fail(const char *what, const tg_error *err) {
    fprintf(stderr, "generate_int4: %s: %s\n", what, err->msg);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: generate_int4 MODEL PROMPT N\n");
        return 2;
    }
    const long n_new = strtol(argv[3], NULL, 10);
    tg_error err = {0};
    tg_model *model = tg_model_load(argv[1], &err);
    if (!model) return fail("loading the model", &err);

    tg_cache_params cp = tg_cache_default_params();
    cp.key_precision = cp.value_precision = TG_KV_INT4; /* KIVI int4 keys and values */
    cp.window = 64;                                     /* StreamingLLM: 4 sinks + the last 64 tokens */
    tg_session *s = tg_session_new(model, &cp, 1, &err);
    tg_sampler_params sp = tg_sampler_default_params();
    sp.temperature = 0; /* greedy */
    tg_sampler *smp = s ? tg_sampler_new(&sp, tg_vocab_size(model), &err) : NULL;
    tg_detok *dt = smp ? tg_detok_new(model, &err) : NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (!dt || !tg_tokenize(model, argv[2], strlen(argv[2]), tg_model_adds_bos(model), &ids, &n_ids, &err))
        return fail("setting up", &err);

    float *logits = malloc((size_t)tg_vocab_size(model) * sizeof *logits);
    if (!logits || !tg_session_eval(s, ids, n_ids, NULL, logits, &err)) return fail("the prompt", &err);
    tg_detok_skip_prompt(dt, ids, n_ids); /* the text starts after the prompt */
    const char *text;
    size_t len;
    for (long i = 0; i < n_new; i++) {
        int32_t id = tg_sampler_sample(smp, logits);
        if (id < 0 || tg_token_is_eos(model, id)) break;
        tg_detok_push(dt, id, &text, &len);
        fwrite(text, 1, len, stdout);
        if (i + 1 < n_new && !tg_session_eval(s, &id, 1, NULL, logits, &err)) return fail("decoding", &err);
    }
    tg_detok_flush(dt, &text, &len);
    fwrite(text, 1, len, stdout);
    fflush(stdout);

    tg_cache_report r;
    tg_session_cache_report(s, &r);
    fprintf(stderr, "cache: %s; %lld of %lld tokens held, %zu bytes (fp32 would be %zu)\n", r.policy,
            (long long)r.stored, (long long)r.position, r.bytes_total, r.bytes_if_fp32);
    int status = 0;
    if (r.position > 80 && r.stored >= r.position) status = fail("the cache is not bounded", &err);
    if (r.bytes_total * 4 > r.bytes_if_fp32) status = fail("an int4 cache is not a quarter of fp32's", &err);

    free(logits);
    free(ids);
    tg_detok_free(dt);
    tg_sampler_free(smp);
    tg_session_free(s);
    tg_model_free(model);
    return status;
}
