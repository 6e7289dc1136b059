/* fuzz_serve_http.c — libFuzzer harness for the server's whole request path: a real `tinygpt serve` (src/serve/:
 * libmicrohttpd, admission, parsing, the chat template, tokenising, the scheduler and the forward pass of
 * fuzz/data/tiny.gguf) is started once in this process on a loopback port, and each input is sent to it as the body
 * of one POST over a fresh connection: its first byte picks the route (even: /v1/completions, odd:
 * /v1/chat/completions), the rest is the body. Checks: the server answers every request, within ANSWER_S seconds
 * (the bound for a request on this tiny model under ASan on a loaded machine: far beyond what one takes), with 200,
 * 400, 413 or 503, and a refusal carries OpenAI's error object; a crash or a sanitizer report anywhere in the server
 * ends the process. Generation is kept short (at most 2 tokens, prompts of at most 512 in a window of 32) so that an
 * input costs milliseconds. The client (http_client.h) keeps its deadline through libFuzzer's SIGALRM. Fuzzing only:
 * the replay of tests/unit does not run it (threads and a socket); test_fuzz_http_client tests the client. */
#include "fuzz_common.h"

#include <pthread.h>

#include "chat/conversation.h"
#include "http_client.h"
#include "serve/http.h"

#define ANSWER_S 30

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The server, started on the first input and kept for the process's life (libFuzzer has no context pointer). */
static tg_server srv;
static tg_metrics metrics;
static tg_chat_conv conv;
static int port;

static void start_server(void) {
    char path[1024], msg[1200];
    snprintf(path, sizeof path, "%s/tiny.gguf", fuzz_data_dir());
    tg_model *model = fuzz_load_tiny_model();
    tg_error err = {0};
    tg_metrics_init(&metrics);
    tg_model_info info;
    tg_model_get_info(model, &info);
    srv = (tg_server){.host = "127.0.0.1", .port = 0, .max_body = (int64_t)1 << 20, .max_connections = 64,
                      .max_connections_per_ip = 64, .request_timeout = ANSWER_S, .model = model, .model_id = "tiny",
                      .model_path = "tiny", .model_context = info.context_length,
                      .cache = tg_cache_default_params(), .max_tokens = 2, .max_prompt_tokens = 512,
                      .max_token_bytes = 1024, .metrics = &metrics};
    atomic_init(&srv.draining, false);
    atomic_init(&srv.next_id, 1);
    atomic_init(&srv.in_flight, 0);
    srv.cache.window = 32; /* a StreamingLLM window: prompts longer than the tiny model's context of 64 run too */
    srv.cache.sink = 4;
    srv.prep = (tg_prep){.budget = srv.max_body, .max_n = 4};
    pthread_mutex_init(&srv.prep_mu, NULL);
    pthread_cond_init(&srv.prep_cv, NULL);
    srv.session_bytes = tg_sequence_bytes(model, &srv.cache, &err);
    if (srv.session_bytes == 0) fuzz_die("the session's bytes", err.msg);
    if (!tg_chat_conv_open(&conv, path, "chatml", msg, sizeof msg)) fuzz_die("the chat template", msg);
    srv.conv = &conv;
    srv.n_end_ids = tg_chat_conv_end_ids(&conv, model, srv.end_ids, TG_JOB_MAX_END_IDS);
    tg_batch *batch = tg_batch_new(model, &srv.cache, 4 + 16, 1, &err);
    if (!batch) fuzz_die("the batch", err.msg);
    const tg_sched_config sc = {model, batch, (int64_t)srv.session_bytes * 4, 4, 4, 16, &metrics, NULL};
    srv.sched = tg_sched_start(&sc, &err);
    if (!srv.sched) fuzz_die("the scheduler", err.msg);
    tg_http *http = tg_http_start(&srv, msg, sizeof msg);
    if (!http) fuzz_die("the server", msg);
    port = tg_http_port(http);
}

/* What the server was doing when an answer did not come: its gauges, the sockets of its port (accepted, waiting
 * in the listen queue, closing) and, with TG_FUZZ_GDB set, every thread's stack. */
static void report_state(void) {
    pthread_mutex_lock(&srv.prep_mu);
    fprintf(stderr, "  %lld bodies being parsed (%lld bytes), %lld jobs pending, %d in flight\n", (long long)srv.prep.n,
            (long long)srv.prep.used, (long long)tg_sched_pending(srv.sched), atomic_load(&srv.in_flight));
    pthread_mutex_unlock(&srv.prep_mu);
    tg_metrics_gauges g;
    tg_sched_gauges(srv.sched, &g);
    fprintf(stderr, "  sessions active %lld, queued %lld, KV bytes in use %lld of %lld\n", (long long)g.active,
            (long long)g.queued, (long long)g.kv_bytes_used, (long long)g.kv_budget);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "ss -tano '( sport = :%d or dport = :%d )' >&2", port, port);
    if (system(cmd) != 0) fprintf(stderr, "(ss failed)\n");
    if (getenv("TG_FUZZ_GDB")) {
        snprintf(cmd, sizeof cmd, "gdb -p %d -batch -ex 'thread apply all bt 12' >&2", (int)getpid());
        if (system(cmd) != 0) fprintf(stderr, "(gdb failed)\n");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!port) start_server();
    if (size == 0) return 0;
    const bool chat = data[0] & 1;
    const char *body = (const char *)data + 1;
    const size_t len = size - 1;
    char head[256];
    const int hn = snprintf(head, sizeof head,
                            "POST %s HTTP/1.1\r\nHost: fuzz\r\nContent-Type: application/json\r\n"
                            "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                            chat ? "/v1/chat/completions" : "/v1/completions", len);
    static char answer[1 << 20];
    size_t got = 0;
    char why[200];
    if (!fuzz_http_exchange(port, head, (size_t)hn, body, len, ANSWER_S, answer, sizeof answer, &got, why,
                            sizeof why)) {
        fprintf(stderr, "no answer: %s\n", why);
        report_state();
        fuzz_die("the server", why);
    }
    int status = 0;
    if (sscanf(answer, "HTTP/1.1 %d", &status) != 1) fuzz_die("the server", "closed the connection unanswered");
    if (getenv("TG_FUZZ_VERBOSE")) fprintf(stderr, "%.*s\n", (int)(got < 400 ? got : 400), answer);
    if (status != 200 && status != 400 && status != 413 && status != 503) fuzz_die("the server", answer);
    const char *payload = strstr(answer, "\r\n\r\n");
    if (status != 200 && !(payload && strstr(payload, "{\"error\":{\"message\":")))
        fuzz_die("a refusal without OpenAI's error object", answer);
    return 0;
}
