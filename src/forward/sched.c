/* sched.c — the CPU backend's step scheduler (sched.h): claiming units of shared and of owned ranges, the end of a
 * step, and warming the next step's weights while a thread waits. */
#include "forward/sched.h"

#include <sched.h>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

int64_t tg_claim_share(tg_team *tm, int64_t total) {
    tg_share_ctr *sh = tm->shares + tm->ms * tm->threads;
    for (int k = 0; k < tm->threads; k++) {
        const int v = (tm->thread + k) % tm->threads;
        const int64_t lo = total * v / tm->threads, size = total * (v + 1) / tm->threads - lo;
        uint64_t w = atomic_load_explicit(&sh[v].taken, memory_order_relaxed);
        while ((int64_t)((w >> 32) + (w & 0xffffffffu)) < size) {
            const uint64_t nw = k == 0 ? w + ((uint64_t)1 << 32) : w + 1;
            if (atomic_compare_exchange_weak_explicit(&sh[v].taken, &w, nw, memory_order_relaxed,
                                                      memory_order_relaxed))
                return k == 0 ? lo + (int64_t)(w >> 32) : lo + size - 1 - (int64_t)(w & 0xffffffffu);
        }
    }
    return -1;
}

/* Adds this thread's finished units of the current step to its `done` (their results visible to whoever sees the
 * step complete). */
static void publish(tg_team *tm) {
    if (tm->finished > 0)
        atomic_fetch_add_explicit(&tm->steps[tm->s].done, tm->finished, memory_order_release);
    tm->finished = 0;
}

/* Decoding, a thread that has run out of units of a step brings the start of its share of the next matrix step into
 * L2 before it waits (its first rows would otherwise be demand misses, while the team's last unit keeps only one core
 * reading). Once per region: a step that is already complete clears them unread. */
static void warm_next(tg_team *tm, int64_t total) {
    if (!tm->warm[0] && !tm->warm[1]) return;
    const bool waits = atomic_load_explicit(&tm->steps[tm->s].done, memory_order_relaxed) < total;
    for (int i = 0; i < 2; i++) {
        if (tm->warm[i] && waits) {
            const uintptr_t end = (uintptr_t)tm->warm[i] + tm->warm_bytes[i];
            for (uintptr_t a = (uintptr_t)tm->warm[i] & ~(uintptr_t)63; a < end; a += 64)
                __builtin_prefetch((const void *)a, 0, 2);
        }
        tm->warm[i] = NULL;
    }
}

void tg_step_end(tg_team *tm, int64_t total) {
    publish(tm);
    warm_next(tm, total);
    for (int spin = 0; atomic_load_explicit(&tm->steps[tm->s].done, memory_order_acquire) < total; spin++) {
        if (spin < 4096) {
#if defined(__SSE2__)
            _mm_pause();
#endif
        } else {
            sched_yield();
        }
    }
    tm->s++;
}

void tg_steps_reset(tg_step_ctr *steps, int64_t n_steps, tg_share_ctr *shares, int64_t n_shares) {
    for (int64_t i = 0; i < n_steps; i++) {
        atomic_store_explicit(&steps[i].next, 0, memory_order_relaxed);
        atomic_store_explicit(&steps[i].done, 0, memory_order_relaxed);
    }
    for (int64_t i = 0; i < n_shares; i++) atomic_store_explicit(&shares[i].taken, 0, memory_order_relaxed);
}
