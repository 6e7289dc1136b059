/* template_source.h — finding a model's chat template and its BOS/EOS token strings, without loading weights:
 * a GGUF's `tokenizer.chat_template` (tokens from tokenizer.ggml.tokens), or in a Hugging Face folder
 * `chat_template.jinja`, else `chat_template` in tokenizer_config.json (a string, or a list of {name, template}
 * of which "default" is used, as transformers does); the tokens from tokenizer_config.json, else
 * special_tokens_map.json. */
#ifndef TG_CHAT_TEMPLATE_SOURCE_H
#define TG_CHAT_TEMPLATE_SOURCE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "tinygpt.h"

typedef struct {
    char *text;        /* the template source (malloc'ed), NULL when the model carries none */
    size_t len;
    char origin[320];  /* where it came from, for messages: "tokenizer.chat_template in m.gguf", ... */
    char *bos_token;   /* malloc'ed, NULL when unknown */
    char *eos_token;
} tg_chat_source;

/* Looks at model_path (a .gguf file or a folder). Returns true with *out filled — text NULL when the model has no
 * chat template, which is not an error — or false with a one-line message naming the file (unreadable or
 * malformed JSON, a template list without "default", a template over 1 MiB, ...). Free with
 * tg_chat_source_free. */
bool tg_chat_source_find(const char *model_path, tg_chat_source *out, tg_error *err);
void tg_chat_source_free(tg_chat_source *s);

/* The variables a chat template is rendered with, as transformers passes them: messages (the JSON array, referenced
 * not copied), add_generation_prompt, and bos_token / eos_token where src knows them (an unknown one stays
 * undefined, not None). NULL when memory runs out. */
json_t *tg_chat_source_vars(const tg_chat_source *src, json_t *messages, bool add_generation_prompt);

/* The ids that end a reply, at most max of them into ids[]: EOS (the tokenizer's), then every common end-of-turn
 * marker that template_text (NULL: none) mentions and the tokenizer encodes as one token (<|im_end|> of ChatML,
 * <|eot_id|> of Llama 3, ...). Returns the count. */
size_t tg_chat_source_end_ids(const char *template_text, const tg_model *model, int32_t *ids, size_t max);

#endif
