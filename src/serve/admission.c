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
