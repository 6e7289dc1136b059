/* job.c — a request's generation and its output channel (job.h). */
#define _POSIX_C_SOURCE 200809L

#include "serve/job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

tg_job *tg_job_new(void) {
    tg_job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    if (pthread_mutex_init(&j->mu, NULL) != 0) {
        free(j);
        return NULL;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    const int rc = pthread_cond_init(&j->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (rc != 0) {
        pthread_mutex_destroy(&j->mu);
        free(j);
        return NULL;
    }
    atomic_init(&j->cancelled, false);
    atomic_init(&j->refs, 1);
    j->state = TG_JOB_QUEUED;
    return j;
}

void tg_job_ref(tg_job *j) { atomic_fetch_add(&j->refs, 1); }

void tg_job_unref(tg_job *j) {
    if (!j || atomic_fetch_sub(&j->refs, 1) != 1) return;
    free(j->ids);
    for (size_t i = 0; i < j->n_stops; i++) free(j->stops[i]);
    free(j->text);
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    free(j);
}

void tg_job_set_running(tg_job *j) {
    pthread_mutex_lock(&j->mu);
    if (j->state == TG_JOB_QUEUED) j->state = TG_JOB_RUNNING;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

void tg_job_append(tg_job *j, const char *text, size_t len, bool counted) {
    pthread_mutex_lock(&j->mu);
    if (len > 0 && !j->oom) {
        if (j->len + len + 1 > j->cap) {
            size_t cap = j->cap ? j->cap : 256;
            while (cap < j->len + len + 1) cap *= 2;
            char *p = realloc(j->text, cap);
            if (p) {
                j->text = p;
                j->cap = cap;
            } else {
                j->oom = true;
            }
        }
        if (!j->oom) {
            memcpy(j->text + j->len, text, len);
            j->len += len;
            j->text[j->len] = '\0';
        }
    }
    if (counted) j->completion_tokens++;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

void tg_job_finish(tg_job *j, const char *finish_reason) {
    pthread_mutex_lock(&j->mu);
    if (j->state != TG_JOB_DONE) {
        j->state = TG_JOB_DONE;
        j->finish_reason = finish_reason;
        if (j->oom) {
            j->error_status = 500;
            snprintf(j->error, sizeof j->error, "out of memory for the generated text");
        }
    }
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

void tg_job_fail(tg_job *j, int status, const char *msg) {
    pthread_mutex_lock(&j->mu);
    if (j->state != TG_JOB_DONE) {
        j->state = TG_JOB_DONE;
        j->error_status = status;
        snprintf(j->error, sizeof j->error, "%s", msg);
    }
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}
