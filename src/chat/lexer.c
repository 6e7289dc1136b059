/* lexer.c — splits a chat template into tokens exactly as jinja2's lexer does with Hugging Face's settings
 * (trim_blocks=True, lstrip_blocks=True): data between tags, {{ }} / {% %} with the expression tokens inside,
 * comments dropped, and the whitespace rules applied to the data:
 *   - `{%-` / `{{-` / `{#-` strip all whitespace before the tag, `-%}` / `-}}` / `-#}` all whitespace after it;
 *   - trim_blocks: the first newline after `%}` or `#}` is dropped (not after `+%}`, not after `}}`);
 *   - lstrip_blocks: spaces and tabs from the start of a line up to `{%` or `{#` are dropped (not before `{%+`,
 *     not before `{{`); "start of a line" includes the position right after a trimmed newline.
 * Whitespace means Python's str.isspace(). String literals are decoded like Python's unicode-escape. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"

typedef struct {
    tj_ctx *c;
    const char *s;
    size_t n;
    tj_token *t;
    size_t nt, cap;
} lexer;

static void emit(lexer *L, tj_token tok) {
    if (L->nt == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 64;
        tj_token *t = tj_alloc_array(L->c, cap, sizeof *t);
        if (L->nt) memcpy(t, L->t, L->nt * sizeof *t);
        L->t = t;
        L->cap = cap;
    }
    L->t[L->nt++] = tok;
}

static void emit_simple(lexer *L, tj_tok_kind kind, size_t pos, const char *s, size_t n) {
    tj_token tok = {.kind = kind, .pos = pos, .s = s, .n = n};
    emit(L, tok);
}

static bool starts(const lexer *L, size_t i, const char *lit) {
    size_t k = strlen(lit);
    return L->n - i >= k && memcmp(L->s + i, lit, k) == 0;
}

/* Whitespace (Python's \s) starting at i: its length in bytes. */
static size_t skip_ws(const lexer *L, size_t i) { return tj_ws_prefix(L->s + i, L->n - i); }

static int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* Decodes the body of a string literal (between the quotes) like Python's
 * .encode("ascii", "backslashreplace").decode("unicode-escape"). */
static void decode_string(lexer *L, size_t pos, const char *s, size_t n, tj_token *out) {
    tj_buf b = {0};
    size_t i = 0;
    while (i < n) {
        if (s[i] != '\\') {
            size_t j = i;
            while (j < n && s[j] != '\\') j++;
            tj_buf_put(L->c, &b, s + i, j - i);
            i = j;
            continue;
        }
        i++; /* the lexer's regex guarantees a character after a backslash */
        char e = s[i];
        if ((unsigned char)e >= 0x80) { /* backslashreplace turned it into \xhh / \uhhhh / \Uhhhhhhhh text */
            uint32_t cp = tj_utf8_next(s, n, &i);
            tj_buf_putc(L->c, &b, '\\');
            tj_buf_printf(L->c, &b, cp < 0x100 ? "x%02x" : cp < 0x10000 ? "u%04x" : "U%08x", (unsigned)cp);
            continue;
        }
        i++;
        switch (e) {
        case '\n': break; /* line continuation */
        case '\\': tj_buf_putc(L->c, &b, '\\'); break;
        case '\'': tj_buf_putc(L->c, &b, '\''); break;
        case '"': tj_buf_putc(L->c, &b, '"'); break;
        case 'a': tj_buf_putc(L->c, &b, '\a'); break;
        case 'b': tj_buf_putc(L->c, &b, '\b'); break;
        case 'f': tj_buf_putc(L->c, &b, '\f'); break;
        case 'n': tj_buf_putc(L->c, &b, '\n'); break;
        case 'r': tj_buf_putc(L->c, &b, '\r'); break;
        case 't': tj_buf_putc(L->c, &b, '\t'); break;
        case 'v': tj_buf_putc(L->c, &b, '\v'); break;
        case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': {
            uint32_t v = (uint32_t)(e - '0');
            for (int k = 0; k < 2 && i < n && s[i] >= '0' && s[i] <= '7'; k++) v = v * 8 + (uint32_t)(s[i++] - '0');
            tj_buf_put_cp(L->c, &b, v);
            break;
        }
        case 'x': case 'u': case 'U': {
            int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t v = 0;
            for (int k = 0; k < digits; k++) {
                int h = i < n ? hexval(s[i]) : -1;
                if (h < 0) tj_fail(L->c, pos, "truncated \\%cXX escape in a string", e);
                v = v * 16 + (uint32_t)h;
                i++;
            }
            if (v > 0x10FFFF) tj_fail(L->c, pos, "illegal Unicode character in a string");
            if (v >= 0xD800 && v <= 0xDFFF) tj_fail(L->c, pos, "lone surrogate \\u%04x in a string", (unsigned)v);
            tj_buf_put_cp(L->c, &b, v);
            break;
        }
        case 'N': tj_fail(L->c, pos, "unsupported Jinja feature '\\N{...} escape'");
        default: /* unknown escapes stay as they are */
            tj_buf_putc(L->c, &b, '\\');
            tj_buf_putc(L->c, &b, e);
        }
    }
    out->s = b.p ? b.p : "";
    out->n = b.n;
}

/* Integer or float at i (jinja's integer_re / float_re); returns the length. */
static size_t lex_number(lexer *L, size_t i, tj_token *tok) {
    const char *s = L->s;
    size_t n = L->n, j = i;
    char digits[400];
    size_t nd = 0;
    /* float: (\d+_)*\d+ ( (\.(\d+_)*\d+)? e[+-]?(\d+_)*\d+ | \.(\d+_)*\d+ ), not after a '.' */
    if (i == 0 || s[i - 1] != '.') {
        size_t k = i;
#define DIGITS_RUN(k) \
    do { \
        if (!((k) < n && s[k] >= '0' && s[k] <= '9')) goto not_float; \
        while ((k) < n && ((s[k] >= '0' && s[k] <= '9') || (s[k] == '_' && (k) + 1 < n && s[(k) + 1] >= '0' && \
                                                          s[(k) + 1] <= '9'))) \
            (k)++; \
    } while (0)
        DIGITS_RUN(k);
        bool frac = false, expo = false;
        if (k + 1 < n && s[k] == '.' && s[k + 1] >= '0' && s[k + 1] <= '9') {
            k++;
            DIGITS_RUN(k);
            frac = true;
        }
        if (k < n && (s[k] == 'e' || s[k] == 'E')) {
            size_t e = k + 1;
            if (e < n && (s[e] == '+' || s[e] == '-')) e++;
            if (e < n && s[e] >= '0' && s[e] <= '9') {
                DIGITS_RUN(e);
                k = e;
                expo = true;
            }
        }
#undef DIGITS_RUN
        if (frac || expo) {
            for (size_t q = i; q < k; q++)
                if (s[q] != '_' && nd + 1 < sizeof digits) digits[nd++] = s[q];
            if (k - i >= sizeof digits - 1) tj_fail(L->c, i, "number literal too long");
            digits[nd] = '\0';
            tok->kind = TK_FLOAT;
            tok->f = strtod(digits, NULL);
            return k - i;
        }
    }
not_float:;
    int base = 10;
    if (j + 1 < n && s[j] == '0' && s[j + 1] != '\0' && strchr("bBoOxX", s[j + 1])) {
        char p = (char)(s[j + 1] | 0x20);
        base = p == 'b' ? 2 : p == 'o' ? 8 : 16;
        size_t k = j + 2;
        size_t start = k;
        for (;;) {
            size_t q = k;
            if (q < n && s[q] == '_') q++;
            int h = q < n ? hexval(s[q]) : -1;
            if (h < 0 || h >= base) break;
            if (nd + 1 < sizeof digits) digits[nd++] = s[q];
            k = q + 1;
        }
        if (k == start) base = 10; /* "0x" without digits: just the integer 0 */
        else j = k;
    }
    if (base == 10) {
        nd = 0;
        if (s[j] == '0') {
            j++;
            digits[nd++] = '0';
            while (j < n && (s[j] == '0' || (s[j] == '_' && j + 1 < n && s[j + 1] == '0'))) j += s[j] == '_' ? 2 : 1;
        } else {
            while (j < n && ((s[j] >= '0' && s[j] <= '9') ||
                             (s[j] == '_' && j + 1 < n && s[j + 1] >= '0' && s[j + 1] <= '9'))) {
                if (s[j] != '_' && nd + 1 < sizeof digits) digits[nd++] = s[j];
                j++;
            }
        }
    }
    digits[nd] = '\0';
    int64_t v = 0;
    for (size_t q = 0; q < nd; q++) {
        int d = hexval(digits[q]);
        if (__builtin_mul_overflow(v, base, &v) || __builtin_add_overflow(v, d, &v))
            tj_fail(L->c, i, "integer literal too large (integers are 64-bit)");
    }
    tok->kind = TK_INT;
    tok->i = v;
    return j - i;
}

static const char *const OPS2[] = {"//", "**", "==", "!=", ">=", "<="};
static const char OPS1[] = "+-/*%~[](){}|.,:;=<>";

/* The tokens inside {{ }} or {% %} starting at i (after the opening tag at `open`), with the end tag's whitespace
 * rule applied: returns the position after the end tag and what it strips (`-%}` all whitespace, `%}` one newline,
 * `+%}` nothing). End tags only count outside brackets, as in jinja2 (`{{ {'a': 1}}}` ends at the last `}}`). */
static size_t lex_tag(lexer *L, size_t open, size_t i, bool block) {
    char stack[256];
    size_t depth = 0;
    for (;;) {
        if (i >= L->n)
            tj_fail(L->c, open, "unclosed '%s' (expected '%s' before the end of the template)", block ? "{%" : "{{",
                    block ? "%}" : "}}");
        if (depth == 0) {
            const char *end = block ? "%}" : "}}";
            if (block && starts(L, i, "+%}")) {
                emit_simple(L, TK_BLOCK_END, i, NULL, 0);
                return i + 3;
            }
            if (L->s[i] == '-' && starts(L, i + 1, end)) {
                emit_simple(L, block ? TK_BLOCK_END : TK_VAR_END, i, NULL, 0);
                return i + 3 + skip_ws(L, i + 3);
            }
            if (starts(L, i, end)) {
                emit_simple(L, block ? TK_BLOCK_END : TK_VAR_END, i, NULL, 0);
                size_t j = i + 2;
                if (block && j < L->n && L->s[j] == '\n') j++; /* trim_blocks */
                return j;
            }
        }
        size_t ws = skip_ws(L, i);
        if (ws) {
            i += ws;
            continue;
        }
        char ch = L->s[i];
        tj_token tok = {.pos = i};
        if (ch >= '0' && ch <= '9') {
            i += lex_number(L, i, &tok);
            emit(L, tok);
            continue;
        }
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_') {
            size_t j = i;
            while (j < L->n && ((L->s[j] >= 'a' && L->s[j] <= 'z') || (L->s[j] >= 'A' && L->s[j] <= 'Z') ||
                                (L->s[j] >= '0' && L->s[j] <= '9') || L->s[j] == '_'))
                j++;
            emit_simple(L, TK_NAME, i, L->s + i, j - i);
            i = j;
            continue;
        }
        if (ch == '\'' || ch == '"') {
            size_t j = i + 1;
            while (j < L->n && L->s[j] != ch) j += L->s[j] == '\\' && j + 1 < L->n ? 2 : 1;
            if (j >= L->n) tj_fail(L->c, i, "unterminated string literal");
            tok.kind = TK_STRING;
            decode_string(L, i, L->s + i + 1, j - i - 1, &tok);
            emit(L, tok);
            i = j + 1;
            continue;
        }
        size_t oplen = 0;
        for (size_t k = 0; k < sizeof OPS2 / sizeof *OPS2; k++)
            if (starts(L, i, OPS2[k])) oplen = 2;
        if (!oplen && strchr(OPS1, ch) && ch) oplen = 1;
        if (!oplen) {
            size_t j = i;
            uint32_t cp = tj_utf8_next(L->s, L->n, &j);
            if (cp >= 0x80) tj_fail(L->c, i, "unexpected character U+%04X inside a tag (names are ASCII here)",
                                    (unsigned)cp);
            tj_fail(L->c, i, "unexpected character '%c' inside a tag", ch >= 0x20 && ch < 0x7f ? ch : '?');
        }
        if (oplen == 1 && (ch == '{' || ch == '(' || ch == '[')) {
            if (depth == sizeof stack)
                tj_fail(L->c, i, "brackets nested more than %zu levels deep (the limit)", sizeof stack);
            stack[depth++] = ch == '{' ? '}' : ch == '(' ? ')' : ']';
        } else if (oplen == 1 && (ch == '}' || ch == ')' || ch == ']')) {
            if (depth == 0) tj_fail(L->c, i, "unexpected '%c'", ch);
            if (stack[depth - 1] != ch) tj_fail(L->c, i, "unexpected '%c', expected '%c'", ch, stack[depth - 1]);
            depth--;
        }
        emit_simple(L, TK_OP, i, L->s + i, oplen);
        i += oplen;
    }
}

tj_token *tj_lex(tj_ctx *c, size_t *n_tokens) {
    lexer L = {.c = c, .s = c->src, .n = c->src_len};
    size_t pos = 0;
    bool line_starting = true;
    while (pos < L.n) {
        /* the next tag start */
        size_t i = pos;
        const char *hit = NULL;
        while (i + 1 < L.n) {
            hit = memchr(L.s + i, '{', L.n - i - 1);
            if (!hit) break;
            i = (size_t)(hit - L.s);
            char k = L.s[i + 1];
            if (k == '{' || k == '%' || k == '#') break;
            i++;
            hit = NULL;
        }
        if (!hit) {
            emit_simple(&L, TK_DATA, pos, L.s + pos, L.n - pos);
            break;
        }
        char kind = L.s[i + 1];
        size_t j = i + 2;
        char sign = j < L.n && (L.s[j] == '-' || L.s[j] == '+') ? L.s[j++] : 0;
        size_t text_n = i - pos;
        const char *text = L.s + pos;
        if (sign == '-') {
            text_n -= tj_ws_suffix(text, text_n);
        } else if (sign != '+' && kind != '{') { /* lstrip_blocks */
            size_t l_pos = text_n;
            while (l_pos > 0 && text[l_pos - 1] != '\n') l_pos--;
            if ((l_pos > 0 || line_starting) && text_n > l_pos && tj_ws_prefix(text + l_pos, text_n - l_pos) ==
                                                                     text_n - l_pos)
                text_n = l_pos;
        }
        if (text_n) emit_simple(&L, TK_DATA, pos, text, text_n);
        line_starting = false;
        if (kind == '#') {
            size_t k = j;
            for (;;) {
                if (k + 1 >= L.n) tj_fail(c, i, "missing end of comment tag '#}'");
                if (starts(&L, k, "+#}")) {
                    pos = k + 3;
                    break;
                }
                if (starts(&L, k, "-#}")) {
                    pos = k + 3 + skip_ws(&L, k + 3);
                    break;
                }
                if (starts(&L, k, "#}")) {
                    pos = k + 2;
                    if (pos < L.n && L.s[pos] == '\n') pos++;
                    break;
                }
                k++;
            }
        } else {
            emit_simple(&L, kind == '%' ? TK_BLOCK_BEGIN : TK_VAR_BEGIN, i, NULL, 0);
            pos = lex_tag(&L, i, j, kind == '%');
        }
        line_starting = L.s[pos - 1] == '\n';
    }
    emit_simple(&L, TK_EOF, L.n, NULL, 0);
    *n_tokens = L.nt;
    return L.t;
}
