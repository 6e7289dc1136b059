/* test_fuzz_http_client.c — fuzz/http_client.h, the loopback client of fuzz_serve_http: a signal that lands while it
 * waits for the answer does not end the exchange (libFuzzer's -timeout watchdog raises SIGALRM every timeout/2 + 1
 * seconds; the harness's recv() once failed with EINTR there and reported "no answer", the open finding of issue 55
 * that was the harness's own). A raw socket server in a thread reads the request, then three times waits until the
 * client's thread sleeps (in its wait for the answer: /proc/self/task/TID/stat says S), sends it SIGALRM through a
 * handler installed without SA_RESTART (as libFuzzer's is) and waits until the handler ran; only then it answers.
 * Every wait is on an event (bounded, so that a broken client fails the test instead of hanging it). Linux only
 * (the thread's state is read from /proc). */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>

#include <cmocka.h>

#include "../../fuzz/http_client.h"

static atomic_int alarms;      /* SIGALRMs handled */
static atomic_int client_tid;  /* the client thread's kernel id, once it runs */
static atomic_bool client_done; /* the client's exchange has returned */

static void on_alarm(int sig) {
    (void)sig;
    atomic_fetch_add(&alarms, 1);
}

/* The state letter of thread tid (R, S, D, ...), '?' when unreadable. */
static char thread_state(int tid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    FILE *f = fopen(path, "r");
    if (!f) return '?';
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the name may hold spaces and parentheses: the state follows the last ')' */
    return p && p[1] == ' ' ? p[2] : '?';
}

/* Polls cond every millisecond for at most 20 s (an event's bound, not a timing assumption): false when it never held. */
static bool wait_until(bool (*cond)(void *), void *arg) {
    for (int i = 0; i < 20000; i++) {
        if (cond(arg)) return true;
        const struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    return false;
}

/* The client sleeps (or has given up already: nothing more to wait for). */
static bool client_sleeps(void *arg) {
    (void)arg;
    if (atomic_load(&client_done)) return true;
    const int tid = atomic_load(&client_tid);
    return tid > 0 && thread_state(tid) == 'S';
}

static bool alarms_reach(void *arg) { return atomic_load(&alarms) >= *(const int *)arg; }

typedef struct {
    int listen_fd;
    pthread_t client;
    int signals;     /* SIGALRMs to deliver before answering */
    bool answer;     /* false: read the request and never answer (close only when the client has gone) */
    bool ok;         /* every wait met its event */
} server_arg;

static const char ANSWER[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";

static void *serve_one(void *p) {
    server_arg *s = p;
    s->ok = false;
    const int c = accept(s->listen_fd, NULL, NULL);
    if (c < 0) return NULL;
    char req[4096];
    size_t n = 0;
    while (n < sizeof req - 1) { /* the head and the 4-byte body */
        const ssize_t r = recv(c, req + n, sizeof req - 1 - n, 0);
        if (r <= 0) break;
        n += (size_t)r;
        req[n] = '\0';
        const char *end = strstr(req, "\r\n\r\n");
        if (end && (size_t)(end + 4 - req) + 4 <= n) break;
    }
    for (int i = 1; i <= s->signals; i++) {
        if (!wait_until(client_sleeps, NULL) || atomic_load(&client_done)) goto out;
        pthread_kill(s->client, SIGALRM);
        if (!wait_until(alarms_reach, &i)) goto out;
    }
    if (s->answer) {
        if (send(c, ANSWER, sizeof ANSWER - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof ANSWER - 1)) goto out;
    } else {
        char x;
        while (recv(c, &x, 1, 0) > 0) continue; /* until the client gives up and closes */
    }
    s->ok = true;
out:
    close(c);
    return NULL;
}

typedef struct {
    int port;
    double deadline_s;
    bool result;
    char answer[256];
    size_t got;
    char why[200];
} client_arg;

static void *client_main(void *p) {
    client_arg *a = p;
    atomic_store(&client_tid, (int)syscall(SYS_gettid));
    static const char head[] = "POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\n";
    a->result = fuzz_http_exchange(a->port, head, sizeof head - 1, "{}{}", 4, a->deadline_s, a->answer,
                                   sizeof a->answer, &a->got, a->why, sizeof a->why);
    atomic_store(&client_done, true);
    return NULL;
}

/* A listening socket on 127.0.0.1 and its port. */
static int listen_any(int *port) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 4), 0);
    socklen_t al = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* Runs one exchange against serve_one; the client runs in its own thread so that the server can signal it. */
static void exchange(int signals, bool answer, double deadline_s, client_arg *ca, server_arg *sa) {
    struct sigaction act = {0};
    act.sa_handler = on_alarm; /* no SA_RESTART, as libFuzzer's handler */
    sigemptyset(&act.sa_mask);
    assert_int_equal(sigaction(SIGALRM, &act, NULL), 0);
    atomic_store(&alarms, 0);
    atomic_store(&client_tid, 0);
    atomic_store(&client_done, false);
    int port;
    *sa = (server_arg){.listen_fd = listen_any(&port), .signals = signals, .answer = answer};
    *ca = (client_arg){.port = port, .deadline_s = deadline_s};
    pthread_t server;
    assert_int_equal(pthread_create(&sa->client, NULL, client_main, ca), 0);
    assert_int_equal(pthread_create(&server, NULL, serve_one, sa), 0);
    pthread_join(sa->client, NULL);
    pthread_join(server, NULL);
    close(sa->listen_fd);
    signal(SIGALRM, SIG_DFL);
}

/* Three SIGALRMs while the client waits: it still reads the whole answer. */
static void test_signals_do_not_end_the_wait(void **state) {
    (void)state;
    client_arg ca;
    server_arg sa;
    exchange(3, true, 60, &ca, &sa);
    if (!ca.result) fail_msg("the client gave up: %s", ca.why);
    assert_true(sa.ok); /* the client slept three times, and each signal was handled */
    assert_int_equal(ca.got, sizeof ANSWER - 1);
    assert_string_equal(ca.answer, ANSWER);
}

/* A server that never answers: the client gives up at its deadline (signals or not) and says so. */
static void test_no_answer_reported(void **state) {
    (void)state;
    client_arg ca;
    server_arg sa;
    exchange(0, false, 0.5, &ca, &sa);
    assert_true(sa.ok);
    assert_false(ca.result);
    assert_non_null(strstr(ca.why, "no answer within"));
    assert_int_equal(ca.got, 0);
}

/* Nobody listening: a clear connect error, no wait. */
static void test_refused(void **state) {
    (void)state;
    int port;
    const int fd = listen_any(&port);
    close(fd); /* the port is now closed */
    char answer[16], why[200];
    size_t got = 1;
    assert_false(fuzz_http_exchange(port, "GET / HTTP/1.1\r\n\r\n", 18, "", 0, 5, answer, sizeof answer, &got, why,
                                    sizeof why));
    assert_int_equal(got, 0);
    assert_non_null(strstr(why, "connect: "));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_signals_do_not_end_the_wait),
        cmocka_unit_test(test_no_answer_reported),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
