/* byte_level.h — GPT-2's reversible map between the 256 byte values and 256 printable Unicode characters. */
#ifndef TG_TOKENIZER_BYTE_LEVEL_H
#define TG_TOKENIZER_BYTE_LEVEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The character that stands for byte b: b itself for printable Latin-1 ('!'..'~', U+00A1..U+00AC,
 * U+00AE..U+00FF), otherwise U+0100 + the rank of b among the remaining 68 bytes. */
uint32_t tg_byte_level_cp(uint8_t b);
/* Inverse of tg_byte_level_cp: false when cp stands for no byte. */
bool tg_byte_level_byte(uint32_t cp, uint8_t *b);

/* Appends the byte-level characters for in[0..n) to out, which must have room for 2 * n bytes (every mapped
 * character takes one or two UTF-8 bytes). Returns the bytes written. */
size_t tg_byte_level_encode(const uint8_t *in, size_t n, char *out);

#endif
