/* error.c — filling a tg_error with one formatted line and its code. */
#include "util/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

bool tg_fail_code(tg_error *err, tg_error_code code, const char *fmt, ...) {
    if (!err) return false;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    /* Messages quote bytes from files (keys, names, JSON text): a control character there would break the
     * one-line contract (or the terminal), so each becomes '?'. */
    for (char *c = err->msg; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    return false;
}

void *tg_calloc_or_fail(size_t n, size_t size, tg_error *err) {
    void *p = calloc(n, size);
    if (!p) tg_fail(err, "out of memory");
    return p;
}
