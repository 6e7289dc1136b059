/* cmd_chat.c — `tinygpt chat MODEL`: a conversation rendered with the model's chat template. Each turn renders the
 * whole conversation and feeds the session only the text past what the cache already holds (no re-prefill of the
 * history); when a rendering does not extend the previous one the session is rebuilt from the full text, which is
 * said on stderr. Replies stream to stdout and end at EOS, the template's end-of-turn token or --tokens; a report
 * goes to stderr after each turn. User turns come from standard input, one per line (on a terminal through
 * libedit, with line editing and history), after the history of --messages FILE. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/sampling_flags.h"
#include "cli/bundled.h"
#include "cli/cache_errors.h"
#include "chat/conversation.h"
#include "cli/cli.h"
#include "cli/gen_run.h"
#include "cli/line_input.h"
#include "cli/report.h"
#include "cli/text.h"
#include "util/clock.h"

#define PROMPT_CHUNK 128  /* prompt tokens per tg_session_eval, so that Ctrl-C is noticed */
#define MAX_EOT 8         /* end-of-turn ids: EOS and the template's own markers */

static const char USAGE[] =
    "usage: tinygpt chat [MODEL] [options]\n"
    "\n"
    "Without MODEL, the bundled model " TG_BUNDLED_MODEL " next to the executable.\n"
    "Talks to an instruction-tuned model through its chat template (tokenizer.chat_template in a GGUF,\n"
    "chat_template.jinja or tokenizer_config.json in a folder). User turns are read from standard input, one per\n"
    "line; replies go to stdout, a report after each turn to stderr. The KV cache persists across turns: each turn\n"
    "feeds only the new text. Lines /stats (the cache report) and /quit are commands.\n"
    "\n"
    "conversation:\n"
    "  -m, --model MODEL              the model (instead of the MODEL argument)\n"
    "  --chat-template NAME           use a built-in template instead of the model's\n"
    "  --system TEXT                  a system message first\n"
    "  --system-file FILE             the system message from FILE ('-' = standard input)\n"
    "  --messages FILE.json           the conversation so far, OpenAI's format: [{\"role\": ..., \"content\": ...}];\n"
    "                                 when it ends with a user message, that is answered first\n"
    "  --print-prompt                 print the rendered conversation (with the generation prompt; the user turns\n"
    "                                 of standard input when it is not a terminal) and exit; reads only the\n"
    "                                 tokenizer files\n"
    "  --quiet                        no banner and no report after each turn\n"
    "  --session FILE                 keep the conversation in FILE (a snapshot, docs/snapshot-format.md: the\n"
    "                                 KV cache, the messages, the sampler's state): resumed from it when it exists\n"
    "                                 (same model and cache flags; not with --system / --messages), saved after\n"
    "                                 each turn, atomically (a crash leaves the previous turn's file)\n"
    "\n"
    "sampling:\n"
    "  -n, --tokens N                 most tokens per reply (default 512)\n"
    "  --stop STRING                  end a reply before STRING (repeatable; not printed, not in the conversation;\n"
    "                                 the next turn then re-reads the conversation)\n"
    "  --temperature T                0 = greedy (default 0.8)\n"
    "  --top-k K                      keep the K most likely tokens, 0 = off (default 40)\n"
    "  --top-p P                      nucleus, 1 = off (default 0.95)\n"
    "  --repeat-penalty R             llama.cpp's repeat penalty over the last --repeat-last-n tokens (default 1 =\n"
    "                                 off; 64 tokens)\n"
    "  --repeat-last-n N              tokens the repeat penalty looks at (default 64; 0 = off)\n"
    "  --min-p P                      keep ids at least P times as likely as the top one; 0 = off (default)\n"
    "  -c, --context N                tokens an unbounded cache holds instead of the model's training context\n"
    "  -s, --seed S                   PRNG seed (default: from the clock; the banner prints it)\n"
    "  -t, --threads N                worker threads, 0 = all cores (default 0)\n"
    "\n"
    "With --streaming-llm-window M the cache stays bounded however long the conversation runs (the transcript\n"
    "text itself, kept for the template, grows with the conversation).\n"
    "\n";

/* Set by SIGINT: stops the reply being generated. The only static mutable state (a handler may only touch statics). */
static volatile sig_atomic_t interrupted = 0;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

typedef struct {
    const char *model_path, *template_name, *system, *system_file, *messages_path;
    const char *session_path; /* --session FILE, or NULL */
    char model_buf[4200]; /* the bundled model's path when no MODEL is given */
    bool print_prompt, quiet;
    tg_opt_list stops;
    int64_t n_tokens;
    tg_sampler_params sp;
    int threads;
    tg_cache_params cache;
} chat_args;

static int parse_chat_args(int argc, char **argv, chat_args *a) {
    int64_t tokens = 512, threads = 0, context = 0;
    const char *model = NULL;
    enum { O_MODEL, O_TMPL, O_SYS, O_SYSF, O_MSGS, O_PRINT, O_QUIET, O_TOKENS, O_THREADS, O_CONTEXT, O_SESSION,
           O_OWN };
    enum { O_SAMPLING = O_OWN, O_CACHE = O_SAMPLING + TG_SAMPLING_OPT_COUNT, O_ALL = O_CACHE + TG_CACHE_OPT_COUNT };
    tg_opt o[O_ALL] = {
        [O_MODEL] = {.name = "--model", .alias = "-m", .kind = TG_OPT_STRING, .dest = &model},
        [O_TMPL] = {.name = "--chat-template", .kind = TG_OPT_STRING, .dest = &a->template_name},
        [O_SYS] = {.name = "--system", .kind = TG_OPT_STRING, .dest = &a->system},
        [O_SYSF] = {.name = "--system-file", .kind = TG_OPT_STRING, .dest = &a->system_file},
        [O_MSGS] = {.name = "--messages", .kind = TG_OPT_STRING, .dest = &a->messages_path},
        [O_PRINT] = {.name = "--print-prompt", .kind = TG_OPT_FLAG, .dest = &a->print_prompt},
        [O_QUIET] = {.name = "--quiet", .kind = TG_OPT_FLAG, .dest = &a->quiet},
        [O_TOKENS] = {.name = "--tokens", .alias = "-n", .kind = TG_OPT_INT, .dest = &tokens, .lo = 1,
                      .hi = INT64_MAX},
        [O_THREADS] = {.name = "--threads", .alias = "-t", .kind = TG_OPT_INT, .dest = &threads, .lo = 0,
                       .hi = 4096},
        [O_CONTEXT] = {.name = "--context", .alias = "-c", .kind = TG_OPT_INT, .dest = &context, .lo = 1,
                       .hi = INT32_MAX},
        [O_SESSION] = {.name = "--session", .kind = TG_OPT_STRING, .dest = &a->session_path},
    };
    tg_generate_flags flags;
    const int parsed = tg_sampling_cache_parse("chat", argc, argv, o, O_OWN, &flags);
    if (parsed != TG_EXIT_OK) return parsed;
    if (o[O_MODEL].seen && flags.n_pos) return tg_usage_error("chat", "--model and a MODEL argument: give one of them");
    a->model_path = tg_model_or_bundled(flags.n_pos ? flags.pos[0] : model, "chat", a->model_buf, sizeof a->model_buf);
    if (!a->model_path) return TG_EXIT_ERROR;
    if (o[O_SYS].seen && o[O_SYSF].seen) return tg_usage_error("chat", "--system and --system-file: give one of them");
    if (o[O_SESSION].seen && !a->session_path[0]) return tg_usage_error("chat", "--session: an empty file name");
    bool given[3];
    const int sampling = tg_sampling_flags_params("chat", &flags.sampling, o + O_SAMPLING, &a->sp, given);
    if (sampling != TG_EXIT_OK) return sampling;
    a->stops = flags.sampling.stops;
    a->n_tokens = tokens;
    a->threads = (int)threads;
    if (!tg_cache_flags_params("chat", &flags.cache, o + O_CACHE, &a->cache)) return TG_EXIT_USAGE;
    if (o[O_CONTEXT].seen) a->cache.context = context;
    return TG_EXIT_OK;
}

/* A growable byte buffer, NUL-terminated. */
typedef struct {
    char *p;
    size_t len, cap;
} buf_t;

static bool buf_append(buf_t *b, const char *s, size_t n) {
    if (n > SIZE_MAX - b->len - 1) return false;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap = cap > SIZE_MAX / 2 ? b->len + n + 1 : cap * 2;
        char *q = realloc(b->p, cap);
        if (!q) return false;
        b->p = q;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return true;
}

/* Everything a running conversation owns. */
typedef struct {
    tg_chat_conv conv;
    tg_gen_run g;       /* model, session, sampler, the generation step (end of turn, --stop, --tokens, Ctrl-C) */
    buf_t fed;          /* the text the cache holds, as rendered (the renders' prefixes and the replies) */
    bool stale;         /* the cache holds text the conversation does not (a reply cut at a stop string) */
    int turn;
    int write_errno;
} chat_run;

static void chat_free(chat_run *r) {
    tg_gen_run_free(&r->g);
    free(r->fed.p);
    tg_chat_conv_close(&r->conv);
}

/* The generator's abort callback: Ctrl-C during the reply. */
static bool reply_interrupted(void *user) {
    (void)user;
    return interrupted != 0;
}

static int emit(chat_run *r, const char *text, size_t len) {
    if ((len > 0 && fwrite(text, 1, len, stdout) != len) || fflush(stdout) != 0) {
        r->write_errno = errno;
        return -1;
    }
    return 0;
}

/* Feeds ids[0..n) to the session in chunks; false (message printed) on failure. */
static bool feed(chat_run *r, const int32_t *ids, size_t n) {
    tg_error err = {0};
    for (size_t done = 0; done < n;) {
        size_t k = n - done < PROMPT_CHUNK ? n - done : PROMPT_CHUNK;
        if (!tg_session_eval(r->g.session, ids + done, k, NULL, r->g.logits, &err)) {
            tg_cli_word_error(&err, NULL);
            tg_runtime_error("%s", err.msg);
            return false;
        }
        done += k;
    }
    return true;
}

/* One assistant turn: render, feed the new suffix (or everything, after a rebuild), generate the reply, add it to
 * the conversation. Returns TG_EXIT_OK or the status to end with. */
static int assistant_turn(const chat_args *a, chat_run *r) {
    char msg[1200];
    size_t len = 0;
    char *text = tg_chat_conv_render(&r->conv, true, &len, msg, sizeof msg);
    if (!text) return tg_runtime_error("%s", msg);
    r->turn++;

    bool rebuild = false;
    const char *suffix = text;
    size_t suffix_len = len;
    if (r->fed.len > 0) {
        if (!r->stale && len >= r->fed.len && memcmp(text, r->fed.p, r->fed.len) == 0) {
            suffix = text + r->fed.len;
            suffix_len = len - r->fed.len;
        } else {
            fprintf(stderr, "tinygpt chat: turn %d: the template's rendering does not extend the text in the cache; "
                            "re-reading the whole conversation\n", r->turn);
            rebuild = true;
        }
    }
    tg_error err = {0};
    if (rebuild) {
        tg_session_free(r->g.session);
        r->g.session = tg_session_new(r->g.model, &a->cache, a->threads, &err);
        r->fed.len = 0;
        r->stale = false;
        if (!r->g.session) {
            free(text);
            tg_cli_word_error(&err, &a->cache);
            return tg_runtime_error("%s", err.msg);
        }
    }
    bool first = r->fed.len == 0;
    const char *bos = r->conv.src.bos_token;
    bool add_bos = first && tg_model_adds_bos(r->g.model) && !(bos && *bos && strncmp(text, bos, strlen(bos)) == 0);
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (!tg_tokenize(r->g.model, suffix, suffix_len, add_bos, &ids, &n_ids, &err)) {
        free(text);
        return tg_runtime_error("%s", err.msg);
    }
    r->fed.len = 0;
    bool ok = buf_append(&r->fed, text, len);
    free(text);
    if (!ok) {
        free(ids);
        return tg_runtime_error("out of memory");
    }
    int64_t room = tg_session_remaining(r->g.session);
    if ((int64_t)n_ids >= room) {
        free(ids);
        return tg_runtime_error("turn %d: the conversation needs %" PRId64 " more tokens but the context holds %" PRId64
                                " more; bound the cache with --streaming-llm-window M",
                                r->turn, (int64_t)n_ids, room);
    }
    double t0 = tg_monotonic_s();
    ok = feed(r, ids, n_ids);
    double t_prompt = tg_monotonic_s() - t0;
    ok = ok && tg_generator_start(r->g.gen, ids, n_ids, false, NULL, NULL, &err);
    free(ids);
    if (!ok) return err.msg[0] ? tg_runtime_error("%s", err.msg) : TG_EXIT_ERROR;

    buf_t reply = {0}; /* the reply's text as printed, which goes into the conversation */
    const char *stop = "--tokens";
    int64_t generated = 0;
    int status = TG_EXIT_OK;
    interrupted = 0;
    t0 = tg_monotonic_s();
    tg_gen_token t;
    for (;;) {
        if (!tg_generator_step(r->g.gen, r->g.logits, &t, &err)) {
            status = tg_runtime_error("%s", err.msg);
            break;
        }
        if (t.stop == TG_GEN_END) {
            stop = "end of turn";
            break;
        }
        generated++;
        if (!buf_append(&reply, t.text, t.len)) {
            status = tg_runtime_error("out of memory");
            break;
        }
        if (emit(r, t.text, t.len) != 0) break;
        if (t.stop == TG_GEN_STOP_STRING) { /* not evaluated: the next turn re-reads the conversation */
            stop = "stop string";
            r->stale = true;
            break;
        }
        if (t.stop == TG_GEN_ABORTED) stop = "interrupted";
        /* every other reply token goes into the cache, the last one too: the next turn's text starts after it */
        if (tg_session_remaining(r->g.session) < 1) {
            stop = "the context is full (--streaming-llm-window M keeps a conversation going)";
            break;
        }
        if (!tg_session_eval(r->g.session, &t.id, 1, NULL, r->g.logits, &err)) {
            tg_cli_word_error(&err, NULL);
            status = tg_runtime_error("%s", err.msg);
            break;
        }
        if (t.stop != TG_GEN_GOING) break; /* --tokens, Ctrl-C */
    }
    double t_gen = tg_monotonic_s() - t0;
    if (status == TG_EXIT_OK) {
        if (!tg_generator_finish(r->g.gen, &t, &err)) {
            status = tg_runtime_error("%s", err.msg);
        } else {
            if (t.stop == TG_GEN_STOP_STRING) {
                stop = "stop string";
                r->stale = true;
            }
            if (!buf_append(&reply, t.text, t.len)) status = tg_runtime_error("out of memory");
            else if (r->write_errno == 0 && emit(r, t.text, t.len) == 0) (void)emit(r, "\n", 1);
        }
        if (status == TG_EXIT_OK && r->write_errno == EPIPE) status = -1; /* the reader has gone: end quietly */
        else if (status == TG_EXIT_OK && r->write_errno != 0)
            status = tg_runtime_error("writing to stdout: %s", strerror(r->write_errno));
    }
    if (status == TG_EXIT_OK) {
        /* The cache now holds the rendering and the reply's tokens (not the end-of-turn token: the next rendering
         * brings it, as text the tokenizer turns into the same special token). */
        if (!buf_append(&r->fed, reply.p ? reply.p : "", reply.len) ||
            !tg_chat_conv_add(&r->conv, "assistant", reply.p ? reply.p : "", reply.len, msg, sizeof msg))
            status = tg_runtime_error("%s", "the reply could not be added to the conversation (out of memory or "
                                            "not UTF-8)");
    }
    free(reply.p);
    if (!a->quiet && status == TG_EXIT_OK) {
        fprintf(stderr, "turn %d: prompt %zu new tokens%s in %.3f s, generated %" PRId64 " tokens in %.3f s "
                        "(%.1f tokens/s), stopped: %s, position %" PRId64 "\n",
                r->turn, n_ids, rebuild ? " (re-read)" : "", t_prompt, generated, t_gen,
                t_gen > 0 ? (double)generated / t_gen : 0.0, stop, tg_session_position(r->g.session));
        tg_cache_report rep;
        tg_session_cache_report(r->g.session, &rep);
        tg_report_cache(stderr, &rep);
    }
    return status;
}

/* Adds the system message and --messages to the conversation. */
static int add_history(const chat_args *a, tg_chat_conv *c) {
    char msg[1200];
    if (a->system_file) {
        char why[600];
        size_t len = 0;
        char *text = tg_read_text_file(a->system_file, TG_TEXT_FILE_LIMIT, &len, why, sizeof why);
        if (!text) return tg_usage_error("chat", "--system-file %s", why);
        bool ok = tg_chat_conv_add(c, "system", text, len, msg, sizeof msg);
        free(text);
        if (!ok) return tg_usage_error("chat", "--system-file %s: %s", a->system_file, msg);
    } else if (a->system && !tg_chat_conv_add(c, "system", a->system, strlen(a->system), msg, sizeof msg)) {
        return tg_usage_error("chat", "--system: %s", msg);
    }
    if (!a->messages_path) return TG_EXIT_OK;
    char why[600];
    size_t len = 0;
    char *text = tg_read_text_file(a->messages_path, TG_TEXT_FILE_LIMIT, &len, why, sizeof why);
    if (!text) return tg_usage_error("chat", "--messages %s", why);
    char name[sizeof "--messages " + 512];
    snprintf(name, sizeof name, "--messages %.512s", a->messages_path);
    const bool ok = tg_chat_conv_add_json(c, text, len, name, msg, sizeof msg);
    free(text);
    return ok ? TG_EXIT_OK : tg_usage_error("chat", "%s", msg);
}

/* --print-prompt: the conversation (with stdin's user lines when stdin is not a terminal), rendered with the
 * generation prompt. */
static int print_prompt(tg_chat_conv *c) {
    char msg[1200];
    if (!isatty(STDIN_FILENO)) {
        tg_line_input in;
        tg_line_input_open(&in);
        bool ok = true;
        const char *line;
        while (ok && (line = tg_line_input_read(&in, "")) != NULL)
            if (line[0]) ok = tg_chat_conv_add(c, "user", line, strlen(line), msg, sizeof msg);
        tg_line_input_close(&in);
        if (!ok) return tg_runtime_error("standard input: %s", msg);
    }
    size_t len = 0;
    char *text = tg_chat_conv_render(c, true, &len, msg, sizeof msg);
    if (!text) return tg_runtime_error("%s", msg);
    bool ok = fwrite(text, 1, len, stdout) == len && fflush(stdout) == 0;
    free(text);
    return ok ? TG_EXIT_OK : tg_runtime_error("writing to stdout: %s", strerror(errno));
}

/* --session: the conversation's own state, kept in the snapshot's application bytes: {"messages": [...], "fed":
 * the text the cache holds, "stale": bool, "turn": n}. */
static int save_session(const chat_args *a, chat_run *r) {
    if (!a->session_path) return TG_EXIT_OK;
    json_t *o = json_pack("{s:O, s:s%, s:b, s:i}", "messages", r->conv.messages, "fed", r->fed.p ? r->fed.p : "",
                          r->fed.len, "stale", r->stale, "turn", r->turn);
    char *app = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!app) return tg_runtime_error("--session %s: the conversation could not be saved (out of memory, or text "
                                      "that is not UTF-8)", a->session_path);
    tg_error err = {0};
    const tg_snapshot_extras x = {.sampler = r->g.sampler, .app = app, .app_len = strlen(app)};
    const bool ok = tg_session_save_file(r->g.session, &x, a->session_path, &err);
    free(app);
    return ok ? TG_EXIT_OK : tg_runtime_error("--session %s", err.msg);
}

/* --session: resumes the conversation of an existing file (the session, its messages, the sampler's state);
 * nothing to do when there is none yet. */
static int resume_session(const chat_args *a, chat_run *r, bool *resumed) {
    *resumed = false;
    if (!a->session_path || access(a->session_path, F_OK) != 0) return TG_EXIT_OK;
    tg_error err = {0};
    tg_snapshot_restore out = {.sampler = r->g.sampler, .want_app = true};
    if (!tg_session_restore_file(r->g.session, a->session_path, &out, &err))
        return tg_runtime_error("--session %s", err.msg);
    json_error_t jerr;
    json_t *o = out.app ? json_loadb(out.app, out.app_len, 0, &jerr) : NULL;
    free(out.app);
    json_t *messages = NULL;
    const char *fed = NULL;
    size_t fed_len = 0;
    int stale = 0, turn = 0;
    char msg[1200];
    bool ok = o && json_unpack(o, "{s:o, s:s%, s:b, s:i}", "messages", &messages, "fed", &fed, &fed_len, "stale",
                               &stale, "turn", &turn) == 0;
    char *text = ok ? json_dumps(messages, JSON_COMPACT) : NULL;
    ok = ok && text && tg_chat_conv_add_json(&r->conv, text, strlen(text), "--session", msg, sizeof msg) &&
         buf_append(&r->fed, fed, fed_len);
    free(text);
    json_decref(o);
    if (!ok) return tg_runtime_error("--session %s: the file holds no conversation of `tinygpt chat`", a->session_path);
    r->stale = stale;
    r->turn = turn;
    *resumed = true;
    return TG_EXIT_OK;
}

static int converse(const chat_args *a, chat_run *r) {
    const char *last = tg_chat_conv_last_role(&r->conv);
    if (last && strcmp(last, "user") == 0) {
        int st = assistant_turn(a, r);
        if (st == TG_EXIT_OK) st = save_session(a, r);
        if (st != TG_EXIT_OK) return st < 0 ? TG_EXIT_OK : st;
    }
    tg_line_input in;
    tg_line_input_open(&in);
    int status = TG_EXIT_OK;
    char msg[1200];
    const char *line;
    while (status == TG_EXIT_OK && (line = tg_line_input_read(&in, "> ")) != NULL) {
        if (!line[0]) continue;
        if (strcmp(line, "/quit") == 0 || strcmp(line, "/exit") == 0) break;
        if (strcmp(line, "/stats") == 0) {
            tg_cache_report rep;
            tg_session_cache_report(r->g.session, &rep);
            fprintf(stderr, "turns %d, position %" PRId64 "\n", r->turn, tg_session_position(r->g.session));
            tg_report_cache(stderr, &rep);
            continue;
        }
        if (!tg_chat_conv_add(&r->conv, "user", line, strlen(line), msg, sizeof msg)) {
            status = tg_runtime_error("standard input: %s", msg);
            break;
        }
        status = assistant_turn(a, r);
        if (status == TG_EXIT_OK) status = save_session(a, r);
    }
    if (in.tty && status == TG_EXIT_OK) fputc('\n', stderr);
    tg_line_input_close(&in);
    return status < 0 ? TG_EXIT_OK : status;
}

int tg_cmd_chat(int argc, char **argv) {
    chat_args a = {0};
    int status = parse_chat_args(argc, argv, &a);
    if (tg_help_printed(&status, USAGE) || status != TG_EXIT_OK) return status;

    chat_run r = {0};
    char msg[1200];
    if (!tg_chat_conv_open(&r.conv, a.model_path, a.template_name, msg, sizeof msg)) {
        return a.template_name && !tg_chat_builtin(a.template_name) ? tg_usage_error("chat", "%s", msg)
                                                                     : tg_runtime_error("%s", msg);
    }
    const bool resuming = a.session_path && access(a.session_path, F_OK) == 0;
    if (resuming && (a.system || a.system_file || a.messages_path)) {
        chat_free(&r);
        return tg_usage_error("chat", "--session %s exists: --system, --system-file and --messages only start a new "
                              "conversation", a.session_path);
    }
    status = add_history(&a, &r.conv);
    if (status == TG_EXIT_OK && a.print_prompt) status = print_prompt(&r.conv);
    if (status != TG_EXIT_OK || a.print_prompt) {
        chat_free(&r);
        return status;
    }
    /* A template that cannot render this conversation fails here, before the weights are read. */
    if (!tg_chat_conv_probe(&r.conv, msg, sizeof msg)) {
        chat_free(&r);
        return tg_runtime_error("%s", msg);
    }

    tg_error err = {0};
    r.g.model = tg_model_load(a.model_path, &err);
    if (!r.g.model) {
        chat_free(&r);
        return tg_runtime_error("%s", err.msg);
    }
    tg_model_info info;
    tg_model_get_info(r.g.model, &info);
    if (!info.has_weights) {
        chat_free(&r);
        return tg_runtime_error("%s has no weights: it can only --print-prompt", a.model_path);
    }
    int32_t eot[MAX_EOT];
    tg_generator_params gp = tg_generator_default_params();
    gp.max_tokens = a.n_tokens;
    gp.stops = a.stops.items;
    gp.n_stops = a.stops.n;
    gp.end_ids = eot;
    gp.n_end_ids = tg_chat_conv_end_ids(&r.conv, r.g.model, eot, MAX_EOT);
    gp.abort = reply_interrupted;
    status = tg_gen_run_open(&r.g, &a.cache, a.threads, &a.sp, &gp);
    bool resumed = false;
    if (status == TG_EXIT_OK) status = resume_session(&a, &r, &resumed);
    if (status != TG_EXIT_OK) {
        chat_free(&r);
        return status;
    }
    if (!a.quiet) {
        tg_cache_report rep;
        tg_session_cache_report(r.g.session, &rep);
        tg_report_banner(stderr, a.model_path, &info, &rep, &a.sp, tg_session_threads(r.g.session));
        fprintf(stderr, "tinygpt: chat template: %s\n", r.conv.origin);
        if (resumed)
            fprintf(stderr, "tinygpt: --session %s: resumed after turn %d (position %" PRId64 ")\n", a.session_path,
                    r.turn, tg_session_position(r.g.session));
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);

    status = converse(&a, &r);
    chat_free(&r);
    return status;
}
