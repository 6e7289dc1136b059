/* hf_generation.c — BOS / EOS ids and sampling settings from config.json and generation_config.json. */
#include "model/hf_generation.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "util/error.h"
#include "util/json_file.h"
#include "util/model_file.h"

/* A token id: an integer >= 0 (JSON null: none, -1). */
static bool token_id(const json_t *v, const char *path, const char *key, int32_t *out, tg_error *err) {
    if (!v || json_is_null(v)) {
        *out = -1;
        return true;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX)
        return tg_fail(err, "%s: \"%s\" must be a token id (an integer >= 0) or a list of them", path, key);
    *out = (int32_t)json_integer_value(v);
    return true;
}

/* eos_token_id: an id or a list of ids, each added to m's end-of-sequence ids. */
static bool add_eos_ids(struct tg_model *m, const json_t *root, const char *path, int vocab, tg_error *err) {
    const json_t *v = json_object_get(root, "eos_token_id");
    const size_t n = json_is_array(v) ? json_array_size(v) : 1;
    for (size_t i = 0; i < n; i++) {
        int32_t id = -1;
        if (!token_id(json_is_array(v) ? json_array_get(v, i) : v, path, "eos_token_id", &id, err)) return false;
        if (id >= 0 && (vocab <= 0 || id < vocab) && !tg_model_add_eos(m, id, path, err)) return false;
    }
    return true;
}

/* generation_config.json's sampling settings (absent keys and JSON null leave has_* false). */
static bool read_sampling(struct tg_model *m, const json_t *g, const char *path, tg_error *err) {
    tg_generation_defaults *d = &m->gen;
    const json_t *sample = json_object_get(g, "do_sample");
    if (sample && !json_is_null(sample) && !json_is_boolean(sample))
        return tg_fail(err, "%s: \"do_sample\" is not true or false", path);
    if (json_is_false(sample)) return true; /* transformers decodes greedily and ignores the rest */
    const json_t *t = json_object_get(g, "temperature"), *k = json_object_get(g, "top_k"),
                 *p = json_object_get(g, "top_p");
    if (t && !json_is_null(t)) {
        if (!json_is_number(t) || !(json_number_value(t) >= 0.0) || !(json_number_value(t) <= 1e4))
            return tg_fail(err, "%s: \"temperature\" must be a number in [0, 10000]", path);
        d->has_temperature = true;
        d->temperature = (float)json_number_value(t);
    }
    if (k && !json_is_null(k)) {
        if (!json_is_integer(k) || json_integer_value(k) < 0 || json_integer_value(k) > INT32_MAX)
            return tg_fail(err, "%s: \"top_k\" must be an integer >= 0", path);
        d->has_top_k = true;
        d->top_k = (int)json_integer_value(k);
    }
    if (p && !json_is_null(p)) {
        if (!json_is_number(p) || !(json_number_value(p) >= 0.0) || !(json_number_value(p) <= 1.0))
            return tg_fail(err, "%s: \"top_p\" must be a number in [0, 1]", path);
        d->has_top_p = true;
        d->top_p = (float)json_number_value(p);
    }
    if (d->has_temperature || d->has_top_k || d->has_top_p)
        snprintf(d->source, sizeof d->source, "generation_config.json");
    return true;
}

bool tg_hf_read_generation(struct tg_model *m, const char *dir, const json_t *config, const char *config_path,
                           int vocab_size, tg_error *err) {
    if (config) {
        int32_t bos = -1;
        if (!token_id(json_object_get(config, "bos_token_id"), config_path, "bos_token_id", &bos, err)) return false;
        m->config_bos = vocab_size > 0 && bos >= vocab_size ? -1 : bos;
        if (!add_eos_ids(m, config, config_path, vocab_size, err)) return false;
    }
    char path[4096];
    bool missing = false;
    tg_error why = {0};
    if (!tg_folder_file(dir, "generation_config.json", NULL, path, sizeof path, &missing, &why)) {
        if (missing) return true;
        if (err) *err = why;
        return false;
    }
    json_t *g = tg_json_load_path(path, 0, NULL, err);
    if (!g) return false;
    bool ok = json_is_object(g) ? true : tg_fail(err, "%s: not a JSON object", path);
    if (ok) ok = add_eos_ids(m, g, path, vocab_size, err) && read_sampling(m, g, path, err);
    if (ok && m->config_bos < 0 && config) {
        int32_t bos = -1;
        ok = token_id(json_object_get(g, "bos_token_id"), path, "bos_token_id", &bos, err);
        if (ok && (vocab_size <= 0 || bos < vocab_size)) m->config_bos = bos;
    }
    json_decref(g);
    return ok;
}
