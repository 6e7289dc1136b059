/* hashmap.c — the tokenizer's lookups: token text -> id on util/name_map.h, and an open-addressing table (linear
 * probing, at most half full) of token pairs. */
#include "tokenizer/hashmap.h"

#include <stdlib.h>
#include <string.h>


static uint64_t hash_u64(uint64_t x) { /* splitmix64 finaliser */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

bool tg_strmap_init(tg_strmap *m, size_t n, const char *text, const size_t *off) {
    m->text = text;
    m->off = off;
    return tg_name_map_init(&m->map, n);
}

void tg_strmap_free(tg_strmap *m) {
    if (m) tg_name_map_free(&m->map);
}

/* Token id's text in the arena of the tg_strmap `entries`. */
static tg_name_ref token_text(const void *entries, size_t id) {
    const tg_strmap *m = entries;
    return (tg_name_ref){m->text + m->off[id], m->off[id + 1] - m->off[id]};
}

void tg_strmap_put(tg_strmap *m, int32_t id) { (void)tg_name_map_put(&m->map, token_text, m, (size_t)id, true); }

int32_t tg_strmap_get(const tg_strmap *m, const char *s, size_t len) {
    const size_t id = tg_name_map_find(&m->map, token_text, m, s, len);
    return id == SIZE_MAX ? -1 : (int32_t)id;
}

bool tg_pairmap_init(tg_pairmap *m, size_t n) {
    memset(m, 0, sizeof *m);
    const size_t cap = tg_hash_slots(n, sizeof(tg_pair_slot));
    if (cap == 0) return false;
    m->slots = malloc(cap * sizeof(tg_pair_slot));
    if (!m->slots) return false;
    for (size_t i = 0; i < cap; i++) m->slots[i].key = UINT64_MAX;
    m->mask = cap - 1;
    return true;
}

void tg_pairmap_free(tg_pairmap *m) {
    if (!m) return;
    free(m->slots);
    m->slots = NULL;
}

static uint64_t pair_key(int32_t left, int32_t right) { return ((uint64_t)(uint32_t)left << 32) | (uint32_t)right; }

void tg_pairmap_put(tg_pairmap *m, int32_t left, int32_t right, int32_t rank, int32_t merged) {
    const uint64_t key = pair_key(left, right);
    size_t i = (size_t)hash_u64(key) & m->mask;
    while (m->slots[i].key != UINT64_MAX) {
        if (m->slots[i].key == key) return;
        i = (i + 1) & m->mask;
    }
    m->slots[i].key = key;
    m->slots[i].rank = rank;
    m->slots[i].merged = merged;
}

const tg_pair_slot *tg_pairmap_get(const tg_pairmap *m, int32_t left, int32_t right) {
    const uint64_t key = pair_key(left, right);
    size_t i = (size_t)hash_u64(key) & m->mask;
    while (m->slots[i].key != UINT64_MAX) {
        if (m->slots[i].key == key) return &m->slots[i];
        i = (i + 1) & m->mask;
    }
    return NULL;
}
