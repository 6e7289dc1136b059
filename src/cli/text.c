/* text.c — UTF-8 stepping, table cells and padding, and bounded reading of text files for the CLI. A character is at
 * most 4 bytes here: every write is checked against the capacity of the buffer it goes to. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* strnlen */
#endif

#include "cli/text.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static bool text_is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

/* Length of the well-formed sequence at s[0 .. n), or 0 when it is not one (RFC 3629 table 3-7). */
static size_t text_valid_len(const unsigned char *s, size_t n) {
    const unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF; /* the range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c == 0xE0) len = 3, lo = 0xA0;
    else if (c >= 0xE1 && c <= 0xEC) len = 3;
    else if (c == 0xED) len = 3, hi = 0x9F;
    else if (c >= 0xEE && c <= 0xEF) len = 3;
    else if (c == 0xF0) len = 4, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3) len = 4;
    else if (c == 0xF4) len = 4, hi = 0x8F;
    else return 0;
    if (n < len || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if (!text_is_cont(s[i])) return 0;
    return len;
}

size_t tg_utf8_char_len(const char *s, size_t n) {
    const size_t v = n ? text_valid_len((const unsigned char *)s, n) : 0;
    return v ? v : 1;
}

bool tg_utf8_char_valid(const char *s, size_t n) { return n > 0 && text_valid_len((const unsigned char *)s, n) > 0; }

size_t tg_utf8_count(const char *s, size_t n) {
    size_t chars = 0;
    for (size_t i = 0; i < n; chars++) i += tg_utf8_char_len(s + i, n - i);
    return chars;
}

static const char TEXT_ELLIPSIS[] = "\xe2\x80\xa6";  /* U+2026, 3 bytes */
static const char TEXT_REPLACEMENT[] = "\xef\xbf\xbd"; /* U+FFFD, 3 bytes */

size_t tg_text_cell(const char *p, size_t max_chars, bool markdown, char *buf, size_t cap) {
    if (cap == 0) return 0;
    const size_t n = strlen(p);
    size_t used = 0, chars = 0, i = 0;
    bool cut = false;
    while (i < n) {
        if (chars == max_chars) {
            cut = true;
            break;
        }
        const size_t len = tg_utf8_char_len(p + i, n - i);
        const unsigned char c = (unsigned char)p[i];
        const char *piece = p + i;
        size_t piece_len = len;
        char esc[2];
        if (!tg_utf8_char_valid(p + i, n - i)) {
            piece = TEXT_REPLACEMENT;
            piece_len = 3;
        } else if (c < 0x20 || c == 0x7f) {
            piece = "?";
            piece_len = 1;
        } else if (markdown && c == '|') {
            esc[0] = '\\';
            esc[1] = '|';
            piece = esc;
            piece_len = 2;
        }
        /* room for this piece, a possible ellipsis after it and the NUL */
        if (piece_len + 3 + 1 > cap - used) {
            cut = true;
            break;
        }
        memcpy(buf + used, piece, piece_len);
        used += piece_len;
        i += len;
        chars++;
    }
    if (cut && 3 + 1 <= cap - used) {
        memcpy(buf + used, TEXT_ELLIPSIS, 3);
        used += 3;
    }
    buf[used] = '\0';
    return used;
}

void tg_print_padded(FILE *f, const char *s, size_t width) {
    fputs(s, f);
    for (size_t chars = tg_utf8_count(s, strlen(s)); chars < width; chars++) fputc(' ', f);
}

bool tg_text_lines(const char *text, size_t len, char ***lines, size_t *n) {
    char **out = NULL;
    size_t count = 0, cap = 0;
    for (size_t at = 0; at < len;) {
        const char *nl = memchr(text + at, '\n', len - at);
        const size_t end = nl ? (size_t)(nl - text) : len;
        size_t got = strnlen(text + at, end - at);
        while (got > 0 && text[at + got - 1] == '\r') got--;
        if (got > 0) {
            if (count == cap) {
                const size_t nc = cap ? 2 * cap : 8;
                char **bigger = nc <= SIZE_MAX / sizeof *bigger ? realloc(out, nc * sizeof *bigger) : NULL;
                if (!bigger) goto oom;
                out = bigger;
                cap = nc;
            }
            out[count] = malloc(got + 1);
            if (!out[count]) goto oom;
            memcpy(out[count], text + at, got);
            out[count++][got] = '\0';
        }
        at = end + 1;
    }
    *lines = out;
    *n = count;
    return true;
oom:
    tg_text_lines_free(out, count);
    return false;
}

void tg_text_lines_free(char **lines, size_t n) {
    for (size_t i = 0; i < n; i++) free(lines[i]);
    free(lines);
}

/* ---- reading ----------------------------------------------------------------------------------------------------- */

bool tg_text_reader_open(tg_text_reader *r, const char *path, size_t limit, char *msg, size_t msg_cap) {
    memset(r, 0, sizeof *r);
    r->limit = limit < SIZE_MAX / 4 ? limit : SIZE_MAX / 4; /* limit + 2 must not wrap */
    r->f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!r->f) {
        snprintf(msg, msg_cap, "%s: %s", path, strerror(errno));
        return false;
    }
    r->cap = 1 << 16;
    r->buf = malloc(r->cap);
    if (!r->buf) {
        snprintf(msg, msg_cap, "%s: out of memory", path);
        tg_text_reader_close(r);
        return false;
    }
    r->buf[0] = '\0';
    return true;
}

bool tg_text_reader_fill(tg_text_reader *r, const char *path, size_t want, char *msg, size_t msg_cap) {
    /* one byte past the limit is read to tell "exactly the limit" from "more" */
    const size_t target = want < r->limit ? want : r->limit + 1;
    while (!r->eof && r->len < target) {
        if (r->len + 1 == r->cap) {
            if (r->cap > SIZE_MAX / 2) {
                snprintf(msg, msg_cap, "%s: out of memory", path);
                return false;
            }
            size_t bigger_cap = r->cap * 2;
            if (bigger_cap > r->limit + 2) bigger_cap = r->limit + 2;
            char *bigger = realloc(r->buf, bigger_cap);
            if (!bigger) {
                snprintf(msg, msg_cap, "%s: out of memory", path);
                return false;
            }
            r->buf = bigger;
            r->cap = bigger_cap;
        }
        size_t room = r->cap - 1 - r->len;
        if (room > target - r->len) room = target - r->len;
        const size_t got = fread(r->buf + r->len, 1, room, r->f);
        r->len += got;
        r->buf[r->len] = '\0';
        if (got < room) {
            if (ferror(r->f)) {
                snprintf(msg, msg_cap, "%s: %s", path, strerror(errno));
                return false;
            }
            r->eof = true;
        }
    }
    if (r->len > r->limit) {
        if (r->limit % ((size_t)1 << 20) == 0)
            snprintf(msg, msg_cap, "%s: larger than the %zu MiB limit for a text file", path, r->limit >> 20);
        else
            snprintf(msg, msg_cap, "%s: larger than the %zu-byte limit for a text file", path, r->limit);
        return false;
    }
    return true;
}

void tg_text_reader_close(tg_text_reader *r) {
    if (r->f && r->f != stdin) fclose(r->f);
    free(r->buf);
    memset(r, 0, sizeof *r);
}

char *tg_read_text_file(const char *path, size_t limit, size_t *len, char *msg, size_t msg_cap) {
    tg_text_reader r;
    if (!tg_text_reader_open(&r, path, limit, msg, msg_cap)) return NULL;
    if (!tg_text_reader_fill(&r, path, SIZE_MAX, msg, msg_cap)) {
        tg_text_reader_close(&r);
        return NULL;
    }
    char *buf = r.buf;
    *len = r.len;
    r.buf = NULL;
    tg_text_reader_close(&r);
    return buf;
}
