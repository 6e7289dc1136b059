/* http.c — libmicrohttpd glue (http.h): one thread per connection, so a handler may block until its job is done and
 * a stream's reader may wait for the next token. The access handler checks the key as soon as the headers are in
 * (before any body is read), accumulates the body (refusing one over max_body with 413, from Content-Length before
 * reading it when the client declares it), and routes. A connection whose body passes BULK_BYTES is served at a lower
 * CPU priority from then on (lower_priority); the rest of a body that is already refused is read at a bounded rate
 * (pace_refused). */
#define _GNU_SOURCE
#define _DARWIN_C_SOURCE /* the same on macOS, whose headers hide them once _POSIX_C_SOURCE is set */

#include "serve/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "serve/generate.h"
#include "serve/openai.h"
#include "serve/watchdog.h"
#include "util/clock.h"

struct tg_http {
    struct MHD_Daemon *d;
    tg_server *srv;
    tg_watchdog *wd; /* the request deadline */
    int port;
};

/* The connection's watch (NULL when it is not watched). */
static tg_watch *watch_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
    tg_http *h = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        *socket_context = ci ? tg_watchdog_add(h->wd, ci->connect_fd) : NULL;
    } else {
        tg_watchdog_forget(h->wd, *socket_context);
        *socket_context = NULL;
    }
}

/* A body past BULK_BYTES makes its connection bulk work (lower_priority). */
#define BULK_BYTES ((size_t)64 * 1024)
#define BULK_NICE 10

/* The calling thread — the connection's own thread of libmicrohttpd, which serves nothing else — gives way to the
 * server's other threads for the rest of the connection (its answer, and any later request on it when the client keeps
 * it open): BULK_NICE added to its nice value. A connection receiving a large body (a 4 MB upload, refused or not)
 * then no longer takes the cores in equal share with /health, the short requests' parsing and the scheduler's forward
 * pass; it still gets all the time nobody else wants. Linux only (the nice value of one thread, which needs no
 * privilege to raise); elsewhere nothing. */
static void lower_priority(void) {
#if defined(__linux__)
    const id_t tid = (id_t)syscall(SYS_gettid);
    errno = 0;
    const int nice_now = getpriority(PRIO_PROCESS, tid);
    if (errno == 0 && nice_now < 19)
        (void)setpriority(PRIO_PROCESS, tid, nice_now + BULK_NICE > 19 ? 19 : nice_now + BULK_NICE);
#endif
}

/* The slowest a refused body is read: at least this many bytes a second, and fast enough for the largest body the
 * server takes to drain in half the request deadline (so that the refusal is still answered). */
#define REFUSED_RATE_MIN ((double)256 * 1024)
/* The longest one pause of pace_refused (the connection's thread sleeps; a stopping server waits for it). */
#define REFUSED_PAUSE_MAX 0.25

/* One request's state across the access handler's calls. */
typedef struct {
    char *body;
    size_t len, cap;
    size_t received; /* body bytes seen, kept or not */
    bool bulk;       /* received passed BULK_BYTES: the thread's priority is lowered */
    bool too_big;
    bool answered; /* refused when the headers came in (401, 413): whatever body follows is dropped unread */
    tg_json_count count; /* the body's JSON values so far: past TG_SERVE_MAX_JSON_VALUES the rest is not kept */
    double refused_t;      /* when the body was known refused (monotonic s); 0: not (yet) */
    size_t refused_bytes;  /* body bytes read since then */
} conn_ctx;

/* Whether the request's body is refused whatever follows (answered at the headers, over --max-body, past the JSON
 * value cap). */
static bool body_refused(const conn_ctx *cc) {
    return cc->answered || cc->too_big || cc->count.values > TG_SERVE_MAX_JSON_VALUES;
}

/* Reads the rest of a refused body at a bounded rate: the connection's thread pauses so that the bytes read since
 * the refusal take at least bytes / rate seconds. The refusal is still answered once the body is in, but a client
 * that sends refused bodies in a loop as fast as loopback takes them (12 x 4 MB of `{},`: issue 55) no longer takes
 * the cores from the requests that can be served: the kernel's receiving and our reading slow down together, as
 * TCP's window closes. */
static void pace_refused(const tg_server *srv, conn_ctx *cc, size_t n) {
    const double now = tg_monotonic_s();
    if (cc->refused_t == 0) {
        cc->refused_t = now;
        return;
    }
    cc->refused_bytes += n;
    double rate = srv->request_timeout > 0 ? 2.0 * (double)srv->max_body / srv->request_timeout : 0;
    if (rate < REFUSED_RATE_MIN) rate = REFUSED_RATE_MIN;
    double wait = cc->refused_t + (double)cc->refused_bytes / rate - now;
    if (wait <= 0) return;
    if (wait > REFUSED_PAUSE_MAX) wait = REFUSED_PAUSE_MAX;
    struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

enum MHD_Result tg_http_send(tg_server *srv, struct MHD_Connection *c, unsigned status, const char *content_type,
                             const char *body, size_t len) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", content_type);
    if (status == 503) MHD_add_response_header(r, "Retry-After", "1");
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    const enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    tg_metrics_response(srv->metrics, (int)status);
    return ok;
}

enum MHD_Result tg_http_send_error(tg_server *srv, struct MHD_Connection *c, const tg_serve_error *e) {
    char *body = tg_oai_error(e);
    if (!body) return MHD_NO;
    const enum MHD_Result ok = tg_http_send(srv, c, (unsigned)e->status, "application/json", body, strlen(body));
    free(body);
    return ok;
}

/* The end of the client's sending side (POLLRDHUP, a read of 0 bytes) is not its going: a client may shut down its
 * writing half after the request (shutdown(SHUT_WR)) and still read the answer. Gone means the connection is
 * reset or closed both ways (POLLHUP, POLLERR), which a client that closed its socket shows at the latest once the
 * server has written to it. */
bool tg_http_client_gone(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return true;
    struct pollfd p = {.fd = ci->connect_fd, .events = 0};
    if (poll(&p, 1, 0) <= 0) return false;
    return (p.revents & (POLLHUP | POLLERR | POLLNVAL)) != 0;
}

/* "Authorization: Bearer KEY" against the server's key, in time independent of where they differ. */
static bool authorized(const tg_server *srv, struct MHD_Connection *c) {
    if (!srv->api_key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7) != 0) return false;
    h += 7;
    const size_t n = strlen(h), k = strlen(srv->api_key);
    unsigned diff = n != k;
    for (size_t i = 0; i < n && i < k; i++) diff |= (unsigned char)h[i] ^ (unsigned char)srv->api_key[i];
    return diff == 0;
}

static enum MHD_Result fail(tg_server *srv, struct MHD_Connection *c, int status, const char *type, const char *code,
                            const char *msg) {
    tg_serve_error e;
    tg_serve_fail(&e, status, type, NULL, "%s", msg);
    e.code = code;
    return tg_http_send_error(srv, c, &e);
}

static enum MHD_Result send_metrics(tg_server *srv, struct MHD_Connection *c) {
    tg_metrics_gauges g;
    tg_sched_gauges(srv->sched, &g);
    size_t len = 0;
    char *text = tg_metrics_render(srv->metrics, &g, &len);
    if (!text) return MHD_NO;
    const enum MHD_Result ok = tg_http_send(srv, c, 200, "text/plain; version=0.0.4", text, len);
    free(text);
    return ok;
}

static enum MHD_Result route(tg_server *srv, struct MHD_Connection *c, const char *url, const char *method,
                             conn_ctx *cc) {
    const bool get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0;
    if (strcmp(url, "/health") == 0) {
        if (!get) return fail(srv, c, 405, "invalid_request_error", NULL, "use GET /health");
        if (atomic_load(&srv->draining)) {
            static const char body[] = "{\"status\":\"shutting down\"}";
            return tg_http_send(srv, c, 503, "application/json", body, sizeof body - 1);
        }
        static const char body[] = "{\"status\":\"ok\"}";
        return tg_http_send(srv, c, 200, "application/json", body, sizeof body - 1);
    }
    if (!authorized(srv, c))
        return fail(srv, c, 401, "authentication_error", "invalid_api_key",
                    "missing or wrong API key: send the header 'Authorization: Bearer KEY'");
    if (strcmp(url, "/v1/models") == 0 || strcmp(url, "/models") == 0) {
        if (!get) return fail(srv, c, 405, "invalid_request_error", NULL, "use GET /v1/models");
        char *body = tg_oai_models(srv->model_id, srv->created);
        if (!body) return MHD_NO;
        const enum MHD_Result ok = tg_http_send(srv, c, 200, "application/json", body, strlen(body));
        free(body);
        return ok;
    }
    if (strcmp(url, "/metrics") == 0) {
        if (!get) return fail(srv, c, 405, "invalid_request_error", NULL, "use GET /metrics");
        return send_metrics(srv, c);
    }
    const bool completions = strcmp(url, "/v1/completions") == 0 || strcmp(url, "/completions") == 0;
    const bool chat = strcmp(url, "/v1/chat/completions") == 0 || strcmp(url, "/chat/completions") == 0;
    if (completions || chat) {
        if (!post) return fail(srv, c, 405, "invalid_request_error", NULL, "use POST");
        return tg_serve_generate(srv, c, chat ? TG_SERVE_CHAT : TG_SERVE_COMPLETION, cc->body ? cc->body : "",
                                 cc->len);
    }
    return fail(srv, c, 404, "invalid_request_error", "not_found", "no such route");
}

/* Counts the request's Content-Length and Transfer-Encoding headers (MHD_get_connection_values' iterator). */
typedef struct {
    int lengths, encodings;
} framing;

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    (void)value;
    framing *f = cls;
    if (strcasecmp(key, "Content-Length") == 0) f->lengths++;
    if (strcasecmp(key, "Transfer-Encoding") == 0) f->encodings++;
    return MHD_YES;
}

/* Whether the body's length is told one way only: libmicrohttpd 0.9.75 takes the first of two Content-Length headers
 * (and Transfer-Encoding over Content-Length), where a proxy in front may take another, so that the two read a
 * different request boundary (request smuggling). Such a request is refused before its body is read. */
static bool one_framing(struct MHD_Connection *c) {
    framing f = {0, 0};
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_framing, &f);
    return f.lengths + f.encodings <= 1;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    (void)version;
    tg_http *h = cls;
    tg_server *srv = h->srv;
    conn_ctx *cc = *con_cls;
    if (!cc) { /* the headers are in */
        cc = calloc(1, sizeof *cc);
        if (!cc) return MHD_NO;
        cc->count.values = 1;
        *con_cls = cc;
        /* the key before any body is read: a keyless client costs no buffer */
        if (strcmp(url, "/health") != 0 && !authorized(srv, c)) {
            cc->answered = true;
            return fail(srv, c, 401, "authentication_error", "invalid_api_key",
                        "missing or wrong API key: send the header 'Authorization: Bearer KEY'");
        }
        if (!one_framing(c)) {
            cc->answered = true;
            return fail(srv, c, 400, "invalid_request_error", NULL,
                        "the body's length is given more than once (Content-Length twice, or with Transfer-Encoding)");
        }
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl) {
            char *end = NULL;
            unsigned long long n = strtoull(cl, &end, 10);
            if (end != cl && n > (unsigned long long)srv->max_body) cc->too_big = true;
        }
        if (cc->too_big) {
            char msg[160];
            snprintf(msg, sizeof msg, "the body is larger than the server's limit of %lld bytes (--max-body)",
                     (long long)srv->max_body);
            cc->answered = true;
            return fail(srv, c, 413, "invalid_request_error", "request_too_large", msg);
        }
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        cc->received += *upload_data_size;
        if (!cc->bulk && cc->received > BULK_BYTES) {
            cc->bulk = true;
            lower_priority();
        }
        if (body_refused(cc)) pace_refused(srv, cc, *upload_data_size);
    }
    if (cc->answered) {
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size > 0) { /* a piece of the body */
        const size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (cc->too_big || cc->count.values > TG_SERVE_MAX_JSON_VALUES) return MHD_YES;
        /* too many JSON values: the body is refused whatever follows, so nothing more is kept, and it never waits
         * for its turn to be parsed (tg_prep) beside the requests that can be served */
        tg_json_count_feed(&cc->count, upload_data, n);
        if (cc->count.values > TG_SERVE_MAX_JSON_VALUES) {
            free(cc->body);
            cc->body = NULL;
            cc->len = cc->cap = 0;
            return MHD_YES;
        }
        if (n > (size_t)srv->max_body - cc->len) {
            cc->too_big = true;
            return MHD_YES;
        }
        if (cc->len + n + 1 > cc->cap) {
            size_t cap = cc->cap ? cc->cap : 4096;
            while (cap < cc->len + n + 1) cap *= 2;
            char *p = realloc(cc->body, cap);
            if (!p) return MHD_NO;
            cc->body = p;
            cc->cap = cap;
        }
        memcpy(cc->body + cc->len, upload_data, n);
        cc->len += n;
        cc->body[cc->len] = '\0';
        return MHD_YES;
    }
    if (cc->too_big) {
        char msg[160];
        snprintf(msg, sizeof msg, "the body is larger than the server's limit of %lld bytes (--max-body)",
                 (long long)srv->max_body);
        return fail(srv, c, 413, "invalid_request_error", "request_too_large", msg);
    }
    if (cc->count.values > TG_SERVE_MAX_JSON_VALUES) {
        char msg[160];
        snprintf(msg, sizeof msg, "the body has more than %d JSON values (objects, arrays, items)",
                 TG_SERVE_MAX_JSON_VALUES);
        return fail(srv, c, 400, "invalid_request_error", NULL, msg);
    }
    tg_watchdog_request_read(h->wd, watch_of(c));
    return route(srv, c, url, method, cc);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)toe;
    tg_http *h = cls;
    tg_watchdog_answered(h->wd, watch_of(c));
    conn_ctx *cc = *con_cls;
    if (cc) {
        free(cc->body);
        free(cc);
    }
    *con_cls = NULL;
}

tg_http *tg_http_start(tg_server *srv, char *msg, size_t cap) {
    tg_http *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(msg, cap, "out of memory");
        return NULL;
    }
    h->srv = srv;
    h->wd = tg_watchdog_start(srv->request_timeout);
    if (!h->wd) {
        snprintf(msg, cap, "cannot start the request deadline's thread");
        free(h);
        return NULL;
    }
    struct sockaddr_in a4 = {0};
    struct sockaddr_in6 a6 = {0};
    struct sockaddr *addr;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL;
    if (inet_pton(AF_INET, srv->host, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)srv->port);
        addr = (struct sockaddr *)&a4;
    } else if (inet_pton(AF_INET6, srv->host, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)srv->port);
        addr = (struct sockaddr *)&a6;
        flags |= MHD_USE_IPv6;
    } else {
        snprintf(msg, cap, "--host %s: not an IPv4 or IPv6 address", srv->host);
        tg_watchdog_stop(h->wd);
        free(h);
        return NULL;
    }
    /* a connection over either limit is accepted and closed at once by libmicrohttpd (no busy loop: the connection
     * limit stays below the descriptors this process may open, so accept never fails with EMFILE) */
    h->d = MHD_start_daemon(flags, (uint16_t)srv->port, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR, addr,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
                            h, MHD_OPTION_CONNECTION_LIMIT, srv->max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                            srv->max_connections_per_ip, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)120,
                            MHD_OPTION_END);
    if (!h->d) {
        snprintf(msg, cap, "cannot listen on %s port %d (in use, or not an address of this machine)", srv->host,
                 srv->port);
        tg_watchdog_stop(h->wd);
        free(h);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = di ? (int)di->port : srv->port;
    return h;
}

int tg_http_port(const tg_http *h) { return h->port; }

void tg_http_stop(tg_http *h) {
    if (!h) return;
    MHD_stop_daemon(h->d);
    tg_watchdog_stop(h->wd);
    free(h);
}
