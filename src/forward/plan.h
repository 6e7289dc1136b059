/* plan.h — the CPU backend's planning of matrix steps: how a product's weight rows are cut into units (sizes for
 * decoding and for chunks, balanced between the matrices of one step), which unit is where, and which of a thread's
 * next weights it warms into L2 while it waits at the end of a step. */
#ifndef TG_FORWARD_PLAN_H
#define TG_FORWARD_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "forward/program.h"
#include "forward/sched.h"
#include "kernels/tensor.h"

/* One matrix of a step, split into units of `ur` rows; outputs y[t * ldy + row]. */
typedef struct {
    const tg_tensor *w;
    float *y;
    size_t ldy;
    int64_t ur, units;
} tg_mat_job;

/* Rows per unit of w for n activation rows and `threads` threads: decoding (n == 1) wants several units per thread
 * (balance without much hand-out traffic); a chunk wants blocks whose weights stay in L2 while every token of the
 * chunk passes over them. */
int64_t tg_unit_rows(const tg_tensor *w, int n, int threads);
/* The rows of a unit of w are a multiple of this (the fast kernels' row groups, whole repacked groups). */
int64_t tg_row_granule(const tg_tensor *w, int n);

/* A job of w into y (ldy floats a row) for n activation rows, units of tg_unit_rows. */
void tg_job_init(tg_mat_job *j, const tg_tensor *w, float *y, size_t ldy, int n, int threads);
/* Decoding a step of several matrices (q | k | v): units of about the same bytes in every matrix, so that the
 * threads' shares (tg_claim_share's ranges of units) are about the same bytes too. */
void tg_jobs_balance_decode(tg_mat_job *jobs, int n_jobs, int threads);
/* The units of all the jobs. */
int64_t tg_jobs_total(const tg_mat_job *jobs, int n_jobs);
/* Unit u of the jobs: rows [*r0, *r1) of job *ji. */
void tg_job_unit(const tg_mat_job *jobs, int n_jobs, int64_t u, int *ji, int64_t *r0, int64_t *r1);

/* Sets tm's warm regions (tg_step_end) to the start of this thread's share of the jobs (tg_claim_share's first
 * unit): decoding, the first rows of each of the step's first `paired` jobs when the step's units are rows of all of
 * them at once (gate / up: paired = 2), else of its first unit; none when the share is empty. */
void tg_warm_jobs(tg_team *tm, const tg_mat_job *jobs, int n_jobs, int paired);

/* One thread's room for widened float rows (tg_act.wide): the largest unit, in a chunk of max_chunk rows, of any
 * float-type matrix the program multiplies (0 when the kernels have no widened tiles, a chunk is one token, or no
 * matrix is a float type). A multiple of 64. */
size_t tg_wide_scratch_bytes(const tg_program *p, int max_chunk, int threads);

#endif
