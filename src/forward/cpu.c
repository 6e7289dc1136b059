/* cpu.c — the CPU backend (backend.h): compiles the model program into steps of units for one thread team and runs
 * every call as one run of the team (util/thread_pool.h), not one per operation.
 *
 * Compiling fuses what the program writes apart: a norm becomes the private input preparation of the products that
 * read it (each thread normalises and quantises the shared, finished x once it holds a unit of the step); the
 * products of one input form one step (q | k | v; gate | up); an add of a product to x becomes part of the product's
 * units (through the thread's tmp rows); the gated activation runs on the gate / up units' own rows; a bias joins
 * its product's units; the per-head norms of q and k are one step of row units; attention is 2 steps per round
 * (attention.h). The attention output is combined privately as the input of wo. The call's step
 * count follows from the compiled list (steps_of), once.
 *
 * A chunk's matrix steps are matrix x matrix; a decode token's units are planned for balance (plan.h), and a thread
 * that has run out of units warms the start of its share of the next matrix step. Every buffer is allocated by
 * create; a call allocates nothing. */
#include <stdlib.h>
#include <string.h>

#include "forward/attention.h"
#include "forward/backend.h"
#include "forward/plan.h"
#include "forward/sched.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/vec.h"
#include "util/error.h"
#include "util/thread_pool.h"

/* One thread's private buffers. */
typedef struct {
    float *xb;      /* [max_rows, max_in] a step's input: normalised x, or the combined attention output */
    void *xq;       /* tg_act_scratch_bytes(max_rows, max_in): that input quantised for Q8_0 / Q4_0 / K-quant weights */
    float *tmp;     /* [max_rows, d_model] a unit's output before it is added to x */
    float *work;    /* [work_floats] attention piece work space */
    float *gwork;   /* [gwork_floats] a group of prefill pieces' work space (NULL: no grouped pieces) */
    float *wide;    /* [wide_bytes] a unit's float weight rows widened once for a chunk (tg_act.wide; NULL: none) */
    size_t wide_bytes;
} thread_buf;

/* What a compiled step is. MATMUL: one to three products of one input (into their values, or added to x), each
 * with its bias when it has one; GATE_UP: gate and up of the same rows, then the gated activation on those rows;
 * ATTEND: a layer's attention rounds; HEADS: the per-head norms of one to three values, a row a unit; ROPE: a layer's
 * q and k rotated (program_rope rows), a row a unit; NORM_ADD: x += norm(t) (a post-norm), a row a unit. */
typedef enum { ST_MATMUL, ST_GATE_UP, ST_ATTEND, ST_HEADS, ST_ROPE, ST_NORM_ADD } step_kind;

/* How each thread prepares a matrix step's input: NORM: norm(x) with norm_w; ATT: the attention pieces combined;
 * HIDDEN: the gated activation (the GATE value). */
typedef enum { IN_NORM, IN_ATT, IN_HIDDEN } input_kind;

typedef struct {
    step_kind kind;
    int n_w;
    const tg_tensor *w[3];
    tg_val out[3];
    input_kind in;
    const float *norm_w;
    const float *bias[3];  /* MATMUL: out[j] += bias[j] on every row (NULL: none) */
    const float *hnorm[3]; /* HEADS: the norm weight [head_dim] of the heads of out[j] */
    tg_arch_glu glu;       /* GATE_UP: the gated activation */
    float cap;             /* the output head: its logits soft-capped at cap (0: not) */
    const double *freq;    /* ROPE: [rope_dims / 2] the layer's frequencies (NULL: no rotation) */
    const double *freq_long; /* ROPE: those of the positions >= long_from (LongRoPE; NULL: none) */
    int64_t long_from;
    float qf;              /* ROPE: the queries' factor */
    float rope_mul;        /* ROPE: the factor on cos and sin */
    bool residual; /* the product is added to x (out[0] == X) through the thread's tmp rows */
    bool head;     /* the output head: only the rows whose logits are wanted */
    int layer;     /* ATTEND */
    bool own_kv;   /* ATTEND; ROPE: k rotates too */
} cstep;

struct tg_backend {
    const struct tg_model *m;
    int max_rows, n_threads;
    int64_t max_in; /* widest step input: max(d_model, n_heads * head_dim, ffn_dim) */
    const tg_tensor *embed;
    float embed_scale; /* x *= embed_scale after the embedding (0: not) */
    const float *post_w; /* compiling: the weight of the post-norm that waits for its add */
    cstep *cs; /* [n_cs] the compiled program */
    int n_cs;
    int *next_mat; /* [n_cs] the index of the next matrix step after step i (-1: none) */
    int first_mat;
    int64_t n_mat, n_attend, n_rowsteps; /* matrix steps; attention steps (2 scheduler steps per round each);
                                          * HEADS, ROPE and NORM_ADD steps */
    /* shared activations for up to max_rows rows (row t = row t of the call) */
    float *x;  /* [max_rows, d_model] residual stream */
    float *q;  /* [max_rows, n_heads * head_dim] queries (pre-RoPE, then rotated and scaled in place) */
    float *k;  /* [max_rows, n_kv_heads * head_dim] keys (pre-RoPE) */
    float *v;  /* [max_rows, n_kv_heads * head_dim] values */
    float *hg; /* [max_rows, ffn_dim] gate projection, then act(gate) * up */
    float *hu; /* [max_rows, ffn_dim] up projection */
    float *t;  /* [max_rows, d_model] a block's output before its post-norm */
    tg_attn attn;
    tg_step_ctr *steps; /* [steps_of(max_rows)] the steps of one call, in the order every thread runs them */
    tg_share_ctr *shares; /* [n_mat, n_threads] the threads' shares of each matrix step of one call */
    thread_buf *tb; /* [n_threads] */
    tg_pool *pool;  /* the team of n_threads that runs every call */
};

/* The scheduler steps of a call with n_rounds attention rounds: one per matrix or HEADS step, two per round per
 * layer. */
static int64_t steps_of(const tg_backend *be, int n_rounds) {
    return be->n_mat + be->n_rowsteps + 2 * (int64_t)n_rounds * be->n_attend;
}

/* ---- compiling the program ------------------------------------------------------------------------------------- */

static bool cannot(const tg_op *o, const char *why, tg_error *err) {
    return tg_fail(err, "the cpu backend cannot run the model: %s (%s)", tg_op_name(o->kind), why);
}

/* The operations of rows other than Llama's: the embedding's scale, the logits' soft-cap, a layer's own RoPE, a
 * post-norm's add. True when o was one of them (err set when it cannot be compiled). */
static bool compile_extra(tg_backend *be, const tg_program *p, int i, bool *handled, tg_error *err) {
    const tg_op *o = &p->ops[i];
    cstep *last = be->n_cs ? &be->cs[be->n_cs - 1] : NULL;
    *handled = true;
    switch (o->kind) {
    case TG_OP_SCALE:
        if (i != 1 || p->ops[0].kind != TG_OP_EMBED || o->out != TG_VAL_X) return cannot(o, "of the embedding", err);
        be->embed_scale = o->scale;
        return true;
    case TG_OP_SOFTCAP:
        if (!last || !last->head || p->ops[i - 1].kind != TG_OP_MATMUL) return cannot(o, "of the logits", err);
        last->cap = o->scale;
        return true;
    case TG_OP_ROPE:
        if (o->out != TG_VAL_Q || o->layer < 0) return cannot(o, "of a layer's queries and keys", err);
        be->cs[be->n_cs++] = (cstep){.kind = ST_ROPE, .layer = o->layer, .own_kv = o->own_kv, .freq = o->freq,
                                     .freq_long = o->freq_long, .long_from = o->long_from, .qf = o->scale,
                                     .rope_mul = o->rope_mul};
        return true;
    case TG_OP_NORM:
        if (o->in != TG_VAL_T || o->out != TG_VAL_T) break;
        if (o->norm != TG_NORM_RMS || !last || last->kind != ST_MATMUL || last->n_w != 1 || last->out[0] != TG_VAL_T)
            return cannot(o, "rms of a block's output, right after its product", err);
        be->post_w = o->norm_w;
        return true;
    case TG_OP_ADD:
        if (p->ops[i - 1].kind != TG_OP_NORM || p->ops[i - 1].out != TG_VAL_T) break;
        if (o->in != TG_VAL_T || o->out != TG_VAL_X) return cannot(o, "of a post-norm into x", err);
        be->cs[be->n_cs++] = (cstep){.kind = ST_NORM_ADD, .norm_w = be->post_w};
        return true;
    default:
        break;
    }
    *handled = false;
    return true;
}

/* Appends the step for program operation o, or fuses o into the last step. */
static bool compile_op(tg_backend *be, const tg_program *p, int i, const float **norm_w, bool *own_kv, tg_error *err) {
    const tg_op *o = &p->ops[i];
    cstep *last = be->n_cs ? &be->cs[be->n_cs - 1] : NULL;
    bool handled;
    if (!compile_extra(be, p, i, &handled, err)) return false;
    if (handled) return true;
    switch (o->kind) {
    case TG_OP_EMBED:
        if (i != 0 || o->out != TG_VAL_X) return cannot(o, "only as the first operation, into x", err);
        be->embed = o->w;
        return true;
    case TG_OP_NORM:
        if (o->norm != TG_NORM_RMS || o->in != TG_VAL_X || o->out != TG_VAL_H) return cannot(o, "rms of x only", err);
        *norm_w = o->norm_w;
        return true;
    case TG_OP_ROPE_APPEND:
        *own_kv = o->own_kv;
        return true;
    case TG_OP_ATTEND:
        if (i == 0 || p->ops[i - 1].kind != TG_OP_ROPE_APPEND || p->ops[i - 1].layer != o->layer)
            return cannot(o, "right after its layer's rope/append", err);
        be->cs[be->n_cs++] = (cstep){.kind = ST_ATTEND, .layer = o->layer, .own_kv = *own_kv};
        return true;
    case TG_OP_GLU:
        if (!last || last->kind != ST_MATMUL || last->n_w != 2 || last->out[0] != o->in || last->out[1] != o->in2 ||
            o->out != o->in)
            return cannot(o, "in place, right after the gate and up products", err);
        last->kind = ST_GATE_UP;
        last->glu = o->glu;
        return true;
    case TG_OP_ADD:
        if (!last || last->kind != ST_MATMUL || last->n_w != 1 || last->out[0] != o->in || o->out != TG_VAL_X ||
            p->ops[i - 1].kind != TG_OP_MATMUL)
            return cannot(o, "into x, right after the one product it adds", err);
        last->residual = true;
        last->out[0] = TG_VAL_X;
        return true;
    case TG_OP_BIAS: {
        const tg_op_kind prev = p->ops[i - 1].kind;
        int j = 0;
        while (last && j < last->n_w && last->out[j] != o->out) j++;
        if (!last || last->kind != ST_MATMUL || last->residual || last->head || j == last->n_w || last->bias[j] ||
            o->in != o->out || (prev != TG_OP_MATMUL && prev != TG_OP_BIAS))
            return cannot(o, "in place, right after the products whose output it shifts", err);
        last->bias[j] = o->bias;
        return true;
    }
    case TG_OP_HEAD_NORM:
        if (o->norm != TG_NORM_RMS || o->in != o->out || (o->out != TG_VAL_Q && o->out != TG_VAL_K))
            return cannot(o, "rms of the queries or keys, in place", err);
        if (last && last->kind == ST_HEADS && p->ops[i - 1].kind == TG_OP_HEAD_NORM && last->n_w < 3) {
            last->hnorm[last->n_w] = o->norm_w;
            last->out[last->n_w++] = o->out;
            return true;
        }
        be->cs[be->n_cs++] = (cstep){.kind = ST_HEADS, .n_w = 1, .out = {o->out}, .hnorm = {o->norm_w}};
        return true;
    case TG_OP_MATMUL: {
        input_kind in;
        if (o->in == TG_VAL_H && *norm_w) in = IN_NORM;
        else if (o->in == TG_VAL_ATT) in = IN_ATT;
        else if (o->in == TG_VAL_GATE && last && last->kind == ST_GATE_UP) in = IN_HIDDEN;
        else return cannot(o, "of a norm of x, of the attention output or of a gated activation", err);
        if (last && last->kind == ST_MATMUL && p->ops[i - 1].kind == TG_OP_MATMUL && last->in == in &&
            !last->head && !last->residual && last->n_w < 3 && o->out != TG_VAL_LOGITS) {
            last->w[last->n_w] = o->w; /* another product of the same input: the same step */
            last->out[last->n_w++] = o->out;
            return true;
        }
        be->cs[be->n_cs++] = (cstep){.kind = ST_MATMUL, .n_w = 1, .w = {o->w}, .out = {o->out}, .in = in,
                                     .norm_w = in == IN_NORM ? *norm_w : NULL, .head = o->out == TG_VAL_LOGITS};
        return true;
    }
    default:
        return cannot(o, "unknown operation", err);
    }
}

/* Compiles program p into be->cs and counts its steps. */
static bool compile(tg_backend *be, const tg_program *p, tg_error *err) {
    be->cs = calloc((size_t)p->n, sizeof *be->cs);
    be->next_mat = calloc((size_t)p->n, sizeof *be->next_mat);
    if (!be->cs || !be->next_mat) return tg_fail(err, "out of memory for the cpu backend's steps");
    const float *norm_w = NULL;
    bool own_kv = true;
    for (int i = 0; i < p->n; i++)
        if (!compile_op(be, p, i, &norm_w, &own_kv, err)) return false;
    if (!be->embed) return tg_fail(err, "the cpu backend cannot run the model: it starts with no embedding");
    be->first_mat = -1;
    for (int i = be->n_cs - 1, next = -1; i >= 0; i--) {
        be->next_mat[i] = next;
        if (be->cs[i].kind == ST_ATTEND) {
            be->n_attend++;
        } else if (be->cs[i].kind == ST_HEADS || be->cs[i].kind == ST_ROPE || be->cs[i].kind == ST_NORM_ADD) {
            be->n_rowsteps++;
        } else {
            next = i;
            be->n_mat++;
        }
        be->first_mat = next;
    }
    return true;
}

/* ---- planning a call's matrix steps ------------------------------------------------------------------------------ */

/* A matrix step of one call: its jobs, and the rows its input has. */
typedef struct {
    tg_mat_job jobs[3];
    int n_jobs, paired; /* paired = 2: a gate / up step (units are rows of both) */
    int t0, n;          /* the input's rows t0 .. n of x, or (sel) the rows sel[0 .. n) */
    const int *sel;
} mat_plan;

/* The buffer of value v and its row length. */
static float *value_of(const tg_backend *be, tg_val v, size_t *ld) {
    const tg_hparams *hp = &be->m->hp;
    const size_t qd = (size_t)hp->n_heads * (size_t)hp->head_dim, kvd = (size_t)hp->n_kv_heads * (size_t)hp->head_dim;
    switch (v) {
    case TG_VAL_Q: *ld = qd; return be->q;
    case TG_VAL_K: *ld = kvd; return be->k;
    case TG_VAL_V: *ld = kvd; return be->v;
    case TG_VAL_GATE: *ld = (size_t)hp->ffn_dim; return be->hg;
    case TG_VAL_UP: *ld = (size_t)hp->ffn_dim; return be->hu;
    case TG_VAL_T: *ld = (size_t)hp->d_model; return be->t;
    default: *ld = (size_t)hp->d_model; return be->x;
    }
}

/* Step i's jobs for the call's rows (a function of the weights and the backend's fixed buffers only, so a thread may
 * plan the next step while this one runs). */
static void plan_step(const tg_backend *be, const tg_rows *rows, int i, mat_plan *mp) {
    const cstep *st = &be->cs[i];
    const int threads = be->n_threads, n = rows->n;
    *mp = (mat_plan){.n_jobs = st->n_w, .paired = 1, .t0 = 0, .n = n};
    if (st->head) {
        const size_t vocab = (size_t)be->m->hp.vocab_size;
        if (rows->n_head > 0) {
            tg_job_init(&mp->jobs[0], st->w[0], rows->head_out, vocab, rows->n_head, threads);
            mp->n = rows->n_head;
            mp->sel = rows->head_rows;
        } else {
            mp->t0 = rows->logits_all ? 0 : n - 1;
            tg_job_init(&mp->jobs[0], st->w[0], rows->logits_all ? rows->logits_all : rows->logits_last, vocab,
                        n - mp->t0, threads);
            if (!rows->logits_all && !rows->logits_last) mp->jobs[0].units = 0;
        }
        return;
    }
    for (int j = 0; j < st->n_w; j++) {
        size_t ld;
        float *y = value_of(be, st->out[j], &ld);
        tg_job_init(&mp->jobs[j], st->w[j], y, ld, n, threads);
    }
    if (st->kind == ST_GATE_UP) {
        /* gate and up share their units: whole units of both (granules of 8 or 16, so the larger divides) */
        const int64_t gu = tg_row_granule(st->w[1], n);
        const int64_t ur = (tg_unit_rows(st->w[0], n, threads) + gu - 1) / gu * gu;
        for (int j = 0; j < 2; j++) {
            mp->jobs[j].ur = ur;
            mp->jobs[j].units = (st->w[0]->rows + ur - 1) / ur;
        }
        mp->paired = 2;
    } else if (n == 1 && st->n_w > 1) {
        tg_jobs_balance_decode(mp->jobs, st->n_w, threads);
    }
}

/* ---- running a call ---------------------------------------------------------------------------------------------- */

/* What a thread computes, privately, before its first unit of a matrix step: the step's input, into its own buffers.
 * A thread prepares only once it holds a unit, so it never reads shared data that a later step may be rewriting. */
typedef struct {
    const tg_backend *be;
    const tg_rows *rows;
    thread_buf *tb;
    const cstep *st;
    const mat_plan *mp;
} prep_ctx;

static tg_act prepare(const prep_ctx *c) {
    const tg_backend *be = c->be;
    const tg_hparams *hp = &be->m->hp;
    const mat_plan *mp = c->mp;
    tg_dtype types[3];
    for (int j = 0; j < c->st->n_w; j++) types[j] = c->st->w[j]->type;
    const float *in = c->tb->xb;
    int64_t n = mp->n, cols = hp->d_model;
    if (c->st->in == IN_NORM) {
        /* norm(x) rows t0 .. n (or the rows sel[]), packed from t0 */
        const int64_t d = hp->d_model;
        if (mp->sel) {
            for (int i = 0; i < mp->n; i++)
                tg_rmsnorm(c->tb->xb + i * d, be->x + (int64_t)mp->sel[i] * d, c->st->norm_w, d, hp->norm_eps);
        } else {
            for (int t = mp->t0; t < mp->n; t++)
                tg_rmsnorm(c->tb->xb + t * d, be->x + t * d, c->st->norm_w, d, hp->norm_eps);
            in = c->tb->xb + mp->t0 * d;
            n = mp->n - mp->t0;
        }
    } else if (c->st->in == IN_ATT) {
        cols = (int64_t)hp->n_heads * hp->head_dim;
        tg_attn_combine(&be->attn, c->rows, mp->n, c->tb->xb);
    } else {
        cols = hp->ffn_dim;
        in = be->hg;
    }
    /* every form the step's weights take: each weight multiplies the input quantised as for its own type (as
     * llama.cpp rounds it) */
    tg_act a = tg_act_prepare_types(types, c->st->n_w, in, n, cols, c->tb->xq);
    a.wide = c->tb->wide;
    a.wide_bytes = c->tb->wide_bytes;
    return a;
}

/* The units of a matrix step this thread can claim; with `residual`, each unit's result is added to y instead of
 * stored (through tmp [a.n, unit rows], so residual jobs must have at most d_model rows). A gate / up step computes
 * both products of a unit's rows, then the gated activation on them. Ends the step. */
static void run_matrix(tg_team *tm, const prep_ctx *c, float *tmp) {
    const mat_plan *mp = c->mp;
    const tg_mat_job *jobs = mp->jobs;
    const int64_t total = mp->paired > 1 ? jobs[0].units : tg_jobs_total(jobs, mp->n_jobs);
    tg_act a = {0};
    bool ready = false;
    for (int64_t u; (u = tg_claim_share(tm, total)) >= 0;) {
        if (!ready) {
            a = prepare(c);
            ready = true;
        }
        int j;
        int64_t r0, r1;
        tg_job_unit(jobs, mp->paired > 1 ? 1 : mp->n_jobs, u, &j, &r0, &r1);
        const tg_mat_job *jb = &jobs[j];
        if (mp->paired > 1) {
            const size_t ff = jb->ldy;
            tg_matmul_rows(jobs[0].w, &a, r0, r1, jobs[0].y + r0, ff);
            tg_matmul_rows(jobs[1].w, &a, r0, r1, jobs[1].y + r0, ff);
            for (int64_t t = 0; t < a.n; t++) {
                float *g = jobs[0].y + (size_t)t * ff + r0;
                const float *up = jobs[1].y + (size_t)t * ff + r0;
                if (c->st->glu == TG_GLU_GELU_TANH) tg_geglu_tanh(g, up, r1 - r0);
                else tg_swiglu(g, up, r1 - r0);
            }
        } else if (!c->st->residual) {
            tg_matmul_rows(jb->w, &a, r0, r1, jb->y + r0, jb->ldy);
            const float *bias = c->st->bias[j];
            for (int64_t t = 0; bias && t < a.n; t++) tg_add_bias(jb->y + (size_t)t * jb->ldy + r0, bias + r0, r1 - r0);
            for (int64_t t = 0; c->st->cap > 0.0f && t < a.n; t++)
                tg_softcap(jb->y + (size_t)t * jb->ldy + r0, c->st->cap, r1 - r0);
        } else {
            const int64_t nr = r1 - r0;
            tg_matmul_rows(jb->w, &a, r0, r1, tmp, (size_t)nr);
            for (int64_t t = 0; t < a.n; t++) {
                float *yt = jb->y + (size_t)t * jb->ldy + (size_t)r0;
                const float *st = tmp + (size_t)t * (size_t)nr;
                for (int64_t i = 0; i < nr; i++) yt[i] += st[i];
            }
        }
        tg_finish(tm);
    }
    tg_matrix_step_end(tm, total);
}

/* A HEADS step: each row's heads of each value normalised, a row a unit. Ends the step. */
static void run_heads(tg_team *tm, const tg_backend *be, const cstep *st, int n) {
    const tg_hparams *hp = &be->m->hp;
    for (int64_t t; (t = tg_claim(tm, n)) >= 0;) {
        for (int j = 0; j < st->n_w; j++) {
            size_t ld;
            float *y = value_of(be, st->out[j], &ld);
            tg_rmsnorm_heads(y + (size_t)t * ld, (int64_t)ld / hp->head_dim, hp->head_dim, st->hnorm[j], hp->norm_eps);
        }
        tg_finish(tm);
    }
    tg_step_end(tm, n);
}

/* A ROPE step: each row's queries (and keys) rotated at the row's position, the queries scaled, a row a unit (cos /
 * sin in the thread's work space). Ends the step. */
static void run_rope(tg_team *tm, const tg_backend *be, const cstep *st, const tg_rows *rows, float *work) {
    const tg_hparams *hp = &be->m->hp;
    const int rd = hp->rope_dims, hd = hp->head_dim;
    const size_t qd = (size_t)hp->n_heads * (size_t)hd, kvd = (size_t)hp->n_kv_heads * (size_t)hd;
    float *c = work, *s = work + rd / 2;
    for (int64_t t; (t = tg_claim(tm, rows->n)) >= 0;) {
        float *q = be->q + (size_t)t * qd, *k = be->k + (size_t)t * kvd;
        if (st->freq) {
            const bool long_freq = st->freq_long && rows->pos[t] >= st->long_from;
            tg_rope_angles_freqs(rd, rows->pos[t], long_freq ? st->freq_long : st->freq, c, s);
            for (int i = 0; st->rope_mul != 1.0f && i < rd / 2; i++) {
                c[i] *= st->rope_mul;
                s[i] *= st->rope_mul;
            }
            tg_rope_heads(q, hp->n_heads, hd, rd, c, s, hp->rope_style);
            if (st->own_kv) tg_rope_heads(k, hp->n_kv_heads, hd, rd, c, s, hp->rope_style);
        }
        if (st->qf != 1.0f) tg_scale_f32(q, st->qf, (int64_t)qd);
        tg_finish(tm);
    }
    tg_step_end(tm, rows->n);
}

/* A NORM_ADD step: x += norm(t) * norm_w on each row, a row a unit (the norm in the thread's tmp row). Ends the
 * step. */
static void run_norm_add(tg_team *tm, const tg_backend *be, const cstep *st, int n, float *tmp) {
    const int64_t d = be->m->hp.d_model;
    for (int64_t t; (t = tg_claim(tm, n)) >= 0;) {
        tg_rmsnorm(tmp, be->t + t * d, st->norm_w, d, be->m->hp.norm_eps);
        float *x = be->x + t * d;
        for (int64_t i = 0; i < d; i++) x[i] += tmp[i];
        tg_finish(tm);
    }
    tg_step_end(tm, n);
}

typedef struct {
    tg_backend *be;
    const tg_rows *rows;
} cpu_call;

/* One member's walk through the call's steps (the pool runs it on every thread). */
static void run_thread(void *arg, int thread) {
    const cpu_call *c = arg;
    tg_backend *be = c->be;
    const tg_rows *rows = c->rows;
    thread_buf *tb = &be->tb[thread];
    tg_team tm = {.steps = be->steps, .shares = be->shares, .thread = thread, .threads = be->n_threads};
    const bool decoding = rows->n == 1; /* a thread warms its next share at each step's end */
    mat_plan plans[2];
    int cur = 0;
    if (be->first_mat >= 0) plan_step(be, rows, be->first_mat, &plans[cur]);
    for (int i = 0; i < be->n_cs; i++) {
        const cstep *st = &be->cs[i];
        if (st->kind == ST_ATTEND) {
            tg_attn_layer(&tm, &be->attn, rows, st->layer, st->own_kv, be->q, be->k, be->v, tb->work, tb->gwork);
            continue;
        }
        if (st->kind == ST_HEADS) {
            run_heads(&tm, be, st, rows->n);
            continue;
        }
        if (st->kind == ST_ROPE) {
            run_rope(&tm, be, st, rows, tb->work);
            continue;
        }
        if (st->kind == ST_NORM_ADD) {
            run_norm_add(&tm, be, st, rows->n, tb->tmp);
            continue;
        }
        const int next = be->next_mat[i];
        if (next >= 0) {
            plan_step(be, rows, next, &plans[!cur]);
            if (decoding) tg_warm_jobs(&tm, plans[!cur].jobs, plans[!cur].n_jobs, plans[!cur].paired);
        }
        const prep_ctx pc = {be, rows, tb, st, &plans[cur]};
        run_matrix(&tm, &pc, tb->tmp);
        cur = !cur;
    }
}

static void cpu_run(tg_backend *be, const tg_rows *rows) {
    const int64_t d = be->m->hp.d_model;
    for (int t = 0; t < rows->n; t++) {
        tg_tensor_get_row(be->embed, rows->ids[t], be->x + t * d);
        if (be->embed_scale != 0.0f) tg_scale_f32(be->x + t * d, be->embed_scale, d);
    }
    tg_steps_reset(be->steps, steps_of(be, rows->n_rounds), be->shares, be->n_mat * be->n_threads);
    cpu_call c = {be, rows};
    tg_pool_run(be->pool, run_thread, &c);
    if (rows->meter && be->attn.mt.mass) tg_attn_meter_sum(&be->attn, rows->cache[0], rows->n);
}

/* ---- the backend's life ------------------------------------------------------------------------------------------ */

static float *alloc_rows(int rows, int64_t cols) { return calloc((size_t)rows * (size_t)cols, sizeof(float)); }

static void cpu_destroy(tg_backend *be) {
    if (!be) return;
    for (int i = 0; be->tb && i < be->n_threads; i++) {
        void *bufs[] = {be->tb[i].xb, be->tb[i].xq, be->tb[i].tmp, be->tb[i].work, be->tb[i].gwork, be->tb[i].wide};
        for (size_t j = 0; j < sizeof bufs / sizeof bufs[0]; j++) free(bufs[j]);
    }
    void *bufs[] = {be->tb,  be->cs, be->next_mat, be->x,     be->q,     be->k,
                    be->v,   be->hg, be->hu,       be->t,     be->steps, be->shares};
    for (size_t j = 0; j < sizeof bufs / sizeof bufs[0]; j++) free(bufs[j]);
    tg_attn_free(&be->attn);
    tg_pool_free(be->pool);
    free(be);
}

/* Every thread's private buffers; false when memory runs out. */
static bool alloc_threads(tg_backend *be, const tg_program *p) {
    const int64_t d = be->m->hp.d_model;
    const size_t wide_bytes = tg_wide_scratch_bytes(p, be->max_rows, be->n_threads);
    const size_t xq_bytes = tg_act_scratch_bytes(be->max_rows, be->max_in);
    const size_t work = be->attn.work_floats, gwork = be->attn.gwork_floats;
    be->tb = calloc((size_t)be->n_threads, sizeof *be->tb);
    bool ok = be->tb != NULL;
    for (int i = 0; ok && i < be->n_threads; i++) {
        thread_buf *b = &be->tb[i];
        b->xb = alloc_rows(be->max_rows, be->max_in);
        b->xq = xq_bytes ? malloc(xq_bytes) : NULL;
        b->tmp = alloc_rows(be->max_rows, d);
        b->work = calloc(work, sizeof(float));
        b->gwork = gwork ? malloc(gwork * sizeof(float)) : NULL;
        b->wide_bytes = wide_bytes;
        b->wide = wide_bytes ? aligned_alloc(64, wide_bytes) : NULL;
        ok = b->xb && (b->xq || !xq_bytes) && b->tmp && b->work && (b->gwork || !gwork) && (b->wide || !wide_bytes);
    }
    return ok;
}

static tg_backend *cpu_create(const struct tg_model *m, const tg_program *p, const tg_kvcache *cache, int max_rows,
                              int n_threads, tg_error *err) {
    const tg_hparams *hp = &m->hp;
    tg_backend *be = calloc(1, sizeof *be);
    if (be) {
        be->m = m;
        be->max_rows = max_rows;
    }
    bool ok = be ? compile(be, p, err) && (be->pool = tg_pool_new(n_threads, err)) != NULL
                 : tg_fail(err, "out of memory");
    if (ok) {
        be->n_threads = tg_pool_threads(be->pool);
        const int64_t qd = (int64_t)hp->n_heads * hp->head_dim, kvd = (int64_t)hp->n_kv_heads * hp->head_dim;
        be->max_in = hp->d_model > qd ? hp->d_model : qd;
        if (hp->ffn_dim > be->max_in) be->max_in = hp->ffn_dim;
        be->x = alloc_rows(max_rows, hp->d_model);
        be->q = alloc_rows(max_rows, qd);
        be->k = alloc_rows(max_rows, kvd);
        be->v = alloc_rows(max_rows, kvd);
        be->hg = alloc_rows(max_rows, hp->ffn_dim);
        be->hu = alloc_rows(max_rows, hp->ffn_dim);
        be->t = alloc_rows(max_rows, hp->d_model);
        be->steps = calloc((size_t)steps_of(be, max_rows), sizeof *be->steps);
        be->shares = aligned_alloc(_Alignof(tg_share_ctr), (size_t)(be->n_mat > 0 ? be->n_mat : 1) *
                                                               (size_t)be->n_threads * sizeof *be->shares);
        ok = (be->x && be->q && be->k && be->v && be->hg && be->hu && be->t && be->steps && be->shares &&
              tg_attn_init(&be->attn, hp, cache, max_rows) && alloc_threads(be, p)) ||
             tg_fail(err, "out of memory for the forward pass scratch (%d tokens, %d threads)", max_rows, n_threads);
    }
    if (ok) return be;
    cpu_destroy(be);
    return NULL;
}

static int cpu_threads(const tg_backend *be) { return be->n_threads; }

static bool cpu_fits(const tg_backend *be, const tg_kvcache *cache) {
    return tg_kvcache_work_floats(cache) <= be->attn.work_floats;
}

static bool cpu_meter_on(tg_backend *be, tg_error *err) {
    return tg_attn_meter_on(&be->attn) || tg_fail(err, "out of memory for the attention meter");
}

static bool cpu_meter(const tg_backend *be, tg_attention_stats *out) { return tg_attn_meter(&be->attn, out); }

const tg_backend_i tg_backend_cpu = {
    .name = "cpu",
    .create = cpu_create,
    .destroy = cpu_destroy,
    .threads = cpu_threads,
    .fits = cpu_fits,
    .run = cpu_run,
    .meter_on = cpu_meter_on,
    .meter = cpu_meter,
};
