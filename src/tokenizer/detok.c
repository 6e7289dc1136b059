/* detok.c — the streaming detokeniser (tinygpt.h's tg_detok; model.c's tg_detok_new picks the model's tokenizer):
 * token ids in, complete UTF-8 characters out. Bytes of a character
 * split across tokens wait for the rest; bytes that can never form a character become U+FFFD. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/checked.h"
#include "util/error.h"

struct tg_detok {
    const tg_tokenizer *t;
    int32_t prev;         /* the previous id; -1 while nothing has been produced (the start of the text, where
                           * decoders drop the SentencePiece prefix space: also after a leading BOS) */
    char *pending;        /* bytes not yet handed out: at most an incomplete character between calls */
    size_t n_pending, cap_pending;
    char *out;            /* what the last call handed out */
    size_t cap_out;
};

static const char REPLACEMENT[3] = {(char)0xEF, (char)0xBF, (char)0xBD}; /* U+FFFD */

tg_detok *tg_tokenizer_detok_new(const tg_tokenizer *t, tg_error *err) {
    if (!t) {
        tg_fail(err, "no tokenizer loaded");
        return NULL;
    }
    tg_detok *d = calloc(1, sizeof *d);
    if (!d) {
        tg_fail(err, "out of memory");
        return NULL;
    }
    d->t = t;
    d->prev = -1;
    return d;
}

void tg_detok_free(tg_detok *d) {
    if (!d) return;
    free(d->pending);
    free(d->out);
    free(d);
}

static bool reserve(char **p, size_t *cap, size_t need) {
    if (need <= *cap) return true;
    size_t n = *cap ? *cap : 64;
    while (n < need) {
        if (!tg_mul_size(n, 2, &n)) return false;
    }
    char *q = realloc(*p, n);
    if (!q) return false;
    *p = q;
    *cap = n;
    return true;
}

/* Moves the complete characters at the front of pending into out (invalid bytes as U+FFFD); at_end: an incomplete
 * character at the end is invalid too. Returns the bytes written to out, which has room for 3 * n_pending. */
static size_t drain(tg_detok *d, bool at_end) {
    const uint8_t *s = (const uint8_t *)d->pending;
    size_t i = 0, w = 0;
    while (i < d->n_pending) {
        size_t len;
        const tg_utf8_status st = tg_utf8_classify(s + i, d->n_pending - i, &len);
        if (st == TG_UTF8_INCOMPLETE && !at_end) break;
        if (st == TG_UTF8_COMPLETE) {
            memcpy(d->out + w, s + i, len);
            w += len;
        } else {
            memcpy(d->out + w, REPLACEMENT, sizeof REPLACEMENT);
            w += sizeof REPLACEMENT;
        }
        i += len;
    }
    if (i < d->n_pending) memmove(d->pending, d->pending + i, d->n_pending - i);
    d->n_pending -= i;
    return w;
}

/* Gets room in out for draining everything pending. */
static bool out_room(tg_detok *d) {
    size_t need;
    return tg_mul_size(d->n_pending, 3, &need) && tg_add_size(need, 1, &need) && reserve(&d->out, &d->cap_out, need);
}

void tg_detok_push(tg_detok *d, int32_t id, const char **out, size_t *out_len) {
    *out = "";
    *out_len = 0;
    if (!d) return;
    const int32_t prev = d->prev;
    const size_t n = tg_tokenizer_decode_piece(d->t, prev, id, NULL, 0);
    /* the start of the text lasts while tokens decode to nothing even unstripped (a leading BOS) */
    if (prev >= 0 || tg_tokenizer_decode_piece(d->t, id, id, NULL, 0) > 0) d->prev = id;
    if (n == 0) return; /* nothing to add (pending may still be NULL: no pointer arithmetic on it) */
    size_t need;
    if (!tg_add_size(d->n_pending, n, &need) || !reserve(&d->pending, &d->cap_pending, need)) return;
    tg_tokenizer_decode_piece(d->t, prev, id, d->pending + d->n_pending, n);
    d->n_pending += n;
    if (!out_room(d)) return;
    *out_len = drain(d, false);
    *out = d->out;
}

void tg_detok_flush(tg_detok *d, const char **out, size_t *out_len) {
    *out = "";
    *out_len = 0;
    if (!d || !out_room(d)) return;
    *out_len = drain(d, true);
    *out = d->out;
}

void tg_detok_skip_prompt(tg_detok *d, const int32_t *ids, size_t n) {
    const char *text = NULL;
    size_t len = 0;
    for (size_t i = 0; i < n; i++) tg_detok_push(d, ids[i], &text, &len);
    tg_detok_flush(d, &text, &len);
}
