/* fuzz_tokenize.c — libFuzzer harness for encoding and decoding arbitrary bytes with fixed real vocabularies:
 * llama.cpp's GPT-2 (byte-level BPE) and Llama (SentencePiece-style, byte fallback) vocab GGUFs, and the tiny
 * byte-level Hugging Face tokenizer of fuzz/data/tiny-hf. The vocab GGUFs are looked for in $TG_VOCAB_DIR, else
 * ${TG_SHARED_DIR:-../shared}/testdata/vocab, and skipped when absent. Input byte 0 picks the vocabulary, byte 1
 * holds flags (bit 0: add BOS; bit 1: also decode the text read as 16-bit token ids), the rest is the text.
 * Checked: every id lies in the vocabulary; the streaming detokeniser only ever hands out valid UTF-8, whatever the
 * ids; a byte-level vocabulary gives the text back exactly (valid UTF-8 without special-token text). */
#include "fuzz_common.h"

#define MAX_VOCABS 3

typedef struct {
    tg_model *model;
    bool byte_level; /* decoding gives back exactly the encoded bytes */
} tok_vocab;

static tok_vocab tok_vocabs[MAX_VOCABS];
static size_t tok_n_vocabs;

static void tok_add_vocab(const char *path, bool byte_level) {
    if (access(path, R_OK) != 0) return;
    tg_error err = {0};
    tg_model *m = tg_model_load(path, &err);
    if (!m) fuzz_die("loading a vocabulary", err.msg);
    tok_vocabs[tok_n_vocabs].model = m;
    tok_vocabs[tok_n_vocabs].byte_level = byte_level;
    tok_n_vocabs++;
}

static void tok_free_vocabs(void) {
    for (size_t i = 0; i < tok_n_vocabs; i++) tg_model_free(tok_vocabs[i].model);
    tok_n_vocabs = 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *vdir = getenv("TG_VOCAB_DIR"), *shared = getenv("TG_SHARED_DIR");
    char shared_vocab[1024], path[sizeof shared_vocab + 64];
    snprintf(shared_vocab, sizeof shared_vocab, "%s/testdata/vocab", shared && *shared ? shared : "../shared");
    if (!vdir || !*vdir) vdir = shared_vocab;
    snprintf(path, sizeof path, "%s/ggml-vocab-gpt-2.gguf", vdir);
    tok_add_vocab(path, true);
    snprintf(path, sizeof path, "%s/ggml-vocab-llama-spm.gguf", vdir);
    tok_add_vocab(path, false);
    snprintf(path, sizeof path, "%s/tiny-hf", fuzz_data_dir());
    tok_add_vocab(path, true);
    if (tok_n_vocabs == 0) fuzz_die("no vocabulary found", "set TG_VOCAB_DIR or TG_FUZZ_DATA");
    atexit(tok_free_vocabs);
    return 0;
}

/* Runs ids through a fresh streaming detokeniser; every chunk it hands out must be valid UTF-8 on its own. Returns
 * the concatenated text (malloc'ed, *len bytes). */
static char *tok_detok_all(const tg_model *m, const int32_t *ids, size_t n, size_t *len) {
    tg_error err = {0};
    tg_detok *d = tg_detok_new(m, &err);
    if (!d) fuzz_die("tg_detok_new", err.msg);
    size_t cap = 256, used = 0;
    char *all = malloc(cap);
    for (size_t i = 0; i <= n; i++) {
        const char *out;
        size_t out_len;
        if (i < n) tg_detok_push(d, ids[i], &out, &out_len);
        else tg_detok_flush(d, &out, &out_len);
        if (!fuzz_utf8_valid((const uint8_t *)out, out_len)) fuzz_die("tg_detok", "handed out invalid UTF-8");
        while (used + out_len > cap) {
            cap *= 2;
            all = realloc(all, cap);
        }
        if (!all) fuzz_die("realloc", "");
        memcpy(all + used, out, out_len);
        used += out_len;
    }
    tg_detok_free(d);
    *len = used;
    return all;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    const tok_vocab *v = &tok_vocabs[data[0] % tok_n_vocabs];
    const bool add_bos = data[1] & 1, decode_raw = data[1] & 2;
    const char *text = (const char *)data + 2;
    const size_t len = size - 2;
    const int32_t n_vocab = tg_vocab_size(v->model);

    int32_t *ids = NULL;
    size_t n = 0;
    tg_error err = {0};
    if (!tg_tokenize(v->model, text, len, add_bos, &ids, &n, &err)) {
        fuzz_check_error(&err, "tg_tokenize");
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= n_vocab) fuzz_die("tg_tokenize", "id outside the vocabulary");
    if (add_bos && tg_token_bos(v->model) >= 0 && (n == 0 || ids[0] != tg_token_bos(v->model)))
        fuzz_die("tg_tokenize", "BOS asked for but not first");

    size_t out_len;
    char *out = tok_detok_all(v->model, ids, n, &out_len);
    bool plain = fuzz_utf8_valid((const uint8_t *)text, len) && !memchr(text, '<', len);
    if (v->byte_level && plain && !add_bos && (out_len != len || memcmp(out, text, len) != 0))
        fuzz_die("byte-level round trip", "decode(encode(text)) != text");
    free(out);
    free(ids);

    if (decode_raw && len >= 2) {
        size_t m = len / 2;
        int32_t *raw = malloc(m * sizeof *raw);
        for (size_t i = 0; i < m; i++) {
            /* ids just outside the vocabulary too: the detokeniser must skip them */
            raw[i] = (int32_t)(((uint32_t)(uint8_t)text[2 * i] | (uint32_t)(uint8_t)text[2 * i + 1] << 8) %
                               (uint32_t)(n_vocab + 2)) - 1;
        }
        char *o = tok_detok_all(v->model, raw, m, &out_len);
        free(o);
        free(raw);
    }
    return 0;
}
