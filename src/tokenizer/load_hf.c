/* load_hf.c — a tokenizer from a Hugging Face folder: tokenizer.json (model, normalizer, pre-tokenizer, decoder,
 * added tokens, post-processor) plus the optional tokenizer_config.json and generation_config.json for BOS/EOS. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/json_file.h"
#include "util/model_file.h"

static const char METASPACE[] = "\xE2\x96\x81"; /* U+2581 */

/* The loader's state: the tokenizer being built and the file the messages name. */
typedef struct {
    tg_tokenizer *t;
    const char *path;
    tg_error *err;
} hf_ctx;

static const char *str_field(const json_t *o, const char *key) {
    const json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static bool bool_field(const json_t *o, const char *key, bool dflt) {
    const json_t *v = json_object_get(o, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

static bool is_type(const json_t *o, const char *type) {
    const char *s = str_field(o, "type");
    return s && strcmp(s, type) == 0;
}

/* dir/name into path[cap] and its JSON object, through model_file.h (inside the folder, a regular file, opened
 * non-blocking). A missing optional file gives NULL with *failed false; every other problem sets *failed and err. */
static json_t *load_json(const char *dir, const char *name, char *path, size_t cap, bool required, tg_error *err,
                         bool *failed) {
    *failed = false;
    bool missing;
    tg_error why = {0};
    json_t *root = NULL;
    if (tg_folder_file(dir, name, NULL, path, cap, &missing, &why))
        root = tg_json_load_path(path, JSON_ALLOW_NUL, &missing, &why);
    if (!root) {
        if (missing && !required) return NULL;
        *failed = true;
        if (missing) tg_fail(err, "%s: cannot open (a Hugging Face folder needs %s)", path, name);
        else if (err) *err = why;
        return NULL;
    }
    if (!json_is_object(root)) {
        *failed = true;
        tg_fail(err, "%s: not a JSON object", path);
        json_decref(root);
        return NULL;
    }
    return root;
}

/* A pattern object {"String": s} or {"Regex": r}: compiled (literal for String). */
static tg_regex *pattern_regex(hf_ctx *c, const json_t *pat, const char *what) {
    const json_t *s = json_object_get(pat, "String"), *r = json_object_get(pat, "Regex");
    if (json_is_string(s)) return tg_regex_new(json_string_value(s), json_string_length(s), true, c->path, c->err);
    if (json_is_string(r)) return tg_regex_new(json_string_value(r), json_string_length(r), false, c->path, c->err);
    tg_fail(c->err, "%s: %s pattern must be {\"String\": ...} or {\"Regex\": ...}", c->path, what);
    return NULL;
}

static bool add_split(hf_ctx *c, tg_regex *re, tg_split_behavior beh, bool invert) {
    const tg_pre_step st = {.kind = TG_PRE_SPLIT, .re = re, .behavior = beh, .invert = invert};
    return re && tg_tok_add_pre(c->t, &st, c->err);
}

static bool parse_normalizer(hf_ctx *c, const json_t *n) {
    if (!n || json_is_null(n)) return true;
    const char *type = str_field(n, "type");
    if (!type) return tg_fail(c->err, "%s: normalizer without a type", c->path);
    if (strcmp(type, "Sequence") == 0) {
        const json_t *list = json_object_get(n, "normalizers");
        size_t i;
        json_t *item;
        json_array_foreach(list, i, item) {
            if (!parse_normalizer(c, item)) return false;
        }
        return true;
    }
    if (strcmp(type, "Prepend") == 0) {
        const json_t *p = json_object_get(n, "prepend");
        if (!json_is_string(p)) return tg_fail(c->err, "%s: Prepend normalizer without a string", c->path);
        return tg_tok_add_norm(c->t, TG_NORM_PREPEND, json_string_value(p), json_string_length(p), NULL, 0, c->err);
    }
    if (strcmp(type, "Replace") == 0) {
        const json_t *s = json_object_get(json_object_get(n, "pattern"), "String");
        const json_t *to = json_object_get(n, "content");
        if (!json_is_string(s) || !json_is_string(to))
            return tg_fail(c->err, "%s: only Replace normalizers of a String pattern are supported", c->path);
        return tg_tok_add_norm(c->t, TG_NORM_REPLACE, json_string_value(s), json_string_length(s),
                               json_string_value(to), json_string_length(to), c->err);
    }
    /* NFC leaves already-composed text (nearly all input) unchanged; we do not compose, see the report. */
    if (strcmp(type, "NFC") == 0) return true;
    return tg_fail(c->err, "%s: unsupported normalizer type '%s'", c->path, type);
}

static bool parse_behavior(hf_ctx *c, const char *s, tg_split_behavior *out) {
    static const struct {
        const char *name;
        tg_split_behavior b;
    } map[] = {{"Removed", TG_SPLIT_REMOVED},           {"Isolated", TG_SPLIT_ISOLATED},
               {"MergedWithPrevious", TG_SPLIT_MERGED_PREV}, {"MergedWithNext", TG_SPLIT_MERGED_NEXT},
               {"Contiguous", TG_SPLIT_CONTIGUOUS}};
    for (size_t i = 0; s && i < sizeof map / sizeof map[0]; i++) {
        if (strcmp(s, map[i].name) == 0) {
            *out = map[i].b;
            return true;
        }
    }
    return tg_fail(c->err, "%s: unknown split behavior '%s'", c->path, s ? s : "(none)");
}

/* Metaspace's prepend scheme: prepend_scheme, or the older add_prefix_space flag. */
static tg_prepend_scheme prepend_scheme(const json_t *o) {
    const char *s = str_field(o, "prepend_scheme");
    if (s) return strcmp(s, "never") == 0 ? TG_PREPEND_NEVER : strcmp(s, "first") == 0 ? TG_PREPEND_FIRST
                                                                                          : TG_PREPEND_ALWAYS;
    return bool_field(o, "add_prefix_space", true) ? TG_PREPEND_ALWAYS : TG_PREPEND_NEVER;
}

static bool replacement_char(hf_ctx *c, const json_t *o, char out[5], size_t *len) {
    const char *r = str_field(o, "replacement");
    if (!r) r = METASPACE;
    const size_t n = strlen(r);
    if (n == 0 || n > 4) return tg_fail(c->err, "%s: bad Metaspace replacement", c->path);
    memcpy(out, r, n + 1);
    *len = n;
    return true;
}

static bool parse_pre(hf_ctx *c, const json_t *p) {
    if (!p || json_is_null(p)) return true;
    const char *type = str_field(p, "type");
    if (!type) return tg_fail(c->err, "%s: pre_tokenizer without a type", c->path);
    if (strcmp(type, "Sequence") == 0) {
        size_t i;
        json_t *item;
        json_array_foreach(json_object_get(p, "pretokenizers"), i, item) {
            if (!parse_pre(c, item)) return false;
        }
        return true;
    }
    if (strcmp(type, "ByteLevel") == 0) {
        tg_pre_step st = {.kind = TG_PRE_BYTE_LEVEL, .add_prefix_space = bool_field(p, "add_prefix_space", true)};
        if (bool_field(p, "use_regex", true)) {
            st.re = tg_regex_new(TG_REGEX_GPT2, strlen(TG_REGEX_GPT2), false, c->path, c->err);
            if (!st.re) return false;
        }
        return tg_tok_add_pre(c->t, &st, c->err);
    }
    if (strcmp(type, "Split") == 0) {
        tg_split_behavior beh = TG_SPLIT_ISOLATED;
        if (!parse_behavior(c, str_field(p, "behavior"), &beh)) return false;
        return add_split(c, pattern_regex(c, json_object_get(p, "pattern"), "Split"), beh,
                         bool_field(p, "invert", false));
    }
    if (strcmp(type, "Digits") == 0) {
        const char *re = bool_field(p, "individual_digits", false) ? "\\p{N}" : "\\p{N}+";
        return add_split(c, tg_regex_new(re, strlen(re), false, c->path, c->err), TG_SPLIT_ISOLATED, false);
    }
    if (strcmp(type, "Metaspace") == 0) {
        tg_pre_step st = {
            .kind = TG_PRE_METASPACE, .prepend = prepend_scheme(p), .split = bool_field(p, "split", true)};
        if (!replacement_char(c, p, st.replacement, &st.replacement_len)) return false;
        return tg_tok_add_pre(c->t, &st, c->err);
    }
    if (strcmp(type, "Whitespace") == 0) {
        const char *re = "\\w+|[^\\w\\s]+";
        return add_split(c, tg_regex_new(re, strlen(re), false, c->path, c->err), TG_SPLIT_REMOVED, true);
    }
    if (strcmp(type, "WhitespaceSplit") == 0) {
        const char *re = "\\s+";
        return add_split(c, tg_regex_new(re, strlen(re), false, c->path, c->err), TG_SPLIT_REMOVED, false);
    }
    return tg_fail(c->err, "%s: unsupported pre_tokenizer type '%s'", c->path, type);
}

static bool parse_decoder(hf_ctx *c, const json_t *d) {
    tg_tokenizer *t = c->t;
    if (!d || json_is_null(d)) return true;
    const char *type = str_field(d, "type");
    if (!type) return tg_fail(c->err, "%s: decoder without a type", c->path);
    if (strcmp(type, "Sequence") == 0) {
        size_t i;
        json_t *item;
        json_array_foreach(json_object_get(d, "decoders"), i, item) {
            if (!parse_decoder(c, item)) return false;
        }
        return true;
    }
    if (strcmp(type, "ByteLevel") == 0) {
        t->dec_byte_level = true;
        return true;
    }
    if (strcmp(type, "ByteFallback") == 0) {
        t->dec_byte_fallback = true;
        return true;
    }
    if (strcmp(type, "Fuse") == 0) return true; /* pieces are joined anyway */
    if (strcmp(type, "Replace") == 0) {
        const char *from = str_field(json_object_get(d, "pattern"), "String"), *to = str_field(d, "content");
        if (!from || !to || strcmp(from, METASPACE) != 0 || strcmp(to, " ") != 0)
            return tg_fail(c->err, "%s: only the Replace decoder U+2581 -> ' ' is supported", c->path);
        t->dec_metaspace = true;
        return true;
    }
    if (strcmp(type, "Strip") == 0) {
        const char *content = str_field(d, "content");
        const json_t *start = json_object_get(d, "start"), *stop = json_object_get(d, "stop");
        if (!content || strcmp(content, " ") != 0 || !json_is_integer(start) || json_integer_value(start) < 0 ||
            json_integer_value(start) > 64 || (json_is_integer(stop) && json_integer_value(stop) != 0))
            return tg_fail(c->err, "%s: only Strip decoders of leading spaces are supported", c->path);
        t->dec_strip_start = (int)json_integer_value(start);
        return true;
    }
    if (strcmp(type, "Metaspace") == 0) {
        char rep[5];
        size_t rep_len;
        if (!replacement_char(c, d, rep, &rep_len)) return false;
        if (strcmp(rep, METASPACE) != 0)
            return tg_fail(c->err, "%s: Metaspace decoder with a replacement other than U+2581", c->path);
        t->dec_metaspace = true;
        t->dec_strip_start = prepend_scheme(d) == TG_PREPEND_NEVER ? 0 : 1;
        return true;
    }
    return tg_fail(c->err, "%s: unsupported decoder type '%s'", c->path, type);
}

/* The id of a token given by its text, or -1. */
static int32_t lookup(const tg_tokenizer *t, const char *s) { return s ? tg_strmap_get(&t->vocab, s, strlen(s)) : -1; }

/* BOS from a TemplateProcessing post-processor whose single-sequence template starts with a special token. */
static int32_t template_bos(const tg_tokenizer *t, const json_t *pp) {
    if (!pp || json_is_null(pp)) return -1;
    if (is_type(pp, "Sequence")) {
        size_t i;
        json_t *item;
        json_array_foreach(json_object_get(pp, "processors"), i, item) {
            const int32_t id = template_bos(t, item);
            if (id >= 0) return id;
        }
        return -1;
    }
    if (!is_type(pp, "TemplateProcessing")) return -1;
    const json_t *first = json_array_get(json_object_get(pp, "single"), 0);
    const char *name = str_field(json_object_get(first, "SpecialToken"), "id");
    if (!name) return -1;
    const json_t *ids = json_object_get(json_object_get(json_object_get(pp, "special_tokens"), name), "ids");
    const json_t *id = json_array_get(ids, 0);
    if (json_is_integer(id) && json_integer_value(id) >= 0 && json_integer_value(id) < t->n_vocab)
        return (int32_t)json_integer_value(id);
    return lookup(t, name);
}

/* A token named in tokenizer_config.json: a string or {"content": string}. */
static int32_t config_token(const tg_tokenizer *t, const json_t *cfg, const char *key) {
    const json_t *v = json_object_get(cfg, key);
    if (json_is_object(v)) v = json_object_get(v, "content");
    return json_is_string(v) ? lookup(t, json_string_value(v)) : -1;
}

/* An id in generation_config.json: an integer or the first of a list. */
static int32_t config_id(const tg_tokenizer *t, const json_t *cfg, const char *key) {
    const json_t *v = json_object_get(cfg, key);
    if (json_is_array(v)) v = json_array_get(v, 0);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= t->n_vocab) return -1;
    return (int32_t)json_integer_value(v);
}

/* Vocabulary size: one past the largest id in model.vocab and added_tokens. */
static bool vocab_size(hf_ctx *c, const json_t *vocab, const json_t *added, int32_t *n) {
    json_int_t max = -1;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)vocab, key, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= INT32_MAX)
            return tg_fail(c->err, "%s: vocab entry '%.40s' has a bad id", c->path, key);
        if (json_integer_value(v) > max) max = json_integer_value(v);
    }
    size_t i;
    json_t *a;
    json_array_foreach(added, i, a) {
        const json_t *id = json_object_get(a, "id");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= INT32_MAX ||
            !json_is_string(json_object_get(a, "content")))
            return tg_fail(c->err, "%s: added_tokens[%zu] needs an id and a content", c->path, i);
        if (json_integer_value(id) > max) max = json_integer_value(id);
    }
    if (max < 0) return tg_fail(c->err, "%s: empty vocabulary", c->path);
    /* Ids are dense in practice (added tokens may repeat vocab ids). A largest id far beyond the number of tokens
     * listed would make a small file allocate gigabytes of empty slots. */
    const size_t listed = json_object_size(vocab) + json_array_size(added);
    if ((size_t)max >= 2 * listed + 256)
        return tg_fail(c->err, "%s: token id %lld is far beyond the %zu tokens listed (ids must be dense)", c->path,
                       (long long)max, listed);
    *n = (int32_t)(max + 1);
    return true;
}

/* Texts and types from model.vocab and added_tokens (an added token overrides a vocab entry of the same id). */
static bool load_vocab(hf_ctx *c, const json_t *vocab, const json_t *added, bool byte_fallback) {
    tg_tokenizer *t = c->t;
    const size_t n = (size_t)t->n_vocab;
    const char **texts = calloc(n, sizeof *texts);
    size_t *lens = calloc(n, sizeof *lens);
    bool *lstrip = calloc(n, sizeof *lstrip), *rstrip = calloc(n, sizeof *rstrip);
    bool ok = texts && lens && lstrip && rstrip;
    if (!ok) tg_fail(c->err, "out of memory reading %s", c->path);
    const char *key;
    json_t *v;
    if (ok) {
        json_object_foreach((json_t *)vocab, key, v) {
            const size_t id = (size_t)json_integer_value(v);
            texts[id] = key;
            lens[id] = strlen(key);
            uint8_t b;
            t->type[id] = byte_fallback && tg_tok_parse_byte(key, lens[id], &b) ? TG_TOK_BYTE : TG_TOK_NORMAL;
        }
        size_t i;
        json_t *a;
        json_array_foreach(added, i, a) {
            const size_t id = (size_t)json_integer_value(json_object_get(a, "id"));
            const json_t *content = json_object_get(a, "content");
            texts[id] = json_string_value(content);
            lens[id] = json_string_length(content);
            t->type[id] = bool_field(a, "special", false) ? TG_TOK_CONTROL : TG_TOK_USER;
            lstrip[id] = bool_field(a, "lstrip", false);
            rstrip[id] = bool_field(a, "rstrip", false);
        }
        ok = tg_tok_set_texts(t, texts, lens, c->err) && tg_tok_finish(t, lstrip, rstrip, c->err);
    }
    free(texts);
    free(lens);
    free(lstrip);
    free(rstrip);
    return ok;
}

static bool load_merges(hf_ctx *c, const json_t *merges) {
    tg_tokenizer *t = c->t;
    if (!json_is_array(merges)) return tg_fail(c->err, "%s: model.merges missing", c->path);
    const size_t n = json_array_size(merges);
    if (n > INT32_MAX) return tg_fail(c->err, "%s: too many merges", c->path);
    if (!tg_pairmap_init(&t->merges, n)) return tg_fail(c->err, "out of memory for the merges of %s", c->path);
    t->have_merges = true;
    size_t skipped = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *m = json_array_get(merges, i);
        const char *a, *b;
        size_t la, lb;
        if (json_is_string(m)) { /* "a b" */
            const char *s = json_string_value(m);
            const size_t len = json_string_length(m);
            const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
            if (!sp) return tg_fail(c->err, "%s: merge %zu ('%.40s') is not \"a b\"", c->path, i, s);
            a = s;
            la = (size_t)(sp - s);
            b = sp + 1;
            lb = len - la - 1;
        } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                   json_is_string(json_array_get(m, 1))) { /* ["a", "b"] */
            a = json_string_value(json_array_get(m, 0));
            la = json_string_length(json_array_get(m, 0));
            b = json_string_value(json_array_get(m, 1));
            lb = json_string_length(json_array_get(m, 1));
        } else {
            return tg_fail(c->err, "%s: merge %zu is neither \"a b\" nor [\"a\", \"b\"]", c->path, i);
        }
        if (!tg_tok_add_merge(t, a, la, b, lb, (int32_t)i, &skipped))
            return tg_fail(c->err, "out of memory for the merges of %s", c->path);
    }
    if (skipped) return tg_fail(c->err, "%s: %zu merges name tokens missing from the vocab", c->path, skipped);
    return true;
}

static bool load_model(hf_ctx *c, const json_t *root) {
    tg_tokenizer *t = c->t;
    const json_t *model = json_object_get(root, "model");
    const char *type = str_field(model, "type");
    if (type && strcmp(type, "BPE") != 0)
        return tg_fail(c->err, "%s: unsupported model type '%s' (supported: BPE)", c->path, type);
    const char *prefix = str_field(model, "continuing_subword_prefix");
    const char *suffix = str_field(model, "end_of_word_suffix");
    if ((prefix && *prefix) || (suffix && *suffix))
        return tg_fail(c->err, "%s: BPE continuing_subword_prefix / end_of_word_suffix are not supported", c->path);
    t->model = TG_TOKMODEL_BPE;
    t->fuse_unk = bool_field(model, "fuse_unk", false);
    t->ignore_merges = bool_field(model, "ignore_merges", false);
    t->unk = lookup(t, str_field(model, "unk_token"));
    return load_merges(c, json_object_get(model, "merges"));
}

/* BOS/EOS and add_bos: tokenizer_config.json first, then generation_config.json, then the post-processor. */
static bool load_specials(hf_ctx *c, const char *dir, const json_t *root) {
    tg_tokenizer *t = c->t;
    char path[4096];
    bool failed;
    json_t *tcfg = load_json(dir, "tokenizer_config.json", path, sizeof path, false, c->err, &failed);
    if (failed) return false;
    json_t *gcfg = load_json(dir, "generation_config.json", path, sizeof path, false, c->err, &failed);
    if (failed) {
        json_decref(tcfg);
        return false;
    }
    const int32_t tmpl_bos = template_bos(t, json_object_get(root, "post_processor"));
    t->bos = config_token(t, tcfg, "bos_token");
    if (t->bos < 0) t->bos = config_id(t, gcfg, "bos_token_id");
    if (t->bos < 0) t->bos = tmpl_bos;
    t->eos = config_token(t, tcfg, "eos_token");
    if (t->eos < 0) t->eos = config_id(t, gcfg, "eos_token_id");
    const json_t *add = json_object_get(tcfg, "add_bos_token");
    t->add_bos = json_is_boolean(add) ? json_is_true(add) : tmpl_bos >= 0;
    json_decref(tcfg);
    json_decref(gcfg);
    return true;
}

/* The added tokens' "normalized" flags (absent: not special, as tokenizers' AddedToken defaults) to the tokenizer,
 * once its normalizer is known: those are matched in the normalized text (tg_tok_set_normalized). */
static bool set_normalized(hf_ctx *c, const json_t *added) {
    if (c->t->n_norm == 0 || json_array_size(added) == 0) return true;
    bool *normalized = calloc((size_t)c->t->n_vocab, sizeof *normalized);
    if (!normalized) return tg_fail(c->err, "out of memory reading %s", c->path);
    size_t i;
    json_t *a;
    json_array_foreach(added, i, a) {
        const size_t id = (size_t)json_integer_value(json_object_get(a, "id")); /* checked by vocab_size */
        normalized[id] = bool_field(a, "normalized", !bool_field(a, "special", false));
    }
    const bool ok = tg_tok_set_normalized(c->t, normalized, c->err);
    free(normalized);
    return ok;
}

tg_tokenizer *tg_tokenizer_load_hf(const char *dir, tg_error *err) {
    char path[4096];
    bool failed;
    json_t *root = load_json(dir, "tokenizer.json", path, sizeof path, true, err, &failed);
    if (!root) return NULL;
    hf_ctx c = {NULL, path, err};
    const json_t *model = json_object_get(root, "model");
    const json_t *vocab = json_object_get(model, "vocab");
    json_t *added = json_object_get(root, "added_tokens");
    int32_t n = 0;
    bool ok = true;
    if (!json_is_object(vocab)) ok = tg_fail(err, "%s: model.vocab missing or not an object", path);
    if (ok && added && !json_is_array(added)) ok = tg_fail(err, "%s: added_tokens is not a list", path);
    if (ok) ok = vocab_size(&c, vocab, added, &n);
    if (ok) {
        c.t = tg_tok_alloc(n, path, err);
        ok = c.t != NULL;
    }
    if (ok) ok = load_vocab(&c, vocab, added, bool_field(model, "byte_fallback", false));
    if (ok) {
        c.t->byte_fallback = bool_field(model, "byte_fallback", false);
        ok = load_model(&c, root) && parse_normalizer(&c, json_object_get(root, "normalizer")) &&
             parse_pre(&c, json_object_get(root, "pre_tokenizer")) &&
             parse_decoder(&c, json_object_get(root, "decoder")) && load_specials(&c, dir, root) &&
             set_normalized(&c, added);
    }
    json_decref(root);
    if (!ok) {
        tg_tokenizer_free(c.t);
        return NULL;
    }
    return c.t;
}
