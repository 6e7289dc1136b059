/* test_attend_int.c — the integer-domain attention kernels over tiled KIVI codes (attend_int_avx2.c, issue #16)
 * against exact sums in double, with bounds derived from their two roundings; the VNNI instruction against its AVX2
 * emulation bit for bit; and attention through the cache (tiled groups) against the scalar float reference.
 *
 * Keys: the folded query qf = q * scale is quantised to q8 = round(qf / dq), dq = max|qf| / Q (Q = 127 for int4 /
 * int2 codes, 8191 for int8 codes), so |qf_k - dq q8_k| <= dq / 2 and the score dq (q8 . u) + q . zero differs from
 * q . (u * scale + zero) by at most dq / 2 * sum_k u_k (plus float rounding: 1e-5 of the terms' magnitudes).
 * Values: each weight w_r = p_r * scale_r is quantised to w8 = round(w / dw), dw = max_r w_r / W (W = 255 for int4
 * / int2 codes, 16383 for int8 codes), so |w_r - dw w8_r| <= dw / 2 and output channel c differs from
 * sum_r p_r (u_rc scale_r + zero_r) by at most dw / 2 * sum_r u_rc (plus float rounding). */
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
#include "kvcache/cache_internal.h"
#include "kvcache/kivi.h"
#include "kvcache/kvcache.h"
#include "attend_team.h"
#include "util/half.h"

/* The integer kernels: attend_int_avx2.c on x86, attend_int_dotprod.c on aarch64 CPUs with dotprod (the tests skip
 * without it). Both give the same bits: test_tile_runs hashes every result it checks and compares the hash with the
 * x86 kernels'. */
#if TG_HAVE_AVX2 || TG_HAVE_NEON

#if TG_HAVE_NEON
#define NEED_INT_KERNELS()                                                                                            \
    do {                                                                                                              \
        if (!tg_cpu_features_get()->dotprod) skip();                                                                  \
    } while (0)
#else
#define NEED_INT_KERNELS()                                                                                            \
    do {                                                                                                              \
    } while (0)
#endif

/* FNV-1a of n bytes at p, continuing from h. */
static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ ((const uint8_t *)p)[i]) * 0x100000001b3ull;
    return h;
}

/* test_tile_runs' hashes of its results per head dim (32, 64, .. 256) on the x86 kernels (AVX2 and AVX-512 VNNI give
 * the same). */
static const uint64_t tile_runs_hash[8] = {0x18ede1a54d68a54cull, 0xa9706056eda2b381ull, 0xfb18581ca932e149ull,
                                           0xec6eabd3946cd40eull, 0xe1478de99e65bf70ull, 0x9eadd340228d1cfdull,
                                           0x939b03c74cc59cb5ull, 0x6bc5bc7c167db621ull};

/* TG_TEST_QUICK=1 (make test-aarch64: under emulation) sweeps the head dims 32, 128 and 224 alone and a shorter
 * cache; natively, every head dim 32 .. 256. */
static int quick(void) {
    const char *e = getenv("TG_TEST_QUICK");
    return e && *e == '1';
}

static double urand(uint64_t *s) { /* uniform in [0, 1) */
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return (double)(*s >> 11) / 9007199254740992.0;
}

enum { MAXD = 256, MAXQ = 12, MAXG = 64 };

/* A random tile of G rows x D codes and the codes themselves (u[r * D + k]). */
static void random_tile(uint64_t *seed, bool keys, int bits, int64_t G, int64_t D, uint8_t *tile, int *u) {
    memset(tile, 0, (size_t)(G * D * bits / 8));
    for (int64_t r = 0; r < G; r++)
        for (int64_t k = 0; k < D; k++) {
            u[r * D + k] = (int)(urand(seed) * (1 << bits));
            tg_kivi_tile_put(tile, keys, bits, G, D, r, k, u[r * D + k]);
        }
}

/* The layout: every code reads back where it was put, and a tile is exactly G * row_bytes bytes (each byte used). */
static void test_tile_layout(void **state) {
    (void)state;
    uint64_t seed = 7;
    static uint8_t tile[MAXG * MAXD];
    static int u[MAXG * MAXD];
    const int bitss[] = {8, 4, 2};
    for (int bi = 0; bi < 3; bi++)
        for (int keys = 0; keys < 2; keys++)
            for (int64_t D = 32; D <= MAXD; D += quick() ? 96 : 32) /* 96: the generic head dim */
                for (int64_t G = 8; G <= MAXG; G *= 2) {
                    const int bits = bitss[bi];
                    random_tile(&seed, keys, bits, G, D, tile, u);
                    for (int64_t r = 0; r < G; r++)
                        for (int64_t k = 0; k < D; k++) {
                            int sh;
                            const size_t at = tg_kivi_tile_at(keys, bits, G, D, r, k, &sh);
                            assert_true(at < (size_t)(G * D * bits / 8));
                            assert_int_equal(tg_kivi_tile_get(tile, keys, bits, G, D, r, k), u[r * D + k]);
                        }
                }
}

/* Scores of random segments against the exact sums, within dq / 2 * sum u (+ float rounding); VNNI == emulation. */
static void test_scores_bound(void **state) {
    (void)state;
    NEED_INT_KERNELS();
    uint64_t seed = 11;
    static uint8_t tile[MAXG * MAXD];
    static int u[MAXG * MAXD];
    static float qh[MAXQ * MAXD], grid[2 * MAXD], bias[MAXQ], dq[MAXQ];
    static uint16_t g16[2 * MAXD];
    static int32_t lo[MAXQ * MAXD / 4], hi[MAXQ * MAXD / 4];
    static float sc[MAXQ * MAXG], sc2[MAXQ * MAXG];
    const int bitss[] = {8, 4, 2}, gqs[] = {1, 2, 3, 4, 5, 8};
    int checked = 0;
    double worst_ratio = 0.0;
    for (int bi = 0; bi < 3; bi++)
        for (int64_t D = 32; D <= MAXD; D += quick() ? 96 : 32) /* 96: the generic head dim */
            for (int64_t G = 8; G <= MAXG; G *= 2)
                for (int gi = 0; gi < 6; gi++) {
                    const int bits = bitss[bi], gq = gqs[gi];
                    random_tile(&seed, true, bits, G, D, tile, u);
                    for (int64_t k = 0; k < D; k++) { /* an fp16 grid, and its values */
                        g16[k] = tg_f32_to_f16((float)(0.001 + 0.1 * urand(&seed)));
                        g16[D + k] = tg_f32_to_f16((float)(urand(&seed) - 0.5));
                        grid[k] = tg_f16_to_f32(g16[k]);
                        grid[D + k] = tg_f16_to_f32(g16[D + k]);
                    }
                    for (int64_t i = 0; i < gq * D; i++) qh[i] = (float)(4.0 * urand(&seed) - 2.0);
                    const int64_t t0 = (int64_t)(urand(&seed) * (double)G);
                    const int64_t count = 1 + (int64_t)(urand(&seed) * (double)(G - t0));
                    const tg_attn_tile t = {tile, bits, G, t0, count, 0};
                    tg_attn_int_queries q = {lo, hi, dq, bias};
                    tg_attn_int_prepare_keys(qh, gq, D, g16, g16 + D, bits, &q);
                    const int64_t ld = MAXG;
                    for (size_t i = 0; i < MAXQ * MAXG; i++) sc[i] = sc2[i] = -12345.0f;
                    tg_attn_int_scores(&t, &q, gq, D, sc, ld, true);
                    tg_attn_int_scores(&t, &q, gq, D, sc2, ld, false);
                    assert_memory_equal(sc, sc2, sizeof sc); /* the same bits, and nothing outside the segment */
                    for (int j = 0; j < gq; j++) {
                        for (int64_t i = count; i < ld; i++) assert_true(sc[j * ld + i] == -12345.0f);
                        for (int64_t i = 0; i < count; i++) {
                            double exact = 0.0, mag = 0.0, usum = 0.0;
                            for (int64_t k = 0; k < D; k++) {
                                const double uk = u[(t0 + i) * D + k];
                                const double term = (double)qh[j * D + k] * (uk * grid[k] + grid[D + k]);
                                exact += term;
                                mag += fabs(term) + fabs((double)qh[j * D + k] * uk * grid[k]);
                                usum += uk;
                            }
                            const double bound = dq[j] / 2.0 * usum + 1e-5 * mag + 1e-6;
                            const double err = fabs((double)sc[j * ld + i] - exact);
                            if (!(err <= bound))
                                fail_msg("scores bits %d D %lld G %lld gq %d row %lld head %d: |error| %g > bound %g",
                                         bits, (long long)D, (long long)G, gq, (long long)i, j, err, bound);
                            if (err / bound > worst_ratio) worst_ratio = err / bound;
                            checked++;
                        }
                    }
                }
    assert_true(checked > 1000);
    assert_true(worst_ratio > 0.05); /* the bound is near what the rounding does, not vacuous */
}

/* Value sums of random segments against the exact sums, within dw / 2 * sum u (+ float rounding); VNNI ==
 * emulation. */
static void test_values_bound(void **state) {
    (void)state;
    NEED_INT_KERNELS();
    uint64_t seed = 13;
    static uint8_t tile[MAXG * MAXD];
    static int u[MAXG * MAXD];
    static uint16_t ts[MAXG], tz[MAXG];
    static float p[MAXQ * MAXG], o[MAXQ * MAXD], o2[MAXQ * MAXD], o0[MAXQ * MAXD];
    static int32_t scratch[MAXQ * (MAXD / 2 + 1) + MAXQ * 18];
    const int bitss[] = {8, 4, 2}, gqs[] = {1, 2, 3, 4, 5, 8};
    int checked = 0;
    double worst_ratio = 0.0;
    for (int bi = 0; bi < 3; bi++)
        for (int64_t D = 32; D <= MAXD; D += quick() ? 96 : 32) /* 96: the generic head dim */
            for (int64_t G = 8; G <= MAXG; G *= 2)
                for (int gi = 0; gi < 6; gi++) {
                    const int bits = bitss[bi], gq = gqs[gi];
                    random_tile(&seed, false, bits, G, D, tile, u);
                    for (int64_t r = 0; r < G; r++) {
                        ts[r] = tg_f32_to_f16((float)(0.001 + 0.1 * urand(&seed)));
                        tz[r] = tg_f32_to_f16((float)(urand(&seed) - 0.5));
                    }
                    const int64_t t0 = (int64_t)(urand(&seed) * (double)G);
                    const int64_t count = 1 + (int64_t)(urand(&seed) * (double)(G - t0));
                    const int64_t ld = MAXG;
                    for (int j = 0; j < gq; j++)
                        for (int64_t i = 0; i < ld; i++) p[j * ld + i] = i < count ? (float)urand(&seed) : 1e30f;
                    for (int64_t i = 0; i < gq * D; i++) o[i] = o2[i] = o0[i] = (float)(urand(&seed) - 0.5);
                    const tg_attn_tile t = {tile, bits, G, t0, count, 0};
                    tg_attn_int_values(&t, p, ld, gq, D, ts + t0, tz + t0, 0, o, scratch, true);
                    tg_attn_int_values(&t, p, ld, gq, D, ts + t0, tz + t0, 0, o2, scratch, false);
                    assert_memory_equal(o, o2, sizeof o);
                    const double W = bits == 8 ? 16383.0 : 255.0;
                    for (int j = 0; j < gq; j++) {
                        for (int64_t c = 0; c < D; c++) {
                            double exact = o0[j * D + c], mag = fabs(exact), bound = 0.0;
                            /* runs of 32 rows from the 8-aligned row below t0: each its own step dw */
                            for (int64_t R = t0 / 8 * 8; R < t0 + count; R += 32) {
                                double wmax = 0.0, us = 0.0;
                                for (int64_t r = R > t0 ? R : t0; r < R + 32 && r < t0 + count; r++) {
                                    const double w = (double)p[j * ld + (r - t0)] * tg_f16_to_f32(ts[r]);
                                    wmax = w > wmax ? w : wmax;
                                    const double term = (double)p[j * ld + (r - t0)] *
                                                        (u[r * D + c] * (double)tg_f16_to_f32(ts[r]) + tg_f16_to_f32(tz[r]));
                                    exact += term;
                                    mag += fabs(term) + fabs(w * u[r * D + c]);
                                    us += u[r * D + c];
                                }
                                bound += wmax / W / 2.0 * us;
                            }
                            bound += 1e-5 * mag + 1e-6;
                            const double err = fabs((double)o[j * D + c] - exact);
                            if (!(err <= bound))
                                fail_msg("values bits %d D %lld G %lld gq %d t0 %lld count %lld head %d channel %lld: "
                                         "|error| %g > bound %g", bits, (long long)D, (long long)G, gq, (long long)t0,
                                         (long long)count, j, (long long)c, err, bound);
                            if (err / bound > worst_ratio) worst_ratio = err / bound;
                            checked++;
                        }
                    }
                }
    assert_true(checked > 1000);
    assert_true(worst_ratio > 0.05);
}

/* A segment over several tiles (the consecutive groups of a kv-head, `next` bytes apart, their scales `stride`
 * elements apart) gives the bits of one call per tile: tg_attn_int_keys against tg_attn_int_prepare_keys +
 * tg_attn_int_scores, tg_attn_int_values against tg_attn_int_values of each tile alone; and the VNNI kernels give the
 * bits of the 256-bit emulation: the AVX2 table's, and where the CPU has AVX-512 the AVX-512 table's (512 bits; 256
 * bits for tiles of 8 rows and int2 values at head dims 96, 160, 224; vnni off: the AVX2 build's emulation). */
static void test_tile_runs(void **state) {
    (void)state;
    NEED_INT_KERNELS();
    enum { NT = 4 };
    uint64_t seed = 17;
    static uint8_t tiles[NT * MAXG * MAXD];
    static int u[MAXG * MAXD];
    static uint16_t grid[NT][2 * MAXD], ts[NT][2 * MAXG]; /* per tile: scales then zeros */
    static float qh[MAXQ * MAXD], bias[MAXQ], dq[MAXQ], p[MAXQ * NT * MAXG];
    static int32_t lo[MAXQ * MAXD / 4], hi[MAXQ * MAXD / 4], scratch[MAXQ * (MAXD + 4) + MAXQ * 18];
    static float sc[2][MAXQ * NT * MAXG], sc2[MAXQ * NT * MAXG], o[2][MAXQ * MAXD], o2[MAXQ * MAXD], o0[MAXQ * MAXD];
    const int bitss[] = {8, 4, 2}, gqs[] = {1, 2, 3, 5, 8, 11}, groups[] = {8, 16, 32, 48, 64};
    int runs = 0;
    const tg_attn_kernels *ak512 = tg_attn_kernels_for(TG_ISA_AVX512); /* NULL without AVX-512 (and on aarch64) */
    uint64_t hash[MAXD / 32];
    for (int i = 0; i < MAXD / 32; i++) hash[i] = 0xcbf29ce484222325ull;
    for (int bi = 0; bi < 3; bi++)
        for (int64_t D = 32; D <= MAXD; D += quick() ? 96 : 32)
            for (int gri = 0; gri < 5; gri++)
                for (int gi = 0; gi < 6; gi++) {
                    const int bits = bitss[bi], gq = gqs[gi];
                    const int64_t G = groups[gri];
                    seed = 17 + 1000003ull * (uint64_t)(((bi * 10 + D / 32) * 10 + gri) * 10 + gi); /* per case */
                    const size_t tb = (size_t)(G * D * bits / 8), stride = 2 * MAXD, vstride = 2 * MAXG;
                    const int64_t ld = NT * MAXG;
                    for (int keys = 0; keys < 2; keys++)
                        for (int j = 0; j < NT; j++) random_tile(&seed, keys, bits, G, D, tiles + j * tb, u);
                    for (int j = 0; j < NT; j++) {
                        for (int64_t k = 0; k < D; k++) {
                            grid[j][k] = tg_f32_to_f16((float)(0.001 + 0.1 * urand(&seed)));
                            grid[j][D + k] = tg_f32_to_f16((float)(urand(&seed) - 0.5));
                        }
                        for (int64_t r = 0; r < G; r++) {
                            ts[j][r] = tg_f32_to_f16((float)(0.001 + 0.1 * urand(&seed)));
                            ts[j][MAXG + r] = tg_f32_to_f16((float)(urand(&seed) - 0.5));
                        }
                    }
                    for (int64_t i = 0; i < gq * D; i++) qh[i] = (float)(4.0 * urand(&seed) - 2.0);
                    const int64_t t0 = (int64_t)(urand(&seed) * (double)G);
                    const int64_t count = 1 + (int64_t)(urand(&seed) * (double)(NT * G - t0));
                    for (int64_t i = 0; i < gq * ld; i++) p[i] = (float)urand(&seed);
                    for (int64_t i = 0; i < gq * D; i++) o0[i] = (float)(urand(&seed) - 0.5);
                    for (int vnni = 0; vnni < 2; vnni++) {
                        memcpy(o[vnni], o0, sizeof o0);
                        memcpy(o2, o0, sizeof o0);
                        for (size_t i = 0; i < MAXQ * NT * MAXG; i++) sc[vnni][i] = sc2[i] = -12345.0f;
                        /* the run */
                        const tg_attn_tile t = {tiles, bits, G, t0, count, tb};
                        tg_attn_int_queries q = {lo, hi, dq, bias};
                        tg_attn_int_keys(&t, qh, gq, D, grid[0], grid[0] + D, stride, scratch, sc[vnni], ld, vnni);
                        tg_attn_int_values(&t, p, ld, gq, D, ts[0] + t0, ts[0] + MAXG + t0, vstride, o[vnni], scratch,
                                           vnni);
                        /* tile by tile */
                        int64_t done = 0, j = 0;
                        for (; done < count; j++) {
                            const int64_t a = j == 0 ? t0 : 0, n = count - done < G - a ? count - done : G - a;
                            const tg_attn_tile tj = {tiles + j * tb, bits, G, a, n, 0};
                            tg_attn_int_prepare_keys(qh, gq, D, grid[j], grid[j] + D, bits, &q);
                            tg_attn_int_scores(&tj, &q, gq, D, sc2 + done, ld, vnni);
                            tg_attn_int_values(&tj, p + done, ld, gq, D, ts[j] + a, ts[j] + MAXG + a, 0, o2, scratch,
                                               vnni);
                            done += n;
                        }
                        assert_memory_equal(sc[vnni], sc2, sizeof sc2);
                        assert_memory_equal(o[vnni], o2, sizeof o2);
                        runs += j > 1;
                    }
                    if (memcmp(sc[0], sc[1], sizeof sc2) || memcmp(o[0], o[1], sizeof o2))
                        fail_msg("int%d D %d G %d gq %d: the VNNI kernels' bits differ from the emulation's", bits,
                                 (int)D, (int)G, gq);
                    for (int vnni = 0; ak512 && vnni < 2; vnni++) {
                        const tg_attn_tile t = {tiles, bits, G, t0, count, tb};
                        memcpy(o2, o0, sizeof o0);
                        for (size_t i = 0; i < MAXQ * NT * MAXG; i++) sc2[i] = -12345.0f;
                        ak512->int_keys(&t, qh, gq, D, grid[0], grid[0] + D, stride, scratch, sc2, ld, vnni);
                        ak512->int_values(&t, p, ld, gq, D, ts[0] + t0, ts[0] + MAXG + t0, vstride, o2, scratch, vnni);
                        if (memcmp(sc2, sc[1], sizeof sc2) || memcmp(o2, o[1], sizeof o2))
                            fail_msg("int%d D %d G %d gq %d vnni %d: the AVX-512 table's bits differ from the AVX2 "
                                     "table's", bits, (int)D, (int)G, gq, vnni);
                    }
                    hash[D / 32 - 1] = fnv1a(fnv1a(hash[D / 32 - 1], sc[1], (size_t)(gq * ld) * sizeof(float)), o[1],
                                             (size_t)(gq * D) * sizeof(float)); /* this case's results alone */
                }
    assert_true(runs > 100); /* most segments span several tiles */
    int wrong = 0;
    for (int64_t D = 32; D <= MAXD; D += quick() ? 96 : 32)
        if (hash[D / 32 - 1] != tile_runs_hash[D / 32 - 1]) {
            print_message("head dim %d: the results hash to 0x%016llxull, the x86 kernels' to 0x%016llxull\n", (int)D,
                          (unsigned long long)hash[D / 32 - 1], (unsigned long long)tile_runs_hash[D / 32 - 1]);
            wrong++;
        }
    assert_int_equal(wrong, 0);
}

/* Attention through caches whose KIVI groups are tiles (head dim 32 and 64, groups of 8 / 16 / 32, with and without a
 * residual, a StreamingLLM window, several shares): the integer kernels equal their emulation bit for bit and the
 * scalar float reference within the precision's tolerance. */
static void test_cache_attention(void **state) {
    (void)state;
    NEED_INT_KERNELS();
    const int dims[] = {32, 64};
    const int groups[] = {8, 16, 32};
    const int residuals[] = {0, -1}; /* -1: one group */
    const tg_kv_precision precs[] = {TG_KV_INT8, TG_KV_INT4, TG_KV_INT2};
    const float tols[] = {1e-4f, 5e-3f, 6e-3f}; /* |integer - float reference| on outputs of unit-range values (the
                                                  * weights' 8-bit rounding dominates for int4 / int2) */
    for (size_t di = 0; di < 2; di++)
        for (size_t gi = 0; gi < 3; gi++)
            for (size_t ri = 0; ri < 2; ri++)
                for (size_t pi = 0; pi < 3; pi++) {
                    const int D = dims[di], NH = 6, H = 2, HD = H * D, T = quick() ? 300 : 1000;
                    tg_cache_shape shape = {.n_layers = 1, .n_heads = NH, .n_kv_heads = H, .head_dim = D,
                                            .rope_theta = 10000.0f, .rope_style = TG_ROPE_HALF,
                                            .context_length = T + 8};
                    tg_cache_params p = tg_cache_default_params();
                    p.key_precision = p.value_precision = precs[pi];
                    p.group_size = groups[gi];
                    p.residual = residuals[ri] < 0 ? groups[gi] : 0;
                    if (ri == 1) { /* and bounded: sinks + a window */
                        p.sink = 4;
                        p.window = 500;
                    }
                    tg_error err = {0};
                    tg_kvcache *c = tg_kvcache_new(&shape, &p, &err);
                    if (!c) fail_msg("tg_kvcache_new: %s", err.msg);
                    assert_true(c->g.k.tiled && c->g.v.tiled);
                    uint64_t seed = 5 + di + 10 * gi + 100 * ri + 1000 * pi;
                    float *k = malloc((size_t)HD * sizeof(float)), *v = malloc((size_t)HD * sizeof(float));
                    float *q = malloc((size_t)NH * D * sizeof(float)), *a = malloc((size_t)NH * D * sizeof(float));
                    float *b = malloc((size_t)NH * D * sizeof(float)), *ref = malloc((size_t)NH * D * sizeof(float));
                    assert_true(k && v && q && a && b && ref);
                    float worst = 0.0f;
                    for (int t = 0; t < T; t++) {
                        for (int i = 0; i < HD; i++) {
                            k[i] = (float)(2.0 * urand(&seed) - 1.0);
                            v[i] = (float)(2.0 * urand(&seed) - 1.0);
                        }
                        tg_kvcache_append(c, 0, t, k, v);
                        if (t % 97 != 96 && t != T - 1) continue;
                        for (int i = 0; i < NH * D; i++) q[i] = (float)(4.0 * urand(&seed) - 2.0);
                        test_attend(c, 0, t, q, a, 2);
                        tg_kvcache_set_int_vnni(c, false);
                        test_attend(c, 0, t, q, b, 1);
                        tg_kvcache_set_int_vnni(c, true);
                        assert_memory_equal(a, b, (size_t)NH * D * sizeof(float));
                        tg_kvcache_set_simd(c, false);
                        test_attend(c, 0, t, q, ref, 1);
                        tg_kvcache_set_simd(c, true);
                        for (int i = 0; i < NH * D; i++) {
                            assert_true(isfinite(a[i]));
                            const float d = fabsf(a[i] - ref[i]);
                            worst = d > worst ? d : worst;
                        }
                    }
                    if (!(worst <= tols[pi]))
                        fail_msg("%s D %d G %d residual %d: |integer - float reference| %g > %g",
                                 tg_kv_precision_name(precs[pi]), D, groups[gi], p.residual, (double)worst,
                                 (double)tols[pi]);
                    free(k), free(v), free(q), free(a), free(b), free(ref);
                    tg_kvcache_free(c);
                }
}

#else
static void test_tile_layout(void **state) { (void)state; skip(); }
static void test_scores_bound(void **state) { (void)state; skip(); }
static void test_values_bound(void **state) { (void)state; skip(); }
static void test_tile_runs(void **state) { (void)state; skip(); }
static void test_cache_attention(void **state) { (void)state; skip(); }
#endif

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tile_layout),
        cmocka_unit_test(test_scores_bound),
        cmocka_unit_test(test_values_bound),
        cmocka_unit_test(test_tile_runs),
        cmocka_unit_test(test_cache_attention),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
