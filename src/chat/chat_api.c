/* chat_api.c — tinygpt.h's tg_chat: a model's chat template (or a built-in one) compiled once, rendering a
 * conversation given as an array of tg_chat_message, and tokenising the result as `tinygpt chat` does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/chat_template.h"
#include "chat/template_source.h"
#include "tinygpt.h"
#include "util/error.h"

struct tg_chat {
    tg_chat_template *tmpl;
    tg_chat_source src; /* the model's template source and its BOS / EOS strings */
    const char *text;   /* the template's source: src.text or a built-in's */
    char origin[400];   /* where the template came from, for messages */
};

void tg_chat_free(tg_chat *c) {
    if (!c) return;
    tg_chat_template_free(c->tmpl);
    tg_chat_source_free(&c->src);
    free(c);
}

tg_chat *tg_chat_open(const char *model_path, const char *builtin, tg_error *err) {
    if (!model_path) {
        tg_fail(err, "tg_chat_open: no model path");
        return NULL;
    }
    tg_chat *c = tg_calloc_or_fail(1, sizeof *c, err);
    if (!c) return NULL;
    if (!tg_chat_source_find(model_path, &c->src, err)) {
        tg_chat_free(c);
        return NULL;
    }
    const char *text = c->src.text;
    size_t len = c->src.len;
    if (builtin) {
        text = tg_chat_builtin(builtin);
        if (!text) {
            tg_fail(err, "no built-in chat template '%s' (built-ins: %s)", builtin, tg_chat_builtin_names());
            tg_chat_free(c);
            return NULL;
        }
        len = strlen(text);
        snprintf(c->origin, sizeof c->origin, "the built-in template '%.64s'", builtin);
    } else if (!text) {
        tg_fail(err, "%s carries no chat template (built-ins: %s)", model_path, tg_chat_builtin_names());
        tg_chat_free(c);
        return NULL;
    } else {
        snprintf(c->origin, sizeof c->origin, "%s", c->src.origin);
    }
    c->text = text;
    tg_error why = {0};
    c->tmpl = tg_chat_template_compile(text, len, NULL, &why);
    if (!c->tmpl) {
        tg_fail(err, "%s: %s", c->origin, why.msg);
        tg_chat_free(c);
        return NULL;
    }
    return c;
}

/* The messages as the JSON array the template reads; NULL with err (a role or content missing or not UTF-8). */
static json_t *messages_json(const tg_chat_message *messages, size_t n, tg_error *err) {
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        if (!messages[i].role || !messages[i].content) {
            tg_fail(err, "chat message %zu has no role or no content", i);
            json_decref(arr);
            return NULL;
        }
        json_t *role = json_string(messages[i].role), *content = json_string(messages[i].content);
        if (!role || !content) {
            json_decref(role);
            json_decref(content);
            json_decref(arr);
            tg_fail(err, "chat message %zu is not valid UTF-8 text", i);
            return NULL;
        }
        json_t *m = json_pack("{s:o, s:o}", "role", role, "content", content);
        if (!m || json_array_append_new(arr, m) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    if (!arr) tg_fail(err, "out of memory");
    return arr;
}

char *tg_chat_render(const tg_chat *c, const tg_chat_message *messages, size_t n, bool add_generation_prompt,
                     size_t *len, tg_error *err) {
    if (!c || (n > 0 && !messages)) {
        tg_fail(err, "tg_chat_render: no template or no messages");
        return NULL;
    }
    json_t *arr = messages_json(messages, n, err);
    if (!arr) return NULL;
    json_t *vars = tg_chat_source_vars(&c->src, arr, add_generation_prompt);
    json_decref(arr);
    if (!vars) {
        tg_fail(err, "out of memory");
        return NULL;
    }
    size_t got = 0;
    tg_error why = {0};
    char *text = tg_chat_template_render(c->tmpl, vars, NULL, &got, &why);
    json_decref(vars);
    if (!text) tg_fail(err, "%s: %s", c->origin, why.msg);
    if (len) *len = text ? got : 0;
    return text;
}

bool tg_chat_tokenize(const tg_chat *c, const tg_model *model, const char *text, size_t len, int32_t **ids,
                      size_t *n_ids, tg_error *err) {
    if (!c || !model || !text) return tg_fail(err, "tg_chat_tokenize: no template, model or text");
    const char *bos = c->src.bos_token;
    const size_t bos_len = bos ? strlen(bos) : 0;
    const bool has_bos = bos_len > 0 && len >= bos_len && memcmp(text, bos, bos_len) == 0;
    return tg_tokenize(model, text, len, tg_model_adds_bos(model) && !has_bos, ids, n_ids, err);
}

size_t tg_chat_end_ids(const tg_chat *c, const tg_model *model, int32_t *ids, size_t max) {
    if (!model || (max > 0 && !ids)) return 0;
    return tg_chat_source_end_ids(c ? c->text : NULL, model, ids, max);
}
