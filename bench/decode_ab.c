/* bench/decode_ab.c — two builds of the whole engine decoding side by side in one process, token by token
 * (bench/decode-ab.sh builds it): A and B each hold a session of the same model file (two mappings of the same
 * page-cache pages), filled to the same depth with the same random tokens, and decode in alternate turns, A B, B A,
 * A B, ... so that whatever the machine does in the meantime (another guest's memory traffic, a descheduled core)
 * falls on both. Each pair of turns gives one ratio B / A; the median of those ratios is the result, and its spread
 * says how far to trust it.
 * A side decodes a turn of four tokens at a time and only the last three are timed: the first runs while the other
 * build's idle workers may still spin and the caches hold the other side's data.
 *
 * KV may name two cache precisions, A's and B's ("fp16/int4"): the same build's caches against each other, each
 * session holding its own (both in memory at once, so where the weights and one cache would fit the L3 cache the
 * two caches compete for it, unlike in separate processes).
 *
 * This resolves differences of about a per cent that separate runs (bench/kv_speed.sh, interleaved processes) cannot
 * tell from the noise of this shared machine. `make bench-programs` builds it (both sides from this tree);
 * tests/cli/test_bench_programs.sh runs it small. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *ab_a_open(const char *path, const char *kv, int64_t depth, int64_t tokens, int threads, char *err, size_t len);
double ab_a_step(void *h);
void ab_a_close(void *h);
void *ab_b_open(const char *path, const char *kv, int64_t depth, int64_t tokens, int threads, char *err, size_t len);
double ab_b_step(void *h);
void ab_b_close(void *h);

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile (0..1) of v[n], sorted in place: linear between the two nearest ranks (the median of an even count
 * is the mean of the middle two). */
static double quantile(double *v, int n, double q) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    const double at = q * (n - 1);
    const int i = (int)at;
    return i + 1 < n ? v[i] + (at - i) * (v[i + 1] - v[i]) : v[i];
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: decode_ab MODEL KV|KV_A/KV_B DEPTH TOKENS THREADS\n");
        return 2;
    }
    const char *path = argv[1], *kv = argv[2];
    char kv_a[32], kv_b[32]; /* "P" for both sides, or "PA/PB": side A's cache precision, then B's */
    const char *slash = strchr(kv, '/');
    snprintf(kv_a, sizeof kv_a, "%.*s", slash ? (int)(slash - kv) : (int)strlen(kv), kv);
    snprintf(kv_b, sizeof kv_b, "%s", slash ? slash + 1 : kv);
    const int64_t depth = atoll(argv[3]), tokens = atoll(argv[4]);
    const int threads = atoi(argv[5]);
    enum { TURN = 4 }; /* tokens a side decodes at a time */
    if (depth < 0 || tokens < 2 * TURN || tokens > 1000000 || threads < 0) {
        fprintf(stderr, "decode_ab: bad DEPTH, TOKENS (%d or more) or THREADS\n", 2 * TURN);
        return 2;
    }
    char err[512];
    const int warm = 2; /* unmeasured tokens first, as tinygpt bench warms up */
    void *a = ab_a_open(path, kv_a, depth, tokens + warm, threads, err, sizeof err);
    if (!a) {
        fprintf(stderr, "decode_ab: A: %s\n", err);
        return 1;
    }
    void *b = ab_b_open(path, kv_b, depth, tokens + warm, threads, err, sizeof err);
    if (!b) {
        fprintf(stderr, "decode_ab: B: %s\n", err);
        ab_a_close(a);
        return 1;
    }
    /* turns of TURN tokens, A's and B's in the order A B, B A, A B, ...; a turn's first token is not timed (the
     * other build's idle workers are still spinning, and the caches hold the other side's data) */
    const int n = (int)(tokens / (2 * TURN)) * 2; /* turns of each side, an even number (at least 2) */
    double *ta = malloc((size_t)n * sizeof *ta), *tb = malloc((size_t)n * sizeof *tb);
    double *ratio = malloc((size_t)n * sizeof *ratio);
    if (!ta || !tb || !ratio) return 1;
    for (int i = 0; i < warm; i++)
        if (ab_a_step(a) < 0 || ab_b_step(b) < 0) return 1;
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < 2; k++) {
            const bool is_a = (i % 2 == 0) == (k == 0);
            double sum = 0;
            for (int j = 0; j < TURN; j++) {
                const double t = is_a ? ab_a_step(a) : ab_b_step(b);
                if (t < 0) {
                    fprintf(stderr, "decode_ab: a token failed (the context is full?)\n");
                    return 1;
                }
                if (j > 0) sum += t / (TURN - 1);
            }
            if (is_a) ta[i] = sum;
            else tb[i] = sum;
        }
        ratio[i] = tb[i] / ta[i];
    }
    double sa = 0, sb = 0;
    for (int i = 0; i < n; i++) sa += ta[i], sb += tb[i];
    const double ma = quantile(ta, n, 0.5), mb = quantile(tb, n, 0.5);
    const double r25 = quantile(ratio, n, 0.25), r50 = quantile(ratio, n, 0.5), r75 = quantile(ratio, n, 0.75);
    printf("decode_ab %s, cache %s, depth %lld, %d turns of %d tokens each (%d timed), %d threads\n", path, kv,
           (long long)depth, n, TURN, TURN - 1, threads);
    printf("A  median %.3f ms/token (%.1f tokens/s), mean %.1f tokens/s\n", 1e3 * ma, 1.0 / ma, n / sa);
    printf("B  median %.3f ms/token (%.1f tokens/s), mean %.1f tokens/s\n", 1e3 * mb, 1.0 / mb, n / sb);
    printf("time B / A per pair of turns: median %.4f (quartiles %.4f, %.4f); speed B / A %.4f\n", r50, r25, r75,
           1.0 / r50);
    ab_a_close(a);
    ab_b_close(b);
    free(ta), free(tb), free(ratio);
    return 0;
}
