/* error.c — filling a tg_error with one formatted line and its code. */
#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>

static void fail_v(tg_error *err, tg_error_code code, const char *fmt, va_list ap) {
    err->code = code;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    /* Messages quote bytes from files (keys, names, JSON text): a control character there would break the
     * one-line contract (or the terminal), so each becomes '?'. */
    for (char *c = err->msg; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
}

bool tg_fail(tg_error *err, const char *fmt, ...) {
    if (!err) return false;
    va_list ap;
    va_start(ap, fmt);
    fail_v(err, TG_ERR_OTHER, fmt, ap);
    va_end(ap);
    return false;
}

bool tg_fail_code(tg_error *err, tg_error_code code, const char *fmt, ...) {
    if (!err) return false;
    va_list ap;
    va_start(ap, fmt);
    fail_v(err, code, fmt, ap);
    va_end(ap);
    return false;
}
