/* test_isa.c — the run-time choice of instruction set (util/cpu_features.h) and the kernel tables
 * (kernels/kernels.h, kvcache/attend_kernels.h):
 * - the dispatcher never hands out a table the CPU lacks, and TG_ISA caps the choice (checked in child processes
 *   of this binary run with TG_ISA set);
 * - every kernel row of every table this CPU runs against the scalar reference: a weight type's decode kernel
 *   within matmul.h's stated bounds of the exact product (1e-5 of sum |w x|, plus the activation quantisation's
 *   bound for the block types), its prefill kernel bit for bit its decode kernel, the activation quantisers and the
 *   exact conversions bit for bit the scalar ones, the other vector primitives within stated tolerances;
 * - the attention tables' float block kernels against a double-precision reference, and every attention table of
 *   this CPU giving the x86 tables' bits (test_attention_bits_across_architectures);
 * - two tables of this CPU that differ in some kernels (AVX2 / AVX-512, NEON / dotprod, dotprod / i8mm) giving the
 *   same bits, decode and prefill, over shapes that leave every kind of partial tile (test_tables_agree);
 * - the tables of both architectures giving the same bits: each type's decode and prefill kernels on fixed inputs
 *   hash to the values the x86 tables gave (test_bits_across_architectures). */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "kernels/ggml_blocks.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "kernels/types.h"
#include "kvcache/attend_kernels.h"
#include "util/cpu_features.h"
#include "util/half.h"
#include "test_rng.h"


/* ---- the dispatcher ------------------------------------------------------------------------------------------- */

/* The isa TG_ISA=env should give: its set capped at the CPU's best; the best where env is unset, unknown or names a
 * set of the other architecture. */
static tg_isa expected_isa(const char *env) {
    const tg_isa best = tg_cpu_features_get()->best;
    tg_isa want;
    if (!env || !tg_isa_parse(env, &want) || want >= best) return best;
    return want == TG_ISA_SCALAR || tg_isa_arch(want) == tg_isa_arch(best) ? want : best;
}

/* The kernel table an isa gets: its own, or the best table below it that this build has. */
static tg_isa expected_table(tg_isa isa) {
    while (isa > TG_ISA_SCALAR && !tg_kernels_for(isa)) isa = (tg_isa)(isa - 1);
    return isa;
}

static void test_features_consistent(void **state) {
    (void)state;
    const tg_cpu_features *f = tg_cpu_features_get();
    assert_ptr_equal(f, tg_cpu_features_get());
    assert_true(!f->avx512 || f->avx2);
    assert_true(!f->i8mm || f->dotprod);
    assert_true(!f->dotprod || f->neon);
    assert_true(!f->neon || !f->avx2);
    assert_int_equal(f->best, f->avx512    ? TG_ISA_AVX512
                              : f->avx2    ? TG_ISA_AVX2
                              : f->i8mm    ? TG_ISA_I8MM
                              : f->dotprod ? TG_ISA_DOTPROD
                              : f->neon    ? TG_ISA_NEON
                                           : TG_ISA_SCALAR);
    assert_true(f->isa <= f->best);
    assert_int_equal(f->isa, expected_isa(getenv("TG_ISA")));
    assert_int_equal(tg_isa_arch(TG_ISA_SCALAR), 0);
    assert_int_equal(tg_isa_arch(TG_ISA_AVX512), 1);
    assert_int_equal(tg_isa_arch(TG_ISA_NEON), 2);
    assert_int_equal(tg_isa_arch(TG_ISA_COUNT), -1);
    for (int i = 0; i < TG_ISA_COUNT; i++) {
        tg_isa back;
        assert_true(tg_isa_parse(tg_isa_name((tg_isa)i), &back));
        assert_int_equal(back, i);
    }
    tg_isa want;
    assert_false(tg_isa_parse("avx3", &want));
    assert_string_equal(tg_isa_name(TG_ISA_COUNT), "?");
}

static void test_dispatch_never_exceeds_cpu(void **state) {
    (void)state;
    const tg_cpu_features *f = tg_cpu_features_get();
    const tg_cpu_kernels *k = tg_kernels();
    assert_non_null(k);
    assert_ptr_equal(k, tg_kernels());
    assert_true(k->isa <= f->isa);
    assert_string_equal(k->name, tg_isa_name(k->isa));
    assert_non_null(tg_kernels_for(TG_ISA_SCALAR));
    assert_null(tg_kernels_for(TG_ISA_COUNT));
    for (int i = 0; i < TG_ISA_COUNT; i++) {
        const tg_cpu_kernels *t = tg_kernels_for((tg_isa)i);
        const tg_attn_kernels *a = tg_attn_kernels_for((tg_isa)i);
        if (i > (int)f->best) {
            assert_null(t);
            assert_null(a);
        }
        if (t) assert_int_equal(t->isa, i);
        if (a) assert_int_equal(a->isa, i);
        /* attention tables: every set with a kernel table but scalar */
        assert_true(tg_isa_arch((tg_isa)i) != 0 ? (a != NULL) == (t != NULL) : a == NULL);
    }
    const tg_attn_kernels *a = tg_attn_kernels_get();
    assert_true(a ? a->isa == k->isa : k->isa == TG_ISA_SCALAR);
}

/* This binary's path as run (for the emulator's wrapper, which cannot take /proc/self/exe). */
static const char *self_path;

/* The binary run again with TG_ISA=name: its child mode checks its own choice (main below). */
static int run_child(const char *name) {
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("TG_ISA", name, 1);
        /* under user-mode emulation (make test-aarch64) the binary is run again through the emulator's wrapper */
        const char *emu = getenv("TG_TEST_EMULATOR");
        if (emu && *emu) execl(emu, emu, self_path, "--child", (char *)NULL);
        execl("/proc/self/exe", "test_isa", "--child", (char *)NULL); /* Linux */
        execl(self_path, self_path, "--child", (char *)NULL);          /* elsewhere (macOS) */
        _exit(127);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static void test_env_caps_choice(void **state) {
    (void)state;
    const char *names[] = {"scalar", "avx2", "avx512", "neon", "dotprod", "i8mm", "nonsense"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (run_child(names[i]) != 0) fail_msg("TG_ISA=%s: the child's choice was wrong", names[i]);
}

/* Child mode: the choice follows TG_ISA, capped at the CPU's best; the tables in use are of that set. */
static int child_check(void) {
    const tg_cpu_features *f = tg_cpu_features_get();
    const tg_isa expect = expected_isa(getenv("TG_ISA")), table = expected_table(expect);
    const tg_attn_kernels *a = tg_attn_kernels_get();
    if (f->isa != expect || tg_kernels()->isa != table) return 1;
    if (table == TG_ISA_SCALAR ? a != NULL : !a || a->isa != table) return 1;
    return 0;
}

/* ---- weight kernels against the reference ------------------------------------------------------------------- */

/* A random row-major matrix of `type` (rows of tg_row_bytes): the encoder's rows of uniform values where the type
 * has one, else random codes with small random fp16 scales (GGUF block types) or random Q8_0 / Q4_0 blocks. */
static uint8_t *make_matrix(rng_t *r, tg_dtype type, int64_t rows, int64_t cols) {
    const tg_weight_type *wt = tg_weight_type_of(type);
    const size_t rb = tg_row_bytes(type, cols);
    uint8_t *p = malloc(rb * (size_t)rows);
    float *v = malloc((size_t)cols * sizeof *v);
    assert_true(p && v);
    for (int64_t i = 0; i < rows; i++) {
        uint8_t *row = p + (size_t)i * rb;
        int at[2];
        if (tg_ggml_scale_fields(type, at) || !wt->encode_row) {
            if (!tg_ggml_scale_fields(type, at)) at[0] = 0, at[1] = -1; /* Q8_0 / Q4_0: the scale first */
            for (size_t k = 0; k < rb; k++) row[k] = (uint8_t)rng_next(r);
            for (size_t b = 0; b < rb / wt->block_bytes; b++)
                for (int f = 0; f < 2 && at[f] >= 0; f++) {
                    const uint16_t d = tg_f32_to_f16(rng_unit(r) * (wt->block_elems > 32 ? 0.004f : 0.05f));
                    memcpy(row + b * wt->block_bytes + (size_t)at[f], &d, 2);
                }
        } else {
            for (int64_t j = 0; j < cols; j++) v[j] = rng_unit(r);
            wt->encode_row(v, row, cols);
        }
    }
    free(v);
    return p;
}

/* The largest |x| of the block of length n holding element j. */
static double block_max(const float *x, int64_t j, int64_t n) {
    double m = 0.0;
    for (int64_t i = j / n * n; i < j / n * n + n; i++) m = fabs((double)x[i]) > m ? fabs((double)x[i]) : m;
    return m;
}

/* Table k's prefill of `type` (rows rows of rb bytes at w, n tokens): y[t * ldy + r] = row r . token t, by whichever
 * prefill kernel the table has (float tiles of 2 rows x tile_vecs tokens over x, n tokens of cols floats; the
 * Q8_0-form rows xq as they are, or packed eight tokens a group; the K-quant form xk). */
static void prefill(const tg_cpu_kernels *k, tg_dtype type, const uint8_t *w, int rows, int64_t cols, const float *x,
                    const tg_q8x_block *xq, const tg_q8k_block *xk, int n, float *y, size_t ldy) {
    const tg_type_kernels *kt = &k->type[type];
    const size_t rb = tg_row_bytes(type, cols);
    const int64_t nb = cols / TG_QK, nsup = cols / TG_Q8K_ELEMS;
    if (kt->tile) {
        for (int t0 = 0; t0 < n; t0 += k->tile_vecs)
            for (int r0 = 0; r0 < rows; r0 += 2) {
                const int nt = n - t0 < k->tile_vecs ? n - t0 : k->tile_vecs, nr = rows - r0 < 2 ? rows - r0 : 2;
                kt->tile(w + (size_t)r0 * rb, rb, nr, (const uint8_t *)(x + (size_t)t0 * (size_t)cols),
                         (size_t)cols * sizeof(float), nt, cols, y + (size_t)t0 * ldy + (size_t)r0, ldy);
            }
    } else if (kt->gemm_q8x_rows) {
        kt->gemm_q8x_rows(w, rb, rows, xq, nb, n, y, ldy);
    } else if (kt->gemm_q8x) {
        const int groups = (n + 7) / 8;
        tg_q8x_pack8 *xp = malloc((size_t)(groups * nb) * sizeof *xp);
        assert_non_null(xp);
        for (int g = 0; g < groups; g++)
            tg_pack8_q8x(xq + (size_t)(g * 8 * nb), nb, n - 8 * g < 8 ? n - 8 * g : 8, nb, xp + (size_t)(g * nb));
        kt->gemm_q8x(w, rb, rows, xp, nb, n, y, ldy);
        free(xp);
    } else {
        kt->gemm_q8k(w, rb, rows, xk, nsup, n, y, ldy);
    }
}

/* One table's kernels of `type` against the exact product; its prefill against its decode, bit for bit. */
static void check_type(const tg_cpu_kernels *k, tg_dtype type, rng_t *r) {
    const tg_weight_type *wt = tg_weight_type_of(type);
    const tg_type_kernels *kt = &k->type[type];
    enum { ROWS = 19, N = 5 };
    const int64_t cols = wt->block_elems >= 256 ? 512 : 256 + (wt->block_elems == 1 ? 3 : 0);
    const size_t rb = tg_row_bytes(type, cols);
    uint8_t *w = make_matrix(r, type, ROWS, cols);
    float *x = malloc((size_t)(N * cols) * sizeof *x), *row = malloc((size_t)cols * sizeof *row);
    float y[N][ROWS], yp[N * ROWS];
    assert_true(x && row);
    for (int64_t i = 0; i < N * cols; i++) x[i] = rng_unit(r) * (i % 37 == 0 ? 8.0f : 1.0f);
    const int64_t nb = cols / TG_QK, nsup = cols / TG_Q8K_ELEMS;
    tg_q8x_block *xq = malloc((size_t)(N * nb) * sizeof *xq), *xq_ref = malloc((size_t)(N * nb) * sizeof *xq);
    const size_t nk = (size_t)(N * (nsup ? nsup : 1));
    tg_q8k_block *xk = malloc(nk * sizeof *xk), *xk_ref = malloc(nk * sizeof *xk);
    assert_true(xq && xq_ref && xk && xk_ref);
    const void *xt[N];
    for (int t = 0; t < N; t++) {
        const float *xr = x + (size_t)t * (size_t)cols;
        if (wt->act == TG_ACT_Q8X) {
            k->quantize_q8x(xr, xq + t * nb, cols);
            tg_quantize_q8x_ref(xr, xq_ref + t * nb, cols);
            xt[t] = xq + t * nb;
        } else if (wt->act == TG_ACT_Q8K) {
            k->quantize_q8k(xr, xk + t * nsup, cols);
            tg_quantize_q8k_ref(xr, xk_ref + t * nsup, cols);
            xt[t] = xk + t * nsup;
        } else {
            xt[t] = xr;
        }
    }
    if (wt->act == TG_ACT_Q8X) assert_memory_equal(xq, xq_ref, (size_t)(N * nb) * sizeof *xq);
    if (wt->act == TG_ACT_Q8K) assert_memory_equal(xk, xk_ref, (size_t)(N * nsup) * sizeof *xk);
    for (int t = 0; t < N; t++) kt->gemv(w, rb, ROWS, xt[t], cols, y[t]);
    for (int64_t i = 0; i < ROWS; i++) {
        wt->decode_row(w + (size_t)i * rb, row, cols);
        for (int t = 0; t < N; t++) {
            const float *xr = x + (size_t)t * (size_t)cols;
            double exact = 0.0, e = 0.0, q = 0.0;
            for (int64_t j = 0; j < cols; j++) {
                exact += (double)row[j] * xr[j];
                e += fabs((double)row[j] * xr[j]);
                if (wt->act == TG_ACT_Q8X) q += fabs((double)row[j]) * block_max(xr, j, TG_QK) * 0.56 / 127.0;
                if (wt->act == TG_ACT_Q8K) q += fabs((double)row[j]) * block_max(xr, j, TG_Q8K_ELEMS) / 254.0;
            }
            const double tol = 1e-5 * e + 1.01 * q;
            if (fabs((double)y[t][i] - exact) > tol)
                fail_msg("%s %s row %lld token %d: %.9g vs exact %.9g (tol %.3g)", k->name, wt->name, (long long)i, t,
                         (double)y[t][i], exact, tol);
        }
    }
    /* prefill: the bits of decoding each token */
    memset(yp, 0, sizeof yp);
    prefill(k, type, w, ROWS, cols, x, xq, xk, N, yp, ROWS);
    if (memcmp(yp, y, sizeof yp) != 0) fail_msg("%s %s: prefill differs from decode", k->name, wt->name);
    free(w), free(x), free(row), free(xq), free(xq_ref), free(xk), free(xk_ref);
}

static void test_weight_rows_against_reference(void **state) {
    (void)state;
    int checked = 0;
    for (int isa = TG_ISA_SCALAR + 1; isa < TG_ISA_COUNT; isa++) {
        const tg_cpu_kernels *k = tg_kernels_for((tg_isa)isa);
        if (!k) continue;
        for (int t = 0; t < TG_DT_COUNT; t++) {
            rng_t r = {(uint64_t)(100 + t)};
            if (!k->type[t].gemv) continue;
            check_type(k, (tg_dtype)t, &r);
            checked++;
        }
    }
    const tg_isa best = tg_cpu_features_get()->best;
    if (best == TG_ISA_SCALAR) skip();
    /* an x86 table covers every type; the aarch64 ones F32, F16, BF16, Q8_0, Q4_0 and Q2_K .. Q6_K */
    assert_true(checked >= (tg_isa_arch(best) == 1 ? TG_DT_COUNT : 10));
}

/* Tables a and b give the same bits for every type they both have kernels for: decode over 1 .. ROWS rows, and
 * prefill over row counts and token counts that leave every kind of partial tile (rows and tokens past a multiple of
 * 2, 4 and 8). */
static void tables_agree(const tg_cpu_kernels *a, const tg_cpu_kernels *b) {
    enum { ROWS = 37, N = 9 };
    for (int t = 0; t < TG_DT_COUNT; t++) {
        if (!a->type[t].gemv || !b->type[t].gemv) continue;
        const tg_weight_type *wt = tg_weight_type_of((tg_dtype)t);
        rng_t r = {(uint64_t)(300 + t)};
        const int64_t cols = wt->block_elems >= 256 ? 768 : 256;
        const int64_t nb = cols / TG_QK, nsup = cols / TG_Q8K_ELEMS;
        const size_t rb = tg_row_bytes((tg_dtype)t, cols);
        uint8_t *w = make_matrix(&r, (tg_dtype)t, ROWS, cols);
        float *x = malloc((size_t)(N * cols) * sizeof *x), ya[N * ROWS], yb[N * ROWS];
        tg_q8x_block *xq = malloc((size_t)(N * nb) * sizeof *xq);
        tg_q8k_block *xk = malloc((size_t)(N * (nsup ? nsup : 1)) * sizeof *xk);
        assert_true(x && xq && xk);
        for (int64_t j = 0; j < N * cols; j++) x[j] = rng_unit(&r);
        for (int i = 0; i < N; i++) {
            if (wt->act == TG_ACT_Q8X) tg_quantize_q8x_ref(x + i * cols, xq + i * nb, cols);
            if (wt->act == TG_ACT_Q8K) tg_quantize_q8k_ref(x + i * cols, xk + i * nsup, cols);
        }
        const void *xf = wt->act == TG_ACT_Q8X ? (const void *)xq : wt->act == TG_ACT_Q8K ? (const void *)xk : x;
        for (int nr = 1; nr <= ROWS; nr += 6) {
            a->type[t].gemv(w, rb, nr, xf, cols, ya);
            b->type[t].gemv(w, rb, nr, xf, cols, yb);
            if (memcmp(ya, yb, (size_t)nr * sizeof(float)) != 0)
                fail_msg("%s: %s and %s differ", wt->name, a->name, b->name);
        }
        static const int nrs[] = {1, 2, 3, 4, 5, 8, 19, 37};
        for (size_t i = 0; i < sizeof nrs / sizeof nrs[0]; i++)
            for (int n = 2; n <= N; n++) {
                memset(ya, 0, sizeof ya), memset(yb, 0, sizeof yb);
                prefill(a, (tg_dtype)t, w, nrs[i], cols, x, xq, xk, n, ya, ROWS);
                prefill(b, (tg_dtype)t, w, nrs[i], cols, x, xq, xk, n, yb, ROWS);
                if (memcmp(ya, yb, sizeof ya) != 0)
                    fail_msg("%s: %s and %s prefill differ (%d rows, %d tokens)", wt->name, a->name, b->name, nrs[i],
                             n);
            }
        free(w), free(x), free(xq), free(xk);
    }
}

/* The tables of this CPU that differ in some kernels give the same bits: AVX2 and AVX-512; NEON and dotprod;
 * dotprod and i8mm (smmla prefill against sdot's). */
static void test_tables_agree(void **state) {
    (void)state;
    static const tg_isa pairs[][2] = {
        {TG_ISA_AVX2, TG_ISA_AVX512}, {TG_ISA_NEON, TG_ISA_DOTPROD}, {TG_ISA_DOTPROD, TG_ISA_I8MM}};
    int compared = 0;
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        const tg_cpu_kernels *a = tg_kernels_for(pairs[i][0]), *b = tg_kernels_for(pairs[i][1]);
        if (!a || !b) continue;
        tables_agree(a, b);
        compared++;
    }
    if (!compared) skip();
}

/* The fast tables of both architectures give the same bits (arith_order.h's one order, lane for lane): each type's
 * decode kernel (one token) and prefill kernel (six tokens, the x86 tables' packed Q8_0 form against aarch64's rows
 * as they are, smmla's tiles against sdot's) on fixed inputs, in every table of this CPU that has one, hash
 * (FNV-1a over the results' bytes) to the values the x86 tables (AVX2 and AVX-512) gave, recorded here. The inputs
 * are the same bits on every machine (test_rng.h, the exact fp16 conversions, the scalar activation quantisers). */
static uint64_t fnv1a_more(uint64_t h, const void *p, size_t n) {
    for (size_t i = 0; i < n; i++) h = (h ^ ((const uint8_t *)p)[i]) * 0x100000001b3ull;
    return h;
}
static uint64_t fnv1a(const void *p, size_t n) { return fnv1a_more(0xcbf29ce484222325ull, p, n); }

static void test_bits_across_architectures(void **state) {
    (void)state;
    static const struct {
        tg_dtype type;
        uint64_t hash;    /* decode: one token, ROWS rows */
        uint64_t prefill; /* prefill: N tokens (the first the decoded one), ROWS rows */
    } want[] = {
        {TG_DT_F32, 0xb55781f4f18aecc7ull, 0x1225280f140b9f44ull},
        {TG_DT_F16, 0x409027d0e77206efull, 0x852b9154389fcdd8ull},
        {TG_DT_BF16, 0x35041cd657e19c79ull, 0xdcad792cf288f972ull},
        {TG_DT_Q8_0, 0xe7984b3854e87640ull, 0xdd0b2eef39e36275ull},
        {TG_DT_Q4_0, 0x0406977916f95fbfull, 0xa3121439841ed10dull},
        {TG_DT_Q2_K, 0xa532e91182bb6678ull, 0xbf9560bdf0fb12a0ull},
        {TG_DT_Q3_K, 0xa47fb46c4889a075ull, 0x0bd89b84f1eb2ed2ull},
        {TG_DT_Q4_K, 0x4a35721c2446c169ull, 0xf06f589d620a47d9ull},
        {TG_DT_Q5_K, 0x35ad1fd2cf678536ull, 0xc0a5fd527b50c02cull},
        {TG_DT_Q6_K, 0x5584ce80ded1edc3ull, 0x5951ffba9874cc6cull},
    };
    enum { ROWS = 21, N = 6 };
    int checked = 0, wrong = 0;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const tg_dtype t = want[i].type;
        const tg_weight_type *wt = tg_weight_type_of(t);
        rng_t r = {(uint64_t)(500 + t)};
        const int64_t cols = wt->block_elems >= 256 ? 768 : wt->block_elems == 1 ? 259 : 256;
        const int64_t nb = cols / TG_QK, nsup = cols / TG_Q8K_ELEMS;
        uint8_t *w = make_matrix(&r, t, ROWS, cols);
        float *x = malloc((size_t)(N * cols) * sizeof *x), y[ROWS], yp[N * ROWS];
        tg_q8x_block *xq = malloc((size_t)(N * (nb ? nb : 1)) * sizeof *xq);
        tg_q8k_block *xk = malloc((size_t)(N * (nsup ? nsup : 1)) * sizeof *xk);
        assert_true(x && xq && xk);
        for (int64_t j = 0; j < N * cols; j++) x[j] = rng_unit(&r) * (j % cols % 29 == 0 ? 6.0f : 1.0f);
        for (int n = 0; n < N; n++) {
            if (wt->act == TG_ACT_Q8X) tg_quantize_q8x_ref(x + n * cols, xq + n * nb, cols);
            if (wt->act == TG_ACT_Q8K) tg_quantize_q8k_ref(x + n * cols, xk + n * nsup, cols);
        }
        const void *xf = wt->act == TG_ACT_Q8X ? (const void *)xq : wt->act == TG_ACT_Q8K ? (const void *)xk : x;
        for (int isa = TG_ISA_SCALAR + 1; isa < TG_ISA_COUNT; isa++) {
            const tg_cpu_kernels *k = tg_kernels_for((tg_isa)isa);
            if (!k || !k->type[t].gemv || (isa > TG_ISA_SCALAR + 1 && k == tg_kernels_for((tg_isa)(isa - 1)))) continue;
            k->type[t].gemv(w, tg_row_bytes(t, cols), ROWS, xf, cols, y);
            memset(yp, 0, sizeof yp);
            prefill(k, t, w, ROWS, cols, x, xq, xk, N, yp, ROWS);
            const uint64_t h = fnv1a(y, sizeof y), hp = fnv1a(yp, sizeof yp);
            checked++;
            if (h != want[i].hash || hp != want[i].prefill) {
                print_message("%s %s: hashes 0x%016llxull 0x%016llxull, x86's 0x%016llxull 0x%016llxull\n", k->name,
                              wt->name, (unsigned long long)h, (unsigned long long)hp,
                              (unsigned long long)want[i].hash, (unsigned long long)want[i].prefill);
                wrong++;
            }
        }
        free(w), free(x), free(xq), free(xk);
    }
    if (!checked) skip();
    assert_int_equal(wrong, 0);
}

/* ---- vector primitives ---------------------------------------------------------------------------------------- */

static void test_vec_rows_against_scalar(void **state) {
    (void)state;
    const tg_cpu_kernels *s = tg_kernels_for(TG_ISA_SCALAR);
    enum { N = 203 };
    float x[N], ya[N], yb[N], fa[N], fb[N];
    uint16_t h[N], ha[N], hb[N];
    rng_t r = {7};
    for (int i = 0; i < N; i++) {
        x[i] = 20.0f * rng_unit(&r);
        h[i] = (uint16_t)rng_next(&r);
        if ((h[i] & 0x7c00) == 0x7c00) h[i] &= 0xfc00; /* no fp16 NaN: F16C quiets a signalling one */
    }
    x[17] = NAN;
    for (int isa = TG_ISA_SCALAR + 1; isa < TG_ISA_COUNT; isa++) {
        const tg_cpu_kernels *k = tg_kernels_for((tg_isa)isa);
        if (!k) continue;
        for (int n = 0; n <= N; n += n < 20 ? 1 : 61) {
            /* exact everywhere: the conversions, the scaling (one rounding), the maximum */
            k->f16_to_f32_row(h, fa, n), s->f16_to_f32_row(h, fb, n);
            assert_memory_equal(fa, fb, (size_t)n * sizeof(float));
            for (int i = 0; i < n; i++) ya[i] = x[i] == x[i] ? x[i] : 0.0f;
            k->f32_to_f16_row(ya, ha, n), s->f32_to_f16_row(ya, hb, n);
            assert_memory_equal(ha, hb, (size_t)n * sizeof(uint16_t));
            const int64_t done = k->bf16_to_f32_row(h, fa, n);
            s->bf16_to_f32_row(h, fb, done);
            assert_memory_equal(fa, fb, (size_t)done * sizeof(float));
            memcpy(ya, x, sizeof x), memcpy(yb, x, sizeof x);
            k->scale_f32(ya, 0.37f, n), s->scale_f32(yb, 0.37f, n);
            assert_memory_equal(ya, yb, (size_t)n * sizeof(float));
            float ma = -INFINITY, mb;
            const int64_t seen = k->max_skip_nan(x, n, &ma);
            s->max_skip_nan(x, seen, &mb);
            assert_true(seen <= n && (seen == 0 || ma == mb));
            /* y += a x: one fma or a product and a sum, within one rounding of each */
            for (int i = 0; i < n; i++) ya[i] = yb[i] = rng_unit(&r);
            k->axpy_f32(0.3f, fa, ya, n), s->axpy_f32(0.3f, fa, yb, n);
            for (int i = 0; i < n; i++)
                if (!(fabsf(ya[i] - yb[i]) <= 1e-6f * (fabsf(yb[i]) + fabsf(0.3f * fa[i])) ||
                      (ya[i] != ya[i] && yb[i] != yb[i])))
                    fail_msg("%s axpy %d: %.9g vs %.9g", k->name, i, (double)ya[i], (double)yb[i]);
            /* exp(x - m) within 2 ulp per element (vec.h), the sum within 1e-6 relative */
            for (int i = 0; i < n; i++) ya[i] = yb[i] = x[i] == x[i] ? x[i] - 20.0f : x[i];
            const float sa = k->exp_shift_sum(ya, n, 0.0f), sb = s->exp_shift_sum(yb, n, 0.0f);
            for (int i = 0; i < n; i++)
                if (!(fabsf(ya[i] - yb[i]) <= 2.5e-7f * fabsf(yb[i]) || (ya[i] != ya[i] && yb[i] != yb[i])))
                    fail_msg("%s exp %d: %.9g vs %.9g", k->name, i, (double)ya[i], (double)yb[i]);
            if (!(fabsf(sa - sb) <= 1e-6f * fabsf(sb) || (sa != sa && sb != sb)))
                fail_msg("%s exp sum n %d: %.9g vs %.9g", k->name, n, (double)sa, (double)sb);
            /* silu(g) * u within 1e-6 relative of the scalar (plus 1e-30 absolute near zero) */
            for (int i = 0; i < n; i++) ya[i] = yb[i] = x[i] == x[i] ? x[i] : 1.0f;
            k->swiglu(ya, fa, n), s->swiglu(yb, fa, n);
            for (int i = 0; i < n; i++)
                if (!(fabsf(ya[i] - yb[i]) <= 1e-6f * fabsf(yb[i]) + 1e-30f || (ya[i] != ya[i] && yb[i] != yb[i])))
                    fail_msg("%s swiglu %d: %.9g vs %.9g", k->name, i, (double)ya[i], (double)yb[i]);
            /* gelu_tanh(g) * u: 1e-6 relative plus 2e-7 |g u| absolute (ops.h: left of 0 the sigmoid's argument z
             * carries a few ulp of its own into exp(-z), sigmoid(z) |z| <= 0.28 of them into the result) */
            for (int i = 0; i < n; i++) ya[i] = yb[i] = x[i] == x[i] ? x[i] : 1.0f;
            k->geglu_tanh(ya, fa, n), s->geglu_tanh(yb, fa, n);
            for (int i = 0; i < n; i++) {
                const float gu = fabsf((x[i] == x[i] ? x[i] : 1.0f) * fa[i]);
                if (!(fabsf(ya[i] - yb[i]) <= 1e-6f * fabsf(yb[i]) + 2e-7f * gu || (ya[i] != ya[i] && yb[i] != yb[i])))
                    fail_msg("%s geglu_tanh %d: %.9g vs %.9g", k->name, i, (double)ya[i], (double)yb[i]);
            }
        }
    }
}

/* ---- attention: float block kernels against a double-precision reference --------------------------------------- */

static void test_attention_blocks_against_reference(void **state) {
    (void)state;
    enum { D = 64, GQ = 3, NR = 8 };
    const int kinds[] = {TG_SEG_F32, TG_SEG_F16, TG_SEG_BF16};
    rng_t r = {5};
    float q[GQ * D], p[GQ * NR], rowsf[NR][D], sc[GQ * NR], o[GQ * D], wide[D];
    uint8_t store[NR][D * 4];
    for (int i = 0; i < GQ * D; i++) q[i] = rng_unit(&r);
    for (int i = 0; i < GQ * NR; i++) p[i] = 0.5f * (rng_unit(&r) + 1.0f);
    int checked = 0;
    for (int isa = TG_ISA_SCALAR + 1; isa < TG_ISA_COUNT; isa++) {
        const tg_attn_kernels *ak = tg_attn_kernels_for((tg_isa)isa);
        if (!ak) continue;
        for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++) {
            const int kind = kinds[ki];
            tg_attn_block b;
            memset(&b, 0, sizeof b);
            b.kind = kind;
            b.nr = NR - 2;
            for (int i = 0; i < NR; i++) {
                for (int k = 0; k < D; k++) {
                    const float v = rng_unit(&r);
                    const uint16_t hv = kind == TG_SEG_F16 ? tg_f32_to_f16(v) : tg_f32_to_bf16(v);
                    if (kind == TG_SEG_F32) memcpy(store[i] + 4 * k, &v, 4);
                    else memcpy(store[i] + 2 * k, &hv, 2);
                    rowsf[i][k] = kind == TG_SEG_F32 ? v : kind == TG_SEG_F16 ? tg_f16_to_f32(hv) : tg_bf16_to_f32(hv);
                }
                b.rows[i] = store[i < b.nr ? i : 0];
            }
            for (int i = 0; i < b.nr; i++) { /* widening is exact */
                ak->widen(&b, i, D, wide);
                assert_memory_equal(wide, rowsf[i], sizeof wide);
            }
            ak->scores(&b, q, GQ, D, sc, NR);
            memset(o, 0, sizeof o);
            ak->values(&b, p, NR, GQ, D, o);
            for (int j = 0; j < GQ; j++) {
                for (int i = 0; i < b.nr; i++) {
                    double s = 0.0, e = 0.0;
                    for (int k = 0; k < D; k++) {
                        s += (double)q[j * D + k] * rowsf[i][k];
                        e += fabs((double)q[j * D + k] * rowsf[i][k]);
                    }
                    if (fabs(sc[j * NR + i] - s) > 1e-6 * e) fail_msg("isa %d kind %d score %d %d", isa, kind, j, i);
                }
                for (int k = 0; k < D; k++) {
                    double s = 0.0, e = 0.0;
                    for (int i = 0; i < b.nr; i++) {
                        s += (double)p[j * NR + i] * rowsf[i][k];
                        e += fabs((double)p[j * NR + i] * rowsf[i][k]);
                    }
                    if (fabs(o[j * D + k] - s) > 1e-6 * e) fail_msg("isa %d kind %d value %d %d", isa, kind, j, k);
                }
            }
            checked++;
        }
    }
    if (!checked) skip();
}

/* The attention tables' float block kernels give the same bits on both architectures: fold, scores, value sums and
 * widening of fp32 / fp16 / bf16 rows and of int8 / int4 / int2 codes (keys with a folded grid, values with their
 * rows' scales) on fixed inputs, in every table of this CPU, hash to the value the x86 tables gave. */
static void test_attention_bits_across_architectures(void **state) {
    (void)state;
    enum { D = 40, GQ = 5, NR = 6, LD = 8 };
    const uint64_t want = 0x81714698bb92ef20ull;
    struct {
        int kind, bits;
    } const segs[] = {{TG_SEG_F32, 0}, {TG_SEG_F16, 0}, {TG_SEG_BF16, 0}, {TG_SEG_CODES, 8}, {TG_SEG_CODES, 4},
                      {TG_SEG_CODES, 2}};
    int checked = 0, wrong = 0;
    for (int isa = TG_ISA_SCALAR + 1; isa < TG_ISA_COUNT; isa++) {
        const tg_attn_kernels *ak = tg_attn_kernels_for((tg_isa)isa);
        if (!ak) continue;
        rng_t r = {77};
        uint64_t h = 0xcbf29ce484222325ull;
        for (size_t si = 0; si < sizeof segs / sizeof segs[0]; si++)
            for (int keys = 0; keys < 2; keys++) {
                float q[GQ * D], p[GQ * LD], grid[2 * D], qf[GQ * D], bias[GQ], sc[GQ * LD], o[GQ * D], wide[D];
                uint8_t store[NR][D * 4];
                tg_attn_block b;
                memset(&b, 0, sizeof b);
                b.kind = segs[si].kind;
                b.bits = segs[si].bits;
                b.nr = NR;
                for (int i = 0; i < NR; i++) {
                    for (int k = 0; k < D; k++) {
                        const float v = rng_unit(&r);
                        const uint16_t hv = b.kind == TG_SEG_F16 ? tg_f32_to_f16(v) : tg_f32_to_bf16(v);
                        if (b.kind == TG_SEG_F32) memcpy(store[i] + 4 * k, &v, 4);
                        else if (b.kind != TG_SEG_CODES) memcpy(store[i] + 2 * k, &hv, 2);
                    }
                    for (int k = 0; b.kind == TG_SEG_CODES && k < D; k++) store[i][k] = (uint8_t)rng_next(&r);
                    b.tscale[i] = 0.01f + 0.1f * (rng_unit(&r) + 1.0f);
                    b.tzero[i] = rng_unit(&r);
                }
                for (int i = 0; i < TG_ATTN_BLK; i++) b.rows[i] = store[i < NR ? i : 0];
                for (int i = 0; i < GQ * D; i++) q[i] = rng_unit(&r), o[i] = rng_unit(&r);
                for (int i = 0; i < GQ * LD; i++) p[i] = 0.5f * (rng_unit(&r) + 1.0f);
                for (int k = 0; k < 2 * D; k++) grid[k] = k < D ? 0.01f + 0.05f * (rng_unit(&r) + 1.0f) : rng_unit(&r);
                const float *qk = q;
                if (b.kind == TG_SEG_CODES && keys) { /* keys: the grid folded into the queries */
                    b.grid = grid;
                    ak->fold(q, GQ, D, grid, qf, bias);
                    b.bias = bias;
                    qk = qf;
                    h = fnv1a_more(h, qf, sizeof qf);
                    h = fnv1a_more(h, bias, sizeof bias);
                }
                for (int i = 0; i < GQ * LD; i++) sc[i] = 0.0f;
                if (keys) ak->scores(&b, qk, GQ, D, sc, LD);
                else ak->values(&b, p, LD, GQ, D, o);
                h = fnv1a_more(h, keys ? (const void *)sc : (const void *)o, keys ? sizeof sc : sizeof o);
                for (int i = 0; i < NR; i++) {
                    ak->widen(&b, i, D, wide);
                    h = fnv1a_more(h, wide, sizeof wide);
                }
            }
        checked++;
        if (h != want) {
            print_message("attention %s: hash 0x%016llxull, x86's 0x%016llxull\n", tg_isa_name((tg_isa)isa),
                          (unsigned long long)h, (unsigned long long)want);
            wrong++;
        }
    }
    if (!checked) skip();
    assert_int_equal(wrong, 0);
}

int main(int argc, char **argv) {
    self_path = argv[0];
    if (argc > 1 && strcmp(argv[1], "--child") == 0) return child_check();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_features_consistent),
        cmocka_unit_test(test_dispatch_never_exceeds_cpu),
        cmocka_unit_test(test_env_caps_choice),
        cmocka_unit_test(test_weight_rows_against_reference),
        cmocka_unit_test(test_tables_agree),
        cmocka_unit_test(test_bits_across_architectures),
        cmocka_unit_test(test_vec_rows_against_scalar),
        cmocka_unit_test(test_attention_blocks_against_reference),
        cmocka_unit_test(test_attention_bits_across_architectures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
