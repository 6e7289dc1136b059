/* encode.c — text to ids: split on added tokens (leftmost, longest), then normalize, pre-tokenize and run the model
 * over each stretch of text in between. Added tokens marked "normalized" (Hugging Face) are found after normalizing,
 * in the normalized stretch, against their normalized content, as tokenizers does. */
#define _GNU_SOURCE /* memmem */
#define _DARWIN_C_SOURCE /* the same on macOS, whose headers hide them once _POSIX_C_SOURCE is set */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/byte_level.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/utf8.h"
#include "util/checked.h"
#include "util/error.h"

/* Working memory for one encode call. */
typedef struct {
    char *norm[2];       /* normalizer ping-pong buffers */
    size_t norm_cap[2];
    tg_pieces pieces;
    tg_pretok_ctx *pre;
    tg_word_scratch word;
    tg_idvec out;
    size_t max_bytes; /* the call's expansion ceiling, tg_tok_max_bytes(len): also the most ids it may give */
    size_t budget;    /* what is left of it after the sections encoded so far */
    size_t max_ids;   /* the caller's cap on ids (SIZE_MAX: none); more: stop, with *over */
    size_t reach[256]; /* the most bytes of a word one id starting with byte b stands for (bounded only) */
    bool bounded;     /* reach holds: every id stands for at least one byte and at most reach[] bytes */
    bool *over;       /* set when the ids pass max_ids */
} enc_ctx;

static void enc_free(enc_ctx *c) {
    free(c->norm[0]);
    free(c->norm[1]);
    tg_pieces_free(&c->pieces);
    tg_pretok_ctx_free(c->pre);
    tg_word_scratch_free(&c->word);
}

static bool norm_reserve(enc_ctx *c, int which, size_t need) {
    if (need <= c->norm_cap[which]) return true;
    size_t cap = c->norm_cap[which] ? c->norm_cap[which] : 256;
    while (cap < need) {
        if (!tg_mul_size(cap, 2, &cap)) return false;
    }
    char *p = realloc(c->norm[which], cap);
    if (!p) return false;
    c->norm[which] = p;
    c->norm_cap[which] = cap;
    return true;
}

/* The exact length of s[0..n) with every non-overlapping occurrence of a (leftmost first) replaced by b. */
static bool replaced_size(const char *s, size_t n, const tg_norm_step *st, size_t *size) {
    size_t hits = 0;
    for (const char *p = s, *end = s + n; (p = memmem(p, (size_t)(end - p), st->a, st->a_len)) != NULL;) {
        hits++;
        p += st->a_len;
    }
    size_t removed = hits * st->a_len, added; /* hits * a_len <= n */
    if (!tg_mul_size(hits, st->b_len, &added)) return false;
    return tg_add_size(n - removed, added, size);
}

/* Runs the normalizer steps over s[0..n); *out points at the result (s itself when there are no steps). Each step's
 * output is sized exactly before it is written; one longer than max_bytes is not written: false with *over set. */
static bool normalize(const tg_tokenizer *t, enc_ctx *c, const char *s, size_t n, size_t max_bytes, const char **out,
                      size_t *out_n, bool *over) {
    const char *cur = s;
    size_t cur_n = n;
    int w = 0;
    *over = false;
    for (size_t k = 0; k < t->n_norm; k++) {
        const tg_norm_step *st = &t->norm[k];
        size_t need;
        if (st->kind == TG_NORM_PREPEND) {
            if (cur_n == 0) continue;
            if (!tg_add_size(cur_n, st->a_len, &need) || need > max_bytes) return !(*over = true);
            if (!norm_reserve(c, w, need)) return false;
            memcpy(c->norm[w], st->a, st->a_len);
            memcpy(c->norm[w] + st->a_len, cur, cur_n);
            cur_n = need;
        } else {
            if (st->a_len == 0) continue;
            if (!replaced_size(cur, cur_n, st, &need) || need > max_bytes) return !(*over = true);
            if (!norm_reserve(c, w, need + 1)) return false;
            size_t o = 0;
            for (const char *p = cur, *end = cur + cur_n; p < end;) {
                const char *hit = memmem(p, (size_t)(end - p), st->a, st->a_len);
                const size_t keep = (size_t)((hit ? hit : end) - p);
                memcpy(c->norm[w] + o, p, keep);
                o += keep;
                if (!hit) break;
                memcpy(c->norm[w] + o, st->b, st->b_len);
                o += st->b_len;
                p = hit + st->a_len;
            }
            cur_n = o;
        }
        cur = c->norm[w];
        w ^= 1;
    }
    *out = cur;
    *out_n = cur_n;
    return true;
}

/* The expansion ceiling's wording, for the messages below: format "(limit: %dx the input + %d bytes)". */
#define LIMIT_FMT "(limit: %dx the input + %d bytes)"
#define LIMIT_ARGS TG_TOK_EXPAND_FACTOR, TG_TOK_EXPAND_SLACK

/* Stops the call: the text gives more than c->max_ids ids. */
static bool too_many(enc_ctx *c, const tg_tokenizer *t, tg_error *err) {
    *c->over = true;
    return tg_fail_code(err, TG_ERR_TOO_MANY_TOKENS, "%s: the text gives more than %zu tokens", t->source, c->max_ids);
}

/* Whether word w[0..len) gives more than `room` ids, told without encoding it: each id stands for a vocabulary text
 * (or an unknown character, a fallback byte) that starts where the one before ended and is at most
 * c->reach[its first byte] bytes long, so the fewest such steps that cover the word (farthest reach first) is a lower
 * bound on what BPE or SentencePiece gives. Counts at most room + 1 steps. False when c->reach is unknown. */
static bool word_over(const enc_ctx *c, const char *w, size_t len, size_t room) {
    if (!c->bounded) return false;
    size_t ids = 0, end = 0, far = 0;
    for (size_t p = 0; p < len && end < len; p++) {
        const size_t r = p + c->reach[(uint8_t)w[p]];
        if (r > far) far = r;
        if (p == end) {
            if (++ids > room) return true;
            end = far;
        }
    }
    return false;
}

/* Pre-tokenizes normalized text norm[0, n) and runs the model over its pieces. first: it starts at offset 0 of the
 * caller's text. Charged to c->budget. */
static bool encode_normalized(const tg_tokenizer *t, enc_ctx *c, const char *norm, size_t norm_n, bool first,
                              tg_error *err) {
    if (norm_n == 0) return true;
    bool over;
    if (!tg_pieces_set(&c->pieces, norm, norm_n, first)) return tg_fail(err, "out of memory");
    if (!tg_pretok_run(t->pre, t->n_pre, &c->pieces, c->budget, c->pre, &over, err)) {
        if (over)
            return tg_fail(err, "%s: pre-tokenizer expands the input beyond %zu bytes " LIMIT_FMT, t->source,
                           c->max_bytes, LIMIT_ARGS);
        return false;
    }
    c->budget -= c->pieces.len; /* <= budget: every pass checked its output against it */
    for (size_t i = 0; i < c->pieces.n; i++) {
        const tg_piece pc = c->pieces.p[i];
        const char *w = c->pieces.buf + pc.off;
        /* a word that cannot fit the cap is not split into symbols (28 bytes each, and a heap of pairs) */
        if (word_over(c, w, pc.len, c->max_ids - c->out.n)) return too_many(c, t, err);
        const bool ok = t->model == TG_TOKMODEL_BPE ? tg_bpe_word(t, w, pc.len, &c->word, &c->out)
                                                    : tg_spm_word(t, w, pc.len, &c->word, &c->out);
        if (!ok) return tg_fail(err, "out of memory encoding a %zu-byte word", pc.len);
        if (c->out.n > c->max_ids) return too_many(c, t, err);
    }
    if (c->out.n > c->max_bytes)
        return tg_fail(err, "%s: the input gives more than %zu tokens " LIMIT_FMT, t->source, c->max_bytes,
                       LIMIT_ARGS);
    return true;
}

static size_t space_before(const char *s, size_t n);
static size_t space_after(const char *s, size_t n);

/* Moves *pos to the next position before n where an added token starts (its match in *k); false at the end, or
 * with *ok false and err set when the scan runs out of memory. */
static bool next_added(tg_added_scan *scan, size_t *pos, size_t n, int32_t *k, bool *ok, tg_error *err) {
    for (; *pos < n; (*pos)++) {
        if (!tg_added_scan_at(scan, *pos, k)) {
            *ok = tg_fail(err, "out of memory matching added tokens");
            return false;
        }
        if (*k >= 0) return true;
    }
    return false;
}

/* The added tokens matched in the normalized text ("normalized": true, tg_tok_set_normalized) split norm[0, n);
 * the stretches between them are encoded as they are (normalized once, as a whole, as tokenizers does). */
static bool encode_split_normalized(const tg_tokenizer *t, enc_ctx *c, const char *norm, size_t n, bool first,
                                    tg_error *err) {
    tg_added_scan scan;
    tg_added_scan_init(&scan, t->norm_match, norm, n);
    size_t sec = 0, pos = 0;
    bool ok = true;
    int32_t k;
    while (ok && next_added(&scan, &pos, n, &k, &ok, err)) {
        const tg_added_token *a = &t->added[t->norm_index[k]];
        size_t end = pos;
        if (a->lstrip) {
            for (size_t s; (s = space_before(norm + sec, end - sec)) > 0;) end -= s;
        }
        ok = encode_normalized(t, c, norm + sec, end - sec, first && sec == 0, err);
        if (ok && !tg_idvec_push(&c->out, a->id)) ok = tg_fail(err, "out of memory");
        if (ok && c->out.n > c->max_ids) ok = too_many(c, t, err);
        pos += t->norm_len[k];
        if (a->rstrip) {
            for (size_t s; (s = space_after(norm + pos, n - pos)) > 0;) pos += s;
        }
        sec = pos;
    }
    tg_added_scan_free(&scan);
    return ok && encode_normalized(t, c, norm + sec, n - sec, first && sec == 0, err);
}

/* Encodes the text between two added tokens (found in the raw text). first: it starts at offset 0 of the caller's
 * text. The section's normalized and pre-tokenized text is charged to c->budget (what is left of the call's
 * expansion ceiling). */
static bool encode_section(const tg_tokenizer *t, enc_ctx *c, const char *s, size_t n, bool first, tg_error *err) {
    if (n == 0) return true;
    const char *norm;
    size_t norm_n;
    bool over;
    if (!normalize(t, c, s, n, c->budget, &norm, &norm_n, &over)) {
        if (over)
            return tg_fail(err, "%s: normalizer expands the input beyond %zu bytes " LIMIT_FMT, t->source,
                           c->max_bytes, LIMIT_ARGS);
        return tg_fail(err, "%s: out of memory normalizing %zu bytes", t->source, n);
    }
    return t->norm_match ? encode_split_normalized(t, c, norm, norm_n, first, err)
                         : encode_normalized(t, c, norm, norm_n, first, err);
}

/* Unicode's White_Space property (what tokenizers' lstrip / rstrip strip: Rust's char::is_whitespace). */
static bool is_white_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Bytes of the white-space character starting at s[0..n), or 0. */
static size_t space_after(const char *s, size_t n) {
    uint32_t cp;
    const size_t k = n ? tg_utf8_decode((const uint8_t *)s, n, &cp) : 0;
    return k && is_white_space(cp) ? k : 0;
}

/* Bytes of the white-space character ending just before s + n (looking back at most n bytes), or 0. */
static size_t space_before(const char *s, size_t n) {
    for (size_t k = 1; k <= 4 && k <= n; k++) {
        uint32_t cp;
        if (tg_utf8_decode((const uint8_t *)s + n - k, k, &cp) == k) return is_white_space(cp) ? k : 0;
    }
    return 0;
}

/* The call's expansion ceiling: TG_TOK_EXPAND_FACTOR x len + TG_TOK_EXPAND_SLACK bytes (SIZE_MAX if that
 * overflows). */
static size_t max_bytes_for(size_t len) {
    size_t n;
    if (!tg_mul_size(len, TG_TOK_EXPAND_FACTOR, &n) || !tg_add_size(n, TG_TOK_EXPAND_SLACK, &n)) return SIZE_MAX;
    return n;
}

/* Whether every id of a word stands for at least one of its bytes and at most a vocabulary text's (or an unknown
 * character's) bytes: no character is dropped (BPE and SentencePiece drop one that is not in the vocabulary, has no
 * fallback token for each of its bytes and no unknown token to become) and no run of unknowns is fused into one id
 * (Hugging Face's fuse_unk, which matters only where byte fallback does not cover every byte). */
static bool ids_bounded(const tg_tokenizer *t) {
    bool all_bytes = true; /* every byte has an id of its own to fall back on */
    for (int b = 0; all_bytes && b < 256; b++) {
        const char one = (char)b;
        all_bytes = t->byte_id[b] >= 0 || (t->model == TG_TOKMODEL_SPM && tg_strmap_get(&t->vocab, &one, 1) >= 0);
    }
    if (t->model == TG_TOKMODEL_SPM) return all_bytes || t->unk >= 0;
    if (t->byte_fallback && all_bytes) return true;
    if (t->unk >= 0) return !t->fuse_unk;
    /* byte-level words are made of the 256 byte-level characters only: each in the vocabulary, nothing drops */
    bool byte_level = false;
    for (size_t k = 0; k < t->n_pre; k++) {
        if (t->pre[k].kind == TG_PRE_BYTE_LEVEL) byte_level = true;
        if (t->pre[k].kind == TG_PRE_METASPACE) byte_level = false;
    }
    for (int b = 0; byte_level && b < 256; b++) {
        char ch[2];
        const uint8_t byte = (uint8_t)b;
        byte_level = tg_strmap_get(&t->vocab, ch, tg_byte_level_encode(&byte, 1, ch)) >= 0;
    }
    return byte_level;
}

/* Fills c->reach (the longest vocabulary text starting with each byte, at least 4: an unknown character, a fallback
 * byte) and sets c->bounded when ids_bounded holds (else no word is refused before it is encoded). */
static void set_reach(const tg_tokenizer *t, enc_ctx *c) {
    c->bounded = ids_bounded(t);
    for (int b = 0; b < 256; b++) c->reach[b] = 4;
    for (int32_t i = 0; c->bounded && i < t->n_vocab; i++) {
        size_t len;
        const char *s = tg_tok_text(t, i, &len);
        if (len > 0 && len > c->reach[(uint8_t)s[0]]) c->reach[(uint8_t)s[0]] = len;
    }
}

bool tg_tokenizer_encode(const tg_tokenizer *t, const char *text, size_t len, bool add_bos, int32_t **ids, size_t *n,
                         tg_error *err) {
    bool over;
    return tg_tokenizer_encode_max(t, text, len, add_bos, SIZE_MAX, ids, n, &over, err);
}

bool tg_tokenizer_encode_max(const tg_tokenizer *t, const char *text, size_t len, bool add_bos, size_t max_ids,
                             int32_t **ids, size_t *n, bool *over, tg_error *err) {
    *ids = NULL;
    *n = 0;
    *over = false;
    if (!t) return tg_fail(err, "tokenizer: no tokenizer");
    if (!text && len) return tg_fail(err, "%s: NULL text to encode", t->source);
    if (add_bos && t->bos < 0) return tg_fail(err, "%s: BOS requested but the vocabulary has no BOS token", t->source);
    enc_ctx c = {0};
    c.max_bytes = c.budget = max_bytes_for(len);
    c.max_ids = max_ids;
    if (max_ids != SIZE_MAX) set_reach(t, &c);
    c.over = over;
    c.pre = tg_pretok_ctx_new(t->source);
    bool ok = c.pre != NULL;
    if (!ok) tg_fail(err, "out of memory");
    if (ok && add_bos && !tg_idvec_push(&c.out, t->bos)) ok = tg_fail(err, "out of memory");
    if (ok && c.out.n > max_ids) ok = too_many(&c, t, err);

    tg_added_scan scan;
    tg_added_scan_init(&scan, t->added_match, text, len);
    size_t sec = 0, pos = 0;
    int32_t k;
    while (ok && t->added_match && next_added(&scan, &pos, len, &k, &ok, err)) {
        const tg_added_token *a = &t->added[t->raw_index ? t->raw_index[k] : (size_t)k];
        size_t end = pos;
        if (a->lstrip) {
            for (size_t s; (s = space_before(text + sec, end - sec)) > 0;) end -= s;
        }
        ok = encode_section(t, &c, text + sec, end - sec, sec == 0, err);
        if (ok && !tg_idvec_push(&c.out, a->id)) ok = tg_fail(err, "out of memory");
        if (ok && c.out.n > max_ids) ok = too_many(&c, t, err);
        pos += a->len;
        if (a->rstrip) {
            for (size_t s; (s = space_after(text + pos, len - pos)) > 0;) pos += s;
        }
        sec = pos;
    }
    tg_added_scan_free(&scan);
    if (ok) ok = encode_section(t, &c, text + sec, len - sec, sec == 0, err);
    enc_free(&c);
    if (!ok) {
        free(c.out.ids);
        return false;
    }
    if (!c.out.ids) { /* empty result: still hand back a freeable pointer */
        c.out.ids = malloc(sizeof(int32_t));
        if (!c.out.ids) return tg_fail(err, "out of memory");
    }
    *ids = c.out.ids;
    *n = c.out.n;
    return true;
}
