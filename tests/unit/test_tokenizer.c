/* test_tokenizer.c — unit tests of the tokenizer on hand-made vocabularies: UTF-8 and the byte-level map, the
 * split behaviours and metaspace pre-tokenizer, tokenizer.json loading (byte-level BPE with both merge formats,
 * Llama-2 legacy and Metaspace SentencePiece-style BPE, byte fallback, fuse_unk, ignore_merges, added tokens with
 * lstrip/rstrip, longest match, BOS/EOS from the config files, error messages), GGUF loading from synthetic files,
 * decoding, invalid UTF-8 round trips and the streaming detokeniser. Expected ids are worked out by hand in the
 * comments. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gguf_builder.h"
#include "model/model.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

#define MS "\xE2\x96\x81" /* U+2581, SentencePiece's space */

/* ---- helpers ---- */

static void write_json(const char *dir, const char *name, json_t *j) {
    char *path = gguf_builder_path(dir, name);
    assert_int_equal(json_dump_file(j, path, JSON_ENSURE_ASCII), 0);
    free(path);
    json_decref(j);
}

static void write_text(const char *dir, const char *name, const char *text) {
    char *path = gguf_builder_path(dir, name);
    assert_true(gguf_builder_write_bytes(path, text, strlen(text)));
    free(path);
}

static int32_t id_of(const tg_tokenizer *t, const char *s) {
    const int32_t id = tg_strmap_get(&t->vocab, s, strlen(s));
    assert_true(id >= 0);
    return id;
}

/* Encodes s and checks the ids against want[0..n). */
static void expect_ids(const tg_tokenizer *t, const char *s, size_t len, bool bos, const int32_t *want, size_t n) {
    int32_t *ids = NULL;
    size_t got = 0;
    tg_error err = {0};
    assert_true(tg_tokenizer_encode(t, s, len, bos, &ids, &got, &err));
    if (got != n || (n && memcmp(ids, want, n * sizeof *ids) != 0)) {
        print_error("encode '%.*s': want", (int)len, s);
        for (size_t i = 0; i < n; i++) print_error(" %d", (int)want[i]);
        print_error(", got");
        for (size_t i = 0; i < got; i++) print_error(" %d", (int)ids[i]);
        print_error("\n");
        fail();
    }
    free(ids);
}
#define EXPECT(t, s, bos, ...)                                                                                         \
    do {                                                                                                               \
        const int32_t want_[] = {__VA_ARGS__};                                                                         \
        expect_ids((t), (s), strlen(s), (bos), want_, sizeof want_ / sizeof want_[0]);                                 \
    } while (0)

/* Decodes ids[0..n) as one text into a malloc'd string of *len bytes. */
static char *decode_all(const tg_tokenizer *t, const int32_t *ids, size_t n, size_t *len) {
    const size_t total = tg_tokenizer_decode(t, ids, n, NULL, 0);
    char *buf = malloc(total + 1);
    assert_int_equal(tg_tokenizer_decode(t, ids, n, buf, total), total);
    buf[total] = '\0';
    *len = total;
    return buf;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint8_t rnd_byte(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint8_t)(rng >> 32);
}

/* ---- UTF-8 and the byte-level map ---- */

static void test_utf8(void **state) {
    (void)state;
    uint32_t cp;
    assert_int_equal(tg_utf8_decode((const uint8_t *)"A", 1, &cp), 1);
    assert_int_equal(cp, 'A');
    assert_int_equal(tg_utf8_decode((const uint8_t *)"\xC3\xA9", 2, &cp), 2);
    assert_int_equal(cp, 0xE9);
    assert_int_equal(tg_utf8_decode((const uint8_t *)"\xE2\x96\x81", 3, &cp), 3);
    assert_int_equal(cp, 0x2581);
    assert_int_equal(tg_utf8_decode((const uint8_t *)"\xF0\x9F\xA6\x99", 4, &cp), 4);
    assert_int_equal(cp, 0x1F999);
    /* overlong, surrogate, beyond U+10FFFF, stray continuation, bad lead, truncated */
    assert_int_equal(tg_utf8_decode((const uint8_t *)"\xC0\x80", 2, &cp), 0);
    assert_int_equal(tg_utf8_decode((const uint8_t *)"\xE0\x80\x80", 3, &cp), 0);
    assert_int_equal(tg_utf8_decode((const uint8_t *)"\xED\xA0\x80", 3, &cp), 0);
    assert_int_equal(tg_utf8_decode((const uint8_t *)"\xF4\x90\x80\x80", 4, &cp), 0);
    assert_int_equal(tg_utf8_decode((const uint8_t *)"\x80", 1, &cp), 0);
    assert_int_equal(tg_utf8_decode((const uint8_t *)"\xFF", 1, &cp), 0);
    assert_int_equal(tg_utf8_decode((const uint8_t *)"\xE2\x96", 2, &cp), 0);
    size_t len;
    assert_int_equal(tg_utf8_classify((const uint8_t *)"\xF0\x9F\xA6", 3, &len), TG_UTF8_INCOMPLETE);
    assert_int_equal(tg_utf8_classify((const uint8_t *)"\xF0\x9F\x41", 3, &len), TG_UTF8_INVALID);
    assert_int_equal(len, 2); /* F0 9F is the maximal invalid subpart */
    char out[4];
    for (uint32_t c = 0; c < 0x110000; c += 0x61) {
        const size_t n = tg_utf8_encode(c, out);
        if (c >= 0xD800 && c <= 0xDFFF) {
            assert_int_equal(n, 0);
            continue;
        }
        assert_int_equal(tg_utf8_decode((const uint8_t *)out, n, &cp), n);
        assert_int_equal(cp, c);
    }
}

static void test_byte_level_map(void **state) {
    (void)state;
    bool seen[0x200] = {false};
    for (int b = 0; b < 256; b++) {
        const uint32_t cp = tg_byte_level_cp((uint8_t)b);
        assert_true(cp < 0x144);
        assert_false(seen[cp]); /* a bijection */
        seen[cp] = true;
        uint8_t back = 0;
        assert_true(tg_byte_level_byte(cp, &back));
        assert_int_equal(back, b);
        if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) assert_int_equal(cp, (uint32_t)b);
    }
    /* GPT-2's well-known images: space -> U+0120 'Ġ', newline -> U+010A 'Ċ', 0xAD -> U+0143 */
    assert_int_equal(tg_byte_level_cp(' '), 0x120);
    assert_int_equal(tg_byte_level_cp('\n'), 0x10A);
    assert_int_equal(tg_byte_level_cp(0xAD), 0x143);
    uint8_t b;
    assert_false(tg_byte_level_byte(' ', &b));
    assert_false(tg_byte_level_byte(0x144, &b));
}

/* ---- pre-tokenizer steps ---- */

static void expect_pieces(const tg_pieces *ps, const char *const *want, size_t n) {
    if (ps->n != n) print_error("got %zu pieces, want %zu\n", ps->n, n);
    assert_int_equal(ps->n, n);
    for (size_t i = 0; i < n; i++) {
        const tg_piece p = ps->p[i];
        if (p.len != strlen(want[i]) || memcmp(ps->buf + p.off, want[i], p.len) != 0)
            print_error("piece %zu: '%.*s', want '%s'\n", i, (int)p.len, ps->buf + p.off, want[i]);
        assert_int_equal(p.len, strlen(want[i]));
        assert_memory_equal(ps->buf + p.off, want[i], p.len);
    }
}

static void run_split(const char *text, const char *pattern, bool literal, tg_split_behavior beh, bool invert,
                      const char *const *want, size_t n) {
    tg_error err = {0};
    tg_pre_step st = {.kind = TG_PRE_SPLIT, .behavior = beh, .invert = invert};
    st.re = tg_regex_new(pattern, strlen(pattern), literal, "test", &err);
    assert_non_null(st.re);
    tg_pieces ps = {0};
    tg_pretok_ctx *c = tg_pretok_ctx_new("test");
    bool over;
    assert_true(tg_pieces_set(&ps, text, strlen(text), true));
    assert_true(tg_pretok_run(&st, 1, &ps, SIZE_MAX, c, &over, &err));
    expect_pieces(&ps, want, n);
    tg_pieces_free(&ps);
    tg_pretok_ctx_free(c);
    tg_regex_free(st.re);
}

/* tokenizers' documented example: "the-final--countdown" split on '-'. */
static void test_split_behaviors(void **state) {
    (void)state;
    const char *text = "the-final--countdown";
    const char *removed[] = {"the", "final", "countdown"};
    const char *isolated[] = {"the", "-", "final", "-", "-", "countdown"};
    const char *prev[] = {"the-", "final-", "-", "countdown"};
    const char *next[] = {"the", "-final", "-", "-countdown"};
    const char *contig[] = {"the", "-", "final", "--", "countdown"};
    run_split(text, "-", true, TG_SPLIT_REMOVED, false, removed, 3);
    run_split(text, "-", true, TG_SPLIT_ISOLATED, false, isolated, 6);
    run_split(text, "-", true, TG_SPLIT_MERGED_PREV, false, prev, 4);
    run_split(text, "-", true, TG_SPLIT_MERGED_NEXT, false, next, 4);
    run_split(text, "-", true, TG_SPLIT_CONTIGUOUS, false, contig, 5);
    /* invert: the pattern marks the words kept */
    const char *words[] = {"the", "final", "countdown"};
    run_split(text, "[a-z]+", false, TG_SPLIT_REMOVED, true, words, 3);
    /* GPT-2 regex: contractions, letters, digits, symbols, whitespace runs that leave one space for the next word */
    const char *gpt2[] = {"Hello", ",", " y", "'", "all", "'ll", "!", "  ", " 42", "  "};
    run_split("Hello, y'all'll!   42  ", TG_REGEX_GPT2, false, TG_SPLIT_ISOLATED, false, gpt2, 10);
    /* invalid UTF-8 is never matched: the stray bytes stand alone between the matches */
    const char *inval[] = {"ab", "\xFF", "cd", " ", "\xC3", "e"};
    run_split("ab\xFF" "cd \xC3" "e", TG_REGEX_GPT2, false, TG_SPLIT_ISOLATED, false, inval, 6);
}

/* The added-token matcher against a brute-force scan: random tokens over a 3-letter alphabet (so that they overlap,
 * nest and repeat) and random texts; at every position the longest token starting there, the lowest index among
 * equal texts. Small windows are not reachable from here, so texts longer than the 64 KiB window cover the seam. */
static void test_added_matcher(void **state) {
    (void)state;
    uint32_t lcg = 12345;
#define NEXT() (lcg = lcg * 1664525u + 1013904223u, lcg >> 16)
    for (int round = 0; round < 40; round++) {
        enum { MAX_TOKS = 24 };
        char tok[MAX_TOKS][12];
        const char *texts[MAX_TOKS];
        size_t lens[MAX_TOKS];
        const size_t n = 1 + NEXT() % MAX_TOKS;
        for (size_t i = 0; i < n; i++) {
            lens[i] = 1 + NEXT() % (round < 20 ? 3 : 11);
            for (size_t j = 0; j < lens[i]; j++) tok[i][j] = (char)('a' + NEXT() % 3);
            texts[i] = tok[i];
        }
        tg_added_matcher *m = tg_added_matcher_new(texts, lens, n);
        assert_non_null(m);
        const size_t len = round == 39 ? 70000 + NEXT() % 1000 : 1 + NEXT() % 300;
        char *text = malloc(len);
        assert_non_null(text);
        for (size_t j = 0; j < len; j++) text[j] = (char)('a' + NEXT() % (round % 2 ? 3 : 4)); /* 'd' matches none */
        tg_added_scan scan;
        tg_added_scan_init(&scan, m, text, len);
        for (size_t pos = 0; pos < len; pos += 1 + NEXT() % 3) {
            int32_t want = -1;
            for (size_t i = 0; i < n; i++) {
                if (lens[i] <= len - pos && memcmp(text + pos, texts[i], lens[i]) == 0 &&
                    (want < 0 || lens[i] > lens[want]))
                    want = (int32_t)i;
            }
            int32_t got;
            assert_true(tg_added_scan_at(&scan, pos, &got));
            if (got != want) print_error("round %d pos %zu: got %d, want %d\n", round, pos, got, want);
            assert_int_equal(got, want);
        }
        tg_added_scan_free(&scan);
        free(text);
        tg_added_matcher_free(m);
    }
#undef NEXT
}

static void test_metaspace_step(void **state) {
    (void)state;
    tg_error err = {0};
    tg_pre_step st = {.kind = TG_PRE_METASPACE, .replacement = MS, .replacement_len = 3,
                      .prepend = TG_PREPEND_ALWAYS, .split = true};
    tg_pieces ps = {0};
    tg_pretok_ctx *c = tg_pretok_ctx_new("test");
    bool over;
    /* tokenizers' own test: "Hey   friend!" */
    const char *want[] = {MS "Hey", MS, MS, MS "friend!"};
    assert_true(tg_pieces_set(&ps, "Hey   friend!", 13, true));
    assert_true(tg_pretok_run(&st, 1, &ps, SIZE_MAX, c, &over, &err));
    expect_pieces(&ps, want, 4);
    /* prepend_scheme "first": only a piece at offset 0 of the input gets the prefix */
    st.prepend = TG_PREPEND_FIRST;
    st.split = false;
    const char *first[] = {MS "a" MS "b"};
    assert_true(tg_pieces_set(&ps, "a b", 3, true));
    assert_true(tg_pretok_run(&st, 1, &ps, SIZE_MAX, c, &over, &err));
    expect_pieces(&ps, first, 1);
    const char *later[] = {"a" MS "b"};
    assert_true(tg_pieces_set(&ps, "a b", 3, false));
    assert_true(tg_pretok_run(&st, 1, &ps, SIZE_MAX, c, &over, &err));
    expect_pieces(&ps, later, 1);
    /* a text already starting with a space is not prefixed twice */
    const char *spaced[] = {MS "x"};
    assert_true(tg_pieces_set(&ps, " x", 2, true));
    assert_true(tg_pretok_run(&st, 1, &ps, SIZE_MAX, c, &over, &err));
    expect_pieces(&ps, spaced, 1);
    /* a 4-byte replacement over a text of spaces: every space takes 4 bytes (issue 11: the buffer was sized for 3) */
    static const char EMOJI[] = "\xF0\x9F\x98\x80";
    tg_pre_step wide = {.kind = TG_PRE_METASPACE, .replacement = "\xF0\x9F\x98\x80", .replacement_len = 4,
                        .prepend = TG_PREPEND_ALWAYS};
    char spaces[64], want_wide[4 * 64 + 8];
    memset(spaces, ' ', sizeof spaces);
    size_t w = 0;
    for (size_t i = 0; i < sizeof spaces; i++, w += 4) memcpy(want_wide + w, EMOJI, 4);
    want_wide[w] = '\0';
    const char *wide_pieces[] = {want_wide};
    assert_true(tg_pieces_set(&ps, spaces, sizeof spaces, true));
    assert_true(tg_pretok_run(&wide, 1, &ps, SIZE_MAX, c, &over, &err));
    expect_pieces(&ps, wide_pieces, 1);
    /* the same past a ceiling: refused before anything is written */
    assert_true(tg_pieces_set(&ps, spaces, sizeof spaces, true));
    assert_false(tg_pretok_run(&wide, 1, &ps, 4 * sizeof spaces - 1, c, &over, &err));
    assert_true(over);
    tg_pieces_free(&ps);
    tg_pretok_ctx_free(c);
}

/* ---- a byte-level BPE tokenizer.json ---- */

/* ids: 0 <|endoftext|>, 1 <|im_start|>, 2 <|im_end|> (special), 3..258 the byte symbols in byte order, then the
 * merge results below, then user tokens "<x>" and "<x>y" (not special). */
static const char *const BL_MERGES[][2] = {
    {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {"\xC4\xA0", "w"}, {"o", "r"}, {"\xC4\xA0w", "or"},
    {"l", "d"}, {"\xC4\xA0wor", "ld"}, {"\xC4\xA0", "\xC4\xA0"},
};
#define BL_N_MERGES (sizeof BL_MERGES / sizeof BL_MERGES[0])
#define BL_BYTE(b) (3 + (b))

static char *make_bytelevel_dir(bool pair_merges, bool ignore_merges, const char *pre_json) {
    char *dir = gguf_builder_tmpdir();
    assert_non_null(dir);
    json_t *vocab = json_object();
    json_object_set_new(vocab, "<|endoftext|>", json_integer(0));
    json_object_set_new(vocab, "<|im_start|>", json_integer(1));
    json_object_set_new(vocab, "<|im_end|>", json_integer(2));
    for (int b = 0; b < 256; b++) {
        char s[5] = {0};
        tg_utf8_encode(tg_byte_level_cp((uint8_t)b), s);
        json_object_set_new(vocab, s, json_integer(BL_BYTE(b)));
    }
    json_t *merges = json_array();
    int next = 259;
    for (size_t i = 0; i < BL_N_MERGES; i++) {
        char cat[32];
        snprintf(cat, sizeof cat, "%s%s", BL_MERGES[i][0], BL_MERGES[i][1]);
        json_object_set_new(vocab, cat, json_integer(next++));
        if (pair_merges) {
            json_array_append_new(merges, json_pack("[ss]", BL_MERGES[i][0], BL_MERGES[i][1]));
        } else {
            char m[32];
            snprintf(m, sizeof m, "%s %s", BL_MERGES[i][0], BL_MERGES[i][1]);
            json_array_append_new(merges, json_string(m));
        }
    }
    json_t *added = json_pack("[{s:i,s:s,s:b,s:b,s:b}, {s:i,s:s,s:b,s:b,s:b}, {s:i,s:s,s:b,s:b,s:b},"
                              " {s:i,s:s,s:b,s:b,s:b}, {s:i,s:s,s:b,s:b,s:b}]",
                              "id", 0, "content", "<|endoftext|>", "special", 1, "lstrip", 0, "rstrip", 0,
                              "id", 1, "content", "<|im_start|>", "special", 1, "lstrip", 0, "rstrip", 0,
                              "id", 2, "content", "<|im_end|>", "special", 1, "lstrip", 1, "rstrip", 1,
                              "id", next, "content", "<x>", "special", 0, "lstrip", 0, "rstrip", 0,
                              "id", next + 1, "content", "<x>y", "special", 0, "lstrip", 0, "rstrip", 0);
    json_error_t je;
    json_t *pre = json_loads(pre_json, 0, &je);
    assert_non_null(pre);
    json_t *root = json_pack("{s:o, s:n, s:o, s:{s:s}, s:{s:s}}", "added_tokens", added, "normalizer",
                             "pre_tokenizer", pre, "post_processor", "type", "ByteLevel", "decoder", "type",
                             "ByteLevel");
    json_object_set_new(root, "model", json_pack("{s:s, s:n, s:b, s:b, s:o, s:o}", "type", "BPE", "unk_token",
                                                 "fuse_unk", 0, "ignore_merges", ignore_merges, "vocab", vocab,
                                                 "merges", merges));
    write_json(dir, "tokenizer.json", root);
    write_text(dir, "tokenizer_config.json",
               "{\"bos_token\": \"<|endoftext|>\", \"eos_token\": {\"content\": \"<|im_end|>\"}, "
               "\"add_bos_token\": false}");
    return dir;
}

static const char *BL_PRE = "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true}";

static void test_hf_bytelevel(void **state) {
    (void)state;
    tg_error err = {0};
    for (int fmt = 0; fmt < 2; fmt++) { /* "a b" merges, then ["a", "b"] merges */
        char *dir = make_bytelevel_dir(fmt == 1, false, BL_PRE);
        tg_tokenizer *t = tg_tokenizer_load_hf(dir, &err);
        if (!t) print_error("%s\n", err.msg);
        assert_non_null(t);
        assert_int_equal(tg_tokenizer_vocab_size(t), 259 + (int)BL_N_MERGES + 2);
        assert_int_equal(tg_tokenizer_bos(t), 0);
        assert_int_equal(tg_tokenizer_eos(t), 2);
        assert_false(tg_tokenizer_adds_bos(t));
        const int32_t hello = id_of(t, "hello"), gworld = id_of(t, "\xC4\xA0world"), ll = id_of(t, "ll");
        EXPECT(t, "hello world", false, hello, gworld);
        /* equal ranks: the leftmost pair merges first, "lll" -> "ll" "l" */
        EXPECT(t, "lll", false, ll, BL_BYTE('l'));
        /* GPT-2 split: "  world" -> " " + " world"; then "ĠĠ" would merge but the regex keeps them apart */
        EXPECT(t, "  world", false, BL_BYTE(' '), gworld);
        EXPECT(t, "   ", false, id_of(t, "\xC4\xA0\xC4\xA0"), BL_BYTE(' '));
        expect_ids(t, "", 0, false, NULL, 0);
        EXPECT(t, "hello", true, 0, hello);
        tg_tokenizer_free(t);
        gguf_builder_rmdir(dir);
        free(dir);
    }
}

static void test_hf_added_tokens(void **state) {
    (void)state;
    tg_error err = {0};
    char *dir = make_bytelevel_dir(false, false, BL_PRE);
    tg_tokenizer *t = tg_tokenizer_load_hf(dir, &err);
    assert_non_null(t);
    const int32_t hello = id_of(t, "hello"), x = id_of(t, "<x>"), xy = id_of(t, "<x>y");
    /* specials are matched whole, also inside a word */
    EXPECT(t, "<|im_start|>hello<|endoftext|>", false, 1, hello, 0);
    EXPECT(t, "he<|im_start|>llo", false, id_of(t, "he"), 1, id_of(t, "ll"), BL_BYTE('o'));
    /* <|im_end|> has lstrip and rstrip: it swallows the spaces around it */
    EXPECT(t, "hello  <|im_end|>  hello", false, hello, 2, hello);
    /* <|im_start|> has neither: the spaces stay text */
    EXPECT(t, "hello <|im_start|> hello", false, hello, BL_BYTE(' '), 1, BL_BYTE(' '), id_of(t, "hello"));
    /* longest match wins: "<x>y" over "<x>" */
    EXPECT(t, "<x>yz", false, xy, BL_BYTE('z'));
    EXPECT(t, "<x>z<x>", false, x, BL_BYTE('z'), x);
    /* an incomplete special is plain text */
    EXPECT(t, "<|im_", false, BL_BYTE('<'), BL_BYTE('|'), BL_BYTE('i'), BL_BYTE('m'), BL_BYTE('_'));
    /* decoding: specials vanish, user tokens keep their text */
    const int32_t ids[] = {1, hello, x, 2};
    size_t len;
    char *s = decode_all(t, ids, 4, &len);
    assert_string_equal(s, "hello<x>");
    free(s);
    tg_tokenizer_free(t);
    gguf_builder_rmdir(dir);
    free(dir);
}

static void test_hf_ignore_merges_and_digits(void **state) {
    (void)state;
    tg_error err = {0};
    /* ignore_merges: a pre-token that is itself in the vocab is taken whole, even without a merge path to it
     * ("hell" + "o" exists, but "ĠĠ" is reachable only through its own merge; use "hello" which is in the vocab) */
    char *dir = make_bytelevel_dir(false, true, BL_PRE);
    tg_tokenizer *t = tg_tokenizer_load_hf(dir, &err);
    assert_non_null(t);
    EXPECT(t, "hello", false, id_of(t, "hello"));
    tg_tokenizer_free(t);
    gguf_builder_rmdir(dir);
    free(dir);
    /* SmolLM2's pre-tokenizer: Digits(individual) then ByteLevel */
    dir = make_bytelevel_dir(false, false,
                             "{\"type\": \"Sequence\", \"pretokenizers\": [{\"type\": \"Digits\", "
                             "\"individual_digits\": true}, {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
                             "\"trim_offsets\": true, \"use_regex\": true}]}");
    t = tg_tokenizer_load_hf(dir, &err);
    if (!t) print_error("%s\n", err.msg);
    assert_non_null(t);
    assert_int_equal(t->n_pre, 2);
    tg_pieces ps = {0};
    tg_pretok_ctx *c = tg_pretok_ctx_new("test");
    bool over;
    assert_true(tg_pieces_set(&ps, "ab 123", 6, true));
    assert_true(tg_pretok_run(t->pre, t->n_pre, &ps, SIZE_MAX, c, &over, &err));
    const char *want[] = {"ab", "\xC4\xA0", "1", "2", "3"};
    expect_pieces(&ps, want, 5);
    tg_pieces_free(&ps);
    tg_pretok_ctx_free(c);
    tg_tokenizer_free(t);
    gguf_builder_rmdir(dir);
    free(dir);
}

/* ---- SentencePiece-style BPE tokenizer.json (Llama-2 legacy and Mistral Metaspace layouts) ---- */

/* ids: 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, then the pieces below in order. */
static const char *const SP_PIECES[] = {MS, "h", "e", "l", "o", "w", "r", "d", "x"};
static const char *const SP_MERGES[][2] = {
    {MS, "h"}, {"e", "l"}, {"l", "o"}, {MS "h", "el"}, {MS "hel", "lo"}, {MS, "w"}, {"o", "r"}, {MS "w", "or"},
    {"l", "d"}, {MS "wor", "ld"},
};
#define SP_N_PIECES (sizeof SP_PIECES / sizeof SP_PIECES[0])
#define SP_N_MERGES (sizeof SP_MERGES / sizeof SP_MERGES[0])
#define SP_BYTE(b) (3 + (b))

typedef enum { SP_LEGACY, SP_METASPACE } sp_layout;

static char *make_spm_dir(sp_layout layout, bool byte_fallback, bool with_config) {
    char *dir = gguf_builder_tmpdir();
    assert_non_null(dir);
    json_t *vocab = json_object();
    json_object_set_new(vocab, "<unk>", json_integer(0));
    json_object_set_new(vocab, "<s>", json_integer(1));
    json_object_set_new(vocab, "</s>", json_integer(2));
    for (int b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        json_object_set_new(vocab, s, json_integer(3 + b));
    }
    int next = 259;
    for (size_t i = 0; i < SP_N_PIECES; i++) json_object_set_new(vocab, SP_PIECES[i], json_integer(next++));
    json_t *merges = json_array();
    for (size_t i = 0; i < SP_N_MERGES; i++) {
        char cat[32], m[32];
        snprintf(cat, sizeof cat, "%s%s", SP_MERGES[i][0], SP_MERGES[i][1]);
        json_object_set_new(vocab, cat, json_integer(next++));
        snprintf(m, sizeof m, "%s %s", SP_MERGES[i][0], SP_MERGES[i][1]);
        json_array_append_new(merges, json_string(m));
    }
    json_t *root = json_object();
    json_object_set_new(root, "added_tokens",
                        json_pack("[{s:i,s:s,s:b}, {s:i,s:s,s:b}, {s:i,s:s,s:b}]", "id", 0, "content", "<unk>",
                                  "special", 1, "id", 1, "content", "<s>", "special", 1, "id", 2, "content", "</s>",
                                  "special", 1));
    if (layout == SP_LEGACY) {
        json_object_set_new(root, "normalizer",
                            json_pack("{s:s, s:[{s:s,s:s}, {s:s,s:{s:s},s:s}]}", "type", "Sequence", "normalizers",
                                      "type", "Prepend", "prepend", MS, "type", "Replace", "pattern", "String", " ",
                                      "content", MS));
        json_object_set_new(root, "pre_tokenizer", json_null());
    } else {
        json_object_set_new(root, "normalizer", json_null());
        json_object_set_new(root, "pre_tokenizer", json_pack("{s:s,s:s,s:s,s:b}", "type", "Metaspace", "replacement",
                                                             MS, "prepend_scheme", "first", "split", 0));
    }
    json_object_set_new(root, "post_processor",
                        json_pack("{s:s, s:[{s:{s:s,s:i}}, {s:{s:s,s:i}}], s:{s:{s:s,s:[i],s:[s]}}}", "type",
                                  "TemplateProcessing", "single", "SpecialToken", "id", "<s>", "type_id", 0,
                                  "Sequence", "id", "A", "type_id", 0, "special_tokens", "<s>", "id", "<s>", "ids",
                                  1, "tokens", "<s>"));
    json_object_set_new(root, "decoder",
                        json_pack("{s:s, s:[{s:s,s:{s:s},s:s}, {s:s}, {s:s}, {s:s,s:s,s:i,s:i}]}", "type",
                                  "Sequence", "decoders", "type", "Replace", "pattern", "String", MS, "content", " ",
                                  "type", "ByteFallback", "type", "Fuse", "type", "Strip", "content", " ", "start", 1,
                                  "stop", 0));
    json_object_set_new(root, "model", json_pack("{s:s, s:s, s:b, s:b, s:o, s:o}", "type", "BPE", "unk_token",
                                                 "<unk>", "fuse_unk", 1, "byte_fallback", byte_fallback, "vocab",
                                                 vocab, "merges", merges));
    write_json(dir, "tokenizer.json", root);
    if (with_config) {
        write_text(dir, "tokenizer_config.json", "{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\", "
                                                 "\"add_bos_token\": true, \"legacy\": true}");
    } else {
        write_text(dir, "generation_config.json", "{\"bos_token_id\": 1, \"eos_token_id\": [2, 0]}");
    }
    return dir;
}

static void test_hf_spm_legacy(void **state) {
    (void)state;
    tg_error err = {0};
    char *dir = make_spm_dir(SP_LEGACY, true, true);
    tg_tokenizer *t = tg_tokenizer_load_hf(dir, &err);
    if (!t) print_error("%s\n", err.msg);
    assert_non_null(t);
    assert_int_equal(tg_tokenizer_bos(t), 1);
    assert_int_equal(tg_tokenizer_eos(t), 2);
    assert_true(tg_tokenizer_adds_bos(t));
    const int32_t hello = id_of(t, MS "hello"), world = id_of(t, MS "world"), ms = id_of(t, MS);
    /* "hello world" -> "▁hello▁world" -> ▁hello ▁world */
    EXPECT(t, "hello world", true, 1, hello, world);
    EXPECT(t, "hello world", false, hello, world);
    /* é is not a piece: byte fallback to <0xC3> <0xA9> */
    EXPECT(t, "h\xC3\xA9", false, id_of(t, MS "h"), SP_BYTE(0xC3), SP_BYTE(0xA9));
    /* the legacy normalizer prefixes every stretch between specials: " world" -> "▁▁world" */
    EXPECT(t, "hello<s> world", false, hello, 1, ms, world);
    expect_ids(t, "", 0, false, NULL, 0);
    EXPECT(t, " ", false, ms, ms);
    /* decoding drops the first space (Strip) and turns the rest back into spaces */
    const int32_t ids[] = {1, hello, world, SP_BYTE(0xC3), SP_BYTE(0xA9), 2};
    size_t len;
    char *s = decode_all(t, ids, 6, &len);
    assert_string_equal(s, "hello world\xC3\xA9");
    free(s);
    /* as tokenizers' Strip decoder: one space dropped at the start of the whole text, none in the middle */
    const int32_t ids2[] = {ms, world, 1, ms, world};
    s = decode_all(t, ids2, 5, &len);
    assert_string_equal(s, " world  world");
    free(s);
    tg_tokenizer_free(t);
    gguf_builder_rmdir(dir);
    free(dir);
}

static void test_hf_spm_metaspace(void **state) {
    (void)state;
    tg_error err = {0};
    char *dir = make_spm_dir(SP_METASPACE, true, false);
    tg_tokenizer *t = tg_tokenizer_load_hf(dir, &err);
    if (!t) print_error("%s\n", err.msg);
    assert_non_null(t);
    /* no tokenizer_config.json: BOS/EOS from generation_config.json, add_bos from the template */
    assert_int_equal(tg_tokenizer_bos(t), 1);
    assert_int_equal(tg_tokenizer_eos(t), 2);
    assert_true(tg_tokenizer_adds_bos(t));
    const int32_t hello = id_of(t, MS "hello"), world = id_of(t, MS "world");
    EXPECT(t, "hello world", false, hello, world);
    /* prepend_scheme "first": after a special token no prefix is added ("hello" -> h el lo) */
    EXPECT(t, "<s>hello", false, 1, id_of(t, "h"), id_of(t, "el"), id_of(t, "lo"));
    EXPECT(t, "hello<s> world", false, hello, 1, world);
    tg_tokenizer_free(t);
    gguf_builder_rmdir(dir);
    free(dir);
}

static void test_hf_unk(void **state) {
    (void)state;
    tg_error err = {0};
    char *dir = make_spm_dir(SP_LEGACY, false, true); /* no byte fallback: unknowns become <unk>, fused */
    tg_tokenizer *t = tg_tokenizer_load_hf(dir, &err);
    assert_non_null(t);
    EXPECT(t, "h\xC3\xA9\xC3\xA9", false, id_of(t, MS "h"), 0);
    EXPECT(t, "\xC3\xA9h\xC3\xA9", false, id_of(t, MS), 0, id_of(t, "h"), 0);
    /* a <0xNN> entry is an ordinary token without byte fallback: it decodes as its text */
    char buf[16];
    assert_int_equal(tg_tokenizer_decode_piece(t, 5, SP_BYTE('A'), buf, sizeof buf), 6);
    assert_memory_equal(buf, "<0x41>", 6);
    tg_tokenizer_free(t);
    gguf_builder_rmdir(dir);
    free(dir);
}

static void expect_load_error(const char *dir, const char *needle1, const char *needle2) {
    tg_error err = {0};
    tg_tokenizer *t = tg_tokenizer_load_hf(dir, &err);
    assert_null(t);
    if (!strstr(err.msg, needle1) || !strstr(err.msg, needle2)) print_error("message: %s\n", err.msg);
    assert_non_null(strstr(err.msg, needle1));
    assert_non_null(strstr(err.msg, needle2));
}

static void test_hf_errors(void **state) {
    (void)state;
    char *dir = gguf_builder_tmpdir();
    expect_load_error(dir, "tokenizer.json", "cannot open");
    write_text(dir, "tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [");
    expect_load_error(dir, "tokenizer.json: bad JSON at line 1", "");
    write_text(dir, "tokenizer.json", "{\"model\": {\"type\": \"Unigram\", \"vocab\": {\"a\": 0}}}");
    expect_load_error(dir, "tokenizer.json", "unsupported model type 'Unigram'");
    write_text(dir, "tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1}, "
                                      "\"merges\": [\"a b\"]}}");
    expect_load_error(dir, "tokenizer.json", "1 merges name tokens missing");
    write_text(dir, "tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": -3}, \"merges\": []}}");
    expect_load_error(dir, "tokenizer.json", "bad id");
    write_text(dir, "tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, "
                                      "\"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"}}");
    expect_load_error(dir, "tokenizer.json", "unsupported pre_tokenizer type 'BertPreTokenizer'");
    write_text(dir, "tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}, "
                                      "\"pre_tokenizer\": {\"type\": \"Split\", \"pattern\": {\"Regex\": \"(\"}, "
                                      "\"behavior\": \"Isolated\"}}");
    expect_load_error(dir, "pattern '('", "missing closing parenthesis");
    write_text(dir, "tokenizer.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}");
    write_text(dir, "tokenizer_config.json", "{\"add_bos_token\": tru");
    expect_load_error(dir, "tokenizer_config.json", "");
    gguf_builder_rmdir(dir);
    free(dir);
}

/* ---- GGUF loading from synthetic files ---- */

/* A tiny "llama" vocab: <unk> <s> </s>, 256 byte tokens, then ▁ h e l o ▁h el lo ▁hel ▁hello with scores that
 * prefer longer pieces. */
static char *make_spm_gguf(char **dir_out, bool space_prefix) {
    static const char *const pieces[] = {MS, "h", "e", "l", "o", MS "h", "el", "lo", MS "hel", MS "hello"};
    static const float piece_score[] = {-1, -2, -2, -2, -2, -0.5f, -0.6f, -0.7f, -0.4f, -0.1f};
    const size_t np = sizeof pieces / sizeof pieces[0], n = 3 + 256 + np;
    const char **toks = calloc(n, sizeof *toks);
    char(*bytes)[8] = calloc(256, sizeof *bytes);
    float *scores = calloc(n, sizeof *scores);
    int32_t *types = calloc(n, sizeof *types);
    toks[0] = "<unk>";
    toks[1] = "<s>";
    toks[2] = "</s>";
    types[0] = 2;
    types[1] = types[2] = 3;
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], 8, "<0x%02X>", b);
        toks[3 + b] = bytes[b];
        types[3 + b] = 6;
    }
    for (size_t i = 0; i < np; i++) {
        toks[259 + i] = pieces[i];
        scores[259 + i] = piece_score[i];
        types[259 + i] = 1;
    }
    gguf_builder *g = gguf_builder_new();
    gguf_builder_add_str(g, "general.architecture", "llama");
    gguf_builder_add_str(g, "tokenizer.ggml.model", "llama");
    gguf_builder_add_arr_str(g, "tokenizer.ggml.tokens", n, toks);
    gguf_builder_add_arr_f32(g, "tokenizer.ggml.scores", n, scores);
    gguf_builder_add_arr_i32(g, "tokenizer.ggml.token_type", n, types);
    gguf_builder_add_bool(g, "tokenizer.ggml.add_space_prefix", space_prefix);
    gguf_builder_add_u32(g, "tokenizer.ggml.eos_token_id", 2);
    char *dir = gguf_builder_tmpdir();
    char *path = gguf_builder_path(dir, "v.gguf");
    assert_true(gguf_builder_write(g, path));
    gguf_builder_free(g);
    free(toks);
    free(bytes);
    free(scores);
    free(types);
    *dir_out = dir;
    return path;
}

static tg_tokenizer *load_gguf_path(const char *path, tg_gguf **g, tg_error *err) {
    *g = tg_gguf_open(path, err);
    assert_non_null(*g);
    return tg_tokenizer_load_gguf(*g, err);
}

static void test_gguf_spm(void **state) {
    (void)state;
    tg_error err = {0};
    char *dir;
    char *path = make_spm_gguf(&dir, true);
    tg_gguf *g;
    tg_tokenizer *t = load_gguf_path(path, &g, &err);
    if (!t) print_error("%s\n", err.msg);
    assert_non_null(t);
    assert_int_equal(tg_tokenizer_bos(t), 1); /* llama.cpp's defaults for "llama" */
    assert_int_equal(tg_tokenizer_eos(t), 2);
    assert_true(tg_tokenizer_adds_bos(t));
    /* "▁hello": the best-scoring pair merges first: ▁h (-0.5), then el (-0.6), then ▁h+el = ▁hel (-0.4), then the
     * queued l+o = lo (-0.7), then ▁hel+lo = ▁hello (-0.1) */
    EXPECT(t, "hello", true, 1, 268);
    /* "<s>" in the text is the control token; an unknown char falls back to bytes */
    EXPECT(t, "<s>h\xC3\xA9", false, 1, 264, SP_BYTE(0xC3), SP_BYTE(0xA9));
    const int32_t ids[] = {1, 268, 259, SP_BYTE(0xF0), SP_BYTE(0x9F), SP_BYTE(0xA6), SP_BYTE(0x99)};
    size_t len;
    char *s = decode_all(t, ids, 7, &len);
    assert_string_equal(s, "hello \xF0\x9F\xA6\x99");
    free(s);
    tg_tokenizer_free(t);
    tg_gguf_close(g);
    gguf_builder_rmdir(dir);
    free(dir);
    free(path);
    /* without the space prefix the text is taken as is, and decoding keeps a leading space */
    path = make_spm_gguf(&dir, false);
    t = load_gguf_path(path, &g, &err);
    assert_non_null(t);
    EXPECT(t, "hello", false, 260, 265, 266); /* h el lo: "hel" and "ello" are no pieces */
    EXPECT(t, " hello", false, 268);
    char buf[16];
    assert_int_equal(tg_tokenizer_decode_piece(t, -1, 268, buf, sizeof buf), 6);
    assert_memory_equal(buf, " hello", 6);
    tg_tokenizer_free(t);
    tg_gguf_close(g);
    gguf_builder_rmdir(dir);
    free(dir);
    free(path);
}

static void test_gguf_errors(void **state) {
    (void)state;
    tg_error err = {0};
    char *dir = gguf_builder_tmpdir();
    char *path = gguf_builder_path(dir, "bad.gguf");
    const char *toks[] = {"a", "b", "ab"};
    const char *merges_bad[] = {"a b"};
    struct {
        const char *model, *pre;
        bool tokens, merges;
        const char *want;
    } cases[] = {
        {NULL, NULL, true, false, "tokenizer.ggml.model missing"},
        {"t5", NULL, true, false, "unsupported tokenizer.ggml.model 't5'"},
        {"gpt2", NULL, false, false, "tokenizer.ggml.tokens missing"},
        {"gpt2", NULL, true, false, "no tokenizer.ggml.merges"},
        {"gpt2", "no-such-pre", true, true, "unsupported tokenizer.ggml.pre 'no-such-pre'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gguf_builder *b = gguf_builder_new();
        if (cases[i].model) gguf_builder_add_str(b, "tokenizer.ggml.model", cases[i].model);
        if (cases[i].pre) gguf_builder_add_str(b, "tokenizer.ggml.pre", cases[i].pre);
        if (cases[i].tokens) gguf_builder_add_arr_str(b, "tokenizer.ggml.tokens", 3, toks);
        if (cases[i].merges) gguf_builder_add_arr_str(b, "tokenizer.ggml.merges", 1, merges_bad);
        assert_true(gguf_builder_write(b, path));
        gguf_builder_free(b);
        tg_gguf *g = tg_gguf_open(path, &err);
        assert_non_null(g);
        tg_tokenizer *t = tg_tokenizer_load_gguf(g, &err);
        assert_null(t);
        if (!strstr(err.msg, cases[i].want)) print_error("case %zu: %s\n", i, err.msg);
        assert_non_null(strstr(err.msg, cases[i].want));
        assert_non_null(strstr(err.msg, "bad.gguf"));
        tg_gguf_close(g);
    }
    /* a gpt2 vocab with one merge works, and defaults to no BOS */
    gguf_builder *b = gguf_builder_new();
    gguf_builder_add_str(b, "tokenizer.ggml.model", "gpt2");
    gguf_builder_add_arr_str(b, "tokenizer.ggml.tokens", 3, toks);
    gguf_builder_add_arr_str(b, "tokenizer.ggml.merges", 1, merges_bad);
    assert_true(gguf_builder_write(b, path));
    gguf_builder_free(b);
    tg_gguf *g = tg_gguf_open(path, &err);
    tg_tokenizer *t = tg_tokenizer_load_gguf(g, &err);
    if (!t) print_error("%s\n", err.msg);
    assert_non_null(t);
    assert_false(tg_tokenizer_adds_bos(t));
    assert_int_equal(tg_tokenizer_bos(t), -1);
    EXPECT(t, "abba", false, 2, 1, 0);
    int32_t *ids = NULL;
    size_t n;
    assert_false(tg_tokenizer_encode(t, "a", 1, true, &ids, &n, &err)); /* BOS asked for, none exists */
    assert_non_null(strstr(err.msg, "BOS"));
    tg_tokenizer_free(t);
    tg_gguf_close(g);
    gguf_builder_rmdir(dir);
    free(dir);
    free(path);
}

/* ---- arbitrary bytes ---- */

/* Random bytes (mostly invalid UTF-8) encode without trouble and decode back to the same bytes. */
static void round_trip_random(const tg_tokenizer *t, size_t len) {
    char *text = malloc(len);
    for (size_t i = 0; i < len; i++) {
        text[i] = (char)rnd_byte();
        if (text[i] == '<') text[i] = '('; /* keep clear of the added tokens */
        if ((uint8_t)text[i] == 0xE2) text[i] = 'E'; /* and of U+2581, which decodes as a space */
    }
    text[0] = 'x'; /* a leading space would be dropped by the space-prefix decoders */
    int32_t *ids = NULL;
    size_t n = 0;
    tg_error err = {0};
    assert_true(tg_tokenizer_encode(t, text, len, false, &ids, &n, &err));
    assert_true(n > 0);
    size_t out_len;
    char *out = decode_all(t, ids, n, &out_len);
    assert_int_equal(out_len, len);
    assert_memory_equal(out, text, len);
    free(out);
    free(ids);
    free(text);
}

static void test_invalid_utf8_round_trip(void **state) {
    (void)state;
    tg_error err = {0};
    char *dirs[3] = {make_bytelevel_dir(false, false, BL_PRE), make_spm_dir(SP_LEGACY, true, true),
                     make_spm_dir(SP_METASPACE, true, true)};
    for (int k = 0; k < 3; k++) {
        tg_tokenizer *t = tg_tokenizer_load_hf(dirs[k], &err);
        assert_non_null(t);
        for (int rep = 0; rep < 4; rep++) round_trip_random(t, 1 + 997 * (size_t)rep);
        tg_tokenizer_free(t);
        gguf_builder_rmdir(dirs[k]);
        free(dirs[k]);
    }
    char *dir;
    char *path = make_spm_gguf(&dir, true);
    tg_gguf *g;
    tg_tokenizer *t = load_gguf_path(path, &g, &err);
    assert_non_null(t);
    for (int rep = 0; rep < 4; rep++) round_trip_random(t, 1 + 997 * (size_t)rep);
    tg_tokenizer_free(t);
    tg_gguf_close(g);
    gguf_builder_rmdir(dir);
    free(dir);
    free(path);
}

static void test_decode_every_byte(void **state) {
    (void)state;
    tg_error err = {0};
    char *dir = make_bytelevel_dir(false, false, BL_PRE);
    tg_tokenizer *t = tg_tokenizer_load_hf(dir, &err);
    assert_non_null(t);
    char buf[8];
    for (int b = 0; b < 256; b++) {
        for (int32_t prev = -1; prev <= 0; prev++) {
            assert_int_equal(tg_tokenizer_decode_piece(t, prev, BL_BYTE(b), buf, sizeof buf), 1);
            assert_int_equal((uint8_t)buf[0], b);
        }
    }
    /* a too-small buffer: the size is still reported, nothing written past cap */
    buf[0] = 'Z';
    assert_int_equal(tg_tokenizer_decode_piece(t, -1, id_of(t, "hello"), buf, 0), 5);
    assert_int_equal(buf[0], 'Z');
    assert_int_equal(tg_tokenizer_decode_piece(t, -1, 99999, buf, sizeof buf), 0);
    assert_int_equal(tg_tokenizer_decode_piece(t, -1, -7, buf, sizeof buf), 0);
    tg_tokenizer_free(t);
    gguf_builder_rmdir(dir);
    free(dir);
    dir = make_spm_dir(SP_LEGACY, true, true);
    t = tg_tokenizer_load_hf(dir, &err);
    assert_non_null(t);
    for (int b = 0; b < 256; b++) {
        /* not at the start: there the Strip decoder would drop a space byte */
        assert_int_equal(tg_tokenizer_decode_piece(t, 5, SP_BYTE(b), buf, sizeof buf), 1);
        assert_int_equal((uint8_t)buf[0], b);
    }
    assert_int_equal(tg_tokenizer_decode_piece(t, -1, SP_BYTE(' '), buf, sizeof buf), 0);
    tg_tokenizer_free(t);
    gguf_builder_rmdir(dir);
    free(dir);
}

/* ---- streaming detokeniser ---- */

typedef struct {
    char text[256];
    size_t len;
} sink;

static size_t push(tg_detok *d, int32_t id, sink *s) {
    const char *out;
    size_t n;
    tg_detok_push(d, id, &out, &n);
    assert_true(s->len + n < sizeof s->text);
    memcpy(s->text + s->len, out, n);
    s->len += n;
    return n;
}

static size_t flush(tg_detok *d, sink *s) {
    const char *out;
    size_t n;
    tg_detok_flush(d, &out, &n);
    memcpy(s->text + s->len, out, n);
    s->len += n;
    return n;
}

static void test_detok(void **state) {
    (void)state;
    tg_error err = {0};
    char *dirs[2] = {make_bytelevel_dir(false, false, BL_PRE), make_spm_dir(SP_LEGACY, true, true)};
    for (int k = 0; k < 2; k++) {
        struct tg_model m;
        memset(&m, 0, sizeof m);
        m.tokenizer = tg_tokenizer_load_hf(dirs[k], &err);
        assert_non_null(m.tokenizer);
        const int base = 3; /* both vocabularies put byte b at id 3 + b */
        tg_detok *d = tg_detok_new(&m, &err);
        assert_non_null(d);
        sink s = {{0}, 0};
        /* a 4-byte emoji, one byte token at a time: nothing until the character is complete */
        const uint8_t emoji[4] = {0xF0, 0x9F, 0xA6, 0x99};
        for (int i = 0; i < 3; i++) assert_int_equal(push(d, base + emoji[i], &s), 0);
        assert_int_equal(push(d, base + emoji[3], &s), 4);
        assert_memory_equal(s.text, emoji, 4);
        /* a byte that can never start a character comes out at once as U+FFFD */
        s.len = 0;
        assert_int_equal(push(d, base + 0xFF, &s), 3);
        assert_memory_equal(s.text, "\xEF\xBF\xBD", 3);
        /* a broken sequence: F0 9F then 'A' -> U+FFFD then 'A' (never silently dropped) */
        s.len = 0;
        push(d, base + 0xF0, &s);
        push(d, base + 0x9F, &s);
        assert_int_equal(s.len, 0);
        push(d, base + 'A', &s);
        assert_int_equal(s.len, 4);
        assert_memory_equal(s.text, "\xEF\xBF\xBD" "A", 4);
        /* an incomplete character at the end is flushed as U+FFFD */
        s.len = 0;
        push(d, base + 0xE2, &s);
        assert_int_equal(s.len, 0);
        assert_int_equal(flush(d, &s), 3);
        assert_memory_equal(s.text, "\xEF\xBF\xBD", 3);
        assert_int_equal(flush(d, &s), 0);
        tg_detok_free(d);
        tg_tokenizer_free(m.tokenizer);
        gguf_builder_rmdir(dirs[k]);
        free(dirs[k]);
    }
    assert_null(tg_detok_new(NULL, &err));
    assert_string_equal(err.msg, "no tokenizer loaded");
    tg_detok_free(NULL);
    /* the SentencePiece prefix space: dropped at the start and right after BOS, kept later */
    char *dir;
    char *path = make_spm_gguf(&dir, true);
    tg_gguf *g;
    struct tg_model m;
    memset(&m, 0, sizeof m);
    m.tokenizer = load_gguf_path(path, &g, &err);
    assert_non_null(m.tokenizer);
    tg_detok *d = tg_detok_new(&m, &err);
    sink s = {{0}, 0};
    push(d, 1, &s);
    push(d, 268, &s);
    push(d, 268, &s);
    push(d, 2, &s);
    flush(d, &s);
    assert_int_equal(s.len, 11);
    assert_memory_equal(s.text, "hello hello", 11);
    tg_detok_free(d);
    tg_tokenizer_free(m.tokenizer);
    tg_gguf_close(g);
    gguf_builder_rmdir(dir);
    free(dir);
    free(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_byte_level_map),
        cmocka_unit_test(test_split_behaviors),
        cmocka_unit_test(test_metaspace_step),
        cmocka_unit_test(test_added_matcher),
        cmocka_unit_test(test_hf_bytelevel),
        cmocka_unit_test(test_hf_added_tokens),
        cmocka_unit_test(test_hf_ignore_merges_and_digits),
        cmocka_unit_test(test_hf_spm_legacy),
        cmocka_unit_test(test_hf_spm_metaspace),
        cmocka_unit_test(test_hf_unk),
        cmocka_unit_test(test_hf_errors),
        cmocka_unit_test(test_gguf_spm),
        cmocka_unit_test(test_gguf_errors),
        cmocka_unit_test(test_invalid_utf8_round_trip),
        cmocka_unit_test(test_decode_every_byte),
        cmocka_unit_test(test_detok),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
