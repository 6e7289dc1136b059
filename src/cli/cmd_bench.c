/* cmd_bench.c — `tinygpt bench`: prompt processing speed (ppP), generation speed at several cache depths (tgN after
 * D tokens already in the cache), peak RSS, KV bytes, and the roofline of each generation test: the bytes one
 * generated token must read (weights + the cache at that depth) divided by the machine's read bandwidth, measured
 * during that test by multi-threaded reads of a buffer much larger than the last-level cache (util/bandwidth.c: a
 * plain sequential read and software-prefetched interleaved streams, the best pattern's mean rate). The reads run in
 * a child process (cli/bandwidth_child.c: its buffer is not in our peak RSS), one pass every PROBE_EVERY generated
 * tokens with the clock stopped: the machine's bandwidth moves by a third within seconds on a shared guest, and a
 * roofline must be measured over the same seconds as the speed it bounds.
 * Prints a table, or one JSON object with --json. Uses only the public API. */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/bandwidth_child.h"
#include "cli/bench_side.h"
#include "cli/bench_tokens.h"
#include "cli/bundled.h"
#include "cli/cache_errors.h"
#include "cli/cli.h"
#include "cli/report.h"
#include "util/clock.h"

#define MAX_DEPTHS 16
#define MAX_COUNT ((int64_t)1 << 40) /* the largest depth or checkpoint: depth + tokens cannot overflow */
#define MAX_CHECKPOINTS 16
#define MAX_REPS 64
#define PROBE_EVERY 16 /* generated tokens between two passes of the bandwidth probe */
#define STR_(x) #x
#define STR(x) STR_(x)

static const char USAGE[] =
    "usage: tinygpt bench [MODEL] [options]\n"
    "\n"
    "Without MODEL, the bundled model " TG_BUNDLED_MODEL " next to the executable.\n"
    "Measures prompt processing (ppP: P prompt tokens in one evaluation, from an empty cache) and generation (tgN:\n"
    "N tokens generated one at a time, greedily, after D tokens are already in the cache) and prints tokens/s,\n"
    "the bytes each generated token must read (weights + the KV cache at that depth), the roofline those bytes\n"
    "allow at the read bandwidth measured during the test, peak RSS and the KV cache's bytes.\n"
    "\n"
    "  --prompt-tokens P              prompt tokens of the pp test (default 512; 0 = skip it)\n"
    "  --tokens N                     generated tokens of each tg test (default 128; 0 = skip)\n"
    "  --depth D[,D...]               tokens in the cache before each tg test (default 0); filled with random\n"
    "                                 tokens in prompt chunks. An unbounded cache whose depth + N exceeds the\n"
    "                                 model's context is given a larger context (noted in the output)\n"
    "  --repetitions R                run each test R times on fresh sessions and report the median (default 1)\n"
    "  --checkpoints K[,K...]         also report tokens/s over the 256 generated tokens ending at token K of\n"
    "                                 the first tg test (e.g. 1000,100000 with a StreamingLLM window)\n"
    "  --threads T                    worker threads, 0 = all cores (default 0)\n"
    "  --bandwidth-mib M              buffer of the read-bandwidth test in MiB (default 512; 0 = skip). Its reads\n"
    "                                 run every " STR(PROBE_EVERY) " generated tokens (untimed), in a child process\n"
    "  --json                         print one JSON object instead of the table\n"
    "  --no-warmup                    skip the unmeasured warm-up (one prompt and two tokens, as llama-bench does)\n"
    "  --side-by-side P,P[,...]       instead: generation only, one session per cache precision P (keys and values;\n"
    "                                 the other cache flags as given) decoding in alternate turns in this one\n"
    "                                 process, the order rotating: each P's median ms/token and, against the first,\n"
    "                                 the median and quartiles over rounds of the ratio of their turns' times, beside\n"
    "                                 the ratio of the bytes a token reads. Separate runs compare different seconds\n"
    "                                 of a memory whose speed moves; this compares the same ones. The bandwidth\n"
    "                                 test (and the rooflines) only with --bandwidth-mib given: "
    STR(TG_SIDE_PROBE_PASSES) " passes before\n"
    "                                 each depth's turns and " STR(TG_SIDE_PROBE_PASSES) " after them\n"
    "  --turn T                       --side-by-side: tokens per turn, the first untimed (default 4); each session\n"
    "                                 runs --tokens / T turns at each depth\n"
    "\n"
    "The KV cache flags and their defaults are those of `tinygpt sample` (an fp32 cache; llama.cpp's default cache\n"
    "type is f16: --kv-quantize fp16 compares like with like).\n"
    "\n";

typedef struct {
    const char *model_path;
    char model_buf[4200]; /* the bundled model's path when no MODEL is given */
    int64_t prompt_tokens, tokens, repetitions, threads, bandwidth_mib;
    int64_t depths[MAX_DEPTHS];
    int n_depths;
    int64_t checkpoints[MAX_CHECKPOINTS];
    int n_checkpoints;
    bool json, warmup;
    tg_cache_params cache;
    tg_kv_precision side[TG_SIDE_MAX]; /* --side-by-side */
    int n_side;
    int64_t turn;
} bench_args;

/* Parses "a,b,c" (non-negative integers) into out[max]; false on anything else. */
static bool parse_list(const char *s, int64_t *out, int max, int *n) {
    *n = 0;
    const char *p = s;
    while (*p) {
        char *end = NULL;
        if (*p < '0' || *p > '9' || *n >= max) return false;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || v > MAX_COUNT) return false;
        out[(*n)++] = v;
        p = end;
        if (*p == ',') p++;
        else if (*p) return false;
    }
    return *n > 0;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* --side-by-side LIST into a->side: two to TG_SIDE_MAX distinct precision names. The options it replaces or that
 * mean nothing without one session per test (opts: the parsed table of n) are usage errors beside it. */
static int parse_side(const char *list, const tg_opt *opts, size_t n, bench_args *a) {
#define PRECISION "it names the caches' precisions"
#define GENERATION "it measures generation only"
    static const struct {
        const char *option, *why;
    } clash[] = {{"--kv-quantize", PRECISION}, {"--kv-quantize-keys", PRECISION}, {"--kv-quantize-values", PRECISION},
                 {"--prompt-tokens", GENERATION}, {"--repetitions", GENERATION}, {"--checkpoints", GENERATION},
                 {"--no-warmup", "its first token of a turn is untimed"}};
#undef PRECISION
#undef GENERATION
    for (size_t i = 0; i < n; i++)
        for (size_t c = 0; c < sizeof clash / sizeof clash[0]; c++)
            if (opts[i].seen && strcmp(opts[i].name, clash[c].option) == 0)
                return tg_usage_error("bench", "%s cannot be given with --side-by-side (%s)", clash[c].option,
                                      clash[c].why);
    a->n_side = 0;
    for (const char *p = list;;) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        char name[16];
        tg_kv_precision prec;
        if (len == 0 || len >= sizeof name)
            return tg_usage_error("bench", "--side-by-side: expected precisions separated by commas, got '%s'", list);
        memcpy(name, p, len);
        name[len] = '\0';
        if (!tg_kv_precision_parse(name, &prec))
            return tg_usage_error("bench", "--side-by-side: unknown cache precision '%s' (fp32, fp16, bf16, int8, "
                                  "int4 or int2)", name);
        for (int k = 0; k < a->n_side; k++)
            if (a->side[k] == prec) return tg_usage_error("bench", "--side-by-side: '%s' is given twice", name);
        if (a->n_side == TG_SIDE_MAX)
            return tg_usage_error("bench", "--side-by-side: at most %d precisions", TG_SIDE_MAX);
        a->side[a->n_side++] = prec;
        if (!end) break;
        p = end + 1;
    }
    if (a->n_side < 2) return tg_usage_error("bench", "--side-by-side: expected two or more precisions, got '%s'", list);
    return TG_EXIT_OK;
}

/* Returns TG_EXIT_OK to go on, -1 for --help, or the exit status. */
static int parse_bench_args(int argc, char **argv, bench_args *a) {
    int64_t prompt = 512, tokens = 128, reps = 1, threads = 0, bw = 512, turn = 4;
    const char *depth = "0", *checkpoints = NULL, *side = NULL;
    bool json = false, no_warmup = false;
    enum { O_PROMPT, O_TOKENS, O_DEPTH, O_REPS, O_CHECK, O_THREADS, O_BW, O_JSON, O_NOWARM, O_SIDE, O_TURN, O_OWN };
    tg_opt o[O_OWN + TG_CACHE_OPT_COUNT] = {
        [O_PROMPT] = {.name = "--prompt-tokens", .kind = TG_OPT_INT, .dest = &prompt, .lo = 0, .hi = 1 << 24},
        [O_TOKENS] = {.name = "--tokens", .kind = TG_OPT_INT, .dest = &tokens, .lo = 0, .hi = 1 << 24},
        [O_DEPTH] = {.name = "--depth", .kind = TG_OPT_STRING, .dest = &depth},
        [O_REPS] = {.name = "--repetitions", .kind = TG_OPT_INT, .dest = &reps, .lo = 1, .hi = MAX_REPS},
        [O_CHECK] = {.name = "--checkpoints", .kind = TG_OPT_STRING, .dest = &checkpoints},
        [O_THREADS] = {.name = "--threads", .kind = TG_OPT_INT, .dest = &threads, .lo = 0, .hi = 4096},
        [O_BW] = {.name = "--bandwidth-mib", .kind = TG_OPT_INT, .dest = &bw, .lo = 0, .hi = 1 << 20},
        [O_JSON] = {.name = "--json", .kind = TG_OPT_FLAG, .dest = &json},
        [O_NOWARM] = {.name = "--no-warmup", .kind = TG_OPT_FLAG, .dest = &no_warmup},
        [O_SIDE] = {.name = "--side-by-side", .kind = TG_OPT_STRING, .dest = &side},
        [O_TURN] = {.name = "--turn", .kind = TG_OPT_INT, .dest = &turn, .lo = 2, .hi = 1 << 20},
    };
    tg_cache_flags cf;
    const char *pos[1];
    size_t n_pos = 0;
    const int parsed = tg_cache_args_parse("bench", argc, argv, o, O_OWN, &cf, pos, 1, &n_pos);
    if (parsed != TG_EXIT_OK) return parsed;
    if (!parse_list(depth, a->depths, MAX_DEPTHS, &a->n_depths))
        return tg_usage_error("bench", "--depth: expected up to %d non-negative integers (at most 2^40) separated "
                              "by commas, got '%s'", MAX_DEPTHS, depth);
    if (checkpoints && !parse_list(checkpoints, a->checkpoints, MAX_CHECKPOINTS, &a->n_checkpoints))
        return tg_usage_error("bench", "--checkpoints: expected up to %d positive integers separated by commas, got "
                              "'%s'", MAX_CHECKPOINTS, checkpoints);
    for (int i = 0; i < a->n_checkpoints; i++)
        if (a->checkpoints[i] < 1 || a->checkpoints[i] > tokens)
            return tg_usage_error("bench", "--checkpoints: %" PRId64 " is not within the %" PRId64
                                  " generated tokens (--tokens)", a->checkpoints[i], tokens);
    qsort(a->depths, (size_t)a->n_depths, sizeof a->depths[0], cmp_i64);
    if (side) {
        int status = parse_side(side, o, O_OWN + TG_CACHE_OPT_COUNT, a);
        if (status != TG_EXIT_OK) return status;
        if (tokens < turn || tokens % turn != 0)
            return tg_usage_error("bench", "--side-by-side: --tokens %" PRId64 " is not a whole number of turns "
                                  "(--turn %" PRId64 ")", tokens, turn);
        if (!o[O_BW].seen) bw = 0; /* side by side, the probe runs only when asked for */
    } else if (o[O_TURN].seen) {
        return tg_usage_error("bench", "--turn needs --side-by-side");
    }
    a->turn = turn;
    a->model_path = tg_model_or_bundled(n_pos ? pos[0] : NULL, "bench", a->model_buf, sizeof a->model_buf);
    if (!a->model_path) return TG_EXIT_ERROR;
    a->prompt_tokens = prompt;
    a->tokens = tokens;
    a->repetitions = reps;
    a->threads = threads;
    a->bandwidth_mib = bw;
    a->json = json;
    a->warmup = !no_warmup;
    if (!tg_cache_flags_params("bench", &cf, o + O_OWN, &a->cache)) return TG_EXIT_USAGE;
    return TG_EXIT_OK;
}

/* ---- the tests -------------------------------------------------------------------------------------------------- */

typedef struct {
    const char *name;  /* "pp512", "tg128" */
    int64_t depth;
    int64_t n;         /* tokens processed */
    double seconds;    /* median over the repetitions */
    double cpu_seconds; /* CPU time of the process in the median run (all threads) */
    int64_t kv_read;   /* KV bytes read per generated token at the mean depth of the test (tg only) */
    size_t kv_held;    /* bytes the cache holds (allocated) */
    double probe_s[TG_BANDWIDTH_PATTERNS]; /* seconds of each read pattern over the probe passes during the test */
    int64_t probe_passes;
} result;

typedef struct {
    const bench_args *a;
    tg_model *model;
    tg_model_info info;
    int32_t *ids;      /* [max(prompt_tokens, TG_BENCH_FILL_CHUNK)] random token ids */
    float *logits;     /* [vocab] */
    int64_t context;   /* 0 = the model's */
    tg_bw_child probe; /* pid 0: no bandwidth test */
    char err[600];
} bench_run;

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static tg_session *new_session(bench_run *r) {
    tg_error err = {0};
    tg_cache_params p = r->a->cache;
    p.context = r->context;
    tg_session *s = tg_session_new(r->model, &p, (int)r->a->threads, &err);
    if (!s) {
        tg_cli_word_error(&err, &p);
        snprintf(r->err, sizeof r->err, "%s", err.msg);
    }
    return s;
}

/* Evaluates random tokens until the session holds `depth` tokens. */
static bool fill_to(bench_run *r, tg_session *s, int64_t depth, uint64_t *state) {
    tg_error err = {0};
    if (tg_bench_fill(s, depth, r->ids, r->info.vocab_size, state, &err)) return true;
    tg_cli_word_error(&err, NULL);
    snprintf(r->err, sizeof r->err, "%s", err.msg);
    return false;
}

/* One pass of the bandwidth probe into t's sums (a no-op without a probe or t); the wall and CPU seconds it took are
 * added to *t0 and *c0, the starts of the caller's clocks, so that it is not timed. */
static void probe_pass(bench_run *r, result *t, double *t0, double *c0) {
    if (!t || r->probe.pid <= 0) return;
    const double w = tg_monotonic_s(), c = cpu_now();
    double sec[TG_BANDWIDTH_PATTERNS];
    if (tg_bw_child_pass(&r->probe, sec)) {
        for (int k = 0; k < TG_BANDWIDTH_PATTERNS; k++) t->probe_s[k] += sec[k];
        t->probe_passes++;
    }
    *t0 += tg_monotonic_s() - w;
    *c0 += cpu_now() - c;
}

/* Generates n tokens greedily, one evaluation each; stamps[2i] = seconds since the start after token i, stamps[2i + 1]
 * the process's CPU seconds since the start. With a probe, a bandwidth pass into probe_into's sums after every
 * PROBE_EVERY tokens and after the last, untimed. */
static bool generate(bench_run *r, tg_session *s, int64_t n, double *stamps, double *seconds, double *cpu,
                     result *probe_into) {
    tg_error err = {0};
    uint64_t state = 0x2545f4914f6cdd1dull;
    int32_t id;
    tg_bench_random_ids(&id, 1, r->info.vocab_size, &state);
    double t0 = tg_monotonic_s(), c0 = cpu_now();
    for (int64_t i = 0; i < n; i++) {
        if (!tg_session_eval(s, &id, 1, NULL, r->logits, &err)) {
            tg_cli_word_error(&err, NULL);
            snprintf(r->err, sizeof r->err, "%s", err.msg);
            return false;
        }
        id = tg_bench_argmax(r->logits, r->info.vocab_size);
        if ((i + 1) % PROBE_EVERY == 0 || i + 1 == n) probe_pass(r, probe_into, &t0, &c0);
        if (stamps) {
            stamps[2 * i] = tg_monotonic_s() - t0;
            stamps[2 * i + 1] = cpu_now() - c0;
        }
    }
    *seconds = tg_monotonic_s() - t0;
    *cpu = cpu_now() - c0;
    return true;
}

/* The median run of R (by wall time) into res. */
static void take_median(result *res, const double *secs, const double *cpus, int64_t reps) {
    double sorted[MAX_REPS];
    memcpy(sorted, secs, (size_t)reps * sizeof *secs);
    qsort(sorted, (size_t)reps, sizeof *sorted, cmp_double);
    res->seconds = sorted[reps / 2];
    for (int64_t i = 0; i < reps; i++)
        if (secs[i] == res->seconds) res->cpu_seconds = cpus[i];
}

/* Runs every test; results in res (pp first, then one tg per depth); *n_res set. False with r->err filled. */
static bool run_tests(bench_run *r, result *res, int *n_res, double *stamps) {
    const bench_args *a = r->a;
    uint64_t state = 0x9e3779b97f4a7c15ull;
    double secs[MAX_REPS], cpus[MAX_REPS];
    double tg_secs[MAX_DEPTHS][MAX_REPS], tg_cpus[MAX_DEPTHS][MAX_REPS];
    tg_error err = {0};
    *n_res = 0;
    if (a->warmup) {
        /* one unmeasured prompt and two generated tokens: the weights' pages mapped, code and caches warm */
        tg_session *s = new_session(r);
        if (!s) return false;
        int64_t warm = a->prompt_tokens > 0 ? a->prompt_tokens : 16;
        const int64_t ctx = r->context > 0 ? r->context : r->info.context_length;
        if (a->cache.window == 0 && warm + 2 > ctx) warm = ctx - 2;
        bool ok = fill_to(r, s, warm, &state);
        double sec, cpu;
        if (ok) ok = generate(r, s, 2, NULL, &sec, &cpu, NULL);
        tg_session_free(s);
        if (!ok) return false;
    }
    if (a->prompt_tokens > 0) {
        result *p = &res[(*n_res)++];
        p->name = "pp";
        p->n = a->prompt_tokens;
        for (int64_t rep = 0; rep < a->repetitions; rep++) {
            tg_session *s = new_session(r);
            if (!s) return false;
            tg_bench_random_ids(r->ids, a->prompt_tokens, r->info.vocab_size, &state);
            double t0 = tg_monotonic_s(), c0 = cpu_now();
            bool ok = tg_session_eval(s, r->ids, (size_t)a->prompt_tokens, NULL, r->logits, &err);
            secs[rep] = tg_monotonic_s() - t0;
            cpus[rep] = cpu_now() - c0;
            tg_cache_report rep_c;
            tg_session_cache_report(s, &rep_c);
            p->kv_held = rep_c.bytes_total;
            tg_session_free(s);
            if (!ok) {
                tg_cli_word_error(&err, NULL);
                snprintf(r->err, sizeof r->err, "%s", err.msg);
                return false;
            }
        }
        take_median(p, secs, cpus, a->repetitions);
    }
    if (a->tokens == 0) return true;
    const int first_tg = *n_res;
    for (int d = 0; d < a->n_depths; d++) {
        result *t = &res[(*n_res)++];
        t->name = "tg";
        t->depth = a->depths[d];
        t->n = a->tokens;
        const int64_t mean_depth = t->depth + a->tokens / 2;
        t->kv_read = (int64_t)tg_cache_bytes(r->model, &a->cache, mean_depth > 0 ? mean_depth : 1, &err);
        if (mean_depth == 0) t->kv_read = 0;
    }
    for (int64_t rep = 0; rep < a->repetitions; rep++) {
        tg_session *s = NULL;
        for (int d = 0; d < a->n_depths; d++) {
            result *t = &res[first_tg + d];
            if (s && tg_session_position(s) > t->depth) {
                tg_session_free(s);
                s = NULL;
            }
            if (!s && !(s = new_session(r))) return false;
            if (!fill_to(r, s, t->depth, &state)) {
                tg_session_free(s);
                return false;
            }
            double sec = 0, cpu = 0;
            if (!generate(r, s, a->tokens, rep == 0 && d == 0 ? stamps : NULL, &sec, &cpu, t)) {
                tg_session_free(s);
                return false;
            }
            tg_cache_report rc;
            tg_session_cache_report(s, &rc);
            t->kv_held = rc.bytes_total;
            tg_secs[d][rep] = sec;
            tg_cpus[d][rep] = cpu;
        }
        tg_session_free(s);
    }
    for (int d = 0; d < a->n_depths; d++) take_median(&res[first_tg + d], tg_secs[d], tg_cpus[d], a->repetitions);
    return true;
}

/* Tokens per second (wall when which == 0, per CPU second when 1) over the span tokens ending at token k. */
static double checkpoint_rate(const double *stamps, int64_t k, int64_t span, int which) {
    const double end = stamps[2 * (k - 1) + which], start = k - 1 - span >= 0 ? stamps[2 * (k - 1 - span) + which] : 0.0;
    return end > start ? (double)span / (end - start) : 0.0;
}

static int64_t checkpoint_span(int64_t k) {
    const int64_t span = k < 512 ? k / 2 : 256;
    return span < 1 ? 1 : span;
}

/* ---- output ------------------------------------------------------------------------------------------------------- */

static void json_str(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

/* The read bandwidth the probe measured during test t (bytes per second), 0 without passes. */
static double test_bandwidth(const bench_run *r, const result *t) {
    return t->probe_passes > 0 ? tg_bandwidth_rate(r->probe.bytes, t->probe_passes, t->probe_s) : 0.0;
}

static void print_results(const bench_run *r, const result *res, int n_res, const double *stamps, double bw,
                          int threads, int64_t peak_rss, const char *policy) {
    const bench_args *a = r->a;
    const int64_t wbytes = r->info.weight_bytes;
    if (a->json) {
        printf("{\"model\": ");
        json_str(a->model_path);
        printf(", \"architecture\": ");
        json_str(r->info.architecture);
        printf(", \"weight_types\": ");
        json_str(r->info.weight_types);
        printf(", \"n_params\": %" PRId64 ", \"weight_bytes_per_token\": %" PRId64 ", \"threads\": %d", r->info.n_params,
               wbytes, threads);
        printf(", \"kernel_isa\": \"%s\"", tg_kernel_isa());
        printf(", \"kv_keys\": \"%s\", \"kv_values\": \"%s\", \"cache_policy\": ",
               tg_kv_precision_name(a->cache.key_precision), tg_kv_precision_name(a->cache.value_precision));
        json_str(policy);
        printf(", \"context\": %" PRId64 ", \"read_bandwidth_bytes_per_s\": %.0f, \"peak_rss_bytes\": %" PRId64,
               r->context > 0 ? r->context : (int64_t)r->info.context_length, bw, peak_rss);
        printf(", \"results\": [");
        for (int i = 0; i < n_res; i++) {
            const result *t = &res[i];
            const bool tg = t->name[0] == 't';
            printf("%s{\"test\": \"%s%" PRId64 "\", \"depth\": %" PRId64 ", \"tokens\": %" PRId64
                   ", \"seconds\": %.9f, \"cpu_seconds\": %.9f, \"tokens_per_s\": %.3f, \"kv_bytes_held\": %zu",
                   i ? ", " : "", t->name, t->n, t->depth, t->n, t->seconds, t->cpu_seconds,
                   t->seconds > 0 ? (double)t->n / t->seconds : 0.0, t->kv_held);
            if (tg) {
                const double bytes = (double)wbytes + (double)t->kv_read, tbw = test_bandwidth(r, t);
                const double roof = tbw / bytes;
                printf(", \"kv_bytes_read_per_token\": %" PRId64 ", \"bytes_per_token\": %.0f", t->kv_read, bytes);
                if (tbw > 0)
                    printf(", \"read_bandwidth_bytes_per_s\": %.0f, \"bandwidth_passes\": %" PRId64
                           ", \"roofline_tokens_per_s\": %.3f, \"fraction_of_roofline\": %.4f",
                           tbw, t->probe_passes, roof, (double)t->n / t->seconds / roof);
            }
            printf("}");
        }
        printf("]");
        if (a->n_checkpoints > 0 && stamps) {
            printf(", \"checkpoints\": [");
            for (int i = 0; i < a->n_checkpoints; i++) {
                const int64_t k = a->checkpoints[i], span = checkpoint_span(k);
                printf("%s{\"token\": %" PRId64 ", \"tokens_per_s\": %.3f, \"tokens_per_cpu_s\": %.3f}", i ? ", " : "",
                       k, checkpoint_rate(stamps, k, span, 0), checkpoint_rate(stamps, k, span, 1));
            }
            printf("]");
        }
        printf("}\n");
        return;
    }
    char buf[64], buf2[64];
    tg_fmt_count(r->info.n_params, buf, sizeof buf);
    tg_fmt_bytes((double)wbytes, 1, buf2, sizeof buf2);
    printf("model      %s · %s · %s params · %s · %s of weights read per token\n", a->model_path,
           r->info.architecture, buf, r->info.weight_types, buf2);
    printf("cache      %s%s\n", policy, r->context > 0 ? " (context extended for the depth)" : "");
    printf("threads    %d (kernels: %s)\n", threads, tg_kernel_isa());
    if (bw > 0)
        printf("bandwidth  %.2f GB/s (reads of %" PRId64 " MiB in %d patterns, the best one's mean; during each tg test,"
               " every %d tokens, for its roofline)\n", bw / 1e9, a->bandwidth_mib, TG_BANDWIDTH_PATTERNS, PROBE_EVERY);
    printf("\n%-8s %7s %10s %10s %12s %13s %12s %12s\n", "test", "depth", "tokens/s", "ms/token", "read/token",
           "roofline t/s", "of roofline", "KV held");
    for (int i = 0; i < n_res; i++) {
        const result *t = &res[i];
        char name[32], held[32], read[32] = "-", roof_s[32] = "-", frac[32] = "-";
        snprintf(name, sizeof name, "%s%" PRId64, t->name, t->n);
        tg_fmt_bytes((double)t->kv_held, 1, held, sizeof held);
        const double tps = t->seconds > 0 ? (double)t->n / t->seconds : 0.0;
        if (t->name[0] == 't') {
            const double bytes = (double)wbytes + (double)t->kv_read;
            tg_fmt_bytes(bytes, 1, read, sizeof read);
            const double tbw = test_bandwidth(r, t);
            if (tbw > 0) {
                snprintf(roof_s, sizeof roof_s, "%.1f", tbw / bytes);
                snprintf(frac, sizeof frac, "%.1f%%", 100.0 * tps / (tbw / bytes));
            }
        }
        printf("%-8s %7" PRId64 " %10.2f %10.3f %12s %13s %12s %12s\n", name, t->depth, tps,
               tps > 0 ? 1e3 / tps : 0.0, read, roof_s, frac, held);
    }
    if (a->n_checkpoints > 0 && stamps) {
        printf("\n");
        for (int i = 0; i < a->n_checkpoints; i++) {
            const int64_t k = a->checkpoints[i], span = checkpoint_span(k);
            printf("at token %-9" PRId64 " %10.2f tokens/s, %10.2f per CPU second (over the previous %" PRId64
                   " tokens)\n", k, checkpoint_rate(stamps, k, span, 0), checkpoint_rate(stamps, k, span, 1), span);
        }
    }
    tg_fmt_bytes((double)peak_rss, 1, buf, sizeof buf);
    printf("\npeak RSS   %s\n", buf);
}

int tg_cmd_bench(int argc, char **argv) {
    bench_args a = {0};
    int status = parse_bench_args(argc, argv, &a);
    if (tg_help_printed(&status, USAGE) || status != TG_EXIT_OK) return status;

    bench_run r = {.a = &a, .probe = {.to_child = -1, .from_child = -1}};
    tg_error err = {0};
    r.model = tg_model_load(a.model_path, &err);
    if (!r.model) return tg_runtime_error("%s", err.msg);
    tg_model_get_info(r.model, &r.info);
    if (!r.info.has_weights) {
        tg_model_free(r.model);
        return tg_runtime_error("%s has no weights (a vocab-only file): nothing to benchmark", a.model_path);
    }
    const bool bounded = a.cache.window > 0;
    const int64_t need = a.depths[a.n_depths - 1] + a.tokens;
    if (!bounded && need > r.info.context_length) r.context = need;
    if (!bounded && a.prompt_tokens > r.info.context_length && a.prompt_tokens > r.context)
        r.context = a.prompt_tokens;
    if (a.n_side > 0) {
        tg_bench_side_args sa = {.model_path = a.model_path, .model = r.model, .info = &r.info, .base = a.cache,
                                 .n_precisions = a.n_side, .depths = a.depths, .n_depths = a.n_depths,
                                 .tokens = a.tokens, .turn = a.turn, .threads = (int)a.threads,
                                 .bandwidth_mib = a.bandwidth_mib, .json = a.json};
        memcpy(sa.precisions, a.side, sizeof a.side);
        sa.base.context = !bounded && need > r.info.context_length ? need : 0; /* no pp test: need alone */
        status = tg_bench_side_by_side(&sa);
        tg_model_free(r.model);
        return status;
    }
    int threads = a.threads > 0 ? (int)a.threads : tg_threads_all_cores();
    /* before any session starts its threads: the child is forked from a process with one */
    if (a.bandwidth_mib > 0) tg_bw_child_start_or_warn(&r.probe, a.bandwidth_mib, threads);

    size_t n_ids = (size_t)(a.prompt_tokens > TG_BENCH_FILL_CHUNK ? a.prompt_tokens : TG_BENCH_FILL_CHUNK);
    r.ids = malloc(n_ids * sizeof *r.ids);
    r.logits = malloc((size_t)r.info.vocab_size * sizeof *r.logits);
    double *stamps = a.tokens > 0 ? malloc(2 * (size_t)a.tokens * sizeof *stamps) : NULL;
    result res[1 + MAX_DEPTHS];
    memset(res, 0, sizeof res);
    int n_res = 0;
    if (!r.ids || !r.logits || (a.tokens > 0 && !stamps)) {
        status = tg_runtime_error("out of memory");
    } else if (!run_tests(&r, res, &n_res, stamps)) {
        status = tg_runtime_error("%s", r.err);
    } else {
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        const int64_t peak_rss = (int64_t)ru.ru_maxrss * 1024; /* the probe's buffer is the child's */
        char policy[256] = "";
        tg_session *s = new_session(&r);
        if (s) {
            tg_cache_report rep;
            tg_session_cache_report(s, &rep);
            snprintf(policy, sizeof policy, "%s", rep.policy);
            threads = tg_session_threads(s); /* what the team really has */
            tg_session_free(s);
        }
        /* the whole run's bandwidth: every pass made during a tg test, or three now when there was none */
        result all = {0};
        for (int i = 0; i < n_res; i++) {
            for (int k = 0; k < TG_BANDWIDTH_PATTERNS; k++) all.probe_s[k] += res[i].probe_s[k];
            all.probe_passes += res[i].probe_passes;
        }
        if (all.probe_passes == 0) {
            double t0 = 0, c0 = 0;
            for (int k = 0; k < 3; k++) probe_pass(&r, &all, &t0, &c0);
        }
        const double bw = test_bandwidth(&r, &all);
        print_results(&r, res, n_res, stamps, bw, threads, peak_rss, policy);
        if (fflush(stdout) != 0) status = tg_runtime_error("writing to stdout failed");
    }
    tg_bw_child_stop(&r.probe);
    free(stamps);
    free(r.ids);
    free(r.logits);
    tg_model_free(r.model);
    return status;
}
