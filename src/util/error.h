/* error.h — filling a tg_error with one formatted line and its code. */
#ifndef TG_UTIL_ERROR_H
#define TG_UTIL_ERROR_H

#include "tinygpt.h"

/* printf-style; err may be NULL; the code is TG_ERR_OTHER. Control characters in the result (from quoted file bytes)
 * become '?', so the message stays one line. Always returns false so callers can `return tg_fail(err, ...)`. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
bool tg_fail(tg_error *err, const char *fmt, ...);

/* tg_fail with a code other than TG_ERR_OTHER. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
bool tg_fail_code(tg_error *err, tg_error_code code, const char *fmt, ...);

#endif
