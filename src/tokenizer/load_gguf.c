/* load_gguf.c — a tokenizer from GGUF metadata (tokenizer.ggml.*), set up to tokenize exactly as llama.cpp does:
 * "llama" = SentencePiece scores with byte fallback and a space prefix, "gpt2" = byte-level BPE whose regex
 * pre-tokenizer is chosen by tokenizer.ggml.pre. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "util/checked.h"
#include "util/error.h"

#define GPT2_NO_WS_TAIL "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define CONTRACTIONS_ANY_CASE "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

/* One family of tokenizer.ggml.pre values: the regexes llama.cpp applies in turn (each splitting the pieces the
 * previous one left, matches isolated), and the family's defaults. */
typedef struct {
    const char *names; /* '|'-separated */
    const char *regex[5];
    bool ignore_merges;
    bool add_bos;
} pre_family;

static const pre_family PRE_FAMILIES[] = {
    {"default",
     {"[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2_NO_WS_TAIL, "\\p{N}+", "[0-9][0-9][0-9]", NULL},
     false, false},
    {"gpt-2|gpt2|phi-2|mpt|olmo|jais|exaone4|jina-es|jina-de|jina-v2-es|jina-v2-de|jina-v1-en|jina-v2-code|"
     "roberta-bpe|gigachat|mellum|modern-bert|trillion|granite-docling|a.x-4.0",
     {GPT2_NO_WS_TAIL, NULL}, false, false},
    {"llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2",
     {CONTRACTIONS_ANY_CASE "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                            "\\s+(?!\\S)|\\s+",
      NULL},
     true, true},
    {"dbrx|smaug-bpe",
     {CONTRACTIONS_ANY_CASE "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                            "\\s+(?!\\S)|\\s+",
      NULL},
     false, false},
    {"starcoder|refact|command-r|smollm|codeshell|exaone|minerva", {"\\p{N}", GPT2_NO_WS_TAIL, NULL}, false, false},
    {"qwen2|deepseek-r1-qwen|stablelm2|hunyuan",
     {CONTRACTIONS_ANY_CASE "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
                            "\\s+(?!\\S)|\\s+",
      NULL},
     false, false},
    {"qwen35",
     {CONTRACTIONS_ANY_CASE "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|"
                            "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
      NULL},
     false, false},
    {"falcon",
     {"[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2_NO_WS_TAIL, "[0-9][0-9][0-9]", NULL}, false, false},
    {"deepseek-coder",
     {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{4E00}\\x{AC00}-\\x{D7FF}]+",
      "\\p{N}"},
     false, true},
};

static bool name_in(const char *names, const char *s, size_t len) {
    for (const char *p = names;;) {
        const char *bar = strchr(p, '|');
        const size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == len && memcmp(p, s, len) == 0) return true;
        if (!bar) return false;
        p = bar + 1;
    }
}

static bool is_int_type(tg_gguf_type ty) {
    return ty == TG_GGUF_U8 || ty == TG_GGUF_I8 || ty == TG_GGUF_U16 || ty == TG_GGUF_I16 || ty == TG_GGUF_U32 ||
           ty == TG_GGUF_I32 || ty == TG_GGUF_U64 || ty == TG_GGUF_I64;
}

/* Reads an optional token id key into *id when it names a token. */
static void read_id(const tg_gguf *g, const char *key, int32_t n_vocab, int32_t *id) {
    int64_t v;
    if (tg_gguf_get_i64(g, key, &v) && v >= 0 && v < n_vocab) *id = (int32_t)v;
}

static bool load_texts(tg_tokenizer *t, const tg_gguf_array *tokens, const char *path, tg_error *err) {
    const size_t n = (size_t)t->n_vocab;
    const char **texts = malloc(n * sizeof *texts);
    size_t *lens = malloc(n * sizeof *lens);
    bool ok = texts && lens;
    if (!ok) tg_fail(err, "out of memory reading the vocabulary of %s", path);
    for (size_t i = 0; ok && i < n; i++) {
        const tg_gguf_str s = tg_gguf_array_str(tokens, i);
        if (s.len > SIZE_MAX || (s.len && !s.ptr)) ok = tg_fail(err, "%s: token %zu has a bad length", path, i);
        texts[i] = s.ptr;
        lens[i] = (size_t)s.len;
    }
    if (ok) ok = tg_tok_set_texts(t, texts, lens, err);
    free(texts);
    free(lens);
    return ok;
}

static bool load_types_scores(tg_tokenizer *t, const tg_gguf *g, bool want_scores, const char *path, tg_error *err) {
    const size_t n = (size_t)t->n_vocab;
    tg_gguf_array a;
    if (tg_gguf_get_array(g, "tokenizer.ggml.token_type", &a)) {
        if (!is_int_type(a.elem_type) || a.count < n)
            return tg_fail(err, "%s: tokenizer.ggml.token_type must hold %zu integers", path, n);
        for (size_t i = 0; i < n; i++) {
            const int64_t ty = tg_gguf_array_i64(&a, i);
            t->type[i] = ty >= TG_TOK_NORMAL && ty <= TG_TOK_BYTE ? (uint8_t)ty : TG_TOK_NORMAL;
        }
    } else {
        memset(t->type, TG_TOK_NORMAL, n);
    }
    if (!want_scores) return true;
    t->score = calloc(n, sizeof *t->score);
    if (!t->score) return tg_fail(err, "out of memory for the scores of %s", path);
    if (tg_gguf_get_array(g, "tokenizer.ggml.scores", &a)) {
        if ((a.elem_type != TG_GGUF_F32 && a.elem_type != TG_GGUF_I32) || a.count < n)
            return tg_fail(err, "%s: tokenizer.ggml.scores must hold %zu numbers", path, n);
        for (size_t i = 0; i < n; i++)
            t->score[i] = a.elem_type == TG_GGUF_F32 ? tg_gguf_array_f32(&a, i) : (float)tg_gguf_array_i64(&a, i);
    }
    return true;
}

static bool load_merges(tg_tokenizer *t, const tg_gguf *g, const char *path, tg_error *err) {
    tg_gguf_array a;
    if (!tg_gguf_get_array(g, "tokenizer.ggml.merges", &a)) return tg_fail(err, "%s: no tokenizer.ggml.merges", path);
    if (a.elem_type != TG_GGUF_STRING) return tg_fail(err, "%s: tokenizer.ggml.merges is not a string array", path);
    if (a.count > INT32_MAX) return tg_fail(err, "%s: too many merges (%llu)", path, (unsigned long long)a.count);
    if (!tg_pairmap_init(&t->merges, (size_t)a.count)) return tg_fail(err, "out of memory for the merges of %s", path);
    t->have_merges = true;
    size_t skipped = 0;
    for (uint64_t i = 0; i < a.count; i++) {
        const tg_gguf_str m = tg_gguf_array_str(&a, i);
        const char *sp = m.len > 1 ? memchr(m.ptr + 1, ' ', (size_t)m.len - 1) : NULL;
        if (!sp) {
            skipped++;
            continue;
        }
        const size_t la = (size_t)(sp - m.ptr);
        if (!tg_tok_add_merge(t, m.ptr, la, sp + 1, (size_t)m.len - la - 1, (int32_t)i, &skipped))
            return tg_fail(err, "out of memory for the merges of %s", path);
    }
    return true;
}

static bool setup_bpe_pre(tg_tokenizer *t, const tg_gguf *g, const char *path, tg_error *err) {
    tg_gguf_str pre = {"default", 7};
    tg_gguf_get_str(g, "tokenizer.ggml.pre", &pre);
    const pre_family *fam = NULL;
    for (size_t i = 0; i < sizeof PRE_FAMILIES / sizeof PRE_FAMILIES[0] && !fam; i++) {
        if (name_in(PRE_FAMILIES[i].names, pre.ptr, (size_t)pre.len)) fam = &PRE_FAMILIES[i];
    }
    if (!fam) return tg_fail(err, "%s: unsupported tokenizer.ggml.pre '%.*s'", path, (int)pre.len, pre.ptr);
    for (int i = 0; i < 5 && fam->regex[i]; i++) {
        tg_pre_step st = {.kind = TG_PRE_SPLIT, .behavior = TG_SPLIT_ISOLATED};
        st.re = tg_regex_new(fam->regex[i], strlen(fam->regex[i]), false, path, err);
        if (!st.re || !tg_tok_add_pre(t, &st, err)) return false;
    }
    const tg_pre_step bl = {.kind = TG_PRE_BYTE_LEVEL};
    if (!tg_tok_add_pre(t, &bl, err)) return false;
    t->ignore_merges = fam->ignore_merges;
    t->add_bos = fam->add_bos;
    return true;
}

tg_tokenizer *tg_tokenizer_load_gguf(const tg_gguf *g, tg_error *err) {
    const char *path = tg_gguf_path(g);
    tg_gguf_str model;
    if (!tg_gguf_get_str(g, "tokenizer.ggml.model", &model)) {
        tg_fail(err, "%s: no tokenizer (tokenizer.ggml.model missing)", path);
        return NULL;
    }
    const bool spm = model.len == 5 && memcmp(model.ptr, "llama", 5) == 0;
    const bool bpe = model.len == 4 && memcmp(model.ptr, "gpt2", 4) == 0;
    if (!spm && !bpe) {
        tg_fail(err, "%s: unsupported tokenizer.ggml.model '%.*s' (supported: llama, gpt2)", path, (int)model.len,
                model.ptr);
        return NULL;
    }
    tg_gguf_array tokens;
    if (!tg_gguf_get_array(g, "tokenizer.ggml.tokens", &tokens) || tokens.elem_type != TG_GGUF_STRING) {
        tg_fail(err, "%s: tokenizer.ggml.tokens missing or not a string array", path);
        return NULL;
    }
    if (tokens.count == 0 || tokens.count > INT32_MAX) {
        tg_fail(err, "%s: bad vocabulary size %llu", path, (unsigned long long)tokens.count);
        return NULL;
    }
    tg_tokenizer *t = tg_tok_alloc((int32_t)tokens.count, path, err);
    if (!t) return NULL;
    bool ok = load_texts(t, &tokens, path, err) && load_types_scores(t, g, spm, path, err);
    if (ok && spm) {
        t->model = TG_TOKMODEL_SPM;
        t->spm_normal_only = true;
        t->byte_fallback = true;
        if (t->n_vocab > 0) t->unk = 0;
        if (t->n_vocab > 1) t->bos = 1;
        if (t->n_vocab > 2) t->eos = 2;
        t->add_bos = true;
        bool space_prefix = true;
        tg_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &space_prefix);
        static const char MS[] = "\xE2\x96\x81";
        if (space_prefix) ok = tg_tok_add_norm(t, TG_NORM_PREPEND, MS, 3, NULL, 0, err);
        if (ok) ok = tg_tok_add_norm(t, TG_NORM_REPLACE, " ", 1, MS, 3, err);
        t->dec_metaspace = true;
        t->dec_byte_fallback = true;
        t->dec_strip_start = space_prefix ? 1 : 0;
    } else if (ok) {
        t->model = TG_TOKMODEL_BPE;
        ok = load_merges(t, g, path, err) && setup_bpe_pre(t, g, path, err);
        t->dec_byte_level = true;
        t->dec_byte_fallback = true;
    }
    if (ok) {
        read_id(g, "tokenizer.ggml.bos_token_id", t->n_vocab, &t->bos);
        read_id(g, "tokenizer.ggml.eos_token_id", t->n_vocab, &t->eos);
        read_id(g, "tokenizer.ggml.unknown_token_id", t->n_vocab, &t->unk);
        bool add_bos;
        if (tg_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos)) t->add_bos = add_bos;
        ok = tg_tok_finish(t, NULL, NULL, err);
    }
    if (!ok) {
        tg_tokenizer_free(t);
        return NULL;
    }
    return t;
}
