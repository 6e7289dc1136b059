/* q32_neon_inline.h — internal to gemv_q32_neon.c and gemv_q32_dotprod.c: the Q8_0 / Q4_0 kernels against
 * tg_q8x_block activations, written once and included by both files, whose compile flags decide the block's integer
 * dot product: sdot where TG_HAVE_DOTPROD (ARMv8.2 dotprod), widening multiplies (smull + sadalp) otherwise. The
 * includer defines Q32_NAME(x) (the functions' prefix).
 *
 * Per row, the canonical order of arith_order.h: acc = 0; for each block b in order, isum = the exact int32 dot
 * product of the codes (Q4_0: of the nibbles, minus 8 * sum(x's codes)), acc = fma((float)isum, d_w(b) * d_x(b),
 * acc). Four rows share each activation block, their four isums in one register and one fused multiply-add (the
 * same rounding, lane by lane, as fmaf); the prefill kernel runs the decode kernel once per token. */
#ifndef TG_KERNELS_Q32_NEON_INLINE_H
#define TG_KERNELS_Q32_NEON_INLINE_H

#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "kernels/neon.h"
#include "util/half.h"

#define Q32_INLINE static inline __attribute__((always_inline))

/* The 32 codes of a weight block (at blk, its scale first) as signed bytes in element order: Q8_0's codes, Q4_0's
 * nibbles 0..15 (element j < 16: low nibble of byte j; element j + 16: its high nibble). */
Q32_INLINE void q32_codes(tg_dtype type, const uint8_t *blk, int8x16_t *a, int8x16_t *b) {
    if (type == TG_DT_Q8_0) {
        *a = vreinterpretq_s8_u8(vld1q_u8(blk + 2));
        *b = vreinterpretq_s8_u8(vld1q_u8(blk + 18));
    } else {
        const uint8x16_t v = vld1q_u8(blk + 2);
        *a = vreinterpretq_s8_u8(vandq_u8(v, vdupq_n_u8(0x0f)));
        *b = vreinterpretq_s8_u8(vshrq_n_u8(v, 4));
    }
}

/* Four int32 partial sums whose total is the dot product of codes a, b with x's codes xa, xb (exact). */
Q32_INLINE int32x4_t q32_dot(int8x16_t a, int8x16_t b, int8x16_t xa, int8x16_t xb) {
#if TG_HAVE_DOTPROD
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), a, xa), b, xb);
#else
    int32x4_t s = vpaddlq_s16(vmull_s8(vget_low_s8(a), vget_low_s8(xa)));
    s = vpadalq_s16(s, vmull_high_s8(a, xa));
    s = vpadalq_s16(s, vmull_s8(vget_low_s8(b), vget_low_s8(xb)));
    return vpadalq_s16(s, vmull_high_s8(b, xb));
#endif
}

Q32_INLINE uint16_t q32_ld16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return h;
}

/* R (4 or 1) rows at ws bytes apart against nb blocks of x: y[r]. */
Q32_INLINE void q32_rows(tg_dtype type, const uint8_t *w, size_t ws, const tg_q8x_block *x, int64_t nb, float *y,
                         const int R) {
    const size_t bw = type == TG_DT_Q8_0 ? sizeof(tg_block_q8_0) : sizeof(tg_block_q4_0);
    const int32_t bias = type == TG_DT_Q8_0 ? 0 : 8;
    float32x4_t acc = vdupq_n_f32(0.0f);
    float acc1 = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        const int8x16_t xa = vld1q_s8(x[b].q), xb = vld1q_s8(x[b].q + 16);
        const int32_t off = bias * x[b].sum;
        if (R == 4) {
            int32x4_t d[4];
            uint16_t h[4];
            for (int r = 0; r < 4; r++) {
                const uint8_t *blk = w + (size_t)r * ws + (size_t)b * bw;
                int8x16_t ca, cb;
                q32_codes(type, blk, &ca, &cb);
                d[r] = q32_dot(ca, cb, xa, xb);
                h[r] = q32_ld16(blk);
            }
            /* lane r: row r's isum (the pairwise adds are exact in int32) */
            const int32x4_t s = vsubq_s32(vpaddq_s32(vpaddq_s32(d[0], d[1]), vpaddq_s32(d[2], d[3])), vdupq_n_s32(off));
            const float32x4_t dw = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
            acc = vfmaq_f32(acc, vcvtq_f32_s32(s), vmulq_f32(dw, vdupq_n_f32(x[b].d)));
        } else {
            const uint8_t *blk = w + (size_t)b * bw;
            int8x16_t ca, cb;
            q32_codes(type, blk, &ca, &cb);
            const int32_t isum = vaddvq_s32(q32_dot(ca, cb, xa, xb)) - off;
            acc1 = fmaf((float)isum, tg_f16_to_f32(q32_ld16(blk)) * x[b].d, acc1);
        }
    }
    if (R == 4) vst1q_f32(y, acc);
    else y[0] = acc1;
}

Q32_INLINE void q32_gemv(tg_dtype type, const uint8_t *w, size_t ws, int64_t nr, const tg_q8x_block *x, int64_t nb,
                         float *y) {
    int64_t r = 0;
    for (; r + 4 <= nr; r += 4) q32_rows(type, w + (size_t)r * ws, ws, x, nb, y + r, 4);
    for (; r < nr; r++) q32_rows(type, w + (size_t)r * ws, ws, x, nb, y + r, 1);
}

#define Q32_KERNELS(name, type)                                                                                    \
    void Q32_NAME(gemv_##name)(const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols,        \
                               float *y) {                                                                         \
        q32_gemv(type, w, w_stride, nr, (const tg_q8x_block *)x, cols / TG_QK, y);                                \
    }                                                                                                              \
    void Q32_NAME(gemm_##name)(const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8x_block *xq, int64_t nb, \
                               int64_t n, float *y, size_t ldy) {                                                  \
        for (int64_t t = 0; t < n; t++) q32_gemv(type, w, w_stride, nr, xq + t * nb, nb, y + (size_t)t * ldy);    \
    }

Q32_KERNELS(q8_0, TG_DT_Q8_0)
Q32_KERNELS(q4_0, TG_DT_Q4_0)

#endif
