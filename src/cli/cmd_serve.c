/* cmd_serve.c — `tinygpt serve [MODEL]`: an OpenAI-compatible HTTP server (src/serve/). Loads the model, sizes one
 * batched forward pass and the KV budget, starts the scheduler and the HTTP threads, then waits for SIGTERM or
 * SIGINT: from then on nothing new is admitted (/health answers 503), running answers get --grace seconds to finish,
 * whatever is left is cancelled, and the process exits 0. */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "cli/args.h"
#include "cli/bundled.h"
#include "cli/cache_errors.h"
#include "chat/conversation.h"
#include "cli/cli.h"
#include "cli/text.h"
#include "serve/http.h"
#include "serve/scheduler.h"
#include "util/clock.h"

/* The conversation flags' help, printed after USAGE (one string would pass the 4095 bytes C11 promises). */
static const char USAGE_PARK[] =
    "\nconversations (docs/SERVING.md, \"Continuing conversations\"):\n"
    "  --park-budget BYTES            RAM for finished conversations kept as snapshots (the cache in its stored\n"
    "                                 precision and its tokens), least recently parked evicted first; a request\n"
    "                                 whose tokens extend one continues it and prefills only its new tokens\n"
    "                                 (default 256M; 0 = no reuse). Apart from --kv-budget\n"
    "  --park-dir DIR                 conversations evicted from RAM (and all of them at shutdown) go to DIR as\n"
    "                                 files, written atomically; a restarted server continues them\n"
    "  --park-disk-budget BYTES       bytes of files in --park-dir, oldest removed first (default 1G)\n"
    "\n";

static const char USAGE[] =
    "usage: tinygpt serve [MODEL] [--host 127.0.0.1] [--port 8080] [options]\n"
    "\n"
    "An OpenAI-compatible HTTP server: POST /v1/completions, POST /v1/chat/completions (\"stream\": true for\n"
    "server-sent events), GET /v1/models, GET /health, GET /metrics (Prometheus). Every session's KV cache\n"
    "follows the cache flags below, all of them within one --kv-budget; the running sessions are decoded\n"
    "together, one batched forward pass per token. SIGTERM or Ctrl-C: stop admitting, let running answers\n"
    "finish for --grace seconds, cancel the rest, exit 0. MODEL defaults to the bundled " TG_BUNDLED_MODEL ".\n"
    "\n"
    "server:\n"
    "  -m, --model MODEL              the model (instead of the MODEL argument)\n"
    "  --host ADDR                    address to listen on, IPv4 or IPv6 (default 127.0.0.1: this machine only)\n"
    "  --port N                       port (default 8080; 0 = any free port, printed at start)\n"
    "  --api-key KEY                  require 'Authorization: Bearer KEY' on every route but /health\n"
    "  --kv-budget BYTES              KV cache bytes of all sessions together (default 1G); a session is admitted\n"
    "                                 while its cache fits, queued otherwise\n"
    "  --kv-session-budget BYTES      a session's own budget: the largest StreamingLLM window that fits BYTES\n"
    "                                 (what `tinygpt sample --kv-budget` does)\n"
    "  --max-sessions N               sessions decoded together at most (default 64)\n"
    "  --queue N                      requests waiting for budget at most; beyond: 503 + Retry-After (default 64)\n"
    "  --max-tokens N                 a request's most generated tokens, and its default (default 512)\n"
    "  --max-body BYTES               the largest request body; larger: 413 (default 4M)\n"
    "  --max-prompt-tokens N          a request's most prompt tokens, bounded cache or not; more: 400 (default: the\n"
    "                                 context, -c or the model's)\n"
    "  --prefill-chunk N              prompt tokens per step over all sessions, beside the decodes (default 64)\n"
    "  --grace SECONDS                after SIGTERM, how long running answers may take (default 10)\n"
    "  --max-connections N            connections open at once (default 1024; at most the open-file limit, which is\n"
    "                                 raised to its hard limit at start, less 64)\n"
    "  --max-connections-per-ip N     connections open at once from one address (default an eighth of the above)\n"
    "  --request-timeout SECONDS      time a connection has to send a request's headers and body, counted from its\n"
    "                                 start or its previous answer (default 30); later: the connection is closed\n"
    "  --chat-template NAME           a built-in chat template instead of the model's (chatml, llama3, ...)\n"
    "  -c, --context N                tokens an unbounded cache holds instead of the model's training context\n"
    "  -t, --threads N                worker threads of the forward pass, 0 = all cores (default 0)\n"
    "\n"
    "A request may ask for its own cache policy with the extension fields \"kv_quantize\" (fp32 ... int2),\n"
    "\"streaming_llm_window\" and \"streaming_llm_sink\": accepted when its cache needs no more bytes (and holds no\n"
    "more tokens) than the server's policy. llama-server's names \"n_predict\", \"ignore_eos\", \"top_k\", \"min_p\",\n"
    "\"repeat_penalty\", \"repeat_last_n\", \"cache_prompt\" (default true; false: no reuse of a parked\n"
    "conversation) are understood. A response's usage.prompt_tokens_details.cached_tokens (and timings.cache_n)\n"
    "says how many prompt tokens were reused, timings.prompt_n how many were prefilled.\n"
    "\n";

typedef struct {
    const char *model_path, *host, *api_key, *chat_template, *park_dir;
    int64_t park_budget, park_disk_budget;
    int64_t port, kv_budget, max_sessions, queue, max_tokens, max_body, prefill, threads, max_prompt, max_conn, per_ip;
    double request_timeout;
    double grace;
    tg_cache_params cache;
} serve_args;

static int parse_serve_args(int argc, char **argv, serve_args *a) {
    const char *model = NULL;
    int64_t context = 0;
    a->host = "127.0.0.1";
    a->port = 8080;
    a->kv_budget = (int64_t)1 << 30;
    a->max_sessions = 64;
    a->queue = 64;
    a->max_tokens = 512;
    a->max_body = (int64_t)4 << 20;
    a->prefill = 64;
    a->grace = 10;
    a->max_conn = 1024;
    a->request_timeout = 30;
    a->park_budget = (int64_t)256 << 20;
    a->park_disk_budget = (int64_t)1 << 30;
    enum { O_MODEL, O_HOST, O_PORT, O_KEY, O_BUDGET, O_SESSIONS, O_QUEUE, O_MAXTOK, O_BODY, O_PREFILL, O_GRACE,
           O_TMPL, O_CONTEXT, O_THREADS, O_MAXPROMPT, O_CONN, O_PER_IP, O_REQ_TIMEOUT, O_PARK, O_PARK_DIR, O_PARK_DISK, O_OWN };
    tg_opt o[O_OWN + TG_CACHE_OPT_COUNT] = {
        [O_MODEL] = {.name = "--model", .alias = "-m", .kind = TG_OPT_STRING, .dest = &model},
        [O_HOST] = {.name = "--host", .kind = TG_OPT_STRING, .dest = &a->host},
        [O_PORT] = {.name = "--port", .kind = TG_OPT_INT, .dest = &a->port, .lo = 0, .hi = 65535},
        [O_KEY] = {.name = "--api-key", .kind = TG_OPT_STRING, .dest = &a->api_key},
        [O_BUDGET] = {.name = "--kv-budget", .kind = TG_OPT_SIZE, .dest = &a->kv_budget, .lo = 1, .hi = INT64_MAX},
        [O_SESSIONS] = {.name = "--max-sessions", .kind = TG_OPT_INT, .dest = &a->max_sessions, .lo = 1,
                        .hi = 4096},
        [O_QUEUE] = {.name = "--queue", .kind = TG_OPT_INT, .dest = &a->queue, .lo = 0, .hi = 1 << 20},
        [O_MAXTOK] = {.name = "--max-tokens", .kind = TG_OPT_INT, .dest = &a->max_tokens, .lo = 1,
                      .hi = INT32_MAX},
        [O_BODY] = {.name = "--max-body", .kind = TG_OPT_SIZE, .dest = &a->max_body, .lo = 1, .hi = (int64_t)1 << 34},
        [O_PREFILL] = {.name = "--prefill-chunk", .kind = TG_OPT_INT, .dest = &a->prefill, .lo = 1, .hi = 4096},
        [O_GRACE] = {.name = "--grace", .kind = TG_OPT_FLOAT, .dest = &a->grace, .flo = 0, .fhi = 86400},
        [O_TMPL] = {.name = "--chat-template", .kind = TG_OPT_STRING, .dest = &a->chat_template},
        [O_CONTEXT] = {.name = "--context", .alias = "-c", .kind = TG_OPT_INT, .dest = &context, .lo = 1,
                       .hi = INT32_MAX},
        [O_THREADS] = {.name = "--threads", .alias = "-t", .kind = TG_OPT_INT, .dest = &a->threads, .lo = 0,
                       .hi = 4096},
        [O_MAXPROMPT] = {.name = "--max-prompt-tokens", .kind = TG_OPT_INT, .dest = &a->max_prompt, .lo = 1,
                         .hi = INT32_MAX},
        [O_CONN] = {.name = "--max-connections", .kind = TG_OPT_INT, .dest = &a->max_conn, .lo = 1, .hi = 1 << 20},
        [O_PER_IP] = {.name = "--max-connections-per-ip", .kind = TG_OPT_INT, .dest = &a->per_ip, .lo = 1,
                      .hi = 1 << 20},
        [O_PARK] = {.name = "--park-budget", .kind = TG_OPT_SIZE, .dest = &a->park_budget, .lo = 0, .hi = INT64_MAX},
        [O_PARK_DIR] = {.name = "--park-dir", .kind = TG_OPT_STRING, .dest = &a->park_dir},
        [O_PARK_DISK] = {.name = "--park-disk-budget", .kind = TG_OPT_SIZE, .dest = &a->park_disk_budget, .lo = 1,
                         .hi = INT64_MAX},
        [O_REQ_TIMEOUT] = {.name = "--request-timeout", .kind = TG_OPT_FLOAT, .dest = &a->request_timeout,
                           .flo = 0.01, .fhi = 86400},
    };
    tg_cache_flags cf;
    tg_cache_flags_options(&cf, o + O_OWN);
    /* --kv-budget is the server's budget of all sessions; the cache table's per-session one is renamed */
    for (int i = O_OWN; i < O_OWN + TG_CACHE_OPT_COUNT; i++)
        if (strcmp(o[i].name, "--kv-budget") == 0) o[i].name = "--kv-session-budget";
    const char *pos[1];
    size_t n_pos = 0;
    const int parsed = tg_args_parse_cmd("serve", argc, argv, o, O_OWN + TG_CACHE_OPT_COUNT, pos, 1, &n_pos);
    if (parsed != TG_EXIT_OK) return parsed;
    if (o[O_MODEL].seen && n_pos)
        return tg_usage_error("serve", "--model and a MODEL argument: give one of them, not both");
    if (a->api_key && !a->api_key[0]) return tg_usage_error("serve", "--api-key: expected a non-empty key");
    if (a->park_dir && !a->park_dir[0]) return tg_usage_error("serve", "--park-dir: expected a directory");
    unsigned char addr[sizeof(struct in6_addr)];
    if (inet_pton(AF_INET, a->host, addr) != 1 && inet_pton(AF_INET6, a->host, addr) != 1)
        return tg_usage_error("serve", "--host %s: not an IPv4 or IPv6 address", a->host);
    if (a->max_sessions + a->prefill > 8192)
        return tg_usage_error("serve", "--max-sessions %lld and --prefill-chunk %lld: together at most 8192 rows",
                              (long long)a->max_sessions, (long long)a->prefill);
    a->model_path = n_pos ? pos[0] : model;
    if (!tg_cache_flags_params("serve", &cf, o + O_OWN, &a->cache)) return TG_EXIT_USAGE;
    if (o[O_CONTEXT].seen) a->cache.context = context;
    return TG_EXIT_OK;
}

/* "tinygpt-flagship" for ".../tinygpt-flagship.gguf" or ".../tinygpt-flagship/" */
static void model_id(const char *path, char *out, size_t cap) {
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--;
    size_t start = len;
    while (start > 0 && path[start - 1] != '/') start--;
    size_t n = len - start;
    if (n > 5 && strncmp(path + start + n - 5, ".gguf", 5) == 0) n -= 5;
    snprintf(out, cap, "%.*s", (int)n, path + start);
}

/* The most text bytes one token of model stands for, with slack: twice its longest decoded text plus one (a
 * SentencePiece prefix space; control tokens such as <|im_start|>, which decode to nothing, and added tokens that
 * absorb the spaces beside them stand for more than they decode to). */
static size_t longest_token(const tg_model *model) {
    size_t most = 1;
    tg_detok *d = tg_detok_new(model, &(tg_error){0});
    if (!d) return 64; /* no tokenizer: nothing is tokenised */
    const int32_t vocab = tg_vocab_size(model);
    for (int32_t id = 0; id < vocab; id++) {
        const char *out;
        size_t a = 0, b = 0;
        tg_detok_push(d, id, &out, &a);
        tg_detok_flush(d, &out, &b);
        if (a + b + 1 > most) most = a + b + 1;
    }
    tg_detok_free(d);
    return 2 * most;
}

/* The connections the server may hold open: at most `wanted`, and below the descriptors the process may open (the
 * soft limit, first raised to the hard one where allowed), less 64 for the model, the listening socket and
 * libmicrohttpd's own; so that accept() never fails with EMFILE (which libmicrohttpd 0.9.75's polling thread retries
 * at once, a busy loop). 0 when the limit leaves no room. */
static int64_t connection_limit(int64_t wanted) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return wanted;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < rl.rlim_max) {
        struct rlimit up = {rl.rlim_max, rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &up) == 0) rl.rlim_cur = rl.rlim_max;
    }
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= (rlim_t)wanted + 64) return wanted;
    return rl.rlim_cur > 64 ? (int64_t)rl.rlim_cur - 64 : 0;
}

/* Waits for SIGTERM or SIGINT (blocked in every thread). */
static int wait_for_signal(const sigset_t *set) {
    int sig = 0;
    while (sigwait(set, &sig) != 0) {
    }
    return sig;
}

static int serve_main(serve_args *a, const sigset_t *signals) {
    char bundled[4200];
    a->model_path = tg_model_or_bundled(a->model_path, "serve", bundled, sizeof bundled);
    if (!a->model_path) return TG_EXIT_ERROR;
    tg_error err = {0};
    tg_model *model = tg_model_load(a->model_path, &err);
    if (!model) return tg_runtime_error("%s", err.msg);
    tg_model_info info;
    tg_model_get_info(model, &info);
    int status = TG_EXIT_ERROR;
    tg_batch *batch = NULL;
    tg_sched *sched = NULL;
    tg_park *park = NULL;
    tg_http *http = NULL;
    tg_chat_conv conv;
    bool have_conv = false;
    tg_metrics metrics;
    tg_metrics_init(&metrics);
    char id[256];
    model_id(a->model_path, id, sizeof id);
    tg_server srv = {.host = a->host, .port = (int)a->port, .max_body = a->max_body, .api_key = a->api_key,
                     .model = model, .model_id = id, .model_path = a->model_path,
                     .model_context = info.context_length, .cache = a->cache, .max_tokens = a->max_tokens,
                     .max_prompt_tokens = a->max_prompt > 0         ? a->max_prompt
                                          : a->cache.context > 0 ? a->cache.context
                                                                 : info.context_length,
                     .metrics = &metrics, .created = (int64_t)time(NULL)};
    atomic_init(&srv.draining, false);
    atomic_init(&srv.next_id, 1);
    atomic_init(&srv.in_flight, 0);
    /* parsing and tokenising: at most 4 bodies at once, together at most one --max-body */
    srv.prep = (tg_prep){.budget = a->max_body, .max_n = 4};
    pthread_mutex_init(&srv.prep_mu, NULL);
    pthread_cond_init(&srv.prep_cv, NULL);
    if (!info.has_weights) {
        tg_runtime_error("%s has no weights (a vocab-only file): it cannot serve", a->model_path);
        goto done;
    }
    srv.max_token_bytes = longest_token(model);
    if (srv.max_prompt_tokens < 1) srv.max_prompt_tokens = (int64_t)1 << 16; /* the model states no context */
    srv.session_bytes = tg_sequence_bytes(model, &a->cache, &err);
    if (srv.session_bytes == 0) {
        tg_cli_word_error(&err, &a->cache);
        tg_runtime_error("%s", err.msg);
        goto done;
    }
    if ((int64_t)srv.session_bytes > a->kv_budget) {
        status = tg_usage_error("serve", "--kv-budget %" PRId64 ": one session's cache needs %zu bytes under this "
                                "policy; raise the budget or bound the cache (--streaming-llm-window, --kv-quantize)",
                                a->kv_budget, srv.session_bytes);
        goto done;
    }
    char msg[1200];
    if (tg_chat_conv_open(&conv, a->model_path, a->chat_template, msg, sizeof msg)) {
        have_conv = true;
        srv.conv = &conv;
        srv.n_end_ids = tg_chat_conv_end_ids(&conv, model, srv.end_ids, TG_JOB_MAX_END_IDS);
    } else if (a->chat_template) {
        status = tg_chat_builtin(a->chat_template) ? tg_runtime_error("%s", msg) : tg_usage_error("serve", "%s", msg);
        goto done;
    } else {
        fprintf(stderr, "tinygpt serve: %s: /v1/chat/completions answers 400\n", msg);
    }
    batch = tg_batch_new(model, &a->cache, (int)(a->max_sessions + a->prefill), (int)a->threads, &err);
    if (!batch) {
        tg_cli_word_error(&err, &a->cache);
        tg_runtime_error("%s", err.msg);
        goto done;
    }
    const bool kivi = a->cache.key_precision >= TG_KV_INT8 || a->cache.value_precision >= TG_KV_INT8;
    if (tg_batch_on_device(batch) && kivi && a->park_budget > 0) { /* vk_kv.c: no upload of a KIVI cache yet */
        fprintf(stderr, "tinygpt serve: KIVI caches on the GPU are not restored from parked conversations yet: "
                        "conversation reuse is off (--park-budget 0)\n");
        a->park_budget = 0;
    }
    /* TINYGPT_TEST_PARK_KILL_IN_WRITE=N (tests only): the first park file write dies after N bytes */
    const char *kill_in_write = getenv("TINYGPT_TEST_PARK_KILL_IN_WRITE");
    const tg_park_config pc = {a->park_budget, a->park_dir, a->park_disk_budget,
                               kill_in_write ? strtoll(kill_in_write, NULL, 10) : 0};
    park = tg_park_new(&pc, model, &err);
    if (!park) {
        tg_runtime_error("%s", err.msg);
        goto done;
    }
    tg_sched_config sc = {model, batch, a->kv_budget, a->max_sessions, a->queue, (int)a->prefill, &metrics, park};
    sched = tg_sched_start(&sc, &err);
    if (!sched) {
        tg_runtime_error("%s", err.msg);
        goto done;
    }
    srv.sched = sched;
    const int64_t conns = connection_limit(a->max_conn);
    if (conns == 0) {
        tg_runtime_error("the open-file limit (ulimit -n) leaves no descriptors for connections");
        goto done;
    }
    srv.max_connections = (unsigned)conns;
    srv.max_connections_per_ip = (unsigned)(a->per_ip > 0 ? a->per_ip : conns / 8 > 0 ? conns / 8 : 1);
    srv.request_timeout = a->request_timeout;
    http = tg_http_start(&srv, msg, sizeof msg);
    if (!http) {
        tg_runtime_error("%s", msg);
        goto done;
    }
    const int64_t fit = a->kv_budget / (int64_t)srv.session_bytes;
    fprintf(stderr,
            "tinygpt serve: %s on http://%s%s%s:%d (cache: %zu bytes a session, budget %" PRId64 " bytes = %" PRId64
            " sessions, at most %" PRId64 " at once, queue %" PRId64 "; %d threads; connections: %u, %u from one "
            "address)\n",
            id, strchr(a->host, ':') ? "[" : "", a->host, strchr(a->host, ':') ? "]" : "", tg_http_port(http),
            srv.session_bytes, a->kv_budget, fit, a->max_sessions, a->queue, tg_batch_threads(batch),
            srv.max_connections, srv.max_connections_per_ip);
    if (tg_park_enabled(park)) {
        tg_park_stats ps;
        tg_park_get_stats(park, &ps);
        fprintf(stderr, "tinygpt serve: parking finished conversations: %" PRId64 " bytes of RAM", a->park_budget);
        if (a->park_dir)
            fprintf(stderr, ", then %s (%" PRId64 " bytes; %" PRId64 " snapshots found, %" PRId64 " files refused)",
                    a->park_dir, a->park_disk_budget, ps.disk_states, ps.disk_refused);
        fputc('\n', stderr);
    }

    const int sig = wait_for_signal(signals);
    fprintf(stderr, "tinygpt serve: %s: no longer admitting; %" PRId64 " requests running or queued, %g s grace\n",
            sig == SIGTERM ? "SIGTERM" : "SIGINT", tg_sched_pending(sched), a->grace);
    atomic_store(&srv.draining, true);
    tg_sched_stop_admitting(sched);
    const double t_end = tg_monotonic_s() + a->grace;
    while (tg_sched_pending(sched) > 0 && tg_monotonic_s() < t_end) nanosleep(&(struct timespec){0, 20000000L}, NULL);
    const int64_t left = tg_sched_pending(sched);
    if (left > 0) fprintf(stderr, "tinygpt serve: cancelling %" PRId64 " requests after the grace period\n", left);
    status = TG_EXIT_OK;
done:
    tg_sched_stop(sched); /* fails what is left: every waiting handler and stream ends */
    if (status == TG_EXIT_OK) tg_park_flush(park); /* the conversations in RAM to --park-dir, for a restart */
    tg_park_free(park);
    /* let the handlers and streams write their last words (an error event, [DONE]) before the sockets close: they
     * end as soon as their clients have read them, so the bound only matters for a client that stopped reading (or a
     * machine so loaded that a stream's last chunk waits seconds for a thread) */
    for (int i = 0; http && i < 3000 && atomic_load(&srv.in_flight) > 0; i++) /* at most 30 s */
        nanosleep(&(struct timespec){0, 10000000L}, NULL);
    const int64_t unfinished = atomic_load(&srv.in_flight);
    if (http && unfinished > 0)
        fprintf(stderr, "tinygpt serve: closing %" PRId64 " connections that had not taken their last words\n",
                unfinished);
    tg_http_stop(http);
    tg_batch_free(batch);
    if (have_conv) tg_chat_conv_close(&conv);
    pthread_cond_destroy(&srv.prep_cv);
    pthread_mutex_destroy(&srv.prep_mu);
    tg_metrics_destroy(&metrics);
    tg_model_free(model);
    if (status == TG_EXIT_OK) fprintf(stderr, "tinygpt serve: stopped\n");
    return status;
}

int tg_cmd_serve(int argc, char **argv) {
    serve_args a = {0};
    int status = parse_serve_args(argc, argv, &a);
    if (tg_help_printed(&status, USAGE)) {
        fputs(USAGE_PARK, stdout);
        fputs("(in serve, --kv-budget is the budget of all sessions together; a session's own budget is\n"
              "--kv-session-budget)\n",
              stdout);
        return status;
    }
    if (status != TG_EXIT_OK) return status;
    /* SIGTERM and SIGINT are taken by sigwait in this thread: blocked before any thread starts */
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &signals, NULL);
    return serve_main(&a, &signals);
}
