/* plan.c — the CPU backend's planning of matrix steps (plan.h): unit sizes, units balanced by bytes, and the
 * weights a thread warms for its next step. */
#include "forward/plan.h"

#include "kernels/kernels.h"
#include "kernels/matmul.h"

/* Units per thread of a decode step: a thread's share is taken in order (the prefetch running on from one unit into
 * the next); fewer, larger units mean fewer claims, more mean finer balance when one thread runs slower. 8 was
 * measured above 4 on most files and 16 slower on Q4_K_M (the numbers: `git log src/forward/plan.c`). */
#define DECODE_UNITS_PER_THREAD 8

/* Bytes of a thread's next share brought into L2 while it waits at a step's end (tg_step_end): the short steps of
 * small models gain, a large model's first rows are a small part of a step (docs/PERFORMANCE.md, Session 22). */
#define WARM_BYTES (16 * 1024)

/* The rows of a decode unit are a multiple of this: what the type's fast gemv takes at once (at least eight), so
 * that a unit never ends in rows a narrower kernel must take (sixteen for Q8_0 / Q4_0 on AVX-512, where units had
 * ended in eight rows of the eight-row kernel; the numbers: `git log src/forward/plan.c`). */
static int64_t decode_row_group(tg_dtype type) {
    const int rows = (unsigned)type < TG_DT_COUNT ? tg_kernels()->type[type].gemv_rows : 8;
    return rows > 8 ? rows : 8;
}

int64_t tg_row_granule(const tg_tensor *w, int n) {
    const int64_t g = n == 1 ? decode_row_group(w->type) : 8;
    return w->row_group > g ? w->row_group : g;
}

int64_t tg_unit_rows(const tg_tensor *w, int n, int threads) {
    int64_t r;
    if (n == 1) {
        r = (w->rows + DECODE_UNITS_PER_THREAD * threads - 1) / (DECODE_UNITS_PER_THREAD * threads);
    } else {
        const size_t rb = tg_row_bytes(w->type, w->cols);
        r = rb ? (int64_t)((size_t)96 * 1024 / rb) : 16;
        if (r < 16) r = 16;
        if (r > 256) r = 256;
        if (threads > 1 && (w->rows + r - 1) / r < 2 * threads) r = (w->rows + 2 * threads - 1) / (2 * threads);
    }
    const int64_t g = tg_row_granule(w, n);
    r = (r + g - 1) / g * g;
    return r < g ? g : r;
}

void tg_job_init(tg_mat_job *j, const tg_tensor *w, float *y, size_t ldy, int n, int threads) {
    j->w = w;
    j->y = y;
    j->ldy = ldy;
    j->ur = tg_unit_rows(w, n, threads);
    j->units = (w->rows + j->ur - 1) / j->ur;
}

void tg_job_unit(const tg_mat_job *jobs, int n_jobs, int64_t u, int *ji, int64_t *r0, int64_t *r1) {
    int j = 0;
    while (j < n_jobs - 1 && u >= jobs[j].units) u -= jobs[j++].units;
    *ji = j;
    *r0 = u * jobs[j].ur;
    *r1 = *r0 + jobs[j].ur < jobs[j].w->rows ? *r0 + jobs[j].ur : jobs[j].w->rows;
}

/* Each matrix gets round(its bytes / (the step's bytes / (DECODE_UNITS_PER_THREAD * threads))) units, at least one;
 * rows stay multiples of the granule. */
void tg_jobs_balance_decode(tg_mat_job *jobs, int n_jobs, int threads) {
    double step_bytes = 0;
    for (int j = 0; j < n_jobs; j++)
        step_bytes += (double)jobs[j].w->rows * (double)tg_row_bytes(jobs[j].w->type, jobs[j].w->cols);
    const double unit_bytes = step_bytes / (double)(DECODE_UNITS_PER_THREAD * threads);
    for (int j = 0; j < n_jobs; j++) {
        tg_mat_job *jb = &jobs[j];
        const double bytes = (double)jb->w->rows * (double)tg_row_bytes(jb->w->type, jb->w->cols);
        int64_t units = unit_bytes > 0 ? (int64_t)(bytes / unit_bytes + 0.5) : 1;
        if (units < 1) units = 1;
        const int64_t g = tg_row_granule(jb->w, 1);
        const int64_t ur = ((jb->w->rows + units - 1) / units + g - 1) / g * g;
        jb->ur = ur < g ? g : ur;
        jb->units = (jb->w->rows + jb->ur - 1) / jb->ur;
    }
}

int64_t tg_jobs_total(const tg_mat_job *jobs, int n_jobs) {
    int64_t total = 0;
    for (int j = 0; j < n_jobs; j++) total += jobs[j].units;
    return total;
}

/* Warm region i: rows [r0, r1) of w, at most `cap` bytes of them. */
static void warm_rows(tg_team *tm, int i, const tg_tensor *w, int64_t r0, int64_t r1, size_t cap) {
    const size_t rb = tg_row_bytes(w->type, w->cols), bytes = (size_t)(r1 - r0) * rb;
    tm->warm[i] = (const char *)w->data + (size_t)r0 * rb;
    tm->warm_bytes[i] = bytes < cap ? bytes : cap;
}

void tg_warm_jobs(tg_team *tm, const tg_mat_job *jobs, int n_jobs, int paired) {
    const int64_t total = paired > 1 ? jobs[0].units : tg_jobs_total(jobs, n_jobs);
    const int64_t u0 = total * tm->thread / tm->threads;
    tm->warm[0] = tm->warm[1] = NULL;
    if (total * (tm->thread + 1) / tm->threads <= u0) return; /* an empty share */
    int j;
    int64_t r0, r1;
    if (paired > 1) {
        tg_job_unit(jobs, 1, u0, &j, &r0, &r1);
        for (int i = 0; i < paired && i < 2; i++) warm_rows(tm, i, jobs[i].w, r0, r1, WARM_BYTES / 2);
        return;
    }
    tg_job_unit(jobs, n_jobs, u0, &j, &r0, &r1);
    warm_rows(tm, 0, jobs[j].w, r0, r1, WARM_BYTES);
}

size_t tg_wide_scratch_bytes(const tg_program *p, int max_chunk, int threads) {
    if (max_chunk < 2) return 0;
    size_t most = 0;
    for (int i = 0; i < p->n; i++) {
        const tg_tensor *w = p->ops[i].w;
        if (p->ops[i].kind != TG_OP_MATMUL || w->rows <= 0) continue;
        const tg_weight_type *wt = tg_weight_type_of(w->type);
        if (!wt || wt->act != TG_ACT_F32) continue;
        const size_t b = tg_wide_bytes(tg_unit_rows(w, max_chunk, threads), w->cols);
        if (b > most) most = b;
    }
    return (most + 63) / 64 * 64; /* aligned_alloc wants a multiple of the alignment */
}
