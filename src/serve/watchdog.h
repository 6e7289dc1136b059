/* watchdog.h — the request deadline of `tinygpt serve`: a connection must deliver each request (its headers and
 * its body) within the deadline, counted from when it connects or from the end of its previous answer; one that does
 * not — a slow-loris client sending a header line now and then, or a keep-alive connection left idle — has its
 * socket shut down, so libmicrohttpd sees the end of it and closes it. Answering a request has no deadline (a
 * generation takes as long as it takes; a client that goes is noticed by the handlers). */
#ifndef TG_SERVE_WATCHDOG_H
#define TG_SERVE_WATCHDOG_H

typedef struct tg_watchdog tg_watchdog;
typedef struct tg_watch tg_watch; /* one connection */

/* Starts the thread that shuts down the late connections (checking every tenth of the deadline, at most every
 * second). NULL when the thread or memory cannot be had. */
tg_watchdog *tg_watchdog_start(double deadline_s);
/* Stops the thread and frees the watchdog (every connection must have been forgotten). NULL: nothing. */
void tg_watchdog_stop(tg_watchdog *w);

/* A new connection on socket fd: its first request is due within the deadline. NULL when memory runs out (the
 * connection is then not watched). */
tg_watch *tg_watchdog_add(tg_watchdog *w, int fd);
/* The connection's request is in (headers and body): no deadline while it is answered. */
void tg_watchdog_request_read(tg_watchdog *w, tg_watch *c);
/* Its answer is done: the next request is due within the deadline from now. */
void tg_watchdog_answered(tg_watchdog *w, tg_watch *c);
/* The connection has closed (c is freed). c NULL: nothing. */
void tg_watchdog_forget(tg_watchdog *w, tg_watch *c);

#endif
