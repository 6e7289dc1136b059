/* checked.h — overflow-checked size arithmetic for everything read from a file. */
#ifndef TG_UTIL_CHECKED_H
#define TG_UTIL_CHECKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* *out = a + b; false on overflow (then *out is unspecified). */
static inline bool tg_add_size(size_t a, size_t b, size_t *out) { return !__builtin_add_overflow(a, b, out); }
/* *out = a * b; false on overflow. */
static inline bool tg_mul_size(size_t a, size_t b, size_t *out) { return !__builtin_mul_overflow(a, b, out); }
static inline bool tg_mul_i64(int64_t a, int64_t b, int64_t *out) { return !__builtin_mul_overflow(a, b, out); }
static inline bool tg_add_i64(int64_t a, int64_t b, int64_t *out) { return !__builtin_add_overflow(a, b, out); }

/* True when [offset, offset + len) lies inside a buffer of `size` bytes (no overflow possible). */
static inline bool tg_range_ok(size_t offset, size_t len, size_t size) { return offset <= size && len <= size - offset; }

#endif
