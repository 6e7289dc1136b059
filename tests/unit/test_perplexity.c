/* test_perplexity.c — what `tinygpt perplexity` relies on: feeding a text through tg_session_eval in chunks of 64
 * gives the same per-position logits (hence the same NLLs) as feeding it token by token, under every kind of cache
 * policy (plain and KIVI precisions, groups and the whole-history scheme, StreamingLLM vanilla and re-positioned,
 * quantised sinks), on random tiny models with F32 and Q8_0 weights; the `context` override that lifts the context
 * limit; and the quantised sinks (read back within the precision's error, and different from fp32 sinks). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "attend_team.h"
#include "random_model.h"
#include "kvcache/kvcache.h"
#include "model/model.h"
#include "tinygpt.h"

/* The models are random_model.h's (weights F32 or Q8_0), the texts random_model_text's. */

/* NLL of every next token (rows 0 .. n-2), in double through log-sum-exp. */
static void pp_nlls(const float *logits, const int32_t *ids, int n, int vocab, double *out) {
    for (int t = 0; t + 1 < n; t++) {
        const float *row = logits + (size_t)t * (size_t)vocab;
        double m = row[0];
        for (int i = 1; i < vocab; i++) m = row[i] > m ? row[i] : m;
        double sum = 0.0;
        for (int i = 0; i < vocab; i++) sum += exp((double)row[i] - m);
        out[t] = m + log(sum) - (double)row[ids[t + 1]];
    }
}

/* All n logits rows of ids through one session, `chunk` tokens per tg_session_eval call. */
static float *pp_run(const struct tg_model *m, const tg_cache_params *p, const int32_t *ids, int n, int chunk) {
    const int vocab = m->hp.vocab_size;
    tg_error err = {0};
    tg_session *sess = tg_session_new(m, p, 1, &err);
    if (!sess) fail_msg("tg_session_new: %s", err.msg);
    float *logits = malloc((size_t)n * (size_t)vocab * sizeof *logits);
    assert_non_null(logits);
    for (int done = 0; done < n; done += chunk) {
        const int c = n - done < chunk ? n - done : chunk;
        if (!tg_session_eval(sess, ids + done, (size_t)c, logits + (size_t)done * (size_t)vocab, NULL, &err))
            fail_msg("eval at %d: %s", done, err.msg);
    }
    tg_session_free(sess);
    return logits;
}

typedef struct {
    const char *name;
    tg_kv_precision k, v;
    int64_t sink, window;
    int group, residual;
    bool reposition, quantize_sinks;
    tg_kv_precision residual_precision;
} pp_policy;

/* Chunks of 64 (and an odd 23) against token by token: the NLL of every position within 1e-6 (the forward pass
 * appends and attends token by token inside a chunk; only the projections are batched). Returns the largest
 * difference seen, for the message. */
static void check_chunk_identity(tg_dtype type, const pp_policy *pol, size_t n_pol) {
    const int n = 300, ctx = 320;
    random_model *r = random_model_new_typed(ctx, type, 3, false);
    const struct tg_model *s = random_model_get(r);
    const int vocab = s->hp.vocab_size;
    int32_t *ids = random_model_text(n, vocab, 5);
    double *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    for (size_t i = 0; i < n_pol; i++) {
        tg_cache_params p = tg_cache_default_params();
        p.key_precision = pol[i].k;
        p.value_precision = pol[i].v;
        p.sink = pol[i].sink;
        p.window = pol[i].window;
        p.group_size = pol[i].group;
        p.residual = pol[i].residual;
        p.rope_positions = pol[i].reposition ? TG_ROPE_POSITIONS_DEFAULT : TG_ROPE_POSITIONS_ORIGINAL;
        p.quantize_sinks = pol[i].quantize_sinks;
        p.residual_precision = pol[i].residual_precision;
        float *one = pp_run(s, &p, ids, n, 1);
        pp_nlls(one, ids, n, vocab, a);
        const int chunks[] = {64, 23};
        for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
            float *many = pp_run(s, &p, ids, n, chunks[c]);
            pp_nlls(many, ids, n, vocab, b);
            double worst = 0.0, mean_a = 0.0;
            for (int t = 0; t + 1 < n; t++) {
                double d = fabs(a[t] - b[t]);
                worst = d > worst ? d : worst;
                mean_a += a[t];
                if (!isfinite(a[t])) fail_msg("%s: NLL at %d is not finite", pol[i].name, t);
            }
            if (!(worst <= 1e-6))
                fail_msg("%s (%s weights): chunk %d vs token by token: NLL differs by %g", pol[i].name,
                         tg_dtype_name(type), chunks[c], worst);
            /* the policy did something: a NLL mean that is a real number */
            assert_true(mean_a > 0.0);
            free(many);
        }
        free(one);
    }
    free(a);
    free(b);
    free(ids);
    random_model_free(r);
}

static const pp_policy POLICIES[] = {
    {"fp32 unbounded", TG_KV_FP32, TG_KV_FP32, -1, 0, 32, 128, false, false, TG_KV_FP32},
    {"bf16 unbounded", TG_KV_BF16, TG_KV_BF16, -1, 0, 32, 128, false, false, TG_KV_FP32},
    {"int8 unbounded", TG_KV_INT8, TG_KV_INT8, -1, 0, 32, 128, false, false, TG_KV_FP32},
    {"int4 group 16 residual 32", TG_KV_INT4, TG_KV_INT4, -1, 0, 16, 32, false, false, TG_KV_FP32},
    {"int2 whole-history", TG_KV_INT2, TG_KV_INT2, -1, 0, 0, 0, false, false, TG_KV_FP32},
    {"K int8 / V int4", TG_KV_INT8, TG_KV_INT4, -1, 0, 32, 64, false, false, TG_KV_FP32},
    {"fp32 sink 4 + window 40", TG_KV_FP32, TG_KV_FP32, 4, 40, 32, 128, false, false, TG_KV_FP32},
    {"fp16 sink 0 + window 48 re-positioned", TG_KV_FP16, TG_KV_FP16, 0, 48, 32, 128, true, false, TG_KV_FP32},
    {"int4 sink 4 + window 60 vanilla", TG_KV_INT4, TG_KV_INT4, 4, 60, 16, 32, false, false, TG_KV_FP32},
    {"int4 sink 4 + window 60 re-positioned", TG_KV_INT4, TG_KV_INT4, 4, 60, 16, 32, true, false, TG_KV_FP32},
    {"int2 sink 4 + window 60 quantised sinks", TG_KV_INT2, TG_KV_INT2, 4, 60, 16, 16, true, true, TG_KV_FP32},
    {"int8 whole-history sink 2 + window 50", TG_KV_INT8, TG_KV_INT8, 2, 50, 0, 0, false, true, TG_KV_FP32},
    {"int4 residual fp16", TG_KV_INT4, TG_KV_INT4, -1, 0, 16, 32, false, false, TG_KV_FP16},
    {"int2 sink 4 + window 60 residual bf16 re-positioned", TG_KV_INT2, TG_KV_INT2, 4, 60, 16, 32, true, false,
     TG_KV_BF16},
    {"K int8 / V fp16, residual fp16, window 50", TG_KV_INT8, TG_KV_FP16, 4, 50, 16, 16, false, false, TG_KV_FP16},
};

static void test_chunked_equals_token_by_token_f32(void **state) {
    (void)state;
    check_chunk_identity(TG_DT_F32, POLICIES, sizeof POLICIES / sizeof POLICIES[0]);
}

static void test_chunked_equals_token_by_token_q8_0(void **state) {
    (void)state;
    check_chunk_identity(TG_DT_Q8_0, POLICIES, sizeof POLICIES / sizeof POLICIES[0]);
}

/* params.context lifts the context limit of an unbounded cache; a negative one is refused. */
static void test_context_override(void **state) {
    (void)state;
    random_model *r = random_model_new(32, 9, false);
    const struct tg_model *s = random_model_get(r);
    tg_error err = {0};
    tg_cache_params p = tg_cache_default_params();
    tg_session *plain = tg_session_new(s, &p, 1, &err);
    assert_non_null(plain);
    assert_int_equal(tg_session_remaining(plain), 32);
    p.context = 100;
    tg_session *big = tg_session_new(s, &p, 1, &err);
    if (!big) fail_msg("tg_session_new: %s", err.msg);
    assert_int_equal(tg_session_remaining(big), 100);
    int32_t *ids = random_model_text(100, s->hp.vocab_size, 2);
    float *a = malloc(100 * (size_t)s->hp.vocab_size * sizeof *a);
    assert_non_null(a);
    assert_false(tg_session_eval(plain, ids, 33, NULL, NULL, &err));
    assert_true(tg_session_eval(big, ids, 100, a, NULL, &err));
    assert_int_equal(tg_session_remaining(big), 0);
    assert_false(tg_session_eval(big, ids, 1, NULL, NULL, &err));
    /* the first 32 positions are those of the model's own context: the same logits */
    float *b = malloc(32 * (size_t)s->hp.vocab_size * sizeof *b);
    assert_non_null(b);
    tg_session_free(plain);
    p.context = 0;
    plain = tg_session_new(s, &p, 1, &err);
    assert_true(tg_session_eval(plain, ids, 32, b, NULL, &err));
    assert_memory_equal(a, b, 32 * (size_t)s->hp.vocab_size * sizeof *a);
    p.context = -1;
    assert_null(tg_session_new(s, &p, 1, &err));
    assert_non_null(strstr(err.msg, "context"));
    free(a);
    free(b);
    free(ids);
    tg_session_free(plain);
    tg_session_free(big);
    random_model_free(r);
}

/* quantize_sinks: the sinks read back as their round trip through the precision (within half a step of the
 * per-channel / per-token grid, not equal to the fp32 input), until all sinks are in they are exact, and without
 * the flag they stay bit-exact. */
static void test_quantized_sinks(void **state) {
    (void)state;
    const int H = 2, D = 16, S = 4;
    tg_cache_shape shape = {.n_layers = 1, .n_heads = 2, .n_kv_heads = H, .head_dim = D, .rope_theta = 10000.0f,
                            .rope_style = TG_ROPE_HALF, .context_length = 64};
    uint64_t x = 77;
    float k[8][32], v[8][32];
    for (int t = 0; t < 8; t++)
        for (int i = 0; i < H * D; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            k[t][i] = (float)((double)(x >> 11) / 9007199254740992.0) * 4.0f - 2.0f;
            v[t][i] = (float)((double)((x >> 3) & 0xFFFFF) / 1048576.0) * 2.0f - 1.0f;
        }
    const tg_kv_precision precs[] = {TG_KV_INT8, TG_KV_INT4, TG_KV_INT2};
    const double steps[] = {255.0, 15.0, 3.0};
    for (int qi = 0; qi < 3; qi++) {
        for (int quant = 0; quant <= 1; quant++) {
            tg_cache_params p = tg_cache_default_params();
            p.key_precision = p.value_precision = precs[qi];
            p.sink = S;
            p.window = 8;
            p.group_size = 4;
            p.residual = 4;
            p.residual_precision = TG_KV_FP32; /* the sinks are read back exactly until they are quantised */
            /* re-positioned sinks are kept pre-RoPE; read back for a query before any eviction, they sit at their
             * own positions */
            p.rope_positions = TG_ROPE_POSITIONS_REPOSITION;
            p.quantize_sinks = quant;
            tg_error err = {0};
            tg_kvcache *c = tg_kvcache_new(&shape, &p, &err);
            if (!c) fail_msg("tg_kvcache_new: %s", err.msg);
            float kb[16 * 32], vb[16 * 32], ref[32];
            int64_t pos[16];
            for (int t = 0; t < S; t++) {
                tg_kvcache_append(c, 0, t, k[t], v[t]);
                int64_t n = tg_kvcache_read_back(c, 0, t, NULL, vb, pos);
                assert_int_equal(n, t + 1);
                if (t < S - 1) assert_memory_equal(vb, v, (size_t)(t + 1) * H * D * sizeof(float));
            }
            int64_t n = tg_kvcache_read_back(c, 0, S, kb, vb, pos);
            assert_int_equal(n, S);
            double worst_v = 0.0, worst_k = 0.0;
            for (int t = 0; t < S; t++) {
                for (int h = 0; h < H; h++) {
                    /* value tolerance: half a step of this token's own range */
                    float lo = v[t][h * D], hi = lo;
                    for (int i = 0; i < D; i++) {
                        lo = fminf(lo, v[t][h * D + i]);
                        hi = fmaxf(hi, v[t][h * D + i]);
                    }
                    const double tol = 0.5 * (hi - lo) / steps[qi] * 1.01 + 1e-5;
                    for (int i = 0; i < D; i++) {
                        double d = fabs((double)vb[(t * H + h) * D + i] - v[t][h * D + i]);
                        if (d > tol) fail_msg("%s sink %d value %d off by %g > %g", tg_kv_precision_name(precs[qi]),
                                              t, i, d, tol);
                        worst_v = d > worst_v ? d : worst_v;
                    }
                }
                memcpy(ref, k[t], sizeof ref);
                tg_rope(ref, H, D, t, 10000.0f, TG_ROPE_HALF);
                for (int i = 0; i < H * D; i++) {
                    double d = fabs((double)kb[t * H * D + i] - ref[i]);
                    worst_k = d > worst_k ? d : worst_k;
                }
            }
            if (!quant) {
                assert_true(worst_v == 0.0);
                assert_true(worst_k < 1e-5); /* RoPE by the table vs tg_rope */
            } else {
                if (!(worst_v > 0.0)) fail_msg("%s: quantised sink values are exact", tg_kv_precision_name(precs[qi]));
                /* keys per channel over the 4 sinks: rotated, the error is at most sqrt(2) half-steps of the widest
                 * channel range (4 / levels), loosely */
                const double ktol = 2.0 * 4.0 / steps[qi];
                if (!(worst_k > 1e-5 && worst_k <= ktol))
                    fail_msg("%s: key error %g not in (1e-5, %g]", tg_kv_precision_name(precs[qi]), worst_k, ktol);
            }
            tg_cache_report r;
            tg_kvcache_report(c, S, &r);
            assert_non_null(strstr(r.policy, quant ? "sinks quantised" : "sinks fp32"));
            assert_int_equal(r.sink, S);
            assert_int_equal(r.window, 8);
            tg_kvcache_free(c);
        }
    }
}

/* residual_precision: the ring of fp16 / bf16 rows halves the residual's bytes, reads back within the format's
 * rounding of what was appended (and the quantised groups are fitted to those rounded rows), changes attention only
 * by that rounding, and anything else is refused. */
static void test_residual_precision(void **state) {
    (void)state;
    const int H = 2, D = 16, N = 40;
    tg_cache_shape shape = {.n_layers = 1, .n_heads = 4, .n_kv_heads = H, .head_dim = D, .rope_theta = 10000.0f,
                            .rope_style = TG_ROPE_HALF, .context_length = 64};
    float k[40][32], v[40][32], q[64];
    uint64_t x = 5;
    for (int t = 0; t < N; t++)
        for (int i = 0; i < H * D; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            k[t][i] = (float)((double)(x >> 11) / 9007199254740992.0) * 6.0f - 3.0f;
            v[t][i] = (float)((double)((x >> 5) & 0xFFFFF) / 1048576.0) * 2.0f - 1.0f;
        }
    for (int i = 0; i < 64; i++) q[i] = (float)((i * 37) % 17) / 8.0f - 1.0f;
    const tg_kv_precision rp[] = {TG_KV_FP32, TG_KV_FP16, TG_KV_BF16};
    float out[3][64], kb[3][40 * 32];
    size_t resid_bytes[3];
    for (int r = 0; r < 3; r++) {
        tg_cache_params p = tg_cache_default_params();
        p.key_precision = p.value_precision = TG_KV_INT8;
        p.group_size = 8;
        p.residual = 16;
        p.residual_precision = rp[r];
        tg_error err = {0};
        tg_kvcache *c = tg_kvcache_new(&shape, &p, &err);
        if (!c) fail_msg("tg_kvcache_new: %s", err.msg);
        for (int t = 0; t < N; t++) tg_kvcache_append(c, 0, t, k[t], v[t]);
        test_attend(c, 0, N - 1, q, out[r], 1);
        assert_int_equal(tg_kvcache_read_back(c, 0, N - 1, kb[r], NULL, NULL), N);
        tg_cache_report rep;
        tg_kvcache_report(c, N, &rep);
        resid_bytes[r] = rep.bytes_residual;
        if (r > 0) assert_non_null(strstr(rep.policy, rp[r] == TG_KV_FP16 ? "residual 16 at fp16" : "at bf16"));
        tg_kvcache_free(c);
    }
    /* res_cap = 16 rows of 2 x 16 keys and values: 2048 bytes at fp32, 1024 at 16 bits */
    assert_int_equal(resid_bytes[0], 16 * 2 * 16 * 4 * 2);
    assert_int_equal(resid_bytes[1], resid_bytes[0] / 2);
    assert_int_equal(resid_bytes[2], resid_bytes[0] / 2);
    /* the newest tokens (still in the ring: at least the last 9) within the 16-bit format's relative rounding of the
     * fp32-residual read-back (exact keys there, rotated) */
    for (int r = 1; r < 3; r++) {
        const double rel = rp[r] == TG_KV_FP16 ? 1.0 / 1024 : 1.0 / 128;
        for (int t = N - 9; t < N; t++)
            for (int i = 0; i < H * D; i++) {
                const double a = kb[0][t * H * D + i], b = kb[r][t * H * D + i];
                if (fabs(a - b) > rel * 4.25 + 1e-6)
                    fail_msg("%s residual: key %d.%d is %g, fp32 residual %g", tg_kv_precision_name(rp[r]), t, i, b, a);
            }
        double worst = 0.0;
        for (int i = 0; i < 64; i++) worst = fmax(worst, fabs((double)out[r][i] - out[0][i]));
        if (!(worst > 0.0 && worst < 0.05))
            fail_msg("%s residual: attention differs from the fp32 residual by %g", tg_kv_precision_name(rp[r]), worst);
    }
    tg_cache_params bad = tg_cache_default_params();
    bad.key_precision = TG_KV_INT4;
    bad.residual_precision = TG_KV_INT8;
    tg_error err = {0};
    assert_null(tg_kvcache_new(&shape, &bad, &err));
    assert_int_equal(err.code, TG_ERR_CACHE_RESIDUAL_PRECISION);
    assert_non_null(strstr(err.msg, "KIVI residual precision int8: must be fp32, fp16 or bf16"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunked_equals_token_by_token_f32),
        cmocka_unit_test(test_chunked_equals_token_by_token_q8_0),
        cmocka_unit_test(test_context_override),
        cmocka_unit_test(test_quantized_sinks),
        cmocka_unit_test(test_residual_precision),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
