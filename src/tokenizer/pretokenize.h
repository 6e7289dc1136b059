/* pretokenize.h — splitting text into pre-tokens: regex splits (PCRE2, Unicode classes), GPT-2 byte-level mapping
 * and SentencePiece metaspace, as Hugging Face `tokenizers` pre-tokenizers and llama.cpp's regex lists do. */
#ifndef TG_TOKENIZER_PRETOKENIZE_H
#define TG_TOKENIZER_PRETOKENIZE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tinygpt.h"

/* The GPT-2 pre-tokenizer pattern (also ByteLevel's built-in one). */
#define TG_REGEX_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

/* A compiled pattern. Matching treats the subject as UTF-8 with Unicode classes; invalid UTF-8 in a subject is
 * never matched by any part of the pattern (PCRE2_MATCH_INVALID_UTF), so such bytes end up between matches. */
typedef struct tg_regex tg_regex;
/* literal: the pattern is a plain string to find, not a regex. NULL with a message naming source (the file the
 * pattern comes from) and the pattern. */
tg_regex *tg_regex_new(const char *pattern, size_t len, bool literal, const char *source, tg_error *err);
void tg_regex_free(tg_regex *re);

typedef enum {
    TG_SPLIT_REMOVED,     /* matches dropped */
    TG_SPLIT_ISOLATED,    /* matches become pieces of their own */
    TG_SPLIT_MERGED_PREV, /* a match joins the piece before it */
    TG_SPLIT_MERGED_NEXT, /* a match joins the piece after it */
    TG_SPLIT_CONTIGUOUS,  /* adjacent matches join into one piece */
} tg_split_behavior;

typedef enum {
    TG_PRE_SPLIT,      /* split every piece on a pattern */
    TG_PRE_BYTE_LEVEL, /* optional prefix space, optional GPT-2 split, then bytes -> byte-level characters */
    TG_PRE_METASPACE,  /* spaces -> replacement, optional prefix, optional split before each replacement */
} tg_pre_kind;

typedef enum { TG_PREPEND_ALWAYS, TG_PREPEND_FIRST, TG_PREPEND_NEVER } tg_prepend_scheme;

typedef struct {
    tg_pre_kind kind;
    tg_regex *re;               /* SPLIT; BYTE_LEVEL when it splits (owned by the tokenizer) */
    tg_split_behavior behavior; /* SPLIT */
    bool invert;                /* SPLIT: the pattern marks what is kept */
    bool add_prefix_space;      /* BYTE_LEVEL: prepend ' ' to a piece that does not start with one */
    char replacement[5];        /* METASPACE: UTF-8 of the replacement character, NUL-terminated */
    size_t replacement_len;
    tg_prepend_scheme prepend;  /* METASPACE */
    bool split;                 /* METASPACE */
} tg_pre_step;

/* Pre-tokens: pieces of a byte buffer. */
typedef struct {
    size_t off, len;
    bool first; /* starts at offset 0 of the original input (for prepend scheme "first") */
} tg_piece;

typedef struct {
    char *buf;
    size_t len, cap;
    tg_piece *p;
    size_t n, cap_p;
} tg_pieces;

/* Working memory for running pre-tokenizer steps; reusable across calls. source: the tokenizer's file, which
 * messages name (not copied: it must outlive the context). */
typedef struct tg_pretok_ctx tg_pretok_ctx;
tg_pretok_ctx *tg_pretok_ctx_new(const char *source);
void tg_pretok_ctx_free(tg_pretok_ctx *c);

/* Replaces the pieces with one piece holding text[0..len). False on allocation failure. */
bool tg_pieces_set(tg_pieces *ps, const char *text, size_t len, bool first);
void tg_pieces_free(tg_pieces *ps);

/* Runs steps[0..n) over ps in order. Every rewritten text is sized exactly before it is written; one that would
 * exceed max_bytes is not written: false with *over set and err untouched (the caller names the tokenizer and the
 * limit). Otherwise false with a message on allocation or regex-engine failure. */
bool tg_pretok_run(const tg_pre_step *steps, size_t n, tg_pieces *ps, size_t max_bytes, tg_pretok_ctx *c,
                   bool *over, tg_error *err);

#endif
