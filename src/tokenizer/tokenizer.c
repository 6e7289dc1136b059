/* tokenizer.c — building and freeing a tokenizer (vocabulary arena, lookup maps, pipeline steps, added-token
 * index) and its small accessors; the loaders in load_gguf.c / load_hf.c fill it through these helpers. */
#define _POSIX_C_SOURCE 200809L /* strdup */
#define _GNU_SOURCE /* memmem */
#define _DARWIN_C_SOURCE /* the same on macOS, whose headers hide them once _POSIX_C_SOURCE is set */
#include <stdlib.h>
#include <string.h>

#include "util/free_all.h"
#include "tokenizer/tok_internal.h"
#include "util/checked.h"
#include "util/error.h"

tg_tokenizer *tg_tok_alloc(int32_t n_vocab, const char *source, tg_error *err) {
    if (n_vocab <= 0) {
        tg_fail(err, "%s: empty vocabulary", source);
        return NULL;
    }
    tg_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        tg_fail(err, "%s: out of memory allocating the tokenizer", source);
        return NULL;
    }
    t->n_vocab = n_vocab;
    t->source = strdup(source);
    t->off = calloc((size_t)n_vocab + 1, sizeof *t->off);
    t->type = malloc((size_t)n_vocab);
    if (!t->source || !t->off || !t->type) {
        tg_tokenizer_free(t);
        tg_fail(err, "%s: out of memory for a vocabulary of %d tokens", source, (int)n_vocab);
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
        if (texts[i] && !tg_add_size(total, lens[i], &total))
            return tg_fail(err, "%s: vocabulary too large", t->source);
    }
    t->text = malloc(total ? total : 1);
    if (!t->text) return tg_fail(err, "%s: out of memory for %zu bytes of token text", t->source, total);
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
        return tg_fail(err, "%s: out of memory for the token map", t->source);
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

/* Frees the added-token list, its matchers and their index tables (the pointers are left dangling). */
static void free_added(tg_tokenizer *t) {
    free(t->added);
    tg_added_matcher_free(t->added_match);
    tg_added_matcher_free(t->norm_match);
    free(t->raw_index);
    free(t->norm_index);
    free(t->norm_len);
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
    free_added(t);
    t->added_match = t->norm_match = NULL;
    t->raw_index = t->norm_index = t->norm_len = NULL;
    t->n_norm_added = 0;
    t->n_added = 0;
    t->added = calloc(n_added ? n_added : 1, sizeof *t->added);
    const char **texts = calloc(n_added ? n_added : 1, sizeof *texts);
    size_t *lens = calloc(n_added ? n_added : 1, sizeof *lens);
    bool ok = t->added && texts && lens;
    size_t k = 0;
    for (int32_t i = 0; ok && i < t->n_vocab; i++) {
        size_t len;
        const char *s = tg_tok_text(t, i, &len);
        const uint8_t ty = t->type[i];
        if ((ty == TG_TOK_CONTROL || ty == TG_TOK_USER || ty == TG_TOK_UNKNOWN) && len > 0) {
            t->added[k] = (tg_added_token){i, len, lstrip && lstrip[i], rstrip && rstrip[i]};
            texts[k] = s;
            lens[k++] = len;
        }
    }
    if (ok && n_added) { /* ids ascending: of two added tokens with one text, the lower id wins */
        t->added_match = tg_added_matcher_new(texts, lens, n_added);
        ok = t->added_match != NULL;
    }
    free(texts);
    free(lens);
    if (!ok) return tg_fail(err, "%s: out of memory for the added-token index", t->source);
    t->n_added = n_added;
    return true;
}

/* s[0, n) through the normalizer steps (Prepend, Replace), malloc'd into *out (*out_n bytes); false when out of
 * memory or the result would overflow. */
static bool normalize_alloc(const tg_tokenizer *t, const char *s, size_t n, char **out, size_t *out_n) {
    char *cur = malloc(n + 1);
    if (!cur) return false;
    memcpy(cur, s, n);
    size_t cur_n = n;
    for (size_t k = 0; k < t->n_norm; k++) {
        const tg_norm_step *st = &t->norm[k];
        if (st->kind == TG_NORM_PREPEND ? cur_n == 0 : st->a_len == 0) continue;
        size_t hits = 0;
        if (st->kind != TG_NORM_PREPEND)
            for (const char *p = cur, *end = cur + cur_n; (p = memmem(p, (size_t)(end - p), st->a, st->a_len));
                 p += st->a_len)
                hits++;
        size_t need, grow;
        if (!tg_mul_size(hits, st->b_len, &grow) ||
            !tg_add_size(cur_n - hits * st->a_len, st->kind == TG_NORM_PREPEND ? st->a_len : grow, &need)) {
            free(cur);
            return false;
        }
        char *next = malloc(need + 1);
        if (!next) {
            free(cur);
            return false;
        }
        size_t o = 0;
        if (st->kind == TG_NORM_PREPEND) {
            memcpy(next, st->a, st->a_len);
            memcpy(next + st->a_len, cur, cur_n);
            o = need;
        } else {
            for (const char *p = cur, *end = cur + cur_n; p < end;) {
                const char *hit = memmem(p, (size_t)(end - p), st->a, st->a_len);
                const size_t keep = (size_t)((hit ? hit : end) - p);
                memcpy(next + o, p, keep);
                o += keep;
                if (!hit) break;
                memcpy(next + o, st->b, st->b_len);
                o += st->b_len;
                p = hit + st->a_len;
            }
        }
        free(cur);
        cur = next;
        cur_n = o;
    }
    *out = cur;
    *out_n = cur_n;
    return true;
}

bool tg_tok_set_normalized(tg_tokenizer *t, const bool *normalized, tg_error *err) {
    size_t n_norm = 0;
    for (size_t k = 0; k < t->n_added; k++) n_norm += normalized[t->added[k].id];
    if (t->n_norm == 0 || n_norm == 0) return true;
    const size_t n_raw = t->n_added - n_norm;
    const char **texts = calloc(t->n_added, sizeof *texts);
    size_t *lens = calloc(t->n_added, sizeof *lens);
    char **owned = calloc(n_norm, sizeof *owned);
    t->raw_index = calloc(n_raw ? n_raw : 1, sizeof *t->raw_index);
    t->norm_index = calloc(n_norm, sizeof *t->norm_index);
    t->norm_len = calloc(n_norm, sizeof *t->norm_len);
    bool ok = texts && lens && owned && t->raw_index && t->norm_index && t->norm_len;
    /* texts[0, n_raw): the raw ones; texts[n_raw, n_added): the normalized contents */
    size_t r = 0, q = 0;
    for (size_t k = 0; ok && k < t->n_added; k++) {
        size_t len;
        const char *s = tg_tok_text(t, t->added[k].id, &len);
        if (!normalized[t->added[k].id]) {
            t->raw_index[r] = k;
            texts[r] = s;
            lens[r++] = len;
        } else if ((ok = normalize_alloc(t, s, len, &owned[q], &t->norm_len[q]))) {
            t->norm_index[q] = k;
            texts[n_raw + q] = owned[q];
            lens[n_raw + q] = t->norm_len[q];
            q++;
        }
    }
    if (ok) {
        tg_added_matcher_free(t->added_match);
        t->added_match = n_raw ? tg_added_matcher_new(texts, lens, n_raw) : NULL;
        t->norm_match = tg_added_matcher_new(texts + n_raw, lens + n_raw, n_norm);
        ok = (t->added_match || !n_raw) && t->norm_match;
        t->n_norm_added = n_norm;
    }
    for (size_t i = 0; owned && i < q; i++) free(owned[i]);
    free(owned);
    free(texts);
    free(lens);
    return ok ? true : tg_fail(err, "%s: out of memory for the added-token index", t->source);
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
    if (t->n_norm >= TG_TOK_MAX_STEPS)
        return tg_fail(err, "%s: more than %d normalizers (limit: %d)", t->source, TG_TOK_MAX_STEPS, TG_TOK_MAX_STEPS);
    tg_norm_step *v = realloc(t->norm, (t->n_norm + 1) * sizeof *v);
    if (!v) return tg_fail(err, "%s: out of memory", t->source);
    t->norm = v;
    tg_norm_step st = {kind, dup_bytes(a, a_len), dup_bytes(b ? b : "", b ? b_len : 0), a_len, b ? b_len : 0};
    if (!st.a || !st.b) {
        free(st.a);
        free(st.b);
        return tg_fail(err, "%s: out of memory", t->source);
    }
    t->norm[t->n_norm++] = st;
    return true;
}

bool tg_tok_add_pre(tg_tokenizer *t, const tg_pre_step *step, tg_error *err) {
    if (t->n_pre >= TG_TOK_MAX_STEPS) {
        tg_regex_free(step->re);
        return tg_fail(err, "%s: more than %d pre-tokenizers (limit: %d)", t->source, TG_TOK_MAX_STEPS,
                       TG_TOK_MAX_STEPS);
    }
    tg_pre_step *v = realloc(t->pre, (t->n_pre + 1) * sizeof *v);
    if (!v) {
        tg_regex_free(step->re);
        return tg_fail(err, "%s: out of memory", t->source);
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
    TG_FREE_ALL(t->source, t->text, t->off, t->type, t->score);
    tg_strmap_free(&t->vocab);
    tg_pairmap_free(&t->merges);
    for (size_t i = 0; i < t->n_norm; i++) {
        free(t->norm[i].a);
        free(t->norm[i].b);
    }
    free(t->norm);
    for (size_t i = 0; i < t->n_pre; i++) tg_regex_free(t->pre[i].re);
    free(t->pre);
    free_added(t);
    free(t);
}

int32_t tg_tokenizer_vocab_size(const tg_tokenizer *t) { return t ? t->n_vocab : 0; }
int32_t tg_tokenizer_bos(const tg_tokenizer *t) { return t ? t->bos : -1; }
int32_t tg_tokenizer_eos(const tg_tokenizer *t) { return t ? t->eos : -1; }
bool tg_tokenizer_adds_bos(const tg_tokenizer *t) { return t && t->add_bos && t->bos >= 0; }
