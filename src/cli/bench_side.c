/* bench_side.c — `tinygpt bench --side-by-side`: caches of several precisions decoding in alternate turns in one
 * process (bench_side.h). A turn's first token is untimed: it brings that session's cache back into the CPU's caches
 * after the other sessions' turns, which a single session decoding alone would not have to do. */
#define _POSIX_C_SOURCE 200809L

#include "cli/bench_side.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/bandwidth_child.h"
#include "cli/bench_tokens.h"
#include "cli/cache_errors.h"
#include "cli/report.h"
#include "cli/report_json.h"
#include "util/clock.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile (0 <= q <= 1) of x[n] by linear interpolation between order statistics (x is sorted in place). */
static double quantile(double *x, int64_t n, double q) {
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    const double pos = q * (double)(n - 1);
    const int64_t lo = (int64_t)pos;
    return lo + 1 < n ? x[lo] + (pos - (double)lo) * (x[lo + 1] - x[lo]) : x[lo];
}

typedef struct {
    const tg_bench_side_args *a;
    tg_session *s[TG_SIDE_MAX];
    tg_cache_params p[TG_SIDE_MAX];
    int32_t id[TG_SIDE_MAX]; /* each session's next input token */
    int32_t *ids;            /* [TG_BENCH_FILL_CHUNK] */
    float *logits;           /* [vocab] */
    int64_t rounds;
    double *turn_ms;         /* [n_depths][n_precisions][rounds]: ms per timed token of each turn */
    int64_t *kv_read;        /* [n_depths][n_precisions]: KV bytes a token reads at the mean depth of the turns */
    size_t *kv_held;         /* [n_depths][n_precisions]: bytes the cache holds after them */
    tg_bw_child probe;       /* pid 0: no bandwidth probe */
    double *probe_s;         /* [n_depths][TG_BANDWIDTH_PATTERNS]: each pattern's seconds over the depth's passes */
    int64_t *probe_passes;   /* [n_depths] */
} side_run;

static double *turns_of(const side_run *r, int d, int k) {
    return r->turn_ms + ((size_t)d * (size_t)r->a->n_precisions + (size_t)k) * (size_t)r->rounds;
}

/* One error line naming session k's cache; false. */
static bool session_failed(const side_run *r, int k, tg_error *err) {
    tg_cli_word_error(err, &r->p[k]);
    tg_runtime_error("bench: the %s cache: %s", tg_kv_precision_name(r->p[k].key_precision), err->msg);
    return false;
}

/* Decodes one token greedily in session k. */
static bool step(side_run *r, int k) {
    tg_error err = {0};
    if (!tg_session_eval(r->s[k], &r->id[k], 1, NULL, r->logits, &err)) return session_failed(r, k, &err);
    r->id[k] = tg_bench_argmax(r->logits, r->a->info->vocab_size);
    return true;
}

/* Every session filled to `depth` (a session past it is emptied first): from an empty cache, all with the same
 * random tokens; a session carrying on from the previous depth holds its own greedy tokens there, then the same
 * random ones. The storage for the turns is then reserved, so that no cache grows during a timed token. */
static bool fill_all(side_run *r, int64_t depth) {
    const tg_bench_side_args *a = r->a;
    for (int k = 0; k < a->n_precisions; k++) {
        if (tg_session_position(r->s[k]) > depth) tg_session_reset(r->s[k]);
        uint64_t state = 0x9e3779b97f4a7c15ull ^ (uint64_t)tg_session_position(r->s[k]);
        tg_error err = {0};
        if (!tg_bench_fill(r->s[k], depth, r->ids, a->info->vocab_size, &state, &err) ||
            !tg_session_reserve(r->s[k], r->rounds * a->turn, &err))
            return session_failed(r, k, &err);
        uint64_t first = 0x2545f4914f6cdd1dull;
        tg_bench_random_ids(&r->id[k], 1, a->info->vocab_size, &first);
    }
    return true;
}

/* One pass of the bandwidth probe into depth index d's sums (a no-op without a probe). */
static void probe_pass(side_run *r, int d) {
    double sec[TG_BANDWIDTH_PATTERNS];
    if (r->probe.pid <= 0 || !tg_bw_child_pass(&r->probe, sec)) return;
    for (int k = 0; k < TG_BANDWIDTH_PATTERNS; k++) r->probe_s[d * TG_BANDWIDTH_PATTERNS + k] += sec[k];
    r->probe_passes[d]++;
}

/* The read bandwidth (bytes per second) of the probe's passes around the rounds at depth index d; 0 without passes. */
static double depth_bandwidth(const side_run *r, int d) {
    return r->probe_passes[d] > 0
               ? tg_bandwidth_rate(r->probe.bytes, r->probe_passes[d], r->probe_s + d * TG_BANDWIDTH_PATTERNS)
               : 0.0;
}

/* The rounds at depth index d: each session one turn per round. Round i starts at session i mod K and goes up, or
 * down in the second K rounds of every 2K: each session takes every place in the order, and follows both of its
 * neighbours (a session's first token, untimed, may share the core with the previous session's idle workers). With a
 * probe, TG_SIDE_PROBE_PASSES passes before the rounds and as many after them, none between: a pass evicts the CPU's
 * caches, which a model that fits in the last-level cache would then refill during the turns (one untimed token a
 * turn does not cover it). */
static bool run_depth(side_run *r, int d) {
    const tg_bench_side_args *a = r->a;
    const int K = a->n_precisions;
    if (!fill_all(r, a->depths[d])) return false;
    for (int p = 0; p < TG_SIDE_PROBE_PASSES; p++) probe_pass(r, d);
    for (int k = 0; k < K; k++) {
        tg_error err = {0};
        const int64_t mean_depth = a->depths[d] + r->rounds * a->turn / 2;
        r->kv_read[d * K + k] = mean_depth > 0 ? (int64_t)tg_cache_bytes(a->model, &r->p[k], mean_depth, &err) : 0;
    }
    for (int64_t i = 0; i < r->rounds; i++) {
        for (int j = 0; j < K; j++) {
            const int start = (int)(i % K), k = (i / K) % 2 ? (start - j + K) % K : (start + j) % K;
            if (!step(r, k)) return false; /* untimed: this session's cache back in the CPU's caches */
            const double t0 = tg_monotonic_s();
            for (int64_t t = 1; t < a->turn; t++)
                if (!step(r, k)) return false;
            const double ms = (tg_monotonic_s() - t0) * 1e3 / (double)(a->turn - 1);
            turns_of(r, d, k)[i] = ms > 1e-9 ? ms : 1e-9; /* a ratio's divisor, never 0 */
        }
    }
    for (int p = 0; p < TG_SIDE_PROBE_PASSES; p++) probe_pass(r, d);
    for (int k = 0; k < K; k++) {
        tg_cache_report rep;
        tg_session_cache_report(r->s[k], &rep);
        r->kv_held[d * K + k] = rep.bytes_total;
    }
    return true;
}

/* The medians and quartiles of one depth's precision k: ms/token, and speed against precision 0 per round. */
typedef struct {
    double ms, speed, speed_q1, speed_q3;
} side_stats;

static side_stats stats_of(const side_run *r, int d, int k, double *scratch) {
    side_stats st;
    const double *mine = turns_of(r, d, k), *ref = turns_of(r, d, 0);
    memcpy(scratch, mine, (size_t)r->rounds * sizeof *scratch);
    st.ms = quantile(scratch, r->rounds, 0.5);
    for (int64_t i = 0; i < r->rounds; i++) scratch[i] = ref[i] / mine[i];
    st.speed = quantile(scratch, r->rounds, 0.5);
    st.speed_q1 = quantile(scratch, r->rounds, 0.25);
    st.speed_q3 = quantile(scratch, r->rounds, 0.75);
    return st;
}

/* One depth's caches as a JSON object (NULL when memory runs out). */
static json_t *json_depth(const side_run *r, int d, double *scratch) {
    const tg_bench_side_args *a = r->a;
    const double w = (double)a->info->weight_bytes;
    const int64_t *kv_read = r->kv_read + d * a->n_precisions;
    const size_t *kv_held = r->kv_held + d * a->n_precisions;
    const double bw = depth_bandwidth(r, d);
    json_t *caches = json_array();
    for (int k = 0; caches && k < a->n_precisions; k++) {
        const side_stats st = stats_of(r, d, k, scratch);
        json_t *turns = json_array();
        const double *t = turns_of(r, d, k);
        for (int64_t i = 0; turns && i < r->rounds; i++)
            if (json_array_append_new(turns, json_real(t[i])) != 0) turns = (json_decref(turns), NULL);
        json_t *c = json_pack("{s:s, s:f, s:f, s:f, s:I, s:I, s:f, s:f, s:f, s:f, s:o}", "kv",
            tg_kv_precision_name(a->precisions[k]), "ms_per_token", st.ms, "tokens_per_s", 1e3 / st.ms,
            "bytes_per_token", w + (double)kv_read[k], "kv_bytes_read_per_token", (json_int_t)kv_read[k],
            "kv_bytes_held", (json_int_t)kv_held[k], "speed_vs_first", st.speed, "speed_vs_first_q1", st.speed_q1,
            "speed_vs_first_q3", st.speed_q3, "byte_ratio_vs_first", (w + (double)kv_read[0]) / (w + (double)kv_read[k]),
            "turn_ms_per_token", turns);
        if (c && bw > 0) { /* the roofline: the bandwidth over the bytes a token reads */
            const double roof = bw / (w + (double)kv_read[k]);
            if (json_object_set_new(c, "roofline_tokens_per_s", json_real(roof)) != 0 ||
                json_object_set_new(c, "fraction_of_roofline", json_real(1e3 / st.ms / roof)) != 0)
                c = (json_decref(c), NULL);
        }
        if (json_array_append_new(caches, c) != 0) caches = (json_decref(caches), NULL);
    }
    json_t *out = json_pack("{s:I, s:I, s:o}", "depth", (json_int_t)a->depths[d], "rounds", (json_int_t)r->rounds,
                            "caches", caches);
    if (out && bw > 0 &&
        (json_object_set_new(out, "read_bandwidth_bytes_per_s", json_real(bw)) != 0 ||
         json_object_set_new(out, "bandwidth_passes", json_integer((json_int_t)r->probe_passes[d])) != 0))
        out = (json_decref(out), NULL);
    return out;
}

static void print_table_depth(const side_run *r, int d, double *scratch) {
    const tg_bench_side_args *a = r->a;
    const double w = (double)a->info->weight_bytes;
    const int64_t *kv_read = r->kv_read + d * a->n_precisions;
    const size_t *kv_held = r->kv_held + d * a->n_precisions;
    const double bw = depth_bandwidth(r, d);
    for (int k = 0; k < a->n_precisions; k++) {
        const side_stats st = stats_of(r, d, k, scratch);
        char read[32], held[32], vs[48] = "-", bytes[16] = "-", roof[16] = "-";
        tg_fmt_bytes(w + (double)kv_read[k], 1, read, sizeof read);
        tg_fmt_bytes((double)kv_held[k], 1, held, sizeof held);
        if (k > 0) {
            snprintf(vs, sizeof vs, "%.3f (%.3f-%.3f)", st.speed, st.speed_q1, st.speed_q3);
            snprintf(bytes, sizeof bytes, "%.3f", (w + (double)kv_read[0]) / (w + (double)kv_read[k]));
        }
        if (bw > 0) snprintf(roof, sizeof roof, "%.1f%%", 100.0 * (1e3 / st.ms) / (bw / (w + (double)kv_read[k])));
        printf("%7" PRId64 " %-6s %10.2f %10.3f %12s %12s   %-22s %11s %12s\n", a->depths[d],
               tg_kv_precision_name(a->precisions[k]), 1e3 / st.ms, st.ms, read, held, vs, bytes, roof);
    }
}

/* False when memory runs out (nothing printed) or, with --json, the report cannot be written (a model path that is
 * not UTF-8, stdout). */
static bool print_results(const side_run *r, int threads) {
    const tg_bench_side_args *a = r->a;
    double *scratch = malloc((size_t)r->rounds * sizeof *scratch);
    if (!scratch) return false;
    if (a->json) {
        json_t *depths = json_array();
        for (int d = 0; depths && d < a->n_depths; d++)
            if (json_array_append_new(depths, json_depth(r, d, scratch)) != 0) depths = (json_decref(depths), NULL);
        const bool ok = tg_json_print(stdout, json_pack("{s:s, s:I, s:i, s:I, s:o}", "model", a->model_path,
            "weight_bytes_per_token", (json_int_t)a->info->weight_bytes, "threads", threads, "turn",
            (json_int_t)a->turn, "side_by_side", depths));
        free(scratch);
        return ok;
    } else {
        char buf[32];
        tg_fmt_bytes((double)a->info->weight_bytes, 1, buf, sizeof buf);
        printf("model      %s · %s · %s of weights read per token\n", a->model_path, a->info->weight_types, buf);
        printf("threads    %d\n", threads);
        printf("turns      %" PRId64 " rounds of one turn per cache, %" PRId64 " tokens a turn (the first untimed), "
               "the order rotating\n", r->rounds, a->turn);
        for (int d = 0; d < a->n_depths; d++)
            if (depth_bandwidth(r, d) > 0)
                printf("bandwidth  %.2f GB/s at depth %" PRId64 " (reads of %" PRId64 " MiB in %d patterns, the best "
                       "one's mean over %" PRId64 " passes before and after the rounds)\n", depth_bandwidth(r, d) / 1e9,
                       a->depths[d], a->bandwidth_mib, TG_BANDWIDTH_PATTERNS, r->probe_passes[d]);
        printf("\n%7s %-6s %10s %10s %12s %12s   %-22s %11s %12s\n", "depth", "cache", "tokens/s", "ms/token",
               "read/token", "KV held", "speed vs first (IQR)", "bytes ratio", "of roofline");
        for (int d = 0; d < a->n_depths; d++) print_table_depth(r, d, scratch);
        printf("\nspeed vs first: the median over rounds of the first cache's turn time over this cache's; bytes "
               "ratio: the same for the bytes each token reads (weights + cache), what a read-bound decode allows; "
               "of roofline (with --bandwidth-mib): tokens/s over the bandwidth / the bytes a token reads\n");
    }
    free(scratch);
    return true;
}

/* Refuses caches whose K/V storage together would pass the memory limit each session alone is held to. */
static bool check_memory(const side_run *r) {
    const tg_bench_side_args *a = r->a;
    int64_t limit = a->base.max_memory;
    if (limit == 0) {
        const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        limit = pages > 0 && page > 0 ? (int64_t)pages * page : -1;
    }
    if (limit < 0) return true;
    const int64_t n = a->depths[a->n_depths - 1] + a->tokens;
    double total = 0;
    for (int k = 0; k < a->n_precisions; k++) {
        tg_error err = {0};
        const size_t b = tg_cache_bytes(a->model, &r->p[k], n, &err);
        if (b == 0 && err.code != TG_ERR_NONE) {
            tg_error e = err;
            tg_cli_word_error(&e, &r->p[k]);
            tg_runtime_error("bench: the %s cache: %s", tg_kv_precision_name(r->p[k].key_precision), e.msg);
            return false;
        }
        total += (double)b;
    }
    if (total <= (double)limit) return true;
    char t[32], l[32];
    tg_fmt_bytes(total, 1, t, sizeof t);
    tg_fmt_bytes((double)limit, 1, l, sizeof l);
    tg_runtime_error("bench: --side-by-side: the %d caches at %" PRId64 " tokens hold %s together, more than the "
                     "limit of %s (--max-memory)", a->n_precisions, n, t, l);
    return false;
}

int tg_bench_side_by_side(const tg_bench_side_args *a) {
    if (a->n_precisions < 2 || a->n_precisions > TG_SIDE_MAX || a->n_depths < 1 || a->turn < 2 || a->tokens < a->turn)
        return tg_runtime_error("bench: --side-by-side: %d caches, %d depths, %" PRId64 " tokens in turns of %" PRId64
                                ": nothing to measure", a->n_precisions, a->n_depths, a->tokens, a->turn);
    side_run r = {.a = a, .rounds = a->tokens / a->turn, .probe = {.to_child = -1, .from_child = -1}};
    int status = TG_EXIT_ERROR;
    for (int k = 0; k < a->n_precisions; k++) {
        r.p[k] = a->base;
        r.p[k].key_precision = r.p[k].value_precision = a->precisions[k];
    }
    if (!check_memory(&r)) return TG_EXIT_ERROR;
    r.ids = malloc(TG_BENCH_FILL_CHUNK * sizeof *r.ids);
    r.logits = malloc((size_t)a->info->vocab_size * sizeof *r.logits);
    /* at most 16 depths x TG_SIDE_MAX caches x 2^24 / 2 rounds (cmd_bench.c's limits): far from SIZE_MAX */
    const size_t cells = (size_t)a->n_depths * (size_t)a->n_precisions;
    r.turn_ms = malloc(cells * (size_t)r.rounds * sizeof *r.turn_ms);
    r.kv_read = malloc(cells * sizeof *r.kv_read);
    r.kv_held = malloc(cells * sizeof *r.kv_held);
    r.probe_s = calloc((size_t)a->n_depths * TG_BANDWIDTH_PATTERNS, sizeof *r.probe_s);
    r.probe_passes = calloc((size_t)a->n_depths, sizeof *r.probe_passes);
    if (!r.ids || !r.logits || !r.turn_ms || !r.kv_read || !r.kv_held || !r.probe_s || !r.probe_passes) {
        tg_runtime_error("out of memory");
        goto done;
    }
    /* before any session starts its threads: the child is forked from a process with one */
    if (a->bandwidth_mib > 0) tg_bw_child_start_or_warn(&r.probe, a->bandwidth_mib, a->threads);
    for (int k = 0; k < a->n_precisions; k++) {
        tg_error err = {0};
        r.s[k] = tg_session_new(a->model, &r.p[k], a->threads, &err);
        if (!r.s[k]) {
            tg_cli_word_error(&err, &r.p[k]);
            tg_runtime_error("bench: the %s cache: %s", tg_kv_precision_name(a->precisions[k]), err.msg);
            goto done;
        }
    }
    for (int d = 0; d < a->n_depths; d++)
        if (!run_depth(&r, d)) goto done;
    if (!print_results(&r, tg_session_threads(r.s[0])))
        status = tg_runtime_error("bench: the report could not be made or written (out of memory, or a model path that "
                                  "is not UTF-8 for --json)");
    else status = fflush(stdout) == 0 ? TG_EXIT_OK : tg_runtime_error("writing to stdout failed");
done:
    for (int k = 0; k < a->n_precisions; k++) tg_session_free(r.s[k]);
    free(r.ids);
    free(r.logits);
    free(r.turn_ms);
    free(r.kv_read);
    free(r.kv_held);
    free(r.probe_s);
    free(r.probe_passes);
    tg_bw_child_stop(&r.probe);
    return status;
}
