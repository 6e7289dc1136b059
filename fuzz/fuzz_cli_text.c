/* fuzz_cli_text.c — libFuzzer harness for the CLI's handling of prompt and text files (src/cli/text.c). The input
 * is the content of a `tinygpt compare --prompts` file. It is read back through tg_read_text_file (and, with a
 * small limit, through the incremental reader), split into prompts by tg_text_lines, and every prompt goes through
 * exactly what compare does with it: tg_text_cell into a 256-byte stack buffer, 40 characters, plain and Markdown,
 * then tg_print_padded. Cells are also built into heap buffers of every small capacity (ASan sees one byte past).
 * The first prompts are tokenised with fuzz/data/tiny.gguf and fed to tg_detok_skip_prompt as `sample --no-echo`
 * does: afterwards nothing of the prompt may come out, and the next prompt's ids decode to valid UTF-8.
 * Checked: no write past a buffer, cells are valid UTF-8 without control characters, within 40 characters plus the
 * ellipsis, '|' escaped in Markdown; lines hold no '\n' or NUL and do not end in '\r'; padding reaches the width. */
#include "fuzz_common.h"

#include "cli/text.h"

#define CLITEXT_WIDTH 44
#define CLITEXT_MAX_DETOK_LINES 4

static tg_model *clitext_model; /* fuzz/data/tiny.gguf, loaded once */

static void clitext_cleanup(void) {
    tg_model_free(clitext_model);
    clitext_model = NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    clitext_model = fuzz_load_tiny_model();
    atexit(clitext_cleanup);
    return 0;
}

/* The contract of a cell of at most max_chars characters built from prompt p. */
static void clitext_check_cell(const char *cell, size_t used, size_t cap, size_t max_chars, bool markdown) {
    if (used >= cap || strlen(cell) != used) fuzz_die("tg_text_cell", "length or terminator wrong");
    if (!fuzz_utf8_valid((const uint8_t *)cell, used)) fuzz_die("tg_text_cell", "cell is not valid UTF-8");
    size_t chars = 0;
    for (size_t i = 0; i < used; chars++) {
        const unsigned char c = (unsigned char)cell[i];
        if (c < 0x20 || c == 0x7f) fuzz_die("tg_text_cell", "control character in a cell");
        if (markdown && c == '|' && (i == 0 || cell[i - 1] != '\\')) fuzz_die("tg_text_cell", "unescaped '|'");
        i += tg_utf8_char_len(cell + i, used - i);
    }
    /* markdown escapes count as one character of the prompt but print as two */
    if (!markdown && chars > max_chars + 1) fuzz_die("tg_text_cell", "more characters than asked for");
}

/* What compare does with one prompt, and the same into every small heap capacity. */
static void clitext_cells(const char *prompt) {
    for (int md = 0; md < 2; md++) {
        char cell[256];
        size_t used = tg_text_cell(prompt, 40, md, cell, sizeof cell);
        clitext_check_cell(cell, used, sizeof cell, 40, md);
        char *out = NULL;
        size_t out_len = 0;
        FILE *f = open_memstream(&out, &out_len);
        if (!f) fuzz_die("open_memstream", "");
        tg_print_padded(f, cell, CLITEXT_WIDTH);
        fclose(f);
        const size_t chars = tg_utf8_count(cell, used);
        const size_t want = used + (chars < CLITEXT_WIDTH ? CLITEXT_WIDTH - chars : 0);
        if (out_len != want || memcmp(out, cell, used) != 0) fuzz_die("tg_print_padded", "wrong output");
        free(out);
    }
    for (size_t cap = 1; cap <= 24; cap++) {
        char *cell = malloc(cap);
        const size_t max_chars = cap % 7;
        size_t used = tg_text_cell(prompt, max_chars, cap & 1, cell, cap);
        clitext_check_cell(cell, used, cap, max_chars, cap & 1);
        free(cell);
    }
}

/* `sample --no-echo`: the prompt's ids, then the next prompt's ids as the "generated" text. */
static void clitext_no_echo(const char *prompt, const char *generated) {
    int32_t *ids = NULL, *gen = NULL;
    size_t n = 0, n_gen = 0;
    tg_error err = {0};
    if (!tg_tokenize(clitext_model, prompt, strlen(prompt), false, &ids, &n, &err)) {
        fuzz_check_error(&err, "tg_tokenize");
        return;
    }
    if (!tg_tokenize(clitext_model, generated, strlen(generated), false, &gen, &n_gen, &err)) {
        fuzz_check_error(&err, "tg_tokenize");
        free(ids);
        return;
    }
    tg_detok *d = tg_detok_new(clitext_model, &err);
    if (!d) fuzz_die("tg_detok_new", err.msg);
    tg_detok_skip_prompt(d, ids, n);
    const char *text = NULL;
    size_t len = 0;
    tg_detok_flush(d, &text, &len);
    if (len != 0) fuzz_die("tg_detok_skip_prompt", "the prompt's tail came out after --no-echo");
    for (size_t i = 0; i < n_gen; i++) {
        tg_detok_push(d, gen[i], &text, &len);
        if (!fuzz_utf8_valid((const uint8_t *)text, len)) fuzz_die("tg_detok_push", "invalid UTF-8");
    }
    tg_detok_flush(d, &text, &len);
    if (!fuzz_utf8_valid((const uint8_t *)text, len)) fuzz_die("tg_detok_flush", "invalid UTF-8");
    tg_detok_free(d);
    free(ids);
    free(gen);
}

/* The file through the whole-file reader (the real limit) and the incremental one (a limit of half the input). */
static void clitext_read_back(const uint8_t *data, size_t size) {
    const char *dir = fuzz_scratch_dir();
    fuzz_write_file(dir, "prompts.txt", data, size);
    char path[512], msg[512];
    snprintf(path, sizeof path, "%s/prompts.txt", dir);
    size_t len = 0;
    char *text = tg_read_text_file(path, TG_TEXT_FILE_LIMIT, &len, msg, sizeof msg);
    if (!text || len != size || memcmp(text, data, size) != 0 || text[len] != '\0')
        fuzz_die("tg_read_text_file", "did not read the file back");
    free(text);
    const size_t limit = size / 2;
    text = tg_read_text_file(path, limit, &len, msg, sizeof msg);
    if (size > limit) {
        if (text || !strstr(msg, path) || strchr(msg, '\n')) fuzz_die("tg_read_text_file", "limit not enforced");
    } else if (!text || len != size) {
        fuzz_die("tg_read_text_file", "refused a file within the limit");
    }
    free(text);
    tg_text_reader r;
    if (!tg_text_reader_open(&r, path, TG_TEXT_FILE_LIMIT, msg, sizeof msg)) fuzz_die("tg_text_reader_open", msg);
    for (size_t want = 1; want <= size + 1; want = want * 3 + 1) {
        if (!tg_text_reader_fill(&r, path, want, msg, sizeof msg)) fuzz_die("tg_text_reader_fill", msg);
        const size_t expect = want < size ? want : size;
        if (r.len < expect || r.len > size || memcmp(r.buf, data, r.len) != 0 || r.buf[r.len] != '\0')
            fuzz_die("tg_text_reader_fill", "wrong bytes buffered");
    }
    tg_text_reader_close(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    clitext_read_back(data, size);
    char **lines = NULL;
    size_t n = 0;
    if (!tg_text_lines((const char *)data, size, &lines, &n)) fuzz_die("tg_text_lines", "out of memory");
    for (size_t i = 0; i < n; i++) {
        const size_t len = strlen(lines[i]);
        if (len == 0 || strchr(lines[i], '\n') || lines[i][len - 1] == '\r') fuzz_die("tg_text_lines", "bad line");
        clitext_cells(lines[i]);
        if (i < CLITEXT_MAX_DETOK_LINES && len < 4096) clitext_no_echo(lines[i], i + 1 < n ? lines[i + 1] : "");
    }
    tg_text_lines_free(lines, n);
    return 0;
}
