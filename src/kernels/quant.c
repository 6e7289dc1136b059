/* quant.c — quantising rows to Q8_0 / Q4_0, and the Q8 form of activation vectors (decoding: types.c). */
#include "kernels/quant.h"

#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "util/half.h"

static inline void store_u16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

/* round-half-even to an integer in [lo, hi] (nearbyintf uses the default rounding mode, round-to-nearest-even). */
static inline int round_clamp(float v, int lo, int hi) {
    float r = nearbyintf(v);
    if (!(r >= (float)lo)) return lo; /* also catches NaN */
    if (r > (float)hi) return hi;
    return (int)r;
}

void tg_quantize_row_q8_0(const float *x, void *dst, int64_t n) {
    uint8_t *out = dst;
    for (int64_t b = 0; b < n / TG_QK; b++, x += TG_QK, out += sizeof(tg_block_q8_0)) {
        float amax = 0.0f;
        for (int j = 0; j < TG_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
        uint16_t dh = tg_f32_to_f16(amax / 127.0f);
        float d = tg_f16_to_f32(dh);
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        store_u16(out, dh);
        for (int j = 0; j < TG_QK; j++) out[2 + j] = (uint8_t)(int8_t)round_clamp(x[j] * id, -127, 127);
    }
}

void tg_quantize_row_q4_0(const float *x, void *dst, int64_t n) {
    uint8_t *out = dst;
    for (int64_t b = 0; b < n / TG_QK; b++, x += TG_QK, out += sizeof(tg_block_q4_0)) {
        float m = 0.0f;
        for (int j = 0; j < TG_QK; j++)
            if (fabsf(x[j]) > fabsf(m)) m = x[j];
        uint16_t dh = tg_f32_to_f16(m / -8.0f);
        float d = tg_f16_to_f32(dh);
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        store_u16(out, dh);
        for (int j = 0; j < TG_QK / 2; j++) {
            int lo = round_clamp(x[j] * id + 8.0f, 0, 15);
            int hi = round_clamp(x[j + TG_QK / 2] * id + 8.0f, 0, 15);
            out[2 + j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

/* v rounded to fp16 and widened back, or v itself where fp16 overflows (see tg_q8x_block). */
static inline float f16_or_f32(float v) {
    const float h = tg_f16_to_f32(tg_f32_to_f16(v));
    return isinf(h) ? v : h;
}

void tg_quantize_q8x_ref(const float *x, tg_q8x_block *dst, int64_t n) {
    for (int64_t b = 0; b < n / TG_QK; b++, x += TG_QK) {
        float amax = 0.0f;
        for (int j = 0; j < TG_QK; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        int32_t sum = 0;
        for (int j = 0; j < TG_QK; j++) {
            dst[b].q[j] = (int8_t)round_clamp(x[j] * id, -127, 127);
            sum += dst[b].q[j];
        }
        dst[b].d = f16_or_f32(d);
        dst[b].s = f16_or_f32(d * (float)sum);
        dst[b].sum = sum;
    }
}

void tg_quantize_q8k_ref(const float *x, tg_q8k_block *dst, int64_t n) {
    for (int64_t b = 0; b < n / TG_Q8K_ELEMS; b++, x += TG_Q8K_ELEMS) {
        float amax = 0.0f;
        for (int j = 0; j < TG_Q8K_ELEMS; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        dst[b].d = amax != 0.0f ? 1.0f / id : 0.0f; /* as llama.cpp's quantize_row_q8_K: d = 1 / iscale */
        for (int g = 0; g < TG_Q8K_ELEMS / 16; g++) {
            int sum = 0;
            for (int j = 16 * g; j < 16 * g + 16; j++) {
                dst[b].q[j] = (int8_t)round_clamp(x[j] * id, -127, 127);
                sum += dst[b].q[j];
            }
            dst[b].bsums[g] = (int16_t)sum; /* |sum| <= 16 * 127 */
        }
    }
}

void tg_quantize_q8k(const float *x, tg_q8k_block *dst, int64_t n) { tg_kernels()->quantize_q8k(x, dst, n); }

void tg_quantize_q8x(const float *x, tg_q8x_block *dst, int64_t n) { tg_kernels()->quantize_q8x(x, dst, n); }

void tg_pack8_q8x(const tg_q8x_block *src, int64_t stride, int nt, int64_t nb, tg_q8x_pack8 *dst) {
    for (int64_t b = 0; b < nb; b++) {
        tg_q8x_pack8 *p = &dst[b];
        memset(p, 0, sizeof *p);
        for (int t = 0; t < nt; t++) {
            const tg_q8x_block *x = &src[(size_t)t * (size_t)stride + (size_t)b];
            for (int c = 0; c < TG_QK / 4; c++) memcpy(p->q[c][t], x->q + 4 * c, 4);
            p->d[t] = x->d;
            p->sum[t] = x->sum;
        }
    }
}
