/* test_tokenizer_vocab.c — acceptance: llama.cpp's vocab test cases (ggml-vocab-*.gguf with .inp/.out) must
 * tokenize to exactly the expected ids, and decode back to the input text. The files come from
 * $TG_SHARED_DIR/testdata/vocab (default ../shared); when absent the tests skip with a message. Extra directories
 * of vocab files can be listed in $TG_VOCAB_EXTRA_DIRS (':'-separated) for local runs. */
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
    tg_error err = {{0}};
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
            size_t w = 0;
            for (size_t i = 0; i < n; i++) {
                const size_t k = tg_tokenizer_decode_piece(t, i ? ids[i - 1] : -1, ids[i], buf + w, sizeof buf - w);
                assert_true(k <= sizeof buf - w);
                w += k;
            }
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

/* Optional local confidence: every ggml-vocab-NAME.gguf with .inp/.out in $TG_VOCAB_EXTRA_DIRS. */
static void test_extra_dirs(void **state) {
    (void)state;
    const char *dirs = getenv("TG_VOCAB_EXTRA_DIRS");
    if (!dirs || !*dirs) {
        print_message("skipping: TG_VOCAB_EXTRA_DIRS not set\n");
        skip();
    }
    const char *names = getenv("TG_VOCAB_EXTRA_NAMES");
    assert_non_null(names); /* ':'-separated file names to try in each dir */
    int bad = 0, files = 0;
    char dcopy[2048];
    snprintf(dcopy, sizeof dcopy, "%s", dirs);
    for (char *d = strtok(dcopy, ":"); d; d = strtok(NULL, ":")) {
        char ncopy[2048];
        snprintf(ncopy, sizeof ncopy, "%s", names);
        char *save = NULL;
        for (char *nm = strtok_r(ncopy, ":", &save); nm; nm = strtok_r(NULL, ":", &save)) {
            char path[1024], inp[1100];
            snprintf(path, sizeof path, "%s/%s", d, nm);
            snprintf(inp, sizeof inp, "%s.inp", path);
            if (!exists(path) || !exists(inp)) continue;
            int total = 0, matched = 0;
            const int b = run_vocab(path, &total, &matched);
            print_message("%s: %d of %d cases match\n", path, matched, total);
            bad += b;
            files++;
        }
    }
    assert_true(files > 0);
    assert_int_equal(bad, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_spm),
        cmocka_unit_test(test_gpt2),
        cmocka_unit_test(test_extra_dirs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
