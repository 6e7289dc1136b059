/* kquant_neon_inline.h — internal to gemv_kquant_neon.c and gemv_kquant_dotprod.c: the K-quant kernels (Q2_K, Q3_K,
 * Q4_K, Q5_K, Q6_K) against tg_q8k_block activations, written once and included by both files, whose compile flags
 * decide the integer dot product of four byte pairs: sdot where TG_HAVE_DOTPROD (ARMv8.2 dotprod), widening
 * multiplies (smull, saddlp, addp) otherwise. The includer defines KQ_NAME(x) (the functions' prefix).
 *
 * The bits of gemv_kquant_avx2.c (the x86 twin), lane for lane. Per super-block of a row and an activation
 * super-block, eight int32 lanes (two registers: lanes 0-3 and 4-7): lane L holds, over every 32-element chunk of
 * the super-block, the scaled sums of the chunk's elements 4L .. 4L + 3 (sdot's four-product groups are maddubs +
 * madd's), exact, minus the bias or plus nothing; the 16-code sums of the activation meet the scales or mins as
 * madd pairs them: lane L takes the sums 2L and 2L + 1. Then acc_L = fma(d * dx, (float)isum_L, acc_L) and, with
 * mins, acc_L = acc_L - (dmin * dx) * (float)msum_L in one rounding; a row's result is the eight lanes summed
 * ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)) after its last super-block. The codes are unpacked as stored
 * (unsigned: Q3_K / Q6_K biased by +4 / +32, the bias taken out through the code sums), the sub-block scales
 * decoded with whole-word masks and shifts (the values of ggml_blocks.h's tg_k4_scale_min and tg_q3k_scale).
 *
 * Prefill: a super-block's codes are unpacked once and multiplied into up to four tokens' activations; decode is the
 * same code for one token, so every (row, token) result has the same bits either way. */
#ifndef TG_KERNELS_KQUANT_NEON_INLINE_H
#define TG_KERNELS_KQUANT_NEON_INLINE_H

#include <arm_neon.h>
#include <stdbool.h>
#include <string.h>

#include "kernels/ggml_blocks.h"
#include "kernels/neon.h"
#include "util/half.h"

#define KQ_INLINE static inline __attribute__((always_inline))
#define KQ_MAX_TOKENS 4 /* tokens per pass of the prefill kernel */

/* Eight int32 lanes: lo = lanes 0-3, hi = lanes 4-7. */
typedef struct {
    int32x4_t lo, hi;
} kq_i32x8;

typedef struct {
    float32x4_t lo, hi;
} kq_f32x8;

/* The four sums of four adjacent products of w's and x's bytes (lane i: bytes 4i .. 4i + 3), exact. */
KQ_INLINE int32x4_t kq_dot4(int8x16_t w, int8x16_t x) {
#if TG_HAVE_DOTPROD
    return vdotq_s32(vdupq_n_s32(0), w, x);
#else
    const int32x4_t a = vpaddlq_s16(vmull_s8(vget_low_s8(w), vget_low_s8(x)));
    const int32x4_t b = vpaddlq_s16(vmull_high_s8(w, x));
    return vpaddq_s32(a, b); /* (p0 + p1) + (p2 + p3), .. : the same integers */
#endif
}

KQ_INLINE float kq_f16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return tg_f16_to_f32(h);
}

/* isum += s0 * dot(w0, x[0..16)) (lanes 0-3) and s1 * dot(w1, x[16..32)) (lanes 4-7): 32 codes of one chunk. */
KQ_INLINE void kq_chunk(kq_i32x8 *isum, int8x16_t w0, int8x16_t w1, const int8_t *x, int32_t s0, int32_t s1) {
    isum->lo = vmlaq_n_s32(isum->lo, kq_dot4(w0, vld1q_s8(x)), s0);
    isum->hi = vmlaq_n_s32(isum->hi, kq_dot4(w1, vld1q_s8(x + 16)), s1);
}

/* Lane L: bsums[2L] * s[2L] + bsums[2L + 1] * s[2L + 1] for sixteen int16 s (madd of the code sums). */
KQ_INLINE kq_i32x8 kq_bsums_dot16(const int16_t *bsums, int16x8_t s0, int16x8_t s1) {
    const int16x8_t b0 = vld1q_s16(bsums), b1 = vld1q_s16(bsums + 8);
    kq_i32x8 r;
    r.lo = vpaddq_s32(vmull_s16(vget_low_s16(b0), vget_low_s16(s0)), vmull_high_s16(b0, s0));
    r.hi = vpaddq_s32(vmull_s16(vget_low_s16(b1), vget_low_s16(s1)), vmull_high_s16(b1, s1));
    return r;
}

/* Lane L: m[L] * (bsums[2L] + bsums[2L + 1]) for eight int16 mins m (the pair sums stay within int16). */
KQ_INLINE kq_i32x8 kq_bsums_pairs(const int16_t *bsums, int16x8_t m) {
    const int16x8_t bp = vpaddq_s16(vld1q_s16(bsums), vld1q_s16(bsums + 8));
    kq_i32x8 r = {vmull_s16(vget_low_s16(bp), vget_low_s16(m)), vmull_high_s16(bp, m)};
    return r;
}

/* acc = fma(dd, (float)isum, acc), lane by lane. */
KQ_INLINE void kq_scale_in(kq_f32x8 *acc, kq_i32x8 isum, float dd) {
    acc->lo = vfmaq_n_f32(acc->lo, vcvtq_f32_s32(isum.lo), dd);
    acc->hi = vfmaq_n_f32(acc->hi, vcvtq_f32_s32(isum.hi), dd);
}

/* acc = acc - dm * (float)msum in one rounding, lane by lane. */
KQ_INLINE void kq_mins_out(kq_f32x8 *acc, kq_i32x8 msum, float dm) {
    acc->lo = vfmsq_n_f32(acc->lo, vcvtq_f32_s32(msum.lo), dm);
    acc->hi = vfmsq_n_f32(acc->hi, vcvtq_f32_s32(msum.hi), dm);
}

/* The eight lanes' sum in the canonical order. */
KQ_INLINE float kq_reduce(kq_f32x8 a) {
    const float32x4_t p = vpaddq_f32(a.lo, a.hi);
    const float32x4_t q = vpaddq_f32(p, p);
    return vgetq_lane_f32(q, 0) + vgetq_lane_f32(q, 1);
}

KQ_INLINE int8x16_t kq_s8(uint8x16_t v) { return vreinterpretq_s8_u8(v); }

KQ_INLINE uint32_t kq_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Sixteen int16 scales (two registers: 0..7, 8..15) also stored as int32 at sc[16], the multipliers of kq_chunk. */
KQ_INLINE void kq_scales16(int16x8_t a, int16x8_t b, int32_t *sc) {
    vst1q_s32(sc, vmovl_s16(vget_low_s16(a)));
    vst1q_s32(sc + 4, vmovl_high_s16(a));
    vst1q_s32(sc + 8, vmovl_s16(vget_low_s16(b)));
    vst1q_s32(sc + 12, vmovl_high_s16(b));
}

/* The element order Q2_K, Q3_K and Q6_K share: element 128h + 32s + l (h < 2, s < 4, l < 32) has scale
 * sc[8h + 2s + l / 16]; c[s][0..1] = the 32 unsigned codes of elements 128h + 32s + 0..31 for one h. */
KQ_INLINE void kq_dot_128(kq_i32x8 *isum, int8x16_t c[4][2], const int32_t *sc, int h,
                          const tg_q8k_block *const *x, const int T) {
    for (int s = 0; s < 4; s++)
        for (int t = 0; t < T; t++)
            kq_chunk(&isum[t], c[s][0], c[s][1], x[t]->q + 128 * h + 32 * s, sc[8 * h + 2 * s], sc[8 * h + 2 * s + 1]);
}

/* ---- one super-block of each type against T tokens' activation super-blocks x[t] ---- */

/* Q6_K: ql[128] (p), qh[64] (p + 128), scales[16] int8 (p + 192), d (p + 208); code = low nibble | 2 high bits << 4,
 * value d * sc * (code - 32). */
KQ_INLINE void sup_q6_k(const uint8_t *p, const tg_q8k_block *const *x, kq_f32x8 *acc, const int T) {
    const int8x16_t s8 = vld1q_s8((const int8_t *)(const void *)(p + 192));
    const int16x8_t a = vmovl_s8(vget_low_s8(s8)), b = vmovl_high_s8(s8);
    int32_t sc[16];
    kq_scales16(a, b, sc);
    kq_i32x8 isum[KQ_MAX_TOKENS];
    for (int t = 0; t < T; t++) isum[t].lo = isum[t].hi = vdupq_n_s32(0);
    const uint8x16_t lo4 = vdupq_n_u8(0x0F), hi2 = vdupq_n_u8(0x30);
    for (int h = 0; h < 2; h++) {
        int8x16_t c[4][2];
        for (int k = 0; k < 2; k++) { /* bytes 16k .. 16k + 15 of each 32 */
            const uint8x16_t ql0 = vld1q_u8(p + 64 * h + 16 * k), ql1 = vld1q_u8(p + 64 * h + 32 + 16 * k);
            const uint8x16_t qh = vld1q_u8(p + 128 + 32 * h + 16 * k);
            c[0][k] = kq_s8(vorrq_u8(vandq_u8(ql0, lo4), vandq_u8(vshlq_n_u8(qh, 4), hi2)));
            c[1][k] = kq_s8(vorrq_u8(vandq_u8(ql1, lo4), vandq_u8(vshlq_n_u8(qh, 2), hi2)));
            c[2][k] = kq_s8(vorrq_u8(vshrq_n_u8(ql0, 4), vandq_u8(qh, hi2)));
            c[3][k] = kq_s8(vorrq_u8(vshrq_n_u8(ql1, 4), vandq_u8(vshrq_n_u8(qh, 2), hi2)));
        }
        kq_dot_128(isum, c, sc, h, x, T);
    }
    const float d = kq_f16(p + 208);
    for (int t = 0; t < T; t++) { /* minus 32 * sum_g sc_g * bsum_g */
        const kq_i32x8 bias = kq_bsums_dot16(x[t]->bsums, a, b);
        isum[t].lo = vsubq_s32(isum[t].lo, vshlq_n_s32(bias.lo, 5));
        isum[t].hi = vsubq_s32(isum[t].hi, vshlq_n_s32(bias.hi, 5));
        kq_scale_in(&acc[t], isum[t], d * x[t]->d);
    }
}

/* Q3_K: hmask[32] (p), qs[64] (p + 32), scales[12] (p + 96, sixteen 6-bit scales minus 32), d (p + 108); code = 2 low
 * bits | high bit << 2, value d * sc * (code - 4). */
KQ_INLINE void sup_q3_k(const uint8_t *p, const tg_q8k_block *const *x, kq_f32x8 *acc, const int T) {
    /* the sixteen 6-bit scales as bytes in order (tg_q3k_scale's), from the field's words a0, a1, a2 */
    const uint32_t a0 = kq_u32(p + 96), a1 = kq_u32(p + 100), a2 = kq_u32(p + 104);
    const uint32_t lo4 = 0x0F0F0F0Fu, lo2 = 0x03030303u;
    const uint32_t raw[4] = {(a0 & lo4) | (a2 & lo2) << 4, (a1 & lo4) | (a2 >> 2 & lo2) << 4,
                             (a0 >> 4 & lo4) | (a2 >> 4 & lo2) << 4, (a1 >> 4 & lo4) | (a2 >> 6 & lo2) << 4};
    const int8x16_t s8 = vsubq_s8(vreinterpretq_s8_u32(vld1q_u32(raw)), vdupq_n_s8(32));
    const int16x8_t a = vmovl_s8(vget_low_s8(s8)), b = vmovl_high_s8(s8);
    int32_t sc[16];
    kq_scales16(a, b, sc);
    kq_i32x8 isum[KQ_MAX_TOKENS];
    for (int t = 0; t < T; t++) isum[t].lo = isum[t].hi = vdupq_n_s32(0);
    const uint8x16_t three = vdupq_n_u8(3), four = vdupq_n_u8(4);
    for (int h = 0; h < 2; h++) {
        int8x16_t c[4][2];
        for (int k = 0; k < 2; k++) {
            const uint8x16_t q = vld1q_u8(p + 32 + 32 * h + 16 * k);
            uint8x16_t hm = vld1q_u8(p + 16 * k); /* bit 4h + s of byte l: element 128h + 32s + l */
            if (h) hm = vshrq_n_u8(hm, 4);
            c[0][k] = kq_s8(vorrq_u8(vandq_u8(q, three), vandq_u8(vshlq_n_u8(hm, 2), four)));
            c[1][k] = kq_s8(vorrq_u8(vandq_u8(vshrq_n_u8(q, 2), three), vandq_u8(vshlq_n_u8(hm, 1), four)));
            c[2][k] = kq_s8(vorrq_u8(vandq_u8(vshrq_n_u8(q, 4), three), vandq_u8(hm, four)));
            c[3][k] = kq_s8(vorrq_u8(vshrq_n_u8(q, 6), vandq_u8(vshrq_n_u8(hm, 1), four)));
        }
        kq_dot_128(isum, c, sc, h, x, T);
    }
    const float d = kq_f16(p + 108);
    for (int t = 0; t < T; t++) { /* minus 4 * sum_g sc_g * bsum_g */
        const kq_i32x8 bias = kq_bsums_dot16(x[t]->bsums, a, b);
        isum[t].lo = vsubq_s32(isum[t].lo, vshlq_n_s32(bias.lo, 2));
        isum[t].hi = vsubq_s32(isum[t].hi, vshlq_n_s32(bias.hi, 2));
        kq_scale_in(&acc[t], isum[t], d * x[t]->d);
    }
}

/* Q2_K: scales[16] (p; low nibble scale, high nibble min), qs[64] (p + 16), d (p + 80), dmin (p + 82); value
 * d * sc * code - dmin * m. */
KQ_INLINE void sup_q2_k(const uint8_t *p, const tg_q8k_block *const *x, kq_f32x8 *acc, const int T) {
    const uint8x16_t sb = vld1q_u8(p);
    const uint8x16_t s4 = vandq_u8(sb, vdupq_n_u8(0x0F)), m4 = vshrq_n_u8(sb, 4);
    int32_t sc[16];
    kq_scales16(vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(s4))), vreinterpretq_s16_u16(vmovl_high_u8(s4)), sc);
    const int16x8_t a = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(m4))), b = vreinterpretq_s16_u16(vmovl_high_u8(m4));
    kq_i32x8 isum[KQ_MAX_TOKENS];
    for (int t = 0; t < T; t++) isum[t].lo = isum[t].hi = vdupq_n_s32(0);
    const uint8x16_t three = vdupq_n_u8(3);
    for (int h = 0; h < 2; h++) {
        int8x16_t c[4][2];
        for (int k = 0; k < 2; k++) {
            const uint8x16_t q = vld1q_u8(p + 16 + 32 * h + 16 * k);
            c[0][k] = kq_s8(vandq_u8(q, three));
            c[1][k] = kq_s8(vandq_u8(vshrq_n_u8(q, 2), three));
            c[2][k] = kq_s8(vandq_u8(vshrq_n_u8(q, 4), three));
            c[3][k] = kq_s8(vshrq_n_u8(q, 6));
        }
        kq_dot_128(isum, c, sc, h, x, T);
    }
    const float d = kq_f16(p + 80), dmin = kq_f16(p + 82);
    for (int t = 0; t < T; t++) {
        kq_scale_in(&acc[t], isum[t], d * x[t]->d);
        kq_mins_out(&acc[t], kq_bsums_dot16(x[t]->bsums, a, b), dmin * x[t]->d);
    }
}

/* Q4_K / Q5_K: d, dmin (p, p + 2); scales[12] (p + 4); Q5_K: qh[32] (p + 16, bit sb of byte l: fifth bit of
 * element 32sb + l) and qs[128] (p + 48); Q4_K: qs[128] (p + 16). Sub-block sb = 2c + u of 32 elements: nibble u of
 * qs[32c + l]. Value d * sc * code - dmin * m. */
KQ_INLINE void sup_q45_k(const uint8_t *p, const tg_q8k_block *const *x, kq_f32x8 *acc, const int T, const bool five) {
    /* the eight 6-bit scales and mins (tg_k4_scale_min's), from the field's words a0, a1, a2 */
    const uint32_t a0 = kq_u32(p + 4), a1 = kq_u32(p + 8), a2 = kq_u32(p + 12);
    const uint32_t sm[4] = {a0 & 0x3F3F3F3Fu, (a2 & 0x0F0F0F0Fu) | (a0 >> 2 & 0x30303030u), a1 & 0x3F3F3F3Fu,
                            (a2 >> 4 & 0x0F0F0F0Fu) | (a1 >> 2 & 0x30303030u)};
    const uint8x16_t smv = vreinterpretq_u8_u32(vld1q_u32(sm)); /* bytes 0..7 scales, 8..15 mins */
    const int16x8_t s16 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(smv)));
    const int16x8_t m = vreinterpretq_s16_u16(vmovl_high_u8(smv));
    int32_t sc[8];
    vst1q_s32(sc, vmovl_s16(vget_low_s16(s16)));
    vst1q_s32(sc + 4, vmovl_high_s16(s16));
    const uint8_t *qs = p + (five ? 48 : 16);
    kq_i32x8 isum[KQ_MAX_TOKENS];
    for (int t = 0; t < T; t++) isum[t].lo = isum[t].hi = vdupq_n_s32(0);
    const uint8x16_t lo4 = vdupq_n_u8(0x0F), bit4 = vdupq_n_u8(0x10);
    uint8x16_t qh[2] = {vdupq_n_u8(0), vdupq_n_u8(0)};
    if (five) qh[0] = vld1q_u8(p + 16), qh[1] = vld1q_u8(p + 32);
    for (int c = 0; c < 4; c++) {
        int8x16_t lo[2], hi[2];
        for (int k = 0; k < 2; k++) {
            const uint8x16_t q = vld1q_u8(qs + 32 * c + 16 * k);
            uint8x16_t l = vandq_u8(q, lo4), u = vshrq_n_u8(q, 4);
            if (five) {
                l = vorrq_u8(l, vandq_u8(vshlq_n_u8(qh[k], 4), bit4));
                u = vorrq_u8(u, vandq_u8(vshlq_n_u8(qh[k], 3), bit4));
                qh[k] = vshrq_n_u8(qh[k], 2);
            }
            lo[k] = kq_s8(l), hi[k] = kq_s8(u);
        }
        for (int t = 0; t < T; t++) {
            kq_chunk(&isum[t], lo[0], lo[1], x[t]->q + 64 * c, sc[2 * c], sc[2 * c]);
            kq_chunk(&isum[t], hi[0], hi[1], x[t]->q + 64 * c + 32, sc[2 * c + 1], sc[2 * c + 1]);
        }
    }
    const float d = kq_f16(p), dmin = kq_f16(p + 2);
    for (int t = 0; t < T; t++) {
        kq_scale_in(&acc[t], isum[t], d * x[t]->d);
        kq_mins_out(&acc[t], kq_bsums_pairs(x[t]->bsums, m), dmin * x[t]->d);
    }
}

KQ_INLINE void sup_q4_k(const uint8_t *p, const tg_q8k_block *const *x, kq_f32x8 *acc, const int T) {
    sup_q45_k(p, x, acc, T, false);
}
KQ_INLINE void sup_q5_k(const uint8_t *p, const tg_q8k_block *const *x, kq_f32x8 *acc, const int T) {
    sup_q45_k(p, x, acc, T, true);
}

/* ---- rows: one weight row against T tokens (token t's super-blocks at xk + t * xs), results y[t * ldy] ---- */

#define KQ_ROW(NAME, BYTES)                                                                                           \
    KQ_INLINE void row_##NAME(const uint8_t *row, int64_t nsup, const tg_q8k_block *xk, size_t xs, float *y,         \
                              size_t ldy, const int T) {                                                              \
        kq_f32x8 acc[KQ_MAX_TOKENS];                                                                                  \
        for (int t = 0; t < T; t++) acc[t].lo = acc[t].hi = vdupq_n_f32(0.0f);                                        \
        for (int64_t b = 0; b < nsup; b++) {                                                                          \
            const tg_q8k_block *xb[KQ_MAX_TOKENS];                                                                    \
            for (int t = 0; t < T; t++) xb[t] = xk + (size_t)t * xs + (size_t)b;                                      \
            sup_##NAME(row + (size_t)b * (BYTES), xb, acc, T);                                                        \
        }                                                                                                             \
        for (int t = 0; t < T; t++) y[(size_t)t * ldy] = kq_reduce(acc[t]);                                           \
    }                                                                                                                 \
    void KQ_NAME(gemv_##NAME)(const uint8_t *w, size_t ws, int64_t nr, const void *x, int64_t cols, float *y) {      \
        const int64_t nsup = cols / TG_QK_K;                                                                          \
        for (int64_t r = 0; r < nr; r++) row_##NAME(w + (size_t)r * ws, nsup, x, 0, y + r, 0, 1);                     \
    }                                                                                                                 \
    void KQ_NAME(gemm_q8k_##NAME)(const uint8_t *w, size_t ws, int64_t nr, const tg_q8k_block *xk, int64_t nsup,     \
                                  int64_t n, float *y, size_t ldy) {                                                  \
        for (int64_t t0 = 0; t0 < n; t0 += KQ_MAX_TOKENS) { /* a group of tokens passes over the rows */             \
            const tg_q8k_block *xg = xk + (size_t)t0 * (size_t)nsup;                                                 \
            float *yg = y + (size_t)t0 * ldy;                                                                         \
            const int64_t nt = n - t0 < KQ_MAX_TOKENS ? n - t0 : KQ_MAX_TOKENS;                                       \
            for (int64_t r = 0; r < nr; r++) {                                                                        \
                const uint8_t *row = w + (size_t)r * ws;                                                              \
                if (nt == 4) row_##NAME(row, nsup, xg, (size_t)nsup, yg + r, ldy, 4);                                 \
                else if (nt == 3) row_##NAME(row, nsup, xg, (size_t)nsup, yg + r, ldy, 3);                            \
                else if (nt == 2) row_##NAME(row, nsup, xg, (size_t)nsup, yg + r, ldy, 2);                            \
                else row_##NAME(row, nsup, xg, (size_t)nsup, yg + r, ldy, 1);                                         \
            }                                                                                                         \
        }                                                                                                             \
    }

KQ_ROW(q2_k, TG_Q2_K_BYTES)
KQ_ROW(q3_k, TG_Q3_K_BYTES)
KQ_ROW(q4_k, TG_Q4_K_BYTES)
KQ_ROW(q5_k, TG_Q5_K_BYTES)
KQ_ROW(q6_k, TG_Q6_K_BYTES)
#undef KQ_ROW

#endif
