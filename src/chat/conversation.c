/* conversation.c — the conversation of `tinygpt chat` and the server: template lookup and compilation, the
 * messages, rendering, end-of-turn ids. */
#include "chat/conversation.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "; choose a built-in with --chat-template NAME (chatml, ...)" */
static void suggest_builtin(char *msg, size_t cap) {
    size_t used = strlen(msg);
    if (used + 1 < cap)
        snprintf(msg + used, cap - used, "; choose a built-in with --chat-template NAME (%s)", tg_chat_builtin_names());
}

bool tg_chat_conv_open(tg_chat_conv *c, const char *model_path, const char *builtin, char *msg, size_t cap) {
    memset(c, 0, sizeof *c);
    tg_error err = {0};
    if (!tg_chat_source_find(model_path, &c->src, &err)) {
        snprintf(msg, cap, "%s", err.msg);
        return false;
    }
    const char *text = NULL;
    size_t len = 0;
    if (builtin) {
        text = tg_chat_builtin(builtin);
        if (!text) {
            snprintf(msg, cap, "--chat-template: no built-in template '%s' (built-ins: %s)", builtin,
                     tg_chat_builtin_names());
            tg_chat_conv_close(c);
            return false;
        }
        len = strlen(text);
        c->builtin = builtin;
        snprintf(c->origin, sizeof c->origin, "the built-in template '%.64s'", builtin);
    } else {
        if (!c->src.text) {
            snprintf(msg, cap, "%s carries no chat template", model_path);
            suggest_builtin(msg, cap);
            tg_chat_conv_close(c);
            return false;
        }
        text = c->src.text;
        len = c->src.len;
        snprintf(c->origin, sizeof c->origin, "%s", c->src.origin);
    }
    c->tmpl = tg_chat_template_compile(text, len, NULL, &err);
    c->messages = json_array();
    if (!c->tmpl || !c->messages) {
        snprintf(msg, cap, "%s: %s", c->origin, c->tmpl ? "out of memory" : err.msg);
        if (!builtin) suggest_builtin(msg, cap);
        tg_chat_conv_close(c);
        return false;
    }
    return true;
}

void tg_chat_conv_close(tg_chat_conv *c) {
    tg_chat_template_free(c->tmpl);
    tg_chat_source_free(&c->src);
    json_decref(c->messages);
    memset(c, 0, sizeof *c);
}

bool tg_chat_conv_add(tg_chat_conv *c, const char *role, const char *content, size_t len, char *msg, size_t cap) {
    json_t *text = json_stringn(content, len); /* NULL for invalid UTF-8 (or out of memory) */
    if (!text) {
        snprintf(msg, cap, "a %s message is not valid UTF-8 text", role);
        return false;
    }
    json_t *m = json_pack("{s:s, s:o}", "role", role, "content", text);
    if (!m || json_array_append_new(c->messages, m) != 0) {
        snprintf(msg, cap, "out of memory");
        return false;
    }
    return true;
}

bool tg_chat_conv_add_json(tg_chat_conv *c, const char *text, size_t len, const char *name, char *msg, size_t cap) {
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        snprintf(msg, cap, "%s: bad JSON at line %d, column %d: %s", name, je.line, je.column, je.text);
        return false;
    }
    bool ok = json_is_array(root);
    if (!ok) snprintf(msg, cap, "%s: expected a JSON array of {\"role\", \"content\"} objects", name);
    for (size_t i = 0; ok && i < json_array_size(root); i++) {
        json_t *m = json_array_get(root, i);
        json_t *role = json_object_get(m, "role"), *content = json_object_get(m, "content");
        if (!json_is_object(m) || !json_is_string(role) || !json_is_string(content)) {
            snprintf(msg, cap, "%s: message %zu: expected an object with string \"role\" and \"content\"", name, i);
            ok = false;
        } else if (json_array_append(c->messages, m) != 0) {
            snprintf(msg, cap, "out of memory");
            ok = false;
        }
    }
    json_decref(root);
    return ok;
}

char *tg_chat_conv_render(const tg_chat_conv *c, bool add_generation_prompt, size_t *len, char *msg, size_t cap) {
    return tg_chat_conv_render_cancel(c, add_generation_prompt, NULL, len, msg, cap);
}

char *tg_chat_conv_render_cancel(const tg_chat_conv *c, bool add_generation_prompt, const tg_chat_cancel *cancel,
                                 size_t *len, char *msg, size_t cap) {
    json_t *vars = tg_chat_source_vars(&c->src, c->messages, add_generation_prompt);
    if (!vars) {
        snprintf(msg, cap, "out of memory");
        return NULL;
    }
    tg_error err = {0};
    char *text = tg_chat_template_render_cancel(c->tmpl, vars, NULL, cancel, len, &err);
    json_decref(vars);
    if (!text) {
        snprintf(msg, cap, "%s: %s", c->origin, err.msg);
        if (!c->builtin) suggest_builtin(msg, cap);
    }
    return text;
}

bool tg_chat_conv_probe(const tg_chat_conv *c, char *msg, size_t cap) {
    const char *last = tg_chat_conv_last_role(c);
    const bool ends_with_user = last && strcmp(last, "user") == 0;
    tg_chat_conv probe = *c;
    probe.messages = json_copy(c->messages); /* shallow: the probe turn is appended to the copy only */
    bool ok = probe.messages && (ends_with_user || tg_chat_conv_add(&probe, "user", "Hello.", 6, msg, cap));
    if (!probe.messages) snprintf(msg, cap, "out of memory");
    size_t len = 0;
    char *text = ok ? tg_chat_conv_render(&probe, true, &len, msg, cap) : NULL;
    free(text);
    json_decref(probe.messages);
    return text != NULL;
}

const char *tg_chat_conv_last_role(const tg_chat_conv *c) {
    size_t n = json_array_size(c->messages);
    return n ? json_string_value(json_object_get(json_array_get(c->messages, n - 1), "role")) : NULL;
}

size_t tg_chat_conv_end_ids(const tg_chat_conv *c, const tg_model *model, int32_t *ids, size_t max) {
    return tg_chat_source_end_ids(c->builtin ? tg_chat_builtin(c->builtin) : c->src.text, model, ids, max);
}
