/* name_map.h — the one map from a name (bytes) to an index into the caller's entries: open addressing with linear
 * probing, at most half full, FNV-1a hashed. The map stores only indices; the names stay in the caller's entries,
 * which the caller describes at every call by a function that returns entry i's name. Used for GGUF keys and
 * tensor names, safetensors tensor names and the tokenizer's vocabulary. */
#ifndef TG_UTIL_NAME_MAP_H
#define TG_UTIL_NAME_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *ptr;
    size_t len;
} tg_name_ref;

/* The name of entry i of `entries` (a caller's array, arena, ...). */
typedef tg_name_ref (*tg_name_at_fn)(const void *entries, size_t i);

typedef struct {
    size_t *slots; /* [mask + 1]: entry index + 1, 0 = empty */
    size_t mask;
} tg_name_map;

/* Slots of an open-addressing table for n entries kept at most half full: the smallest power of two >= 2n and
 * >= 16; 0 when that overflows or the slots (slot_bytes each) would not fit in a size_t. */
size_t tg_hash_slots(size_t n, size_t slot_bytes);

/* An empty map with room for n names. False on allocation failure or size overflow (the map is then empty and
 * tg_name_map_free is still safe). */
bool tg_name_map_init(tg_name_map *m, size_t n);
void tg_name_map_free(tg_name_map *m);
/* Adds entry i under its name. If an entry j of the same name is present, returns j and keeps j (replace = false)
 * or puts i in its place (replace = true); returns SIZE_MAX when the name was new. At most n entries (init). */
size_t tg_name_map_put(tg_name_map *m, tg_name_at_fn at, const void *entries, size_t i, bool replace);
/* The index of the entry named s[0..len), or SIZE_MAX (also for a map that failed to initialise). */
size_t tg_name_map_find(const tg_name_map *m, tg_name_at_fn at, const void *entries, const char *s, size_t len);

#endif
