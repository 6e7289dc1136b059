/* job.h — one request's generation, shared by the HTTP thread that waits on it and the scheduler thread that runs
 * it: the input (token ids, sampling, limits, cache policy, fixed once submitted) and the output channel (text so
 * far, state, finish reason, error) under a mutex, with a condition variable that signals every change. Reference
 * counted: the HTTP side and the scheduler each hold one. */
#ifndef TG_SERVE_JOB_H
#define TG_SERVE_JOB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "serve/request.h"
#include "tinygpt.h"

typedef enum { TG_JOB_QUEUED, TG_JOB_RUNNING, TG_JOB_DONE } tg_job_state;

/* The most end-of-reply ids beyond the model's EOS ids (chat: the template's end-of-turn markers). */
#define TG_JOB_MAX_END_IDS 8

typedef struct {
    /* input */
    int32_t *ids;            /* [n_ids] the prompt, owned */
    size_t n_ids;
    tg_cache_params cache;
    size_t cache_bytes;      /* tg_sequence_bytes(cache): what admission reserves */
    tg_sampler_params sp;
    int64_t max_tokens;
    bool ignore_eos;
    char *stops[TG_SERVE_MAX_STOPS]; /* owned copies */
    size_t n_stops;
    int32_t end_ids[TG_JOB_MAX_END_IDS];
    size_t n_end_ids;
    double t_submit;         /* monotonic seconds */
    bool cache_prompt;       /* continue a parked conversation the prompt extends (park.h) */

    /* output, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    tg_job_state state;
    char *text;              /* the generated text released so far (stop strings held back, never included) */
    size_t len, cap;
    int64_t completion_tokens;
    int64_t cached_tokens;   /* prompt tokens taken from a parked conversation (set before RUNNING) */
    double restore_s;        /* seconds the look-up and restore of a parked conversation took (set before RUNNING) */
    const char *finish_reason; /* "stop" / "length" once done without error */
    int error_status;        /* non-zero: failed with this HTTP status */
    char error[256];
    bool oom;                /* the text could not grow */

    atomic_bool cancelled;   /* the client has gone (or the server is stopping): the scheduler drops it */
    atomic_int refs;
} tg_job;

/* A job with one reference, state QUEUED, no input yet (the caller fills it). NULL when memory runs out. */
tg_job *tg_job_new(void);
void tg_job_ref(tg_job *j);
/* Drops a reference; the last frees everything. */
void tg_job_unref(tg_job *j);

/* Scheduler side (each locks mu and broadcasts): */
void tg_job_set_running(tg_job *j);
/* Appends generated text (len may be 0) and counts one more completion token when counted. */
void tg_job_append(tg_job *j, const char *text, size_t len, bool counted);
void tg_job_finish(tg_job *j, const char *finish_reason);
void tg_job_fail(tg_job *j, int status, const char *msg);

#endif
