/* http_client.h — the loopback HTTP client of fuzz_serve_http (and of its test, tests/unit/test_fuzz_http_client.c):
 * one request on a fresh connection, and the whole answer up to the server's close, within a deadline measured on the
 * monotonic clock. Signals do not cut it short: libFuzzer's -timeout watchdog raises SIGALRM every timeout/2 + 1
 * seconds, and a socket call that a handler interrupts fails with EINTR (a socket with SO_RCVTIMEO never restarts:
 * signal(7)); the harness once read that EINTR as "no answer within 30 s" — its open finding of issue 55, which was
 * the harness's, not the server's. Every wait here is a poll() on the time left, retried after a signal.
 * Header-only (static functions), like fuzz_common.h. */
#ifndef TG_FUZZ_HTTP_CLIENT_H
#define TG_FUZZ_HTTP_CLIENT_H

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double fuzz_http_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Waits until fd is ready for events or the deadline (fuzz_http_now() seconds) passes; a signal only re-arms the
 * wait on the time left. 1: ready (or an error / hang-up to read), 0: the deadline passed, -1: poll failed. */
static int fuzz_http_wait(int fd, short events, double deadline) {
    for (;;) {
        const double left = deadline - fuzz_http_now();
        if (left <= 0) return 0;
        struct pollfd p = {.fd = fd, .events = events};
        const int ms = left > 1e6 ? 1000000000 : (int)(left * 1000) + 1;
        const int n = poll(&p, 1, ms);
        if (n > 0) return 1;
        if (n < 0 && errno != EINTR) return -1;
    }
}

/* Connects to 127.0.0.1:port, sends head[head_len] then body[len] (a server that closes before the body is all sent
 * may still have answered: the answer is read either way), and reads everything until the server closes, into
 * answer[cap] (NUL-terminated; *got bytes; past cap - 1 the rest is read and dropped). Everything within deadline_s
 * seconds. true when the server closed after answering; false with why[why_cap] saying what happened (the connect
 * failed, the deadline passed with how many bytes read, or the error a socket call gave). */
static bool fuzz_http_exchange(int port, const char *head, size_t head_len, const char *body, size_t len,
                               double deadline_s, char *answer, size_t cap, size_t *got, char *why, size_t why_cap) {
    const double t0 = fuzz_http_now(), deadline = t0 + deadline_s;
    *got = 0;
    if (cap) answer[0] = '\0';
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        snprintf(why, why_cap, "socket: %s", strerror(errno));
        return false;
    }
    const int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) {
        snprintf(why, why_cap, "fcntl: %s", strerror(errno));
        close(fd);
        return false;
    }
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        int err = errno;
        if (err == EINPROGRESS || err == EINTR) { /* EINTR: the connection goes on being made */
            socklen_t el = sizeof err;
            const int w = fuzz_http_wait(fd, POLLOUT, deadline);
            if (w <= 0) err = w == 0 ? ETIMEDOUT : errno;
            else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0) err = errno;
        }
        if (err != 0) {
            snprintf(why, why_cap, "connect: %s", strerror(err));
            close(fd);
            return false;
        }
    }
    /* the request: head then body; EPIPE / ECONNRESET end the sending, not the exchange */
    const char *parts[2] = {head, body};
    const size_t sizes[2] = {head_len, len};
    bool sending = true;
    for (int i = 0; i < 2 && sending; i++) {
        size_t off = 0;
        while (off < sizes[i]) {
            const ssize_t w = send(fd, parts[i] + off, sizes[i] - off, MSG_NOSIGNAL);
            if (w > 0) {
                off += (size_t)w;
                continue;
            }
            if (w < 0 && errno == EINTR) continue;
            if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                const int r = fuzz_http_wait(fd, POLLOUT, deadline);
                if (r > 0) continue;
                snprintf(why, why_cap, r == 0 ? "the request was not taken within %.1f s (%zu of %zu bytes sent)"
                                              : "poll: %.1f s, %zu of %zu bytes sent",
                         fuzz_http_now() - t0, off, sizes[i]);
                close(fd);
                return false;
            }
            sending = false; /* the server closed its end: read what it answered */
            break;
        }
    }
    /* the answer, to the server's close */
    for (;;) {
        char scratch[4096];
        char *into = *got + 1 < cap ? answer + *got : scratch;
        const size_t room = *got + 1 < cap ? cap - 1 - *got : sizeof scratch;
        const ssize_t r = recv(fd, into, room, 0);
        if (r == 0) break;
        if (r > 0) {
            if (into != scratch) {
                *got += (size_t)r;
                answer[*got] = '\0';
            }
            continue;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            const int w = fuzz_http_wait(fd, POLLIN, deadline);
            if (w > 0) continue;
            if (w == 0)
                snprintf(why, why_cap, "no answer within %.1f s (%zu bytes read)", fuzz_http_now() - t0, *got);
            else
                snprintf(why, why_cap, "poll: %s (%zu bytes read)", strerror(errno), *got);
            close(fd);
            return false;
        }
        snprintf(why, why_cap, "recv: %s after %.3f s (%zu bytes read)", strerror(errno), fuzz_http_now() - t0, *got);
        close(fd);
        return false;
    }
    close(fd);
    return true;
}

#endif
