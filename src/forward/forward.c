/* forward.c — the forward pass's front (forward.h): the model program (program.h) built once, the call's rows laid
 * out (each row's token, cache, position and attention round; the rows whose logits are wanted), and the program run
 * on a backend (backend.h: the CPU's, or the Vulkan one that tg_forward_new_on's device names). Nothing here knows
 * how an operation runs.
 *
 * Rounds: within a call, the attention of a round's rows comes after all of that round's appends. A chunk through a
 * cache where appending a later token could change what an earlier one sees (KIVI groups flushed from the residual,
 * StreamingLLM eviction) puts one row in each round, so a chunk computes exactly what decoding its tokens one at a
 * time computes; any other chunk is one round. */
#include "forward/forward.h"

#include <stdlib.h>
#include <string.h>

#include "forward/backend.h"
#include "forward/program.h"
#include "util/error.h"

struct tg_forward {
    const struct tg_model *m;
    int max_chunk;
    tg_program program;
    const tg_backend_i *be_i;
    tg_backend *be;
    /* one call's rows: each row's token, cache and position, the rows of each attention round, the rows whose logits
     * go to the head (a batch of segments) */
    int32_t *ids;           /* [max_chunk] */
    tg_kvcache **row_cache; /* [max_chunk] */
    int64_t *row_pos;       /* [max_chunk] */
    bool *alone;            /* [max_chunk] whether a row is its cache's only row in its round (its stores may wait) */
    int *round_rows;        /* [max_chunk] rows in round order */
    int *round_start;       /* [max_chunk + 1] round k = round_rows[round_start[k] .. round_start[k + 1]) */
    int *head_rows;         /* [max_chunk] rows whose logits are wanted, in segment order */
    float *head_out;        /* [max_chunk, vocab] their logits (a batch; a chunk writes to the caller's buffer) */
};

/* Whether tg_forward_new can start (err filled when not). */
static bool args_ok(const struct tg_model *m, const tg_kvcache *cache, int max_chunk, tg_error *err) {
    if (!m || !m->has_weights) return tg_fail(err, "the model has no weights (a vocab-only file can tokenise but not run)");
    if (max_chunk < 1) return tg_fail(err, "chunk size %d must be positive", max_chunk);
    return cache || tg_fail(err, "no KV cache");
}

/* The backend that `device` names (forward.h: tg_forward_new_on), created into f; false (err filled) when it fails. */
static bool create_backend(tg_forward *f, const tg_kvcache *cache, int n_threads, const char *device, tg_error *err) {
    const bool auto_dev = device && strcmp(device, "auto") == 0;
    if (device && strncmp(device, "vulkan", 6) == 0) {
        const char *rest = device + 6;
        char *end = NULL;
        const long n = *rest == ':' ? strtol(rest + 1, &end, 10) : 0;
        if (*rest && (*rest != ':' || end == rest + 1 || *end || n < 0 || n > 999))
            return tg_fail(err, "unknown device '%s' (cpu, vulkan, vulkan:N or auto)", device);
        f->be_i = &tg_backend_vulkan;
        f->be = tg_backend_vulkan_create(f->m, &f->program, cache, f->max_chunk, (int)n, err);
        return f->be != NULL;
    }
    if (device && !auto_dev && strcmp(device, "cpu") != 0)
        return tg_fail(err, "unknown device '%s' (cpu, vulkan, vulkan:N or auto)", device);
    if (auto_dev && (f->be = tg_backend_vulkan_create(f->m, &f->program, cache, f->max_chunk, 0, NULL))) {
        f->be_i = &tg_backend_vulkan;
        return true;
    }
    f->be_i = &tg_backend_cpu;
    f->be = f->be_i->create(f->m, &f->program, cache, f->max_chunk, n_threads, err);
    return f->be != NULL;
}

tg_forward *tg_forward_new(const struct tg_model *m, const tg_kvcache *cache, int max_chunk, int n_threads,
                           tg_error *err) {
    return tg_forward_new_on(m, cache, max_chunk, n_threads, NULL, err);
}

tg_forward *tg_forward_new_on(const struct tg_model *m, const tg_kvcache *cache, int max_chunk, int n_threads,
                              const char *device, tg_error *err) {
    if (!args_ok(m, cache, max_chunk, err)) return NULL;
    tg_forward *f = calloc(1, sizeof *f);
    bool ok = f && tg_program_build(&f->program, m, err);
    if (ok) {
        f->m = m;
        f->max_chunk = max_chunk;
        ok = create_backend(f, cache, n_threads, device, err);
    }
    if (ok) {
        const size_t n = (size_t)max_chunk;
        f->ids = calloc(n, sizeof *f->ids);
        f->row_cache = calloc(n, sizeof *f->row_cache);
        f->row_pos = calloc(n, sizeof *f->row_pos);
        f->alone = calloc(n, sizeof *f->alone);
        f->round_rows = calloc(n, sizeof *f->round_rows);
        f->round_start = calloc(n + 1, sizeof *f->round_start);
        f->head_rows = calloc(n, sizeof *f->head_rows);
        f->head_out = calloc(n * (size_t)m->hp.vocab_size, sizeof(float));
        ok = (f->ids && f->row_cache && f->row_pos && f->alone && f->round_rows && f->round_start && f->head_rows &&
              f->head_out) ||
             tg_fail(err, "out of memory for the forward pass scratch (%d tokens, %d threads)", max_chunk, n_threads);
    } else if (!f) {
        tg_fail(err, "out of memory");
    }
    if (ok) return f;
    tg_forward_free(f);
    return NULL;
}

void tg_forward_free(tg_forward *f) {
    if (!f) return;
    if (f->be) f->be_i->destroy(f->be);
    tg_program_free(&f->program);
    void *bufs[] = {f->ids, f->row_cache, f->row_pos, f->alone, f->round_rows, f->round_start, f->head_rows, f->head_out};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(f);
}

int tg_forward_threads(const tg_forward *f) { return f->be_i->threads(f->be); }

int tg_forward_max_rows(const tg_forward *f) { return f->max_chunk; }

bool tg_forward_meter_on(tg_forward *f, tg_error *err) { return f->be_i->meter_on(f->be, err); }

bool tg_forward_meter(const tg_forward *f, tg_attention_stats *out) { return f->be_i->meter(f->be, out); }

bool tg_forward_fits(const tg_forward *f, const tg_kvcache *cache) { return f->be_i->fits(f->be, cache); }

void tg_forward_release(tg_forward *f, const tg_kvcache *cache) {
    if (f->be_i->release) f->be_i->release(f->be, cache);
}

bool tg_forward_device_memory(const tg_forward *f, tg_backend_memory *out) {
    memset(out, 0, sizeof *out);
    if (!f->be_i->memory) return false;
    f->be_i->memory(f->be, out);
    return true;
}

/* Lays out the rows of segs[0 .. n_segs) (which fit in max_chunk): each row's token, cache and position,
 * and the attention rounds: a segment whose cache needs token-by-token attention puts its row j in round j, any
 * other segment all its rows in round 0. Returns the number of rounds. */
static int layout_rows(tg_forward *f, const tg_forward_seg *segs, int n_segs) {
    int n = 0, n_rounds = 1;
    for (int s = 0; s < n_segs; s++) {
        const bool serial = segs[s].n > 1 && tg_kvcache_plan(segs[s].cache).token_by_token;
        if (serial && segs[s].n > n_rounds) n_rounds = segs[s].n;
        for (int j = 0; j < segs[s].n; j++, n++) {
            f->row_cache[n] = segs[s].cache;
            f->row_pos[n] = segs[s].pos + j;
            f->alone[n] = serial || segs[s].n == 1; /* a serial segment puts one row in each round */
            f->ids[n] = segs[s].ids[j];
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

/* The rows laid out by layout_rows as the backend's call. */
static tg_rows rows_of(const tg_forward *f, int n, int n_rounds) {
    return (tg_rows){.n = n, .ids = f->ids, .cache = f->row_cache, .pos = f->row_pos, .alone = f->alone,
                     .n_rounds = n_rounds, .round_rows = f->round_rows, .round_start = f->round_start,
                     .head_rows = f->head_rows, .head_out = f->head_out};
}

void tg_forward_chunk(tg_forward *f, tg_kvcache *cache, const int32_t *ids, int n, int64_t pos, float *logits_all,
                      float *logits_last) {
    const int64_t vocab = f->m->hp.vocab_size;
    if (n < 1 || n > f->max_chunk) return;
    const tg_forward_seg seg = {cache, ids, n, pos, NULL};
    tg_rows rows = rows_of(f, n, layout_rows(f, &seg, 1));
    rows.logits_all = logits_all;
    rows.logits_last = logits_last;
    rows.meter = true;
    f->be_i->run(f->be, &rows);
    if (logits_all && logits_last)
        memcpy(logits_last, logits_all + (int64_t)(n - 1) * vocab, (size_t)vocab * sizeof(float));
}

bool tg_forward_batch(tg_forward *f, const tg_forward_seg *segs, int n_segs) {
    const int64_t vocab = f->m->hp.vocab_size;
    int n = 0;
    for (int s = 0; s < n_segs; s++) {
        if (segs[s].n < 1 || segs[s].n > f->max_chunk - n || !segs[s].cache) return false;
        if (!f->be_i->fits(f->be, segs[s].cache)) return false;
        for (int t = 0; t < s; t++)
            if (segs[t].cache == segs[s].cache) return false;
        n += segs[s].n;
    }
    if (n == 0) return true;
    tg_rows rows = rows_of(f, n, layout_rows(f, segs, n_segs));
    for (int s = 0, row0 = 0; s < n_segs; row0 += segs[s].n, s++)
        if (segs[s].logits) f->head_rows[rows.n_head++] = row0 + segs[s].n - 1;
    f->be_i->run(f->be, &rows); /* no head rows: the head has no units */
    for (int s = 0, h = 0; s < n_segs; s++)
        if (segs[s].logits) memcpy(segs[s].logits, f->head_out + (int64_t)(h++) * vocab, (size_t)vocab * sizeof(float));
    return true;
}
