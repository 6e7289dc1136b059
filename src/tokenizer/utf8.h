/* utf8.h — strict UTF-8 decoding and encoding for the tokenizer (invalid input is reported, never guessed at). */
#ifndef TG_TOKENIZER_UTF8_H
#define TG_TOKENIZER_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Decodes the character at s[0..n). Returns its length (1..4) and sets *cp, or 0 when s does not start with a
 * complete, well-formed character (bad lead byte, bad continuation, overlong form, surrogate, > U+10FFFF, or
 * truncated by n). n must be > 0. */
size_t tg_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp);

/* Length of the character starting at s[0..n) if it is valid, else 1: the unit the tokenizer steps by, so that
 * every invalid byte stands alone. n must be > 0. */
size_t tg_utf8_step(const uint8_t *s, size_t n);

/* How s[0..n) (n > 0) begins, for streaming: */
typedef enum {
    TG_UTF8_COMPLETE,   /* a valid character of *len bytes */
    TG_UTF8_INCOMPLETE, /* a valid prefix of a character that needs more bytes than n */
    TG_UTF8_INVALID,    /* no character can start this way: the first *len bytes form one maximal invalid subpart */
} tg_utf8_status;
tg_utf8_status tg_utf8_classify(const uint8_t *s, size_t n, size_t *len);

/* Writes the UTF-8 form of cp (<= U+10FFFF, not a surrogate) into out[4]; returns its length, 0 if cp is invalid. */
size_t tg_utf8_encode(uint32_t cp, char out[4]);

#endif
