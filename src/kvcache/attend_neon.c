/* attend_neon.c — the aarch64 Advanced SIMD block kernels of attention (attend_kernels.h's fold / scores / values /
 * widen contracts): scores and value sums of up to eight cache rows for the query heads that share their kv-head,
 * the rows read as stored (fp32 in place, fp16 / bf16 widened in registers, KIVI codes as plain integers with the
 * grid folded into the queries or the row's scale into its weight, as attend_avx2.c does).
 *
 * The bits of attend_avx2.c (the x86 twin): a score is eight lanes (two 4-lane registers) of fused multiply-adds in
 * column order, summed ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)), plus the folded bias; a value sum is, per
 * output element, o then one fused multiply-add per row in row order, plus the folded zeros; the fold's bias an
 * eight-lane fma chain summed ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)). No run kernels (runs() is false:
 * attend.c takes the block kernels). Compiled on another architecture, the file holds nothing. */
#include "kvcache/attend_kernels.h"

#if TG_HAVE_NEON

#include <arm_neon.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

typedef struct {
    float32x4_t lo, hi; /* columns k .. k + 3, k + 4 .. k + 7 */
} f8;

INLINE f8 f8_zero(void) { return (f8){vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}; }
INLINE f8 f8_load(const float *p) { return (f8){vld1q_f32(p), vld1q_f32(p + 4)}; }
INLINE void f8_store(float *p, f8 v) { vst1q_f32(p, v.lo), vst1q_f32(p + 4, v.hi); }
/* acc + a * b, fused, lane by lane */
INLINE f8 f8_fma(f8 acc, f8 a, f8 b) { return (f8){vfmaq_f32(acc.lo, a.lo, b.lo), vfmaq_f32(acc.hi, a.hi, b.hi)}; }
INLINE f8 f8_dup(float x) { return (f8){vdupq_n_f32(x), vdupq_n_f32(x)}; }

/* Eight codes starting at element k (a multiple of 8) of a packed row, as floats. */
INLINE f8 codes8(int bits, const uint8_t *row, int64_t k) {
    uint32x4_t a, b;
    if (bits == 8) {
        const uint16x8_t h = vmovl_u8(vld1_u8(row + k));
        a = vmovl_u16(vget_low_u16(h)), b = vmovl_u16(vget_high_u16(h));
    } else if (bits == 4) {
        uint32_t w;
        memcpy(&w, row + k / 2, 4);
        const int32_t sa[4] = {0, -4, -8, -12}, sb[4] = {-16, -20, -24, -28};
        a = vandq_u32(vshlq_u32(vdupq_n_u32(w), vld1q_s32(sa)), vdupq_n_u32(0xf));
        b = vandq_u32(vshlq_u32(vdupq_n_u32(w), vld1q_s32(sb)), vdupq_n_u32(0xf));
    } else {
        uint16_t w;
        memcpy(&w, row + k / 4, 2);
        const int32_t sa[4] = {0, -2, -4, -6}, sb[4] = {-8, -10, -12, -14};
        a = vandq_u32(vshlq_u32(vdupq_n_u32(w), vld1q_s32(sa)), vdupq_n_u32(0x3));
        b = vandq_u32(vshlq_u32(vdupq_n_u32(w), vld1q_s32(sb)), vdupq_n_u32(0x3));
    }
    return (f8){vcvtq_f32_u32(a), vcvtq_f32_u32(b)};
}

/* Columns k..k+7 of row r of the block as fp32 (codes as themselves). */
INLINE f8 ld8(const tg_attn_block *b, int kind, int bits, int r, int64_t k) {
    const uint8_t *row = b->rows[r];
    switch (kind) {
    case TG_SEG_F32:
        return (f8){vreinterpretq_f32_u8(vld1q_u8(row + 4 * k)), vreinterpretq_f32_u8(vld1q_u8(row + 4 * k + 16))};
    case TG_SEG_F16: {
        const uint16x8_t h = vreinterpretq_u16_u8(vld1q_u8(row + 2 * k));
        return (f8){vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(h))),
                    vcvt_f32_f16(vreinterpret_f16_u16(vget_high_u16(h)))};
    }
    case TG_SEG_BF16: {
        const uint16x8_t h = vreinterpretq_u16_u8(vld1q_u8(row + 2 * k));
        return (f8){vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)),
                    vreinterpretq_f32_u32(vshll_n_u16(vget_high_u16(h), 16))};
    }
    default: return codes8(bits, row, k);
    }
}

/* The eight lanes' sum in the canonical order. */
INLINE float reduce8(f8 a) {
    const float32x4_t p = vpaddq_f32(a.lo, a.hi);
    const float32x4_t q = vpaddq_f32(p, p);
    return vgetq_lane_f32(q, 0) + vgetq_lane_f32(q, 1);
}

/* Scores of the block's rows for NQ query heads q[j * D ..] (j < NQ): sc[j * ld + r] (+ bias[j] for codes). */
INLINE void scores_nq(const tg_attn_block *b, int kind, int bits, const float *q, const float *bias, int64_t D,
                      float *sc, int64_t ld, const int NQ) {
    f8 acc[3][TG_ATTN_BLK];
    for (int j = 0; j < NQ; j++)
        for (int r = 0; r < TG_ATTN_BLK; r++) acc[j][r] = f8_zero();
    for (int64_t k = 0; k < D; k += 8) {
        f8 qv[3];
        for (int j = 0; j < NQ; j++) qv[j] = f8_load(q + (int64_t)j * D + k);
        for (int r = 0; r < b->nr; r++) {
            const f8 kv = ld8(b, kind, bits, r, k);
            for (int j = 0; j < NQ; j++) acc[j][r] = f8_fma(acc[j][r], kv, qv[j]);
        }
    }
    for (int j = 0; j < NQ; j++)
        for (int r = 0; r < b->nr; r++) {
            float s = reduce8(acc[j][r]);
            if (bias) s += bias[j];
            sc[(int64_t)j * ld + r] = s;
        }
}

/* o_j[c..c+7] += sum_r p[j * ld + r] row_r[c..c+7] (+ z[j]) for NQ query heads. */
INLINE void values_nq(const tg_attn_block *b, int kind, int bits, const float *p, int64_t ld, const float *z, int64_t c,
                      int64_t D, float *o, const int NQ) {
    f8 acc[4];
    for (int j = 0; j < NQ; j++) acc[j] = f8_load(o + (int64_t)j * D + c);
    for (int r = 0; r < b->nr; r++) {
        const f8 v = ld8(b, kind, bits, r, c);
        for (int j = 0; j < NQ; j++) acc[j] = f8_fma(acc[j], f8_dup(p[(int64_t)j * ld + r]), v);
    }
    for (int j = 0; j < NQ; j++) {
        if (z) acc[j] = (f8){vaddq_f32(acc[j].lo, vdupq_n_f32(z[j])), vaddq_f32(acc[j].hi, vdupq_n_f32(z[j]))};
        f8_store(o + (int64_t)j * D + c, acc[j]);
    }
}

INLINE void scores_kind(const tg_attn_block *b, int kind, int bits, const float *qh, int gq, int64_t D, float *sc,
                        int64_t ld) {
    for (int j = 0; j < gq; j += 3) {
        const float *bias = kind == TG_SEG_CODES && b->bias ? b->bias + j : NULL;
        const float *q = qh + (int64_t)j * D;
        float *s = sc + (int64_t)j * ld;
        switch (gq - j < 3 ? gq - j : 3) {
        case 3: scores_nq(b, kind, bits, q, bias, D, s, ld, 3); break;
        case 2: scores_nq(b, kind, bits, q, bias, D, s, ld, 2); break;
        default: scores_nq(b, kind, bits, q, bias, D, s, ld, 1); break;
        }
    }
}

INLINE void values_kind(const tg_attn_block *b, int kind, int bits, const float *p, int64_t ld, int gq, int64_t D,
                        float *o) {
    for (int j = 0; j < gq; j += 4) {
        const int nq = gq - j < 4 ? gq - j : 4;
        const float *pj = p + (int64_t)j * ld;
        int64_t pld = ld;
        float *oj = o + (int64_t)j * D;
        /* codes: each row's scale folded into its weights and its zero into one constant per head (attend_avx2.c) */
        float pw[4][TG_ATTN_BLK], zs[4];
        const float *z = NULL;
        if (kind == TG_SEG_CODES) {
            for (int q = 0; q < nq; q++) {
                zs[q] = 0.0f;
                for (int r = 0; r < b->nr; r++) {
                    pw[q][r] = pj[(int64_t)q * ld + r] * b->tscale[r];
                    zs[q] += pj[(int64_t)q * ld + r] * b->tzero[r];
                }
            }
            pj = &pw[0][0];
            pld = TG_ATTN_BLK;
            z = zs;
        }
        for (int64_t c = 0; c < D; c += 8) {
            switch (nq) {
            case 4: values_nq(b, kind, bits, pj, pld, z, c, D, oj, 4); break;
            case 3: values_nq(b, kind, bits, pj, pld, z, c, D, oj, 3); break;
            case 2: values_nq(b, kind, bits, pj, pld, z, c, D, oj, 2); break;
            default: values_nq(b, kind, bits, pj, pld, z, c, D, oj, 1); break;
            }
        }
    }
}

/* KERNEL(b, kind, bits, args...) with b's row kind and code bits as compile-time constants. */
#define DISPATCH(KERNEL, b, ...)                                                                                      \
    do {                                                                                                              \
        switch ((b)->kind) {                                                                                          \
        case TG_SEG_F32: KERNEL(b, TG_SEG_F32, 0, __VA_ARGS__); break;                                                \
        case TG_SEG_F16: KERNEL(b, TG_SEG_F16, 0, __VA_ARGS__); break;                                                \
        case TG_SEG_BF16: KERNEL(b, TG_SEG_BF16, 0, __VA_ARGS__); break;                                              \
        default:                                                                                                      \
            if ((b)->bits == 8) KERNEL(b, TG_SEG_CODES, 8, __VA_ARGS__);                                              \
            else if ((b)->bits == 4) KERNEL(b, TG_SEG_CODES, 4, __VA_ARGS__);                                         \
            else KERNEL(b, TG_SEG_CODES, 2, __VA_ARGS__);                                                             \
            break;                                                                                                    \
        }                                                                                                             \
    } while (0)

void tg_attn_neon_scores(const tg_attn_block *b, const float *qh, int gq, int64_t D, float *sc, int64_t ld) {
    DISPATCH(scores_kind, b, qh, gq, D, sc, ld);
}

void tg_attn_neon_values(const tg_attn_block *b, const float *p, int64_t ld, int gq, int64_t D, float *o) {
    DISPATCH(values_kind, b, p, ld, gq, D, o);
}

void tg_attn_neon_widen(const tg_attn_block *b, int r, int64_t D, float *out) {
    for (int64_t k = 0; k < D; k += 8) {
        f8 v = ld8(b, b->kind, b->bits, r, k);
        if (b->kind == TG_SEG_CODES) {
            if (b->grid) v = f8_fma(f8_load(b->grid + D + k), v, f8_load(b->grid + k));
            else v = f8_fma(f8_dup(b->tzero[r]), v, f8_dup(b->tscale[r]));
        }
        f8_store(out + k, v);
    }
}

void tg_attn_neon_fold(const float *qh, int gq, int64_t D, const float *grid, float *qf, float *bias) {
    for (int i = 0; i < gq; i++) {
        const float *q = qh + (int64_t)i * D;
        f8 z = f8_zero();
        for (int64_t k = 0; k < D; k += 8) {
            const f8 qv = f8_load(q + k), s = f8_load(grid + k);
            f8_store(qf + (int64_t)i * D + k, (f8){vmulq_f32(qv.lo, s.lo), vmulq_f32(qv.hi, s.hi)});
            z = f8_fma(z, qv, f8_load(grid + D + k));
        }
        const float32x4_t h = vaddq_f32(z.lo, z.hi); /* v0 + v4, v1 + v5, v2 + v6, v3 + v7 */
        const float32x2_t a = vadd_f32(vget_low_f32(h), vget_high_f32(h));
        bias[i] = vget_lane_f32(a, 0) + vget_lane_f32(a, 1);
    }
}

bool tg_attn_neon_runs(int kind, int64_t D) {
    (void)kind, (void)D;
    return false;
}

#endif
