/* tok_internal.h — the tokenizer's internal representation, shared by its loaders, encoder and decoder.
 *
 * Both loaders describe a tokenizer the way Hugging Face `tokenizers` does: a list of normalizer steps, a list of
 * pre-tokenizer steps, a model (BPE by merge rank, or SentencePiece by piece score) and decoder flags. Encoding
 * splits the text on added tokens first, then runs each piece in between through that pipeline. */
#ifndef TG_TOKENIZER_INTERNAL_H
#define TG_TOKENIZER_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/added_match.h"
#include "tokenizer/hashmap.h"
#include "tokenizer/merge_heap.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/tokenizer.h"

/* Token types, numbered as GGUF's tokenizer.ggml.token_type. */
enum {
    TG_TOK_NORMAL = 1,
    TG_TOK_UNKNOWN = 2,
    TG_TOK_CONTROL = 3,
    TG_TOK_USER = 4,
    TG_TOK_UNUSED = 5,
    TG_TOK_BYTE = 6,
};

typedef enum {
    TG_TOKMODEL_BPE, /* merges by rank (HF BPE, llama.cpp "gpt2") */
    TG_TOKMODEL_SPM, /* bigrams by piece score (llama.cpp "llama", SentencePiece BPE) */
} tg_tok_model;

typedef enum {
    TG_NORM_PREPEND, /* a before a non-empty text */
    TG_NORM_REPLACE, /* every a -> b (literal) */
} tg_norm_kind;

typedef struct {
    tg_norm_kind kind;
    char *a, *b; /* owned, NUL-terminated; b unused for PREPEND */
    size_t a_len, b_len;
} tg_norm_step;

/* One added (special or user-defined) token the encoder matches as a whole before anything else. */
typedef struct {
    int32_t id;
    size_t len;          /* bytes of its text */
    bool lstrip, rstrip; /* swallow white space (Unicode White_Space) on that side */
} tg_added_token;

/* Ceilings on the work one encode call may do, whatever tokenizer.json says. Normalizers and pre-tokenizers may
 * lengthen a text (Prepend, Replace, Metaspace, byte-level mapping); legitimate tokenizers at most triple it
 * (spaces -> U+2581) and then double that (byte-level), so a call may produce at most
 * TG_TOK_EXPAND_FACTOR x its input + TG_TOK_EXPAND_SLACK bytes of normalized / pre-tokenized text (every
 * intermediate step counted, the sections between added tokens sharing one budget), and at most as many ids.
 * Exceeding either is an error naming the tokenizer file and the limit (docs/errors.md). */
#define TG_TOK_EXPAND_FACTOR 16
#define TG_TOK_EXPAND_SLACK 4096
/* At most this many normalizer and this many pre-tokenizer steps (Sequences flattened); real tokenizers use a few. */
#define TG_TOK_MAX_STEPS 64

struct tg_tokenizer {
    char *source;             /* the file it was loaded from (tokenizer.json or the GGUF), for messages */
    int32_t n_vocab;
    char *text;               /* token texts, back to back */
    size_t *off;              /* [n_vocab + 1]: token i is text[off[i] .. off[i + 1]) */
    uint8_t *type;            /* [n_vocab] TG_TOK_* */
    float *score;             /* [n_vocab] (SPM model only, else NULL) */
    tg_strmap vocab;          /* text -> id */
    tg_pairmap merges;        /* (left, right) -> rank, merged (BPE model only) */
    bool have_merges;

    tg_tok_model model;
    bool byte_fallback;       /* unknown characters -> <0xNN> tokens */
    bool fuse_unk;            /* consecutive unknowns -> one unk */
    bool ignore_merges;       /* a pre-token that is a whole vocab entry is emitted as is */
    bool spm_normal_only;     /* SPM bigrams may only form NORMAL / USER tokens */
    int32_t byte_id[256];     /* <0xNN> token per byte, -1 if absent */
    int32_t unk, bos, eos;    /* -1 if none */
    bool add_bos;

    tg_norm_step *norm;       /* [n_norm] */
    size_t n_norm;
    tg_pre_step *pre;         /* [n_pre] */
    size_t n_pre;

    tg_added_token *added;    /* [n_added], by id */
    size_t n_added;
    tg_added_matcher *added_match; /* finds them in the raw text: its index i is added[i], or added[raw_index[i]] */
    /* Hugging Face added tokens marked "normalized": true, when there are normalizer steps: tokenizers matches them
     * in the normalized text against their normalized content (tg_tok_set_normalized); added_match then finds only
     * the others. NULL / 0 when there are none. */
    size_t *raw_index;             /* [added_match's count] added_match index -> added[] index */
    tg_added_matcher *norm_match;  /* over the normalized contents */
    size_t *norm_index;            /* [n_norm_added] norm_match index -> added[] index */
    size_t *norm_len;              /* [n_norm_added] bytes of each normalized content */
    size_t n_norm_added;

    /* decoder */
    bool dec_byte_level;      /* NORMAL tokens are byte-level characters */
    bool dec_metaspace;       /* U+2581 in NORMAL tokens decodes to a space */
    bool dec_byte_fallback;   /* BYTE tokens decode to their byte */
    int dec_strip_start;      /* leading spaces dropped at the start of the text */
};

/* ---- construction helpers (tokenizer.c) ---- */

/* A zeroed tokenizer with n_vocab empty UNUSED tokens reserved, loaded from the file `source` (copied; messages from
 * here on name it); texts are set with tg_tok_set_texts. */
tg_tokenizer *tg_tok_alloc(int32_t n_vocab, const char *source, tg_error *err);
/* Copies texts[i] (lens[i] bytes) into the arena, or "" where texts[i] is NULL, and builds the text -> id map. */
bool tg_tok_set_texts(tg_tokenizer *t, const char *const *texts, const size_t *lens, tg_error *err);
/* After types and texts are set: fills byte_id from <0xNN> tokens, and indexes the added tokens: every token of
 * type CONTROL, USER or UNKNOWN with non-empty text (lstrip/rstrip from the optional arrays, may be NULL). */
bool tg_tok_finish(tg_tokenizer *t, const bool *lstrip, const bool *rstrip, tg_error *err);
/* After tg_tok_finish and the normalizer steps: the added tokens whose normalized[id] is set are matched in the
 * normalized text against their normalized content, as Hugging Face tokenizers does ("normalized": true); the rest
 * stay matched in the raw text. Nothing changes without normalizer steps or such tokens. */
bool tg_tok_set_normalized(tg_tokenizer *t, const bool *normalized, tg_error *err);
/* Parses "<0xNN>"; false for anything else. */
bool tg_tok_parse_byte(const char *s, size_t len, uint8_t *out);
/* Appends a normalizer step (strings copied). */
bool tg_tok_add_norm(tg_tokenizer *t, tg_norm_kind kind, const char *a, size_t a_len, const char *b, size_t b_len,
                     tg_error *err);
/* Appends a pre-tokenizer step (ownership of step->re passes to t, also on failure). */
bool tg_tok_add_pre(tg_tokenizer *t, const tg_pre_step *step, tg_error *err);
/* Adds merge `rank`: the two token texts a and b. Merges whose parts or result are not in the vocab are skipped
 * (*skipped incremented). */
bool tg_tok_add_merge(tg_tokenizer *t, const char *a, size_t a_len, const char *b, size_t b_len, int32_t rank,
                      size_t *skipped);

static inline const char *tg_tok_text(const tg_tokenizer *t, int32_t id, size_t *len) {
    *len = t->off[id + 1] - t->off[id];
    return t->text + t->off[id];
}

/* ---- models (bpe.c, spm.c) ---- */

/* A growable id list. */
typedef struct {
    int32_t *ids;
    size_t n, cap;
} tg_idvec;
bool tg_idvec_push(tg_idvec *v, int32_t id);

/* Symbols of the word being merged (a doubly linked list over arrays), reused from word to word. */
typedef struct {
    int32_t *id;       /* [cap] BPE: the symbol's token id */
    size_t *start;     /* [cap] byte offset of the symbol in the word */
    size_t *len;       /* [cap] byte length; 0 once merged into its left neighbour */
    int32_t *prev, *next; /* [cap] neighbours, -1 at the ends */
    size_t cap;
    tg_merge_heap heap;
} tg_word_scratch;
void tg_word_scratch_free(tg_word_scratch *s);
/* Room for n symbols. */
bool tg_word_scratch_reserve(tg_word_scratch *s, size_t n);

/* Encodes one pre-token word w[0..len) with the BPE model (Hugging Face's BPE::merge_word: characters -> ids,
 * byte fallback / unk, then merges lowest rank first, leftmost first), appending ids. False only on allocation
 * failure. */
bool tg_bpe_word(const tg_tokenizer *t, const char *w, size_t len, tg_word_scratch *s, tg_idvec *out);
/* Encodes one word with the SentencePiece score model (llama.cpp's llm_tokenizer_spm: merge the adjacent pair
 * whose concatenation is the highest-scoring piece, leftmost first; leftovers go to <0xNN> bytes). */
bool tg_spm_word(const tg_tokenizer *t, const char *w, size_t len, tg_word_scratch *s, tg_idvec *out);

#endif
