/* test_tokenizer_golden.c — the tokenizer against golden ids from Hugging Face `tokenizers` / transformers: every
 * tests/data/fixtures/NAME/ (model fixtures, tools/make_fixtures.py) and tests/data/tokenizer/NAME/ (tokenizer
 * variants, tests/data/tokenizer/make_golden.py) holding tokenizer.json and golden.json is checked:
 *   - each tokenization entry {text, ids, ids_special?, decoded}: our ids without BOS equal ids, with the
 *     tokenizer's BOS setting equal ids_special; decoding ids gives `decoded` (where that skips special tokens, or
 *     where ids hold none);
 *   - prompt_ids and greedy_prompt_ids (encoded with the tokenizer's own BOS setting) and greedy_text;
 *   - the byte-level GGUF files of the fixture tokenize the same strings to the same ids (llama.cpp's BPE equals
 *     tokenizers' there). SentencePiece-style GGUFs tokenize by piece score as llama.cpp does, which need not equal
 *     the BPE ranks: their agreement is printed, not asserted.
 * Skips with a message when there are no fixtures ($TG_FIXTURES_DIR overrides the folder). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "format/gguf.h"
#include "tokenizer/tok_internal.h"
#include "tokenizer/tokenizer.h"

static bool exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

/* ids of a JSON list into a malloc'd array. */
static int32_t *json_ids(const json_t *list, size_t *n) {
    *n = json_array_size(list);
    int32_t *ids = malloc((*n + 1) * sizeof *ids);
    for (size_t i = 0; i < *n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(list, i));
    return ids;
}

static bool same_ids(const int32_t *a, size_t na, const int32_t *b, size_t nb) {
    return na == nb && (na == 0 || memcmp(a, b, na * sizeof *a) == 0);
}

static void print_ids(const char *label, const int32_t *ids, size_t n) {
    print_error("  %s:", label);
    for (size_t i = 0; i < n; i++) print_error(" %d", (int)ids[i]);
    print_error("\n");
}

static char *decode_all(const tg_tokenizer *t, const int32_t *ids, size_t n, size_t *len) {
    const size_t total = tg_tokenizer_decode(t, ids, n, NULL, 0);
    char *buf = malloc(total + 1);
    assert_int_equal(tg_tokenizer_decode(t, ids, n, buf, total), total);
    buf[total] = '\0';
    *len = total;
    return buf;
}

static bool has_special(const tg_tokenizer *t, const int32_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab || t->type[ids[i]] == TG_TOK_CONTROL) return true;
    }
    return false;
}

/* Encodes text and compares with want (the first n_cmp ids when n_cmp < the length); returns true if equal. */
static bool check_encode(const tg_tokenizer *t, const char *what, const char *text, bool bos, const int32_t *want,
                         size_t n_want, bool prefix_only) {
    int32_t *ids = NULL;
    size_t n = 0;
    tg_error err = {0};
    assert_true(tg_tokenizer_encode(t, text, strlen(text), bos, &ids, &n, &err));
    bool ok = prefix_only ? n >= n_want && same_ids(ids, n_want, want, n_want) : same_ids(ids, n, want, n_want);
    if (!ok) {
        print_error("%s: '%s'\n", what, text);
        print_ids("want", want, n_want);
        print_ids("got ", ids, n);
    }
    /* capped at its own length, the same ids; capped one below, refused (its lower bound never refuses a text that
     * fits: every fixture and variant, every golden text) */
    int32_t *capped = NULL;
    size_t n_capped = 0;
    bool over = true;
    if (!tg_tokenizer_encode_max(t, text, strlen(text), bos, n, &capped, &n_capped, &over, &err) || over ||
        !same_ids(capped, n_capped, ids, n)) {
        print_error("%s: '%s' capped at its %zu ids: %s\n", what, text, n, err.msg);
        ok = false;
    }
    free(capped);
    capped = NULL;
    if (n > 0 && (tg_tokenizer_encode_max(t, text, strlen(text), bos, n - 1, &capped, &n_capped, &over, &err) ||
                  !over || err.code != TG_ERR_TOO_MANY_TOKENS)) {
        print_error("%s: '%s' capped at %zu ids below its %zu: not refused\n", what, text, n - 1, n);
        ok = false;
    }
    free(capped);
    free(ids);
    return ok;
}

/* Returns the number of failed checks. */
static int check_fixture(const char *dir, const json_t *golden) {
    tg_error err = {0};
    tg_tokenizer *t = tg_tokenizer_load_hf(dir, &err);
    if (!t) print_error("%s: %s\n", dir, err.msg);
    assert_non_null(t);
    int bad = 0, n_ok = 0;
    size_t i;
    json_t *e;
    const json_t *cases = json_object_get(golden, "tokenization");
    assert_true(json_array_size(cases) > 0);
    /* "decoded" is tokenizers' decode(skip_special_tokens=True) where the file says so, else special tokens are in
     * it as text and only cases without them are compared */
    const bool skips_special = json_is_true(json_object_get(golden, "decoded_skips_special"));
    json_array_foreach(cases, i, e) {
        const char *text = json_string_value(json_object_get(e, "text"));
        assert_non_null(text);
        size_t n_want;
        int32_t *want = json_ids(json_object_get(e, "ids"), &n_want);
        bool ok = check_encode(t, dir, text, false, want, n_want, false);
        const json_t *with_special = json_object_get(e, "ids_special");
        if (ok && with_special) { /* the post-processor's BOS, if any */
            size_t n_ws;
            int32_t *ws = json_ids(with_special, &n_ws);
            ok = check_encode(t, "ids_special", text, tg_tokenizer_adds_bos(t), ws, n_ws, false);
            free(ws);
        }
        const char *decoded = json_string_value(json_object_get(e, "decoded"));
        if (ok && decoded && (skips_special || !has_special(t, want, n_want))) {
            size_t len;
            char *s = decode_all(t, want, n_want, &len);
            if (len != strlen(decoded) || memcmp(s, decoded, len) != 0) {
                print_error("%s: '%s' decodes to '%s', want '%s'\n", dir, text, s, decoded);
                ok = false;
            }
            free(s);
        }
        bad += !ok;
        n_ok += ok;
        free(want);
    }
    print_message("%s: %d of %zu tokenization cases match\n", dir, n_ok, json_array_size(cases));
    /* the prompts, encoded as transformers does (BOS per the tokenizer's configuration) */
    static const char *const prompts[][2] = {{"prompt_text", "prompt_ids"},
                                             {"greedy_prompt_text", "greedy_prompt_ids"}};
    for (int k = 0; k < 2; k++) {
        const char *text = json_string_value(json_object_get(golden, prompts[k][0]));
        const json_t *list = json_object_get(golden, prompts[k][1]);
        if (!text || !list) continue;
        size_t n_want;
        int32_t *want = json_ids(list, &n_want);
        bad += !check_encode(t, prompts[k][1], text, tg_tokenizer_adds_bos(t), want, n_want, k == 0);
        free(want);
    }
    const json_t *gen = json_object_get(golden, "greedy_continuation");
    const char *gen_text = json_string_value(json_object_get(golden, "greedy_text"));
    if (gen && gen_text) {
        size_t n, len;
        int32_t *ids = json_ids(gen, &n);
        if (!has_special(t, ids, n)) {
            char *s = decode_all(t, ids, n, &len);
            if (len != strlen(gen_text) || memcmp(s, gen_text, len) != 0) {
                print_error("%s: greedy continuation decodes to '%s', want '%s'\n", dir, s, gen_text);
                bad++;
            }
            free(s);
        }
        free(ids);
    }
    tg_tokenizer_free(t);
    return bad;
}

/* The fixture's GGUF files against the same strings. Returns the failed checks (byte-level files only). */
static int check_gguf_files(const char *dir, const json_t *golden) {
    int bad = 0;
    const char *file;
    json_t *v;
    json_object_foreach((json_t *)json_object_get(golden, "gguf_files"), file, v) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, file);
        if (!exists(path)) continue;
        tg_error err = {0};
        tg_gguf *g = tg_gguf_open(path, &err);
        if (!g) print_error("%s\n", err.msg);
        assert_non_null(g);
        tg_tokenizer *t = tg_tokenizer_load_gguf(g, &err);
        if (!t) print_error("%s\n", err.msg);
        assert_non_null(t);
        const bool strict = t->model == TG_TOKMODEL_BPE;
        size_t i, n_ok = 0;
        json_t *e;
        const json_t *cases = json_object_get(golden, "tokenization");
        json_array_foreach(cases, i, e) {
            size_t n_want;
            int32_t *want = json_ids(json_object_get(e, "ids"), &n_want);
            const char *text = json_string_value(json_object_get(e, "text"));
            int32_t *ids = NULL;
            size_t n = 0;
            assert_true(tg_tokenizer_encode(t, text, strlen(text), false, &ids, &n, &err));
            const bool ok = same_ids(ids, n, want, n_want);
            if (!ok && strict) {
                print_error("%s: '%s'\n", path, text);
                print_ids("want", want, n_want);
                print_ids("got ", ids, n);
            }
            n_ok += ok;
            bad += strict && !ok;
            free(ids);
            free(want);
        }
        print_message("%s (%s): %zu of %zu cases equal the tokenizers ids%s\n", path, json_string_value(v), n_ok,
                      json_array_size(cases), strict ? "" : " (score-based, informational)");
        tg_tokenizer_free(t);
        tg_gguf_close(g);
    }
    return bad;
}

/* Checks every ROOT/NAME/ with tokenizer.json and golden.json; skips when there is none. */
static void check_root(const char *root) {
    DIR *d = opendir(root);
    if (!d) {
        print_message("skipping: no folder %s\n", root);
        skip();
    }
    int n_fixtures = 0, bad = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        if (de->d_name[0] == '.') continue;
        char dir[1024], golden_path[1100], tok_path[1100];
        snprintf(dir, sizeof dir, "%s/%s", root, de->d_name);
        snprintf(golden_path, sizeof golden_path, "%s/golden.json", dir);
        snprintf(tok_path, sizeof tok_path, "%s/tokenizer.json", dir);
        if (!exists(golden_path) || !exists(tok_path)) continue;
        json_error_t je;
        json_t *golden = json_load_file(golden_path, 0, &je);
        if (!golden) print_error("%s:%d: %s\n", golden_path, je.line, je.text);
        assert_non_null(golden);
        if (json_object_get(golden, "tokenization")) {
            n_fixtures++;
            bad += check_fixture(dir, golden);
            bad += check_gguf_files(dir, golden);
        }
        json_decref(golden);
    }
    closedir(d);
    if (n_fixtures == 0) {
        print_message("skipping: nothing in %s has tokenizer.json and golden.json\n", root);
        skip();
    }
    assert_int_equal(bad, 0);
}

/* The model fixtures of tools/make_fixtures.py ($TG_FIXTURES_DIR overrides the folder). */
static void test_golden_fixtures(void **state) {
    (void)state;
    const char *root = getenv("TG_FIXTURES_DIR");
    check_root(root && *root ? root : "tests/data/fixtures");
}

/* The tokenizer variants of tests/data/tokenizer/make_golden.py. */
/* A 4 MB word of one letter capped at 1000 ids: refused (TG_ERR_TOO_MANY_TOKENS) before it is split into symbols;
 * test_serve.sh counts the server's peak memory for the same refusal. */
static void test_capped_one_letter(void **state) {
    (void)state;
    const char *dir = "tests/data/fixtures/smollm2";
    char path[512];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    if (!exists(path)) {
        print_message("skip: no %s\n", path);
        return;
    }
    tg_error err = {0};
    tg_tokenizer *t = tg_tokenizer_load_hf(dir, &err);
    assert_non_null(t);
    const size_t len = (size_t)4 << 20;
    char *text = malloc(len);
    assert_non_null(text);
    memset(text, 'a', len);
    int32_t *ids = NULL;
    size_t n = 0;
    bool over = false;
    assert_false(tg_tokenizer_encode_max(t, text, len, false, 1000, &ids, &n, &over, &err));
    assert_true(over);
    assert_int_equal(err.code, TG_ERR_TOO_MANY_TOKENS);
    assert_non_null(strstr(err.msg, "more than 1000 tokens"));
    /* the same word under the cap is encoded whole */
    assert_true(tg_tokenizer_encode_max(t, text, 900, false, 1000, &ids, &n, &over, &err));
    assert_false(over);
    assert_true(n > 0 && n <= 900);
    free(ids);
    free(text);
    tg_tokenizer_free(t);
}

static void test_golden_tokenizer_variants(void **state) {
    (void)state;
    check_root("tests/data/tokenizer");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_fixtures),
        cmocka_unit_test(test_golden_tokenizer_variants),
        cmocka_unit_test(test_capped_one_letter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
