/* scheduler.c — the step loop of continuous batching (scheduler.h).
 *
 * Locking: `mu` guards the admission accounting, the queue, the list of admitted jobs not yet started and the flags;
 * the sessions (their caches, samplers, detokenisers) belong to the scheduler thread alone. Each step: take the
 * admitted jobs and make their sessions, drop the sessions whose clients have gone, build the batch (one decode row
 * per decoding session, then prompt chunks: prefill_per_step shared fairly among the prefilling sessions), run it,
 * sample, and hand the text to the jobs.
 * A session's answer follows `tinygpt sample` token for token: the same prompt ids, the same sampler, the same
 * generation step (tg_generator: EOS, stop strings, max_tokens), and logits that tg_batch guarantees are the
 * single-session ones, however the prompt is split into calls: so a session continued from a parked conversation
 * (park.h: its cache restored, only the prompt's new tokens prefilled) answers what one that read the whole prompt
 * answers. */
#define _POSIX_C_SOURCE 200809L

#include "serve/scheduler.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/admission.h"
#include "util/clock.h"
#include "util/free_all.h"

typedef struct {
    tg_job *job;
    tg_sequence *seq;
    tg_sampler *sampler;
    tg_generator *gen;  /* over sampler: the job's end ids, stop strings and max_tokens */
    float *logits;      /* [vocab] */
    int32_t *fed;       /* [n_fed] the generated tokens fed back (for parking: the cache holds ids + fed) */
    size_t n_fed, cap_fed;
    bool park_lost;     /* fed could not grow: not parked */
    void *prompt_snap;  /* [prompt_len] the state where the prompt ended (for parking beside the end's); or NULL */
    size_t prompt_len;
    int64_t prompt_held; /* the bytes tg_park_hold gave it */
    size_t prefilled;   /* prompt tokens evaluated */
    int32_t next_id;    /* the token to feed when decoding */
    bool decoding;      /* the prompt is in: next_id is fed each step */
    bool first_seen;    /* the first token has been sampled (time to first token recorded) */
    bool ended;         /* done this step: freed at the end of it */
} session;

struct tg_sched {
    tg_sched_config cfg;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* under mu */
    tg_admission adm;
    tg_job **queue;      /* [queue_cap] ring: waiting jobs, FIFO */
    int64_t q_head, q_len;
    tg_job **starting;   /* [max_sessions] admitted, their sessions not yet made */
    int64_t n_starting;
    bool admitting, quit;
    /* the scheduler thread's */
    session *sessions;   /* [max_sessions] */
    int64_t n_sessions;
    tg_batch_item *items; /* [max_sessions] */
    int64_t *item_session;
    tg_job **local;       /* [max_sessions] the jobs a step takes from `starting` */
    int64_t *pf_session, *pf_need, *pf_give; /* [max_sessions] the prefilling sessions of a step, their wants, shares */
    int64_t pf_turn;      /* where the prompt budget's remainder starts (advances every step) */
    int32_t vocab;
    double rate_t0;
    int64_t rate_tokens;
};

/* ---- the sessions (scheduler thread) ------------------------------------------------------------------------- */

/* Frees what session_open made (each part may be NULL); the batch lets go of what it holds for the sequence. */
static void session_free_parts(tg_sched *s, session *ss) {
    tg_generator_free(ss->gen);
    tg_sampler_free(ss->sampler);
    tg_batch_release(s->cfg.batch, ss->seq);
    tg_sequence_free(ss->seq);
    free(ss->logits);
    free(ss->fed);
}

/* Makes job's session; false when it cannot be had (the job is failed; the caller releases its bytes). */
static bool session_open(tg_sched *s, tg_job *j, session *ss) {
    memset(ss, 0, sizeof *ss);
    ss->job = j;
    tg_error err = {0};
    ss->seq = tg_sequence_new(s->cfg.model, &j->cache, &err);
    if (!ss->seq) {
        tg_job_fail(j, 400, err.msg);
        return false;
    }
    if (!tg_batch_fits(s->cfg.batch, ss->seq)) {
        tg_sequence_free(ss->seq);
        tg_job_fail(j, 400, tg_batch_on_device(s->cfg.batch)
                                ? "the server keeps its sessions' caches on a GPU in its own cache policy: a request "
                                  "may not change it (streaming_llm_window, streaming_llm_sink, kv_quantize)"
                                : "the request's cache policy holds more tokens than the server's "
                                  "(streaming_llm_window, kv_quantize): ask for a smaller window");
        return false;
    }
    tg_generator_params gp = tg_generator_default_params();
    gp.max_tokens = j->max_tokens;
    gp.stops = (const char *const *)j->stops;
    gp.n_stops = j->n_stops;
    gp.end_ids = j->end_ids;
    gp.n_end_ids = j->n_end_ids;
    gp.ignore_eos = j->ignore_eos;
    ss->sampler = tg_sampler_new(&j->sp, s->vocab, &err);
    if (ss->sampler) ss->gen = tg_generator_new(s->cfg.model, ss->sampler, &gp, &err);
    ss->logits = malloc((size_t)s->vocab * sizeof *ss->logits);
    if (ss->gen && !tg_generator_start(ss->gen, j->ids, j->n_ids, false, NULL, NULL, &err)) {
        tg_generator_free(ss->gen);
        ss->gen = NULL;
    }
    if (!ss->sampler || !ss->gen || !ss->logits) {
        if (!ss->sampler) tg_job_fail(j, 400, err.msg); /* the sampling settings */
        else tg_job_fail(j, 500, ss->gen ? "out of memory" : err.msg);
        session_free_parts(s, ss);
        return false;
    }
    if (j->cache_prompt) {
        const double t0 = tg_monotonic_s();
        const size_t got = tg_park_take(s->cfg.park, ss->seq, j->ids, j->n_ids);
        ss->prefilled = got;
        pthread_mutex_lock(&j->mu);
        j->cached_tokens = (int64_t)got;
        j->restore_s = tg_monotonic_s() - t0;
        pthread_mutex_unlock(&j->mu);
    }
    tg_job_set_running(j);
    return true;
}

/* Parks the finished session: its cache holds the prompt and the generated tokens fed back. */
static void session_park(tg_sched *s, session *ss) {
    if (!tg_park_enabled(s->cfg.park) || ss->park_lost) return;
    const tg_job *j = ss->job;
    const int64_t pos = tg_sequence_position(ss->seq);
    if (pos < (int64_t)j->n_ids || (size_t)pos - j->n_ids > ss->n_fed) return;
    const size_t n_gen = (size_t)pos - j->n_ids;
    int32_t *ids = malloc(((size_t)pos ? (size_t)pos : 1) * sizeof *ids);
    if (!ids) return;
    memcpy(ids, j->ids, j->n_ids * sizeof *ids);
    if (n_gen) memcpy(ids + j->n_ids, ss->fed, n_gen * sizeof *ids);
    tg_park_put(s->cfg.park, ss->seq, ids, (size_t)pos, ss->prompt_snap, ss->prompt_len, j->n_ids);
    ss->prompt_snap = NULL; /* the store's now, counted as parked */
    tg_park_release(s->cfg.park, ss->prompt_held);
    ss->prompt_held = 0;
    free(ids);
}

/* Frees the prompt state a session still holds and gives its room back. */
static void prompt_state_drop(tg_sched *s, session *ss) {
    free(ss->prompt_snap);
    ss->prompt_snap = NULL;
    tg_park_release(s->cfg.park, ss->prompt_held);
    ss->prompt_held = 0;
}

/* Saves the state where the prompt ended, to be parked beside the conversation's end: a client that sends the
 * history back with the reply as other tokens (re-tokenised, trimmed, edited) still extends the prompt. */
static void save_prompt_state(tg_sched *s, session *ss) {
    if (!tg_park_enabled(s->cfg.park) || ss->park_lost) return;
    /* room first (the cache's bytes and the token list, about what the snapshot takes), then the snapshot */
    const tg_job *j = ss->job;
    const int64_t room = (int64_t)j->cache_bytes + (int64_t)(j->n_ids * sizeof *j->ids) + 4096;
    if (!tg_park_hold(s->cfg.park, room)) return; /* parked without it */
    ss->prompt_held = room;
    tg_error err = {0};
    if (!tg_sequence_save(ss->seq, j->ids, j->n_ids, NULL, &ss->prompt_snap, &ss->prompt_len, &err)) {
        ss->prompt_snap = NULL;
        prompt_state_drop(s, ss);
        return;
    }
    if ((int64_t)ss->prompt_len > room) { /* more than the estimate: the rest held too, or nothing kept */
        if (tg_park_hold(s->cfg.park, (int64_t)ss->prompt_len - room)) ss->prompt_held = (int64_t)ss->prompt_len;
        else prompt_state_drop(s, ss);
    }
}

/* Remembers id, generated and about to be fed, for parking. */
static void remember_fed(session *ss, int32_t id) {
    if (ss->park_lost) return;
    if (ss->n_fed == ss->cap_fed) {
        const size_t cap = ss->cap_fed ? ss->cap_fed * 2 : 256;
        int32_t *p = realloc(ss->fed, cap * sizeof *p);
        if (!p) {
            ss->park_lost = true;
            return;
        }
        ss->fed = p;
        ss->cap_fed = cap;
    }
    ss->fed[ss->n_fed++] = id;
}

static void session_close(tg_sched *s, session *ss) {
    prompt_state_drop(s, ss);
    session_free_parts(s, ss);
    tg_job_unref(ss->job);
    memset(ss, 0, sizeof *ss);
}

/* The end of a generation: the detokeniser's and the stop filter's held bytes, then the finish reason ("stop" at
 * an end id or a stop string, else "length"). */
static void session_finish(tg_sched *s, session *ss) {
    tg_gen_token t;
    tg_error err = {0};
    if (!tg_generator_finish(ss->gen, &t, &err)) {
        tg_job_fail(ss->job, 500, err.msg);
    } else {
        session_park(s, ss);
        tg_job_append(ss->job, t.text, t.len, false);
        tg_job_finish(ss->job, t.stop == TG_GEN_END || t.stop == TG_GEN_STOP_STRING ? "stop" : "length");
    }
    ss->ended = true;
}

/* The logits after the session's last token: the generation step, then stop or go on (as `tinygpt sample`). */
static void session_sample(tg_sched *s, session *ss) {
    tg_job *j = ss->job;
    if (!ss->first_seen) {
        ss->first_seen = true;
        tg_metrics_ttft(s->cfg.metrics, tg_monotonic_s() - j->t_submit);
    }
    tg_gen_token t;
    tg_error err = {0};
    if (!tg_generator_step(ss->gen, ss->logits, &t, &err)) {
        tg_job_fail(j, 500, err.msg);
        ss->ended = true;
        return;
    }
    if (t.id >= 0) {
        s->rate_tokens++;
        tg_job_append(j, t.text, t.len, true);
    }
    if (t.stop != TG_GEN_GOING || tg_sequence_remaining(ss->seq) < 1) {
        session_finish(s, ss);
        return;
    }
    remember_fed(ss, t.id);
    ss->next_id = t.id;
    ss->decoding = true;
}

/* One batched forward over every session, then the sampling. */
static void step(tg_sched *s) {
    const int max_rows = tg_batch_max_rows(s->cfg.batch);
    int n_items = 0, rows = 0;
    int64_t prompt_tokens = 0;
    for (int64_t i = 0; i < s->n_sessions; i++) {
        session *ss = &s->sessions[i];
        if (atomic_load(&ss->job->cancelled)) {
            tg_job_fail(ss->job, 499, "the client closed the connection");
            ss->ended = true;
        } else if (ss->decoding && rows < max_rows) {
            s->items[n_items] = (tg_batch_item){ss->seq, &ss->next_id, 1, ss->logits, false};
            s->item_session[n_items++] = i;
            rows++;
        }
    }
    /* the prompt budget shared fairly among the sessions still prefilling (tg_prefill_share), its remainder handed
     * round from a start that moves every step */
    int64_t n_pf = 0;
    for (int64_t i = 0; i < s->n_sessions; i++) {
        session *ss = &s->sessions[i];
        if (ss->ended || ss->decoding) continue;
        const size_t left = ss->job->n_ids - ss->prefilled;
        const int chunk = tg_sequence_max_chunk(ss->seq);
        s->pf_session[n_pf] = i;
        s->pf_need[n_pf++] = left < (size_t)chunk ? (int64_t)left : chunk;
    }
    int64_t budget = s->cfg.prefill_per_step;
    if (budget > max_rows - rows) budget = max_rows - rows;
    if (n_pf > 0) tg_prefill_share(s->pf_need, n_pf, budget, s->pf_turn++ % n_pf, s->pf_give);
    for (int64_t k = 0; k < n_pf; k++) {
        if (s->pf_give[k] == 0) continue;
        session *ss = &s->sessions[s->pf_session[k]];
        const int c = (int)s->pf_give[k];
        const bool last = ss->prefilled + (size_t)c == ss->job->n_ids;
        s->items[n_items] = (tg_batch_item){ss->seq, ss->job->ids + ss->prefilled, c, last ? ss->logits : NULL,
                                            false};
        s->item_session[n_items++] = s->pf_session[k];
        rows += c;
        prompt_tokens += c;
    }
    const int64_t tokens_before = s->rate_tokens;
    if (n_items > 0) {
        tg_error err = {0};
        if (!tg_batch_eval(s->cfg.batch, s->items, n_items, &err)) {
            for (int k = 0; k < n_items; k++) {
                session *ss = &s->sessions[s->item_session[k]];
                tg_job_fail(ss->job, 500, err.msg);
                ss->ended = true;
            }
            n_items = 0;
        }
    }
    for (int k = 0; k < n_items; k++) {
        session *ss = &s->sessions[s->item_session[k]];
        if (!ss->decoding) {
            ss->prefilled += (size_t)s->items[k].n;
            if (ss->prefilled < ss->job->n_ids) continue;
            save_prompt_state(s, ss);
        }
        if (!s->items[k].finite) {
            tg_job_fail(ss->job, 500, "the model produced non-finite logits");
            ss->ended = true;
            continue;
        }
        session_sample(s, ss);
    }
    tg_metrics_tokens(s->cfg.metrics, prompt_tokens, s->rate_tokens - tokens_before);
    const double now = tg_monotonic_s();
    double rate = -1;
    if (now - s->rate_t0 >= 1.0) {
        rate = (double)s->rate_tokens / (now - s->rate_t0);
        s->rate_t0 = now;
        s->rate_tokens = 0;
    }
    tg_metrics_step(s->cfg.metrics);
    if (rate >= 0) tg_metrics_set_rate(s->cfg.metrics, rate);
}

/* ---- the thread ---------------------------------------------------------------------------------------------- */

/* Removes the queued jobs whose clients have gone (under mu). */
static void drop_cancelled_queued(tg_sched *s) {
    int64_t kept = 0;
    const int64_t cap = s->cfg.queue_cap;
    for (int64_t i = 0; i < s->q_len; i++) {
        tg_job *j = s->queue[(s->q_head + i) % cap];
        if (atomic_load(&j->cancelled)) {
            tg_admission_leave_queue(&s->adm);
            tg_job_fail(j, 499, "the client closed the connection");
            tg_job_unref(j);
        } else {
            s->queue[(s->q_head + kept++) % cap] = j;
        }
    }
    s->q_len = kept;
}

/* Moves the queue's head to the started list while it fits (under mu). */
static void admit_queued(tg_sched *s) {
    while (s->q_len > 0) {
        tg_job *j = s->queue[s->q_head];
        if (!tg_admission_take(&s->adm, (int64_t)j->cache_bytes)) break;
        s->starting[s->n_starting++] = j;
        s->q_head = (s->q_head + 1) % s->cfg.queue_cap;
        s->q_len--;
    }
}

static void *sched_main(void *arg) {
    tg_sched *s = arg;
    tg_job **local = s->local;
    pthread_mutex_lock(&s->mu);
    while (!s->quit) {
        drop_cancelled_queued(s);
        admit_queued(s);
        if (s->n_sessions == 0 && s->n_starting == 0) {
            tg_metrics_set_rate(s->cfg.metrics, 0.0); /* idle */
            pthread_cond_wait(&s->cv, &s->mu);
            continue;
        }
        const int64_t n_new = s->n_starting;
        memcpy(local, s->starting, (size_t)n_new * sizeof *local);
        s->n_starting = 0;
        pthread_mutex_unlock(&s->mu);

        int64_t released = 0, ended = 0;
        if (s->n_sessions == 0) {
            s->rate_t0 = tg_monotonic_s();
            s->rate_tokens = 0;
        }
        for (int64_t i = 0; i < n_new; i++) {
            if (session_open(s, local[i], &s->sessions[s->n_sessions])) {
                s->n_sessions++;
            } else {
                released += (int64_t)local[i]->cache_bytes;
                ended++;
                tg_job_unref(local[i]);
            }
        }
        step(s);
        int64_t kept = 0;
        for (int64_t i = 0; i < s->n_sessions; i++) {
            if (s->sessions[i].ended) {
                released += (int64_t)s->sessions[i].job->cache_bytes;
                ended++;
                session_close(s, &s->sessions[i]);
            } else {
                if (kept != i) s->sessions[kept] = s->sessions[i];
                kept++;
            }
        }
        s->n_sessions = kept;

        pthread_mutex_lock(&s->mu);
        s->adm.used -= released;
        s->adm.active -= ended;
    }
    /* stopping: every job not done fails */
    for (int64_t i = 0; i < s->q_len; i++) {
        tg_job *j = s->queue[(s->q_head + i) % s->cfg.queue_cap];
        tg_job_fail(j, 503, "the server is shutting down");
        tg_job_unref(j);
    }
    s->q_len = 0;
    for (int64_t i = 0; i < s->n_starting; i++) {
        tg_job_fail(s->starting[i], 503, "the server is shutting down");
        tg_job_unref(s->starting[i]);
    }
    s->n_starting = 0;
    pthread_mutex_unlock(&s->mu);
    for (int64_t i = 0; i < s->n_sessions; i++) {
        tg_job_fail(s->sessions[i].job, 503, "the server is shutting down");
        session_close(s, &s->sessions[i]);
    }
    s->n_sessions = 0;
    return NULL;
}

/* Frees the scheduler's own blocks and itself (its thread, mutex and condition variable are the caller's). */
static void free_scheduler(tg_sched *s) {
    TG_FREE_ALL(s->queue, s->starting, s->sessions, s->items, s->item_session, s->local, s->pf_session, s->pf_need,
                s->pf_give);
    free(s);
}

tg_sched *tg_sched_start(const tg_sched_config *c, tg_error *err) {
    tg_sched *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err->msg, sizeof err->msg, "out of memory");
        return NULL;
    }
    s->cfg = *c;
    s->vocab = tg_vocab_size(c->model);
    s->adm = (tg_admission){.budget = c->kv_budget, .max_active = c->max_sessions, .queue_cap = c->queue_cap};
    s->admitting = true;
    const size_t ms = (size_t)c->max_sessions;
    s->queue = calloc(c->queue_cap > 0 ? (size_t)c->queue_cap : 1, sizeof *s->queue);
    s->starting = calloc(ms, sizeof *s->starting);
    s->sessions = calloc(ms, sizeof *s->sessions);
    s->items = calloc(ms, sizeof *s->items);
    s->item_session = calloc(ms, sizeof *s->item_session);
    s->local = calloc(ms, sizeof *s->local);
    s->pf_session = calloc(ms, sizeof *s->pf_session);
    s->pf_need = calloc(ms, sizeof *s->pf_need);
    s->pf_give = calloc(ms, sizeof *s->pf_give);
    if (!s->queue || !s->starting || !s->sessions || !s->items || !s->item_session || !s->local || !s->pf_session ||
        !s->pf_need || !s->pf_give) {
        snprintf(err->msg, sizeof err->msg, "out of memory for %lld sessions", (long long)c->max_sessions);
        goto fail;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->thread, NULL, sched_main, s) != 0) {
        snprintf(err->msg, sizeof err->msg, "cannot start the scheduler thread");
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        goto fail;
    }
    return s;
fail:
    free_scheduler(s);
    return NULL;
}

tg_submit tg_sched_submit(tg_sched *s, tg_job *j) {
    pthread_mutex_lock(&s->mu);
    tg_submit r = TG_SUBMIT_STOPPING;
    if (s->admitting) {
        switch (tg_admission_offer(&s->adm, (int64_t)j->cache_bytes)) {
        case TG_ADMIT_NOW:
            tg_job_ref(j);
            s->starting[s->n_starting++] = j;
            r = TG_SUBMIT_OK;
            break;
        case TG_ADMIT_QUEUE:
            tg_job_ref(j);
            s->queue[(s->q_head + s->q_len++) % s->cfg.queue_cap] = j;
            r = TG_SUBMIT_OK;
            break;
        case TG_ADMIT_FULL: r = TG_SUBMIT_FULL; break;
        }
    }
    if (r == TG_SUBMIT_OK) pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return r;
}

void tg_sched_poke(tg_sched *s) {
    pthread_mutex_lock(&s->mu);
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void tg_sched_stop_admitting(tg_sched *s) {
    pthread_mutex_lock(&s->mu);
    s->admitting = false;
    pthread_mutex_unlock(&s->mu);
}

int64_t tg_sched_pending(tg_sched *s) {
    pthread_mutex_lock(&s->mu);
    const int64_t n = s->adm.active + s->adm.queued;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void tg_sched_gauges(tg_sched *s, tg_metrics_gauges *g) {
    pthread_mutex_lock(&s->mu);
    g->active = s->adm.active;
    g->queued = s->adm.queued;
    g->max_sessions = s->cfg.max_sessions;
    g->queue_cap = s->cfg.queue_cap;
    g->kv_bytes_used = s->adm.used;
    g->kv_budget = s->adm.budget;
    tg_park_get_stats(s->cfg.park, &g->park);
    pthread_mutex_unlock(&s->mu);
}

void tg_sched_stop(tg_sched *s) {
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->quit = true;
    s->admitting = false;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free_scheduler(s);
}
