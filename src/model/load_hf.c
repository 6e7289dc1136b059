/* load_hf.c — a Llama or Mistral model from a Hugging Face folder: config.json (via jansson), the safetensors
 * weights under their transformers names, tokenizer.json. Q/K rows are in transformers' rotate-half RoPE order.
 * The YOCO variant (docs/yoco.md) is architecture TinyGPTYocoForCausalLM with a "kv_source" layer map. */
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model/hf_generation.h"
#include "model/model.h"
#include "util/error.h"
#include "util/json_file.h"
#include "util/model_file.h"

typedef struct {
    const json_t *root;
    const char *path; /* config.json's path, for messages */
} config;

/* The value of key, treating JSON null as absent. */
static const json_t *cfg_get(const config *c, const char *key) {
    const json_t *v = json_object_get(c->root, key);
    return v && !json_is_null(v) ? v : NULL;
}

/* An integer in [0, INT_MAX]; absent: def, or an error when required. */
static bool cfg_int(const config *c, const char *key, bool required, int def, int *out, tg_error *err) {
    const json_t *v = cfg_get(c, key);
    if (!v) {
        *out = def;
        return required ? tg_fail(err, "%s: missing \"%s\"", c->path, key) : true;
    }
    if (!json_is_integer(v)) return tg_fail(err, "%s: \"%s\" is not an integer", c->path, key);
    json_int_t i = json_integer_value(v);
    if (i < 0 || i > INT_MAX) return tg_fail(err, "%s: \"%s\" = %lld is out of range", c->path, key, (long long)i);
    *out = (int)i;
    return true;
}

static bool num_value(const json_t *v, const char *path, const char *key, float *out, tg_error *err) {
    if (!json_is_number(v)) return tg_fail(err, "%s: \"%s\" is not a number", path, key);
    *out = (float)json_number_value(v);
    return true;
}

static bool cfg_float(const config *c, const char *key, float def, float *out, tg_error *err) {
    const json_t *v = cfg_get(c, key);
    if (!v) {
        *out = def;
        return true;
    }
    return num_value(v, c->path, key, out, err);
}

static bool cfg_bool(const config *c, const char *key, bool def, bool *out, tg_error *err) {
    const json_t *v = cfg_get(c, key);
    if (!v) {
        *out = def;
        return true;
    }
    if (!json_is_boolean(v)) return tg_fail(err, "%s: \"%s\" is not true or false", c->path, key);
    *out = json_is_true(v);
    return true;
}

/* A number in obj (a RoPE parameter object): required; positive unless min0. */
static bool rope_num(const config *c, const json_t *obj, const char *what, const char *type, const char *key,
                     double *out, tg_error *err) {
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return tg_fail(err, "%s: %s type '%s' needs \"%s\"", c->path, what, type, key);
    if (!json_is_number(v) || !(json_number_value(v) > 0.0) || !isfinite(json_number_value(v)))
        return tg_fail(err, "%s: %s \"%s\" must be a positive number", c->path, what, key);
    *out = json_number_value(v);
    return true;
}

/* A RoPE parameter object ({"rope_type"|"type": ..., "rope_theta": ..., "factor": ...}, transformers 4's
 * rope_scaling or 5's rope_parameters) into hp: types default, linear and llama3 (the others are refused by name);
 * its rope_theta when present. `what` names the object in messages. llama3's original_max_position_embeddings
 * defaults to max_position_embeddings, as transformers 5 does. */
static bool read_rope_object(const config *c, const json_t *obj, const char *what, tg_hparams *hp, tg_error *err) {
    if (!json_is_object(obj)) return tg_fail(err, "%s: \"%s\" is not an object", c->path, what);
    const json_t *type = json_object_get(obj, "rope_type");
    if (!type || json_is_null(type)) type = json_object_get(obj, "type");
    const char *t = "default";
    if (type && !json_is_null(type)) {
        if (!json_is_string(type)) return tg_fail(err, "%s: %s type is not a string", c->path, what);
        t = json_string_value(type);
    } else {
        /* transformers 5 keys a per-layer-type object by layer type ("full_attention": {...}) */
        const char *key;
        const json_t *v;
        json_object_foreach((json_t *)obj, key, v) {
            if (json_is_object(v))
                return tg_fail(err, "%s: %s per layer type ('%.32s') is not supported", c->path, what, key);
        }
    }
    const json_t *th = json_object_get(obj, "rope_theta");
    if (th && !json_is_null(th) && !num_value(th, c->path, "rope_theta", &hp->rope_theta, err)) return false;
    const json_t *partial = json_object_get(obj, "partial_rotary_factor");
    if (partial && !json_is_null(partial) && !(json_is_number(partial) && json_number_value(partial) == 1.0) &&
        !hp->arch->program_rope)
        return tg_fail(err, "%s: %s \"partial_rotary_factor\" other than 1 (partial RoPE) is not supported for %s",
                       c->path, what, hp->arch->name);
    tg_rope_scaling *s = &hp->rope_scaling;
    memset(s, 0, sizeof *s);
    if (strcmp(t, "default") == 0) return true;
    if ((strcmp(t, "longrope") == 0 || strcmp(t, "su") == 0) && hp->arch->program_rope) {
        s->type = TG_ROPE_SCALING_LONGROPE; /* its factors: read_longrope */
        return true;
    }
    if (strcmp(t, "linear") == 0) {
        s->type = TG_ROPE_SCALING_LINEAR;
        return rope_num(c, obj, what, t, "factor", &s->factor, err);
    }
    if (strcmp(t, "llama3") == 0) {
        s->type = TG_ROPE_SCALING_LLAMA3;
        if (!rope_num(c, obj, what, t, "factor", &s->factor, err) ||
            !rope_num(c, obj, what, t, "low_freq_factor", &s->low_freq_factor, err) ||
            !rope_num(c, obj, what, t, "high_freq_factor", &s->high_freq_factor, err))
            return false;
        if (!(s->high_freq_factor > s->low_freq_factor))
            return tg_fail(err, "%s: %s \"high_freq_factor\" %g must exceed \"low_freq_factor\" %g", c->path, what,
                           s->high_freq_factor, s->low_freq_factor);
        const json_t *orig = json_object_get(obj, "original_max_position_embeddings");
        if (!orig || json_is_null(orig)) {
            s->original_context = hp->context_length;
        } else if (!json_is_integer(orig) || json_integer_value(orig) < 1 || json_integer_value(orig) > INT_MAX) {
            return tg_fail(err, "%s: %s \"original_max_position_embeddings\" must be a positive integer", c->path,
                           what);
        } else {
            s->original_context = (int64_t)json_integer_value(orig);
        }
        return true;
    }
    return tg_fail(err, "%s: %s type '%.64s' is not supported (supported: default, linear, llama3)", c->path, what, t);
}

/* RoPE: rope_theta, then transformers 4's "rope_scaling" or, when that is absent, null or empty, transformers 5's
 * "rope_parameters" (transformers takes rope_scaling first too). */
static bool read_rope(const config *c, tg_hparams *hp, tg_error *err) {
    hp->rope_theta = 10000.0f;
    if (!cfg_float(c, "rope_theta", 10000.0f, &hp->rope_theta, err)) return false;
    const json_t *rs = cfg_get(c, "rope_scaling");
    if (rs && json_is_object(rs) && json_object_size(rs) == 0) rs = NULL;
    if (rs) return read_rope_object(c, rs, "rope_scaling", hp, err);
    const json_t *rp = cfg_get(c, "rope_parameters");
    const json_t *full = rp ? json_object_get(rp, "full_attention") : NULL;
    if (json_is_object(full) && hp->arch->swa_pattern > 0) {
        /* transformers 5's Gemma 3: one object per layer type; the sliding layers' base is the local one */
        const json_t *sl = json_object_get(rp, "sliding_attention");
        const json_t *st = json_is_object(sl) ? json_object_get(sl, "rope_type") : NULL;
        if (st && !(json_is_string(st) && strcmp(json_string_value(st), "default") == 0))
            return tg_fail(err, "%s: rope_parameters.sliding_attention type other than default is not supported",
                           c->path);
        const json_t *th = json_is_object(sl) ? json_object_get(sl, "rope_theta") : NULL;
        if (th && !num_value(th, c->path, "rope_theta", &hp->rope_theta_local, err)) return false;
        return read_rope_object(c, full, "rope_parameters.full_attention", hp, err);
    }
    return !rp || read_rope_object(c, rp, "rope_parameters", hp, err);
}

/* The Hugging Face architecture name of the YOCO variant: Llama tensors and shapes plus "kv_source". */
static const char YOCO_ARCH[] = "TinyGPTYocoForCausalLM";

/* Architecture from "architectures" (or "model_type" when that list is absent): the family's row (arch.h); the
 * YOCO variant is Llama's row. */
static bool read_architecture(const config *c, tg_hparams *hp, tg_error *err) {
    const json_t *archs = cfg_get(c, "architectures");
    const bool by_type = !archs;
    const json_t *name = by_type ? cfg_get(c, "model_type") : json_array_get(archs, 0);
    if (by_type && !(name && json_is_string(name))) return tg_fail(err, "%s: missing \"architectures\"", c->path);
    if (!by_type && !(json_is_array(archs) && name && json_is_string(name)))
        return tg_fail(err, "%s: \"architectures\" is not a list of names", c->path);
    hp->arch = tg_arch_by_hf(json_string_value(name), by_type);
    if (!hp->arch) {
        char names[256];
        tg_arch_list(names, sizeof names, by_type ? TG_ARCH_LIST_HF_MODEL_TYPE : TG_ARCH_LIST_HF);
        return tg_fail(err, "%s: unsupported %s '%.64s' (supported: %s)", c->path,
                       by_type ? "model_type" : "architecture", json_string_value(name), names);
    }
    snprintf(hp->architecture, sizeof hp->architecture, "%s", hp->arch->name);
    return true;
}

/* "sliding_window" (Mistral); with the row's hf_window_flag (Qwen2/3) only when "use_sliding_window" is true, on the
 * layers from "max_window_layers" on (transformers' rule): a window on none of the layers or on all of them. */
static bool read_window(const config *c, tg_hparams *hp, tg_error *err) {
    if (hp->arch->hf_window_flag) {
        bool use = false;
        int from = 0;
        if (!cfg_bool(c, "use_sliding_window", false, &use, err)) return false;
        if (!use) return true;
        if (!cfg_int(c, "max_window_layers", false, 0, &from, err)) return false;
        if (from >= hp->n_layers) return true;
        if (from > 0)
            return tg_fail(err, "%s: a sliding window on layers %d to %d only (max_window_layers) is not supported",
                           c->path, from, hp->n_layers - 1);
    }
    return cfg_int(c, "sliding_window", false, 0, &hp->sliding_window, err);
}

static bool read_config(const config *c, tg_hparams *hp, tg_error *err) {
    if (!json_is_object(c->root)) return tg_fail(err, "%s: not a JSON object", c->path);
    if (!read_architecture(c, hp, err)) return false;

    /* the row's activation: silu (SwiGLU) or gelu_pytorch_tanh (GeGLU; Gemma names it hidden_activation) */
    const char *want = hp->arch->glu == TG_GLU_GELU_TANH ? "gelu_pytorch_tanh" : "silu";
    static const char *const act_keys[] = {"hidden_act", "hidden_activation"};
    for (int i = 0; i < 2; i++) {
        const json_t *act = cfg_get(c, act_keys[i]);
        if (act && !(json_is_string(act) && strcmp(json_string_value(act), want) == 0))
            return tg_fail(err, "%s: %s '%.32s' is not supported (%s: only %s)", c->path, act_keys[i],
                           json_is_string(act) ? json_string_value(act) : "?", hp->arch->name, want);
    }
    bool bias = false;
    if (!cfg_bool(c, "attention_bias", false, &bias, err)) return false;
    if (bias) return tg_fail(err, "%s: attention_bias is not supported", c->path);
    if (!cfg_bool(c, "mlp_bias", false, &bias, err)) return false;
    if (bias) return tg_fail(err, "%s: mlp_bias is not supported", c->path);

    if (!cfg_int(c, "hidden_size", true, 0, &hp->d_model, err)) return false;
    if (!cfg_int(c, "intermediate_size", true, 0, &hp->ffn_dim, err)) return false;
    if (!cfg_int(c, "num_hidden_layers", true, 0, &hp->n_layers, err)) return false;
    if (!cfg_int(c, "num_attention_heads", true, 0, &hp->n_heads, err)) return false;
    if (!cfg_int(c, "num_key_value_heads", false, hp->n_heads, &hp->n_kv_heads, err)) return false;
    if (hp->n_heads < 1) return tg_fail(err, "%s: num_attention_heads must be positive", c->path);
    if (!cfg_int(c, "head_dim", false, hp->d_model / hp->n_heads, &hp->head_dim, err)) return false;
    /* transformers' defaults for the optional fields */
    if (!cfg_float(c, "rms_norm_eps", 1e-6f, &hp->norm_eps, err)) return false;
    if (!cfg_int(c, "max_position_embeddings", false, hp->arch->hf_default_context, &hp->context_length, err))
        return false;
    if (!cfg_int(c, "vocab_size", false, 32000, &hp->vocab_size, err)) return false;
    if (!cfg_bool(c, "tie_word_embeddings", false, &hp->tied_embeddings, err)) return false;

    if (!read_rope(c, hp, err)) return false;
    hp->rope_style = TG_ROPE_HALF;

    hp->sliding_window = 0;
    return !hp->arch->hf_sliding_window || read_window(c, hp, err);
}

/* A positive number or null / absent (0). */
static bool cfg_opt_pos(const config *c, const char *key, float *out, tg_error *err) {
    if (!cfg_float(c, key, 0.0f, out, err)) return false;
    if (*out < 0.0f || !isfinite(*out)) return tg_fail(err, "%s: \"%s\" must be positive", c->path, key);
    return true;
}

/* The per-layer pattern: "layer_types" ("sliding_attention" / "full_attention" per layer) or, without it, every
 * swa_pattern-th layer full ("sliding_window_pattern" where given); the sliding layers get "sliding_window". */
static bool read_layer_types(const config *c, struct tg_model *m, tg_error *err) {
    tg_hparams *hp = &m->hp;
    int window = 0, pattern = hp->arch->swa_pattern;
    if (!cfg_int(c, "sliding_window", false, 0, &window, err)) return false;
    if (!cfg_int(c, "sliding_window_pattern", false, pattern, &pattern, err)) return false;
    const json_t *types = cfg_get(c, "layer_types");
    if (types && (!json_is_array(types) || json_array_size(types) != (size_t)hp->n_layers))
        return tg_fail(err, "%s: \"layer_types\" must list %d layer types", c->path, hp->n_layers);
    hp->layer_window = tg_model_alloc(m, (size_t)hp->n_layers * sizeof(int));
    if (!hp->layer_window) return tg_fail(err, "out of memory");
    for (int l = 0; l < hp->n_layers; l++) {
        bool sliding = pattern > 0 && (l + 1) % pattern != 0;
        if (types) {
            const char *t = json_string_value(json_array_get(types, (size_t)l));
            if (!t || (strcmp(t, "sliding_attention") != 0 && strcmp(t, "full_attention") != 0))
                return tg_fail(err, "%s: \"layer_types\"[%d] is not sliding_attention or full_attention", c->path, l);
            sliding = strcmp(t, "sliding_attention") == 0;
        }
        if (sliding && window < 1) return tg_fail(err, "%s: sliding layers without a \"sliding_window\"", c->path);
        hp->layer_window[l] = sliding ? window : 0;
    }
    return true;
}

/* One LongRoPE factor list of obj: rope_dims / 2 positive numbers, copied into the model. */
static bool read_factors(const config *c, struct tg_model *m, const json_t *obj, const char *key, const float **out,
                         tg_error *err) {
    const json_t *a = json_object_get(obj, key);
    const int half = m->hp.rope_dims / 2;
    if (!json_is_array(a) || json_array_size(a) != (size_t)half)
        return tg_fail(err, "%s: longrope \"%s\" must list %d numbers (rotated dims / 2)", c->path, key, half);
    float *f = tg_model_alloc_f32(m, (size_t)half);
    if (!f) return tg_fail(err, "out of memory");
    for (int i = 0; i < half; i++) {
        const json_t *v = json_array_get(a, (size_t)i);
        if (!json_is_number(v) || !(json_number_value(v) > 0.0))
            return tg_fail(err, "%s: longrope \"%s\"[%d] must be a positive number", c->path, key, i);
        f[i] = (float)json_number_value(v);
    }
    *out = f;
    return true;
}

/* Partial rotary ("partial_rotary_factor": the rotated dims, int(head_dim * factor) as transformers takes them) and
 * LongRoPE (Phi-3): the short and long factors, the original context, the attention factor (given, or transformers'
 * sqrt(1 + ln(s) / ln(original)) with s = max_position_embeddings / original, 1 when s <= 1). */
static bool read_longrope(const config *c, struct tg_model *m, tg_error *err) {
    tg_hparams *hp = &m->hp;
    const json_t *obj = cfg_get(c, "rope_scaling");
    if (!obj || (json_is_object(obj) && json_object_size(obj) == 0)) obj = cfg_get(c, "rope_parameters");
    float partial = 1.0f;
    const json_t *pv = obj ? json_object_get(obj, "partial_rotary_factor") : NULL;
    if (pv && json_is_number(pv)) partial = (float)json_number_value(pv);
    else if (!cfg_float(c, "partial_rotary_factor", 1.0f, &partial, err)) return false;
    if (!(partial > 0.0f && partial <= 1.0f)) return tg_fail(err, "%s: \"partial_rotary_factor\" must be in (0, 1]", c->path);
    hp->rope_dims = (int)((double)hp->head_dim * (double)partial);
    if (hp->rope_dims < 2 || hp->rope_dims % 2 != 0)
        return tg_fail(err, "%s: %d rotated dims (head_dim x partial_rotary_factor) must be even", c->path, hp->rope_dims);
    if (hp->rope_scaling.type != TG_ROPE_SCALING_LONGROPE) return true;
    int orig = 0;
    const json_t *ov = json_object_get(obj, "original_max_position_embeddings");
    if (ov && json_is_integer(ov) && json_integer_value(ov) > 0 && json_integer_value(ov) <= INT_MAX)
        orig = (int)json_integer_value(ov);
    else if (!cfg_int(c, "original_max_position_embeddings", true, 0, &orig, err)) return false;
    if (orig < 1) return tg_fail(err, "%s: longrope needs a positive original_max_position_embeddings", c->path);
    hp->rope_original_context = orig;
    hp->rope_scaling.original_context = orig;
    if (!read_factors(c, m, obj, "short_factor", &hp->rope_short, err) ||
        !read_factors(c, m, obj, "long_factor", &hp->rope_long, err))
        return false;
    const json_t *af = json_object_get(obj, "attention_factor");
    if (af && json_is_number(af) && json_number_value(af) > 0.0) {
        hp->rope_attn_factor = (float)json_number_value(af);
    } else {
        const double scale = (double)hp->context_length / (double)orig;
        hp->rope_attn_factor = scale <= 1.0 ? 1.0f : (float)sqrt(1.0 + log(scale) / log((double)orig));
    }
    return true;
}

/* SmolLM3's layers without RoPE: "no_rope_layers" (1: the layer rotates) or every "no_rope_layer_interval"-th. */
static bool read_no_rope(const config *c, struct tg_model *m, tg_error *err) {
    tg_hparams *hp = &m->hp;
    int every = hp->arch->no_rope_interval;
    if (!cfg_int(c, "no_rope_layer_interval", false, every, &every, err)) return false;
    const json_t *list = cfg_get(c, "no_rope_layers");
    if (list && (!json_is_array(list) || json_array_size(list) != (size_t)hp->n_layers))
        return tg_fail(err, "%s: \"no_rope_layers\" must list %d flags", c->path, hp->n_layers);
    hp->layer_rope = tg_model_alloc(m, (size_t)hp->n_layers);
    if (!hp->layer_rope) return tg_fail(err, "out of memory");
    for (int l = 0; l < hp->n_layers; l++) {
        const json_t *v = list ? json_array_get(list, (size_t)l) : NULL;
        if (list && !json_is_integer(v) && !json_is_boolean(v))
            return tg_fail(err, "%s: \"no_rope_layers\"[%d] is not 0 or 1", c->path, l);
        hp->layer_rope[l] = list ? (json_is_integer(v) ? json_integer_value(v) != 0 : json_is_true(v))
                                 : every <= 0 || (l + 1) % every != 0;
    }
    return true;
}

/* What a family reads beyond Llama's keys (Gemma 2 / 3: the query scalar, the soft-caps, the local RoPE base, the
 * per-layer pattern; Phi-3: partial rotary, LongRoPE; SmolLM3: the layers without RoPE). */
static bool read_family(const config *c, struct tg_model *m, tg_error *err) {
    tg_hparams *hp = &m->hp;
    if (hp->arch->program_rope && !read_longrope(c, m, err)) return false;
    if (hp->arch->no_rope_interval > 0 && !read_no_rope(c, m, err)) return false;
    if (hp->arch->swa_pattern == 0) return true;
    float qpas = 0.0f;
    if (!cfg_opt_pos(c, "query_pre_attn_scalar", &qpas, err)) return false;
    hp->query_scale = qpas > 0.0f ? 1.0f / sqrtf(qpas) : 0.0f;
    if (!cfg_opt_pos(c, "attn_logit_softcapping", &hp->attn_softcap, err) ||
        !cfg_opt_pos(c, "final_logit_softcapping", &hp->final_softcap, err) ||
        !(hp->rope_theta_local > 0.0f || cfg_opt_pos(c, "rope_local_base_freq", &hp->rope_theta_local, err)))
        return false;
    return read_layer_types(c, m, err);
}

/* A family with config defaults (tg_arch.hf_defaults) is read from those defaults overlaid with config.json, or with
 * its "text_config" (Gemma3ForConditionalGeneration keeps the language model there); others from config.json as it
 * is. Takes root; NULL (err set) when memory runs out. */
static json_t *with_defaults(json_t *root, const char *path, tg_error *err) {
    const json_t *archs = json_object_get(root, "architectures");
    const json_t *name = json_array_get(archs, 0);
    const tg_arch *a = json_is_string(name) ? tg_arch_by_hf(json_string_value(name), false) : NULL;
    if (!a || !a->hf_defaults) return root;
    json_t *d = json_loads(a->hf_defaults, 0, NULL);
    const json_t *text = json_object_get(root, "text_config");
    if (!d || json_object_update(d, json_is_object(text) ? (json_t *)text : root) != 0 ||
        json_object_set(d, "architectures", (json_t *)archs) != 0) {
        json_decref(d);
        json_decref(root);
        tg_fail(err, "%s: out of memory", path);
        return NULL;
    }
    json_decref(root);
    return d;
}

/* True when config.json names the YOCO architecture. */
static bool is_yoco(const config *c) {
    const json_t *archs = cfg_get(c, "architectures");
    const json_t *first = json_is_array(archs) ? json_array_get(archs, 0) : NULL;
    return first && json_is_string(first) && strcmp(json_string_value(first), YOCO_ARCH) == 0;
}

/* "kv_source" (the YOCO layer map: one layer number per layer) into hp->kv_source, which holds the identity:
 * required with architecture TinyGPTYocoForCausalLM and refused with any other (transformers would ignore it). */
static bool read_kv_source(const config *c, tg_hparams *hp, tg_error *err) {
    const json_t *kv = cfg_get(c, "kv_source");
    bool yoco = is_yoco(c);
    if (!kv && !yoco) return true;
    if (!kv) return tg_fail(err, "%s: architecture %s needs \"kv_source\"", c->path, YOCO_ARCH);
    if (!yoco)
        return tg_fail(err, "%s: \"kv_source\" is only valid with architecture %s", c->path, YOCO_ARCH);
    if (!json_is_array(kv) || json_array_size(kv) != (size_t)hp->n_layers)
        return tg_fail(err, "%s: \"kv_source\" must be a list of %d layer numbers", c->path, hp->n_layers);
    for (int l = 0; l < hp->n_layers; l++) {
        const json_t *v = json_array_get(kv, (size_t)l);
        json_int_t s = json_is_integer(v) ? json_integer_value(v) : -1;
        if (s < 0 || s > l)
            return tg_fail(err, "%s: \"kv_source\"[%d] must be a layer number in [0, %d] (a layer reads its own K/V "
                                "or an earlier layer's)", c->path, l, l);
        hp->kv_source[l] = (int)s;
    }
    char where[sizeof(tg_error){0}.msg];
    snprintf(where, sizeof where, "%.400s: \"kv_source\"", c->path);
    return tg_kv_source_check(hp->kv_source, hp->n_layers, where, err);
}

/* A layer that reads another layer's K/V must not come with k/v projections of its own. */
static bool check_shared_layers(const struct tg_model *m, const char *path, tg_error *err) {
    for (int l = 0; l < m->hp.n_layers; l++) {
        if (m->hp.kv_source[l] == l) continue;
        static const char *const proj[] = {"k_proj", "v_proj"};
        for (int i = 0; i < 2; i++) {
            char name[96];
            snprintf(name, sizeof name, "model.layers.%d.self_attn.%s.weight", l, proj[i]);
            if (tg_safetensors_find(m->st, name))
                return tg_fail(err, "%s: layer %d reads layer %d's K/V (\"kv_source\") but the weights have %s", path,
                               l, m->hp.kv_source[l], name);
        }
    }
    return true;
}

/* A multimodal checkpoint keeps the language model's tensors under another prefix (Gemma3ForConditionalGeneration:
 * transformers 4 "language_model.model.", 5 "model.language_model."): the names "model." becomes (owned by m). */
static bool text_model_names(struct tg_model *m, tg_weight_names *names, tg_error *err) {
    static const char *const prefixes[] = {"language_model.model.", "model.language_model."};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        char probe[128];
        snprintf(probe, sizeof probe, "%sembed_tokens.weight", prefixes[i]);
        if (!tg_safetensors_find(m->st, probe)) continue;
        const char **fields[] = {&names->tok_embd, &names->out_norm, &names->layer_prefix};
        for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
            const char *rest = *fields[f] + strlen("model.");
            const size_t n = strlen(prefixes[i]) + strlen(rest) + 1;
            char *buf = tg_model_alloc(m, n);
            if (!buf) return tg_fail(err, "out of memory");
            snprintf(buf, n, "%s%s", prefixes[i], rest);
            *fields[f] = buf;
        }
        return true;
    }
    return true;
}

/* A RMS_PLUS_ONE row's norms scale by 1 + w: the model holds the multiplier (arch.h), as llama.cpp's GGUF does. */
static void add_one_to_norms(struct tg_model *m) {
    const tg_hparams *hp = &m->hp;
    for (int i = 0; i < hp->d_model; i++) m->out_norm[i] += 1.0f;
    for (int l = 0; l < hp->n_layers; l++) {
        tg_layer_weights *w = &m->layers[l];
        float *vecs[] = {w->attn_norm, w->ffn_norm, w->post_attn_norm, w->post_ffn_norm, w->q_norm, w->k_norm};
        const int n[] = {hp->d_model, hp->d_model, hp->d_model, hp->d_model, hp->head_dim, hp->head_dim};
        for (size_t v = 0; v < sizeof vecs / sizeof vecs[0]; v++)
            for (int i = 0; vecs[v] && i < n[v]; i++) vecs[v][i] += 1.0f;
    }
}

static bool st_view(const void *ctx, const char *name, int64_t rows, int64_t cols, tg_tensor *out, tg_error *err) {
    return tg_safetensors_view(ctx, name, rows, cols, out, err);
}

/* Whether the folder holds file `name`: 1 yes, 0 no (absent), -1 it is there but unusable (err says why: a FIFO,
 * a symlink out of the folder...). */
static int folder_has(const char *dir, const char *name, tg_error *err) {
    char path[4096];
    bool missing = false;
    tg_error why = {0};
    if (tg_folder_file(dir, name, NULL, path, sizeof path, &missing, &why)) return 1;
    if (missing) return 0;
    if (err) *err = why;
    return -1;
}

/* Whether the folder has safetensors weights (1 / 0 / -1 as folder_has). Without them, note[cap] says what is
 * there instead: PyTorch pickle weights (pytorch_model.bin, Llama 2's pytorch_model.bin.index.json) are not read. */
static int has_safetensors(const char *dir, char *note, size_t cap, tg_error *err) {
    int single = folder_has(dir, "model.safetensors", err), index = single < 0 ? -1 : folder_has(dir,
                                                                 "model.safetensors.index.json", err);
    if (single < 0 || index < 0) return -1;
    if (single || index) return 1;
    static const char *const pickles[] = {"pytorch_model.bin.index.json", "pytorch_model.bin"};
    const char *pickle = NULL;
    for (size_t i = 0; i < 2 && !pickle; i++)
        if (folder_has(dir, pickles[i], NULL) == 1) pickle = pickles[i];
    if (pickle)
        snprintf(note, cap, "no model.safetensors or model.safetensors.index.json; %s names PyTorch pickle weights, "
                            "which tinygpt does not read (convert them to safetensors)", pickle);
    else snprintf(note, cap, "no model.safetensors or model.safetensors.index.json");
    return 0;
}

/* A sharded checkpoint whose index names a shard that is not in the folder (the index and config downloaded, the
 * shards not): 1 with note[cap] naming the first missing shard and the count, 0 when every shard is there (or the
 * index is unreadable: opening the weights then reports why), -1 on a shard that is there but unusable. */
static int missing_shard(const char *dir, char *note, size_t cap, tg_error *err) {
    char path[4096];
    if (!tg_folder_file(dir, "model.safetensors.index.json", NULL, path, sizeof path, NULL, NULL)) return 0;
    json_t *root = tg_json_load_path(path, 0, NULL, NULL);
    const json_t *map = json_object_get(root, "weight_map");
    const char *key, *first = NULL;
    const json_t *v;
    size_t n_missing = 0;
    int status = 0;
    json_object_foreach((json_t *)map, key, v) {
        if (!json_is_string(v)) continue;
        const int has = folder_has(dir, json_string_value(v), err);
        if (has < 0) {
            status = -1;
            break;
        }
        if (has == 0 && (!first || strcmp(first, json_string_value(v)) != 0)) {
            if (!first) first = json_string_value(v);
            n_missing++;
        }
    }
    if (status == 0 && first) {
        snprintf(note, cap, "model.safetensors.index.json names shards that are not here: %.100s%s", first,
                 n_missing > 1 ? " and others" : "");
        status = 1;
    }
    json_decref(root);
    return status;
}

/* Appends "; what" (or "what" first) to the model's list of absent files. */
static void note_absent(struct tg_model *m, const char *what) {
    const size_t len = strlen(m->absent);
    snprintf(m->absent + len, sizeof m->absent - len, "%s%s", len ? "; " : "", what);
}

/* TG_NEED_TOKENIZER: the tokenizer files alone. */
static bool load_tokenizer_only(struct tg_model *m, const char *dir, tg_error *err) {
    m->tokenizer = tg_tokenizer_load_hf(dir, err);
    if (!m->tokenizer) return false;
    m->has_weights = false;
    if (!tg_model_add_eos(m, tg_tokenizer_eos(m->tokenizer), dir, err)) return false;
    return tg_model_init_kv_source(m, err);
}

bool tg_model_load_hf(struct tg_model *m, const char *dir, tg_model_need need, tg_error *err) {
    if (need == TG_NEED_TOKENIZER) return load_tokenizer_only(m, dir, err);
    char path[4096];
    bool missing;
    tg_error why = {0};
    if (!tg_folder_file(dir, "config.json", NULL, path, sizeof path, &missing, &why)) {
        if (missing) return tg_fail(err, "%s: not a model (expected a GGUF file or a Hugging Face folder with "
                                         "config.json)", dir);
        if (err) *err = why;
        return false;
    }
    json_t *root = tg_json_load_path(path, 0, NULL, err);
    if (root) root = with_defaults(root, path, err);
    if (!root) return false;
    config c = {root, path};
    bool ok = read_config(&c, &m->hp, err) && tg_hparams_validate(&m->hp, path, err) && read_family(&c, m, err) &&
              tg_model_init_kv_source(m, err) && read_kv_source(&c, &m->hp, err);
    if (!ok) {
        json_decref(root);
        return false;
    }

    char note[256] = "";
    int weights = has_safetensors(dir, note, sizeof note, err);
    if (weights == 1 && need == TG_NEED_CONFIG) {
        const int gone = missing_shard(dir, note, sizeof note, err);
        weights = gone < 0 ? -1 : !gone;
    }
    if (weights < 0 || (weights == 0 && need == TG_NEED_ALL && strstr(note, "pickle")))
        ok = weights < 0 ? false : tg_fail(err, "%s: %s", dir, note);
    if (ok && weights == 0 && need == TG_NEED_CONFIG) {
        char what[300];
        snprintf(what, sizeof what, "weights (%s)", note);
        note_absent(m, what);
    } else if (ok) {
        m->st = tg_safetensors_open_dir(dir, err);
        ok = m->st && check_shared_layers(m, path, err);
    }
    const int tokenizer = ok && need == TG_NEED_CONFIG ? folder_has(dir, "tokenizer.json", err) : 1;
    if (tokenizer < 0) ok = false;
    if (ok && tokenizer == 0) note_absent(m, "tokenizer.json (no tokenizer: BOS / EOS from config.json)");
    if (ok && tokenizer == 1) {
        m->tokenizer = tg_tokenizer_load_hf(dir, err);
        ok = m->tokenizer != NULL;
        /* Every id the tokenizer can produce must have an embedding row (vocab_size may be larger: padding). */
        if (ok && tg_tokenizer_vocab_size(m->tokenizer) > m->hp.vocab_size)
            ok = tg_fail(err, "%s: the tokenizer has %d tokens but \"vocab_size\" is %d", path,
                         (int)tg_tokenizer_vocab_size(m->tokenizer), m->hp.vocab_size);
        if (ok) ok = tg_model_add_eos(m, tg_tokenizer_eos(m->tokenizer), dir, err);
    }
    if (ok) ok = tg_hf_read_generation(m, dir, root, path, m->hp.vocab_size, err);
    json_decref(root);
    if (!ok) return false;
    if (!m->st) {
        m->has_weights = false;
        m->n_params = tg_hparams_param_count(&m->hp);
        if (m->n_params < 0) return tg_fail(err, "%s: the parameter count overflows", path);
        return true;
    }

    tg_weight_names names = m->hp.arch->hf;
    if (!text_model_names(m, &names, err)) return false;
    /* A tied model's one matrix may be stored under either name (transformers saves whichever it meets first:
     * TinyStories-656K has lm_head.weight only); with both, the embedding's copy is used. */
    if (m->hp.tied_embeddings && !tg_safetensors_find(m->st, names.tok_embd) &&
        tg_safetensors_find(m->st, names.lm_head))
        names.tok_embd = names.lm_head;
    if (!tg_model_bind_weights(m, &names, st_view, m->st, err)) return false;
    if (m->hp.arch->norm == TG_NORM_RMS_PLUS_ONE) add_one_to_norms(m);
    return true;
}
