/* name_map.c — open-addressing name -> index map (name_map.h). */
#include "util/name_map.h"

#include <stdlib.h>
#include <string.h>

#include "util/checked.h"

static uint64_t hash_bytes(const char *s, size_t len) {
    uint64_t h = 14695981039346656037ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= (uint8_t)s[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29); /* fold the well-mixed high bits into the low ones the mask keeps */
}

size_t tg_hash_slots(size_t n, size_t slot_bytes) {
    size_t want;
    if (slot_bytes == 0 || !tg_mul_size(n, 2, &want)) return 0;
    size_t cap = 16;
    while (cap < want) {
        if (cap > SIZE_MAX / 2 / slot_bytes) return 0;
        cap *= 2;
    }
    return cap <= SIZE_MAX / slot_bytes ? cap : 0;
}

bool tg_name_map_init(tg_name_map *m, size_t n) {
    m->slots = NULL;
    m->mask = 0;
    const size_t cap = tg_hash_slots(n, sizeof *m->slots);
    if (cap == 0) return false;
    m->slots = calloc(cap, sizeof *m->slots);
    if (!m->slots) return false;
    m->mask = cap - 1;
    return true;
}

void tg_name_map_free(tg_name_map *m) {
    if (!m) return;
    free(m->slots);
    m->slots = NULL;
    m->mask = 0;
}

static bool same(tg_name_ref a, const char *s, size_t len) {
    return a.len == len && (len == 0 || memcmp(a.ptr, s, len) == 0);
}

size_t tg_name_map_put(tg_name_map *m, tg_name_at_fn at, const void *entries, size_t i, bool replace) {
    const tg_name_ref name = at(entries, i);
    for (size_t h = (size_t)hash_bytes(name.ptr, name.len) & m->mask;; h = (h + 1) & m->mask) {
        if (m->slots[h] == 0) {
            m->slots[h] = i + 1;
            return SIZE_MAX;
        }
        const size_t j = m->slots[h] - 1;
        if (same(at(entries, j), name.ptr, name.len)) {
            if (replace) m->slots[h] = i + 1;
            return j;
        }
    }
}

size_t tg_name_map_find(const tg_name_map *m, tg_name_at_fn at, const void *entries, const char *s, size_t len) {
    if (!m->slots) return SIZE_MAX;
    for (size_t h = (size_t)hash_bytes(s, len) & m->mask;; h = (h + 1) & m->mask) {
        const size_t slot = m->slots[h];
        if (slot == 0) return SIZE_MAX;
        if (same(at(entries, slot - 1), s, len)) return slot - 1;
    }
}
