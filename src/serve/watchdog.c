/* watchdog.c — the request deadline (watchdog.h): a list of the watched connections under one mutex, and a thread
 * that wakes every `tick` seconds and shuts down the sockets whose request is overdue. shutdown() leaves the file
 * descriptor to libmicrohttpd, which owns it: its reads then see the end of the stream and it closes the connection
 * as it would any other. */
#define _POSIX_C_SOURCE 200809L

#include "serve/watchdog.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "util/clock.h"

struct tg_watch {
    int fd;
    double due;    /* tg_monotonic_s() by which the request must be in; 0: none due (it is being answered) */
    bool shut;     /* shut down already */
    tg_watch *prev, *next;
};

struct tg_watchdog {
    double deadline, tick;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    bool quit;         /* under mu */
    tg_watch *head;    /* under mu */
};

static void *watch_main(void *arg) {
    tg_watchdog *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->quit) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        const double t = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9 + w->tick;
        ts.tv_sec = (time_t)t;
        ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
        pthread_cond_timedwait(&w->cv, &w->mu, &ts);
        const double now = tg_monotonic_s();
        for (tg_watch *c = w->head; c; c = c->next) {
            if (c->shut || c->due <= 0 || now < c->due) continue;
            shutdown(c->fd, SHUT_RDWR);
            c->shut = true;
        }
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

tg_watchdog *tg_watchdog_start(double deadline_s) {
    tg_watchdog *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->deadline = deadline_s;
    w->tick = deadline_s / 10 < 1.0 ? deadline_s / 10 : 1.0;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&w->mu, NULL);
    if (pthread_create(&w->thread, NULL, watch_main, w) != 0) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        free(w);
        return NULL;
    }
    return w;
}

void tg_watchdog_stop(tg_watchdog *w) {
    if (!w) return;
    pthread_mutex_lock(&w->mu);
    w->quit = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    free(w);
}

tg_watch *tg_watchdog_add(tg_watchdog *w, int fd) {
    tg_watch *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->fd = fd;
    c->due = tg_monotonic_s() + w->deadline;
    pthread_mutex_lock(&w->mu);
    c->next = w->head;
    if (w->head) w->head->prev = c;
    w->head = c;
    pthread_mutex_unlock(&w->mu);
    return c;
}

void tg_watchdog_request_read(tg_watchdog *w, tg_watch *c) {
    if (!c) return;
    pthread_mutex_lock(&w->mu);
    c->due = 0;
    pthread_mutex_unlock(&w->mu);
}

void tg_watchdog_answered(tg_watchdog *w, tg_watch *c) {
    if (!c) return;
    pthread_mutex_lock(&w->mu);
    c->due = tg_monotonic_s() + w->deadline;
    pthread_mutex_unlock(&w->mu);
}

void tg_watchdog_forget(tg_watchdog *w, tg_watch *c) {
    if (!c) return;
    pthread_mutex_lock(&w->mu);
    if (c->prev) c->prev->next = c->next;
    else w->head = c->next;
    if (c->next) c->next->prev = c->prev;
    pthread_mutex_unlock(&w->mu);
    free(c);
}
