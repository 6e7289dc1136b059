/* attention.c — the CPU backend's attention orchestration (attention.h): rounds of appends and pieces over each
 * row's cache, grouped prefill pieces, the combination of pieces, and the attention-sink meter. */
#include "forward/attention.h"

#include <stdlib.h>

_Static_assert(TG_MASS_RANGES == TG_ATTN_RANGES, "the meter's ranges: kvcache.h and tinygpt.h agree");

/* Frees the meter's buffers; the meter is then off. */
static void meter_free(tg_attn *a) {
    tg_attn_meter_bufs *mt = &a->mt;
    void *bufs[] = {mt->mass, mt->mass_vis, mt->mass_splits, mt->mass_share, mt->share_sum, mt->queries, mt->skipped};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    *mt = (tg_attn_meter_bufs){0};
}

bool tg_attn_init(tg_attn *a, const tg_hparams *hp, const tg_kvcache *cache, int max_rows) {
    *a = (tg_attn){.hp = hp, .max_rows = max_rows};
    a->part_floats = tg_kvcache_part_floats(cache);
    a->parts = calloc((size_t)max_rows * (size_t)hp->n_kv_heads * TG_ATTN_MAX_SPLITS * a->part_floats, sizeof(float));
    a->splits = calloc((size_t)max_rows, sizeof *a->splits);
    a->pending = calloc((size_t)max_rows, sizeof *a->pending);
    a->work_floats = tg_kvcache_work_floats(cache);
    a->group_tokens = max_rows > 1 ? tg_kvcache_group_tokens(cache) : 0;
    if (a->group_tokens > max_rows) a->group_tokens = max_rows;
    a->gwork_floats = a->group_tokens > 0 ? tg_kvcache_group_work_floats(cache, a->group_tokens) : 0;
    const size_t rounds = (size_t)hp->n_layers * (size_t)max_rows;
    a->round_group = calloc(rounds, sizeof *a->round_group);
    a->round_defers = calloc(rounds, sizeof *a->round_defers);
    a->round_splits = calloc(rounds, sizeof *a->round_splits);
    return a->parts && a->splits && a->pending && a->round_group && a->round_defers && a->round_splits;
}

void tg_attn_free(tg_attn *a) {
    void *bufs[] = {a->parts, a->splits, a->pending, a->round_group, a->round_defers, a->round_splits};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    meter_free(a);
}

/* Whether round k's pieces (after its appends) can run grouped: its rows are consecutive tokens of one cache (a
 * prefill chunk), the cache's grouped pieces take them and fit the work space, and the meter is off. */
static bool round_grouped(const tg_attn *a, const tg_rows *rows, int l, int k) {
    const int i0 = rows->round_start[k], n = rows->round_start[k + 1] - i0;
    if (a->group_tokens < 1 || n < 2 || a->mt.mass) return false;
    const int t0 = rows->round_rows[i0];
    tg_kvcache *cache = rows->cache[t0];
    for (int i = 1; i < n; i++) {
        const int t = rows->round_rows[i0 + i];
        if (t != t0 + i || rows->cache[t] != cache || rows->pos[t] != rows->pos[t0] + i) return false;
    }
    return tg_kvcache_group_work_floats(cache, a->group_tokens) <= a->gwork_floats &&
           tg_kvcache_group_tokens(cache) == a->group_tokens &&
           tg_kvcache_attend_group_ok(cache, l, rows->pos[t0], n);
}

/* Round k's rows, each through its own cache at its own position: appends their K/V (when the layer holds its own),
 * rotates their queries, records their shares: a step of one unit, the rows in order. */
static void attn_prepare(tg_team *tm, tg_attn *a, const tg_rows *rows, int l, bool own_kv, int k, float *q,
                         const float *k_new, const float *v) {
    if (tg_claim(tm, 1) == 0) {
        const tg_hparams *hp = a->hp;
        const int64_t qd = (int64_t)hp->n_heads * hp->head_dim, kvd = (int64_t)hp->n_kv_heads * hp->head_dim;
        bool defers = false;
        int most = 1;
        for (int i = rows->round_start[k]; i < rows->round_start[k + 1]; i++) {
            const int t = rows->round_rows[i];
            tg_kvcache *cache = rows->cache[t];
            a->pending[t] = 0;
            if (own_kv) {
                const int m = tg_kvcache_append_start(cache, l, rows->pos[t], k_new + t * kvd, v + t * kvd,
                                                      rows->alone[t]);
                a->pending[t] = m > 0 ? m : 0;
                defers |= a->pending[t] != 0;
            }
            tg_kvcache_query(cache, l, rows->pos[t], q + t * qd, q + t * qd);
            a->splits[t] = tg_kvcache_attend_splits(cache, l, rows->pos[t]);
            if (a->splits[t] > most) most = a->splits[t];
        }
        const size_t lk = (size_t)l * (size_t)a->max_rows + (size_t)k;
        a->round_splits[lk] = most;
        a->round_group[lk] = round_grouped(a, rows, l, k);
        a->round_defers[lk] = defers;
        tg_finish(tm);
    }
    tg_step_end(tm, 1);
}

/* The meter's record of a piece that just ran (its scores still in work). */
static void meter_piece(tg_attn *a, const tg_kvcache *cache, int l, int t, int64_t pos, int h, int s,
                        const float *part, const float *work) {
    const tg_hparams *hp = a->hp;
    const size_t gq = (size_t)(hp->n_heads / hp->n_kv_heads), lt = (size_t)l * (size_t)a->max_rows + (size_t)t;
    float *mass = a->mt.mass + ((lt * (size_t)hp->n_kv_heads + (size_t)h) * TG_ATTN_MAX_SPLITS + (size_t)s) * gq *
                                TG_MASS_FLOATS;
    const int64_t vis = tg_kvcache_piece_mass(cache, l, pos + t, h, s, a->splits[t], part, work, mass);
    if (s == 0 && h == 0) {
        a->mt.mass_vis[lt] = vis;
        a->mt.mass_splits[lt] = a->splits[t];
    }
}

/* The meter's sums over the n tokens of the call that just ended. */
void tg_attn_meter_sum(tg_attn *a, const tg_kvcache *cache, int n) {
    const tg_hparams *hp = a->hp;
    const int H = hp->n_kv_heads, gq = hp->n_heads / hp->n_kv_heads;
    for (int l = 0; l < hp->n_layers; l++)
        for (int t = 0; t < n; t++) {
            const size_t lt = (size_t)l * (size_t)a->max_rows + (size_t)t;
            if (a->mt.mass_vis[lt] < 2 * TG_MASS_NEWEST) {
                a->mt.skipped[l]++;
                continue;
            }
            a->mt.queries[l]++;
            for (int h = 0; h < H; h++) {
                const float *mass = a->mt.mass + (lt * (size_t)H + (size_t)h) * TG_ATTN_MAX_SPLITS * (size_t)gq * TG_MASS_FLOATS;
                tg_kvcache_mass_combine(cache, mass, a->mt.mass_splits[lt], a->mt.mass_share);
                double *sum = a->mt.share_sum + ((size_t)l * (size_t)hp->n_heads + (size_t)h * (size_t)gq) * TG_MASS_RANGES;
                for (int i = 0; i < gq * TG_MASS_RANGES; i++) sum[i] += a->mt.mass_share[i];
            }
        }
}

/* The pieces of a grouped round k: units (group of group_tokens rows, kv-head). */
static void attn_groups(tg_team *tm, tg_attn *a, const tg_rows *rows, int l, int k, const float *q, float *gwork) {
    const tg_hparams *hp = a->hp;
    const int H = hp->n_kv_heads, G = a->group_tokens;
    const int64_t qd = (int64_t)hp->n_heads * hp->head_dim;
    const int i0 = rows->round_start[k], n = rows->round_start[k + 1] - i0;
    const int64_t units = (int64_t)((n + G - 1) / G) * H;
    const size_t row_parts = (size_t)H * TG_ATTN_MAX_SPLITS * a->part_floats;
    for (int64_t u; (u = tg_claim(tm, units)) >= 0;) {
        const int g = (int)(u / H), h = (int)(u % H);
        const int t = rows->round_rows[i0 + g * G], nq = n - g * G < G ? n - g * G : G;
        float *part = a->parts + (size_t)t * row_parts + (size_t)h * TG_ATTN_MAX_SPLITS * a->part_floats;
        tg_kvcache_attend_group(rows->cache[t], l, rows->pos[t], nq, q + t * qd, (size_t)qd, h, part, row_parts,
                                gwork);
        tg_finish(tm);
    }
    tg_step_end(tm, units);
}

/* The pieces of round k's rows: units (row, kv-head, share), as many shares per row and kv-head as the round's row
 * with the most has (a decode token's shares of a depth-2048 cache: 4 units a kv-head, not TG_ATTN_MAX_SPLITS, each
 * empty one a claim on the counter both threads take from). A row's pending stores (its kv-heads' KIVI rows of the
 * new token, a->pending) are made by the unit of the kv-head's last share, before it reads them, while the other
 * units attend to older tokens; in a round that has such stores the units run last shares first (share j from the
 * last, row, kv-head), so that no unit waits for them at the end. */
static void attn_pieces(tg_team *tm, tg_attn *a, const tg_rows *rows, int l, int k, const float *q, const float *v,
                        float *work, float *gwork) {
    const tg_hparams *hp = a->hp;
    const int H = hp->n_kv_heads;
    const int64_t qd = (int64_t)hp->n_heads * hp->head_dim, kvd = (int64_t)hp->n_kv_heads * hp->head_dim;
    const int i0 = rows->round_start[k], n_rows = rows->round_start[k + 1] - i0;
    const size_t lk = (size_t)l * (size_t)a->max_rows + (size_t)k;
    if (a->round_group[lk]) {
        attn_groups(tm, a, rows, l, k, q, gwork);
        return;
    }
    const int S = a->round_splits[lk]; /* shares per (row, kv-head) handed out: a row with fewer skips the rest */
    const int64_t units = (int64_t)n_rows * H * S;
    for (int64_t u; (u = tg_claim(tm, units)) >= 0;) {
        int t, h, j, s;
        if (a->round_defers[lk]) { /* the last shares first: they store what the others need not wait for */
            const int rh = (int)(u % ((int64_t)n_rows * H));
            j = (int)(u / ((int64_t)n_rows * H));
            t = rows->round_rows[i0 + rh / H];
            h = rh % H;
            s = a->splits[t] - 1 - j;
        } else { /* row, kv-head, share in order */
            t = rows->round_rows[i0 + (int)(u / ((int64_t)H * S))];
            h = (int)(u / S % H);
            s = (int)(u % S);
            j = a->splits[t] - 1 - s;
        }
        if (s >= 0 && s < a->splits[t]) {
            if (j == 0 && a->pending[t])
                tg_kvcache_append_head(rows->cache[t], l, h, a->pending[t], v + t * kvd, (uint8_t *)work);
            float *part =
                a->parts + (((size_t)t * (size_t)H + (size_t)h) * TG_ATTN_MAX_SPLITS + (size_t)s) * a->part_floats;
            tg_kvcache_attend_piece(rows->cache[t], l, rows->pos[t], q + t * qd, h, s, a->splits[t], part,
                                    work);
            if (a->mt.mass) meter_piece(a, rows->cache[t], l, t, rows->pos[t] - t, h, s, part, work);
        }
        tg_finish(tm);
    }
    tg_step_end(tm, units);
}

void tg_attn_combine(const tg_attn *a, const tg_rows *rows, int n, float *out) {
    const tg_hparams *hp = a->hp;
    const int H = hp->n_kv_heads, gq = hp->n_heads / hp->n_kv_heads;
    const int64_t D = hp->head_dim, qd = (int64_t)hp->n_heads * D;
    for (int t = 0; t < n; t++)
        for (int h = 0; h < H; h++)
            tg_kvcache_attend_combine(rows->cache[t],
                                      a->parts + ((size_t)t * (size_t)H + (size_t)h) * TG_ATTN_MAX_SPLITS * a->part_floats,
                                      a->splits[t], out + t * qd + (int64_t)h * gq * D);
}

void tg_attn_layer(tg_team *tm, tg_attn *a, const tg_rows *rows, int l, bool own_kv, float *q, const float *k,
                   const float *v, float *work, float *gwork) {
    for (int r = 0; r < rows->n_rounds; r++) {
        attn_prepare(tm, a, rows, l, own_kv, r, q, k, v);
        attn_pieces(tm, a, rows, l, r, q, v, work, gwork);
    }
}

bool tg_attn_meter_on(tg_attn *a) {
    if (a->mt.mass) return true;
    const tg_hparams *hp = a->hp;
    const size_t L = (size_t)hp->n_layers, T = (size_t)a->max_rows, gq = (size_t)(hp->n_heads / hp->n_kv_heads);
    a->mt.mass = calloc(L * T * (size_t)hp->n_kv_heads * TG_ATTN_MAX_SPLITS * gq * TG_MASS_FLOATS, sizeof(float));
    a->mt.mass_vis = calloc(L * T, sizeof *a->mt.mass_vis);
    a->mt.mass_splits = calloc(L * T, sizeof *a->mt.mass_splits);
    a->mt.mass_share = calloc(gq * TG_MASS_RANGES, sizeof *a->mt.mass_share);
    a->mt.share_sum = calloc(L * (size_t)hp->n_heads * TG_MASS_RANGES, sizeof *a->mt.share_sum);
    a->mt.queries = calloc(L, sizeof *a->mt.queries);
    a->mt.skipped = calloc(L, sizeof *a->mt.skipped);
    if (a->mt.mass && a->mt.mass_vis && a->mt.mass_splits && a->mt.mass_share && a->mt.share_sum && a->mt.queries && a->mt.skipped)
        return true;
    meter_free(a);
    return false;
}

bool tg_attn_meter(const tg_attn *a, tg_attention_stats *out) {
    *out = (tg_attention_stats){0};
    if (!a->mt.mass) return false;
    out->n_layers = a->hp->n_layers;
    out->n_heads = a->hp->n_heads;
    out->share_sum = a->mt.share_sum;
    out->queries = a->mt.queries;
    out->skipped = a->mt.skipped;
    return true;
}

