/* error.h — filling a tg_error with one formatted line. */
#ifndef TG_UTIL_ERROR_H
#define TG_UTIL_ERROR_H

#include "tinygpt.h"

/* printf-style; err may be NULL. Control characters in the result (from quoted file bytes) become '?', so the
 * message stays one line. Always returns false so callers can `return tg_fail(err, ...)`. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
bool tg_fail(tg_error *err, const char *fmt, ...);

#endif
