/* cmd_sample.c — `tinygpt sample`: tokenise a prompt, run it through a session whose KV cache follows the cache
 * flags, then sample tokens and stream their text to stdout, with a banner and a speed/cache report on stderr.
 * Stops at EOS, after --tokens, at a --stop string (not printed), when the context is full (without a streaming policy), on Ctrl-C, or when stdout
 * is closed (a pipe into `head`), which is not an error. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/bundled.h"
#include "cli/cache_errors.h"
#include "cli/cli.h"
#include "cli/gen_run.h"
#include "cli/interrupt.h"
#include "cli/report.h"
#include "cli/report_json.h"
#include "cli/sampling_flags.h"
#include "cli/text.h"
#include "util/clock.h"

#define PROMPT_CHUNK 128 /* prompt tokens per tg_session_eval, so that Ctrl-C is noticed during long prompts */

static const char USAGE[] =
    "usage: tinygpt sample [MODEL] --prompt TEXT | --prompt-file FILE [options]\n"
    "\n"
    "Streams TEXT and a generated continuation to stdout; a banner and a report (speed, KV cache) go to stderr.\n"
    "MODEL is a GGUF file or a Hugging Face folder; without it, the bundled model " TG_BUNDLED_MODEL "\n"
    "next to the executable is used.\n"
    "\n"
    "sampling:\n"
    "  -p, --prompt TEXT              text to continue (default: empty, i.e. start from BOS)\n"
    "  -f, --prompt-file FILE         read the prompt from FILE, '-' = standard input (any length up to\n"
    "                                 " TG_TEXT_FILE_LIMIT_TEXT "; beyond the context it needs --streaming-llm-window)\n"
    "  -m, --model MODEL              the model (instead of the MODEL argument)\n"
    "  -n, --tokens N                 tokens to generate (default 128)\n"
    "  --temperature T                0 = greedy (default 0.8)\n"
    "  --top-k K                      keep the K most likely tokens, 0 = off (default 40)\n"
    "  --top-p P                      keep the smallest set with probability >= P, 1 = off (default 0.95)\n"
    "                                 (a folder's generation_config.json temperature / top_k / top_p replace\n"
    "                                 these defaults, as the banner says; the flags override them)\n"
    "  -s, --seed S                   PRNG seed (default: from the clock; the banner prints it)\n"
    "  -c, --context N                tokens an unbounded cache holds instead of the model's training context\n"
    "                                 (less caps memory; more runs at positions the model was never trained on)\n"
    "  -t, --threads N                worker threads, 0 = all cores (default 0)\n"
    "  --no-echo                      do not print the prompt (an incomplete UTF-8 character at its end is\n"
    "                                 dropped, not joined to the generated text)\n"
    "  --ignore-eos                   keep generating after an end-of-sequence token (the tokenizer's, and\n"
    "                                 every eos_token_id of config.json / generation_config.json)\n"
    "  --stop STRING                  end the output before STRING (repeatable; STRING is not printed: text that\n"
    "                                 could be its start is held back until it cannot)\n"
    "  --repeat-penalty R             llama.cpp's: divide positive logits (multiply negative ones) by R for the\n"
    "                                 ids of the last --repeat-last-n tokens, prompt included; 1 = off (default)\n"
    "  --repeat-last-n N              tokens the repeat penalty looks at (default 64; 0 = off)\n"
    "  --min-p P                      keep ids at least P times as likely as the top one (before temperature);\n"
    "                                 0 = off (default)\n"
    "  --json                         the report as one JSON object on stderr after the run, instead of the banner\n"
    "                                 and the text report (errors and warnings stay text lines)\n"
    "  --progress N                   every N generated tokens, one line on stderr: tokens so far, tokens/s over\n"
    "                                 the last N, resident memory, tokens held by the cache, CPU seconds so far\n"
    "  --prompt-cache FILE            llama.cpp's: the session after the prompt is saved to FILE (a snapshot,\n"
    "                                 docs/snapshot-format.md, written atomically after the run); a later run whose\n"
    "                                 prompt starts with that prompt's tokens restores it and reads only the rest\n"
    "                                 (same model and cache flags; otherwise the prompt is read whole and FILE\n"
    "                                 replaced); the report says how many tokens were reused\n"
    "\n";

/* What has been written to stdout: the errno of a failed write, and whether the text ends inside a line. */
typedef struct {
    int write_errno;
    bool mid_line;
} stdout_state;

/* Writes to stdout and flushes. 0: written; 1: the reader has gone (EPIPE), stop quietly; -1: another error, whose
 * errno is left in o->write_errno. */
static int emit(const char *text, size_t len, stdout_state *o) {
    if ((len > 0 && fwrite(text, 1, len, stdout) != len) || fflush(stdout) != 0) {
        o->write_errno = errno;
        return errno == EPIPE ? 1 : -1;
    }
    if (len > 0) o->mid_line = text[len - 1] != '\n';
    return 0;
}

/* Whether stdout and stderr are the same file, terminal or pipe (`2>&1`): the report must then start a new line. */
static bool stdout_is_stderr(void) {
    struct stat a, b;
    return fstat(STDOUT_FILENO, &a) == 0 && fstat(STDERR_FILENO, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

typedef struct {
    const char *model_path;
    const char *prompt;
    size_t prompt_len;
    char *prompt_owned; /* the text of --prompt-file (malloc'ed), or NULL */
    int64_t n_tokens;
    tg_sampler_params sp;
    bool sp_given[3];   /* --temperature, --top-k, --top-p given: the model's generation defaults do not apply */
    char sp_note[160];  /* which settings came from the model's files, for the banner ("" when none) */
    int threads;
    bool echo, ignore_eos;
    bool json;        /* --json: the report as one JSON object on stderr */
    tg_opt_list stops;
    int64_t progress; /* a progress line every this many generated tokens; 0 = none */
    const char *prompt_cache; /* --prompt-cache FILE, or NULL */
    tg_cache_params cache;
} sample_args;

/* Parses the flags into a; returns TG_EXIT_OK to go on, or the status to exit with (-1 for --help). */
static int parse_sample_args(int argc, char **argv, sample_args *a) {
    int64_t tokens = 128, threads = 0, progress = 0, context = 0;
    const char *prompt = "", *prompt_file = NULL, *model = NULL, *prompt_cache = NULL;
    bool no_echo = false, ignore_eos = false, json = false;
    enum { O_PROMPT, O_TOKENS, O_THREADS, O_NOECHO, O_IGNEOS, O_PROGRESS, O_PFILE, O_MODEL, O_CONTEXT, O_JSON,
           O_PCACHE, O_OWN };
    enum { O_SAMPLING = O_OWN, O_CACHE = O_SAMPLING + TG_SAMPLING_OPT_COUNT, O_ALL = O_CACHE + TG_CACHE_OPT_COUNT };
    tg_opt o[O_ALL] = {
        [O_PROMPT] = {.name = "--prompt", .alias = "-p", .kind = TG_OPT_STRING, .dest = &prompt},
        [O_TOKENS] = {.name = "--tokens", .alias = "-n", .kind = TG_OPT_INT, .dest = &tokens, .lo = 1, .hi = INT64_MAX},
        [O_THREADS] = {.name = "--threads", .alias = "-t", .kind = TG_OPT_INT, .dest = &threads, .lo = 0, .hi = 4096},
        [O_NOECHO] = {.name = "--no-echo", .kind = TG_OPT_FLAG, .dest = &no_echo},
        [O_IGNEOS] = {.name = "--ignore-eos", .kind = TG_OPT_FLAG, .dest = &ignore_eos},
        [O_PROGRESS] = {.name = "--progress", .kind = TG_OPT_INT, .dest = &progress, .lo = 1, .hi = INT64_MAX},
        [O_PFILE] = {.name = "--prompt-file", .alias = "-f", .kind = TG_OPT_STRING, .dest = &prompt_file},
        [O_MODEL] = {.name = "--model", .alias = "-m", .kind = TG_OPT_STRING, .dest = &model},
        [O_CONTEXT] = {.name = "--context", .alias = "-c", .kind = TG_OPT_INT, .dest = &context, .lo = 1,
                       .hi = INT32_MAX},
        [O_JSON] = {.name = "--json", .kind = TG_OPT_FLAG, .dest = &json},
        [O_PCACHE] = {.name = "--prompt-cache", .kind = TG_OPT_STRING, .dest = &prompt_cache},
    };
    tg_generate_flags flags;
    const int parsed = tg_sampling_cache_parse("sample", argc, argv, o, O_OWN, &flags);
    if (parsed != TG_EXIT_OK) return parsed;
    if (o[O_PROMPT].seen && o[O_PFILE].seen)
        return tg_usage_error("sample", "--prompt and --prompt-file: give one of them, not both");
    if (o[O_MODEL].seen && flags.n_pos)
        return tg_usage_error("sample", "--model and a MODEL argument: give one of them, not both");
    a->model_path = flags.n_pos ? flags.pos[0] : model;
    a->prompt = prompt;
    a->prompt_len = strlen(prompt);
    if (o[O_PFILE].seen) {
        char msg[600];
        a->prompt_owned = tg_read_text_file(prompt_file, TG_TEXT_FILE_LIMIT, &a->prompt_len, msg, sizeof msg);
        if (!a->prompt_owned) return tg_usage_error("sample", "--prompt-file %s", msg);
        a->prompt = a->prompt_owned;
    }
    a->n_tokens = tokens;
    const int sampling = tg_sampling_flags_params("sample", &flags.sampling, o + O_SAMPLING, &a->sp, a->sp_given);
    if (sampling != TG_EXIT_OK) return sampling;
    a->stops = flags.sampling.stops;
    a->threads = (int)threads;
    a->echo = !no_echo;
    a->ignore_eos = ignore_eos;
    a->json = json;
    a->progress = o[O_PROGRESS].seen ? progress : 0;
    a->prompt_cache = o[O_PCACHE].seen ? prompt_cache : NULL;
    if (a->prompt_cache && !a->prompt_cache[0]) return tg_usage_error("sample", "--prompt-cache: an empty file name");
    if (!tg_cache_flags_params("sample", &flags.cache, o + O_CACHE, &a->cache)) return TG_EXIT_USAGE;
    if (o[O_CONTEXT].seen) a->cache.context = context;
    return TG_EXIT_OK;
}

/* The sampling settings the user did not give, from the model's files (generation_config.json) when they set them;
 * a->sp_note says which, e.g. "generation_config.json: temperature 0.6, top-p 0.9". */
static void apply_generation_defaults(sample_args *a, const tg_model *model) {
    tg_generation_defaults d;
    tg_model_generation_defaults(model, &d);
    char list[120] = "";
    size_t len = 0;
    if (d.has_temperature && !a->sp_given[0]) {
        a->sp.temperature = d.temperature;
        len += (size_t)snprintf(list + len, sizeof list - len, "%stemperature %g", len ? ", " : "",
                                (double)d.temperature);
    }
    /* greedy decoding ignores top-k and top-p: they are taken but not named */
    const bool sampling = a->sp.temperature > 0.0f;
    if (d.has_top_k && !a->sp_given[1] && len < sizeof list) {
        a->sp.top_k = d.top_k;
        if (sampling) len += (size_t)snprintf(list + len, sizeof list - len, "%stop-k %d", len ? ", " : "", d.top_k);
    }
    if (d.has_top_p && !a->sp_given[2] && len < sizeof list) {
        a->sp.top_p = d.top_p;
        if (sampling)
            len += (size_t)snprintf(list + len, sizeof list - len, "%stop-p %g", len ? ", " : "", (double)d.top_p);
    }
    if (list[0]) snprintf(a->sp_note, sizeof a->sp_note, "%s: %s", d.source, list);
}

/* Everything the run owns, freed together. */
typedef struct {
    tg_gen_run g;     /* model, session, sampler, the generation step (EOS, --stop, --tokens, Ctrl-C), logits */
    int32_t *ids;     /* [n_prompt] the prompt's token ids */
    stdout_state out; /* errno of a failed write to stdout, and whether the text ends inside a line */
    void *snap;       /* --prompt-cache: the session after the prompt (snap_len bytes), written after the run */
    size_t snap_len;
} sample_run;

static void run_free(sample_run *r) {
    tg_gen_run_free(&r->g);
    free(r->ids);
    free(r->snap);
}

/* --prompt-cache: restores the saved session when the file exists; returns the prompt tokens it already holds
 * (its tokens are a prefix of ids[n]: the shorter ones, or all of them when the saved logits come with them), else
 * empties the session and returns 0 (a file that cannot be used is said on stderr: it is replaced after the run). */
static size_t restore_prompt_cache(const sample_args *a, sample_run *r, size_t n) {
    if (access(a->prompt_cache, F_OK) != 0) return 0; /* the first run */
    tg_error err = {0};
    tg_snapshot_restore out = {.logits = r->g.logits};
    if (!tg_session_restore_file(r->g.session, a->prompt_cache, &out, &err)) {
        tg_session_reset(r->g.session);
        fprintf(stderr, "tinygpt: --prompt-cache %s; the prompt is read whole and the file replaced\n", err.msg);
        return 0;
    }
    size_t held = 0;
    const int32_t *saved = tg_session_tokens(r->g.session, &held);
    if (held <= n && (held == 0 || memcmp(saved, r->ids, held * sizeof *saved) == 0) && (held < n || out.has_logits))
        return held;
    tg_session_reset(r->g.session);
    return 0;
}

/* The prompt's ids: BOS first when the model adds it; an empty prompt is BOS alone. */
static int prompt_ids(const sample_args *a, sample_run *r, size_t *n) {
    tg_error err = {0};
    if (!tg_tokenize(r->g.model, a->prompt, a->prompt_len, tg_model_adds_bos(r->g.model), &r->ids, n, &err))
        return tg_runtime_error("%s", err.msg);
    if (*n > 0) return TG_EXIT_OK;
    int32_t bos = tg_token_bos(r->g.model);
    if (bos < 0) {
        return tg_runtime_error("the prompt is empty and the model has no BOS token to start from; give --prompt TEXT");
    }
    free(r->ids);
    r->ids = malloc(sizeof *r->ids);
    if (!r->ids) return tg_runtime_error("out of memory");
    r->ids[0] = bos;
    *n = 1;
    return TG_EXIT_OK;
}

/* Resident memory of this process in KiB (from /proc/self/statm), or -1 where that is not available. */
static long long resident_kib(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    long long size = 0, resident = -1;
    if (fscanf(f, "%lld %lld", &size, &resident) != 2) resident = -1;
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return resident < 0 || page <= 0 ? -1 : resident * (page / 1024);
}

/* CPU time (user + system) of this process in seconds: unlike wall time, it does not grow when other processes
 * share the cores. */
static double cpu_seconds(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0.0;
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

/* The --progress line: "progress: 10000 tokens, 812.3 tokens/s, rss 23456 KiB, cache 260 tokens, cpu 12.3 s". */
static void report_progress(const sample_run *r, int64_t generated, int64_t since, double seconds) {
    tg_cache_report rep;
    tg_session_cache_report(r->g.session, &rep);
    fprintf(stderr, "progress: %" PRId64 " tokens, %.1f tokens/s, rss %lld KiB, cache %" PRId64 " tokens, cpu %.2f s\n",
            generated, seconds > 0 ? (double)since / seconds : 0.0, resident_kib(), rep.stored, cpu_seconds());
}

static int generate(const sample_args *a, sample_run *r, size_t n_prompt, const char *model_path) {
    tg_error err = {0};
    tg_model_info info;
    tg_model_get_info(r->g.model, &info);

    const size_t reused = a->prompt_cache ? restore_prompt_cache(a, r, n_prompt) : 0;
    int64_t room = tg_session_remaining(r->g.session);
    if ((int64_t)(n_prompt - reused) > room) {
        return tg_runtime_error("the prompt is %zu tokens but the context holds %" PRId64 "; bound the cache with "
                                "--streaming-llm-window M (and --streaming-llm-sink N) or --kv-budget BYTES",
                                n_prompt, room);
    }
    /* the cache of the whole run now (an unbounded one grows by chunks; at most its context): a --max-memory it
     * would pass fails here, before the banner, in one line */
    const int64_t fresh = (int64_t)(n_prompt - reused);
    const int64_t run = a->n_tokens > INT64_MAX - fresh ? INT64_MAX : fresh + a->n_tokens;
    if (!tg_session_reserve(r->g.session, run, &err)) {
        tg_cli_word_error(&err, &a->cache);
        return tg_runtime_error("%s", err.msg);
    }

    tg_cache_report rep;
    tg_session_cache_report(r->g.session, &rep);
    if (!a->json) {
        tg_report_banner(stderr, model_path, &info, &rep, &a->sp, tg_session_threads(r->g.session));
        if (a->sp_note[0]) fprintf(stderr, "tinygpt: sampling defaults from %s (flags override them)\n", a->sp_note);
    }

    double t0 = tg_monotonic_s();
    size_t done = reused;
    while (done < n_prompt && !tg_interrupted()) {
        size_t n = n_prompt - done < PROMPT_CHUNK ? n_prompt - done : PROMPT_CHUNK;
        if (!tg_session_eval(r->g.session, r->ids + done, n, NULL, r->g.logits, &err)) {
            tg_cli_word_error(&err, NULL);
            return tg_runtime_error("%s", err.msg); /* before the echo: nothing on stdout */
        }
        done += n;
    }
    double t_prompt = tg_monotonic_s() - t0;
    /* the state after the prompt, for the next run (written after this one) */
    if (a->prompt_cache && done == n_prompt) {
        const tg_snapshot_extras x = {.logits = r->g.logits};
        if (!tg_session_save(r->g.session, &x, &r->snap, &r->snap_len, &err)) return tg_runtime_error("%s", err.msg);
    }

    int write_state = 0; /* 0 ok, 1 reader gone, -1 error */
    const char *text = NULL;
    size_t len = 0;
    if (!tg_generator_start(r->g.gen, r->ids, n_prompt, a->echo, &text, &len, &err))
        return tg_runtime_error("%s", err.msg);
    write_state = emit(text, len, &r->out);

    const char *stop = NULL;
    bool context_full = false; /* stopped because an unbounded cache is full (said above, not as "stopped:") */
    int64_t generated = 0;
    t0 = tg_monotonic_s();
    double t_mark = t0; /* the last progress line */
    tg_gen_token t = {.stop = TG_GEN_GOING};
    while (done == n_prompt && write_state == 0 && !tg_interrupted()) {
        if (!tg_generator_step(r->g.gen, r->g.logits, &t, &err)) return tg_runtime_error("%s", err.msg);
        if (t.stop == TG_GEN_END) {
            stop = "end of sequence";
            break;
        }
        generated++;
        write_state = emit(t.text, t.len, &r->out);
        if (t.stop == TG_GEN_STOP_STRING) {
            if (write_state == 0) stop = "stop string";
            break;
        }
        if (a->progress > 0 && generated % a->progress == 0) {
            double now = tg_monotonic_s();
            report_progress(r, generated, a->progress, now - t_mark);
            t_mark = now;
        }
        if (write_state != 0 || t.stop != TG_GEN_GOING) break; /* --tokens, Ctrl-C: the last token not evaluated */
        if (tg_session_remaining(r->g.session) < 1) {
            if (!a->json)
                fprintf(stderr,
                        "tinygpt: stopped after %" PRId64 " tokens: the context (%d tokens) is full; "
                        "--streaming-llm-window M keeps generating with a bounded cache\n",
                        generated, info.context_length);
            context_full = true;
            break;
        }
        if (!tg_session_eval(r->g.session, &t.id, 1, NULL, r->g.logits, &err)) {
            tg_cli_word_error(&err, NULL);
            return tg_runtime_error("%s", err.msg);
        }
    }
    double t_gen = tg_monotonic_s() - t0;
    if (tg_interrupted()) stop = "interrupted";

    if (write_state == 0 && t.stop != TG_GEN_STOP_STRING) {
        if (!tg_generator_finish(r->g.gen, &t, &err)) return tg_runtime_error("%s", err.msg);
        if (t.stop == TG_GEN_STOP_STRING) stop = "stop string";
        write_state = emit(t.text, t.len, &r->out);
    }
    /* a final newline on a terminal, and wherever the report would otherwise be glued to the text (2>&1) */
    if (write_state == 0 && r->out.mid_line && (isatty(STDOUT_FILENO) || stdout_is_stderr()))
        write_state = emit("\n", 1, &r->out);
    if (write_state < 0) return tg_runtime_error("writing to stdout: %s", strerror(r->out.write_errno));
    if (r->snap && !tg_snapshot_write_file(a->prompt_cache, r->snap, r->snap_len, &err))
        return tg_runtime_error("--prompt-cache %s", err.msg);
    const int64_t prefilled = (int64_t)(done - reused);

    tg_session_cache_report(r->g.session, &rep);
    if (a->json) {
        const char *why = "tokens"; /* why the generation ended: --tokens unless something else */
        if (stop) why = stop;
        else if (context_full) why = "context full";
        else if (write_state == 1) why = "stdout closed";
        json_t *pc = a->prompt_cache ? json_pack("{s:s, s:I, s:I}", "file", a->prompt_cache, "reused",
                                                 (json_int_t)reused, "prefilled", (json_int_t)prefilled)
                                     : json_null();
        json_t *o = json_pack("{s:s, s:o, s:o, s:o, s:i, s:o, s:o, s:s, s:o, s:o}", "model", model_path, "model_info",
                              tg_json_model_info(&info), "sampling", tg_json_sampler(&a->sp),
                              "sampling_defaults_from", a->sp_note[0] ? json_string(a->sp_note) : json_null(),
                              "threads", tg_session_threads(r->g.session), "prompt",
                              tg_json_speed(prefilled, t_prompt),
                              "generated", tg_json_speed(generated, t_gen), "stop", why, "cache",
                              tg_json_cache_report(&rep), "prompt_cache", pc);
        if (!tg_json_print(stderr, o))
            return tg_runtime_error("--json: the report could not be written (out of memory, or a model path that "
                                    "is not UTF-8)");
        return TG_EXIT_OK;
    }
    tg_report_speed(stderr, "prompt", prefilled, t_prompt);
    if (a->prompt_cache)
        fprintf(stderr, "prompt cache: reused %zu of %zu prompt tokens, prefilled %" PRId64 " (%s)\n", reused,
                n_prompt, prefilled, a->prompt_cache);
    tg_report_speed(stderr, "generated", generated, t_gen);
    if (stop) fprintf(stderr, "stopped: %s\n", stop);
    tg_report_cache(stderr, &rep);
    return TG_EXIT_OK;
}

static int sample_main(sample_args *ap);

/* The generator's abort callback: Ctrl-C. */
static bool interrupted(void *user) {
    (void)user;
    return tg_interrupted();
}

int tg_cmd_sample(int argc, char **argv) {
    sample_args a = {0};
    int status = parse_sample_args(argc, argv, &a);
    if (!tg_help_printed(&status, USAGE) && status == TG_EXIT_OK) status = sample_main(&a);
    free(a.prompt_owned);
    return status;
}

/* Loads the model and runs the sampling of the parsed arguments (the caller frees the prompt). */
static int sample_main(sample_args *ap) {
    sample_args a = *ap;
    int status;
    char bundled[4200];
    a.model_path = tg_model_or_bundled(a.model_path, "sample", bundled, sizeof bundled);
    if (!a.model_path) return TG_EXIT_ERROR;

    sample_run r = {0};
    tg_error err = {0};
    r.g.model = tg_model_load(a.model_path, &err);
    if (!r.g.model) return tg_runtime_error("%s", err.msg);
    tg_model_info info;
    tg_model_get_info(r.g.model, &info);
    if (!info.has_weights) {
        run_free(&r);
        return tg_runtime_error("%s has no weights (a vocab-only file): it can tokenize but not sample",
                                a.model_path);
    }
    size_t n_prompt = 0;
    status = prompt_ids(&a, &r, &n_prompt);
    if (status != TG_EXIT_OK) {
        run_free(&r);
        return status;
    }
    apply_generation_defaults(&a, r.g.model);
    tg_generator_params gp = tg_generator_default_params();
    gp.max_tokens = a.n_tokens;
    gp.stops = a.stops.items;
    gp.n_stops = a.stops.n;
    gp.ignore_eos = a.ignore_eos;
    gp.abort = interrupted;
    status = tg_gen_run_open(&r.g, &a.cache, a.threads, &a.sp, &gp);
    if (status != TG_EXIT_OK) {
        run_free(&r);
        return status;
    }

    tg_interrupt_catch();

    status = generate(&a, &r, n_prompt, a.model_path);
    run_free(&r);
    return status;
}
