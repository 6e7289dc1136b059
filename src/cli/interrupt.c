/* interrupt.c — the SIGINT flag of the measuring commands. The flag and the time of the first interrupt are the only
 * static mutable state: a signal handler can only reach statics. */
#define _POSIX_C_SOURCE 200809L

#include "cli/interrupt.h"

#include <signal.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t interrupted = 0;
static struct timespec first_interrupt; /* written only by the handler, which SIGINT cannot re-enter */

/* The first Ctrl-C sets the flag; a second one at least 0.5 s later ends the process by SIGINT (copies of the first
 * within microseconds, as `timeout -s INT` and terminals deliver, are ignored). Async-signal-safe calls only. */
static void on_sigint(int sig) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (!interrupted) {
        first_interrupt = t;
        interrupted = 1;
        return;
    }
    long long ms = (long long)(t.tv_sec - first_interrupt.tv_sec) * 1000 +
                   (t.tv_nsec - first_interrupt.tv_nsec) / 1000000;
    if (ms >= 500) {
        signal(sig, SIG_DFL);
        raise(sig);
    }
}

void tg_interrupt_catch(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}

bool tg_interrupted(void) { return interrupted != 0; }
