/* layer_pattern.c — per-layer RoPE frequencies of program_rope rows and the per-layer descriptions (layer_pattern.h). */
#include "model/layer_pattern.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "util/error.h"

float tg_layer_rope_q_factor(const tg_hparams *hp) {
    return hp->query_scale > 0.0f ? (float)((double)hp->query_scale * sqrt((double)hp->head_dim)) : 1.0f;
}

bool tg_model_set_layer_rope(struct tg_model *m, tg_error *err) {
    tg_hparams *hp = &m->hp;
    if (!hp->arch || !hp->arch->program_rope) return true;
    const int L = hp->n_layers, rd = hp->rope_dims > 0 ? hp->rope_dims : hp->head_dim, half = rd / 2;
    if (rd % 2 != 0 || rd > hp->head_dim) return tg_fail(err, "the rotated dims %d must be even and <= the head size %d",
                                                         rd, hp->head_dim);
    hp->rope_dims = rd;
    if (!hp->layer_rope) {
        hp->layer_rope = tg_model_alloc(m, (size_t)L);
        if (!hp->layer_rope) return tg_fail(err, "out of memory");
        for (int l = 0; l < L; l++)
            hp->layer_rope[l] = hp->rope_theta_local > 0.0f && hp->layer_window && hp->layer_window[l] > 0 ? 2 : 1;
    }
    const bool longrope = hp->rope_long && hp->rope_short;
    const size_t table = (size_t)L * (size_t)half;
    double *f = tg_model_alloc(m, (table * (longrope ? 2 : 1) + 1) * sizeof(double));
    double *zero = tg_model_alloc(m, (size_t)(hp->head_dim / 2) * sizeof(double));
    if (!f || !zero) return tg_fail(err, "out of memory");
    /* global: the file's scaling (LongRoPE: its short divisors in f, its long ones in f + table, each position taking
     * one by rope_original_context); local: unscaled */
    for (int t = 0; t < (longrope ? 2 : 1); t++) {
        tg_rope_scaling global = hp->rope_scaling;
        if (longrope) global.freq_factors = t == 0 ? hp->rope_short : hp->rope_long;
        for (int l = 0; l < L; l++) {
            double *fl = f + (size_t)t * table + (size_t)l * (size_t)half;
            if (hp->layer_rope[l] == 2) tg_rope_inv_freq(rd, hp->rope_theta_local, NULL, fl);
            else tg_rope_inv_freq(rd, hp->rope_theta, &global, fl);
        }
    }
    hp->layer_freq_long = longrope ? f + table : NULL;
    hp->layer_freq = f;
    hp->rope_inv_freq = zero;
    return true;
}

/* Appends printf text at *used (silently cut at cap). */
static void put(char *out, size_t cap, size_t *used, const char *fmt, ...) {
    if (*used >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    const int w = vsnprintf(out + *used, cap - *used, fmt, ap);
    va_end(ap);
    if (w > 0) *used = (size_t)w < cap - *used ? *used + (size_t)w : cap;
}

/* ", "-separated layer numbers l < n with pick(hp, l), at most 12 then "..." and the last. */
static void list_layers(const tg_hparams *hp, bool (*pick)(const tg_hparams *, int), char *out, size_t cap,
                        size_t *used) {
    int shown = 0, last = -1, n = 0;
    for (int l = 0; l < hp->n_layers; l++) {
        if (!pick(hp, l)) continue;
        n++;
        last = l;
        if (shown < 12) put(out, cap, used, "%s%d", shown++ ? ", " : "", l);
    }
    if (n > shown) put(out, cap, used, ", ..., %d", last);
}

static bool is_full(const tg_hparams *hp, int l) { return hp->layer_window[l] == 0; }
static bool no_rope(const tg_hparams *hp, int l) { return hp->layer_rope[l] == 0; }

void tg_layer_pattern_describe(const tg_hparams *hp, char *out, size_t cap) {
    size_t used = 0;
    out[0] = '\0';
    if (hp->layer_window) {
        int n_full = 0, window = 0;
        for (int l = 0; l < hp->n_layers; l++) {
            n_full += hp->layer_window[l] == 0;
            if (hp->layer_window[l] > 0) window = hp->layer_window[l];
        }
        if (n_full == hp->n_layers) put(out, cap, &used, "full on every layer");
        else put(out, cap, &used, "sliding %d on %d layers (the model's window); full on %d", window,
                 hp->n_layers - n_full, n_full);
        if (n_full > 0 && n_full < hp->n_layers) {
            put(out, cap, &used, ": ");
            list_layers(hp, is_full, out, cap, &used);
        }
    }
    if (hp->layer_rope) {
        int n = 0;
        for (int l = 0; l < hp->n_layers; l++) n += hp->layer_rope[l] == 0;
        if (n > 0) {
            put(out, cap, &used, "%sno RoPE on %d layers: ", used ? "; " : "", n);
            list_layers(hp, no_rope, out, cap, &used);
        }
    }
}

void tg_family_describe(const tg_hparams *hp, char *out, size_t cap) {
    size_t used = 0;
    out[0] = '\0';
    const tg_arch *a = hp->arch;
    if (!a) return;
    if (a->embed_scale) put(out, cap, &used, "embedding x sqrt(d_model)");
    if (a->norm == TG_NORM_RMS_PLUS_ONE) put(out, cap, &used, "%sRMSNorm (1 + w)", used ? ", " : "");
    if (a->post_norms) put(out, cap, &used, "%spost-norms", used ? ", " : "");
    if (a->glu == TG_GLU_GELU_TANH) put(out, cap, &used, "%sGeGLU (tanh)", used ? ", " : "");
    if (a->qkv_bias) put(out, cap, &used, "%sq/k/v biases", used ? ", " : "");
    if (a->qk_norm) put(out, cap, &used, "%sq/k head norms", used ? ", " : "");
    if (a->fused_qkv) put(out, cap, &used, "%sfused qkv and gate_up", used ? ", " : "");
    if (hp->query_scale > 0.0f)
        put(out, cap, &used, "%squery scale %g^-1/2", used ? ", " : "", 1.0 / ((double)hp->query_scale * hp->query_scale));
    if (hp->attn_softcap > 0.0f) put(out, cap, &used, "%sscore soft-cap %g", used ? ", " : "", hp->attn_softcap);
    if (hp->final_softcap > 0.0f) put(out, cap, &used, "%slogit soft-cap %g", used ? ", " : "", hp->final_softcap);
    if (hp->rope_theta_local > 0.0f)
        put(out, cap, &used, "%slocal RoPE theta %g (unscaled)", used ? ", " : "", hp->rope_theta_local);
    if (hp->rope_scaling.type == TG_ROPE_SCALING_LONGROPE)
        put(out, cap, &used, "%sLongRoPE short factors below position %lld, long from there, attention factor %.6g",
            used ? ", " : "", (long long)hp->rope_original_context,
            hp->rope_attn_factor > 0.0f ? (double)hp->rope_attn_factor : 1.0);
    if (hp->rope_dims > 0 && hp->rope_dims < hp->head_dim)
        put(out, cap, &used, "%spartial RoPE %d of %d dims", used ? ", " : "", hp->rope_dims, hp->head_dim);
}
