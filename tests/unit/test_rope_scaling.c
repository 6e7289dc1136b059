/* test_rope_scaling.c — RoPE scalings and an explicit head_dim against transformers: the tiny random Llama models of
 * tests/data/real/rope-{llama3,linear} (tools/make_rope_refs.py: head_dim 32 with hidden 64 and 4 heads, 200
 * positions, far past llama3's original context of 64) give transformers' logits at every position (F32 weights,
 * fp32 cache: max |diff| <= 1e-3, as for the other fixtures); the llama3 config read as transformers 4 writes it
 * (rope_scaling + a top-level rope_theta) gives the same bits as transformers 5's rope_parameters; re-positioning
 * StreamingLLM with a window that evicts nothing (the table path) gives the same bits as the plain cache; and with
 * the scaling removed the logits are far from transformers' (so the comparison can fail). Also the folders'
 * eos_token_id list and generation_config.json sampling settings through the public API. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gguf_builder.h"
#include "model/rope_scaling.h"
#include "tinygpt.h"

#define REF "tests/data/real/"
#define TOKENIZER "tests/data/fixtures/smollm2/tokenizer.json" /* 1024 ids, as the models' vocabulary */
#define N_POS 200
#define N_VOCAB 1024
#define TOL 1e-3

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    const long n = ftell(f);
    assert_true(n >= 0);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    if (len) *len = (size_t)n;
    return buf;
}

static void put(const char *dir, const char *name, const char *data, size_t len) {
    char *p = gguf_builder_path(dir, name);
    FILE *f = fopen(p, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
    free(p);
}

static void copy_in(const char *dir, const char *src, const char *name) {
    size_t len;
    char *data = slurp(src, &len);
    put(dir, name, data, len);
    free(data);
}

/* A scratch folder holding the reference model `name` with config (the reference's own when NULL) and the
 * fixture's tokenizer. */
static char *model_folder(const char *name, const char *config) {
    char *dir = gguf_builder_tmpdir();
    assert_non_null(dir);
    char src[256];
    static const char *const files[] = {"model.safetensors", "generation_config.json", "config.json"};
    for (size_t i = 0; i < 3; i++) {
        if (i == 2 && config) {
            put(dir, "config.json", config, strlen(config));
            continue;
        }
        snprintf(src, sizeof src, REF "%s/%s", name, files[i]);
        copy_in(dir, src, files[i]);
    }
    copy_in(dir, TOKENIZER, "tokenizer.json");
    return dir;
}

static int32_t *ref_ids(const char *name) {
    char path[256];
    snprintf(path, sizeof path, REF "%s/ids.json", name);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    assert_non_null(j);
    const json_t *ids = json_object_get(j, "ids");
    assert_int_equal(json_array_size(ids), N_POS);
    int32_t *out = malloc(N_POS * sizeof *out);
    assert_non_null(out);
    for (size_t i = 0; i < N_POS; i++) out[i] = (int32_t)json_integer_value(json_array_get(ids, i));
    json_decref(j);
    return out;
}

/* Logits at every position of ids through dir's model, [N_POS, N_VOCAB]; cp NULL = the default (fp32) cache. */
static float *run_model(const char *dir, const int32_t *ids, const tg_cache_params *cp) {
    tg_error err = {0};
    tg_model *m = tg_model_load(dir, &err);
    if (!m) fail_msg("%s", err.msg);
    assert_int_equal(tg_vocab_size(m), N_VOCAB);
    tg_cache_params p = cp ? *cp : tg_cache_default_params();
    tg_session *s = tg_session_new(m, &p, 2, &err);
    if (!s) fail_msg("%s", err.msg);
    float *logits = malloc((size_t)N_POS * N_VOCAB * sizeof *logits);
    assert_non_null(logits);
    if (!tg_session_eval(s, ids, N_POS, logits, NULL, &err)) fail_msg("%s", err.msg);
    tg_session_free(s);
    tg_model_free(m);
    return logits;
}

static double max_diff(const float *a, const float *b, size_t n) {
    double d = 0.0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - (double)b[i]));
    return d;
}

static float *ref_logits(const char *name) {
    char path[256];
    snprintf(path, sizeof path, REF "%s/logits.f32", name);
    size_t len;
    float *l = (float *)(void *)slurp(path, &len);
    assert_int_equal(len, (size_t)N_POS * N_VOCAB * sizeof(float));
    return l;
}

/* config.json of the reference, with `from` replaced by `to` (once). */
static char *config_with(const char *name, const char *from, const char *to) {
    char path[256];
    snprintf(path, sizeof path, REF "%s/config.json", name);
    char *cfg = slurp(path, NULL);
    char *at = strstr(cfg, from);
    assert_non_null(at);
    char *out = malloc(strlen(cfg) + strlen(to) + 1);
    assert_non_null(out);
    memcpy(out, cfg, (size_t)(at - cfg));
    strcpy(out + (at - cfg), to);
    strcat(out, at + strlen(from));
    free(cfg);
    return out;
}

static void check_against_transformers(const char *name) {
    int32_t *ids = ref_ids(name);
    float *want = ref_logits(name);
    char *dir = model_folder(name, NULL);
    float *got = run_model(dir, ids, NULL);
    const size_t n = (size_t)N_POS * N_VOCAB;
    const double d = max_diff(got, want, n);
    fprintf(stderr, "%s: max |logit - transformers| = %g over %d positions\n", name, d, N_POS);
    if (!(d <= TOL)) fail_msg("%s: max |diff| %g > %g", name, d, TOL);

    /* re-positioned (the sinks rotated per query with the scaled frequencies), nothing evicted: the same bits */
    tg_cache_params cp = tg_cache_default_params();
    cp.sink = 4;
    cp.window = 256;
    cp.rope_positions = TG_ROPE_POSITIONS_REPOSITION;
    float *rep = run_model(dir, ids, &cp);
    assert_memory_equal(rep, got, n * sizeof *got);

    /* the scaling removed: far from transformers (the comparison above can fail) */
    char *plain = config_with(name, strcmp(name, "rope-llama3") == 0 ? "\"llama3\"" : "\"linear\"", "\"default\"");
    char *pdir = model_folder(name, plain);
    float *unscaled = run_model(pdir, ids, NULL);
    const double du = max_diff(unscaled, want, n);
    if (!(du > 0.1)) fail_msg("%s without its scaling: max |diff| only %g", name, du);
    gguf_builder_rmdir(pdir);
    free(pdir);
    free(plain);
    free(unscaled);
    free(rep);
    free(got);
    gguf_builder_rmdir(dir);
    free(dir);
    free(want);
    free(ids);
}

static void test_llama3(void **state) {
    (void)state;
    check_against_transformers("rope-llama3");
    /* transformers 4's form of the same config: rope_scaling and a top-level rope_theta */
    int32_t *ids = ref_ids("rope-llama3");
    char *dir5 = model_folder("rope-llama3", NULL);
    char *cfg4 = config_with("rope-llama3", "\"rope_parameters\"", "\"rope_theta\": 10000.0, \"rope_scaling\"");
    char *dir4 = model_folder("rope-llama3", cfg4);
    float *a = run_model(dir5, ids, NULL), *b = run_model(dir4, ids, NULL);
    assert_memory_equal(a, b, (size_t)N_POS * N_VOCAB * sizeof *a);
    tg_error err = {0};
    tg_model *m = tg_model_load(dir4, &err);
    assert_non_null(m);
    tg_model_info info;
    tg_model_get_info(m, &info);
    assert_string_equal(info.rope_scaling, "llama3 (factor 8, low 1, high 4, original context 64)");
    assert_int_equal(info.head_dim, 32);
    assert_int_equal(info.d_model, 64);
    tg_model_free(m);
    free(a), free(b), free(cfg4), free(ids);
    gguf_builder_rmdir(dir5);
    gguf_builder_rmdir(dir4);
    free(dir5), free(dir4);
}

static void test_linear(void **state) {
    (void)state;
    check_against_transformers("rope-linear");
}

/* generation_config.json: eos_token_id [0, 2], temperature 0.7, top_k 20, top_p 0.85, do_sample true. */
static void test_generation_settings(void **state) {
    (void)state;
    char *dir = model_folder("rope-linear", NULL);
    tg_error err = {0};
    tg_model *m = tg_model_load(dir, &err);
    assert_non_null(m);
    const int32_t *eos = NULL;
    const size_t n = tg_token_eos_ids(m, &eos);
    assert_int_equal(n, 2); /* the tokenizer's <|endoftext|> (0), then config.json's [0, 2] */
    assert_int_equal(eos[0], 0);
    assert_int_equal(eos[1], 2);
    assert_true(tg_token_is_eos(m, 2));
    assert_false(tg_token_is_eos(m, 1));
    tg_generation_defaults g;
    tg_model_generation_defaults(m, &g);
    assert_true(g.has_temperature && g.has_top_k && g.has_top_p);
    assert_true(fabsf(g.temperature - 0.7f) < 1e-6f);
    assert_int_equal(g.top_k, 20);
    assert_true(fabsf(g.top_p - 0.85f) < 1e-6f);
    assert_string_equal(g.source, "generation_config.json");
    tg_model_free(m);
    /* "do_sample": false: transformers decodes greedily and ignores the rest, so do we */
    const char *greedy = "{\"do_sample\": false, \"temperature\": 0.7, \"eos_token_id\": 5}";
    put(dir, "generation_config.json", greedy, strlen(greedy));
    m = tg_model_load(dir, &err);
    assert_non_null(m);
    tg_model_generation_defaults(m, &g);
    assert_false(g.has_temperature || g.has_top_k || g.has_top_p);
    assert_int_equal(tg_token_eos_ids(m, NULL), 3);
    assert_true(tg_token_is_eos(m, 5));
    tg_model_free(m);
    const char *bad = "{\"top_p\": 1.5}";
    put(dir, "generation_config.json", bad, strlen(bad));
    assert_null(tg_model_load(dir, &err));
    assert_non_null(strstr(err.msg, "generation_config.json: \"top_p\" must be a number in [0, 1]"));
    gguf_builder_rmdir(dir);
    free(dir);
}

/* tg_rope_inv_freq against transformers' formula evaluated by hand for three pairs of Llama 3.2 (head_dim 64, theta
 * 500000, factor 32, low 1, high 4, original context 8192): pair 0 is kept, pair 16 smoothed (15..17 are), pair 31 divided. */
static void test_inv_freq(void **state) {
    (void)state;
    tg_rope_scaling s = {.type = TG_ROPE_SCALING_LLAMA3, .factor = 32, .low_freq_factor = 1, .high_freq_factor = 4,
                         .original_context = 8192};
    double f[32], base[32];
    tg_rope_inv_freq(64, 500000.0f, &s, f);
    tg_rope_inv_freq(64, 500000.0f, NULL, base);
    const double pi = 3.14159265358979323846;
    for (int i = 0; i < 32; i++) {
        assert_true(base[i] == pow(500000.0, -2.0 * i / 64)); /* unscaled: the cache's own formula */
        const double wl = 2 * pi / base[i];
        double want;
        if (wl < 8192.0 / 4) want = base[i];
        else if (wl > 8192.0 / 1) want = base[i] / 32;
        else {
            const double sm = (8192.0 / wl - 1) / (4 - 1);
            want = (1 - sm) * base[i] / 32 + sm * base[i];
        }
        assert_true(fabs(f[i] - want) <= 1e-15 * want);
    }
    assert_true(f[0] == base[0]);
    assert_true(f[31] == base[31] / 32);
    assert_true(f[16] < base[16] && f[16] > base[16] / 32);
    assert_true(f[14] == base[14] && f[18] == base[18] / 32);
    s = (tg_rope_scaling){.type = TG_ROPE_SCALING_LINEAR, .factor = 4};
    tg_rope_inv_freq(64, 500000.0f, &s, f);
    for (int i = 0; i < 32; i++) assert_true(f[i] == base[i] / 4);
    float factors[32];
    for (int i = 0; i < 32; i++) factors[i] = 1.0f + (float)i;
    s = (tg_rope_scaling){.freq_factors = factors};
    assert_true(tg_rope_is_scaled(&s));
    tg_rope_inv_freq(64, 500000.0f, &s, f);
    for (int i = 0; i < 32; i++) assert_true(f[i] == base[i] / (1.0 + i));
    char line[96];
    tg_rope_scaling_describe(&s, line, sizeof line);
    assert_string_equal(line, "rope_freqs.weight factors (Llama 3.1 form)");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_inv_freq),
        cmocka_unit_test(test_llama3),
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_generation_settings),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
