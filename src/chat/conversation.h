/* conversation.h — the conversation of `tinygpt chat` and of the server's chat completions: the messages (a JSON
 * array in OpenAI's format), the model's chat template compiled once, the rendered text of the whole conversation,
 * and the ids that end a reply. Knows nothing of the cache: `tinygpt chat` feeds the cache the part of each
 * rendering that is new. Library-internal (the tool's cli/ and serve/ use it); messages name the CLI's flags. */
#ifndef TG_CHAT_CONVERSATION_H
#define TG_CHAT_CONVERSATION_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "chat/chat_template.h"
#include "chat/template_source.h"
#include "tinygpt.h"

typedef struct {
    tg_chat_template *tmpl;
    tg_chat_source src;  /* the model's template source and BOS/EOS strings */
    const char *builtin; /* the --chat-template name used, or NULL for the model's own template */
    char origin[400];    /* where the template came from, for messages */
    json_t *messages;    /* array of {role, content} */
} tg_chat_conv;

/* Finds and compiles the template: the built-in `builtin` when non-NULL, else the model's own (model_path: a
 * .gguf or a folder; only the tokenizer files are read). On failure returns false with one line in msg that names
 * the model or the template and, when the template is missing or cannot be rendered, `--chat-template NAME` with
 * the built-in names. */
bool tg_chat_conv_open(tg_chat_conv *c, const char *model_path, const char *builtin, char *msg, size_t cap);
void tg_chat_conv_close(tg_chat_conv *c);

/* Appends {role, content} (content: len bytes, need not be NUL-terminated; must be valid UTF-8). False with msg
 * when the text is not UTF-8 or memory runs out. */
bool tg_chat_conv_add(tg_chat_conv *c, const char *role, const char *content, size_t len, char *msg, size_t cap);

/* Appends the messages of OpenAI-format JSON text[len] (an array of objects with string "role" and "content"). False
 * with one line in msg that starts with `name` (e.g. "--messages FILE") and names the message index on anything
 * else. */
bool tg_chat_conv_add_json(tg_chat_conv *c, const char *text, size_t len, const char *name, char *msg, size_t cap);

/* Renders the conversation (add_generation_prompt as given). Returns the malloc'ed text (caller frees), or NULL with
 * one line in msg naming the template and `--chat-template NAME`. */
char *tg_chat_conv_render(const tg_chat_conv *c, bool add_generation_prompt, size_t *len, char *msg, size_t cap);
/* tg_chat_conv_render that also stops when cancel says so (tg_chat_template_render_cancel; NULL: none). */
char *tg_chat_conv_render_cancel(const tg_chat_conv *c, bool add_generation_prompt, const tg_chat_cancel *cancel,
                                 size_t *len, char *msg, size_t cap);

/* Whether the template renders this conversation with the generation prompt once a user turn is there: as it is
 * when it ends with a user message, else with a user message appended (a template may read messages[0] or require
 * a user turn last, as Qwen's and Gemma's do, so the empty conversation of a chat's start is no test). False with
 * msg as tg_chat_conv_render's; the conversation is not changed. */
bool tg_chat_conv_probe(const tg_chat_conv *c, char *msg, size_t cap);

/* The ids that end a reply (tg_chat_end_ids of the conversation's template). */
size_t tg_chat_conv_end_ids(const tg_chat_conv *c, const tg_model *model, int32_t *ids, size_t max);

/* The role of the last message, or NULL when there is none. */
const char *tg_chat_conv_last_role(const tg_chat_conv *c);

#endif
