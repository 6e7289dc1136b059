/* test_regress.c — replays the inputs that once crashed a fuzz harness (tests/regress/<harness>/, kept after the
 * fix) and the seed corpora (fuzz/seeds/<harness>/) through the harnesses' own checks, in the sanitizer build:
 * any broken contract aborts, any memory or undefined-behaviour error is reported by ASan/UBSan. The harnesses are
 * linked in, each compiled with its libFuzzer entry points renamed regress_<name>_one / regress_<name>_init (the
 * Makefile's TOOL_PARTS_test_regress), with the tool's src/cli/args.c and src/cli/text.c that two of them test.
 * Run from the repository root (tests/run.sh does). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cmocka.h>

/* Under ASan an allocation above 1 GiB is an error: a small hostile file must never make a reader ask for that much
 * (the fuzzers run with -malloc_limit_mb=1024 for the same reason). */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "max_allocation_size_mb=1024"; }

typedef int (*one_input_fn)(const uint8_t *data, size_t size);

/* The harnesses' entry points (fuzz/fuzz_<name>.c), renamed by the Makefile. */
int regress_gguf_one(const uint8_t *data, size_t size);
int regress_hf_one(const uint8_t *data, size_t size);
int regress_folder_one(const uint8_t *data, size_t size);
int regress_tokenizer_json_one(const uint8_t *data, size_t size);
int regress_tokenizer_text_one(const uint8_t *data, size_t size);
int regress_tokenize_one(const uint8_t *data, size_t size);
int regress_tokenize_init(int *argc, char ***argv);
int regress_args_one(const uint8_t *data, size_t size);
int regress_args_init(int *argc, char ***argv);
int regress_cli_text_one(const uint8_t *data, size_t size);
int regress_cli_text_init(int *argc, char ***argv);

/* Feeds every regular file of dir to one(); returns how many (0 when dir is absent). */
static size_t replay_dir(one_input_fn one, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    size_t count = 0;
    struct dirent *e;
    char path[1024];
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        uint8_t *buf = malloc((size_t)st.st_size + 1);
        assert_non_null(buf);
        size_t n = fread(buf, 1, (size_t)st.st_size, f);
        fclose(f);
        assert_int_equal(n, (size_t)st.st_size);
        assert_int_equal(one(buf, n), 0);
        free(buf);
        count++;
    }
    closedir(d);
    return count;
}

/* The regression inputs of `harness` (at least min_regress of them must exist) and its seeds (at least one). */
static void replay(one_input_fn one, const char *harness, size_t min_regress) {
    char dir[256];
    snprintf(dir, sizeof dir, "tests/regress/%s", harness);
    size_t n_regress = replay_dir(one, dir);
    snprintf(dir, sizeof dir, "fuzz/seeds/%s", harness);
    size_t n_seeds = replay_dir(one, dir);
    print_message("%s: %zu regression inputs, %zu seeds\n", harness, n_regress, n_seeds);
    assert_true(n_regress >= min_regress);
    assert_true(n_seeds >= 1);
}

static void test_gguf(void **state) {
    (void)state;
    replay(regress_gguf_one, "gguf", 1);
}

static void test_hf(void **state) {
    (void)state;
    replay(regress_hf_one, "hf", 1);
}

static void test_folder(void **state) {
    (void)state;
    replay(regress_folder_one, "folder", 1);
}

static void test_tokenizer_json(void **state) {
    (void)state;
    replay(regress_tokenizer_json_one, "tokenizer_json", 0);
}

static void test_tokenizer_text(void **state) {
    (void)state;
    replay(regress_tokenizer_text_one, "tokenizer_text", 1);
}

static void test_tokenize(void **state) {
    (void)state;
    regress_tokenize_init(NULL, NULL);
    replay(regress_tokenize_one, "tokenize", 1);
}

static void test_args(void **state) {
    (void)state;
    regress_args_init(NULL, NULL);
    replay(regress_args_one, "args", 1);
}

static void test_cli_text(void **state) {
    (void)state;
    regress_cli_text_init(NULL, NULL);
    replay(regress_cli_text_one, "cli_text", 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gguf),           cmocka_unit_test(test_hf),       cmocka_unit_test(test_folder),
        cmocka_unit_test(test_tokenizer_json), cmocka_unit_test(test_tokenizer_text),
        cmocka_unit_test(test_tokenize),       cmocka_unit_test(test_args),     cmocka_unit_test(test_cli_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
