/* forward.c — the Llama forward pass over a chunk of tokens (one token when decoding), calling the KV cache per
 * layer (it owns RoPE, storage, masking and attention).
 *
 * Threads: one run of the forward's thread pool (util/thread_pool.h) per call, not one per operation. Inside it every step is a list of
 * independent units (blocks of weight rows; attention pieces of (token, kv-head, share)) that threads claim from an
 * atomic counter; a step ends when all its units are done, not when all threads have arrived, so a thread that the
 * OS has descheduled (a busy machine) never holds the others up unless it is in the middle of a unit: the others do
 * its share and it catches up through the finished steps when it runs again. In the matrix steps each thread owns a
 * contiguous range of the units and takes them in order (it streams one stretch of the weights, and the decode
 * kernels' prefetch runs on from one unit into its next); a thread whose range is done takes the last units left in
 * another's range, so the counter's balance on a busy machine holds. What each thread needs as input (the
 * normalised, quantised activation; the combined attention output) it prepares privately from shared, finished
 * data, and only when the step still has units to hand out.
 * Per layer:
 *   1. rmsnorm(x) -> Q, K, V rows                     (units: row blocks of wq | wk | wv)
 *   2. append K, V to the cache; rotate Q              (one thread)
 *   3. attention pieces                                (units: token x kv-head x share)
 *   4. combine pieces -> wo rows, added to x           (units: row blocks of wo)
 *   5. rmsnorm(x) -> gate, up rows, swiglu             (units: row blocks of gate and up together)
 *   6. down rows, added to x                           (units: row blocks of w_down)
 * then the final norm and the output head (units: row blocks of lm_head). Steps 2-3 run token by token inside a chunk
 * when appending a later token could change what an earlier one sees (KIVI groups flushed from the residual,
 * StreamingLLM eviction), so a chunk computes exactly what decoding its tokens one at a time computes. Every buffer
 * is allocated by tg_forward_new; a call allocates nothing. */
#include "forward/forward.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include "kernels/kernels.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "util/error.h"
#include "util/thread_pool.h"

/* One thread's private buffers. */
typedef struct {
    float *xb;      /* [max_chunk, max_in] a step's input: normalised x, or the combined attention output */
    void *xq;       /* tg_act_scratch_bytes(max_chunk, max_in): that input quantised for Q8_0 / Q4_0 / K-quant weights */
    float *tmp;     /* [max_chunk, d_model] a unit's output before it is added to x */
    float *work;    /* [tg_kvcache_work_floats] attention piece work space */
    float *gwork;   /* [gwork_floats] a group of prefill pieces' work space (NULL: no grouped pieces) */
    float *wide;    /* [wide_bytes] a unit's float weight rows widened once for a chunk (tg_act.wide; NULL: none) */
    size_t wide_bytes;
} thread_buf;

/* One step's counters: units handed out and units finished. */
typedef struct {
    atomic_llong next;
    atomic_llong done;
} step_ctr;

/* One thread's share of a matrix step: a contiguous range of its units, so that each thread streams its own stretch
 * of the weights and the kernels' prefetch runs on from one unit into the next. The owner takes units from the
 * front, the others (once their own shares are done) from the back: taken = front << 32 | back. One cache line each,
 * so that the owners' claims do not contend. */
typedef struct {
    _Alignas(64) _Atomic uint64_t taken;
} share_ctr;

struct tg_forward {
    const struct tg_model *m;
    int max_chunk;
    int n_threads;
    int64_t max_in;     /* widest step input: max(d_model, n_heads * head_dim, ffn_dim) */
    size_t part_floats; /* tg_kvcache_part_floats of the cache */
    /* shared activations for up to max_chunk tokens (row t = token t of the chunk) */
    float *x;      /* [max_chunk, d_model] residual stream */
    float *q;      /* [max_chunk, n_heads * head_dim] queries (pre-RoPE, then rotated and scaled in place) */
    float *k;      /* [max_chunk, n_kv_heads * head_dim] keys (pre-RoPE) */
    float *v;      /* [max_chunk, n_kv_heads * head_dim] values */
    float *hg;     /* [max_chunk, ffn_dim] gate projection, then swiglu(gate, up) */
    float *hu;     /* [max_chunk, ffn_dim] up projection */
    float *parts;  /* [max_chunk, n_kv_heads, TG_ATTN_MAX_SPLITS, part_floats] attention pieces' partial results */
    int *splits;   /* [max_chunk] shares of each token's attention */
    int *pending;  /* [max_chunk] the stores of each row's append its attention's last shares make first (a mask of
                    * tg_kvcache_append_start: the kv-heads' stores overlap the attention; 0: none) */
    bool *alone;   /* [max_chunk] whether a row is its cache's only row in its round (its stores may wait) */
    size_t work_floats; /* tg_kvcache_work_floats of the cache the forward was sized for (the most a cache may need) */
    int group_tokens;    /* tokens per grouped prefill piece (tg_kvcache_group_tokens; 0: none) */
    size_t gwork_floats; /* tg_kvcache_group_work_floats of that cache for group_tokens */
    int *round_group;    /* [max_chunk] per round: whether its pieces run grouped (set by attn_prepare) */
    bool *round_defers;  /* [max_chunk] per round: whether a row of it has pending stores (set by attn_prepare) */
    int *round_splits;   /* [max_chunk] per round: the most shares a row of it has (set by attn_prepare) */
    /* one call's rows: each row's cache and position, the rows of each attention round, the rows whose logits go to
     * the head (a batch of segments) */
    tg_kvcache **row_cache; /* [max_chunk] */
    int64_t *row_pos;       /* [max_chunk] */
    int *round_rows;        /* [max_chunk] rows in round order */
    int *round_start;       /* [max_chunk + 1] round k = round_rows[round_start[k] .. round_start[k + 1]) */
    int *head_rows;         /* [max_chunk] rows whose logits are wanted, in segment order */
    float *head_out;        /* [max_chunk, vocab] their logits (a batch; a chunk writes to the caller's buffer) */
    step_ctr *steps; /* [max_steps] the steps of one call, in the order every thread runs them */
    int64_t max_steps;
    share_ctr *shares; /* [n_matrix_steps, n_threads] the threads' shares of each matrix step of one call */
    int64_t n_matrix_steps;
    thread_buf *tb; /* [n_threads] */
    tg_pool *pool;  /* the team of n_threads that runs every call */
    /* the attention-sink meter; mass == NULL: off */
    float *mass;        /* [n_layers, max_chunk, n_kv_heads, TG_ATTN_MAX_SPLITS, gq * TG_MASS_FLOATS] the pieces' masses */
    int64_t *mass_vis;  /* [n_layers, max_chunk] tokens each query saw */
    int *mass_splits;   /* [n_layers, max_chunk] its shares */
    double *mass_share; /* [gq * TG_MASS_RANGES] one kv-head's combined shares */
    double *share_sum;  /* [n_layers, n_heads, TG_MASS_RANGES] */
    int64_t *queries, *skipped; /* [n_layers] */
};

_Static_assert(TG_MASS_RANGES == TG_ATTN_RANGES, "the meter's ranges: kvcache.h and tinygpt.h agree");

static float *alloc_rows(int rows, int64_t cols) { return calloc((size_t)rows * (size_t)cols, sizeof(float)); }

static int64_t max3(int64_t a, int64_t b, int64_t c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

static int64_t unit_rows(const tg_tensor *w, int n, int threads);

/* One thread's room for widened float rows (tg_act.wide): the largest unit, in a chunk, of any float-type matrix
 * (tg_wide_bytes; 0 when the kernels have no widened tiles, a chunk is one token, or no matrix is a float type). */
static size_t wide_scratch_bytes(const tg_model *m, int max_chunk, int threads) {
    if (max_chunk < 2) return 0;
    size_t most = 0;
    for (int l = 0; l <= m->hp.n_layers; l++) {
        const tg_layer_weights *lw = l < m->hp.n_layers ? &m->layers[l] : NULL;
        const tg_tensor *ws[7] = {&m->lm_head};
        int n = 1;
        if (lw) {
            const tg_tensor *each[7] = {&lw->wq, &lw->wk, &lw->wv, &lw->wo, &lw->w_gate, &lw->w_up, &lw->w_down};
            memcpy(ws, each, sizeof each);
            n = 7;
        }
        for (int i = 0; i < n; i++) {
            const tg_weight_type *wt = tg_weight_type_of(ws[i]->type);
            if (ws[i]->rows <= 0 || !wt || wt->act != TG_ACT_F32) continue;
            const size_t b = tg_wide_bytes(unit_rows(ws[i], max_chunk, threads), ws[i]->cols);
            if (b > most) most = b;
        }
    }
    return (most + 63) / 64 * 64; /* aligned_alloc wants a multiple of the alignment */
}

tg_forward *tg_forward_new(const struct tg_model *m, const tg_kvcache *cache, int max_chunk, int n_threads,
                           tg_error *err) {
    if (!m || !m->has_weights) {
        tg_fail(err, "the model has no weights (a vocab-only file can tokenise but not run)");
        return NULL;
    }
    if (max_chunk < 1) {
        tg_fail(err, "chunk size %d must be positive", max_chunk);
        return NULL;
    }
    if (!cache) {
        tg_fail(err, "no KV cache");
        return NULL;
    }
    const tg_hparams *hp = &m->hp;
    tg_forward *f = calloc(1, sizeof *f);
    if (!f) {
        tg_fail(err, "out of memory");
        return NULL;
    }
    f->m = m;
    f->max_chunk = max_chunk;
    f->pool = tg_pool_new(n_threads, err);
    if (!f->pool) {
        free(f);
        return NULL;
    }
    f->n_threads = tg_pool_threads(f->pool);
    const int64_t qd = (int64_t)hp->n_heads * hp->head_dim, kvd = (int64_t)hp->n_kv_heads * hp->head_dim;
    f->max_in = max3(hp->d_model, qd, hp->ffn_dim);
    f->part_floats = tg_kvcache_part_floats(cache);
    f->x = alloc_rows(max_chunk, hp->d_model);
    f->q = alloc_rows(max_chunk, qd);
    f->k = alloc_rows(max_chunk, kvd);
    f->v = alloc_rows(max_chunk, kvd);
    f->hg = alloc_rows(max_chunk, hp->ffn_dim);
    f->hu = alloc_rows(max_chunk, hp->ffn_dim);
    f->parts = alloc_rows(max_chunk, (int64_t)hp->n_kv_heads * TG_ATTN_MAX_SPLITS * (int64_t)f->part_floats);
    f->splits = calloc((size_t)max_chunk, sizeof *f->splits);
    f->pending = calloc((size_t)max_chunk, sizeof *f->pending);
    f->alone = calloc((size_t)max_chunk, sizeof *f->alone);
    f->work_floats = tg_kvcache_work_floats(cache);
    f->group_tokens = max_chunk > 1 ? tg_kvcache_group_tokens(cache) : 0;
    if (f->group_tokens > max_chunk) f->group_tokens = max_chunk;
    f->gwork_floats = f->group_tokens > 0 ? tg_kvcache_group_work_floats(cache, f->group_tokens) : 0;
    f->round_group = calloc((size_t)max_chunk, sizeof *f->round_group);
    f->round_defers = calloc((size_t)max_chunk, sizeof *f->round_defers);
    f->round_splits = calloc((size_t)max_chunk, sizeof *f->round_splits);
    f->row_cache = calloc((size_t)max_chunk, sizeof *f->row_cache);
    f->row_pos = calloc((size_t)max_chunk, sizeof *f->row_pos);
    f->round_rows = calloc((size_t)max_chunk, sizeof *f->round_rows);
    f->round_start = calloc((size_t)max_chunk + 1, sizeof *f->round_start);
    f->head_rows = calloc((size_t)max_chunk, sizeof *f->head_rows);
    f->head_out = alloc_rows(max_chunk, hp->vocab_size);
    f->max_steps = (int64_t)hp->n_layers * (2 * (int64_t)max_chunk + 4) + 2;
    f->steps = calloc((size_t)f->max_steps, sizeof *f->steps);
    f->n_matrix_steps = 4 * (int64_t)hp->n_layers + 1; /* q/k/v, wo, gate/up, down per layer; the head */
    f->shares = aligned_alloc(_Alignof(share_ctr),
                              (size_t)f->n_matrix_steps * (size_t)f->n_threads * sizeof *f->shares);
    f->tb = calloc((size_t)f->n_threads, sizeof *f->tb);
    bool ok = f->x && f->q && f->k && f->v && f->hg && f->hu && f->parts && f->splits && f->pending && f->alone &&
              f->steps && f->tb && f->shares &&
              f->row_cache && f->row_pos && f->round_rows && f->round_start && f->head_rows && f->head_out &&
              f->round_group && f->round_defers && f->round_splits;
    const size_t wide_bytes = ok ? wide_scratch_bytes(m, max_chunk, f->n_threads) : 0;
    for (int i = 0; ok && i < f->n_threads; i++) {
        thread_buf *b = &f->tb[i];
        const size_t xq_bytes = tg_act_scratch_bytes(max_chunk, f->max_in);
        b->xb = alloc_rows(max_chunk, f->max_in);
        b->xq = xq_bytes ? malloc(xq_bytes) : NULL;
        b->tmp = alloc_rows(max_chunk, hp->d_model);
        b->work = calloc(f->work_floats, sizeof(float));
        b->gwork = f->gwork_floats ? malloc(f->gwork_floats * sizeof(float)) : NULL;
        b->wide_bytes = wide_bytes;
        b->wide = wide_bytes ? aligned_alloc(64, wide_bytes) : NULL;
        ok = b->xb && (b->xq || !xq_bytes) && b->tmp && b->work && (b->gwork || !f->gwork_floats) &&
             (b->wide || !wide_bytes);
    }
    if (!ok) {
        tg_forward_free(f);
        tg_fail(err, "out of memory for the forward pass scratch (%d tokens, %d threads)", max_chunk, n_threads);
        return NULL;
    }
    return f;
}

void tg_forward_free(tg_forward *f) {
    if (!f) return;
    if (f->tb)
        for (int i = 0; i < f->n_threads; i++) {
            free(f->tb[i].xb);
            free(f->tb[i].xq);
            free(f->tb[i].tmp);
            free(f->tb[i].work);
            free(f->tb[i].gwork);
            free(f->tb[i].wide);
        }
    free(f->tb);
    free(f->x);
    free(f->q);
    free(f->k);
    free(f->v);
    free(f->hg);
    free(f->hu);
    free(f->parts);
    free(f->splits);
    free(f->pending);
    free(f->alone);
    free(f->row_cache);
    free(f->row_pos);
    free(f->round_rows);
    free(f->round_start);
    free(f->round_group);
    free(f->round_defers);
    free(f->round_splits);
    free(f->head_rows);
    free(f->head_out);
    free(f->steps);
    free(f->shares);
    free(f->mass);
    free(f->mass_vis);
    free(f->mass_splits);
    free(f->mass_share);
    free(f->share_sum);
    free(f->queries);
    free(f->skipped);
    tg_pool_free(f->pool);
    free(f);
}

/* ---- steps: units claimed from a counter ------------------------------------------------------------------------ */

/* One thread's place in the call's sequence of steps. */
typedef struct {
    step_ctr *steps;
    int64_t s; /* the current step */
    share_ctr *shares;
    int64_t ms; /* the current matrix step (its shares: shares[ms * threads ...]) */
    int thread, threads;
    const char *warm[2]; /* decode: where this thread's share of the next matrix step starts (or NULL), ... */
    size_t warm_bytes[2]; /* ... and how much of it to bring into L2 while it waits at the end of this step */
    int64_t finished;     /* units of the current step this thread has finished and not yet counted in `done` */
} team;

/* Whether the current step (of `total` units) still has units to hand out. */
static bool step_open(const team *tm, int64_t total) {
    return atomic_load_explicit(&tm->steps[tm->s].next, memory_order_relaxed) < total;
}

/* Claims a unit of the current step: its index, or -1 when all are handed out. */
static int64_t claim(team *tm, int64_t total) {
    if (!step_open(tm, total)) return -1;
    const int64_t u = atomic_fetch_add_explicit(&tm->steps[tm->s].next, 1, memory_order_relaxed);
    return u < total ? u : -1;
}

/* Marks a claimed unit finished. The thread counts its units and adds them to the step's `done` once, when it has
 * run out of units (publish, at step_end): no one reads `done` before then but to wait for the whole step, and one
 * atomic add per thread and step replaces one per unit on a line both threads write (a decode token has about 70
 * units a layer). */
static void finish(team *tm) { tm->finished++; }

/* Adds this thread's finished units of the current step to its `done` (their results visible to whoever sees the
 * step complete). */
static void publish(team *tm) {
    if (tm->finished > 0)
        atomic_fetch_add_explicit(&tm->steps[tm->s].done, tm->finished, memory_order_release);
    tm->finished = 0;
}

/* Claims a unit of the current matrix step (of `total` units): the next of this thread's own share, else the last
 * one left in another thread's share; -1 when all are taken. */
static int64_t claim_share(team *tm, int64_t total) {
    share_ctr *sh = tm->shares + tm->ms * tm->threads;
    for (int k = 0; k < tm->threads; k++) {
        const int v = (tm->thread + k) % tm->threads;
        const int64_t lo = total * v / tm->threads, size = total * (v + 1) / tm->threads - lo;
        uint64_t w = atomic_load_explicit(&sh[v].taken, memory_order_relaxed);
        while ((int64_t)((w >> 32) + (w & 0xffffffffu)) < size) {
            const uint64_t nw = k == 0 ? w + ((uint64_t)1 << 32) : w + 1;
            if (atomic_compare_exchange_weak_explicit(&sh[v].taken, &w, nw, memory_order_relaxed,
                                                      memory_order_relaxed))
                return k == 0 ? lo + (int64_t)(w >> 32) : lo + size - 1 - (int64_t)(w & 0xffffffffu);
        }
    }
    return -1;
}

/* Decoding, a thread that has run out of units of a step brings the start of its share of the next matrix step into
 * L2 before it waits (its first rows would otherwise be demand misses, while the team's last unit keeps only one core
 * reading). Once per region: a step that is already complete clears them unread. */
static void warm_next(team *tm, int64_t total) {
    if (!tm->warm[0] && !tm->warm[1]) return;
    const bool waits = atomic_load_explicit(&tm->steps[tm->s].done, memory_order_relaxed) < total;
    for (int i = 0; i < 2; i++) {
        if (tm->warm[i] && waits) {
            const uintptr_t end = (uintptr_t)tm->warm[i] + tm->warm_bytes[i];
            for (uintptr_t a = (uintptr_t)tm->warm[i] & ~(uintptr_t)63; a < end; a += 64)
                __builtin_prefetch((const void *)a, 0, 2);
        }
        tm->warm[i] = NULL;
    }
}

/* Waits until every unit of the current step is finished, then moves to the next step. Spins briefly, then yields
 * the CPU (the unit being waited for may belong to a thread that needs this core). */
static void step_end(team *tm, int64_t total) {
    publish(tm);
    warm_next(tm, total);
    for (int spin = 0; atomic_load_explicit(&tm->steps[tm->s].done, memory_order_acquire) < total; spin++) {
        if (spin < 4096) {
#if defined(__SSE2__)
            _mm_pause();
#endif
        } else {
            sched_yield();
        }
    }
    tm->s++;
}

/* step_end for a matrix step: also moves to the next matrix step's shares. */
static void matrix_step_end(team *tm, int64_t total) {
    step_end(tm, total);
    tm->ms++;
}

/* ---- matrix steps --------------------------------------------------------------------------------------------------- */

/* Units per thread of a decode step: a thread's share is taken in order (the prefetch running on from one unit into
 * the next); fewer, larger units mean fewer claims, more mean finer balance when one thread runs slower. On a quiet
 * machine (2026-12-02, depth 0, 2 threads, two interleaved rounds) 8 was above 4 on every file but one round of
 * Q4_K_M (SmolLM2-135M Q8_0 +0.5..3 %, TinyLlama-1.1B Q4_0 +3..8 %, Q8_0 +2 %, Q4_K_M -1..+4 %, bundled +3.5 %); 16
 * was faster still on the 32-block types but 4..9 % slower on Q4_K_M. (At load average 7-9, 4 / 8 / 16 were not told
 * apart.) */
#define DECODE_UNITS_PER_THREAD 8

/* The rows of a decode unit are a multiple of this: what the type's fast gemv takes at once (at least eight), so
 * that a unit never ends in rows a narrower kernel must take. Sixteen for Q8_0 / Q4_0 on AVX-512 (their units had
 * ended in eight rows of the eight-row kernel, e.g. SmolLM2-135M's 576-row wo / down in units of 40): 1 thread, 5
 * interleaved rounds, medians, SmolLM2-135M Q8_0 79.5 -> 85.2 tokens/s, Q4_0 119.7 -> 126.1; 2 threads, 7 rounds:
 * Q4_0 201.0 -> 228.6, Q8_0 145.3 -> 145.6. */
static int64_t decode_row_group(tg_dtype type) {
    const int rows = (unsigned)type < TG_DT_COUNT ? tg_kernels()->type[type].gemv_rows : 8;
    return rows > 8 ? rows : 8;
}

/* The rows of a unit of w are a multiple of this: decode_row_group decoding, 8 for a chunk, and whole groups of a
 * repacked matrix either way (its kernels take whole groups). */
static int64_t row_granule(const tg_tensor *w, int n) {
    const int64_t g = n == 1 ? decode_row_group(w->type) : 8;
    return w->row_group > g ? w->row_group : g;
}

/* Rows per unit for a weight of `rows` rows: decoding wants several units per thread (balance without much hand-out
 * traffic); a chunk wants blocks whose weights stay in L2 while every token of the chunk passes over them. */
static int64_t unit_rows(const tg_tensor *w, int n, int threads) {
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
    const int64_t g = row_granule(w, n);
    r = (r + g - 1) / g * g;
    return r < g ? g : r;
}

/* A step's matrices: each split into units of `ur` rows; outputs y[t * ldy + row]. */
typedef struct {
    const tg_tensor *w;
    float *y;
    size_t ldy;
    int64_t ur, units;
} mat_job;

static void job_init(mat_job *j, const tg_tensor *w, float *y, size_t ldy, int n, int threads) {
    j->w = w;
    j->y = y;
    j->ldy = ldy;
    j->ur = unit_rows(w, n, threads);
    j->units = (w->rows + j->ur - 1) / j->ur;
}

/* Unit u of the jobs: rows [*r0, *r1) of job *ji. */
static void job_unit(const mat_job *jobs, int n_jobs, int64_t u, int *ji, int64_t *r0, int64_t *r1) {
    int j = 0;
    while (j < n_jobs - 1 && u >= jobs[j].units) u -= jobs[j++].units;
    *ji = j;
    *r0 = u * jobs[j].ur;
    *r1 = *r0 + jobs[j].ur < jobs[j].w->rows ? *r0 + jobs[j].ur : jobs[j].w->rows;
}

/* Decoding a step of several matrices (q | k | v): units of about the same bytes in every matrix, so that the
 * threads' shares (ranges of units, claim_share) are about the same bytes too. Each matrix gets
 * round(its bytes / (the step's bytes / (DECODE_UNITS_PER_THREAD * threads))) units, at least one; rows stay
 * multiples of 8. */
static void balance_decode_units(mat_job *jobs, int n_jobs, int threads) {
    double step_bytes = 0;
    for (int j = 0; j < n_jobs; j++)
        step_bytes += (double)jobs[j].w->rows * (double)tg_row_bytes(jobs[j].w->type, jobs[j].w->cols);
    const double unit_bytes = step_bytes / (double)(DECODE_UNITS_PER_THREAD * threads);
    for (int j = 0; j < n_jobs; j++) {
        mat_job *jb = &jobs[j];
        const double bytes = (double)jb->w->rows * (double)tg_row_bytes(jb->w->type, jb->w->cols);
        int64_t units = unit_bytes > 0 ? (int64_t)(bytes / unit_bytes + 0.5) : 1;
        if (units < 1) units = 1;
        const int64_t g = row_granule(jb->w, 1);
        const int64_t ur = ((jb->w->rows + units - 1) / units + g - 1) / g * g;
        jb->ur = ur < g ? g : ur;
        jb->units = (jb->w->rows + jb->ur - 1) / jb->ur;
    }
}

static int64_t jobs_total(const mat_job *jobs, int n_jobs) {
    int64_t total = 0;
    for (int j = 0; j < n_jobs; j++) total += jobs[j].units;
    return total;
}

/* Bytes of a thread's next share brought into L2 while it waits at a step's end (warm_next). Session 22,
 * bench/decode-ab.sh (two builds in one process, median over pairs of turns; HEAD against itself 1.002 / 1.003):
 * SmolLM2-135M Q4_0 1.026x, bundled at depth 1024 1.016x, TinyLlama-1.1B Q8_0 1.001x — the short steps of the small
 * models gain, the large ones' first rows were a small part of a step. 64 KB measured no differently. */
#define WARM_BYTES (16 * 1024)

/* Warm region i: rows [r0, r1) of w, at most `cap` bytes of them. */
static void warm_rows(team *tm, int i, const tg_tensor *w, int64_t r0, int64_t r1, size_t cap) {
    const size_t rb = tg_row_bytes(w->type, w->cols), bytes = (size_t)(r1 - r0) * rb;
    tm->warm[i] = (const char *)w->data + (size_t)r0 * rb;
    tm->warm_bytes[i] = bytes < cap ? bytes : cap;
}

/* Sets the warm region (warm_next) to the start of this thread's share of the jobs (claim_share's first unit), at
 * most WARM_BYTES; none when the share is empty. */
static void warm_jobs(team *tm, const mat_job *jobs, int n_jobs) {
    const int64_t total = jobs_total(jobs, n_jobs), u0 = total * tm->thread / tm->threads;
    tm->warm[0] = tm->warm[1] = NULL;
    if (total * (tm->thread + 1) / tm->threads <= u0) return;
    int j;
    int64_t r0, r1;
    job_unit(jobs, n_jobs, u0, &j, &r0, &r1);
    warm_rows(tm, 0, jobs[j].w, r0, r1, WARM_BYTES);
}

/* What a thread computes, privately, before its first unit of a step: the step's input (into its own buffers). A
 * thread prepares only once it holds a unit, so it never reads shared data that a later step may be rewriting. */
typedef struct {
    void (*fn)(void *ctx, tg_act *a);
    void *ctx;
} prep_fn;

/* The units of the jobs this thread can claim, against the input that prep makes (shared by all jobs); with
 * `residual`, the result is added to y instead of stored (through tmp [a->n, unit rows], so residual jobs must have at
 * most d_model rows). Ends the step. */
static void run_jobs(team *tm, const mat_job *jobs, int n_jobs, prep_fn prep, bool residual, float *tmp) {
    const int64_t total = jobs_total(jobs, n_jobs);
    tg_act a = {0};
    bool ready = false;
    for (int64_t u; (u = claim_share(tm, total)) >= 0;) {
        if (!ready) {
            prep.fn(prep.ctx, &a);
            ready = true;
        }
        int j;
        int64_t r0, r1;
        job_unit(jobs, n_jobs, u, &j, &r0, &r1);
        const mat_job *jb = &jobs[j];
        if (!residual) {
            tg_matmul_rows(jb->w, &a, r0, r1, jb->y + r0, jb->ldy);
        } else {
            const int64_t nr = r1 - r0;
            tg_matmul_rows(jb->w, &a, r0, r1, tmp, (size_t)nr);
            for (int64_t t = 0; t < a.n; t++) {
                float *yt = jb->y + (size_t)t * jb->ldy + (size_t)r0;
                const float *st = tmp + (size_t)t * (size_t)nr;
                for (int64_t i = 0; i < nr; i++) yt[i] += st[i];
            }
        }
        finish(tm);
    }
    matrix_step_end(tm, total);
}

/* Gate and up rows of the same units, then swiglu on those rows (the step's outputs are disjoint per unit). */
static void run_ffn_up(team *tm, const tg_layer_weights *w, prep_fn prep, float *hg, float *hu, int64_t ff, int n,
                       int64_t ur) {
    const int64_t units = (ff + ur - 1) / ur;
    tg_act a = {0};
    bool ready = false;
    for (int64_t u; (u = claim_share(tm, units)) >= 0;) {
        if (!ready) {
            prep.fn(prep.ctx, &a);
            ready = true;
        }
        const int64_t r0 = u * ur, r1 = r0 + ur < ff ? r0 + ur : ff;
        tg_matmul_rows(&w->w_gate, &a, r0, r1, hg + r0, (size_t)ff);
        tg_matmul_rows(&w->w_up, &a, r0, r1, hu + r0, (size_t)ff);
        for (int t = 0; t < n; t++) tg_swiglu(hg + (size_t)t * (size_t)ff + r0, hu + (size_t)t * (size_t)ff + r0, r1 - r0);
        finish(tm);
    }
    matrix_step_end(tm, units);
}

/* ---- the steps' inputs -------------------------------------------------------------------------------------------- */

/* The thread's room for widened float rows, for the step's matrices (tg_act.wide). */
static void with_wide(tg_act *a, const thread_buf *tb) {
    a->wide = tb->wide;
    a->wide_bytes = tb->wide_bytes;
}

/* rmsnorm(x) rows [t0, n) with `weight` (or, with `rows`, the rows rows[0 .. n), packed), quantised in every form
 * that the weights of types[] take (tg_act_prepare_types: each weight multiplies the input rounded for its own type,
 * as llama.cpp rounds it). */
typedef struct {
    const tg_forward *f;
    thread_buf *tb;
    const float *weight;
    int t0, n;
    tg_dtype types[3];
    int n_types;
    const int *rows;
} norm_ctx;

static void prep_norm(void *ctx, tg_act *a) {
    const norm_ctx *c = ctx;
    const tg_hparams *hp = &c->f->m->hp;
    const int64_t d = hp->d_model;
    const float *in = c->tb->xb + c->t0 * d;
    if (c->rows) {
        for (int i = 0; i < c->n; i++)
            tg_rmsnorm(c->tb->xb + i * d, c->f->x + (int64_t)c->rows[i] * d, c->weight, d, hp->norm_eps);
        in = c->tb->xb;
    } else {
        for (int t = c->t0; t < c->n; t++) tg_rmsnorm(c->tb->xb + t * d, c->f->x + t * d, c->weight, d, hp->norm_eps);
    }
    /* every form the step's weights take: each weight multiplies the input quantised as for its own type */
    *a = tg_act_prepare_types(c->types, c->n_types, in, c->rows ? c->n : c->n - c->t0, d, c->tb->xq);
    with_wide(a, c->tb);
}

/* The attention output of every token: the pieces combined, then quantised for wo. */
typedef struct {
    const tg_forward *f;
    thread_buf *tb;
    tg_dtype type;
    int n;
} combine_ctx;

static void prep_combine(void *ctx, tg_act *a) {
    const combine_ctx *c = ctx;
    const tg_hparams *hp = &c->f->m->hp;
    const int H = hp->n_kv_heads, gq = hp->n_heads / hp->n_kv_heads;
    const int64_t D = hp->head_dim, qd = (int64_t)hp->n_heads * D;
    for (int t = 0; t < c->n; t++)
        for (int h = 0; h < H; h++)
            tg_kvcache_attend_combine(
                c->f->row_cache[t],
                c->f->parts + ((size_t)t * (size_t)H + (size_t)h) * TG_ATTN_MAX_SPLITS * c->f->part_floats,
                c->f->splits[t], c->tb->xb + t * qd + (int64_t)h * gq * D);
    *a = tg_act_prepare(c->type, c->tb->xb, c->n, qd, c->tb->xq);
    with_wide(a, c->tb);
}

/* swiglu(gate, up) quantised for w_down. */
typedef struct {
    const tg_forward *f;
    thread_buf *tb;
    tg_dtype type;
    int n;
} hidden_ctx;

static void prep_hidden(void *ctx, tg_act *a) {
    const hidden_ctx *c = ctx;
    *a = tg_act_prepare(c->type, c->f->hg, c->n, c->f->m->hp.ffn_dim, c->tb->xq);
    with_wide(a, c->tb);
}

/* ---- attention steps ----------------------------------------------------------------------------------------------- */

/* Whether round k's pieces (after its appends) can run grouped: its rows are consecutive tokens of one cache (a
 * prefill chunk), the cache's grouped pieces take them and fit the work space, and the meter is off. */
static bool round_grouped(const tg_forward *f, int l, int k) {
    const int i0 = f->round_start[k], n = f->round_start[k + 1] - i0;
    if (f->group_tokens < 1 || n < 2 || f->mass) return false;
    const int t0 = f->round_rows[i0];
    tg_kvcache *cache = f->row_cache[t0];
    for (int i = 1; i < n; i++) {
        const int t = f->round_rows[i0 + i];
        if (t != t0 + i || f->row_cache[t] != cache || f->row_pos[t] != f->row_pos[t0] + i) return false;
    }
    return tg_kvcache_group_work_floats(cache, f->group_tokens) <= f->gwork_floats &&
           tg_kvcache_group_tokens(cache) == f->group_tokens &&
           tg_kvcache_attend_group_ok(cache, l, f->row_pos[t0], n);
}

/* Round k's rows, each through its own cache at its own position: appends their K/V (when the layer holds its own),
 * rotates their queries, records their shares: a step of one unit, the rows in order. */
static void attn_prepare(team *tm, tg_forward *f, int l, bool own_kv, int k) {
    if (claim(tm, 1) == 0) {
        const tg_hparams *hp = &f->m->hp;
        const int64_t qd = (int64_t)hp->n_heads * hp->head_dim, kvd = (int64_t)hp->n_kv_heads * hp->head_dim;
        bool defers = false;
        int most = 1;
        for (int i = f->round_start[k]; i < f->round_start[k + 1]; i++) {
            const int t = f->round_rows[i];
            tg_kvcache *cache = f->row_cache[t];
            f->pending[t] = 0;
            if (own_kv) {
                const int m = tg_kvcache_append_start(cache, l, f->row_pos[t], f->k + t * kvd, f->v + t * kvd,
                                                      f->alone[t]);
                f->pending[t] = m > 0 ? m : 0;
                defers |= f->pending[t] != 0;
            }
            tg_kvcache_query(cache, l, f->row_pos[t], f->q + t * qd, f->q + t * qd);
            f->splits[t] = tg_kvcache_attend_splits(cache, l, f->row_pos[t]);
            if (f->splits[t] > most) most = f->splits[t];
        }
        f->round_splits[k] = most;
        f->round_group[k] = round_grouped(f, l, k);
        f->round_defers[k] = defers;
        finish(tm);
    }
    step_end(tm, 1);
}

/* The meter's record of a piece that just ran (its scores still in work). */
static void meter_piece(tg_forward *f, const tg_kvcache *cache, int l, int t, int64_t pos, int h, int s,
                        const float *part, const float *work) {
    const tg_hparams *hp = &f->m->hp;
    const size_t gq = (size_t)(hp->n_heads / hp->n_kv_heads), lt = (size_t)l * (size_t)f->max_chunk + (size_t)t;
    float *mass = f->mass + ((lt * (size_t)hp->n_kv_heads + (size_t)h) * TG_ATTN_MAX_SPLITS + (size_t)s) * gq *
                                TG_MASS_FLOATS;
    const int64_t vis = tg_kvcache_piece_mass(cache, l, pos + t, h, s, f->splits[t], part, work, mass);
    if (s == 0 && h == 0) {
        f->mass_vis[lt] = vis;
        f->mass_splits[lt] = f->splits[t];
    }
}

/* The meter's sums over the n tokens of the call that just ended. */
static void meter_sum(tg_forward *f, const tg_kvcache *cache, int n) {
    const tg_hparams *hp = &f->m->hp;
    const int H = hp->n_kv_heads, gq = hp->n_heads / hp->n_kv_heads;
    for (int l = 0; l < hp->n_layers; l++)
        for (int t = 0; t < n; t++) {
            const size_t lt = (size_t)l * (size_t)f->max_chunk + (size_t)t;
            if (f->mass_vis[lt] < 2 * TG_MASS_NEWEST) {
                f->skipped[l]++;
                continue;
            }
            f->queries[l]++;
            for (int h = 0; h < H; h++) {
                const float *mass = f->mass + (lt * (size_t)H + (size_t)h) * TG_ATTN_MAX_SPLITS * (size_t)gq * TG_MASS_FLOATS;
                tg_kvcache_mass_combine(cache, mass, f->mass_splits[lt], f->mass_share);
                double *sum = f->share_sum + ((size_t)l * (size_t)hp->n_heads + (size_t)h * (size_t)gq) * TG_MASS_RANGES;
                for (int i = 0; i < gq * TG_MASS_RANGES; i++) sum[i] += f->mass_share[i];
            }
        }
}

bool tg_forward_meter_on(tg_forward *f, tg_error *err) {
    if (f->mass) return true;
    const tg_hparams *hp = &f->m->hp;
    const size_t L = (size_t)hp->n_layers, T = (size_t)f->max_chunk, gq = (size_t)(hp->n_heads / hp->n_kv_heads);
    f->mass = calloc(L * T * (size_t)hp->n_kv_heads * TG_ATTN_MAX_SPLITS * gq * TG_MASS_FLOATS, sizeof(float));
    f->mass_vis = calloc(L * T, sizeof *f->mass_vis);
    f->mass_splits = calloc(L * T, sizeof *f->mass_splits);
    f->mass_share = calloc(gq * TG_MASS_RANGES, sizeof *f->mass_share);
    f->share_sum = calloc(L * (size_t)hp->n_heads * TG_MASS_RANGES, sizeof *f->share_sum);
    f->queries = calloc(L, sizeof *f->queries);
    f->skipped = calloc(L, sizeof *f->skipped);
    if (f->mass && f->mass_vis && f->mass_splits && f->mass_share && f->share_sum && f->queries && f->skipped)
        return true;
    free(f->mass_vis);
    free(f->mass_splits);
    free(f->mass_share);
    free(f->share_sum);
    free(f->queries);
    free(f->skipped);
    free(f->mass);
    f->mass = NULL;
    return tg_fail(err, "out of memory for the attention meter");
}

bool tg_forward_meter(const tg_forward *f, tg_attention_stats *out) {
    *out = (tg_attention_stats){0};
    if (!f->mass) return false;
    out->n_layers = f->m->hp.n_layers;
    out->n_heads = f->m->hp.n_heads;
    out->share_sum = f->share_sum;
    out->queries = f->queries;
    out->skipped = f->skipped;
    return true;
}

/* The pieces of a grouped round k: units (group of group_tokens rows, kv-head). */
static void attn_groups(team *tm, tg_forward *f, int l, int k, float *gwork) {
    const tg_hparams *hp = &f->m->hp;
    const int H = hp->n_kv_heads, G = f->group_tokens;
    const int64_t qd = (int64_t)hp->n_heads * hp->head_dim;
    const int i0 = f->round_start[k], n = f->round_start[k + 1] - i0;
    const int64_t units = (int64_t)((n + G - 1) / G) * H;
    const size_t row_parts = (size_t)H * TG_ATTN_MAX_SPLITS * f->part_floats;
    for (int64_t u; (u = claim(tm, units)) >= 0;) {
        const int g = (int)(u / H), h = (int)(u % H);
        const int t = f->round_rows[i0 + g * G], nq = n - g * G < G ? n - g * G : G;
        float *part = f->parts + (size_t)t * row_parts + (size_t)h * TG_ATTN_MAX_SPLITS * f->part_floats;
        tg_kvcache_attend_group(f->row_cache[t], l, f->row_pos[t], nq, f->q + t * qd, (size_t)qd, h, part, row_parts,
                                gwork);
        finish(tm);
    }
    step_end(tm, units);
}

/* The pieces of round k's rows: units (row, kv-head, share), as many shares per row and kv-head as the round's row
 * with the most has (a decode token's shares of a depth-2048 cache: 4 units a kv-head, not TG_ATTN_MAX_SPLITS, each
 * empty one a claim on the counter both threads take from). A row's pending stores (its kv-heads' KIVI rows of the
 * new token, f->pending) are made by the unit of the kv-head's last share, before it reads them, while the other
 * units attend to older tokens; in a round that has such stores the units run last shares first (share j from the
 * last, row, kv-head), so that no unit waits for them at the end. */
static void attn_pieces(team *tm, tg_forward *f, int l, int k, float *work, float *gwork) {
    const tg_hparams *hp = &f->m->hp;
    const int H = hp->n_kv_heads;
    const int64_t qd = (int64_t)hp->n_heads * hp->head_dim, kvd = (int64_t)hp->n_kv_heads * hp->head_dim;
    const int i0 = f->round_start[k], rows = f->round_start[k + 1] - i0;
    if (f->round_group[k]) {
        attn_groups(tm, f, l, k, gwork);
        return;
    }
    const int S = f->round_splits[k]; /* shares per (row, kv-head) handed out: a row with fewer skips the rest */
    const int64_t units = (int64_t)rows * H * S;
    for (int64_t u; (u = claim(tm, units)) >= 0;) {
        int t, h, j, s;
        if (f->round_defers[k]) { /* the last shares first: they store what the others need not wait for */
            const int rh = (int)(u % ((int64_t)rows * H));
            j = (int)(u / ((int64_t)rows * H));
            t = f->round_rows[i0 + rh / H];
            h = rh % H;
            s = f->splits[t] - 1 - j;
        } else { /* row, kv-head, share in order */
            t = f->round_rows[i0 + (int)(u / ((int64_t)H * S))];
            h = (int)(u / S % H);
            s = (int)(u % S);
            j = f->splits[t] - 1 - s;
        }
        if (s >= 0 && s < f->splits[t]) {
            if (j == 0 && f->pending[t])
                tg_kvcache_append_head(f->row_cache[t], l, h, f->pending[t], f->v + t * kvd, (uint8_t *)work);
            float *part =
                f->parts + (((size_t)t * (size_t)H + (size_t)h) * TG_ATTN_MAX_SPLITS + (size_t)s) * f->part_floats;
            tg_kvcache_attend_piece(f->row_cache[t], l, f->row_pos[t], f->q + t * qd, h, s, f->splits[t], part,
                                    work);
            if (f->mass) meter_piece(f, f->row_cache[t], l, t, f->row_pos[t] - t, h, s, part, work);
        }
        finish(tm);
    }
    step_end(tm, units);
}

/* ---- the pass -------------------------------------------------------------------------------------------------------- */

/* A layer's matrix steps: q | k | v, wo, w_down, and the rows of a gate / up unit. */
typedef struct {
    mat_job qkv[3], wo, down;
    int64_t ffn_rows;
} layer_jobs;

/* Layer l's jobs for n rows (a function of the weights and the forward's fixed buffers only, so it may be planned
 * while the layer before runs). */
static void plan_layer(layer_jobs *lj, const struct tg_model *m, tg_forward *f, int l, int n, int threads) {
    const tg_hparams *hp = &m->hp;
    const tg_layer_weights *w = &m->layers[l];
    const int64_t d = hp->d_model;
    const int64_t qd = (int64_t)hp->n_heads * hp->head_dim, kvd = (int64_t)hp->n_kv_heads * hp->head_dim;
    job_init(&lj->qkv[0], &w->wq, f->q, (size_t)qd, n, threads);
    job_init(&lj->qkv[1], &w->wk, f->k, (size_t)kvd, n, threads);
    job_init(&lj->qkv[2], &w->wv, f->v, (size_t)kvd, n, threads);
    if (n == 1 && hp->kv_source[l] == l) balance_decode_units(lj->qkv, 3, threads);
    job_init(&lj->wo, &w->wo, f->x, (size_t)d, n, threads);
    job_init(&lj->down, &w->w_down, f->x, (size_t)d, n, threads);
    /* gate and up share their units: whole units of both (granules of 8 or 16, so the larger divides) */
    const int64_t gu = row_granule(&w->w_up, n);
    lj->ffn_rows = (unit_rows(&w->w_gate, n, threads) + gu - 1) / gu * gu;
}

/* warm_jobs for the gate / up step (run_ffn_up's units of `ur` rows): both matrices' first rows of this thread's
 * share. */
static void warm_ffn(team *tm, const tg_layer_weights *w, int64_t ff, int64_t ur) {
    const int64_t units = (ff + ur - 1) / ur, u0 = units * tm->thread / tm->threads;
    tm->warm[0] = tm->warm[1] = NULL;
    if (units * (tm->thread + 1) / tm->threads <= u0) return; /* an empty share */
    const int64_t r0 = u0 * ur, r1 = r0 + ur < ff ? r0 + ur : ff;
    warm_rows(tm, 0, &w->w_gate, r0, r1, WARM_BYTES / 2);
    warm_rows(tm, 1, &w->w_up, r0, r1, WARM_BYTES / 2);
}

/* One call's arguments, shared by the team: n rows (their caches, positions and rounds in the forward), and where
 * the head's logits go: every row from row t0 into logits_all, the last row into logits_last, or (n_head > 0) the
 * rows head_rows[0 .. n_head) into head_out. */
typedef struct {
    tg_forward *f;
    int n, n_rounds;
    float *logits_all, *logits_last;
    int n_head;
} chunk_call;

/* One member's walk through the call's steps (the pool runs it on every thread). */
static void chunk_thread(void *arg, int thread) {
    const chunk_call *c = arg;
    tg_forward *f = c->f;
    const int n = c->n;
    float *logits_all = c->logits_all, *logits_last = c->logits_last;
    const struct tg_model *m = f->m;
    const tg_hparams *hp = &m->hp;
    const int64_t ff = hp->ffn_dim, vocab = hp->vocab_size;
    const int threads = f->n_threads;
    thread_buf *tb = &f->tb[thread];
    team tm = {.steps = f->steps, .s = 0, .shares = f->shares, .ms = 0, .thread = thread, .threads = threads};
    const bool decoding = n == 1; /* a thread warms its next share at each step's end (warm_next) */

    /* the output head, only for the rows whose logits are wanted */
    mat_job head;
    const tg_dtype ht = m->lm_head.type;
    const int t0 = logits_all ? 0 : n - 1;
    if (c->n_head > 0) {
        job_init(&head, &m->lm_head, f->head_out, (size_t)vocab, c->n_head, threads);
    } else {
        job_init(&head, &m->lm_head, logits_all ? logits_all : logits_last, (size_t)vocab, n - t0, threads);
        if (!logits_all && !logits_last) head.units = 0;
    }

    layer_jobs lj;
    plan_layer(&lj, m, f, 0, n, threads);
    for (int l = 0; l < hp->n_layers; l++) {
        const tg_layer_weights *w = &m->layers[l];
        const bool own_kv = hp->kv_source[l] == l;

        /* 1. q, k, v */
        if (decoding) warm_jobs(&tm, &lj.wo, 1);
        norm_ctx nq = {f, tb, w->attn_norm, 0, n, {w->wq.type, w->wk.type, w->wv.type}, own_kv ? 3 : 1, NULL};
        run_jobs(&tm, lj.qkv, own_kv ? 3 : 1, (prep_fn){prep_norm, &nq}, false, tb->tmp);

        /* 2-3. append, rotate, attention pieces: round by round */
        for (int k = 0; k < c->n_rounds; k++) {
            attn_prepare(&tm, f, l, own_kv, k);
            attn_pieces(&tm, f, l, k, tb->work, tb->gwork);
        }

        /* 4. combine (privately) -> wo, added to x */
        if (decoding) warm_ffn(&tm, w, ff, lj.ffn_rows);
        combine_ctx cc = {f, tb, w->wo.type, n};
        run_jobs(&tm, &lj.wo, 1, (prep_fn){prep_combine, &cc}, true, tb->tmp);

        /* 5. gate, up, swiglu */
        if (decoding) warm_jobs(&tm, &lj.down, 1);
        norm_ctx nf = {f, tb, w->ffn_norm, 0, n, {w->w_gate.type, w->w_up.type, w->w_up.type}, 2, NULL};
        run_ffn_up(&tm, w, (prep_fn){prep_norm, &nf}, f->hg, f->hu, ff, n, lj.ffn_rows);

        /* 6. down, added to x */
        const mat_job down = lj.down;
        if (l + 1 < hp->n_layers) {
            plan_layer(&lj, m, f, l + 1, n, threads);
            if (decoding) warm_jobs(&tm, lj.qkv, hp->kv_source[l + 1] == l + 1 ? 3 : 1);
        } else if (decoding) {
            warm_jobs(&tm, &head, 1);
        }
        hidden_ctx hc = {f, tb, w->w_down.type, n};
        run_jobs(&tm, &down, 1, (prep_fn){prep_hidden, &hc}, true, tb->tmp);
    }

    /* final norm and the output head */
    if (c->n_head > 0) {
        norm_ctx no = {f, tb, m->out_norm, 0, c->n_head, {ht, ht, ht}, 1, f->head_rows};
        run_jobs(&tm, &head, 1, (prep_fn){prep_norm, &no}, false, tb->tmp);
        return;
    }
    norm_ctx no = {f, tb, m->out_norm, t0, n, {ht, ht, ht}, 1, NULL};
    run_jobs(&tm, &head, 1, (prep_fn){prep_norm, &no}, false, tb->tmp);
}

/* Lays out the rows of segs[0 .. n_segs) (which fit in max_chunk): each row's cache and position, the embeddings,
 * and the attention rounds: a segment whose cache needs token-by-token attention puts its row j in round j, any
 * other segment all its rows in round 0. Returns the number of rounds. */
static int layout_rows(tg_forward *f, const tg_forward_seg *segs, int n_segs) {
    const int64_t d = f->m->hp.d_model;
    int n = 0, n_rounds = 1;
    for (int s = 0; s < n_segs; s++) {
        const bool serial = segs[s].n > 1 && tg_kvcache_plan(segs[s].cache).token_by_token;
        if (serial && segs[s].n > n_rounds) n_rounds = segs[s].n;
        for (int j = 0; j < segs[s].n; j++, n++) {
            f->row_cache[n] = segs[s].cache;
            f->row_pos[n] = segs[s].pos + j;
            f->alone[n] = serial || segs[s].n == 1; /* a serial segment puts one row in each round */
            tg_tensor_get_row(&f->m->tok_embd, segs[s].ids[j], f->x + n * d);
        }
    }
    /* rows by round, in row order within a round (a chunk's appends stay in token order) */
    int i = 0;
    for (int k = 0; k < n_rounds; k++) {
        f->round_start[k] = i;
        for (int s = 0, row0 = 0; s < n_segs; row0 += segs[s].n, s++) {
            const bool serial = segs[s].n > 1 && tg_kvcache_plan(segs[s].cache).token_by_token;
            if (serial) {
                if (k < segs[s].n) f->round_rows[i++] = row0 + k;
            } else if (k == 0) {
                for (int j = 0; j < segs[s].n; j++) f->round_rows[i++] = row0 + j;
            }
        }
    }
    f->round_start[n_rounds] = i;
    return n_rounds;
}

static void reset_steps(tg_forward *f, int n_rounds) {
    const int64_t n_steps = (int64_t)f->m->hp.n_layers * (2 * (int64_t)n_rounds + 4) + 1;
    for (int64_t i = 0; i < n_steps; i++) {
        atomic_store_explicit(&f->steps[i].next, 0, memory_order_relaxed);
        atomic_store_explicit(&f->steps[i].done, 0, memory_order_relaxed);
    }
    for (int64_t i = 0; i < f->n_matrix_steps * f->n_threads; i++)
        atomic_store_explicit(&f->shares[i].taken, 0, memory_order_relaxed);
}

void tg_forward_chunk(tg_forward *f, tg_kvcache *cache, const int32_t *ids, int n, int64_t pos, float *logits_all,
                      float *logits_last) {
    const int64_t vocab = f->m->hp.vocab_size;
    if (n < 1 || n > f->max_chunk) return;
    const tg_forward_seg seg = {cache, ids, n, pos, NULL};
    const int n_rounds = layout_rows(f, &seg, 1);
    reset_steps(f, n_rounds);
    chunk_call c = {f, n, n_rounds, logits_all, logits_last, 0};
    tg_pool_run(f->pool, chunk_thread, &c);
    if (f->mass) meter_sum(f, cache, n);
    if (logits_all && logits_last)
        memcpy(logits_last, logits_all + (int64_t)(n - 1) * vocab, (size_t)vocab * sizeof(float));
}

bool tg_forward_batch(tg_forward *f, const tg_forward_seg *segs, int n_segs) {
    const int64_t vocab = f->m->hp.vocab_size;
    int n = 0;
    for (int s = 0; s < n_segs; s++) {
        if (segs[s].n < 1 || segs[s].n > f->max_chunk - n || !segs[s].cache) return false;
        if (tg_kvcache_work_floats(segs[s].cache) > f->work_floats) return false;
        for (int t = 0; t < s; t++)
            if (segs[t].cache == segs[s].cache) return false;
        n += segs[s].n;
    }
    if (n == 0) return true;
    const int n_rounds = layout_rows(f, segs, n_segs);
    int n_head = 0;
    for (int s = 0, row0 = 0; s < n_segs; row0 += segs[s].n, s++)
        if (segs[s].logits) f->head_rows[n_head++] = row0 + segs[s].n - 1;
    reset_steps(f, n_rounds);
    chunk_call c = {f, n, n_rounds, NULL, NULL, n_head};
    if (n_head == 0) c.logits_last = NULL; /* no head at all: chunk_thread's plain path with no units */
    tg_pool_run(f->pool, chunk_thread, &c);
    for (int s = 0, h = 0; s < n_segs; s++)
        if (segs[s].logits) memcpy(segs[s].logits, f->head_out + (int64_t)(h++) * vocab, (size_t)vocab * sizeof(float));
    return true;
}

int tg_forward_threads(const tg_forward *f) { return f->n_threads; }

int tg_forward_max_rows(const tg_forward *f) { return f->max_chunk; }
