/* kivi.c — KIVI affine quantisation: the q-range lookup, fp16 (scale, zero) fitting, the row / channel quantisers
 * and dequantisers. */
#include "kvcache/kivi.h"

#include <math.h>
#include <string.h>

#include "kvcache/precision.h"
#include "util/half.h"

/* The q-ranges are rows of the precision table (precision.c). */
const tg_kivi_range *tg_kivi_range_of(tg_kv_precision p) {
    const tg_kv_traits *t = tg_kv_traits_of(p);
    return t && t->is_integer ? &t->range : NULL;
}

bool tg_kivi_is_quantized(tg_kv_precision p) { return tg_kivi_range_of(p) != NULL; }

size_t tg_kivi_row_bytes(const tg_kivi_range *r, int64_t n) {
    if (n <= 0) return 0;
    return ((size_t)n * (size_t)r->bits + 7) / 8;
}

#define F16_MAX 65504.0f

uint16_t tg_kivi_f16_down(float x) {
    if (isnan(x)) return 0;
    if (x >= F16_MAX) return 0x7bff;
    if (x <= -F16_MAX) return 0xfbff;
    uint16_t h = tg_f32_to_f16(x);
    if (tg_f16_to_f32(h) <= x) return h;
    if (h & 0x8000) return (uint16_t)(h + 1); /* negative: one step larger in magnitude */
    return h == 0 ? (uint16_t)0x8001 : (uint16_t)(h - 1);
}

uint16_t tg_kivi_f16_up(float x) {
    if (isnan(x)) return 0;
    if (x >= F16_MAX) return 0x7bff;
    if (x <= -F16_MAX) return 0xfbff;
    uint16_t h = tg_f32_to_f16(x);
    if (tg_f16_to_f32(h) >= x) return h;
    if (h & 0x8000) return h == 0x8000 ? (uint16_t)0x0001 : (uint16_t)(h - 1);
    return (uint16_t)(h + 1);
}

static float clamp_f16_range(float x) {
    if (isnan(x)) return 0.0f;
    return x > F16_MAX ? F16_MAX : (x < -F16_MAX ? -F16_MAX : x);
}

void tg_kivi_fit(const tg_kivi_range *r, float lo, float hi, uint16_t *scale, uint16_t *zero) {
    const int levels = r->qmax - r->qmin;
    lo = clamp_f16_range(lo);
    hi = clamp_f16_range(hi);
    if (hi < lo) hi = lo;
    uint16_t z = tg_kivi_f16_down(lo);
    float zf = tg_f16_to_f32(z);
    float s = (hi - zf) / (float)levels;
    if (!(s >= TG_KIVI_SCALE_FLOOR)) s = TG_KIVI_SCALE_FLOOR;
    uint16_t sh = tg_kivi_f16_up(s);
    /* the float division may round down: step the scale up until the grid's top reaches hi */
    while (zf + (float)levels * tg_f16_to_f32(sh) < hi && sh < 0x7bff) sh++;
    *scale = sh;
    *zero = z;
}

/* A slice's values and how their errors are weighed (tg_kivi_fit_slice). */
typedef struct {
    const float *x;
    int64_t n;
    size_t stride;
    float mid, half, edge;
    int levels;
} slice;

/* The weighted squared error of the slice coded on the grid (s, z): fp32, in index order. */
static float slice_error(const slice *sl, float s, float z) {
    float e = 0.0f;
    for (int64_t i = 0; i < sl->n; i++) {
        const float v = sl->x[(size_t)i * sl->stride];
        if (v != v) continue; /* NaN: coded 0 whatever the grid */
        const float d = (float)tg_kivi_code(v, s, z, sl->levels) * s + z - v;
        if (sl->edge == 0.0f) { /* values: the plain squared error (1 + 0 u^2 == 1: the same sum) */
            e += d * d;
            continue;
        }
        const float u = (v - sl->mid) / sl->half;
        e += d * d * (1.0f + sl->edge * u * u);
    }
    return e;
}

void tg_kivi_fit_slice(const tg_kivi_range *r, const float *x, int64_t n, size_t stride, float lo, float hi,
                       float edge, uint16_t *scale, uint16_t *zero) {
    tg_kivi_fit(r, lo, hi, scale, zero);
    const float span = hi - lo;
    if (!r->clip || n < 3 || !(span > 0.0f) || !isfinite(span)) return;
    const slice sl = {x, n, stride, 0.5f * (lo + hi), 0.5f * span, edge, r->qmax - r->qmin};
    float best = slice_error(&sl, tg_f16_to_f32(*scale), tg_f16_to_f32(*zero));
    for (int i = 0; i <= TG_KIVI_CLIP_STEPS; i++)
        for (int j = 0; j <= TG_KIVI_CLIP_STEPS; j++) {
            if (i == 0 && j == 0) continue; /* the whole range: fitted above */
            const float a = lo + span * ((float)i / TG_KIVI_CLIP_DIV), b = hi - span * ((float)j / TG_KIVI_CLIP_DIV);
            uint16_t s, z;
            tg_kivi_fit(r, a, b, &s, &z);
            const float e = slice_error(&sl, tg_f16_to_f32(s), tg_f16_to_f32(z));
            if (e < best) {
                best = e;
                *scale = s;
                *zero = z;
            }
        }
}

/* min / max of n floats at stride, ignoring NaN (all NaN gives [0, 0]). */
static void range_of(const float *x, int64_t n, size_t stride, float *lo, float *hi) {
    float mn = INFINITY, mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        float v = x[(size_t)i * stride];
        if (v < mn) mn = v;
        if (v > mx) mx = v;
    }
    if (mn > mx) mn = mx = 0.0f;
    *lo = mn;
    *hi = mx;
}

void tg_kivi_quantize_row(const tg_kivi_range *r, const float *x, int64_t n, uint8_t *row, uint16_t *scale,
                          uint16_t *zero) {
    const int levels = r->qmax - r->qmin;
    float lo, hi;
    range_of(x, n, 1, &lo, &hi);
    tg_kivi_fit_slice(r, x, n, 1, lo, hi, 0.0f, scale, zero);
    const float s = tg_f16_to_f32(*scale), z = tg_f16_to_f32(*zero);
    memset(row, 0, tg_kivi_row_bytes(r, n));
    for (int64_t i = 0; i < n; i++) tg_kivi_put(row, r->bits, i, tg_kivi_code(x[i], s, z, levels));
}

void tg_kivi_quantize_channels(const tg_kivi_range *r, const float *x, size_t x_stride, int n_rows, int64_t n,
                               uint8_t *rows, uint16_t *scale, uint16_t *zero) {
    const int levels = r->qmax - r->qmin;
    const size_t rb = tg_kivi_row_bytes(r, n);
    memset(rows, 0, rb * (size_t)n_rows);
    for (int64_t c = 0; c < n; c++) {
        float lo, hi;
        range_of(x + c, n_rows, x_stride, &lo, &hi);
        tg_kivi_fit_slice(r, x + c, n_rows, x_stride, lo, hi, TG_KIVI_CLIP_KEY_EDGE, &scale[c], &zero[c]);
        const float s = tg_f16_to_f32(scale[c]), z = tg_f16_to_f32(zero[c]);
        for (int t = 0; t < n_rows; t++)
            tg_kivi_put(rows + (size_t)t * rb, r->bits, c, tg_kivi_code(x[(size_t)t * x_stride + (size_t)c], s, z, levels));
    }
}

void tg_kivi_dequantize_row(const tg_kivi_range *r, const uint8_t *row, int64_t n, float scale, float zero,
                            float *out) {
    for (int64_t i = 0; i < n; i++) out[i] = (float)tg_kivi_get(row, r->bits, i) * scale + zero;
}

void tg_kivi_dequantize_row_channels(const tg_kivi_range *r, const uint8_t *row, int64_t n, const uint16_t *scale,
                                     const uint16_t *zero, float *out) {
    for (int64_t i = 0; i < n; i++)
        out[i] = (float)tg_kivi_get(row, r->bits, i) * tg_f16_to_f32(scale[i]) + tg_f16_to_f32(zero[i]);
}

void tg_kivi_tile_put_row(uint8_t *tile, bool keys, int bits, int64_t G, int64_t n, int64_t r, const uint8_t *row) {
    for (int64_t k = 0; k < n; k++) tg_kivi_tile_put(tile, keys, bits, G, n, r, k, tg_kivi_get(row, bits, k));
}
