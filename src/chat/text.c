/* text.c — the chat-template engine's memory and text plumbing: the capped arena, one-line errors with line:column,
 * growable byte buffers, and the UTF-8 / Python-whitespace helpers the lexer and the string functions share. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"
#include "util/checked.h"
#include "util/error.h"

struct tj_chunk {
    tj_chunk *next;
    size_t size, used;
    max_align_t data[];
};

#define TJ_CHUNK_MIN ((size_t)64 * 1024)

_Noreturn void tj_fail(tj_ctx *c, size_t pos, const char *fmt, ...) {
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (pos == TJ_NOPOS || !c->src || pos > c->src_len) {
        tg_fail(c->err, "chat template: %s", what);
    } else {
        size_t line = 1, col = 1;
        for (size_t i = 0; i < pos; i++) {
            unsigned char ch = (unsigned char)c->src[i];
            if (ch == '\n') {
                line++;
                col = 1;
            } else if ((ch & 0xC0) != 0x80) {
                col++;
            }
        }
        tg_fail(c->err, "chat template: %s at line %zu:%zu", what, line, col);
    }
    longjmp(c->jmp, 1);
}

void *tj_alloc(tj_ctx *c, size_t n) {
    size_t need = (n + 15) & ~(size_t)15;
    if (need < n) tj_fail(c, TJ_NOPOS, "allocation size overflows");
    tj_chunk *k = c->chunks;
    if (!k || k->size - k->used < need) {
        size_t size = need > TJ_CHUNK_MIN ? need : TJ_CHUNK_MIN, total;
        if (!tg_add_size(size, sizeof(tj_chunk), &total) || !tg_add_size(c->used, total, &(size_t){0}) ||
            c->used + total > c->cap)
            tj_fail(c, TJ_NOPOS, "needs more than %zu MiB of memory (the limit)", c->cap >> 20);
        k = malloc(total);
        if (!k) tj_fail(c, TJ_NOPOS, "out of memory");
        k->size = size;
        k->used = 0;
        k->next = c->chunks;
        c->chunks = k;
        c->used += total;
    }
    void *p = (char *)k->data + k->used;
    k->used += need;
    memset(p, 0, n);
    return p;
}

void *tj_alloc_array(tj_ctx *c, size_t n, size_t sz) {
    size_t total;
    if (!tg_mul_size(n, sz, &total)) tj_fail(c, TJ_NOPOS, "array size overflows");
    return tj_alloc(c, total ? total : 1);
}

char *tj_strdup(tj_ctx *c, const char *s, size_t n) {
    if (n == SIZE_MAX) tj_fail(c, TJ_NOPOS, "string too long");
    char *p = tj_alloc(c, n + 1);
    if (n) memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

void tj_arena_free(tj_ctx *c) {
    tj_chunk *k = c->chunks;
    while (k) {
        tj_chunk *next = k->next;
        free(k);
        k = next;
    }
    c->chunks = NULL;
    c->used = 0;
}

void tj_buf_put(tj_ctx *c, tj_buf *b, const char *s, size_t n) {
    if (n == 0) return;
    size_t need;
    if (!tg_add_size(b->n, n, &need) || (b->limit && need > b->limit))
        tj_fail(c, TJ_NOPOS, "output longer than %zu bytes (the limit)", b->limit);
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < need) {
            if (cap > SIZE_MAX / 2) tj_fail(c, TJ_NOPOS, "string too long");
            cap *= 2;
        }
        char *p = tj_alloc(c, cap);
        if (b->n) memcpy(p, b->p, b->n);
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n = need;
}

void tj_buf_putc(tj_ctx *c, tj_buf *b, char ch) { tj_buf_put(c, b, &ch, 1); }

void tj_buf_printf(tj_ctx *c, tj_buf *b, const char *fmt, ...) {
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) tj_fail(c, TJ_NOPOS, "formatted number too long");
    tj_buf_put(c, b, tmp, (size_t)n);
}

uint32_t tj_utf8_next(const char *s, size_t n, size_t *i) {
    const unsigned char *u = (const unsigned char *)s;
    size_t k = *i;
    uint32_t c0 = u[k];
    size_t len = c0 < 0x80 ? 1 : (c0 & 0xE0) == 0xC0 ? 2 : (c0 & 0xF0) == 0xE0 ? 3 : (c0 & 0xF8) == 0xF0 ? 4 : 0;
    if (len <= 1 || n - k < len) {
        *i = k + 1;
        return c0;
    }
    uint32_t cp = c0 & (0x7F >> len);
    for (size_t j = 1; j < len; j++) {
        if ((u[k + j] & 0xC0) != 0x80) {
            *i = k + 1;
            return c0;
        }
        cp = cp << 6 | (u[k + j] & 0x3F);
    }
    *i = k + len;
    return cp;
}

void tj_buf_put_cp(tj_ctx *c, tj_buf *b, uint32_t cp) {
    char t[4];
    size_t n;
    if (cp < 0x80) {
        t[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        t[0] = (char)(0xC0 | cp >> 6);
        t[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        t[0] = (char)(0xE0 | cp >> 12);
        t[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        t[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        t[0] = (char)(0xF0 | cp >> 18);
        t[1] = (char)(0x80 | (cp >> 12 & 0x3F));
        t[2] = (char)(0x80 | (cp >> 6 & 0x3F));
        t[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    tj_buf_put(c, b, t, n);
}

size_t tj_utf8_len(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80) k++;
    return k;
}

size_t tj_utf8_offset(const char *s, size_t n, size_t k) {
    size_t i = 0;
    while (k > 0 && i < n) {
        tj_utf8_next(s, n, &i);
        k--;
    }
    return i;
}

bool tj_py_isspace(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

size_t tj_ws_prefix(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        if (!tj_py_isspace(tj_utf8_next(s, n, &j))) break;
        i = j;
    }
    return i;
}

size_t tj_ws_suffix(const char *s, size_t n) {
    size_t end = n;
    while (end > 0) {
        size_t start = end - 1;
        while (start > 0 && ((unsigned char)s[start] & 0xC0) == 0x80 && end - start < 4) start--;
        size_t j = start;
        uint32_t cp = tj_utf8_next(s, n, &j);
        if (j != end) { /* not a whole character ending here: treat the last byte alone */
            start = end - 1;
            cp = (unsigned char)s[start];
        }
        if (!tj_py_isspace(cp)) break;
        end = start;
    }
    return n - end;
}

bool tj_utf8_valid(const char *s, size_t n, size_t *bad) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned char c0 = u[i];
        size_t len;
        uint32_t cp;
        if (c0 < 0x80) {
            i++;
            continue;
        } else if (c0 >= 0xC2 && c0 <= 0xDF) {
            len = 2;
            cp = c0 & 0x1F;
        } else if (c0 >= 0xE0 && c0 <= 0xEF) {
            len = 3;
            cp = c0 & 0x0F;
        } else if (c0 >= 0xF0 && c0 <= 0xF4) {
            len = 4;
            cp = c0 & 0x07;
        } else {
            *bad = i;
            return false;
        }
        if (n - i < len) {
            *bad = i;
            return false;
        }
        for (size_t k = 1; k < len; k++) {
            if ((u[i + k] & 0xC0) != 0x80) {
                *bad = i;
                return false;
            }
            cp = cp << 6 | (u[i + k] & 0x3F);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || (cp >= 0xD800 && cp <= 0xDFFF) ||
            cp > 0x10FFFF) {
            *bad = i;
            return false;
        }
        i += len;
    }
    return true;
}

void *tj_zalloc_or_fail(size_t bytes, tg_error *err) {
    void *p = calloc(1, bytes);
    if (!p) tg_fail(err, "chat template: out of memory");
    return p;
}

void *tj_grow_array(tj_ctx *c, void *a, size_t n, size_t *cap, size_t elem) {
    if (n < *cap) return a;
    size_t nc = *cap ? *cap * 2 : 4;
    void *b = tj_alloc_array(c, nc, elem);
    if (n) memcpy(b, a, n * elem);
    *cap = nc;
    return b;
}
