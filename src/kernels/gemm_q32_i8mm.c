/* gemm_q32_i8mm.c — the Q8_0 / Q4_0 prefill kernels of the i8mm table (smmla; the Makefile compiles this file with
 * ARMv8.2 dotprod + i8mm). Decoding keeps the dotprod table's gemv: one token has no second column for smmla's
 * 2x2 tile. Compiled without i8mm (another architecture), the file holds nothing.
 *
 * smmla multiplies a 2x8 int8 matrix (two weight rows, eight elements each) by an 8x2 one (the same eight elements
 * of two tokens) into a 2x2 int32 tile, so one instruction does the 32 multiply-adds of four (row, token) pairs
 * where sdot does 16 of one. A tile of this file is four rows by four tokens: per block, two row pairs and two
 * token pairs, each pair's 32 codes as four 16-byte operands [first's 8 elements, second's 8 elements] (zip1 / zip2
 * of the two 16-byte loads, 64 bits at a time), and 16 smmla for the 16 pairs' exact int32 block sums.
 *
 * The bits of decoding (arith_order.h): each (row, token) lane is acc = fma((float)isum, d_w * d_x, acc) over the
 * blocks in order, isum the exact int32 dot product of the block's codes (Q4_0: of the nibbles, minus 8 * sum(x's
 * codes)), whatever order smmla adds its products in; d_w * d_x one fp32 product, as the dotprod kernel's lanes and
 * the scalar fmaf take it. A tile's rows and tokens past the matrix's end repeat its last row or token (their lanes
 * computed and dropped), so a lane never depends on its neighbours. */
#include "util/cpu_features.h"

#if TG_HAVE_I8MM

#include <arm_neon.h>
#include <string.h>

#include "kernels/neon.h"

#define I8MM_INLINE static inline __attribute__((always_inline))

/* Two weight blocks' codes (blocks at b0, b1, their scales first) as smmla's left operands: c[k] holds 8 elements of
 * each of the two rows, the first row's in bytes 0..7; over k = 0..3 every element once, in the order pair_acts
 * takes the activations'. Q8_0: elements 8k .. 8k + 7. Q4_0: bytes j of the two rows hold elements j (low nibble)
 * and j + 16 (high): c[0] elements 0..7, c[1] 8..15, c[2] 16..23, c[3] 24..31. */
I8MM_INLINE void pair_codes(tg_dtype type, const uint8_t *b0, const uint8_t *b1, int8x16_t c[4]) {
    if (type == TG_DT_Q8_0) {
        const int64x2_t a0 = vreinterpretq_s64_u8(vld1q_u8(b0 + 2)), a1 = vreinterpretq_s64_u8(vld1q_u8(b1 + 2));
        const int64x2_t h0 = vreinterpretq_s64_u8(vld1q_u8(b0 + 18)), h1 = vreinterpretq_s64_u8(vld1q_u8(b1 + 18));
        c[0] = vreinterpretq_s8_s64(vzip1q_s64(a0, a1));
        c[1] = vreinterpretq_s8_s64(vzip2q_s64(a0, a1));
        c[2] = vreinterpretq_s8_s64(vzip1q_s64(h0, h1));
        c[3] = vreinterpretq_s8_s64(vzip2q_s64(h0, h1));
    } else {
        const uint64x2_t v0 = vreinterpretq_u64_u8(vld1q_u8(b0 + 2)), v1 = vreinterpretq_u64_u8(vld1q_u8(b1 + 2));
        const uint8x16_t lo = vreinterpretq_u8_u64(vzip1q_u64(v0, v1)), hi = vreinterpretq_u8_u64(vzip2q_u64(v0, v1));
        const uint8x16_t m = vdupq_n_u8(0x0f);
        c[0] = vreinterpretq_s8_u8(vandq_u8(lo, m));
        c[1] = vreinterpretq_s8_u8(vandq_u8(hi, m));
        c[2] = vreinterpretq_s8_u8(vshrq_n_u8(lo, 4));
        c[3] = vreinterpretq_s8_u8(vshrq_n_u8(hi, 4));
    }
}

/* Two tokens' codes of one block (q0, q1: 32 each) as smmla's right operands: c[k] = elements 8k .. 8k + 7 of the
 * first token, then of the second. */
I8MM_INLINE void pair_acts(const int8_t *q0, const int8_t *q1, int8x16_t c[4]) {
    const int64x2_t a0 = vreinterpretq_s64_s8(vld1q_s8(q0)), a1 = vreinterpretq_s64_s8(vld1q_s8(q1));
    const int64x2_t h0 = vreinterpretq_s64_s8(vld1q_s8(q0 + 16)), h1 = vreinterpretq_s64_s8(vld1q_s8(q1 + 16));
    c[0] = vreinterpretq_s8_s64(vzip1q_s64(a0, a1));
    c[1] = vreinterpretq_s8_s64(vzip2q_s64(a0, a1));
    c[2] = vreinterpretq_s8_s64(vzip1q_s64(h0, h1));
    c[3] = vreinterpretq_s8_s64(vzip2q_s64(h0, h1));
}

/* Rows wr[0..3] (nb blocks each) against tokens xt[0 .. 2 NQ - 1] (NQ = 1 or 2 token pairs; nb blocks each):
 * out[t][r] = row r . token t. Lanes of an accumulator acc[p][q] (row pair p, token pair q), smmla's 2x2 tile row by
 * row: (2p, 2q), (2p, 2q + 1), (2p + 1, 2q), (2p + 1, 2q + 1). */
I8MM_INLINE void tile(tg_dtype type, const uint8_t *const wr[4], const tg_q8x_block *const xt[4], int64_t nb,
                      float out[4][4], const int NQ) {
    const size_t bw = type == TG_DT_Q8_0 ? sizeof(tg_block_q8_0) : sizeof(tg_block_q4_0);
    float32x4_t acc[2][2];
    for (int p = 0; p < 2; p++)
        for (int q = 0; q < NQ; q++) acc[p][q] = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const size_t o = (size_t)b * bw;
        int8x16_t wc[2][4], xc[2][4];
        pair_codes(type, wr[0] + o, wr[1] + o, wc[0]);
        pair_codes(type, wr[2] + o, wr[3] + o, wc[1]);
        uint16_t h[4];
        for (int r = 0; r < 4; r++) memcpy(&h[r], wr[r] + o, 2);
        const float32x4_t dw = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(h)));
        const float32x4_t dwp[2] = {vzip1q_f32(dw, dw), vzip2q_f32(dw, dw)}; /* d_w of rows 2p, 2p, 2p+1, 2p+1 */
        for (int q = 0; q < NQ; q++) {
            const tg_q8x_block *x0 = &xt[2 * q][b], *x1 = &xt[2 * q + 1][b];
            pair_acts(x0->q, x1->q, xc[q]);
            const float32x2_t d2 = vld1_lane_f32(&x1->d, vld1_dup_f32(&x0->d), 1);
            const float32x4_t dxq = vcombine_f32(d2, d2); /* d_x of tokens 2q, 2q+1, 2q, 2q+1 */
            int32x4_t offq = vdupq_n_s32(0);
            if (type != TG_DT_Q8_0) {
                const int32x2_t s2 = vshl_n_s32(vld1_lane_s32(&x1->sum, vld1_dup_s32(&x0->sum), 1), 3);
                offq = vcombine_s32(s2, s2); /* 8 sum(x's codes) of tokens 2q, 2q+1, 2q, 2q+1 */
            }
            for (int p = 0; p < 2; p++) {
                int32x4_t s = vdupq_n_s32(0);
                for (int k = 0; k < 4; k++) s = vmmlaq_s32(s, wc[p][k], xc[q][k]);
                if (type != TG_DT_Q8_0) s = vsubq_s32(s, offq);
                acc[p][q] = vfmaq_f32(acc[p][q], vcvtq_f32_s32(s), vmulq_f32(dwp[p], dxq));
            }
        }
    }
    for (int q = 0; q < NQ; q++) { /* token 2q: lanes 0 and 2 of both row pairs; token 2q + 1: lanes 1 and 3 */
        vst1q_f32(out[2 * q], vuzp1q_f32(acc[0][q], acc[1][q]));
        vst1q_f32(out[2 * q + 1], vuzp2q_f32(acc[0][q], acc[1][q]));
    }
}

/* y[t * ldy + r] = row r . token t for r < nr, t < n (token t's blocks at xq + t * nb): four rows at a time, each
 * swept over the tokens four at a time (two where one or two are left). */
I8MM_INLINE void gemm(tg_dtype type, const uint8_t *w, size_t ws, int64_t nr, const tg_q8x_block *xq, int64_t nb,
                      int64_t n, float *y, size_t ldy) {
    for (int64_t r = 0; r < nr; r += 4) {
        const int mr = nr - r < 4 ? (int)(nr - r) : 4;
        const uint8_t *wr[4];
        for (int i = 0; i < 4; i++) wr[i] = w + (size_t)(r + (i < mr ? i : mr - 1)) * ws;
        for (int64_t t = 0; t < n; t += 4) {
            const int mt = n - t < 4 ? (int)(n - t) : 4;
            const tg_q8x_block *xt[4];
            for (int j = 0; j < 4; j++) xt[j] = xq + (size_t)(t + (j < mt ? j : mt - 1)) * (size_t)nb;
            float out[4][4];
            if (mt <= 2) tile(type, wr, xt, nb, out, 1);
            else tile(type, wr, xt, nb, out, 2);
            for (int j = 0; j < mt; j++)
                for (int i = 0; i < mr; i++) y[(size_t)(t + j) * ldy + (size_t)(r + i)] = out[j][i];
        }
    }
}

void tg_i8mm_gemm_q8_0(const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8x_block *xq, int64_t nb, int64_t n,
                       float *y, size_t ldy) {
    gemm(TG_DT_Q8_0, w, w_stride, nr, xq, nb, n, y, ldy);
}

void tg_i8mm_gemm_q4_0(const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8x_block *xq, int64_t nb, int64_t n,
                       float *y, size_t ldy) {
    gemm(TG_DT_Q4_0, w, w_stride, nr, xq, nb, n, y, ldy);
}

#endif
