/* test_thread_pool.c — the forward pass's team of threads: every member runs once per run, what the members wrote
 * is visible when the run returns, and nothing is lost when waiters fall asleep (runs spaced out so workers sleep,
 * a slow worker so the caller sleeps). */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <time.h>

#include "util/thread_pool.h"

typedef struct {
    int64_t calls[16];   /* per member: how many times it ran (plain writes: the run's end must publish them) */
    int64_t payload[16]; /* per member: a value derived from the run number */
    int64_t run;         /* the current run number, written by the caller before the run */
    atomic_int concurrent;
    int slow_member;     /* this member sleeps ~200 us in every run (-1: none) */
} work;

/* A nap is the stimulus here, not a wait for an event: it makes a worker or the caller fall asleep so that the
 * wake-ups are exercised; the checks (every member ran once per run, its writes visible) hold at any timing. */
static void nap_us(long us) {
    struct timespec t = {0, us * 1000};
    nanosleep(&t, NULL);
}

static void member(void *ctx, int thread) {
    work *w = ctx;
    atomic_fetch_add(&w->concurrent, 1);
    if (thread == w->slow_member) nap_us(200);
    w->calls[thread]++;
    w->payload[thread] = w->run * 1000 + thread;
}

static void exercise(int n_threads, int runs, long gap_us, int slow_member) {
    tg_error err = {0};
    tg_pool *p = tg_pool_new(n_threads, &err);
    assert_non_null(p);
    const int n = tg_pool_threads(p);
    assert_true(n >= 1 && n <= n_threads);
    assert_int_equal(n, n_threads); /* a test machine starts a handful of threads */
    work w = {.slow_member = slow_member};
    atomic_init(&w.concurrent, 0);
    for (int r = 0; r < runs; r++) {
        w.run = r;
        tg_pool_run(p, member, &w);
        for (int t = 0; t < n; t++) {
            if (w.calls[t] != r + 1) fail_msg("%d threads, run %d: member %d ran %lld times", n, r, t, (long long)w.calls[t]);
            if (w.payload[t] != (int64_t)r * 1000 + t) fail_msg("%d threads, run %d: member %d's write not visible", n, r, t);
        }
        if (gap_us) nap_us(gap_us);
    }
    assert_int_equal(atomic_load(&w.concurrent), n * runs);
    tg_pool_free(p);
}

static void test_back_to_back_runs(void **state) {
    (void)state;
    for (int n = 1; n <= 8; n *= 2) exercise(n, 3000, 0, -1);
}

/* Spaced runs: the workers' spin ends and they sleep; each run must wake them. */
static void test_runs_after_sleep(void **state) {
    (void)state;
    exercise(2, 60, 2000, -1);
    exercise(4, 30, 2000, -1);
}

/* A slow worker: the caller finishes first, spins out and sleeps; the worker's end must wake it. */
static void test_slow_worker_wakes_caller(void **state) {
    (void)state;
    exercise(2, 100, 0, 1);
    exercise(3, 50, 500, 2);
}

static void test_free_without_runs(void **state) {
    (void)state;
    tg_error err = {0};
    for (int n = 1; n <= 4; n++) {
        tg_pool *p = tg_pool_new(n, &err);
        assert_non_null(p);
        tg_pool_free(p);
    }
    tg_pool_free(NULL);
    tg_pool *p = tg_pool_new(0, &err); /* clamped to one */
    assert_non_null(p);
    assert_int_equal(tg_pool_threads(p), 1);
    tg_pool_free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_back_to_back_runs),
        cmocka_unit_test(test_runs_after_sleep),
        cmocka_unit_test(test_slow_worker_wakes_caller),
        cmocka_unit_test(test_free_without_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
