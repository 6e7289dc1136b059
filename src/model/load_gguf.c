/* load_gguf.c — a Llama-family model from a GGUF file (llama.cpp's converter layout): `<arch>.*` hyper-parameters,
 * blk.N.* tensors with their shapes checked, Q/K rows in llama.cpp's interleaved RoPE order; the YOCO layer map
 * `tinygpt.kv_source` (docs/yoco.md) when present. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernels/matmul.h"
#include "model/model.h"
#include "util/error.h"

/* Reads "<arch>.<suffix>" as an int in [0, INT_MAX]. Absent: *out = def, and an error only when required. */
static bool arch_int(const tg_gguf *g, const char *arch, const char *suffix, bool required, int def, int *out,
                     tg_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int64_t v;
    if (!tg_gguf_has(g, key)) {
        *out = def;
        return required ? tg_fail(err, "%s: missing metadata key %s", tg_gguf_path(g), key) : true;
    }
    if (!tg_gguf_get_i64(g, key, &v)) return tg_fail(err, "%s: metadata key %s is not an integer", tg_gguf_path(g), key);
    if (v < 0 || v > INT_MAX) return tg_fail(err, "%s: metadata key %s = %lld is out of range", tg_gguf_path(g), key,
                                             (long long)v);
    *out = (int)v;
    return true;
}

static bool arch_f32(const tg_gguf *g, const char *arch, const char *suffix, bool required, float def, float *out,
                     tg_error *err) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    if (!tg_gguf_has(g, key)) {
        *out = def;
        return required ? tg_fail(err, "%s: missing metadata key %s", tg_gguf_path(g), key) : true;
    }
    if (!tg_gguf_get_f32(g, key, out)) return tg_fail(err, "%s: metadata key %s is not a number", tg_gguf_path(g), key);
    return true;
}

/* The YOCO layer map: tinygpt.kv_source, an integer array with one entry per layer (the layer whose K/V it reads).
 * Absent: every layer holds its own (hp->kv_source stays the identity). A layer that reads another's must have no
 * attn_k / attn_v tensors (a holding layer without them fails later, when its weights are bound). */
static bool read_kv_source(const tg_gguf *g, tg_hparams *hp, tg_error *err) {
    static const char KEY[] = "tinygpt.kv_source";
    const char *path = tg_gguf_path(g);
    if (!tg_gguf_has(g, KEY)) return true;
    tg_gguf_array a;
    if (!tg_gguf_get_array(g, KEY, &a) || a.elem_type == TG_GGUF_ARRAY || a.elem_type == TG_GGUF_STRING ||
        a.elem_type == TG_GGUF_F32 || a.elem_type == TG_GGUF_F64 || a.elem_type == TG_GGUF_BOOL)
        return tg_fail(err, "%s: metadata key %s is not an array of integers", path, KEY);
    if (a.count != (uint64_t)hp->n_layers)
        return tg_fail(err, "%s: %s has %llu entries for %d layers", path, KEY, (unsigned long long)a.count,
                       hp->n_layers);
    for (int l = 0; l < hp->n_layers; l++) {
        int64_t v = tg_gguf_array_i64(&a, (uint64_t)l);
        if (v < 0 || v > l)
            return tg_fail(err, "%s: %s[%d] = %lld must be a layer in [0, %d] (a layer reads its own K/V or an "
                                "earlier layer's)", path, KEY, l, (long long)v, l);
        hp->kv_source[l] = (int)v;
    }
    char where[sizeof(tg_error){0}.msg];
    snprintf(where, sizeof where, "%.400s: %s", path, KEY);
    if (!tg_kv_source_check(hp->kv_source, hp->n_layers, where, err)) return false;
    for (int l = 0; l < hp->n_layers; l++) {
        if (hp->kv_source[l] == l) continue;
        static const char *const kv_names[] = {"attn_k", "attn_v"};
        for (int i = 0; i < 2; i++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, kv_names[i]);
            if (tg_gguf_find_tensor(g, name))
                return tg_fail(err, "%s: layer %d reads layer %d's K/V (%s) but the file has tensor %s", path, l,
                               hp->kv_source[l], KEY, name);
        }
    }
    return true;
}

/* <arch>.rope.scaling.type: absent or "none", or "linear" with <arch>.rope.scaling.factor (llama.cpp's freq_scale
 * = 1 / factor); the others (yarn, longrope) are refused by name. */
static bool read_rope_scaling(const tg_gguf *g, const char *arch, tg_hparams *hp, tg_error *err) {
    const char *path = tg_gguf_path(g);
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", arch);
    tg_gguf_str scaling;
    if (!tg_gguf_get_str(g, key, &scaling) || (scaling.len == 4 && memcmp(scaling.ptr, "none", 4) == 0)) return true;
    if (!(scaling.len == 6 && memcmp(scaling.ptr, "linear", 6) == 0))
        return tg_fail(err, "%s: rope scaling type '%.*s' is not supported (supported: none, linear; Llama 3.1 "
                            "scaling comes as rope_freqs.weight)", path, (int)(scaling.len > 32 ? 32 : scaling.len),
                       scaling.ptr);
    float factor = 0.0f;
    snprintf(key, sizeof key, "%s.rope.scaling.factor", arch);
    if (!tg_gguf_has(g, key)) return tg_fail(err, "%s: rope scaling type 'linear' without %s", path, key);
    if (!tg_gguf_get_f32(g, key, &factor) || !(factor > 0.0f) || !isfinite(factor))
        return tg_fail(err, "%s: metadata key %s must be a positive number", path, key);
    hp->rope_scaling.type = TG_ROPE_SCALING_LINEAR;
    hp->rope_scaling.factor = factor;
    return true;
}

/* rope_freqs.weight (llama.cpp's converter writes it for Llama 3.1 / 3.2): head_dim / 2 factors, each pair's
 * frequency divided by its factor. Copied to f32; each must be positive and finite. */
static bool read_factor_tensor(struct tg_model *m, const tg_gguf *g, const char *NAME, int half, const float **out,
                               tg_error *err) {
    tg_tensor t;
    if (!tg_gguf_tensor_view(g, NAME, 1, half, &t, err)) return false;
    float *f = tg_model_alloc_f32(m, (size_t)half);
    if (!f) return tg_fail(err, "out of memory");
    tg_tensor_get_row(&t, 0, f); /* f: [head_dim / 2] */
    for (int i = 0; i < half; i++)
        if (!(f[i] > 0.0f) || !isfinite(f[i]))
            return tg_fail(err, "%s: %s[%d] = %g must be a positive number", tg_gguf_path(g), NAME, i, (double)f[i]);
    *out = f;
    return true;
}

static bool read_rope_freqs(struct tg_model *m, const tg_gguf *g, tg_error *err) {
    static const char NAME[] = "rope_freqs.weight";
    if (!tg_gguf_find_tensor(g, NAME)) return true;
    return read_factor_tensor(m, g, NAME, m->hp.head_dim / 2, &m->hp.rope_scaling.freq_factors, err);
}

/* LongRoPE as llama.cpp's converter writes Phi-3: rope_factors_long.weight / rope_factors_short.weight [rope_dims /
 * 2], <arch>.rope.scaling.original_context_length and .attn_factor. */
static bool read_longrope(struct tg_model *m, const tg_gguf *g, const char *arch, tg_error *err) {
    tg_hparams *hp = &m->hp;
    const bool has_long = tg_gguf_find_tensor(g, "rope_factors_long.weight") != NULL;
    if (!has_long && !tg_gguf_find_tensor(g, "rope_factors_short.weight")) return true;
    const int half = hp->rope_dims / 2;
    int orig = 0;
    if (!read_factor_tensor(m, g, "rope_factors_long.weight", half, &hp->rope_long, err) ||
        !read_factor_tensor(m, g, "rope_factors_short.weight", half, &hp->rope_short, err) ||
        !arch_int(g, arch, "rope.scaling.original_context_length", true, 0, &orig, err) ||
        !arch_f32(g, arch, "rope.scaling.attn_factor", false, 1.0f, &hp->rope_attn_factor, err))
        return false;
    if (orig < 1 || !(hp->rope_attn_factor > 0.0f) || !isfinite(hp->rope_attn_factor))
        return tg_fail(err, "%s: LongRoPE needs a positive original context and attention factor", tg_gguf_path(g));
    hp->rope_scaling.type = TG_ROPE_SCALING_LONGROPE;
    hp->rope_scaling.original_context = orig;
    hp->rope_original_context = orig;
    return true;
}

static bool gguf_view(const void *ctx, const char *name, int64_t rows, int64_t cols, tg_tensor *out, tg_error *err) {
    return tg_gguf_tensor_view(ctx, name, rows, cols, out, err);
}

/* Hyper-parameters. `weights` = the file has tensors: then the shape keys are required; a vocab-only file gets
 * whatever it carries. */
static bool read_hparams(const tg_gguf *g, const char *arch, bool weights, tg_hparams *hp, tg_error *err) {
    const char *path = tg_gguf_path(g);
    if (!arch_int(g, arch, "block_count", weights, 0, &hp->n_layers, err)) return false;
    if (!arch_int(g, arch, "embedding_length", weights, 0, &hp->d_model, err)) return false;
    if (!arch_int(g, arch, "feed_forward_length", weights, 0, &hp->ffn_dim, err)) return false;
    if (!arch_int(g, arch, "attention.head_count", weights, 0, &hp->n_heads, err)) return false;
    if (!arch_int(g, arch, "attention.head_count_kv", false, hp->n_heads, &hp->n_kv_heads, err)) return false;
    if (!arch_int(g, arch, "context_length", weights, 0, &hp->context_length, err)) return false;
    int head_dim_default = hp->n_heads > 0 ? hp->d_model / hp->n_heads : 0;
    if (!arch_int(g, arch, "attention.key_length", false, head_dim_default, &hp->head_dim, err)) return false;
    int value_length;
    if (!arch_int(g, arch, "attention.value_length", false, hp->head_dim, &value_length, err)) return false;
    if (value_length != hp->head_dim)
        return tg_fail(err, "%s: %s.attention.value_length %d differs from the key length %d (unsupported)", path,
                       arch, value_length, hp->head_dim);
    int rope_dims;
    if (!arch_int(g, arch, "rope.dimension_count", false, hp->head_dim, &rope_dims, err)) return false;
    if (hp->arch && hp->arch->program_rope) hp->rope_dims = rope_dims; /* partial rotary: layer_pattern.h checks */
    else if (weights && rope_dims != hp->head_dim)
        return tg_fail(err, "%s: %s.rope.dimension_count %d differs from the head size %d (partial RoPE is not "
                            "supported)", path, arch, rope_dims, hp->head_dim);
    if (!arch_int(g, arch, "attention.sliding_window", false, 0, &hp->sliding_window, err)) return false;
    if (!arch_f32(g, arch, "rope.freq_base", false, 10000.0f, &hp->rope_theta, err)) return false;
    if (!arch_f32(g, arch, "attention.layer_norm_rms_epsilon", weights, 1e-5f, &hp->norm_eps, err)) return false;

    if (!read_rope_scaling(g, arch, hp, err)) return false;

    /* vocabulary: <arch>.vocab_size (the embedding's rows, which may exceed the token list when padded), else the
     * token list's length */
    tg_gguf_array tokens;
    bool have_tokens = tg_gguf_get_array(g, "tokenizer.ggml.tokens", &tokens);
    if (have_tokens && tokens.count > INT_MAX)
        return tg_fail(err, "%s: %llu tokens is too many", path, (unsigned long long)tokens.count);
    int n_tokens = have_tokens ? (int)tokens.count : 0;
    if (!arch_int(g, arch, "vocab_size", weights && !have_tokens, n_tokens, &hp->vocab_size, err)) return false;
    if (weights && n_tokens > hp->vocab_size)
        return tg_fail(err, "%s: the tokenizer has %d tokens but %s.vocab_size is %d", path, n_tokens, arch,
                       hp->vocab_size);
    /* llama.cpp's converter permutes Llama's Q/K rows; it keeps other families' (NEOX rotation) */
    hp->rope_style = hp->arch && hp->arch->gguf_rope_half ? TG_ROPE_HALF : TG_ROPE_INTERLEAVED;
    return true;
}

/* What a family reads beyond Llama's keys, as llama.cpp reads it (Gemma 2 / 3: the soft-caps, the query scale, the
 * sliding / full pattern, Gemma 3's local RoPE base). */
static bool read_family(const tg_gguf *g, const char *arch, struct tg_model *m, tg_error *err) {
    tg_hparams *hp = &m->hp;
    const tg_arch *a = hp->arch;
    if (a->program_rope && hp->rope_dims > 0 && !read_longrope(m, g, arch, err)) return false;
    if (a->no_rope_interval > 0) { /* llama.cpp's fixed step (SmolLM3: every 4th layer without RoPE) */
        hp->layer_rope = tg_model_alloc(m, (size_t)hp->n_layers);
        if (!hp->layer_rope) return tg_fail(err, "out of memory");
        for (int l = 0; l < hp->n_layers; l++) hp->layer_rope[l] = (l + 1) % a->no_rope_interval != 0;
    }
    if (a->swa_pattern == 0) return true;
    if (!arch_f32(g, arch, "attn_logit_softcapping", false, 0.0f, &hp->attn_softcap, err) ||
        !arch_f32(g, arch, "final_logit_softcapping", false, 0.0f, &hp->final_softcap, err))
        return false;
    if (!(hp->attn_softcap >= 0.0f) || !(hp->final_softcap >= 0.0f) || !isfinite(hp->attn_softcap) ||
        !isfinite(hp->final_softcap))
        return tg_fail(err, "%s: the soft-caps must be positive", tg_gguf_path(g));
    if (a->gguf_big_layers > 0 && hp->n_layers == a->gguf_big_layers)
        hp->query_scale = 1.0f / sqrtf((float)(hp->d_model / hp->n_heads));
    /* the sliding layers' base: <arch>.rope.freq_base_swa, else llama.cpp's default for the family */
    if (!arch_f32(g, arch, "rope.freq_base_swa", false, a->gguf_rope_theta_local, &hp->rope_theta_local, err))
        return false;
    if (!(hp->rope_theta_local >= 0.0f) || !isfinite(hp->rope_theta_local))
        return tg_fail(err, "%s: %s.rope.freq_base_swa must be positive", tg_gguf_path(g), arch);
    if (hp->sliding_window <= 0) return tg_fail(err, "%s: %s.attention.sliding_window is missing", tg_gguf_path(g), arch);
    /* the pattern: a period (layer l is full when (l + 1) % period == 0; 0 = every layer sliding) or, as llama.cpp
     * writes it from a config's layer_types, one bool per layer (true = sliding) */
    int pattern = a->swa_pattern;
    char key[128];
    snprintf(key, sizeof key, "%s.attention.sliding_window_pattern", arch);
    tg_gguf_array per_layer = {0};
    const bool is_array = tg_gguf_get_array(g, key, &per_layer);
    if (is_array && (per_layer.count != (uint64_t)hp->n_layers ||
                     (per_layer.elem_type != TG_GGUF_BOOL && per_layer.elem_type != TG_GGUF_U8 &&
                      per_layer.elem_type != TG_GGUF_I32 && per_layer.elem_type != TG_GGUF_U32)))
        return tg_fail(err, "%s: %s holds %llu values of type %d; expected one bool per layer (%d)", tg_gguf_path(g),
                       key, (unsigned long long)per_layer.count, (int)per_layer.elem_type, hp->n_layers);
    if (!is_array && tg_gguf_has(g, key) &&
        !arch_int(g, arch, "attention.sliding_window_pattern", false, pattern, &pattern, err))
        return false;
    hp->layer_window = tg_model_alloc(m, (size_t)hp->n_layers * sizeof(int));
    if (!hp->layer_window) return tg_fail(err, "out of memory");
    for (int l = 0; l < hp->n_layers; l++) {
        const bool sliding = is_array ? tg_gguf_array_i64(&per_layer, (uint64_t)l) != 0
                                      : pattern <= 0 || (l + 1) % pattern != 0;
        hp->layer_window[l] = sliding ? hp->sliding_window : 0;
    }
    hp->sliding_window = 0;
    return true;
}

bool tg_model_load_gguf(struct tg_model *m, const char *path, tg_error *err) {
    tg_gguf *g = tg_gguf_open(path, err);
    if (!g) return false;
    m->gguf = g;
    tg_hparams *hp = &m->hp;

    tg_gguf_str arch;
    if (!tg_gguf_get_str(g, "general.architecture", &arch))
        return tg_fail(err, "%s: missing metadata key general.architecture", path);
    int arch_len = (int)(arch.len < sizeof hp->architecture ? arch.len : sizeof hp->architecture - 1);
    memcpy(hp->architecture, arch.ptr, (size_t)arch_len);
    hp->architecture[arch_len] = '\0';
    bool weights = tg_gguf_n_tensors(g) > 0;
    /* A vocab-only file can be any architecture: only its tokenizer is used. */
    hp->arch = tg_arch_by_gguf(arch.ptr, arch.len);
    if (weights && !hp->arch) {
        char names[128];
        tg_arch_list(names, sizeof names, TG_ARCH_LIST_GGUF);
        return tg_fail(err, "%s: unsupported architecture '%s' (supported: %s)", path, hp->architecture, names);
    }

    if (!read_hparams(g, hp->architecture, weights, hp, err)) return false;
    m->tokenizer = tg_tokenizer_load_gguf(g, err);
    if (!m->tokenizer) return false;
    if (!tg_model_add_eos(m, tg_tokenizer_eos(m->tokenizer), path, err)) return false;
    if (!weights) {
        if (hp->n_layers < 0 || hp->n_layers > 65536) hp->n_layers = 0;
        m->has_weights = false;
        return tg_model_init_kv_source(m, err);
    }

    if (!tg_hparams_validate(hp, path, err)) return false;
    if (!read_family(g, hp->architecture, m, err)) return false;
    if (!read_rope_freqs(m, g, err)) return false;
    hp->tied_embeddings = tg_gguf_find_tensor(g, "output.weight") == NULL;
    if (!tg_model_init_kv_source(m, err)) return false;
    if (!read_kv_source(g, hp, err)) return false;

    return tg_model_bind_weights(m, &hp->arch->gguf, gguf_view, g, err);
}
