/* chat.c — `tinygpt chat` through the public API: a multi-turn conversation rendered with the model's chat template
 * (tg_chat), greedy replies made by the generation step (tg_generator) with the template's end-of-turn ids
 * (tg_chat_end_ids) and stop strings.
 *
 *   chat MODEL TEMPLATE N [SYSTEM [STOP...]] < turns.txt
 *
 * TEMPLATE is a built-in name (tg_chat_builtin_names) or "-" for the model's own template; SYSTEM "" for none. Each
 * line of standard input is a user turn; each reply (at most N tokens, ended before any STOP) is printed on its own
 * line. Every turn renders the whole conversation and re-reads it from an empty cache (tg_session_reset) — simple,
 * and the same replies as `tinygpt chat --temperature 0 --tokens N --stop STOP`, which keeps its cache across turns
 * instead. Exit status 1 on any failure. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tinygpt.h>

#define MAX_MESSAGES 64
#define MAX_END_IDS 8

/* Appends text[len] to the malloc'ed string *s; false when memory runs out. */
static bool append(char **s, const char *text, size_t len) {
    size_t have = strlen(*s);
    char *grown = realloc(*s, have + len + 1);
    if (!grown) return false;
    memcpy(grown + have, text, len);
    grown[have + len] = '\0';
    *s = grown;
    return true;
}

/* One reply to prompt ids[n] into *reply: the session re-reads the prompt, then the generation step runs; a token it
 * hands out while the reply goes on is evaluated, the last one need not be (the next turn re-reads everything). */
static bool reply_to(tg_session *s, tg_generator *gen, const int32_t *ids, size_t n, char **reply, tg_error *err) {
    float *logits = malloc((size_t)tg_vocab_size(tg_session_model(s)) * sizeof *logits);
    tg_session_reset(s);
    bool ok = logits && tg_session_eval(s, ids, n, NULL, logits, err) &&
              tg_generator_start(gen, ids, n, false, NULL, NULL, err);
    tg_gen_token t = {.stop = TG_GEN_GOING};
    while (ok && t.stop == TG_GEN_GOING) {
        ok = tg_generator_step(gen, logits, &t, err) && append(reply, t.text, t.len);
        if (ok && t.stop == TG_GEN_GOING) {
            if (tg_session_remaining(s) < 1) break; /* the context is full */
            ok = tg_session_eval(s, &t.id, 1, NULL, logits, err);
        }
    }
    ok = ok && tg_generator_finish(gen, &t, err) && append(reply, t.text, t.len);
    free(logits);
    return ok;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: chat MODEL TEMPLATE N [SYSTEM [STOP...]] < turns.txt\n");
        return 2;
    }
    tg_error err = {0};
    tg_model *model = tg_model_load(argv[1], &err);
    tg_chat *chat = model ? tg_chat_open(argv[1], strcmp(argv[2], "-") ? argv[2] : NULL, &err) : NULL;
    tg_session *s = chat ? tg_session_new(model, NULL, 1, &err) : NULL;
    tg_sampler_params sp = tg_sampler_default_params();
    sp.temperature = 0;
    tg_sampler *smp = s ? tg_sampler_new(&sp, tg_vocab_size(model), &err) : NULL;
    int32_t end_ids[MAX_END_IDS];
    tg_generator_params gp = tg_generator_default_params();
    gp.max_tokens = strtol(argv[3], NULL, 10);
    gp.end_ids = end_ids;
    gp.n_end_ids = tg_chat_end_ids(chat, model, end_ids, MAX_END_IDS);
    gp.stops = (const char *const *)argv + 5;
    gp.n_stops = argc > 5 ? (size_t)(argc - 5) : 0;
    tg_generator *gen = smp ? tg_generator_new(model, smp, &gp, &err) : NULL;
    if (!gen) {
        fprintf(stderr, "chat: %s\n", err.msg);
        return 1;
    }
    tg_chat_message msgs[MAX_MESSAGES];
    char *owned[MAX_MESSAGES] = {0};
    size_t n = 0;
    if (argc >= 5 && argv[4][0]) msgs[n++] = (tg_chat_message){"system", argv[4]};
    char line[4096];
    int status = 0;
    while (status == 0 && n + 2 <= MAX_MESSAGES && fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\r\n")] = '\0';
        owned[n] = strdup(line);
        msgs[n] = (tg_chat_message){"user", owned[n]};
        n++;
        size_t len = 0, n_ids = 0;
        int32_t *ids = NULL;
        char *prompt = tg_chat_render(chat, msgs, n, true, &len, &err);
        char *reply = calloc(1, 1);
        if (!prompt || !reply || !tg_chat_tokenize(chat, model, prompt, len, &ids, &n_ids, &err) ||
            !reply_to(s, gen, ids, n_ids, &reply, &err)) {
            fprintf(stderr, "chat: turn %zu: %s\n", n, err.msg);
            status = 1;
        } else {
            printf("%s\n", reply);
            owned[n] = reply;
            msgs[n] = (tg_chat_message){"assistant", reply};
            n++;
            reply = NULL;
        }
        free(reply);
        free(ids);
        free(prompt);
    }
    for (size_t i = 0; i < n; i++) free(owned[i]);
    tg_generator_free(gen);
    tg_sampler_free(smp);
    tg_session_free(s);
    tg_chat_free(chat);
    tg_model_free(model);
    return status;
}
