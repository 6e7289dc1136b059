/* tokenizer.h — BPE tokenizers as Hugging Face `tokenizers` and llama.cpp run them: byte-level (GPT-2 / SmolLM2)
 * and SentencePiece-style (Llama-2 / Mistral: metaspace, byte fallback, scores or merges), loaded from
 * tokenizer.json or from GGUF metadata. Knows nothing of the model. */
#ifndef TG_TOKENIZER_H
#define TG_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/gguf.h"
#include "tinygpt.h"

typedef struct tg_tokenizer tg_tokenizer;

/* From a Hugging Face folder: tokenizer.json (required), tokenizer_config.json and generation_config.json
 * (optional: BOS/EOS tokens, add_bos_token). NULL with a message naming the file and problem (missing vocab or
 * merges, unsupported model type...). */
tg_tokenizer *tg_tokenizer_load_hf(const char *dir, tg_error *err);
/* From GGUF metadata: tokenizer.ggml.model "llama" (tokens + scores + token_type) or "gpt2" (tokens + merges),
 * tokenizer.ggml.pre, bos/eos ids, add_bos_token. */
tg_tokenizer *tg_tokenizer_load_gguf(const tg_gguf *g, tg_error *err);
void tg_tokenizer_free(tg_tokenizer *t);

int32_t tg_tokenizer_vocab_size(const tg_tokenizer *t);
int32_t tg_tokenizer_bos(const tg_tokenizer *t); /* -1 if none */
int32_t tg_tokenizer_eos(const tg_tokenizer *t); /* -1 if none */
bool tg_tokenizer_adds_bos(const tg_tokenizer *t);

/* Encodes len bytes (any bytes; invalid UTF-8 goes through byte fallback / byte-level mapping) into a malloc'ed
 * array *ids of *n ids, BOS first when add_bos. Special/added tokens appearing in the text are matched as wholes. */
bool tg_tokenizer_encode(const tg_tokenizer *t, const char *text, size_t len, bool add_bos, int32_t **ids, size_t *n,
                         tg_error *err);
/* tg_tokenizer_encode that stops as soon as the text is known to give more than max_ids ids (BOS counted): false,
 * *over set, err->code TG_ERR_TOO_MANY_TOKENS. A word is split into symbols only when the ids so far and the fewest
 * it can give fit the cap, so a text over the cap costs memory and work of the order of the cap, not of the text
 * (a million-letter word is refused before a million symbols are made). max_ids SIZE_MAX: no cap. */
bool tg_tokenizer_encode_max(const tg_tokenizer *t, const char *text, size_t len, bool add_bos, size_t max_ids,
                             int32_t **ids, size_t *n, bool *over, tg_error *err);

/* The bytes token `id` stands for when it follows `prev` (prev = -1 at the start of the text, which lasts while the
 * tokens before decode to nothing, e.g. after a leading BOS; the detokeniser tracks this): byte-level tokens
 * map back to raw bytes, metaspace becomes a space (dropped at the very start where the tokenizer's decoder does),
 * <0xNN> byte tokens become their byte, BOS/EOS and other control tokens become nothing. Writes at most cap bytes
 * into buf and returns the number of bytes the piece has. */
size_t tg_tokenizer_decode_piece(const tg_tokenizer *t, int32_t prev, int32_t id, char *buf, size_t cap);
/* The bytes of ids[0..n) decoded as one text (the pieces above, joined). Writes at most cap bytes into buf and
 * returns the number of bytes the text has. */
size_t tg_tokenizer_decode(const tg_tokenizer *t, const int32_t *ids, size_t n, char *buf, size_t cap);

/* A streaming detokeniser (tinygpt.h) over t, which must outlive it. NULL (err filled) for no t or out of memory. */
tg_detok *tg_tokenizer_detok_new(const tg_tokenizer *t, tg_error *err);

#endif
