/* gemv_neon.c — the aarch64 Advanced SIMD kernels of the float weight types (F32, F16, BF16) and the elementwise
 * vector primitives (neon.h).
 *
 * One row against one activation in the canonical order of arith_order.h: eight lanes of accumulators (two 4-lane
 * registers: lanes 0-3 and 4-7), one fused multiply-add per 8-column chunk in column order, the lanes summed
 * ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)) by two pairwise adds, then the tail of cols % 8 columns in
 * column order with fmaf. Four rows share each activation load in the decode kernel; the prefill tile computes each
 * (row, activation) pair with the same function, so both give the same bits. Compiled on another architecture, the
 * file holds nothing. */
#include "kernels/neon.h"

#include "util/cpu_features.h"

#if TG_HAVE_NEON

#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "util/half.h"

#define INLINE static inline __attribute__((always_inline))

/* Eight weights of a row from column k on, as fp32 (lo: columns k..k+3, hi: k+4..k+7). Byte loads: rows may sit at
 * any address. */
INLINE void load8(tg_dtype type, const uint8_t *row, int64_t k, float32x4_t *lo, float32x4_t *hi) {
    if (type == TG_DT_F32) {
        *lo = vreinterpretq_f32_u8(vld1q_u8(row + 4 * k));
        *hi = vreinterpretq_f32_u8(vld1q_u8(row + 4 * k + 16));
    } else if (type == TG_DT_F16) {
        const uint16x8_t h = vreinterpretq_u16_u8(vld1q_u8(row + 2 * k));
        *lo = vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(h)));
        *hi = vcvt_f32_f16(vreinterpret_f16_u16(vget_high_u16(h)));
    } else {
        const uint16x8_t h = vreinterpretq_u16_u8(vld1q_u8(row + 2 * k));
        *lo = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16));
        *hi = vreinterpretq_f32_u32(vshll_n_u16(vget_high_u16(h), 16));
    }
}

/* Element j of a row as fp32. */
INLINE float load1(tg_dtype type, const uint8_t *row, int64_t j) {
    uint16_t h;
    if (type == TG_DT_F32) {
        float f;
        memcpy(&f, row + 4 * j, 4);
        return f;
    }
    memcpy(&h, row + 2 * j, 2);
    return type == TG_DT_F16 ? tg_f16_to_f32(h) : tg_bf16_to_f32(h);
}

/* The eight lanes' sum in the canonical order. */
INLINE float reduce8(float32x4_t lo, float32x4_t hi) {
    const float32x4_t p = vpaddq_f32(lo, hi); /* a0+a1, a2+a3, a4+a5, a6+a7 */
    const float32x4_t q = vpaddq_f32(p, p);   /* (a0+a1)+(a2+a3), (a4+a5)+(a6+a7), .. */
    return vgetq_lane_f32(q, 0) + vgetq_lane_f32(q, 1);
}

/* The tail columns [k, cols) in column order. */
INLINE float tail(tg_dtype type, const uint8_t *row, const float *x, int64_t k, int64_t cols) {
    float t = 0.0f;
    for (int64_t j = k; j < cols; j++) t = fmaf(load1(type, row, j), x[j], t);
    return t;
}

/* R (4 or 1) rows at ws bytes apart against x: y[r]. */
INLINE void float_rows(tg_dtype type, const uint8_t *w, size_t ws, const float *x, int64_t cols, float *y,
                       const int R) {
    const int64_t c8 = cols & ~(int64_t)7;
    float32x4_t lo[4], hi[4];
    for (int r = 0; r < R; r++) lo[r] = hi[r] = vdupq_n_f32(0.0f);
    for (int64_t k = 0; k < c8; k += 8) {
        const float32x4_t xl = vld1q_f32(x + k), xh = vld1q_f32(x + k + 4);
        for (int r = 0; r < R; r++) {
            float32x4_t wl, wh;
            load8(type, w + (size_t)r * ws, k, &wl, &wh);
            lo[r] = vfmaq_f32(lo[r], wl, xl);
            hi[r] = vfmaq_f32(hi[r], wh, xh);
        }
    }
    for (int r = 0; r < R; r++) {
        float s = reduce8(lo[r], hi[r]);
        if (c8 < cols) s += tail(type, w + (size_t)r * ws, x, c8, cols);
        y[r] = s;
    }
}

INLINE void gemv_float(tg_dtype type, const uint8_t *w, size_t ws, int64_t nr, const float *x, int64_t cols,
                       float *y) {
    int64_t r = 0;
    for (; r + 4 <= nr; r += 4) float_rows(type, w + (size_t)r * ws, ws, x, cols, y + r, 4);
    for (; r < nr; r++) float_rows(type, w + (size_t)r * ws, ws, x, cols, y + r, 1);
}

/* A tile: every (row, activation) pair by the decode kernel's arithmetic, four rows per activation. */
INLINE void tile_float(tg_dtype type, const uint8_t *w, size_t ws, int nr, const uint8_t *x, size_t xs, int nt,
                       int64_t cols, float *y, size_t ldy) {
    for (int t = 0; t < nt; t++) {
        const float *xt = (const float *)(const void *)(x + (size_t)t * xs);
        gemv_float(type, w, ws, nr, xt, cols, y + (size_t)t * ldy);
    }
}

#define FLOAT_KERNELS(name, type)                                                                                  \
    void tg_neon_gemv_##name(const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols,          \
                             float *y) {                                                                           \
        gemv_float(type, w, w_stride, nr, (const float *)x, cols, y);                                             \
    }                                                                                                              \
    void tg_neon_tile_##name(const uint8_t *w, size_t w_stride, int nr, const uint8_t *x, size_t x_stride,        \
                             int nt, int64_t cols, float *y, size_t ldy) {                                         \
        tile_float(type, w, w_stride, nr, x, x_stride, nt, cols, y, ldy);                                         \
    }
FLOAT_KERNELS(f32, TG_DT_F32)
FLOAT_KERNELS(f16, TG_DT_F16)
FLOAT_KERNELS(bf16, TG_DT_BF16)

void tg_neon_axpy_f32(float a, const float *x, float *y, int64_t n) {
    int64_t i = 0;
    const float32x4_t av = vdupq_n_f32(a);
    for (; i + 4 <= n; i += 4) vst1q_f32(y + i, vaddq_f32(vld1q_f32(y + i), vmulq_f32(av, vld1q_f32(x + i))));
    for (; i < n; i++) y[i] += a * x[i];
}

void tg_neon_scale_f32(float *x, float a, int64_t n) {
    int64_t i = 0;
    const float32x4_t av = vdupq_n_f32(a);
    for (; i + 4 <= n; i += 4) vst1q_f32(x + i, vmulq_f32(vld1q_f32(x + i), av));
    for (; i < n; i++) x[i] *= a;
}

int64_t tg_neon_bf16_to_f32_row(const uint16_t *src, float *dst, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const uint16x8_t h = vld1q_u16(src + i);
        vst1q_f32(dst + i, vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)));
        vst1q_f32(dst + i + 4, vreinterpretq_f32_u32(vshll_n_u16(vget_high_u16(h), 16)));
    }
    return i;
}

#endif
