/* error.c — filling a tg_error with one formatted line. */
#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>

bool tg_fail(tg_error *err, const char *fmt, ...) {
    if (!err) return false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return false;
}
