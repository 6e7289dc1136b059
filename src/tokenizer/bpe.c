/* bpe.c — the BPE model: one pre-token word to ids by merge rank, with byte fallback and unknown handling. */
#include <stdlib.h>
#include <string.h>

#include "util/free_all.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/utf8.h"

bool tg_idvec_push(tg_idvec *v, int32_t id) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap : 64, bytes;
        if (!tg_mul_size(cap, 2, &cap) || !tg_mul_size(cap, sizeof *v->ids, &bytes)) return false;
        int32_t *p = realloc(v->ids, bytes);
        if (!p) return false;
        v->ids = p;
        v->cap = cap;
    }
    v->ids[v->n++] = id;
    return true;
}

void tg_word_scratch_free(tg_word_scratch *s) {
    if (!s) return;
    TG_FREE_ALL(s->id, s->start, s->len, s->prev, s->next, s->heap.v);
    memset(s, 0, sizeof *s);
}

bool tg_word_scratch_reserve(tg_word_scratch *s, size_t n) {
    if (n <= s->cap) return true;
    size_t cap = s->cap ? s->cap : 64;
    while (cap < n) {
        if (!tg_mul_size(cap, 2, &cap)) return false;
    }
    size_t b32, bsz;
    if (!tg_mul_size(cap, sizeof(int32_t), &b32) || !tg_mul_size(cap, sizeof(size_t), &bsz)) return false;
    int32_t *id = realloc(s->id, b32);
    if (id) s->id = id;
    size_t *start = realloc(s->start, bsz);
    if (start) s->start = start;
    size_t *len = realloc(s->len, bsz);
    if (len) s->len = len;
    int32_t *prev = realloc(s->prev, b32);
    if (prev) s->prev = prev;
    int32_t *next = realloc(s->next, b32);
    if (next) s->next = next;
    if (!id || !start || !len || !prev || !next) return false;
    s->cap = cap;
    return true;
}

/* Queues the merge of symbols l and r if their ids form a known pair. */
static bool try_pair(const tg_tokenizer *t, tg_word_scratch *s, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return true;
    const tg_pair_slot *m = tg_pairmap_get(&t->merges, s->id[l], s->id[r]);
    if (!m) return true;
    const tg_merge_cand c = {(double)m->rank, l, r, s->id[l], s->id[r], m->merged};
    return tg_merge_heap_push(&s->heap, c);
}

bool tg_bpe_word(const tg_tokenizer *t, const char *w, size_t len, tg_word_scratch *s, tg_idvec *out) {
    if (len == 0) return true;
    if (t->ignore_merges) {
        const int32_t id = tg_strmap_get(&t->vocab, w, len);
        if (id >= 0) return tg_idvec_push(out, id);
    }
    if (len > INT32_MAX || !tg_word_scratch_reserve(s, len)) return false;

    /* characters -> symbols; a run of unknowns may fuse into one unk */
    int32_t n = 0;
    bool unk_pending = false;
    size_t unk_start = 0, unk_len = 0;
#define ADD_SYMBOL(ID, START, LEN)                                                                                     \
    do {                                                                                                               \
        s->id[n] = (ID);                                                                                               \
        s->start[n] = (START);                                                                                         \
        s->len[n] = (LEN);                                                                                             \
        n++;                                                                                                           \
    } while (0)
    for (size_t pos = 0; pos < len;) {
        const size_t clen = tg_utf8_step((const uint8_t *)w + pos, len - pos);
        const int32_t id = tg_strmap_get(&t->vocab, w + pos, clen);
        bool bytes_ok = false;
        if (id < 0 && t->byte_fallback) {
            bytes_ok = true;
            for (size_t j = 0; j < clen; j++) bytes_ok = bytes_ok && t->byte_id[(uint8_t)w[pos + j]] >= 0;
        }
        if (id >= 0 || bytes_ok) {
            if (unk_pending) {
                ADD_SYMBOL(t->unk, unk_start, unk_len);
                unk_pending = false;
            }
            if (id >= 0) {
                ADD_SYMBOL(id, pos, clen);
            } else {
                for (size_t j = 0; j < clen; j++) ADD_SYMBOL(t->byte_id[(uint8_t)w[pos + j]], pos + j, 1);
            }
        } else if (t->unk >= 0) {
            if (unk_pending && t->fuse_unk) {
                unk_len += clen;
            } else {
                if (unk_pending) ADD_SYMBOL(t->unk, unk_start, unk_len);
                unk_pending = true;
                unk_start = pos;
                unk_len = clen;
            }
        } /* else: no unk token, the character is dropped (as tokenizers does) */
        pos += clen;
    }
    if (unk_pending) ADD_SYMBOL(t->unk, unk_start, unk_len);
#undef ADD_SYMBOL
    for (int32_t i = 0; i < n; i++) {
        s->prev[i] = i - 1;
        s->next[i] = i + 1 < n ? i + 1 : -1;
    }

    s->heap.n = 0;
    if (t->have_merges) {
        for (int32_t i = 0; i + 1 < n; i++) {
            if (!try_pair(t, s, i, i + 1)) return false;
        }
        tg_merge_cand c;
        while (tg_merge_heap_pop(&s->heap, &c)) {
            const int32_t l = c.left, r = s->next[l];
            /* stale when either side has changed since it was queued */
            if (s->len[l] == 0 || r < 0 || r != c.right || s->id[l] != c.a || s->id[r] != c.b) continue;
            s->id[l] = c.merged;
            s->len[l] += s->len[r];
            s->len[r] = 0;
            s->next[l] = s->next[r];
            if (s->next[r] >= 0) s->prev[s->next[r]] = l;
            if (!try_pair(t, s, s->prev[l], l) || !try_pair(t, s, l, s->next[l])) return false;
        }
    }
    for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = s->next[i]) {
        if (!tg_idvec_push(out, s->id[i])) return false;
    }
    return true;
}
