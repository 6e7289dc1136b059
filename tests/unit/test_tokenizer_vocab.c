/* test_tokenizer_vocab.c — acceptance: llama.cpp's vocab test cases (ggml-vocab-*.gguf with .inp/.out) must
 * tokenize to exactly the expected ids, and decode back to the input text. The files come from
 * $TG_SHARED_DIR/testdata/vocab (default ../shared); when absent the tests skip with a message. Also on the same
 * files: every byte's decoding, random (invalid UTF-8) bytes round-tripping, and the speed of encoding 100 KB. More
 * vocab files can be named for local runs ($TG_VOCAB_EXTRA_DIR, $TG_VOCAB_EXTRA_NAMES). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "format/gguf.h"
#include "tokenizer/tokenizer.h"
#include "util/clock.h"

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
        }
        const size_t r = fread(buf + n, 1, cap - n, f);
        if (r == 0) break;
        n += r;
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

static bool exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

/* Runs every case of one vocab file; returns the number of mismatches (and counts cases in *total). */
static int run_vocab(const char *gguf_path, int *total, int *matched) {
    char inp_path[1024], out_path[1024];
    snprintf(inp_path, sizeof inp_path, "%s.inp", gguf_path);
    snprintf(out_path, sizeof out_path, "%s.out", gguf_path);
    tg_error err = {0};
    tg_gguf *g = tg_gguf_open(gguf_path, &err);
    assert_non_null(g);
    tg_tokenizer *t = tg_tokenizer_load_gguf(g, &err);
    if (!t) print_error("load %s: %s\n", gguf_path, err.msg);
    assert_non_null(t);

    size_t inp_len, out_len;
    char *inp = read_all(inp_path, &inp_len);
    char *out = read_all(out_path, &out_len);
    assert_non_null(inp);
    assert_non_null(out);

    static const char SEP[] = "\n__ggml_vocab_test__\n";
    const size_t sep_len = sizeof SEP - 1;
    char *in_pos = inp, *out_line = out;
    int bad = 0;
    while (in_pos < inp + inp_len) {
        char *next = strstr(in_pos, SEP);
        const size_t text_len = next ? (size_t)(next - in_pos) : strlen(in_pos);
        char *nl = strchr(out_line, '\n');
        assert_non_null(nl); /* .out must have a line for every input */
        *nl = '\0';
        int32_t want[512];
        size_t n_want = 0;
        for (char *p = out_line; *p;) {
            char *end;
            const long v = strtol(p, &end, 10);
            if (end == p) break;
            assert_true(n_want < 512);
            want[n_want++] = (int32_t)v;
            p = end;
        }
        out_line = nl + 1;

        int32_t *ids = NULL;
        size_t n = 0;
        assert_true(tg_tokenizer_encode(t, in_pos, text_len, false, &ids, &n, &err));
        bool same = n == n_want;
        for (size_t i = 0; same && i < n; i++) same = ids[i] == want[i];
        (*total)++;
        if (same) {
            (*matched)++;
            /* decode round trip: the ids give back the text (minus the space prefix the tokenizer adds) */
            char buf[4096];
            const size_t w = tg_tokenizer_decode(t, ids, n, buf, sizeof buf);
            assert_true(w <= sizeof buf);
            if (w != text_len || memcmp(buf, in_pos, w) != 0) {
                print_error("%s: case %d decodes to '%.*s', want '%.*s'\n", gguf_path, *total, (int)w, buf,
                            (int)text_len, in_pos);
                bad++;
            }
        } else {
            bad++;
            print_error("%s: case %d '%.*s'\n  want:", gguf_path, *total, (int)text_len, in_pos);
            for (size_t i = 0; i < n_want; i++) print_error(" %d", (int)want[i]);
            print_error("\n  got: ");
            for (size_t i = 0; i < n; i++) print_error(" %d", (int)ids[i]);
            print_error("\n");
        }
        free(ids);
        if (!next) break;
        in_pos = next + sep_len;
    }
    free(inp);
    free(out);
    tg_tokenizer_free(t);
    tg_gguf_close(g);
    return bad;
}

static void check_vocab_file(const char *file) {
    const char *dir = getenv("TG_SHARED_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/testdata/vocab/%s", dir && *dir ? dir : "../shared", file);
    if (!exists(path)) {
        print_message("skipping: %s not found (set TG_SHARED_DIR)\n", path);
        skip();
    }
    int total = 0, matched = 0;
    const int bad = run_vocab(path, &total, &matched);
    print_message("%s: %d of %d cases match\n", file, matched, total);
    assert_true(total > 0);
    assert_int_equal(bad, 0);
}

static void test_llama_spm(void **state) {
    (void)state;
    check_vocab_file("ggml-vocab-llama-spm.gguf");
}

static void test_gpt2(void **state) {
    (void)state;
    check_vocab_file("ggml-vocab-gpt-2.gguf");
}

/* Optional local confidence: every NAME (':'-separated $TG_VOCAB_EXTRA_NAMES) in the folder $TG_VOCAB_EXTRA_DIR
 * that has .inp/.out files, e.g. llama.cpp's models/ folder. */
static void test_extra_vocabs(void **state) {
    (void)state;
    const char *dir = getenv("TG_VOCAB_EXTRA_DIR"), *names = getenv("TG_VOCAB_EXTRA_NAMES");
    if (!dir || !*dir || !names || !*names) {
        print_message("skipping: TG_VOCAB_EXTRA_DIR / TG_VOCAB_EXTRA_NAMES not set\n");
        skip();
    }
    int bad = 0, files = 0;
    for (const char *p = names; *p;) {
        const char *colon = strchr(p, ':');
        const size_t len = colon ? (size_t)(colon - p) : strlen(p);
        char path[1024], inp[1100];
        snprintf(path, sizeof path, "%s/%.*s", dir, (int)len, p);
        snprintf(inp, sizeof inp, "%s.inp", path);
        if (len && exists(path) && exists(inp)) {
            int total = 0, matched = 0;
            bad += run_vocab(path, &total, &matched);
            print_message("%s: %d of %d cases match\n", path, matched, total);
            files++;
        }
        p += len + (colon ? 1 : 0);
    }
    assert_true(files > 0);
    assert_int_equal(bad, 0);
}

/* Loads a shared vocab file, or skips. */
static tg_tokenizer *load_shared(const char *file, tg_gguf **g) {
    const char *dir = getenv("TG_SHARED_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/testdata/vocab/%s", dir && *dir ? dir : "../shared", file);
    if (!exists(path)) {
        print_message("skipping: %s not found (set TG_SHARED_DIR)\n", path);
        return NULL;
    }
    tg_error err = {0};
    *g = tg_gguf_open(path, &err);
    assert_non_null(*g);
    tg_tokenizer *t = tg_tokenizer_load_gguf(*g, &err);
    assert_non_null(t);
    return t;
}

/* GPT-2: every byte has a one-character token that decodes to exactly that byte. */
static void test_gpt2_every_byte(void **state) {
    (void)state;
    tg_gguf *g;
    tg_tokenizer *t = load_shared("ggml-vocab-gpt-2.gguf", &g);
    if (!t) skip();
    for (int b = 0; b < 256; b++) {
        const char c = (char)b;
        int32_t *ids = NULL;
        size_t n = 0;
        tg_error err = {0};
        assert_true(tg_tokenizer_encode(t, &c, 1, false, &ids, &n, &err));
        assert_int_equal(n, 1);
        char buf[8];
        assert_int_equal(tg_tokenizer_decode_piece(t, -1, ids[0], buf, sizeof buf), 1);
        assert_int_equal((uint8_t)buf[0], b);
        free(ids);
    }
    tg_tokenizer_free(t);
    tg_gguf_close(g);
}

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint8_t rnd_byte(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint8_t)(rng >> 32);
}

/* Random bytes (invalid UTF-8 almost everywhere) encode and decode back to themselves: through the byte-level map
 * (GPT-2) and through <0xNN> byte fallback (Llama SentencePiece). */
static void test_invalid_utf8_real_vocabs(void **state) {
    (void)state;
    const char *files[] = {"ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-spm.gguf"};
    int done = 0;
    for (int f = 0; f < 2; f++) {
        tg_gguf *g;
        tg_tokenizer *t = load_shared(files[f], &g);
        if (!t) continue;
        for (int rep = 0; rep < 8; rep++) {
            const size_t len = 1 + (size_t)rep * 701;
            char *text = malloc(len);
            for (size_t i = 0; i < len; i++) {
                text[i] = (char)rnd_byte();
                if (text[i] == '<') text[i] = '['; /* keep clear of <s>, <|endoftext|> */
                if ((uint8_t)text[i] == 0xE2) text[i] = 'E'; /* and of U+2581 */
            }
            text[0] = 'x'; /* the SentencePiece decoder drops a leading space */
            int32_t *ids = NULL;
            size_t n = 0;
            tg_error err = {0};
            assert_true(tg_tokenizer_encode(t, text, len, false, &ids, &n, &err));
            const size_t total = tg_tokenizer_decode(t, ids, n, NULL, 0);
            char *back = malloc(total + 1);
            assert_int_equal(tg_tokenizer_decode(t, ids, n, back, total), total);
            assert_int_equal(total, len);
            assert_memory_equal(back, text, len);
            free(back);
            free(ids);
            free(text);
        }
        tg_tokenizer_free(t);
        tg_gguf_close(g);
        done++;
    }
    if (!done) skip();
}

/* Under valgrind (make test-valgrind) everything runs some 20-50 times slower. */
static bool under_valgrind(void) {
    const char *p = getenv("LD_PRELOAD");
    return p && strstr(p, "vgpreload") != NULL;
}

/* 100 KB of mixed text encodes without blowing up: a quadratic merge loop would take minutes; the bound is loose
 * enough (30 s; the sanitizer build takes ~0.2 s on an idle machine) that a loaded machine cannot fail it. */
static void test_long_text_100k(void **state) {
    (void)state;
    static const char *const parts[] = {
        "The quick brown fox jumps over the lazy dog. ", "It is a truth universally acknowledged, ",
        "Ünïcödé wörds, naïve café; ", "数字 12345 and 3.14159\n", "    indented code(x, y) { return x + y; }\n",
        "emoji 🦙🚀 ", "don't won't I'm ", "\t\ttabs\n\n",
    };
    const size_t len = 100 * 1024;
    char *text = malloc(len);
    size_t w = 0;
    for (size_t k = 0; w < len; k = (k * 7 + 3) % 8) {
        const size_t n = strlen(parts[k]);
        const size_t take = n < len - w ? n : len - w;
        memcpy(text + w, parts[k], take);
        w += take;
    }
    const char *files[] = {"ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-spm.gguf"};
    int done = 0;
    for (int f = 0; f < 2; f++) {
        tg_gguf *g;
        tg_tokenizer *t = load_shared(files[f], &g);
        if (!t) continue;
        int32_t *ids = NULL;
        size_t n = 0;
        tg_error err = {0};
        const double t0 = tg_monotonic_s();
        assert_true(tg_tokenizer_encode(t, text, len, false, &ids, &n, &err));
        const double dt = tg_monotonic_s() - t0;
        print_message("%s: 100 KB -> %zu tokens in %.3f s\n", files[f], n, dt);
        assert_true(n > 10000);
        /* a guard against a quadratic encoder (minutes on 100 KB), not a speed test: speed is bench/'s */
        assert_true(dt < (under_valgrind() ? 120.0 : 30.0));
        free(ids);
        tg_tokenizer_free(t);
        tg_gguf_close(g);
        done++;
    }
    free(text);
    if (!done) skip();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_spm),
        cmocka_unit_test(test_gpt2),
        cmocka_unit_test(test_gpt2_every_byte),
        cmocka_unit_test(test_invalid_utf8_real_vocabs),
        cmocka_unit_test(test_long_text_100k),
        cmocka_unit_test(test_extra_vocabs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
