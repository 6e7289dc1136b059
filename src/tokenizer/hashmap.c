/* hashmap.c — open-addressing hash tables (linear probing, at most half full) for the tokenizer's lookups. */
#include "tokenizer/hashmap.h"

#include <stdlib.h>
#include <string.h>

#include "util/checked.h"

static uint64_t hash_bytes(const char *s, size_t len) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= (uint8_t)s[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

static uint64_t hash_u64(uint64_t x) { /* splitmix64 finaliser */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Smallest power of two >= 2n (and >= 16); 0 on overflow. */
static size_t table_size(size_t n) {
    size_t want;
    if (!tg_mul_size(n, 2, &want)) return 0;
    size_t cap = 16;
    while (cap < want) {
        if (cap > SIZE_MAX / 2) return 0;
        cap *= 2;
    }
    return cap;
}

bool tg_strmap_init(tg_strmap *m, size_t n, const char *text, const size_t *off) {
    memset(m, 0, sizeof *m);
    const size_t cap = table_size(n);
    size_t bytes;
    if (cap == 0 || !tg_mul_size(cap, sizeof(int32_t), &bytes)) return false;
    m->slots = malloc(bytes);
    if (!m->slots) return false;
    memset(m->slots, 0xFF, bytes); /* every slot -1 */
    m->mask = cap - 1;
    m->text = text;
    m->off = off;
    return true;
}

void tg_strmap_free(tg_strmap *m) {
    if (!m) return;
    free(m->slots);
    m->slots = NULL;
}

static bool same_text(const tg_strmap *m, int32_t id, const char *s, size_t len) {
    const size_t a = m->off[id], b = m->off[id + 1];
    return b - a == len && memcmp(m->text + a, s, len) == 0;
}

void tg_strmap_put(tg_strmap *m, int32_t id) {
    const char *s = m->text + m->off[id];
    const size_t len = m->off[id + 1] - m->off[id];
    size_t i = (size_t)hash_bytes(s, len) & m->mask;
    while (m->slots[i] >= 0 && !same_text(m, m->slots[i], s, len)) i = (i + 1) & m->mask;
    m->slots[i] = id;
}

int32_t tg_strmap_get(const tg_strmap *m, const char *s, size_t len) {
    size_t i = (size_t)hash_bytes(s, len) & m->mask;
    while (m->slots[i] >= 0) {
        if (same_text(m, m->slots[i], s, len)) return m->slots[i];
        i = (i + 1) & m->mask;
    }
    return -1;
}

bool tg_pairmap_init(tg_pairmap *m, size_t n) {
    memset(m, 0, sizeof *m);
    const size_t cap = table_size(n);
    size_t bytes;
    if (cap == 0 || !tg_mul_size(cap, sizeof(tg_pair_slot), &bytes)) return false;
    m->slots = malloc(bytes);
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
