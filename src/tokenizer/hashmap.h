/* hashmap.h — the tokenizer's two lookup tables: token text -> id, and token pair -> (merge rank, merged id). */
#ifndef TG_TOKENIZER_HASHMAP_H
#define TG_TOKENIZER_HASHMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/name_map.h"

/* Token text -> id: util/name_map.h over the token arena. The map stores only ids; the texts live in the caller's
 * arena (text + off[id], length off[id + 1] - off[id]), which must outlive the map and not move. */
typedef struct {
    tg_name_map map;
    const char *text;    /* the token arena */
    const size_t *off;   /* [n_tokens + 1] */
} tg_strmap;

/* Sized for n entries. False on allocation failure or size overflow. */
bool tg_strmap_init(tg_strmap *m, size_t n, const char *text, const size_t *off);
void tg_strmap_free(tg_strmap *m);
/* Adds id under its own text; a later id with the same text replaces the earlier one (as llama.cpp does). */
void tg_strmap_put(tg_strmap *m, int32_t id);
/* The id whose text is s[0..len), or -1. */
int32_t tg_strmap_get(const tg_strmap *m, const char *s, size_t len);

/* (left id, right id) -> (rank, merged id). */
typedef struct {
    uint64_t key;        /* UINT64_MAX = empty */
    int32_t rank;
    int32_t merged;
} tg_pair_slot;

typedef struct {
    tg_pair_slot *slots; /* [mask + 1] */
    size_t mask;
} tg_pairmap;

bool tg_pairmap_init(tg_pairmap *m, size_t n);
void tg_pairmap_free(tg_pairmap *m);
/* Adds the pair unless it is present already (the first, lowest-ranked merge wins). */
void tg_pairmap_put(tg_pairmap *m, int32_t left, int32_t right, int32_t rank, int32_t merged);
/* The slot for (left, right), or NULL. */
const tg_pair_slot *tg_pairmap_get(const tg_pairmap *m, int32_t left, int32_t right);

#endif
