/* bytes.h — little-endian byte streams for the snapshot format (docs/snapshot-format.md): a writer that either
 * counts (p NULL) or writes into a buffer its count sized, and a reader that never reads past its end (every read
 * checks the bytes left first and fails from then on). */
#ifndef TG_UTIL_BYTES_H
#define TG_UTIL_BYTES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Writer: with p NULL it only counts n; otherwise p holds at least the n a counting pass gave. */
typedef struct {
    uint8_t *p;
    size_t n;
} tg_wbytes;

static inline void tg_w_raw(tg_wbytes *w, const void *src, size_t n) {
    if (w->p && n) memcpy(w->p + w->n, src, n);
    w->n += n;
}
static inline void tg_w_u32(tg_wbytes *w, uint32_t x) {
    uint8_t b[4];
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(x >> (8 * i));
    tg_w_raw(w, b, 4);
}
static inline void tg_w_u64(tg_wbytes *w, uint64_t x) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(x >> (8 * i));
    tg_w_raw(w, b, 8);
}
static inline void tg_w_i64(tg_wbytes *w, int64_t x) { tg_w_u64(w, (uint64_t)x); }

/* Reader over p[n]: off advances; ok turns false at the first read that does not fit (then every read fails and
 * leaves its output zeroed). */
typedef struct {
    const uint8_t *p;
    size_t n, off;
    bool ok;
} tg_rbytes;

static inline bool tg_r_raw(tg_rbytes *r, void *dst, size_t n) {
    if (!r->ok || n > r->n - r->off) {
        r->ok = false;
        if (dst && n) memset(dst, 0, n);
        return false;
    }
    if (dst && n) memcpy(dst, r->p + r->off, n);
    r->off += n;
    return true;
}
static inline uint32_t tg_r_u32(tg_rbytes *r) {
    uint8_t b[4];
    if (!tg_r_raw(r, b, 4)) return 0;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}
static inline uint64_t tg_r_u64(tg_rbytes *r) {
    uint8_t b[8];
    if (!tg_r_raw(r, b, 8)) return 0;
    uint64_t x = 0;
    for (int i = 7; i >= 0; i--) x = x << 8 | b[i];
    return x;
}
static inline int64_t tg_r_i64(tg_rbytes *r) { return (int64_t)tg_r_u64(r); }

#endif
