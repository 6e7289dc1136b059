/* decode.c — tokens back to the bytes they stand for (tg_tokenizer_decode_piece, tg_tokenizer_decode). */
#include <string.h>

#include "tokenizer/byte_level.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/utf8.h"

/* Writes into buf (up to cap bytes) while counting every byte; drops up to `strip` leading spaces. */
typedef struct {
    char *buf;
    size_t cap, n;
    int strip;
} emitter;

static void put(emitter *e, char ch) {
    if (e->strip > 0) {
        if (ch == ' ') {
            e->strip--;
            return;
        }
        e->strip = 0;
    }
    if (e->n < e->cap) e->buf[e->n] = ch;
    e->n++;
}

static void put_all(emitter *e, const char *s, size_t len) {
    for (size_t i = 0; i < len; i++) put(e, s[i]);
}

static const char METASPACE[] = "\xE2\x96\x81"; /* U+2581 */

size_t tg_tokenizer_decode_piece(const tg_tokenizer *t, int32_t prev, int32_t id, char *buf, size_t cap) {
    if (!t || id < 0 || id >= t->n_vocab) return 0;
    emitter e = {buf, buf ? cap : 0, 0, prev < 0 ? t->dec_strip_start : 0};
    size_t len;
    const char *s = tg_tok_text(t, id, &len);
    switch (t->type[id]) {
    case TG_TOK_CONTROL:
    case TG_TOK_UNKNOWN:
    case TG_TOK_UNUSED:
        return 0;
    case TG_TOK_USER:
        put_all(&e, s, len);
        return e.n;
    case TG_TOK_BYTE: {
        uint8_t b;
        if (t->dec_byte_fallback && tg_tok_parse_byte(s, len, &b)) {
            put(&e, (char)b);
            return e.n;
        }
        break; /* otherwise like a normal token */
    }
    default:
        break;
    }
    if (t->dec_byte_level) {
        /* every character must stand for a byte; if one does not, the text goes out as it is (as tokenizers'
         * ByteLevel decoder does) */
        bool all = true;
        for (size_t i = 0; i < len && all;) {
            uint32_t cp;
            uint8_t b;
            const size_t k = tg_utf8_decode((const uint8_t *)s + i, len - i, &cp);
            all = k > 0 && tg_byte_level_byte(cp, &b);
            i += k ? k : 1;
        }
        if (all) {
            for (size_t i = 0; i < len;) {
                uint32_t cp = 0;
                uint8_t b = 0;
                i += tg_utf8_decode((const uint8_t *)s + i, len - i, &cp);
                tg_byte_level_byte(cp, &b);
                put(&e, (char)b);
            }
            return e.n;
        }
        put_all(&e, s, len);
        return e.n;
    }
    for (size_t i = 0; i < len;) {
        if (t->dec_metaspace && i + 3 <= len && memcmp(s + i, METASPACE, 3) == 0) {
            put(&e, ' ');
            i += 3;
        } else {
            put(&e, s[i++]);
        }
    }
    return e.n;
}

size_t tg_tokenizer_decode(const tg_tokenizer *t, const int32_t *ids, size_t n, char *buf, size_t cap) {
    size_t total = 0;
    int32_t prev = -1;
    for (size_t i = 0; i < n; i++) {
        const size_t room = total < cap ? cap - total : 0;
        total += tg_tokenizer_decode_piece(t, prev, ids[i], room ? buf + total : NULL, room);
        /* the start of the text lasts while tokens decode to nothing even unstripped (a leading BOS) */
        if (prev >= 0 || tg_tokenizer_decode_piece(t, ids[i], ids[i], NULL, 0) > 0) prev = ids[i];
    }
    return total;
}
