/* merge_heap.h — a binary min-heap of merge candidates, ordered by priority then by left position, shared by the
 * BPE (rank) and SentencePiece (negated score) merge loops. */
#ifndef TG_TOKENIZER_MERGE_HEAP_H
#define TG_TOKENIZER_MERGE_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "util/checked.h"

typedef struct {
    double prio;     /* lower merges first: BPE rank, or -score for SentencePiece */
    int32_t left;    /* symbol index of the left part */
    int32_t right;   /* symbol index of the right part when queued */
    int32_t a, b;    /* the two ids (BPE) when queued */
    int32_t merged;  /* BPE: merged id; SentencePiece: byte length of the pair when queued */
} tg_merge_cand;

typedef struct {
    tg_merge_cand *v;
    size_t n, cap;
} tg_merge_heap;

static inline bool tg_merge_less(const tg_merge_cand *x, const tg_merge_cand *y) {
    return x->prio < y->prio || (x->prio == y->prio && x->left < y->left);
}

static inline bool tg_merge_heap_push(tg_merge_heap *h, tg_merge_cand c) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap : 64, bytes;
        if (!tg_mul_size(cap, 2, &cap) || !tg_mul_size(cap, sizeof *h->v, &bytes)) return false;
        tg_merge_cand *v = realloc(h->v, bytes);
        if (!v) return false;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        const size_t parent = (i - 1) / 2;
        if (!tg_merge_less(&c, &h->v[parent])) break;
        h->v[i] = h->v[parent];
        i = parent;
    }
    h->v[i] = c;
    return true;
}

/* Removes the smallest candidate into *out; false when empty. */
static inline bool tg_merge_heap_pop(tg_merge_heap *h, tg_merge_cand *out) {
    if (h->n == 0) return false;
    *out = h->v[0];
    const tg_merge_cand last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= h->n) break;
        if (child + 1 < h->n && tg_merge_less(&h->v[child + 1], &h->v[child])) child++;
        if (!tg_merge_less(&h->v[child], &last)) break;
        h->v[i] = h->v[child];
        i = child;
    }
    if (h->n > 0) h->v[i] = last;
    return true;
}

#endif
