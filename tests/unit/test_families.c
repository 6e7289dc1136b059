/* test_families.c — the architecture families beside Llama (issue #50) against their reference outputs, for every
 * folder of tests/data/families/ (or $TG_FAMILY_DIR) with a golden.json (tools/family_ref.py or
 * tools/make_family_fixtures.py), the Hugging Face folder and each GGUF file golden.json lists: the per-token NLL
 * of the prompt within 1e-4 relative, the logits within 1e-3, the greedy continuation's argmax equal at every step
 * whose reference top-1 / top-2 margin is over 1e-3 (fp32 weights, fp32 cache); the GGUF file llama.cpp's own
 * converter wrote from the folder against llama.cpp's logits (check_llamacpp); then every cache policy (fp16,
 * int4 + StreamingLLM window 64, both bounded) runs 2,000 tokens past the model's context with finite logits; where
 * golden.json has them, steps past the original context of a LongRoPE model (check_long).
 * Fails when the folder holds no fixture. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "test_golden.h"
#include "tinygpt.h"

#define NLL_REL_TOL 1e-4
#define LOGIT_TOL 1e-3
#define MARGIN_CLEAR 1e-3
#define PAST_CONTEXT 2000
/* tinygpt against llama.cpp on the same F32 GGUF: two float32 implementations that sum in different orders (and
 * approximate tanh differently, Gemma's GELU and soft-caps) */
#define LLAMACPP_LOGIT_TOL 2e-3

static const char *family_root(void) {
    const char *env = getenv("TG_FAMILY_DIR");
    return env && *env ? env : "tests/data/families";
}

/* -log softmax(row)[id], in double. */
static double nll_of(const float *row, int64_t n, int32_t id) {
    double m = row[0], z = 0;
    for (int64_t i = 1; i < n; i++)
        if (row[i] > m) m = row[i];
    for (int64_t i = 0; i < n; i++) z += exp((double)row[i] - m);
    return -((double)row[id] - m - log(z));
}

/* The prompt's logits and NLL against the golden ones; the number of failures. */
static int check_prompt(const char *dir, tg_model *m, const json_t *golden, const float *want, int64_t V) {
    size_t n;
    int32_t *ids = golden_json_ids(json_object_get(golden, "prompt_ids"), &n);
    const json_t *nll = json_object_get(golden, "nll");
    tg_error err = {0};
    tg_cache_params p = tg_cache_default_params();
    p.key_precision = p.value_precision = TG_KV_FP32;
    tg_session *s = tg_session_new(m, &p, 2, &err);
    float *got = malloc(n * (size_t)V * sizeof *got);
    int fails = 0;
    if (!s || !got || !tg_session_eval(s, ids, n, got, NULL, &err) || json_array_size(nll) + 1 != n) {
        print_error("%s: %s (or golden nll has %zu entries for %zu ids)\n", dir, err.msg, json_array_size(nll), n);
        fails++;
    } else {
        double worst_logit = 0, worst_rel = 0;
        for (size_t t = 0; t < n; t++)
            for (int64_t v = 0; v < V; v++) {
                const double d = fabs((double)got[t * (size_t)V + (size_t)v] - (double)want[t * (size_t)V + (size_t)v]);
                if (!(d <= worst_logit)) worst_logit = d;
            }
        for (size_t t = 0; t + 1 < n; t++) {
            const double ref = json_number_value(json_array_get(nll, t));
            const double rel = fabs(nll_of(got + t * (size_t)V, V, ids[t + 1]) - ref) / fabs(ref);
            if (!(rel <= worst_rel)) worst_rel = rel;
        }
        print_message("%s: NLL within %.3g relative (tolerance %g), logits within %.3g (tolerance %g)\n", dir,
                      worst_rel, NLL_REL_TOL, worst_logit, LOGIT_TOL);
        fails += !(worst_rel <= NLL_REL_TOL) + !(worst_logit <= LOGIT_TOL);
    }
    free(got);
    tg_session_free(s);
    free(ids);
    return fails;
}

/* The greedy continuation: the reference's ids fed one at a time after the greedy prompt, tinygpt's argmax equal to
 * the reference's id at every step whose reference top-1 / top-2 margin is clear (> MARGIN_CLEAR); the number of
 * failures. */
static int check_greedy(const char *dir, tg_model *m, const json_t *golden, int64_t V) {
    size_t n_prompt, n_want;
    int32_t *prompt = golden_json_ids(json_object_get(golden, "greedy_prompt_ids"), &n_prompt);
    int32_t *want = golden_json_ids(json_object_get(golden, "greedy_continuation"), &n_want);
    const json_t *margins = json_object_get(golden, "greedy_margins");
    tg_error err = {0};
    tg_cache_params p = tg_cache_default_params();
    p.key_precision = p.value_precision = TG_KV_FP32;
    tg_session *s = tg_session_new(m, &p, 2, &err);
    float *logits = malloc((size_t)V * sizeof *logits);
    size_t clear = 0, same = 0;
    bool ok = s && logits && json_array_size(margins) == n_want && tg_session_eval(s, prompt, n_prompt, NULL, logits,
                                                                                    &err);
    for (size_t k = 0; ok && k < n_want; k++) {
        if (json_number_value(json_array_get(margins, k)) > MARGIN_CLEAR) {
            clear++;
            same += golden_argmax(logits, V) == want[k];
        }
        if (k + 1 < n_want) ok = tg_session_eval(s, &want[k], 1, NULL, logits, &err);
    }
    print_message("%s: greedy argmax equal at %zu of the %zu steps with a clear margin (of %zu)\n", dir, same, clear,
                  n_want);
    if (!ok) print_error("%s: %s\n", dir, err.msg[0] ? err.msg : "golden greedy_margins do not match its ids");
    free(logits);
    tg_session_free(s);
    free(prompt);
    free(want);
    return !ok || same != clear || clear == 0;
}

/* The steps past the model's original context, when golden.json has them (LongRoPE: make_family_fixtures.py's LONG):
 * long_ids[:long_split] in one call, then one id a call, each single step's logits within LOGIT_TOL of transformers'
 * (logits-long.f32 [len - long_split, V]). The number of failures. */
static int check_long(const char *dir, tg_model *m, const json_t *golden, int64_t V) {
    const json_t *file = json_object_get(golden, "long_logits_file");
    if (!file) return 0;
    size_t n;
    int32_t *ids = golden_json_ids(json_object_get(golden, "long_ids"), &n);
    const json_int_t split = json_integer_value(json_object_get(golden, "long_split"));
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", dir, json_string_value(file));
    const size_t steps = split > 0 && (size_t)split < n ? n - (size_t)split : 0;
    float *want = steps ? golden_read_f32(path, steps * (size_t)V) : NULL;
    tg_error err = {0};
    tg_cache_params p = tg_cache_default_params();
    p.key_precision = p.value_precision = TG_KV_FP32;
    tg_session *s = want ? tg_session_new(m, &p, 2, &err) : NULL;
    float *logits = malloc((size_t)V * sizeof *logits);
    bool ok = s && logits && tg_session_eval(s, ids, (size_t)split, NULL, NULL, &err);
    double worst = 0;
    for (size_t k = 0; ok && k < steps; k++) {
        ok = tg_session_eval(s, &ids[(size_t)split + k], 1, NULL, logits, &err);
        for (int64_t v = 0; ok && v < V; v++) {
            const double d = fabs((double)logits[v] - (double)want[k * (size_t)V + (size_t)v]);
            if (!(d <= worst)) worst = d;
        }
    }
    if (!ok) print_error("%s: %s\n", dir, want ? err.msg : "no long-context logits of the golden shape");
    else
        print_message("%s: %zu steps from position %lld (past the original context): logits within %.3g (tolerance "
                      "%g)\n", dir, steps, (long long)split, worst, LOGIT_TOL);
    free(logits);
    tg_session_free(s);
    free(want);
    free(ids);
    return !ok || !(worst <= LOGIT_TOL);
}

/* The top-1 / top-2 gap of row[V]. */
static double margin_of(const float *row, int64_t V) {
    const int32_t top = golden_argmax(row, V);
    double second = -INFINITY;
    for (int64_t v = 0; v < V; v++)
        if (v != top && row[v] > second) second = row[v];
    return (double)row[top] - second;
}

/* The GGUF file llama.cpp's convert_hf_to_gguf.py wrote from the folder, against llama.cpp's own logits over the same
 * ids (tools/gpu_families.sh: greedy-llamacpp.json, llamacpp-logits.f32 [K + 1, V], the logits before each of the K
 * continuation tokens and after the last, with the greedy prompt and the transformers greedy ids fed): tinygpt's logits within LLAMACPP_LOGIT_TOL
 * and its argmax equal to llama.cpp's at every step where llama.cpp's margin is clear. The number of failures. */
static int check_llamacpp(const char *dir, const json_t *golden, int64_t V) {
    char path[1400];
    snprintf(path, sizeof path, "%s/greedy-llamacpp.json", dir);
    json_error_t je;
    json_t *ref = json_load_file(path, 0, &je);
    if (!ref) return 0; /* no llama.cpp logits for this family (tests/data/families/README.md says why) */
    size_t n_prompt, n_cont;
    int32_t *prompt = golden_json_ids(json_object_get(golden, "greedy_prompt_ids"), &n_prompt);
    int32_t *cont = golden_json_ids(json_object_get(golden, "greedy_continuation"), &n_cont);
    /* K rows: before each continuation token, and after the last */
    const size_t K = json_array_size(json_object_get(ref, "argmax_before_each")) + 1;
    snprintf(path, sizeof path, "%s/llamacpp-logits.f32", dir);
    float *want = K > 1 && K <= n_cont + 1 ? golden_read_f32(path, K * (size_t)V) : NULL;
    snprintf(path, sizeof path, "%s/model-llamacpp-f32.gguf", dir);
    tg_error err = {0};
    tg_model *m = want ? tg_model_load(path, &err) : NULL;
    tg_cache_params p = tg_cache_default_params();
    p.key_precision = p.value_precision = TG_KV_FP32;
    tg_session *s = m ? tg_session_new(m, &p, 2, &err) : NULL;
    float *logits = malloc((size_t)V * sizeof *logits);
    bool ok = s && logits && tg_session_eval(s, prompt, n_prompt, NULL, logits, &err);
    double worst = 0;
    size_t clear = 0, same = 0;
    for (size_t k = 0; ok && k < K; k++) {
        const float *w = want + k * (size_t)V;
        for (int64_t v = 0; v < V; v++) {
            const double d = fabs((double)logits[v] - (double)w[v]);
            if (!(d <= worst)) worst = d;
        }
        if (margin_of(w, V) > MARGIN_CLEAR) {
            clear++;
            same += golden_argmax(logits, V) == golden_argmax(w, V);
        }
        if (k + 1 < K) ok = tg_session_eval(s, &cont[k], 1, NULL, logits, &err);
    }
    if (!ok) print_error("%s: %s\n", path, want ? err.msg : "no llama.cpp logits of the reference's shape");
    else
        print_message("%s: against llama.cpp over %zu steps: logits within %.3g (tolerance %g), argmax equal at %zu of "
                      "the %zu steps with a clear margin\n", path, K, worst, LLAMACPP_LOGIT_TOL, same, clear);
    const int fails = !ok || !(worst <= LLAMACPP_LOGIT_TOL) || same != clear || clear == 0;
    free(logits);
    tg_session_free(s);
    tg_model_free(m);
    free(want);
    free(prompt);
    free(cont);
    json_decref(ref);
    return fails;
}

/* A bounded cache of `prec` (StreamingLLM: 4 sinks + window 64) runs PAST_CONTEXT tokens past the model's context,
 * greedily, with every logit finite; the number of failures. */
static int check_policy(const char *dir, tg_model *m, tg_kv_precision prec, int64_t V) {
    tg_model_info info;
    tg_model_get_info(m, &info);
    tg_error err = {0};
    tg_cache_params p = tg_cache_default_params();
    p.key_precision = p.value_precision = prec;
    p.window = 64;
    tg_session *s = tg_session_new(m, &p, 2, &err);
    float *logits = malloc((size_t)V * sizeof *logits);
    int32_t tok = 1;
    int64_t steps = 0, total = info.context_length + PAST_CONTEXT;
    bool ok = s && logits, finite = true;
    for (; ok && finite && steps < total; steps++) {
        ok = tg_session_eval(s, &tok, 1, NULL, logits, &err);
        for (int64_t v = 0; ok && v < V; v++) finite = finite && isfinite(logits[v]);
        tok = golden_argmax(logits, V);
    }
    print_message("%s: %s K/V + window 64: %lld tokens (context %d), logits %s\n", dir,
                  prec == TG_KV_FP16 ? "fp16" : "int4", (long long)steps, info.context_length,
                  finite ? "finite" : "NOT finite");
    if (!ok) print_error("%s: %s\n", dir, err.msg);
    free(logits);
    tg_session_free(s);
    return !ok || !finite || steps != total;
}

/* Every check on one source of the fixture (its folder, or one of its GGUF files); the number of failures. */
static int check_source(const char *src, const json_t *golden, const float *want, int64_t V) {
    tg_error err = {0};
    tg_model *m = tg_model_load(src, &err);
    if (!m) {
        print_error("%s: %s\n", src, err.msg);
        return 1;
    }
    tg_model_info info;
    tg_model_get_info(m, &info);
    int fails = 0;
    if (info.vocab_size != V) {
        print_error("%s: vocabulary %d, golden logits have %lld\n", src, info.vocab_size, (long long)V);
        fails = 1;
    } else {
        fails += check_prompt(src, m, golden, want, V);
        fails += check_greedy(src, m, golden, V);
        fails += check_long(src, m, golden, V);
        fails += check_policy(src, m, TG_KV_FP16, V);
        fails += check_policy(src, m, TG_KV_INT4, V);
    }
    tg_model_free(m);
    return fails;
}

/* The fixture in dir: its folder and every GGUF file golden.json lists, against the same goldens. */
static int check_family(const char *dir) {
    char path[1400];
    snprintf(path, sizeof path, "%s/golden.json", dir);
    json_error_t je;
    json_t *golden = json_load_file(path, 0, &je);
    if (!golden) {
        print_error("%s: %s\n", path, je.text);
        return 1;
    }
    const json_t *shape = json_object_get(golden, "logits_shape");
    const int64_t T = json_integer_value(json_array_get(shape, 0)), V = json_integer_value(json_array_get(shape, 1));
    snprintf(path, sizeof path, "%s/%s", dir, json_string_value(json_object_get(golden, "logits_file")));
    float *want = T > 0 && V > 0 ? golden_read_f32(path, (size_t)(T * V)) : NULL;
    int fails = 0;
    if (!want) {
        print_error("%s: no logits file of the golden shape\n", dir);
        fails = 1;
    } else {
        fails += check_source(dir, golden, want, V);
        fails += check_llamacpp(dir, golden, V);
        /* a llama.cpp-converted file without llama.cpp's logits: against transformers' goldens */
        snprintf(path, sizeof path, "%s/greedy-llamacpp.json", dir);
        struct stat st;
        if (stat(path, &st) != 0) {
            snprintf(path, sizeof path, "%s/model-llamacpp-f32.gguf", dir);
            if (stat(path, &st) == 0) fails += check_source(path, golden, want, V);
        }
        const char *key;
        json_t *val;
        json_object_foreach(json_object_get(golden, "gguf_files"), key, val) {
            (void)val;
            snprintf(path, sizeof path, "%s/%s", dir, key);
            fails += check_source(path, golden, want, V);
        }
    }
    free(want);
    json_decref(golden);
    return fails;
}

static void test_families(void **state) {
    (void)state;
    DIR *d = opendir(family_root());
    assert_non_null(d);
    int found = 0, fails = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char dir[1100], golden[1200];
        snprintf(dir, sizeof dir, "%s/%s", family_root(), e->d_name);
        snprintf(golden, sizeof golden, "%s/golden.json", dir);
        struct stat st;
        if (stat(golden, &st) != 0) continue;
        found++;
        fails += check_family(dir);
    }
    closedir(d);
    assert_true(found > 0);
    assert_int_equal(fails, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_families),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
