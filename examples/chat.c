/* chat.c — a multi-turn conversation rendered with the model's chat template (tg_chat), greedy replies.
 *
 *   chat MODEL TEMPLATE N [SYSTEM] < turns.txt
 *
 * TEMPLATE is a built-in name (tg_chat_builtin_names) or "-" for the model's own template. Each line of standard
 * input is a user turn; each reply (at most N tokens) is printed on its own line. Every turn renders the whole
 * conversation and re-reads it from an empty cache (tg_session_reset) — simple, and the same replies as `tinygpt chat`,
 * which keeps its cache across turns instead. Exit status 1 on any failure. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tinygpt.h>

#define MAX_MESSAGES 64

static bool keep(int32_t id, const char *text, size_t len, void *user) {
    (void)id;
    char **reply = user;
    size_t have = strlen(*reply);
    char *grown = realloc(*reply, have + len + 1);
    if (!grown) return false;
    memcpy(grown + have, text, len);
    grown[have + len] = '\0';
    *reply = grown;
    return true;
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 5) {
        fprintf(stderr, "usage: chat MODEL TEMPLATE N [SYSTEM] < turns.txt\n");
        return 2;
    }
    tg_error err = {0};
    tg_model *model = tg_model_load(argv[1], &err);
    tg_chat *chat = model ? tg_chat_open(argv[1], strcmp(argv[2], "-") ? argv[2] : NULL, &err) : NULL;
    tg_session *s = chat ? tg_session_new(model, NULL, 1, &err) : NULL;
    tg_sampler_params sp = tg_sampler_default_params();
    sp.temperature = 0;
    tg_sampler *smp = s ? tg_sampler_new(&sp, tg_vocab_size(model), &err) : NULL;
    if (!smp) {
        fprintf(stderr, "chat: %s\n", err.msg);
        return 1;
    }
    tg_chat_message msgs[MAX_MESSAGES];
    char *owned[MAX_MESSAGES] = {0};
    size_t n = 0;
    if (argc == 5) msgs[n++] = (tg_chat_message){"system", argv[4]};
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
        tg_session_reset(s); /* the conversation so far, read again from an empty cache */
        if (!prompt || !reply || !tg_chat_tokenize(chat, model, prompt, len, &ids, &n_ids, &err) ||
            tg_generate(s, smp, ids, n_ids, strtol(argv[3], NULL, 10), keep, &reply, &err) < 0) {
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
    tg_sampler_free(smp);
    tg_session_free(s);
    tg_chat_free(chat);
    tg_model_free(model);
    return status;
}
