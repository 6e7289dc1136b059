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

/* The work before admission — parsing a body and tokenising its prompt, which take tens of bytes of memory per body
 * byte — bounded: at most max_n bodies at once, their bytes together within budget, except that one body is always
 * let in when none is (a body is at most --max-body, and the server must answer it). Pure accounting: the caller
 * holds the lock. */
typedef struct {
    int64_t budget, used;
    int64_t n, max_n;
} tg_prep;

/* True (counted) when a body of `bytes` may be worked on now. */
bool tg_prep_take(tg_prep *p, int64_t bytes);
/* That body's work is done. */
void tg_prep_give(tg_prep *p, int64_t bytes);

/* A step's prompt budget shared among the n sessions still prefilling, each wanting need[i] >= 0 tokens: fair, so a
 * short prompt's first token does not wait for another client's long one. Every session gets an equal part (less
 * when it wants less; what it leaves goes to the others) and the indivisible remainder goes to the sessions from
 * index `start` (mod n) on: a caller that advances start every step hands it round. give[i] <= need[i], the gives
 * sum to min(budget, the needs' sum). */
void tg_prefill_share(const int64_t *need, int64_t n, int64_t budget, int64_t start, int64_t *give);

#endif
