/* rope_scaling.c — per-pair RoPE frequencies under the scalings of rope_scaling.h. */
#include "model/rope_scaling.h"

#include <math.h>
#include <stdio.h>

bool tg_rope_is_scaled(const tg_rope_scaling *s) {
    return s && (s->type != TG_ROPE_SCALING_NONE || s->freq_factors != NULL);
}

/* transformers' llama3 rule for one frequency f. */
static double llama3_freq(const tg_rope_scaling *s, double f) {
    const double pi = 3.14159265358979323846;
    const double old_ctx = (double)s->original_context;
    const double low_wavelen = old_ctx / s->low_freq_factor, high_wavelen = old_ctx / s->high_freq_factor;
    const double wavelen = 2.0 * pi / f;
    if (wavelen < high_wavelen) return f;
    if (wavelen > low_wavelen) return f / s->factor;
    const double smooth = (old_ctx / wavelen - s->low_freq_factor) / (s->high_freq_factor - s->low_freq_factor);
    return (1.0 - smooth) * f / s->factor + smooth * f;
}

void tg_rope_inv_freq(int head_dim, float theta, const tg_rope_scaling *s, double *inv_freq) {
    for (int i = 0; i < head_dim / 2; i++) {
        double f = pow((double)theta, -2.0 * i / head_dim);
        if (s && s->type == TG_ROPE_SCALING_LINEAR) f /= s->factor;
        else if (s && s->type == TG_ROPE_SCALING_LLAMA3) f = llama3_freq(s, f);
        if (s && s->freq_factors) f /= (double)s->freq_factors[i];
        inv_freq[i] = f;
    }
}

void tg_rope_scaling_describe(const tg_rope_scaling *s, char *out, size_t cap) {
    int w = 0;
    switch (s ? s->type : TG_ROPE_SCALING_NONE) {
    case TG_ROPE_SCALING_NONE: w = snprintf(out, cap, "none"); break;
    case TG_ROPE_SCALING_LINEAR: w = snprintf(out, cap, "linear (factor %g)", s->factor); break;
    case TG_ROPE_SCALING_LLAMA3:
        w = snprintf(out, cap, "llama3 (factor %g, low %g, high %g, original context %lld)", s->factor,
                     s->low_freq_factor, s->high_freq_factor, (long long)s->original_context);
        break;
    case TG_ROPE_SCALING_LONGROPE:
        w = snprintf(out, cap, "longrope (original context %lld)", (long long)s->original_context);
        break;
    }
    if (s && s->freq_factors && w >= 0 && (size_t)w < cap) {
        if (s->type == TG_ROPE_SCALING_NONE) snprintf(out, cap, "rope_freqs.weight factors (Llama 3.1 form)");
        else snprintf(out + w, cap - (size_t)w, " + rope_freqs.weight factors");
    }
}
