/* template_source.c — where a model keeps its chat template (see template_source.h). Uses the GGUF reader and
 * jansson read-only; never loads weights. */
#define _POSIX_C_SOURCE 200809L
#include "chat/template_source.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "format/gguf.h"
#include "util/error.h"

#define MAX_TEMPLATE_BYTES ((size_t)1 << 20)
#define MAX_JSON_BYTES ((off_t)64 << 20)

void tg_chat_source_free(tg_chat_source *s) {
    if (!s) return;
    free(s->text);
    free(s->bos_token);
    free(s->eos_token);
    memset(s, 0, sizeof *s);
}

static char *dup_n(const char *p, size_t n) {
    char *s = malloc(n + 1);
    if (!s) return NULL;
    if (n) memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

/* ---- GGUF ---------------------------------------------------------------------------------------------------- */

static char *gguf_token(const tg_gguf *g, const char *id_key) {
    int64_t id;
    tg_gguf_array tokens;
    if (!tg_gguf_get_i64(g, id_key, &id) || !tg_gguf_get_array(g, "tokenizer.ggml.tokens", &tokens)) return NULL;
    if (tokens.elem_type != TG_GGUF_STRING || id < 0 || (uint64_t)id >= tokens.count) return NULL;
    tg_gguf_str s = tg_gguf_array_str(&tokens, (uint64_t)id);
    return s.ptr ? dup_n(s.ptr, (size_t)s.len) : NULL;
}

static bool from_gguf(const char *path, tg_chat_source *out, tg_error *err) {
    tg_gguf *g = tg_gguf_open(path, err);
    if (!g) return false;
    tg_gguf_str s;
    bool ok = true;
    if (tg_gguf_get_str(g, "tokenizer.chat_template", &s)) {
        if (s.len > MAX_TEMPLATE_BYTES) {
            ok = tg_fail(err, "%s: tokenizer.chat_template is %llu bytes, more than the limit of %zu", path,
                         (unsigned long long)s.len, MAX_TEMPLATE_BYTES);
        } else if (!(out->text = dup_n(s.ptr, (size_t)s.len))) {
            ok = tg_fail(err, "%s: out of memory", path);
        } else {
            out->len = (size_t)s.len;
            snprintf(out->origin, sizeof out->origin, "tokenizer.chat_template in %.280s", path);
        }
    } else if (tg_gguf_has(g, "tokenizer.chat_template")) {
        ok = tg_fail(err, "%s: tokenizer.chat_template is not a string", path);
    }
    if (ok) {
        out->bos_token = gguf_token(g, "tokenizer.ggml.bos_token_id");
        out->eos_token = gguf_token(g, "tokenizer.ggml.eos_token_id");
    }
    tg_gguf_close(g);
    return ok;
}

/* ---- Hugging Face folder ------------------------------------------------------------------------------------- */

/* Reads dir/name as JSON; NULL without an error when the file does not exist (*present = false). */
static json_t *load_json(const char *dir, const char *name, bool *present, tg_error *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat st;
    *present = stat(path, &st) == 0;
    if (!*present) return NULL;
    if (!S_ISREG(st.st_mode) || st.st_size > MAX_JSON_BYTES) {
        tg_fail(err, "%s: not a regular file of at most 64 MiB", path);
        return NULL;
    }
    json_error_t je; /* integers as reals: tokenizer configs hold model_max_length values beyond int64 */
    json_t *j = json_load_file(path, JSON_DECODE_INT_AS_REAL | JSON_ALLOW_NUL, &je);
    if (!j) tg_fail(err, "%s: invalid JSON at line %d: %s", path, je.line, je.text);
    else if (!json_is_object(j)) {
        tg_fail(err, "%s: not a JSON object", path);
        json_decref(j);
        j = NULL;
    }
    return j;
}

/* A token entry: "text" or {"content": "text", ...} (an AddedToken). */
static char *token_string(const json_t *v) {
    if (json_is_object(v)) v = json_object_get(v, "content");
    return json_is_string(v) ? dup_n(json_string_value(v), json_string_length(v)) : NULL;
}

static bool set_text(tg_chat_source *out, const char *p, size_t n, const char *where, tg_error *err) {
    if (n > MAX_TEMPLATE_BYTES)
        return tg_fail(err, "%s: the chat template is %zu bytes, more than the limit of %zu", where, n,
                       MAX_TEMPLATE_BYTES);
    if (!(out->text = dup_n(p, n))) return tg_fail(err, "%s: out of memory", where);
    out->len = n;
    return true;
}

/* chat_template of tokenizer_config.json: a string or [{name, template}, ...] ("default" is used). */
static bool template_from_config(const json_t *cfg, const char *path, tg_chat_source *out, tg_error *err) {
    const json_t *ct = json_object_get(cfg, "chat_template");
    if (!ct || json_is_null(ct)) return true;
    if (json_is_string(ct)) {
        if (!set_text(out, json_string_value(ct), json_string_length(ct), path, err)) return false;
        snprintf(out->origin, sizeof out->origin, "chat_template in %.280s", path);
        return true;
    }
    if (!json_is_array(ct)) return tg_fail(err, "%s: chat_template is neither a string nor a list", path);
    char names[200] = "";
    size_t i;
    const json_t *item;
    json_array_foreach(ct, i, item) {
        const json_t *name = json_object_get(item, "name"), *tmpl = json_object_get(item, "template");
        if (!json_is_string(name) || !json_is_string(tmpl))
            return tg_fail(err, "%s: chat_template[%zu] is not a {\"name\", \"template\"} object", path, i);
        if (strcmp(json_string_value(name), "default") == 0) {
            if (!set_text(out, json_string_value(tmpl), json_string_length(tmpl), path, err)) return false;
            snprintf(out->origin, sizeof out->origin, "chat_template \"default\" in %.280s", path);
            return true;
        }
        size_t used = strlen(names);
        snprintf(names + used, sizeof names - used, "%s%s", used ? ", " : "", json_string_value(name));
    }
    return tg_fail(err, "%s: chat_template lists several templates (%s) but none named \"default\"", path, names);
}

static bool from_folder(const char *dir, tg_chat_source *out, tg_error *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    struct stat st;
    if (stat(path, &st) == 0) {
        if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > MAX_TEMPLATE_BYTES)
            return tg_fail(err, "%s: not a regular file of at most 1 MiB", path);
        FILE *f = fopen(path, "rb");
        if (!f) return tg_fail(err, "%s: cannot open", path);
        char *text = malloc((size_t)st.st_size + 1);
        size_t n = text ? fread(text, 1, (size_t)st.st_size, f) : 0;
        bool bad = !text || ferror(f);
        fclose(f);
        if (bad) {
            free(text);
            return tg_fail(err, "%s: read error", path);
        }
        text[n] = '\0';
        out->text = text;
        out->len = n;
        snprintf(out->origin, sizeof out->origin, "%.300s", path);
    }
    bool present;
    json_t *cfg = load_json(dir, "tokenizer_config.json", &present, err);
    if (present && !cfg) return false;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    if (cfg) {
        if (!out->text && !template_from_config(cfg, path, out, err)) {
            json_decref(cfg);
            return false;
        }
        out->bos_token = token_string(json_object_get(cfg, "bos_token"));
        out->eos_token = token_string(json_object_get(cfg, "eos_token"));
        json_decref(cfg);
    }
    if (!out->bos_token || !out->eos_token) {
        json_t *map = load_json(dir, "special_tokens_map.json", &present, err);
        if (present && !map) return false;
        if (map) {
            if (!out->bos_token) out->bos_token = token_string(json_object_get(map, "bos_token"));
            if (!out->eos_token) out->eos_token = token_string(json_object_get(map, "eos_token"));
            json_decref(map);
        }
    }
    return true;
}

bool tg_chat_source_find(const char *model_path, tg_chat_source *out, tg_error *err) {
    memset(out, 0, sizeof *out);
    struct stat st;
    if (stat(model_path, &st) != 0) return tg_fail(err, "%s: no such file or folder", model_path);
    bool ok = S_ISDIR(st.st_mode) ? from_folder(model_path, out, err) : from_gguf(model_path, out, err);
    if (!ok) tg_chat_source_free(out);
    return ok;
}

json_t *tg_chat_source_vars(const tg_chat_source *src, json_t *messages, bool add_generation_prompt) {
    json_t *vars = json_pack("{s:O, s:b}", "messages", messages, "add_generation_prompt", add_generation_prompt);
    if (vars && src->bos_token && json_object_set_new(vars, "bos_token", json_string(src->bos_token)) != 0) {
        json_decref(vars);
        return NULL;
    }
    if (vars && src->eos_token && json_object_set_new(vars, "eos_token", json_string(src->eos_token)) != 0) {
        json_decref(vars);
        return NULL;
    }
    return vars;
}

size_t tg_chat_source_end_ids(const char *template_text, const tg_model *model, int32_t *ids, size_t max) {
    static const char *const markers[] = {"<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>"};
    size_t n = 0;
    int32_t eos = tg_token_eos(model);
    if (eos >= 0 && n < max) ids[n++] = eos;
    for (size_t i = 0; i < sizeof markers / sizeof markers[0] && n < max; i++) {
        if (!template_text || !strstr(template_text, markers[i])) continue;
        int32_t *tok = NULL;
        size_t n_tok = 0;
        tg_error err = {0};
        if (tg_tokenize(model, markers[i], strlen(markers[i]), false, &tok, &n_tok, &err) && n_tok == 1 &&
            tok[0] != eos)
            ids[n++] = tok[0];
        free(tok);
    }
    return n;
}
