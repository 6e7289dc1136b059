/* ops.c — RMSNorm, RoPE (direct and table-driven), softmax, SwiGLU and GeGLU, with the edge cases defined in ops.h.
 * Scalar except SwiGLU and GeGLU, whose exp per element is measurable and runs in the kernel table in use
 * (kernels.h: eight lanes at a time with AVX2; the scalar table's loops in kernels.c are their reference). */
#include "util/free_all.h"
#include "kernels/ops.h"

#include <math.h>
#include <stdlib.h>

#include "kernels/kernels.h"
#include "util/error.h"

void tg_rmsnorm(float *out, const float *x, const float *weight, int64_t n, float eps) {
    if (n <= 0) return;
    /* llama.cpp's ggml_compute_forward_rms_norm_f32, operation for operation: each square rounded to fp32, summed
     * in double in element order, the mean rounded to fp32, the scale in fp32 (transformers' LlamaRMSNorm computes
     * mean and rsqrt in fp32 as well). The result differs from the correctly rounded scale by at most an ulp, but it
     * is the function the reference engines compute, and where 8-bit activation codes sit on a rounding boundary
     * that last ulp decides the code. */
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int64_t i = 0; i < n; i++) out[i] = x[i] * scale * weight[i];
}

void tg_rmsnorm_heads(float *x, int64_t n_heads, int64_t head_dim, const float *weight, float eps) {
    for (int64_t h = 0; h < n_heads; h++) tg_rmsnorm(x + h * head_dim, x + h * head_dim, weight, head_dim, eps);
}

void tg_add_bias(float *y, const float *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += b[i];
}

/* Rotates pairs [i0, i1) of every head by (c[i - i0], s[i - i0]). The single place the rotation is written, shared
 * by the direct and the table paths so that both give identical bits. */
static void rope_rotate(float *x, int n_heads, int head_dim, int i0, int i1, const float *c, const float *s,
                        tg_rope_style style) {
    const int half = head_dim / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (int64_t)h * head_dim;
        for (int i = i0; i < i1; i++) {
            float *pa = style == TG_ROPE_HALF ? v + i : v + 2 * i;
            float *pb = style == TG_ROPE_HALF ? v + i + half : v + 2 * i + 1;
            const float a = *pa, b = *pb;
            *pa = a * c[i - i0] - b * s[i - i0];
            *pb = a * s[i - i0] + b * c[i - i0];
        }
    }
}

/* Pairs are processed in chunks so that no allocation (and no VLA) is needed for any head_dim. */
#define TG_ROPE_CHUNK 256

/* Rotation for position pos with pair i turning by pos * freq(i): freq given either as a table inv_freq or, when
 * inv_freq is NULL, as theta^(-2i/head_dim). cos/sin are computed in double and rounded once to fp32. */
static void rope_direct(float *x, int n_heads, int head_dim, int64_t pos, const double *inv_freq, float theta,
                        tg_rope_style style) {
    const int half = head_dim / 2;
    float c[TG_ROPE_CHUNK], s[TG_ROPE_CHUNK];
    for (int i0 = 0; i0 < half; i0 += TG_ROPE_CHUNK) {
        const int i1 = half - i0 < TG_ROPE_CHUNK ? half : i0 + TG_ROPE_CHUNK;
        for (int i = i0; i < i1; i++) {
            const double f = inv_freq ? inv_freq[i] : pow((double)theta, -2.0 * i / head_dim);
            const double a = (double)pos * f;
            c[i - i0] = (float)cos(a);
            s[i - i0] = (float)sin(a);
        }
        rope_rotate(x, n_heads, head_dim, i0, i1, c, s, style);
    }
}

void tg_rope(float *x, int n_heads, int head_dim, int64_t pos, float theta, tg_rope_style style) {
    if (n_heads <= 0 || head_dim < 2) return;
    rope_direct(x, n_heads, head_dim, pos, NULL, theta, style);
}

void tg_rope_angles(int head_dim, int64_t pos, float theta, float *c, float *s) {
    for (int i = 0; i < head_dim / 2; i++) {
        const double a = (double)pos * pow((double)theta, -2.0 * i / head_dim);
        c[i] = (float)cos(a);
        s[i] = (float)sin(a);
    }
}

void tg_rope_angles_freqs(int head_dim, int64_t pos, const double *inv_freq, float *c, float *s) {
    for (int i = 0; i < head_dim / 2; i++) {
        const double a = (double)pos * inv_freq[i];
        c[i] = (float)cos(a);
        s[i] = (float)sin(a);
    }
}

void tg_rope_apply(float *x, int n_heads, int head_dim, const float *c, const float *s, tg_rope_style style) {
    if (n_heads <= 0 || head_dim < 2) return;
    rope_rotate(x, n_heads, head_dim, 0, head_dim / 2, c, s, style);
}

tg_rope_table *tg_rope_table_new_freqs(int head_dim, const double *inv_freq, int64_t n_pos, tg_error *err) {
    if (head_dim < 2 || head_dim % 2) {
        tg_fail(err, "rope: head_dim %d must be even and positive", head_dim);
        return NULL;
    }
    if (n_pos < 0 || (uint64_t)n_pos > SIZE_MAX / sizeof(float) / (size_t)head_dim) {
        tg_fail(err, "rope: table of %lld positions is too large", (long long)n_pos);
        return NULL;
    }
    const size_t half = (size_t)head_dim / 2;
    tg_rope_table *t = calloc(1, sizeof *t);
    if (!t) {
        tg_fail(err, "rope: out of memory");
        return NULL;
    }
    t->head_dim = head_dim;
    t->n_pos = n_pos;
    t->inv_freq = malloc(half * sizeof(double));
    t->cos_tab = malloc((size_t)n_pos * half * sizeof(float) + 1);
    t->sin_tab = malloc((size_t)n_pos * half * sizeof(float) + 1);
    if (!t->inv_freq || !t->cos_tab || !t->sin_tab) {
        tg_rope_table_free(t);
        tg_fail(err, "rope: out of memory for a %lld-position table", (long long)n_pos);
        return NULL;
    }
    for (size_t i = 0; i < half; i++) t->inv_freq[i] = inv_freq[i];
    for (int64_t p = 0; p < n_pos; p++) {
        float *c = t->cos_tab + (size_t)p * half, *s = t->sin_tab + (size_t)p * half;
        for (size_t i = 0; i < half; i++) {
            const double a = (double)p * t->inv_freq[i];
            c[i] = (float)cos(a);
            s[i] = (float)sin(a);
        }
    }
    return t;
}

tg_rope_table *tg_rope_table_new(int head_dim, float theta, int64_t n_pos, tg_error *err) {
    if (head_dim < 2 || head_dim % 2) {
        tg_fail(err, "rope: head_dim %d must be even and positive", head_dim);
        return NULL;
    }
    if (!(theta > 0.0f)) {
        tg_fail(err, "rope: theta %g must be positive", (double)theta);
        return NULL;
    }
    double *f = malloc((size_t)head_dim / 2 * sizeof(double));
    if (!f) {
        tg_fail(err, "rope: out of memory");
        return NULL;
    }
    for (int i = 0; i < head_dim / 2; i++) f[i] = pow((double)theta, -2.0 * i / head_dim);
    tg_rope_table *t = tg_rope_table_new_freqs(head_dim, f, n_pos, err);
    free(f);
    return t;
}

void tg_rope_table_free(tg_rope_table *t) {
    if (!t) return;
    TG_FREE_ALL(t->inv_freq, t->cos_tab, t->sin_tab, t);
}

void tg_rope_table_apply(const tg_rope_table *t, float *x, int n_heads, int64_t pos, tg_rope_style style) {
    if (n_heads <= 0) return;
    if (pos < 0 || pos >= t->n_pos) {
        rope_direct(x, n_heads, t->head_dim, pos, t->inv_freq, 0.0f, style);
        return;
    }
    const size_t half = (size_t)t->head_dim / 2;
    rope_rotate(x, n_heads, t->head_dim, 0, (int)half, t->cos_tab + (size_t)pos * half, t->sin_tab + (size_t)pos * half,
                style);
}

void tg_swiglu(float *gate, const float *up, int64_t n) { tg_kernels()->swiglu(gate, up, n); }

void tg_geglu_tanh(float *gate, const float *up, int64_t n) { tg_kernels()->geglu_tanh(gate, up, n); }

void tg_softcap(float *x, float cap, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = cap * tanhf(x[i] / cap);
}

void tg_rope_heads(float *x, int n_heads, int head_dim, int rot_dims, const float *c, const float *s,
                   tg_rope_style style) {
    if (rot_dims < 2) return;
    for (int h = 0; h < n_heads; h++) rope_rotate(x + (size_t)h * (size_t)head_dim, 1, rot_dims, 0, rot_dims / 2, c, s, style);
}
