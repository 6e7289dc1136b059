/* casemap.c — Python's str.upper/lower/title/capitalize/isupper/islower for the scripts chat text mostly uses:
 * ASCII, Latin-1, Latin Extended-A, the regular pairs of Latin Extended-B, Greek (with the final-sigma rule) and
 * basic Cyrillic, including the special full mappings there (ß -> SS / Ss, İ -> i̇, ŉ -> ʼN, ΐ, ΰ). Other code
 * points count as uncased and stay as they are (right for CJK, emoji, digits and punctuation; an approximation for
 * the rarer cased scripts: the rest of Latin Extended-B and IPA, archaic Greek, Armenian, Georgian, ...). */
#include <string.h>

#include "chat/jinja.h"

enum { UNCASED = 0, LOWER = 1, UPPER = 2 };

/* Latin Extended-A: alternating pairs with a few singletons. */
static int latin_ext_a(uint32_t cp) {
    if (cp <= 0x012F || (cp >= 0x0132 && cp <= 0x0137) || (cp >= 0x014A && cp <= 0x0177))
        return cp % 2 == 0 ? UPPER : LOWER;
    if ((cp >= 0x0139 && cp <= 0x0148) || (cp >= 0x0179 && cp <= 0x017E)) return cp % 2 == 1 ? UPPER : LOWER;
    if (cp == 0x0130 || cp == 0x0178) return UPPER;
    return LOWER; /* 0131 ı, 0138 ĸ, 0149 ŉ, 017F ſ */
}

/* The regular pairs of Latin Extended-B (Ǎǎ ... ǜ, Ǟǟ ... ǯ, Ǹǹ ... ȟ, Ȣȣ ... ȳ, Ɇɇ ... ɏ): whether cp is in one
 * and whether the upper letter of its pair is the even one. */
static bool latin_ext_b_pair(uint32_t cp, bool *upper_even) {
    *upper_even = true;
    if (cp >= 0x01CD && cp <= 0x01DC) {
        *upper_even = false;
        return true;
    }
    return (cp >= 0x01DE && cp <= 0x01EF) || (cp >= 0x01F8 && cp <= 0x021F) || (cp >= 0x0222 && cp <= 0x0233) ||
           (cp >= 0x0246 && cp <= 0x024F);
}

static int case_class(uint32_t cp) {
    if (cp >= 'a' && cp <= 'z') return LOWER;
    if (cp >= 'A' && cp <= 'Z') return UPPER;
    if (cp < 0xAA) return UNCASED;
    if (cp == 0xAA || cp == 0xB5 || cp == 0xBA) return LOWER;
    if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) return UPPER;
    if (cp >= 0xDF && cp <= 0xFF && cp != 0xF7) return LOWER;
    if (cp >= 0x0100 && cp <= 0x017F) return latin_ext_a(cp);
    bool upper_even;
    if (latin_ext_b_pair(cp, &upper_even)) return (cp % 2 == 0) == upper_even ? UPPER : LOWER;
    if (cp == 0x0386 || (cp >= 0x0388 && cp <= 0x038A) || cp == 0x038C || cp == 0x038E || cp == 0x038F ||
        (cp >= 0x0391 && cp <= 0x03A1) || (cp >= 0x03A3 && cp <= 0x03AB))
        return UPPER;
    if (cp == 0x0390 || (cp >= 0x03AC && cp <= 0x03CE)) return LOWER;
    if (cp >= 0x0400 && cp <= 0x042F) return UPPER;
    if (cp >= 0x0430 && cp <= 0x045F) return LOWER;
    return UNCASED;
}

/* Writes the upper (title = false) or title case of cp: one to three code points. */
static size_t to_upper(uint32_t cp, bool title, uint32_t out[3]) {
    out[0] = cp;
    if (case_class(cp) != LOWER) return 1;
    if (cp <= 'z') out[0] = cp - 0x20;
    else if (cp == 0xAA || cp == 0xBA) out[0] = cp;
    else if (cp == 0xB5) out[0] = 0x039C;
    else if (cp == 0xDF) {
        out[0] = 'S';
        out[1] = title ? 's' : 'S';
        return 2;
    } else if (cp == 0xFF) out[0] = 0x0178;
    else if (cp < 0x0100) out[0] = cp - 0x20;
    else if (cp == 0x0131) out[0] = 'I';
    else if (cp == 0x0138) out[0] = cp;
    else if (cp == 0x0149) {
        out[0] = 0x02BC;
        out[1] = 'N';
        return 2;
    } else if (cp == 0x017F) out[0] = 'S';
    else if (cp < 0x0250) out[0] = cp - 1; /* Latin Extended-A and the Extended-B pairs */
    else if (cp == 0x0390 || cp == 0x03B0) {
        out[0] = cp == 0x0390 ? 0x0399 : 0x03A5;
        out[1] = 0x0308;
        out[2] = 0x0301;
        return 3;
    } else if (cp == 0x03AC) out[0] = 0x0386;
    else if (cp >= 0x03AD && cp <= 0x03AF) out[0] = cp - 0x25;
    else if (cp == 0x03C2) out[0] = 0x03A3;
    else if (cp == 0x03CC) out[0] = 0x038C;
    else if (cp == 0x03CD || cp == 0x03CE) out[0] = cp - 0x3F;
    else if (cp >= 0x03B1 && cp <= 0x03CB) out[0] = cp - 0x20;
    else if (cp >= 0x0430 && cp <= 0x044F) out[0] = cp - 0x20;
    else if (cp >= 0x0450 && cp <= 0x045F) out[0] = cp - 0x50;
    return 1;
}

/* The lower case of cp; final says whether a capital sigma ends a word here. */
static size_t to_lower(uint32_t cp, bool final, uint32_t out[3]) {
    out[0] = cp;
    if (case_class(cp) != UPPER) return 1;
    if (cp <= 'Z') out[0] = cp + 0x20;
    else if (cp < 0x0100) out[0] = cp + 0x20;
    else if (cp == 0x0130) {
        out[0] = 'i';
        out[1] = 0x0307;
        return 2;
    } else if (cp == 0x0178) out[0] = 0xFF;
    else if (cp < 0x0250) out[0] = cp + 1;
    else if (cp == 0x0386) out[0] = 0x03AC;
    else if (cp >= 0x0388 && cp <= 0x038A) out[0] = cp + 0x25;
    else if (cp == 0x038C) out[0] = 0x03CC;
    else if (cp == 0x038E || cp == 0x038F) out[0] = cp + 0x3F;
    else if (cp == 0x03A3) out[0] = final ? 0x03C2 : 0x03C3;
    else if (cp >= 0x0391 && cp <= 0x03AB) out[0] = cp + 0x20;
    else if (cp >= 0x0410 && cp <= 0x042F) out[0] = cp + 0x20;
    else if (cp >= 0x0400 && cp <= 0x040F) out[0] = cp + 0x50;
    return 1;
}

static uint32_t *decode_all(tj_rt *r, tj_value s, size_t *n) {
    uint32_t *cps = tj_alloc_array(r->c, s.u.s.n + 1, sizeof *cps);
    size_t i = 0, k = 0;
    while (i < s.u.s.n) cps[k++] = tj_utf8_next(s.u.s.p, s.u.s.n, &i);
    *n = k;
    return cps;
}

tj_value tj_case(tj_rt *r, tj_value s, int mode) {
    size_t n;
    tj_charge(r, TJ_NOPOS, TJ_DECODE_UNITS(s.u.s.n));
    uint32_t *cps = decode_all(r, s, &n), out[3];
    tj_buf b = {0};
    bool prev_cased = false;
    for (size_t k = 0; k < n; k++) {
        uint32_t cp = cps[k];
        bool up;
        if (mode == 0) up = true;
        else if (mode == 1) up = false;
        else if (mode == 2) up = !prev_cased; /* str.title: a letter after an uncased character starts a word */
        else up = k == 0;                     /* str.capitalize */
        size_t m;
        if (up) {
            m = to_upper(cp, mode >= 2, out);
        } else {
            /* Python's final sigma: after a cased letter and not before one */
            bool final = k > 0 && case_class(cps[k - 1]) != UNCASED &&
                         (k + 1 == n || case_class(cps[k + 1]) == UNCASED);
            m = to_lower(cp, final, out);
        }
        for (size_t j = 0; j < m; j++) tj_buf_put_cp(r->c, &b, out[j]);
        prev_cased = case_class(cp) != UNCASED;
    }
    return tj_str(b.p ? b.p : "", b.n);
}

tj_value tj_title_words(tj_rt *r, tj_value s) {
    size_t n;
    tj_charge(r, TJ_NOPOS, TJ_DECODE_UNITS(s.u.s.n));
    uint32_t *cps = decode_all(r, s, &n), out[3];
    tj_buf b = {0};
    bool start = true;
    size_t first = 0; /* the word's first character: jinja lower-cases word[1:] apart from it */
    for (size_t k = 0; k < n; k++) {
        uint32_t cp = cps[k];
        bool sep = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<' || tj_py_isspace(cp);
        size_t m;
        if (!sep && start) {
            m = to_upper(cp, false, out);
            first = k;
        } else {
            bool final = k > first + 1 && case_class(cps[k - 1]) != UNCASED &&
                         (k + 1 == n || case_class(cps[k + 1]) == UNCASED);
            m = to_lower(cp, final, out);
        }
        for (size_t j = 0; j < m; j++) tj_buf_put_cp(r->c, &b, out[j]);
        start = sep;
    }
    return tj_str(b.p ? b.p : "", b.n);
}

bool tj_is_case(tj_rt *r, tj_value s, bool upper) {
    size_t i = 0;
    bool cased = false;
    tj_charge(r, TJ_NOPOS, TJ_DECODE_UNITS(s.u.s.n));
    while (i < s.u.s.n) {
        int c = case_class(tj_utf8_next(s.u.s.p, s.u.s.n, &i));
        if (c == (upper ? LOWER : UPPER)) return false;
        if (c != UNCASED) cased = true;
    }
    return cased;
}
