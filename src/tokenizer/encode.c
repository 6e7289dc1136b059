/* encode.c — text to ids: split on added tokens (leftmost, longest), then normalize, pre-tokenize and run the model
 * over each stretch of text in between. */
#include <stdlib.h>
#include <string.h>

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

/* Runs the normalizer steps over s[0..n); *out points at the result (s itself when there are no steps). */
static bool normalize(const tg_tokenizer *t, enc_ctx *c, const char *s, size_t n, const char **out, size_t *out_n) {
    const char *cur = s;
    size_t cur_n = n;
    int w = 0;
    for (size_t k = 0; k < t->n_norm; k++) {
        const tg_norm_step *st = &t->norm[k];
        if (st->kind == TG_NORM_PREPEND) {
            if (cur_n == 0) continue;
            size_t need;
            if (!tg_add_size(cur_n, st->a_len, &need) || !norm_reserve(c, w, need)) return false;
            memcpy(c->norm[w], st->a, st->a_len);
            memcpy(c->norm[w] + st->a_len, cur, cur_n);
            cur_n = need;
        } else {
            if (st->a_len == 0) continue;
            /* worst case: every byte starts a match */
            size_t need, grow = st->b_len > st->a_len ? st->b_len : st->a_len;
            if (!tg_mul_size(cur_n, grow, &need) || !tg_add_size(need, 1, &need) || !norm_reserve(c, w, need))
                return false;
            size_t o = 0;
            for (size_t i = 0; i < cur_n;) {
                if (i + st->a_len <= cur_n && memcmp(cur + i, st->a, st->a_len) == 0) {
                    memcpy(c->norm[w] + o, st->b, st->b_len);
                    o += st->b_len;
                    i += st->a_len;
                } else {
                    c->norm[w][o++] = cur[i++];
                }
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

/* Encodes the text between two added tokens. first: it starts at offset 0 of the caller's text. */
static bool encode_section(const tg_tokenizer *t, enc_ctx *c, const char *s, size_t n, bool first, tg_error *err) {
    if (n == 0) return true;
    const char *norm;
    size_t norm_n;
    if (!normalize(t, c, s, n, &norm, &norm_n)) return tg_fail(err, "out of memory normalizing %zu bytes", n);
    if (!tg_pieces_set(&c->pieces, norm, norm_n, first)) return tg_fail(err, "out of memory");
    if (!tg_pretok_run(t->pre, t->n_pre, &c->pieces, c->pre, err)) return false;
    for (size_t i = 0; i < c->pieces.n; i++) {
        const tg_piece pc = c->pieces.p[i];
        const char *w = c->pieces.buf + pc.off;
        const bool ok = t->model == TG_TOKMODEL_BPE ? tg_bpe_word(t, w, pc.len, &c->word, &c->out)
                                                    : tg_spm_word(t, w, pc.len, &c->word, &c->out);
        if (!ok) return tg_fail(err, "out of memory encoding a %zu-byte word", pc.len);
    }
    return true;
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

/* The longest added token at text[pos..len), or NULL. */
static const tg_added_token *added_at(const tg_tokenizer *t, const char *text, size_t pos, size_t len) {
    const uint8_t b = (uint8_t)text[pos];
    for (size_t k = t->added_start[b]; k < t->added_start[b + 1]; k++) {
        const tg_added_token *a = &t->added[k];
        if (a->len <= len - pos && memcmp(text + pos, t->text + t->off[a->id], a->len) == 0) return a;
    }
    return NULL;
}

bool tg_tokenizer_encode(const tg_tokenizer *t, const char *text, size_t len, bool add_bos, int32_t **ids, size_t *n,
                         tg_error *err) {
    *ids = NULL;
    *n = 0;
    if (!t) return tg_fail(err, "tokenizer: no tokenizer");
    if (!text && len) return tg_fail(err, "tokenizer: NULL text");
    if (add_bos && t->bos < 0) return tg_fail(err, "tokenizer: BOS requested but the vocabulary has no BOS token");
    enc_ctx c = {0};
    c.pre = tg_pretok_ctx_new();
    bool ok = c.pre != NULL;
    if (!ok) tg_fail(err, "out of memory");
    if (ok && add_bos && !tg_idvec_push(&c.out, t->bos)) ok = tg_fail(err, "out of memory");

    size_t sec = 0, pos = 0;
    while (ok && pos < len) {
        const tg_added_token *a = t->n_added ? added_at(t, text, pos, len) : NULL;
        if (!a) {
            pos++;
            continue;
        }
        size_t end = pos;
        if (a->lstrip) {
            for (size_t k; (k = space_before(text + sec, end - sec)) > 0;) end -= k;
        }
        ok = encode_section(t, &c, text + sec, end - sec, sec == 0, err);
        if (ok && !tg_idvec_push(&c.out, a->id)) ok = tg_fail(err, "out of memory");
        pos += a->len;
        if (a->rstrip) {
            for (size_t k; (k = space_after(text + pos, len - pos)) > 0;) pos += k;
        }
        sec = pos;
    }
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
