/* test_attend_runs.c — the float-row attention kernels (attend_avx2.c) bit for bit against their arithmetic order,
 * written out in scalar C: a score is eight lane sums, lane l the FMA chain over columns k + l (k = 0, 8, ...),
 * reduced as ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)); a value sum is one FMA chain per output element,
 * row after row. Both the block kernels (tg_attn_avx2_scores / tg_attn_avx2_values, eight rows a call) and the run
 * kernels that take a plain segment whole (tg_attn_avx2_scores_rows / tg_attn_avx2_values_rows) must give exactly
 * those bits, so a cache's attention does not depend on which of them ran. (test_kvcache checks the kernels against
 * the attention's definition within a tolerance.) */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kvcache/attend_kernels.h"
#include "util/half.h"

#if TG_HAVE_AVX2

static float urand(uint64_t *s) { /* uniform in [-1, 1) */
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (float)((double)(*s >> 11) / 4503599627370496.0 - 1.0);
}

enum { MAXROWS = 75, MAXD = 256, MAXQ = 8, PAD = 40 };

/* Rows [0, count) of one kind with stride row bytes + PAD, as a segment would hold them. */
static void random_rows(uint64_t *seed, int kind, int64_t count, int64_t D, uint8_t *p, size_t stride) {
    for (int64_t r = 0; r < count; r++)
        for (int64_t k = 0; k < D; k++) {
            const float x = urand(seed);
            uint8_t *at = p + (size_t)r * stride;
            if (kind == TG_SEG_F32) {
                memcpy(at + 4 * k, &x, 4);
            } else {
                const uint16_t h = kind == TG_SEG_F16 ? tg_f32_to_f16(x) : tg_f32_to_bf16(x);
                memcpy(at + 2 * k, &h, 2);
            }
        }
}

static float elem(int kind, const uint8_t *row, int64_t k) {
    uint16_t h;
    float f;
    if (kind == TG_SEG_F32) {
        memcpy(&f, row + 4 * k, 4);
        return f;
    }
    memcpy(&h, row + 2 * k, 2);
    return kind == TG_SEG_F16 ? tg_f16_to_f32(h) : tg_bf16_to_f32(h);
}

/* The order's scores sc[j * ld + r] and value sums o (accumulated onto what it holds). */
static void order_model(int kind, const uint8_t *rows, size_t stride, int64_t n, int64_t D, int gq, const float *q,
                        const float *p, int64_t ld, float *sc, float *o) {
    for (int j = 0; j < gq; j++)
        for (int64_t r = 0; r < n; r++) {
            float a[8] = {0};
            for (int64_t k = 0; k < D; k += 8)
                for (int l = 0; l < 8; l++)
                    a[l] = fmaf(elem(kind, rows + (size_t)r * stride, k + l), q[(int64_t)j * D + k + l], a[l]);
            const float s0 = (a[0] + a[1]) + (a[2] + a[3]), s1 = (a[4] + a[5]) + (a[6] + a[7]);
            sc[(int64_t)j * ld + r] = s0 + s1;
        }
    for (int j = 0; j < gq; j++)
        for (int64_t c = 0; c < D; c++)
            for (int64_t r = 0; r < n; r++)
                o[(int64_t)j * D + c] =
                    fmaf(p[(int64_t)j * ld + r], elem(kind, rows + (size_t)r * stride, c), o[(int64_t)j * D + c]);
}

static void test_runs_equal_blocks(void **state) {
    (void)state;
    const int kinds[] = {TG_SEG_F32, TG_SEG_F16, TG_SEG_BF16};
    const int64_t dims[] = {8, 16, 24, 32, 48, 64, 72, 80, 128, 256};
    const int64_t counts[] = {1, 7, 8, 9, 33, MAXROWS};
    const int64_t ld = MAXROWS + 3;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    uint8_t *rows = malloc((size_t)MAXROWS * (MAXD * 4 + PAD));
    float *q = malloc(sizeof(float) * MAXQ * MAXD), *p = malloc(sizeof(float) * MAXQ * (size_t)ld);
    float *sa = malloc(sizeof(float) * MAXQ * (size_t)ld), *sb = malloc(sizeof(float) * MAXQ * (size_t)ld);
    float *oa = malloc(sizeof(float) * MAXQ * MAXD), *ob = malloc(sizeof(float) * MAXQ * MAXD);
    float *sm = malloc(sizeof(float) * MAXQ * (size_t)ld), *om = malloc(sizeof(float) * MAXQ * MAXD);
    assert_true(rows && q && p && sa && sb && oa && ob && sm && om);
    int checked = 0;
    for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++)
        for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
            const int64_t D = dims[di];
            const bool runs = tg_attn_avx2_runs(kinds[ki], D); /* else only the block kernels take such rows */
            const size_t stride = (size_t)D * (kinds[ki] == TG_SEG_F32 ? 4 : 2) + PAD;
            for (int gq = 1; gq <= MAXQ; gq++)
                for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
                    const int64_t n = counts[ci];
                    random_rows(&seed, kinds[ki], n, D, rows, stride);
                    for (int64_t i = 0; i < (int64_t)gq * D; i++) q[i] = urand(&seed);
                    for (int64_t i = 0; i < (int64_t)gq * ld; i++) p[i] = 0.5f * (urand(&seed) + 1.0f);
                    for (int64_t i = 0; i < (int64_t)gq * D; i++) oa[i] = ob[i] = om[i] = urand(&seed);
                    order_model(kinds[ki], rows, stride, n, D, gq, q, p, ld, sm, om);
                    memset(sa, 0, sizeof(float) * (size_t)gq * (size_t)ld);
                    memset(sb, 0, sizeof(float) * (size_t)gq * (size_t)ld);
                    /* the block kernels, eight rows a call */
                    for (int64_t i0 = 0; i0 < n; i0 += TG_ATTN_BLK) {
                        tg_attn_block b = {0};
                        b.kind = kinds[ki];
                        b.nr = (int)(n - i0 < TG_ATTN_BLK ? n - i0 : TG_ATTN_BLK);
                        for (int r = 0; r < TG_ATTN_BLK; r++)
                            b.rows[r] = rows + (size_t)(i0 + (r < b.nr ? r : 0)) * stride;
                        tg_attn_avx2_scores(&b, q, gq, D, sa + i0, ld);
                        tg_attn_avx2_values(&b, p + i0, ld, gq, D, oa);
                    }
                    /* the run kernels, the whole segment (the key pass fetching the same rows again beside its
                     * own, as it fetches a run's values: prefetches only, the same bits) */
                    if (runs) {
                        const tg_attn_rows s = {kinds[ki], rows, stride, n, 32, NULL, 0};
                        const tg_attn_rows sk = {kinds[ki], rows, stride, n, 32, rows, stride};
                        tg_attn_avx2_scores_rows(&sk, q, gq, D, sb, ld);
                        tg_attn_avx2_values_rows(&s, p, ld, gq, D, ob);
                    }
                    const float *got_s[2] = {sa, sb}, *got_o[2] = {oa, ob};
                    const char *which[2] = {"block", "run"};
                    for (int w = 0; w < (runs ? 2 : 1); w++) {
                        for (int j = 0; j < gq; j++)
                            if (memcmp(sm + (int64_t)j * ld, got_s[w] + (int64_t)j * ld, sizeof(float) * (size_t)n))
                                fail_msg("%s kernels, kind %d D %lld gq %d rows %lld: scores of head %d differ",
                                         which[w], kinds[ki], (long long)D, gq, (long long)n, j);
                        if (memcmp(om, got_o[w], sizeof(float) * (size_t)gq * (size_t)D) != 0)
                            fail_msg("%s kernels, kind %d D %lld gq %d rows %lld: value sums differ", which[w],
                                     kinds[ki], (long long)D, gq, (long long)n);
                    }
                    checked += runs;
                }
        }
    free(rows), free(q), free(p), free(sa), free(sb), free(oa), free(ob), free(sm), free(om);
    (void)checked; /* 0 in a build without the run kernels (no AVX-512): the block kernels were still checked */
}

#else
static void test_runs_equal_blocks(void **state) { (void)state; skip(); }
#endif

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runs_equal_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
