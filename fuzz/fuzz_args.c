/* fuzz_args.c — libFuzzer harness for the command-line parser (src/cli/args.c) and the cache-flag validation
 * behind it. The input is argv, words separated by NUL bytes, parsed against the option table of `tinygpt sample`
 * (every option kind, with the shared cache flags of tg_cache_flags_options); the cache flags become tg_cache_params
 * through tg_cache_flags_params as in the CLI, and are checked against a tiny model with tg_cache_bytes and, when
 * small enough, a real session that evaluates a few tokens.
 * Checked: the parser never reads past argv, a usage error prints exactly one line, values land only in range. */
#include "fuzz_common.h"

#include <math.h>

#include "cli/args.h"

#define MAX_WORDS 64

static tg_model *args_model; /* fuzz/data/tiny.gguf, loaded once */

static int args_capture_fd = -1;

static void args_cleanup(void) {
    tg_model_free(args_model);
    args_model = NULL;
    if (args_capture_fd >= 0) close(args_capture_fd);
    args_capture_fd = -1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    args_model = fuzz_load_tiny_model();
    atexit(args_cleanup);
    return 0;
}

/* stderr is redirected into args_capture_fd (a temporary file) while the parser runs, to count the lines it
 * printed. */
/* The bytes the parser wrote to stderr: none unless it reported a usage error, then exactly one line. */
static void args_check_stderr(bool usage_error) {
    char buf[4096];
    ssize_t n = pread(args_capture_fd, buf, sizeof buf, 0);
    if (n < 0) fuzz_die("pread", "");
    if (!usage_error) {
        if (n != 0) fuzz_die("tg_args_parse", "printed without a usage error");
        return;
    }
    if (n == 0 || buf[n - 1] != '\n' || memchr(buf, '\n', (size_t)n) != buf + n - 1)
        fuzz_die("tg_args_parse", "usage message is not exactly one line");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* words: NUL-separated copies, each its own allocation so ASan sees reads past a word's end */
    char *words[MAX_WORDS + 1];
    int argc = 0;
    size_t i = 0;
    while (i <= size && argc < MAX_WORDS) {
        const uint8_t *nul = memchr(data + i, '\0', size - i);
        size_t len = nul ? (size_t)(nul - (data + i)) : size - i;
        words[argc] = malloc(len + 1);
        memcpy(words[argc], data + i, len);
        words[argc][len] = '\0';
        argc++;
        i += len + 1;
        if (!nul) break;
    }
    words[argc] = NULL;

    int64_t tokens = 128, top_k = 40, threads = 0;
    double temperature = 0.8, top_p = 0.95;
    uint64_t seed = 0;
    const char *prompt = "";
    bool no_echo = false;
    /* the options of `tinygpt sample`, then the shared cache flags exactly as the CLI adds them */
    enum { O_PROMPT, O_TOKENS, O_TEMP, O_TOPK, O_TOPP, O_SEED, O_THREADS, O_NOECHO, O_OWN };
    tg_opt o[O_OWN + TG_CACHE_OPT_COUNT] = {
        [O_PROMPT] = {.name = "--prompt", .kind = TG_OPT_STRING, .dest = &prompt},
        [O_TOKENS] = {.name = "--tokens", .kind = TG_OPT_INT, .dest = &tokens, .lo = 1, .hi = INT64_MAX},
        [O_TEMP] = {.name = "--temperature", .kind = TG_OPT_FLOAT, .dest = &temperature, .flo = 0, .fhi = 1e4},
        [O_TOPK] = {.name = "--top-k", .kind = TG_OPT_INT, .dest = &top_k, .lo = 0, .hi = INT32_MAX},
        [O_TOPP] = {.name = "--top-p", .kind = TG_OPT_FLOAT, .dest = &top_p, .flo = 0, .fhi = 1},
        [O_SEED] = {.name = "--seed", .kind = TG_OPT_U64, .dest = &seed},
        [O_THREADS] = {.name = "--threads", .kind = TG_OPT_INT, .dest = &threads, .lo = 0, .hi = 4096},
        [O_NOECHO] = {.name = "--no-echo", .kind = TG_OPT_FLAG, .dest = &no_echo},
    };
    tg_cache_flags cf;
    tg_cache_flags_options(&cf, o + O_OWN);
    const char *pos[2];
    size_t n_pos = 0;

    if (args_capture_fd < 0) {
        FILE *f = tmpfile();
        if (!f) fuzz_die("tmpfile", "");
        args_capture_fd = dup(fileno(f));
        fclose(f);
    }
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    if (saved < 0 || ftruncate(args_capture_fd, 0) != 0 || lseek(args_capture_fd, 0, SEEK_SET) != 0 ||
        dup2(args_capture_fd, STDERR_FILENO) < 0)
        fuzz_die("redirecting stderr", "");
    tg_args_status st = tg_args_parse("sample", argc, words, o, O_OWN + TG_CACHE_OPT_COUNT, pos, 2, &n_pos);
    tg_cache_params c;
    if (st == TG_ARGS_OK && !tg_cache_flags_params("sample", &cf, o + O_OWN, &c)) st = TG_ARGS_USAGE;
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    args_check_stderr(st == TG_ARGS_USAGE);

    if (st == TG_ARGS_OK) {
        if (n_pos > 2) fuzz_die("tg_args_parse", "too many positionals");
        if (tokens < 1 || top_k < 0 || threads < 0 || threads > 4096 || cf.sink < 0 || cf.window < 0 ||
            cf.group < 0 || cf.residual < 0 || cf.budget < 0 || !(temperature >= 0 && temperature <= 1e4) ||
            !(top_p >= 0 && top_p <= 1))
            fuzz_die("tg_args_parse", "a value outside its range");
        tg_error err = {0};
        size_t bytes = tg_cache_bytes(args_model, &c, 1000, &err);
        if (bytes == 0) {
            fuzz_check_error(&err, "tg_cache_bytes");
        } else if (bytes < ((size_t)64 << 20) && (c.window == 0 || c.window < 100000) &&
                   (c.budget_bytes == 0 || c.budget_bytes < (64 << 20))) {
            /* the library's own memory check, at a limit under libFuzzer's -malloc_limit_mb: tg_cache_bytes above
             * counts 1000 tokens, but a session allocates every sink it was asked for (100 M sinks = 1.6 GB) */
            c.max_memory = (int64_t)256 << 20;
            tg_session *s = tg_session_new(args_model, &c, 1, &err);
            if (s) {
                int32_t ids[12] = {72, 101, 108, 108, 111, 32, 119, 111, 114, 108, 100, 33};
                float *logits = malloc((size_t)tg_vocab_size(args_model) * sizeof *logits);
                for (int k = 0; k < 3; k++) {
                    if (!tg_session_eval(s, ids, 12, NULL, logits, &err)) {
                        fuzz_check_error(&err, "tg_session_eval");
                        break;
                    }
                    for (int32_t v = 0; v < tg_vocab_size(args_model); v++)
                        if (!isfinite(logits[v])) fuzz_die("tg_session_eval", "non-finite logits without an error");
                }
                free(logits);
                tg_session_free(s);
            } else {
                fuzz_check_error(&err, "tg_session_new");
            }
        }
    }
    int64_t size_out;
    tg_kv_precision prec;
    for (int k = 0; k < argc; k++) {
        (void)tg_parse_size(words[k], &size_out);
        (void)tg_kv_precision_parse(words[k], &prec);
    }
    for (int k = 0; k < argc; k++) free(words[k]);
    return 0;
}
