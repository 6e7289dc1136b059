/* stream_callback.c — tg_generate streaming tokens through a callback; an abort callback; tg_session_reset.
 *
 *   stream_callback MODEL PROMPT N
 *
 * Streams the greedy N-token continuation of PROMPT to stdout through the token callback (the text of `tinygpt
 * sample MODEL --prompt PROMPT -n N --temperature 0 --no-echo`). Then, on the same session after tg_session_reset, an
 * abort callback stops a second run after 5 tokens (TG_ERR_ABORTED), and a third run after another reset must
 * stream exactly the first run's text again. Exit status 1 on any failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tinygpt.h>

typedef struct {
    char text[65536];
    size_t len;
    long tokens;
    bool print;
} stream;

static bool on_token(int32_t id, const char *text, size_t len, void *user) {
    stream *st = user;
    if (id >= 0) st->tokens++;
    if (st->print) fwrite(text, 1, len, stdout);
    if (st->len + len < sizeof st->text) {
        memcpy(st->text + st->len, text, len);
        st->len += len;
    }
    return true; /* keep going */
}

static bool abort_after_5(void *user) { return ((const stream *)user)->tokens >= 5; }

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: stream_callback MODEL PROMPT N\n");
        return 2;
    }
    const long n_new = strtol(argv[3], NULL, 10);
    tg_error err = {0};
    tg_model *model = tg_model_load(argv[1], &err);
    tg_session *s = model ? tg_session_new(model, NULL, 1, &err) : NULL; /* the default cache */
    tg_sampler_params sp = tg_sampler_default_params();
    sp.temperature = 0;
    tg_sampler *smp = s ? tg_sampler_new(&sp, tg_vocab_size(model), &err) : NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    if (!smp || !tg_tokenize(model, argv[2], strlen(argv[2]), tg_model_adds_bos(model), &ids, &n, &err)) {
        fprintf(stderr, "stream_callback: %s\n", err.msg);
        return 1;
    }
    static stream first = {.print = true}, aborted, again;
    if (tg_generate(s, smp, ids, n, n_new, on_token, &first, &err) < 0) {
        fprintf(stderr, "stream_callback: %s\n", err.msg);
        return 1;
    }
    fflush(stdout);

    int status = 0;
    tg_session_reset(s);
    tg_session_set_abort(s, abort_after_5, &aborted);
    if (tg_generate(s, smp, ids, n, n_new, on_token, &aborted, &err) >= 0 || err.code != TG_ERR_ABORTED ||
        aborted.tokens != 5) {
        fprintf(stderr, "stream_callback: the abort callback did not stop the run after 5 tokens (%ld; %s)\n",
                aborted.tokens, err.msg);
        status = 1;
    } else {
        fprintf(stderr, "aborted as asked: %s\n", err.msg);
    }
    tg_session_set_abort(s, NULL, NULL);
    tg_session_reset(s);
    if (tg_generate(s, smp, ids, n, n_new, on_token, &again, &err) < 0 || again.len != first.len ||
        memcmp(again.text, first.text, first.len) != 0) {
        fprintf(stderr, "stream_callback: after tg_session_reset the same prompt gave other text\n");
        status = 1;
    }
    free(ids);
    tg_sampler_free(smp);
    tg_session_free(s);
    tg_model_free(model);
    return status;
}
