/* error.h — filling a tg_error with one formatted line and its code. */
#ifndef TG_UTIL_ERROR_H
#define TG_UTIL_ERROR_H

#include "tinygpt.h"

/* printf-style; err may be NULL. Control characters in the result (from quoted file bytes) become '?', so the
 * message stays one line. Always returns false so callers can `return tg_fail_code(err, code, ...)`. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
bool tg_fail_code(tg_error *err, tg_error_code code, const char *fmt, ...);

/* tg_fail_code with TG_ERR_OTHER: `return tg_fail(err, "%s: ...", path)`. */
#define tg_fail(err, ...) tg_fail_code((err), TG_ERR_OTHER, __VA_ARGS__)

/* calloc(n, size); NULL with "out of memory" in err (err may be NULL) when that fails. The caller frees. */
void *tg_calloc_or_fail(size_t n, size_t size, tg_error *err);

#endif
