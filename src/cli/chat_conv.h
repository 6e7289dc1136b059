/* chat_conv.h — the conversation of `tinygpt chat`: the messages (a JSON array in OpenAI's format), the model's chat
 * template compiled once, and the rendered text of the whole conversation. Knows nothing of the model or the cache:
 * cmd_chat.c feeds the cache the part of each rendering that is new. */
#ifndef TG_CLI_CHAT_CONV_H
#define TG_CLI_CHAT_CONV_H

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

/* Appends the messages of an OpenAI-format JSON file (an array of objects with string "role" and "content"), at
 * most 64 MiB. False with one line in msg naming the file and the message index on anything else. */
bool tg_chat_conv_load_messages(tg_chat_conv *c, const char *path, char *msg, size_t cap);

/* Renders the conversation (add_generation_prompt as given). Returns the malloc'ed text (caller frees), or NULL with
 * one line in msg naming the template and `--chat-template NAME`. */
char *tg_chat_conv_render(const tg_chat_conv *c, bool add_generation_prompt, size_t *len, char *msg, size_t cap);

/* The ids that end a reply, at most max of them into ids[]: EOS (the tokenizer's), then every common end-of-turn
 * marker that the template mentions and the tokenizer encodes as one token (<|im_end|> of ChatML, <|eot_id|> of
 * Llama 3, ...). Every tg_token_is_eos id ends a reply too (callers check it separately). Returns the count. */
size_t tg_chat_conv_end_ids(const tg_chat_conv *c, const tg_model *model, int32_t *ids, size_t max);

/* The role of the last message, or NULL when there is none. */
const char *tg_chat_conv_last_role(const tg_chat_conv *c);

#endif
