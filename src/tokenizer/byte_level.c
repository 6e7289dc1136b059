/* byte_level.c — GPT-2's byte <-> printable-character map, computed rather than tabulated. */
#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

static bool printable(uint32_t c) { return (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174 && c <= 255); }

uint32_t tg_byte_level_cp(uint8_t b) {
    if (printable(b)) return b;
    /* rank among the non-printable bytes: 0..32, then 127..160, then 173 */
    uint32_t rank;
    if (b <= 32) rank = b;
    else if (b <= 160) rank = 33u + (uint32_t)(b - 127);
    else rank = 67; /* b == 173 */
    return 256u + rank;
}

bool tg_byte_level_byte(uint32_t cp, uint8_t *b) {
    if (cp < 256) {
        if (!printable(cp)) return false;
        *b = (uint8_t)cp;
        return true;
    }
    if (cp >= 256 + 68) return false;
    const uint32_t rank = cp - 256;
    if (rank <= 32) *b = (uint8_t)rank;
    else if (rank < 67) *b = (uint8_t)(127 + (rank - 33));
    else *b = 173;
    return true;
}

size_t tg_byte_level_encode(const uint8_t *in, size_t n, char *out) {
    size_t w = 0;
    for (size_t i = 0; i < n; i++) w += tg_utf8_encode(tg_byte_level_cp(in[i]), out + w);
    return w;
}
