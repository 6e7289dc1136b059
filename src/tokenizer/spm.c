/* spm.c — the SentencePiece-score model as llama.cpp's "llama" vocab runs it: characters merge pairwise into the
 * highest-scoring vocabulary piece; what never forms a piece falls back to <0xNN> byte tokens. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "tokenizer/utf8.h"

/* The id of w[start .. start + len) if it may be produced by merging, else -1. */
static int32_t piece_id(const tg_tokenizer *t, const char *w, size_t start, size_t len) {
    const int32_t id = tg_strmap_get(&t->vocab, w + start, len);
    if (id < 0) return -1;
    if (t->spm_normal_only && t->type[id] != TG_TOK_NORMAL && t->type[id] != TG_TOK_USER) return -1;
    return id;
}

static bool try_bigram(const tg_tokenizer *t, const char *w, tg_word_scratch *s, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return true;
    const size_t size = s->len[l] + s->len[r];
    const int32_t id = piece_id(t, w, s->start[l], size);
    if (id < 0) return true;
    const tg_merge_cand c = {-(double)t->score[id], l, r, 0, 0, (int32_t)size};
    return tg_merge_heap_push(&s->heap, c);
}

/* Emits one final symbol: its piece, or its bytes. */
static bool emit(const tg_tokenizer *t, const char *w, size_t start, size_t len, tg_idvec *out) {
    const int32_t id = piece_id(t, w, start, len);
    if (id >= 0) return tg_idvec_push(out, id);
    for (size_t j = 0; j < len; j++) {
        const uint8_t b = (uint8_t)w[start + j];
        int32_t bid = t->byte_id[b];
        if (bid < 0) bid = tg_strmap_get(&t->vocab, (const char *)&b, 1);
        if (bid < 0) bid = t->unk;
        if (bid >= 0 && !tg_idvec_push(out, bid)) return false;
    }
    return true;
}

bool tg_spm_word(const tg_tokenizer *t, const char *w, size_t len, tg_word_scratch *s, tg_idvec *out) {
    if (len == 0) return true;
    if (len > INT32_MAX || !tg_word_scratch_reserve(s, len)) return false;
    int32_t n = 0;
    for (size_t pos = 0; pos < len;) {
        const size_t clen = tg_utf8_step((const uint8_t *)w + pos, len - pos);
        s->start[n] = pos;
        s->len[n] = clen;
        n++;
        pos += clen;
    }
    for (int32_t i = 0; i < n; i++) {
        s->prev[i] = i - 1;
        s->next[i] = i + 1 < n ? i + 1 : -1;
    }
    s->heap.n = 0;
    for (int32_t i = 0; i + 1 < n; i++) {
        if (!try_bigram(t, w, s, i, i + 1)) return false;
    }
    tg_merge_cand c;
    while (tg_merge_heap_pop(&s->heap, &c)) {
        const int32_t l = c.left, r = c.right;
        /* stale when either side has been merged away or has grown since it was queued */
        if (s->len[l] == 0 || s->len[r] == 0 || s->len[l] + s->len[r] != (size_t)c.merged) continue;
        s->len[l] += s->len[r];
        s->len[r] = 0;
        s->next[l] = s->next[r];
        if (s->next[r] >= 0) s->prev[s->next[r]] = l;
        if (!try_bigram(t, w, s, s->prev[l], l) || !try_bigram(t, w, s, l, s->next[l])) return false;
    }
    for (int32_t i = 0; i >= 0; i = s->next[i]) {
        if (!emit(t, w, s->start[i], s->len[i], out)) return false;
    }
    return true;
}
