/* admission.c — budget and queue accounting (admission.h). */
#include "serve/admission.h"

static bool fits(const tg_admission *a, int64_t bytes) {
    return a->active < a->max_active && bytes <= a->budget - a->used;
}

tg_admit tg_admission_offer(tg_admission *a, int64_t bytes) {
    if (a->queued == 0 && fits(a, bytes)) {
        a->used += bytes;
        a->active++;
        return TG_ADMIT_NOW;
    }
    if (a->queued < a->queue_cap) {
        a->queued++;
        return TG_ADMIT_QUEUE;
    }
    return TG_ADMIT_FULL;
}

bool tg_admission_take(tg_admission *a, int64_t bytes) {
    if (!fits(a, bytes)) return false;
    a->used += bytes;
    a->active++;
    a->queued--;
    return true;
}

void tg_admission_leave_queue(tg_admission *a) {
    if (a->queued > 0) a->queued--;
}

void tg_admission_release(tg_admission *a, int64_t bytes) {
    a->used -= bytes;
    a->active--;
}

bool tg_prep_take(tg_prep *p, int64_t bytes) {
    if (p->n > 0 && (p->n >= p->max_n || bytes > p->budget - p->used)) return false;
    p->n++;
    p->used += bytes;
    return true;
}

void tg_prep_give(tg_prep *p, int64_t bytes) {
    p->n--;
    p->used -= bytes;
}

void tg_prefill_share(const int64_t *need, int64_t n, int64_t budget, int64_t start, int64_t *give) {
    int64_t unmet = 0;
    for (int64_t i = 0; i < n; i++) {
        give[i] = 0;
        if (need[i] > 0) unmet++;
    }
    /* water filling: every pass gives each unmet session an equal part of what is left (at least one token, handed
     * out from `start` on, so the remainder goes round the sessions over the steps); a pass either meets a need or
     * spends the budget, so there are at most n + 1 passes */
    while (budget > 0 && unmet > 0) {
        const int64_t part = budget / unmet > 0 ? budget / unmet : 1;
        for (int64_t k = 0; k < n && budget > 0; k++) {
            const int64_t i = (start + k) % n;
            const int64_t want = need[i] - give[i];
            if (want <= 0) continue;
            const int64_t g = want < part ? want : part;
            give[i] += g;
            budget -= g;
            if (g == want) unmet--;
        }
    }
}
