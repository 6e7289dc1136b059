/* pretokenize.c — pre-tokenizer steps over a list of pieces: PCRE2 splits with Hugging Face's split behaviours,
 * GPT-2 byte-level mapping and SentencePiece metaspace. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretokenize.h"

#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"
#include "util/checked.h"
#include "util/error.h"

struct tg_regex {
    pcre2_code *code;
};

/* A stretch of a piece: a match of the pattern or the gap between two matches. */
typedef struct {
    size_t start, end;
    bool match;
} tg_seg;

struct tg_pretok_ctx {
    const char *source; /* the tokenizer's file, for messages */
    pcre2_match_data *md;
    tg_pieces tmp;  /* the next state, swapped with the caller's pieces after each pass */
    tg_seg *seg;
    size_t n_seg, cap_seg;
};

/* Unicode's White_Space property, which Oniguruma (Hugging Face) and llama.cpp use for \s. PCRE2 10.42's \s with
 * UCP also takes U+180E (whitespace only before Unicode 6.3), so \s and \S are spelled out with this set. */
#define WHITE_SPACE                                                                                            \
    "\\t\\n\\x0B\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

/* Copies pattern with \s -> the White_Space set (inside or outside a class) and \S -> its complement (outside a
 * class; inside one it is left to PCRE2). Returns a malloc'd NUL-terminated pattern and its length, or NULL. */
static char *spell_out_spaces(const char *p, size_t len, size_t *out_len) {
    const size_t ws = sizeof WHITE_SPACE - 1;
    size_t cap;
    if (!tg_mul_size(len, ws + 4, &cap) || !tg_add_size(cap, 1, &cap)) return NULL;
    char *o = malloc(cap);
    if (!o) return NULL;
    size_t w = 0;
    bool in_class = false, quoted = false;
    for (size_t i = 0; i < len; i++) {
        const char c = p[i];
        if (quoted) { /* \Q ... \E: literal text */
            if (c == '\\' && i + 1 < len && p[i + 1] == 'E') quoted = false;
            o[w++] = c;
            continue;
        }
        if (c == '\\' && i + 1 < len) {
            const char e = p[++i];
            if (e == 's' && in_class) {
                memcpy(o + w, WHITE_SPACE, ws);
                w += ws;
            } else if (e == 's' || (e == 'S' && !in_class)) {
                o[w++] = '[';
                if (e == 'S') o[w++] = '^';
                memcpy(o + w, WHITE_SPACE, ws);
                w += ws;
                o[w++] = ']';
            } else {
                if (e == 'Q') quoted = true;
                o[w++] = c;
                o[w++] = e;
            }
            continue;
        }
        o[w++] = c;
        if (!in_class && c == '[') {
            in_class = true;
            if (i + 1 < len && p[i + 1] == '^') o[w++] = p[++i];
            if (i + 1 < len && p[i + 1] == ']') o[w++] = p[++i]; /* a leading ']' is literal */
        } else if (in_class && c == '[' && i + 1 < len && p[i + 1] == ':') { /* [:name:] */
            for (i++; i < len; i++) {
                o[w++] = p[i];
                if (p[i] == ']' && p[i - 1] == ':') break;
            }
        } else if (in_class && c == ']') {
            in_class = false;
        }
    }
    o[w] = '\0';
    *out_len = w;
    return o;
}

tg_regex *tg_regex_new(const char *pattern, size_t len, bool literal, const char *source, tg_error *err) {
    tg_regex *re = calloc(1, sizeof *re);
    if (!re) {
        tg_fail(err, "%s: out of memory compiling a tokenizer pattern", source);
        return NULL;
    }
    int code;
    PCRE2_SIZE at;
    /* PCRE2_LITERAL admits no UCP (a literal has no classes to widen) */
    const uint32_t opts = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
    size_t n = len;
    char *spelled = literal ? NULL : spell_out_spaces(pattern, len, &n);
    if (!literal && !spelled) {
        free(re);
        tg_fail(err, "%s: out of memory compiling a tokenizer pattern", source);
        return NULL;
    }
    re->code = pcre2_compile((PCRE2_SPTR)(literal ? pattern : spelled), n, opts, &code, &at, NULL);
    free(spelled);
    if (!re->code) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(code, msg, sizeof msg);
        (void)at; /* an offset into the rewritten pattern would mislead */
        tg_fail(err, "%s: tokenizer pattern '%.*s': %s", source, (int)(len > 200 ? 200 : len), pattern,
                (const char *)msg);
        free(re);
        return NULL;
    }
    /* JIT is an optimisation only: the interpreter gives the same matches when it is unavailable. */
    (void)pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE);
    return re;
}

void tg_regex_free(tg_regex *re) {
    if (!re) return;
    pcre2_code_free(re->code);
    free(re);
}

tg_pretok_ctx *tg_pretok_ctx_new(const char *source) {
    tg_pretok_ctx *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->source = source;
    c->md = pcre2_match_data_create(1, NULL);
    if (!c->md) {
        free(c);
        return NULL;
    }
    return c;
}

void tg_pretok_ctx_free(tg_pretok_ctx *c) {
    if (!c) return;
    pcre2_match_data_free(c->md);
    tg_pieces_free(&c->tmp);
    free(c->seg);
    free(c);
}

void tg_pieces_free(tg_pieces *ps) {
    if (!ps) return;
    free(ps->buf);
    free(ps->p);
    memset(ps, 0, sizeof *ps);
}

static bool grow(void **ptr, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return true;
    size_t n = *cap ? *cap : 16;
    while (n < need) {
        if (!tg_mul_size(n, 2, &n)) return false;
    }
    size_t bytes;
    if (!tg_mul_size(n, elem, &bytes)) return false;
    void *p = realloc(*ptr, bytes);
    if (!p) return false;
    *ptr = p;
    *cap = n;
    return true;
}

static bool buf_reserve(tg_pieces *ps, size_t extra) {
    size_t need;
    if (!tg_add_size(ps->len, extra, &need)) return false;
    return grow((void **)&ps->buf, &ps->cap, need, 1);
}

static bool piece_push(tg_pieces *ps, size_t off, size_t len, bool first) {
    if (len == 0) return true; /* empty pieces vanish, as in tokenizers */
    if (!grow((void **)&ps->p, &ps->cap_p, ps->n + 1, sizeof(tg_piece))) return false;
    ps->p[ps->n++] = (tg_piece){off, len, first};
    return true;
}

bool tg_pieces_set(tg_pieces *ps, const char *text, size_t len, bool first) {
    ps->len = 0;
    ps->n = 0;
    if (!buf_reserve(ps, len)) return false;
    if (len) memcpy(ps->buf, text, len);
    ps->len = len;
    return piece_push(ps, 0, len, first);
}

static void swap_pieces(tg_pieces *a, tg_pieces *b) {
    const tg_pieces t = *a;
    *a = *b;
    *b = t;
}

static bool seg_push(tg_pretok_ctx *c, size_t start, size_t end, bool match) {
    if (start == end) return true;
    if (!grow((void **)&c->seg, &c->cap_seg, c->n_seg + 1, sizeof(tg_seg))) return false;
    c->seg[c->n_seg++] = (tg_seg){start, end, match};
    return true;
}

/* Cuts s[0..n) into matches of re and the gaps between them (c->seg). Empty matches cut nothing. */
static bool segments_regex(const tg_regex *re, const char *s, size_t n, tg_pretok_ctx *c, tg_error *err) {
    c->n_seg = 0;
    size_t pos = 0, prev = 0;
    while (pos < n) {
        const int rc = pcre2_match(re->code, (PCRE2_SPTR)s, n, pos, 0, c->md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return tg_fail(err, "%s: a pre-tokenizer pattern failed on the text: %s", c->source, (const char *)msg);
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
        const size_t ms = ov[0], me = ov[1];
        if (me <= ms) { /* empty match: step one character on */
            pos = ms + tg_utf8_step((const uint8_t *)s + ms, n - ms);
            continue;
        }
        if (!seg_push(c, prev, ms, false) || !seg_push(c, ms, me, true)) return tg_fail(err, "out of memory");
        prev = pos = me;
    }
    if (!seg_push(c, prev, n, false)) return tg_fail(err, "out of memory");
    return true;
}

/* Cuts s[0..n) at every occurrence of the literal lit. */
static bool segments_literal(const char *lit, size_t lit_len, const char *s, size_t n, tg_pretok_ctx *c) {
    c->n_seg = 0;
    size_t prev = 0, pos = 0;
    while (lit_len && pos + lit_len <= n) {
        if (memcmp(s + pos, lit, lit_len) == 0) {
            if (!seg_push(c, prev, pos, false) || !seg_push(c, pos, pos + lit_len, true)) return false;
            pos += lit_len;
            prev = pos;
        } else {
            pos++;
        }
    }
    return seg_push(c, prev, n, false);
}

/* Turns c->seg (of the piece at buffer offset base) into pieces of out, per behaviour (tokenizers' semantics). */
static bool fold_segments(tg_pretok_ctx *c, tg_split_behavior beh, bool invert, size_t base, bool first,
                          tg_pieces *out) {
    tg_seg *sg = c->seg;
    const size_t ns = c->n_seg;
    if (invert) {
        for (size_t i = 0; i < ns; i++) sg[i].match = !sg[i].match;
    }
    /* Pieces are built in place in sg (start/end), then emitted. */
    size_t k = 0;
    switch (beh) {
    case TG_SPLIT_REMOVED:
        for (size_t i = 0; i < ns; i++) {
            if (!sg[i].match) sg[k++] = sg[i];
        }
        break;
    case TG_SPLIT_ISOLATED:
        k = ns;
        break;
    case TG_SPLIT_CONTIGUOUS:
        for (size_t i = 0; i < ns; i++) {
            if (k > 0 && sg[i].match && sg[k - 1].match) sg[k - 1].end = sg[i].end;
            else sg[k++] = sg[i];
        }
        break;
    case TG_SPLIT_MERGED_PREV: {
        bool prev_match = false;
        for (size_t i = 0; i < ns; i++) {
            const bool m = sg[i].match;
            if (m && !prev_match && k > 0) {
                sg[k - 1].end = sg[i].end;
            } else {
                sg[k] = sg[i];
                sg[k++].match = false;
            }
            prev_match = m;
        }
        break;
    }
    case TG_SPLIT_MERGED_NEXT: {
        /* built from the right, then read back in order */
        bool next_match = false;
        size_t w = ns;
        for (size_t i = ns; i-- > 0;) {
            const bool m = sg[i].match;
            if (m && !next_match && w < ns) {
                sg[w].start = sg[i].start;
            } else {
                sg[--w] = sg[i];
            }
            next_match = m;
        }
        memmove(sg, sg + w, (ns - w) * sizeof *sg);
        k = ns - w;
        break;
    }
    }
    for (size_t i = 0; i < k; i++) {
        if (!piece_push(out, base + sg[i].start, sg[i].end - sg[i].start, first && sg[i].start == 0)) return false;
    }
    return true;
}

/* Splits every piece of ps on re (or on the literal lit when re is NULL); the buffer is unchanged. */
static bool split_pass(tg_pieces *ps, const tg_regex *re, const char *lit, size_t lit_len, tg_split_behavior beh,
                       bool invert, tg_pretok_ctx *c, tg_error *err) {
    tg_pieces *out = &c->tmp;
    out->n = 0;
    for (size_t i = 0; i < ps->n; i++) {
        const tg_piece pc = ps->p[i];
        const char *s = ps->buf + pc.off;
        if (re) {
            if (!segments_regex(re, s, pc.len, c, err)) return false;
        } else if (!segments_literal(lit, lit_len, s, pc.len, c)) {
            return tg_fail(err, "out of memory");
        }
        if (!fold_segments(c, beh, invert, pc.off, pc.first, out)) return tg_fail(err, "out of memory");
    }
    /* swap piece lists only: the new pieces point into ps->buf */
    tg_piece *p = ps->p;
    const size_t cap = ps->cap_p;
    ps->p = out->p;
    ps->n = out->n;
    ps->cap_p = out->cap_p;
    out->p = p;
    out->cap_p = cap;
    out->n = 0;
    return true;
}

typedef enum { XF_PREFIX_SPACE, XF_METASPACE, XF_BYTE_MAP } tg_xform;

/* Whether the metaspace step puts a replacement in front of piece s[0..len) (len > 0). */
static bool metaspace_prefixed(const tg_pre_step *st, const char *s, size_t len, bool first) {
    const bool starts = len >= st->replacement_len && memcmp(s, st->replacement, st->replacement_len) == 0;
    const bool starts_space = s[0] == ' '; /* becomes the replacement anyway */
    const bool want = st->prepend == TG_PREPEND_ALWAYS || (st->prepend == TG_PREPEND_FIRST && first);
    return want && !starts && !starts_space;
}

/* The exact number of bytes transformation xf turns piece s[0..len) (len > 0) into, counted from the piece itself
 * (a metaspace replacement is 1..4 bytes, from tokenizer.json; a byte-level character 1 or 2). False on overflow. */
static bool transform_size(tg_xform xf, const tg_pre_step *st, const char *s, size_t len, bool first,
                           size_t *size) {
    switch (xf) {
    case XF_PREFIX_SPACE:
        return tg_add_size(len, s[0] != ' ', size);
    case XF_METASPACE: {
        size_t spaces = 0;
        for (size_t j = 0; j < len; j++) spaces += s[j] == ' ';
        size_t n = len - spaces, rep;
        if (!tg_add_size(spaces, metaspace_prefixed(st, s, len, first), &rep)) return false;
        if (!tg_mul_size(rep, st->replacement_len, &rep)) return false;
        return tg_add_size(n, rep, size);
    }
    case XF_BYTE_MAP: {
        size_t n = 0;
        for (size_t j = 0; j < len; j++) n += tg_byte_level_cp((uint8_t)s[j]) < 0x80 ? 1 : 2;
        *size = n;
        return true;
    }
    }
    return false;
}

/* Rewrites every piece into a fresh buffer, each sized exactly from the piece before it is written. max_bytes: the
 * most the rewritten text may take (the tokenizer's expansion ceiling); *over is set when it would take more. */
static bool transform_pass(tg_pieces *ps, tg_xform xf, const tg_pre_step *st, size_t max_bytes, tg_pretok_ctx *c,
                           bool *over, tg_error *err) {
    tg_pieces *out = &c->tmp;
    out->n = 0;
    out->len = 0;
    for (size_t i = 0; i < ps->n; i++) {
        const tg_piece pc = ps->p[i];
        const char *s = ps->buf + pc.off;
        size_t room, total;
        if (!transform_size(xf, st, s, pc.len, pc.first, &room) || !tg_add_size(out->len, room, &total) ||
            total > max_bytes) {
            *over = true;
            return false;
        }
        if (!buf_reserve(out, room)) return tg_fail(err, "out of memory");
        char *d = out->buf + out->len;
        size_t w = 0;
        switch (xf) {
        case XF_PREFIX_SPACE:
            if (s[0] != ' ') d[w++] = ' ';
            memcpy(d + w, s, pc.len);
            w += pc.len;
            break;
        case XF_METASPACE:
            if (metaspace_prefixed(st, s, pc.len, pc.first)) {
                memcpy(d, st->replacement, st->replacement_len);
                w += st->replacement_len;
            }
            for (size_t j = 0; j < pc.len; j++) {
                if (s[j] == ' ') {
                    memcpy(d + w, st->replacement, st->replacement_len);
                    w += st->replacement_len;
                } else {
                    d[w++] = s[j];
                }
            }
            break;
        case XF_BYTE_MAP:
            w = tg_byte_level_encode((const uint8_t *)s, pc.len, d);
            break;
        }
        if (w != room) /* transform_size and the writer above disagree: a bug, caught by the tests and fuzzers */
            return tg_fail(err, "tokenizer: internal error: a pre-tokenizer wrote %zu of %zu bytes", w, room);
        if (!piece_push(out, out->len, w, pc.first)) return tg_fail(err, "out of memory");
        out->len += w;
    }
    swap_pieces(ps, out);
    return true;
}

bool tg_pretok_run(const tg_pre_step *steps, size_t n, tg_pieces *ps, size_t max_bytes, tg_pretok_ctx *c,
                   bool *over, tg_error *err) {
    *over = false;
    for (size_t i = 0; i < n; i++) {
        const tg_pre_step *st = &steps[i];
        switch (st->kind) {
        case TG_PRE_SPLIT:
            if (!split_pass(ps, st->re, NULL, 0, st->behavior, st->invert, c, err)) return false;
            break;
        case TG_PRE_BYTE_LEVEL:
            if (st->add_prefix_space && !transform_pass(ps, XF_PREFIX_SPACE, st, max_bytes, c, over, err))
                return false;
            if (st->re && !split_pass(ps, st->re, NULL, 0, TG_SPLIT_ISOLATED, false, c, err)) return false;
            if (!transform_pass(ps, XF_BYTE_MAP, st, max_bytes, c, over, err)) return false;
            break;
        case TG_PRE_METASPACE:
            if (!transform_pass(ps, XF_METASPACE, st, max_bytes, c, over, err)) return false;
            if (st->split && !split_pass(ps, NULL, st->replacement, st->replacement_len, TG_SPLIT_MERGED_NEXT,
                                         false, c, err))
                return false;
            break;
        }
    }
    return true;
}
