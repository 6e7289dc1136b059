/* text.h — the CLI's handling of text it did not write: UTF-8 characters as the tool counts them, a prompt cut and
 * escaped for a table cell, padding to a width in characters, and reading a text file with a stated size limit.
 * Every function that fills a buffer writes within the capacity it is given, whatever the input bytes are. */
#ifndef TG_CLI_TEXT_H
#define TG_CLI_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tinygpt.h"

/* The most bytes a command reads from a prompt or text file (compare --prompts, perplexity FILE): 64 MiB. */
#define TG_TEXT_FILE_LIMIT ((size_t)64 << 20)
#define TG_TEXT_FILE_LIMIT_TEXT "64 MiB"

/* Length in bytes (1 to 4) of the character that starts s[0 .. n), n >= 1: a well-formed UTF-8 sequence (shortest
 * form, no surrogate, at most U+10FFFF) gives its length; any other byte is a character of its own (length 1). */
size_t tg_utf8_char_len(const char *s, size_t n);

/* True when the character of tg_utf8_char_len at s is a well-formed sequence (not a lone invalid byte). */
bool tg_utf8_char_valid(const char *s, size_t n);

/* Characters in s[0 .. n) as tg_utf8_char_len steps through them (an invalid byte counts as one). */
size_t tg_utf8_count(const char *s, size_t n);

/* The first max_chars characters of the NUL-terminated p, for a table cell, into buf[cap] (cap >= 1; always
 * NUL-terminated): an invalid byte becomes U+FFFD, a control character (below 0x20, or 0x7f) '?', and with
 * markdown '|' becomes "\|". When p has more characters, or buf is too small for the next one, the cell ends with an
 * ellipsis (U+2026) if it fits. The result is valid UTF-8. Returns the bytes written before the NUL. */
size_t tg_text_cell(const char *p, size_t max_chars, bool markdown, char *buf, size_t cap);

/* Writes s to f and then spaces up to `width` characters (tg_utf8_count; nothing added when s is wider). */
void tg_print_padded(FILE *f, const char *s, size_t width);

/* The non-empty lines of text[0 .. len) (a line ends at '\n'; trailing '\r's are dropped; a NUL byte ends the line's
 * text), as a malloc'ed array of malloc'ed strings in *lines (*n of them; free with tg_text_lines_free). False only
 * when memory runs out (nothing to free then). */
bool tg_text_lines(const char *text, size_t len, char ***lines, size_t *n);
void tg_text_lines_free(char **lines, size_t n);

/* Reads the file at path into a malloc'ed, NUL-terminated buffer (*len excludes the NUL), at most `limit` bytes: a
 * file with more is refused. "-" reads standard input. Works for pipes and character devices too (it never needs the size up front). On
 * failure returns NULL and writes one line into msg[msg_cap] naming the path (no trailing newline). */
char *tg_read_text_file(const char *path, size_t limit, size_t *len, char *msg, size_t msg_cap);

/* An open file read incrementally: tg_text_reader_fill reads until at least `want` bytes are buffered (or the end of
 * the file, or `limit`). buf is NUL-terminated; it is owned by the reader. */
typedef struct {
    FILE *f;
    char *buf;
    size_t len, cap, limit;
    bool eof;
} tg_text_reader;

/* Opens path for tg_text_reader_fill ("-" is standard input, which close leaves open); false with msg (naming
 * path) on failure. */
bool tg_text_reader_open(tg_text_reader *r, const char *path, size_t limit, char *msg, size_t msg_cap);
/* Buffers at least `want` bytes (fewer at the end of the file). False with msg when reading fails, memory runs out,
 * or the file holds more than the reader's limit while more than the limit is wanted. */
bool tg_text_reader_fill(tg_text_reader *r, const char *path, size_t want, char *msg, size_t msg_cap);
void tg_text_reader_close(tg_text_reader *r);

#endif
