/* admission.h — the one memory budget: every session's KV cache is bounded, so its bytes are known when it arrives;
 * a session is admitted while the bytes of all admitted sessions stay within the budget (and their count within the
 * session limit), waits in a bounded FIFO queue otherwise, and is refused when the queue is full. Pure accounting:
 * the caller holds the lock. */
#ifndef TG_SERVE_ADMISSION_H
#define TG_SERVE_ADMISSION_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    int64_t budget;            /* bytes all admitted sessions together may hold */
    int64_t used;              /* bytes reserved by the admitted sessions */
    int64_t active, max_active;
    int64_t queued, queue_cap;
} tg_admission;

typedef enum {
    TG_ADMIT_NOW,   /* reserved: the session may start */
    TG_ADMIT_QUEUE, /* counted in the queue: wait for tg_admission_take */
    TG_ADMIT_FULL,  /* the queue is full: refuse (503) */
} tg_admit;

/* A new arrival needing `bytes` (<= budget). It starts now only when nothing waits before it (FIFO) and it fits. */
tg_admit tg_admission_offer(tg_admission *a, int64_t bytes);
/* The queue's head needing `bytes`: true (reserved, no longer queued) when it fits now. */
bool tg_admission_take(tg_admission *a, int64_t bytes);
/* A queued arrival left before it was admitted (its client went away). */
void tg_admission_leave_queue(tg_admission *a);
/* An admitted session ended: its bytes return to the budget. */
void tg_admission_release(tg_admission *a, int64_t bytes);

#endif
