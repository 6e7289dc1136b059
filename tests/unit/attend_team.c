/* attend_team.c — test support: whole-query attention on a tg_pool team (attend_team.h). */
#include "attend_team.h"

#include <stdio.h>
#include <stdlib.h>

#include "kvcache/cache_internal.h"
#include "util/thread_pool.h"

typedef struct {
    const tg_kvcache *c;
    int layer;
    int64_t pos;
    const float *q_rot;
    float *out, *parts, *work;
    int n_kv_heads, gq, head_dim, n_split, n_threads;
    size_t work_floats, part_floats;
} attend_job;

/* Member `thread` takes kv-heads thread, thread + n_threads, ...: their pieces, then their combination. */
static void attend_member(void *arg, int thread) {
    const attend_job *j = arg;
    float *work = j->work + (size_t)thread * j->work_floats;
    for (int h = thread; h < j->n_kv_heads; h += j->n_threads) {
        float *parts = j->parts + (size_t)h * TG_ATTN_MAX_SPLITS * j->part_floats;
        for (int s = 0; s < j->n_split; s++)
            tg_kvcache_attend_piece(j->c, j->layer, j->pos, j->q_rot, h, s, j->n_split,
                                    parts + (size_t)s * j->part_floats, work);
        tg_kvcache_attend_combine(j->c, parts, j->n_split, j->out + (int64_t)h * j->gq * j->head_dim);
    }
}

static void *must_alloc(size_t n) {
    void *p = calloc(n ? n : 1, 1);
    if (!p) {
        fprintf(stderr, "attend_team: out of memory\n");
        abort();
    }
    return p;
}

void test_attend(tg_kvcache *c, int layer, int64_t pos, const float *q, float *out, int n_threads) {
    tg_error err = {0};
    tg_pool *pool = tg_pool_new(n_threads > 1 ? n_threads : 1, &err);
    if (!pool) {
        fprintf(stderr, "attend_team: %s\n", err.msg);
        abort();
    }
    attend_job j = {.c = c, .layer = layer, .pos = pos, .out = out, .n_threads = tg_pool_threads(pool)};
    const size_t qf = (size_t)c->g.n_heads * (size_t)c->g.head_dim;
    j.head_dim = c->g.head_dim;
    j.n_kv_heads = c->g.n_kv_heads;
    j.gq = c->g.n_heads / c->g.n_kv_heads;
    j.work_floats = tg_kvcache_work_floats(c);
    j.part_floats = tg_kvcache_part_floats(c);
    float *q_rot = must_alloc(qf * sizeof(float));
    j.parts = must_alloc((size_t)j.n_kv_heads * TG_ATTN_MAX_SPLITS * j.part_floats * sizeof(float));
    j.work = must_alloc((size_t)j.n_threads * j.work_floats * sizeof(float));
    tg_kvcache_query(c, layer, pos, q, q_rot);
    j.q_rot = q_rot;
    j.n_split = tg_kvcache_attend_splits(c, layer, pos);
    tg_pool_run(pool, attend_member, &j);
    free(q_rot);
    free(j.parts);
    free(j.work);
    tg_pool_free(pool);
}
