/* tokenizer.c — building and freeing a tokenizer (vocabulary arena, lookup maps, pipeline steps, added-token
 * index) and its small accessors; the loaders in load_gguf.c / load_hf.c fill it through these helpers. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "util/checked.h"
#include "util/error.h"

tg_tokenizer *tg_tok_alloc(int32_t n_vocab, tg_error *err) {
    if (n_vocab <= 0) {
        tg_fail(err, "tokenizer: empty vocabulary");
        return NULL;
    }
    tg_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        tg_fail(err, "out of memory allocating the tokenizer");
        return NULL;
    }
    t->n_vocab = n_vocab;
    t->off = calloc((size_t)n_vocab + 1, sizeof *t->off);
    t->type = malloc((size_t)n_vocab);
    if (!t->off || !t->type) {
        tg_tokenizer_free(t);
        tg_fail(err, "out of memory for a vocabulary of %d tokens", (int)n_vocab);
        return NULL;
    }
    memset(t->type, TG_TOK_UNUSED, (size_t)n_vocab);
    for (int i = 0; i < 256; i++) t->byte_id[i] = -1;
    t->unk = t->bos = t->eos = -1;
    return t;
}

bool tg_tok_set_texts(tg_tokenizer *t, const char *const *texts, const size_t *lens, tg_error *err) {
    size_t total = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        if (texts[i] && !tg_add_size(total, lens[i], &total)) return tg_fail(err, "tokenizer: vocabulary too large");
    }
    t->text = malloc(total ? total : 1);
    if (!t->text) return tg_fail(err, "out of memory for %zu bytes of token text", total);
    size_t at = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        t->off[i] = at;
        if (texts[i] && lens[i]) {
            memcpy(t->text + at, texts[i], lens[i]);
            at += lens[i];
        }
    }
    t->off[t->n_vocab] = at;
    if (!tg_strmap_init(&t->vocab, (size_t)t->n_vocab, t->text, t->off))
        return tg_fail(err, "out of memory for the token map");
    for (int32_t i = 0; i < t->n_vocab; i++) {
        if (t->off[i + 1] > t->off[i]) tg_strmap_put(&t->vocab, i);
    }
    return true;
}

bool tg_tok_parse_byte(const char *s, size_t len, uint8_t *out) {
    if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return false;
    unsigned v = 0;
    for (int i = 3; i < 5; i++) {
        const char c = s[i];
        unsigned d;
        if (c >= '0' && c <= '9') d = (unsigned)(c - '0');
        else if (c >= 'A' && c <= 'F') d = (unsigned)(c - 'A' + 10);
        else if (c >= 'a' && c <= 'f') d = (unsigned)(c - 'a' + 10);
        else return false;
        v = v * 16 + d;
    }
    *out = (uint8_t)v;
    return true;
}

static int cmp_added(const void *pa, const void *pb) {
    const tg_added_token *a = pa, *b = pb;
    if (a->first != b->first) return a->first < b->first ? -1 : 1;
    if (a->len != b->len) return a->len > b->len ? -1 : 1; /* longest first */
    return a->id < b->id ? -1 : (a->id > b->id);
}

bool tg_tok_finish(tg_tokenizer *t, const bool *lstrip, const bool *rstrip, tg_error *err) {
    size_t n_added = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        size_t len;
        const char *s = tg_tok_text(t, i, &len);
        uint8_t b;
        if (t->type[i] == TG_TOK_BYTE && tg_tok_parse_byte(s, len, &b) && t->byte_id[b] < 0) t->byte_id[b] = i;
        const uint8_t ty = t->type[i];
        if ((ty == TG_TOK_CONTROL || ty == TG_TOK_USER || ty == TG_TOK_UNKNOWN) && len > 0) n_added++;
    }
    free(t->added);
    t->added = calloc(n_added ? n_added : 1, sizeof *t->added);
    if (!t->added) return tg_fail(err, "out of memory for the added-token index");
    size_t k = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        size_t len;
        const char *s = tg_tok_text(t, i, &len);
        const uint8_t ty = t->type[i];
        if ((ty == TG_TOK_CONTROL || ty == TG_TOK_USER || ty == TG_TOK_UNKNOWN) && len > 0) {
            t->added[k++] = (tg_added_token){i, len, (uint8_t)s[0], lstrip && lstrip[i], rstrip && rstrip[i]};
        }
    }
    t->n_added = n_added;
    qsort(t->added, n_added, sizeof *t->added, cmp_added);
    size_t j = 0;
    for (int b = 0; b < 256; b++) {
        t->added_start[b] = j;
        while (j < n_added && t->added[j].first == b) j++;
    }
    t->added_start[256] = n_added;
    return true;
}

static char *dup_bytes(const char *s, size_t len) {
    char *d = malloc(len + 1);
    if (!d) return NULL;
    if (len) memcpy(d, s, len);
    d[len] = '\0';
    return d;
}

bool tg_tok_add_norm(tg_tokenizer *t, tg_norm_kind kind, const char *a, size_t a_len, const char *b, size_t b_len,
                     tg_error *err) {
    tg_norm_step *v = realloc(t->norm, (t->n_norm + 1) * sizeof *v);
    if (!v) return tg_fail(err, "out of memory");
    t->norm = v;
    tg_norm_step st = {kind, dup_bytes(a, a_len), dup_bytes(b ? b : "", b ? b_len : 0), a_len, b ? b_len : 0};
    if (!st.a || !st.b) {
        free(st.a);
        free(st.b);
        return tg_fail(err, "out of memory");
    }
    t->norm[t->n_norm++] = st;
    return true;
}

bool tg_tok_add_pre(tg_tokenizer *t, const tg_pre_step *step, tg_error *err) {
    tg_pre_step *v = realloc(t->pre, (t->n_pre + 1) * sizeof *v);
    if (!v) {
        tg_regex_free(step->re);
        return tg_fail(err, "out of memory");
    }
    t->pre = v;
    t->pre[t->n_pre++] = *step;
    return true;
}

bool tg_tok_add_merge(tg_tokenizer *t, const char *a, size_t a_len, const char *b, size_t b_len, int32_t rank,
                      size_t *skipped) {
    const int32_t ia = tg_strmap_get(&t->vocab, a, a_len), ib = tg_strmap_get(&t->vocab, b, b_len);
    char small[256];
    char *cat = small;
    size_t n;
    if (!tg_add_size(a_len, b_len, &n)) return false;
    if (n > sizeof small) {
        cat = malloc(n);
        if (!cat) return false;
    }
    memcpy(cat, a, a_len);
    memcpy(cat + a_len, b, b_len);
    const int32_t im = tg_strmap_get(&t->vocab, cat, n);
    if (cat != small) free(cat);
    if (ia < 0 || ib < 0 || im < 0) {
        (*skipped)++;
        return true;
    }
    tg_pairmap_put(&t->merges, ia, ib, rank, im);
    return true;
}

void tg_tokenizer_free(tg_tokenizer *t) {
    if (!t) return;
    free(t->text);
    free(t->off);
    free(t->type);
    free(t->score);
    tg_strmap_free(&t->vocab);
    tg_pairmap_free(&t->merges);
    for (size_t i = 0; i < t->n_norm; i++) {
        free(t->norm[i].a);
        free(t->norm[i].b);
    }
    free(t->norm);
    for (size_t i = 0; i < t->n_pre; i++) tg_regex_free(t->pre[i].re);
    free(t->pre);
    free(t->added);
    free(t);
}

int32_t tg_tokenizer_vocab_size(const tg_tokenizer *t) { return t ? t->n_vocab : 0; }
int32_t tg_tokenizer_bos(const tg_tokenizer *t) { return t ? t->bos : -1; }
int32_t tg_tokenizer_eos(const tg_tokenizer *t) { return t ? t->eos : -1; }
bool tg_tokenizer_adds_bos(const tg_tokenizer *t) { return t && t->add_bos && t->bos >= 0; }
