/* scheduler.h — continuous batching: one thread advances every running session by one token per step in ONE batched
 * forward pass (tg_batch: the weights read once per step for all of them), sessions joining and leaving between
 * steps; prompts are prefilled in chunks (at most prefill_per_step prompt tokens per step, over all sessions) beside
 * the running decodes, so a long prompt does not stall the others. Admission (admission.h) keeps the KV bytes of all
 * sessions within the budget; a job whose client has gone is dropped at the next step. */
#ifndef TG_SERVE_SCHEDULER_H
#define TG_SERVE_SCHEDULER_H

#include <stdint.h>

#include "serve/job.h"
#include "serve/metrics.h"
#include "serve/park.h"
#include "tinygpt.h"

typedef struct {
    const tg_model *model;
    tg_batch *batch;          /* not owned; its max rows >= max_sessions + prefill_per_step */
    int64_t kv_budget;        /* bytes */
    int64_t max_sessions;     /* sessions decoded at once */
    int64_t queue_cap;        /* requests waiting at most */
    int prefill_per_step;     /* prompt tokens per step, over all sessions */
    tg_metrics *metrics;      /* not owned */
    tg_park *park;            /* not owned; finished conversations parked and continued (NULL: none) */
} tg_sched_config;

typedef struct tg_sched tg_sched;

/* Starts the scheduler thread. NULL with err filled when memory or the thread cannot be had. */
tg_sched *tg_sched_start(const tg_sched_config *c, tg_error *err);

typedef enum {
    TG_SUBMIT_OK,       /* admitted or queued; the scheduler holds a reference until the job is done */
    TG_SUBMIT_FULL,     /* the queue is full: 503 */
    TG_SUBMIT_STOPPING, /* the server no longer admits: 503 */
} tg_submit;

/* Hands a filled job (ids, cache policy and its bytes <= the budget, sampling, limits) to the scheduler. */
tg_submit tg_sched_submit(tg_sched *s, tg_job *j);
/* Wakes the scheduler (a job was cancelled while queued). */
void tg_sched_poke(tg_sched *s);
/* New submissions get TG_SUBMIT_STOPPING from now on. */
void tg_sched_stop_admitting(tg_sched *s);
/* Jobs admitted or queued and not yet done. */
int64_t tg_sched_pending(tg_sched *s);
void tg_sched_gauges(tg_sched *s, tg_metrics_gauges *g);
/* Fails every job not yet done (503, the server is stopping), joins the thread, frees everything. */
void tg_sched_stop(tg_sched *s);

#endif
