/* bandwidth_child.c — the bandwidth probe in a forked child, driven over two pipes (bandwidth_child.h). */
#define _POSIX_C_SOURCE 200809L
#include "cli/bandwidth_child.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

/* All n bytes of buf written to fd (out) or read from it, across short transfers and interrupts; false on an error
 * or the other end closed. */
static bool transfer(int fd, void *buf, size_t n, bool out) {
    char *p = buf;
    while (n > 0) {
        const ssize_t k = out ? write(fd, p, n) : read(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p += k;
        n -= (size_t)k;
    }
    return true;
}

/* The child: the probe's size (0 on failure), then a pass per request byte until the parent closes its end. */
static void serve(int in, int out, int64_t mib, int n_threads) {
    tg_bandwidth_probe *p = tg_bandwidth_probe_new(mib, n_threads);
    int64_t bytes = tg_bandwidth_probe_bytes(p);
    if (!transfer(out, &bytes, sizeof bytes, true) || !p) {
        tg_bandwidth_probe_free(p);
        return;
    }
    char req;
    while (transfer(in, &req, 1, false)) {
        double s[TG_BANDWIDTH_PATTERNS];
        tg_bandwidth_probe_pass(p, s);
        if (!transfer(out, s, sizeof s, true)) break;
    }
    tg_bandwidth_probe_free(p);
}

bool tg_bw_child_start(tg_bw_child *c, int64_t mib, int n_threads) {
    *c = (tg_bw_child){.to_child = -1, .from_child = -1};
    int req[2], rep[2];
    if (pipe(req) != 0) return false;
    if (pipe(rep) != 0) {
        close(req[0]);
        close(req[1]);
        return false;
    }
    fflush(NULL); /* nothing buffered is written twice */
    const pid_t pid = fork();
    if (pid == 0) {
        close(req[1]);
        close(rep[0]);
        serve(req[0], rep[1], mib, n_threads);
        _exit(0);
    }
    close(req[0]);
    close(rep[1]);
    c->pid = pid > 0 ? pid : 0;
    c->to_child = req[1];
    c->from_child = rep[0];
    if (pid < 0 || !transfer(c->from_child, &c->bytes, sizeof c->bytes, false) || c->bytes <= 0) {
        tg_bw_child_stop(c);
        return false;
    }
    return true;
}

bool tg_bw_child_pass(tg_bw_child *c, double seconds[TG_BANDWIDTH_PATTERNS]) {
    char req = 'p';
    return c->pid > 0 && transfer(c->to_child, &req, 1, true) &&
           transfer(c->from_child, seconds, TG_BANDWIDTH_PATTERNS * sizeof *seconds, false);
}

void tg_bw_child_start_or_warn(tg_bw_child *c, int64_t mib, int n_threads) {
    if (!tg_bw_child_start(c, mib, n_threads > 0 ? n_threads : tg_threads_all_cores()))
        fprintf(stderr, "tinygpt: bench: the read-bandwidth test could not start (%" PRId64 " MiB; fork or memory "
                "failed): no roofline\n", mib);
}

void tg_bw_child_stop(tg_bw_child *c) {
    if (c->to_child >= 0) close(c->to_child);
    if (c->from_child >= 0) close(c->from_child);
    if (c->pid > 0) {
        int st;
        while (waitpid(c->pid, &st, 0) < 0 && errno == EINTR) {
        }
    }
    *c = (tg_bw_child){.to_child = -1, .from_child = -1};
}
