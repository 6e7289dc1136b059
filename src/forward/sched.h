/* sched.h — the CPU backend's step scheduler: a call is one run of the thread team through a sequence of steps,
 * each a list of independent units that threads claim from an atomic counter.
 *
 * A step ends when all its units are done, not when all threads have arrived, so a thread that the OS has
 * descheduled (a busy machine) never holds the others up unless it is in the middle of a unit: the others do its
 * share and it catches up through the finished steps when it runs again. In a matrix step each thread owns a
 * contiguous range of the units and takes them in order (it streams one stretch of the weights, and the decode
 * kernels' prefetch runs on from one unit into its next); a thread whose range is done takes the last units left in
 * another's range, so the counter's balance on a busy machine holds. */
#ifndef TG_FORWARD_SCHED_H
#define TG_FORWARD_SCHED_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One step's counters: units handed out and units finished. */
typedef struct {
    atomic_llong next;
    atomic_llong done;
} tg_step_ctr;

/* One thread's share of a matrix step: a contiguous range of its units. The owner takes units from the front, the
 * others (once their own shares are done) from the back: taken = front << 32 | back. One cache line each, so that
 * the owners' claims do not contend. */
typedef struct {
    _Alignas(64) _Atomic uint64_t taken;
} tg_share_ctr;

/* One thread's place in the call's sequence of steps. */
typedef struct {
    tg_step_ctr *steps;
    int64_t s; /* the current step */
    tg_share_ctr *shares;
    int64_t ms; /* the current matrix step (its shares: shares[ms * threads ...]) */
    int thread, threads;
    const char *warm[2];  /* decode: where this thread's share of the next matrix step starts (or NULL), ... */
    size_t warm_bytes[2]; /* ... and how much of it to bring into L2 while it waits at the end of this step */
    int64_t finished;     /* units of the current step this thread has finished and not yet counted in `done` */
} tg_team;

/* Whether the current step (of `total` units) still has units to hand out. */
static inline bool tg_step_open(const tg_team *tm, int64_t total) {
    return atomic_load_explicit(&tm->steps[tm->s].next, memory_order_relaxed) < total;
}

/* Claims a unit of the current step: its index, or -1 when all are handed out. */
static inline int64_t tg_claim(tg_team *tm, int64_t total) {
    if (!tg_step_open(tm, total)) return -1;
    const int64_t u = atomic_fetch_add_explicit(&tm->steps[tm->s].next, 1, memory_order_relaxed);
    return u < total ? u : -1;
}

/* Marks a claimed unit finished. The thread counts its units and adds them to the step's `done` once, when it has
 * run out of units (at tg_step_end): no one reads `done` before then but to wait for the whole step, and one atomic
 * add per thread and step replaces one per unit on a line both threads write. */
static inline void tg_finish(tg_team *tm) { tm->finished++; }

/* Claims a unit of the current matrix step (of `total` units): the next of this thread's own share, else the last
 * one left in another thread's share; -1 when all are taken. */
int64_t tg_claim_share(tg_team *tm, int64_t total);

/* Waits until every unit of the current step (of `total`) is finished, then moves to the next step. Decoding, a
 * thread that has run out of units first brings its warm regions (tm->warm, set by the planner) into L2 when the
 * step is still running; the regions are cleared either way. Spins briefly, then yields the CPU (the unit being
 * waited for may belong to a thread that needs this core). */
void tg_step_end(tg_team *tm, int64_t total);

/* tg_step_end for a matrix step: also moves to the next matrix step's shares. */
static inline void tg_matrix_step_end(tg_team *tm, int64_t total) {
    tg_step_end(tm, total);
    tm->ms++;
}

/* Zeroes the counters of the first n_steps steps and n_shares shares for the next call. */
void tg_steps_reset(tg_step_ctr *steps, int64_t n_steps, tg_share_ctr *shares, int64_t n_shares);

#endif
