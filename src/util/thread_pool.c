/* thread_pool.c — a fixed team of pthreads; waits spin briefly, then sleep (see thread_pool.h).
 *
 * Protocol. A run publishes fn/ctx, sets `pending` to the number of workers and increments `generation`; each
 * worker runs fn when it sees a new generation and decrements `pending`; the caller runs its own share, then waits
 * for `pending` to reach 0. A sleeper announces itself (`sleepers`, `caller_sleeping`) before re-checking the
 * condition under the mutex, and the waker checks the announcement after changing the condition: both use
 * sequentially consistent operations, so at least one of the two sees the other and no wake-up is lost. Each
 * announcement is a read-modify-write, not a store: qemu-user on an x86 host (make test-aarch64) lets an arm64
 * seq_cst store (stlr) pass the seq_cst load (ldar) after it, which arm64 forbids, and the caller then slept with
 * no worker left to wake it (test_thread_pool hung now and then); a read-modify-write is ordered there too. */
#define _POSIX_C_SOURCE 200809L
#include "util/thread_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "util/error.h"

/* Spin iterations before sleeping: a few tens of microseconds, enough to cover the gap between two decode steps
 * (sampling, writing the text) on an idle machine. */
enum { SPINS = 4096 };

typedef struct {
    struct tg_pool *pool;
    int thread;
} worker_arg;

struct tg_pool {
    int n;             /* team size, caller included */
    int started;       /* worker threads running (n - 1 unless the system refused some) */
    pthread_t *threads; /* [n - 1] */
    worker_arg *args;   /* [n - 1] */
    tg_pool_fn fn;      /* the current run (written by the caller before the generation is published) */
    void *ctx;
    bool quit;          /* set with the last generation: workers return */
    atomic_uint generation;
    atomic_int pending;         /* workers that have not finished the current run */
    atomic_int sleepers;        /* workers asleep (or about to be) waiting for a generation */
    atomic_bool caller_sleeping; /* the caller asleep (or about to be) waiting for pending == 0 */
    pthread_mutex_t mu;
    pthread_cond_t wake_workers;
    pthread_cond_t wake_caller;
};

static inline void cpu_relax(void) {
#if defined(__SSE2__)
    _mm_pause();
#endif
}

static void *worker_main(void *arg) {
    const worker_arg *wa = arg;
    struct tg_pool *p = wa->pool;
    unsigned seen = 0;
    for (;;) {
        unsigned g = atomic_load_explicit(&p->generation, memory_order_acquire);
        for (int spin = 0; g == seen && spin < SPINS; spin++) {
            cpu_relax();
            g = atomic_load_explicit(&p->generation, memory_order_acquire);
        }
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while ((g = atomic_load(&p->generation)) == seen) pthread_cond_wait(&p->wake_workers, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
        }
        seen = g;
        if (p->quit) return NULL;
        p->fn(p->ctx, wa->thread);
        if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->caller_sleeping)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->wake_caller);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

tg_pool *tg_pool_new(int n_threads, tg_error *err) {
    if (n_threads < 1) n_threads = 1;
    struct tg_pool *p = calloc(1, sizeof *p);
    if (!p) {
        tg_fail(err, "out of memory for a pool of %d threads", n_threads);
        return NULL;
    }
    p->n = 1;
    if (n_threads > 1) {
        p->threads = calloc((size_t)(n_threads - 1), sizeof *p->threads);
        p->args = calloc((size_t)(n_threads - 1), sizeof *p->args);
        if (!p->threads || !p->args) {
            free(p->threads);
            free(p->args);
            free(p);
            tg_fail(err, "out of memory for a pool of %d threads", n_threads);
            return NULL;
        }
    }
    atomic_init(&p->generation, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->caller_sleeping, false);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake_workers, NULL);
    pthread_cond_init(&p->wake_caller, NULL);
    for (int i = 0; i < n_threads - 1; i++) {
        p->args[i] = (worker_arg){p, i + 1};
        if (pthread_create(&p->threads[i], NULL, worker_main, &p->args[i]) != 0) break; /* a smaller team */
        p->started++;
    }
    p->n = p->started + 1;
    return p;
}

int tg_pool_threads(const tg_pool *p) { return p ? p->n : 1; }

void tg_pool_run(tg_pool *p, tg_pool_fn fn, void *ctx) {
    if (p->n == 1) {
        fn(ctx, 0);
        return;
    }
    p->fn = fn;
    p->ctx = ctx;
    atomic_store(&p->pending, p->n - 1);
    atomic_fetch_add(&p->generation, 1); /* publishes fn, ctx, pending */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake_workers);
        pthread_mutex_unlock(&p->mu);
    }
    fn(ctx, 0);
    for (int spin = 0; spin < SPINS && atomic_load_explicit(&p->pending, memory_order_acquire) > 0; spin++) cpu_relax();
    if (atomic_load(&p->pending) > 0) {
        pthread_mutex_lock(&p->mu);
        atomic_exchange(&p->caller_sleeping, true);
        while (atomic_load(&p->pending) > 0) pthread_cond_wait(&p->wake_caller, &p->mu);
        atomic_store(&p->caller_sleeping, false);
        pthread_mutex_unlock(&p->mu);
    }
}

void tg_pool_free(tg_pool *p) {
    if (!p) return;
    if (p->started > 0) {
        pthread_mutex_lock(&p->mu);
        p->quit = true;
        atomic_fetch_add(&p->generation, 1);
        pthread_cond_broadcast(&p->wake_workers);
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < p->started; i++) pthread_join(p->threads[i], NULL);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake_workers);
    pthread_cond_destroy(&p->wake_caller);
    free(p->threads);
    free(p->args);
    free(p);
}
