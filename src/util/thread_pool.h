/* thread_pool.h — a fixed team of threads that runs one function on every member, one run at a time: fork/join
 * without creating threads per call.
 *
 * Waiting threads (workers between runs, the caller waiting for the last worker) spin for a few microseconds and
 * then sleep on a condition variable. Spinning keeps a run's start and end cheap on an idle machine; sleeping gives
 * the core to whoever needs it on a busy one. OpenMP's default in libgomp (spin for a long time between parallel
 * regions, settable only through OMP_WAIT_POLICY in the environment before the process starts) made two threads
 * slower than one on a machine with other work. */
#ifndef TG_UTIL_THREAD_POOL_H
#define TG_UTIL_THREAD_POOL_H

#include "tinygpt.h"

typedef struct tg_pool tg_pool;

/* The work of one run: called once per member with thread = 0 .. n_threads - 1. */
typedef void (*tg_pool_fn)(void *ctx, int thread);

/* A team of n_threads >= 1 (the caller of tg_pool_run is thread 0; n_threads - 1 threads are started). When the
 * system refuses a thread, the team is smaller: tg_pool_threads says how many. NULL (err filled) only when out of
 * memory. */
tg_pool *tg_pool_new(int n_threads, tg_error *err);

/* The team's size, >= 1. */
int tg_pool_threads(const tg_pool *p);

/* Runs fn(ctx, t) for every t in [0, tg_pool_threads(p)), t = 0 on the calling thread, and returns when all have
 * returned (everything they wrote is then visible to the caller). One run at a time: not to be called from fn or
 * from two threads at once. */
void tg_pool_run(tg_pool *p, tg_pool_fn fn, void *ctx);

/* Stops and joins the threads; NULL is a no-op. */
void tg_pool_free(tg_pool *p);

#endif
