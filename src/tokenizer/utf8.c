/* utf8.c — strict UTF-8 decoding and encoding for the tokenizer. */
#include "tokenizer/utf8.h"

/* The bytes a character with lead byte b needs (0 for a byte that cannot lead), and the allowed range of its
 * second byte (which rules out overlong forms, surrogates and code points above U+10FFFF). */
static size_t lead_info(uint8_t b, uint8_t *lo, uint8_t *hi) {
    *lo = 0x80;
    *hi = 0xBF;
    if (b < 0x80) return 1;
    if (b < 0xC2) return 0;
    if (b < 0xE0) return 2;
    if (b < 0xF0) {
        if (b == 0xE0) *lo = 0xA0;
        if (b == 0xED) *hi = 0x9F;
        return 3;
    }
    if (b < 0xF5) {
        if (b == 0xF0) *lo = 0x90;
        if (b == 0xF4) *hi = 0x8F;
        return 4;
    }
    return 0;
}

tg_utf8_status tg_utf8_classify(const uint8_t *s, size_t n, size_t *len) {
    uint8_t lo, hi;
    const size_t need = lead_info(s[0], &lo, &hi);
    if (need == 0) {
        *len = 1;
        return TG_UTF8_INVALID;
    }
    for (size_t i = 1; i < need; i++) {
        if (i >= n) {
            *len = n;
            return TG_UTF8_INCOMPLETE;
        }
        const uint8_t min = i == 1 ? lo : 0x80, max = i == 1 ? hi : 0xBF;
        if (s[i] < min || s[i] > max) {
            *len = i;
            return TG_UTF8_INVALID;
        }
    }
    *len = need;
    return TG_UTF8_COMPLETE;
}

size_t tg_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
    size_t len;
    if (tg_utf8_classify(s, n, &len) != TG_UTF8_COMPLETE) return 0;
    static const uint8_t lead_mask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
    uint32_t c = s[0] & lead_mask[len];
    for (size_t i = 1; i < len; i++) c = (c << 6) | (s[i] & 0x3Fu);
    *cp = c;
    return len;
}

size_t tg_utf8_step(const uint8_t *s, size_t n) {
    size_t len;
    return tg_utf8_classify(s, n, &len) == TG_UTF8_COMPLETE ? len : 1;
}

size_t tg_utf8_encode(uint32_t cp, char out[4]) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp > 0x10FFFF) return 0;
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}
