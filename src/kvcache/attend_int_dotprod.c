/* attend_int_dotprod.c — attention over tiled KIVI codes in the integer domain on aarch64 with ARMv8.2 dotprod (the
 * Makefile compiles this file with it): the kernels of attend_kernels.h's tg_attn_int_* contracts, the bits of
 * attend_int_avx2.c (the x86 twin) for finite inputs. Four adjacent bytes of a tile are one 32-bit lane (kivi.h), and
 * sdot / udot sum four byte products per lane, as vpdpbusd does: keys' lanes are rows, values' lanes are channels.
 *
 * Arithmetic, step for step the x86 one (attend_int_avx2.c's header and attend_int_inline.h): the folded query
 * qf = q * scale quantised to q8 = round-half-even(qf * (Q / max|qf|)), dq = max|qf| * (1 / Q), bias = q . zero
 * as an eight-lane fma chain summed ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)); score = fma((float)isum, dq,
 * bias). A value run's weights w = p * scale quantised the same way against W, o += fma((float)isum, dw, zs). The
 * integer sums are exact, so their grouping never matters. int8 codes (0..255) are unsigned: against the query's
 * signed high byte (q8 = 128 hi + lo) sdot takes u - 128 and the sum is corrected by 128 * sum(hi), exactly;
 * every other product is of two unsigned bytes (udot) or of codes below 16 (sdot).
 *
 * One head and eight rows (keys) or four channels (values) at a time, a tile after another, with no instances per
 * head dim: these kernels are written for their bits first. Compiled without dotprod, the file holds nothing. */
#include "kvcache/attend_kernels.h"

#if TG_HAVE_DOTPROD

#include <arm_neon.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "util/half.h"

#define INLINE static inline __attribute__((always_inline))

/* attend_int_inline.h's levels (that header is x86-only): the same numbers, or the bits differ (test_attend_int's
 * fingerprint of the x86 results fails). */
#define KEY_Q8 8191
#define KEY_Q 127
#define VAL_W8 16383
#define VAL_W 255
#define RUN 32

typedef struct {
    float32x4_t lo, hi; /* lanes 0-3, 4-7 */
} f8;

/* maxps(a, b): a > b ? a : b (b where either is NaN), lane by lane. */
INLINE float32x4_t max_ps(float32x4_t a, float32x4_t b) { return vbslq_f32(vcgtq_f32(a, b), a, b); }
INLINE float max_s(float a, float b) { return a > b ? a : b; }

/* The x86 kernels' byte packing (pack_bytes): int32 to int8 through int16 with signed saturation (packs), and to
 * uint8 through uint16 then int16 read back as signed (packus_epi32, then packus_epi16). */
INLINE int8_t packs(int32_t x) { return (int8_t)(x < -128 ? -128 : x > 127 ? 127 : x); }
INLINE uint8_t packus(int32_t x) {
    const int32_t u = x < 0 ? 0 : x > 65535 ? 65535 : x; /* read back as int16: above 32767 is negative, so 0 */
    return (uint8_t)(u > 32767 ? 0 : u > 255 ? 255 : u);
}

/* The x86 kernels' hmax8 and hsum8, in their orders. */
INLINE float hmax8(f8 v) {
    const float32x4_t m = max_ps(v.lo, v.hi);
    return max_s(max_s(vgetq_lane_f32(m, 0), vgetq_lane_f32(m, 2)), max_s(vgetq_lane_f32(m, 1), vgetq_lane_f32(m, 3)));
}
INLINE float hsum8(f8 v) {
    const float32x4_t h = vaddq_f32(v.lo, v.hi);
    const float32x2_t a = vadd_f32(vget_low_f32(h), vget_high_f32(h));
    return vget_lane_f32(a, 0) + vget_lane_f32(a, 1);
}

INLINE f8 widen8(const uint16_t *h) {
    const uint16x8_t v = vld1q_u16(h);
    return (f8){vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(v))),
                vcvt_f32_f16(vreinterpret_f16_u16(vget_high_u16(v)))};
}

/* Slot s of every byte of x (codes of `bits` bits) as bytes. */
INLINE uint8x16_t slot(const int bits, uint8x16_t x, const int s) {
    if (bits == 8) return x;
    uint8x16_t y = x;
    switch (s * bits) {
    case 2: y = vshrq_n_u8(x, 2); break;
    case 4: y = vshrq_n_u8(x, 4); break;
    case 6: y = vshrq_n_u8(x, 6); break;
    default: break;
    }
    return vandq_u8(y, vdupq_n_u8(bits == 4 ? 0x0f : 0x03));
}

/* ---- keys ------------------------------------------------------------------------------------------------------ */

void tg_attn_int_prepare_keys(const float *qh, int gq, int64_t D, const uint16_t *gscale, const uint16_t *gzero,
                              int bits, tg_attn_int_queries *q) {
    const float levels = bits == 8 ? (float)KEY_Q8 : (float)KEY_Q, step = 1.0f / levels;
    const int64_t n8 = D / 8;
    f8 sv[TG_ATTN_INT_MAX_D / 8], zv[TG_ATTN_INT_MAX_D / 8], qf[TG_ATTN_INT_MAX_D / 8];
    for (int64_t k = 0; k < n8; k++) sv[k] = widen8(gscale + 8 * k), zv[k] = widen8(gzero + 8 * k);
    for (int j = 0; j < gq; j++) {
        const float *x = qh + (int64_t)j * D;
        f8 m = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}, z = m;
        for (int64_t k = 0; k < n8; k++) { /* the fold: qf = q * scale, bias = q . zero */
            const float32x4_t a = vld1q_f32(x + 8 * k), b = vld1q_f32(x + 8 * k + 4);
            qf[k].lo = vmulq_f32(a, sv[k].lo), qf[k].hi = vmulq_f32(b, sv[k].hi);
            z.lo = vfmaq_f32(z.lo, a, zv[k].lo), z.hi = vfmaq_f32(z.hi, b, zv[k].hi);
            m.lo = max_ps(m.lo, vabsq_f32(qf[k].lo)), m.hi = max_ps(m.hi, vabsq_f32(qf[k].hi));
        }
        q->bias[j] = hsum8(z);
        const float amax = hmax8(m);
        const float inv = amax > 0.0f && amax < INFINITY ? levels / amax : 0.0f;
        q->dq[j] = amax * step;
        int8_t *lo = (int8_t *)(void *)(q->lo + (int64_t)j * (D / 4));
        int8_t *hi = (int8_t *)(void *)(q->hi + (int64_t)j * (D / 4));
        for (int64_t k = 0; k < n8; k++)
            for (int h = 0; h < 2; h++) {
                const int32x4_t v = vcvtnq_s32_f32(vmulq_n_f32(h ? qf[k].hi : qf[k].lo, inv));
                int32_t w[4];
                vst1q_s32(w, v);
                for (int i = 0; i < 4; i++) {
                    const int64_t c = 8 * k + 4 * h + i;
                    if (bits == 8) { /* q = 128 hi + lo, lo in [0, 127], hi in [-64, 63] */
                        lo[c] = (int8_t)(w[i] & 127);
                        hi[c] = packs(w[i] >> 7);
                    } else {
                        lo[c] = packs(w[i]);
                    }
                }
            }
    }
}

/* Head j's scores of tile rows [rb, rb + 8), stored for the rows of [t0, t0 + count). */
INLINE void scores_block(const int bits, const tg_attn_tile *t, int64_t rb, const int32_t *q_lo, const int32_t *q_hi,
                         float dq, float bias, int32_t hsum, int64_t D, float *sc) {
    const int cpb = 8 / bits;
    const int64_t nchunk = D / (4 * cpb);
    int32x4_t acc[2] = {vdupq_n_s32(0), vdupq_n_s32(0)}, acch[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
    uint32x4_t accu[2] = {vdupq_n_u32(0), vdupq_n_u32(0)};
    for (int64_t c = 0; c < nchunk; c++) {
        const uint8_t *x = t->tile + (c * t->G + rb) * 4;
        const uint8x16_t xv[2] = {vld1q_u8(x), vld1q_u8(x + 16)};
        for (int s = 0; s < cpb; s++) {
            const int64_t w = c * cpb + s;
            for (int b = 0; b < 2; b++) {
                if (bits == 8) {
                    accu[b] = vdotq_u32(accu[b], xv[b], vreinterpretq_u8_s32(vdupq_n_s32(q_lo[w])));
                    acch[b] = vdotq_s32(acch[b], vreinterpretq_s8_u8(veorq_u8(xv[b], vdupq_n_u8(0x80))),
                                        vreinterpretq_s8_s32(vdupq_n_s32(q_hi[w])));
                } else {
                    acc[b] = vdotq_s32(acc[b], vreinterpretq_s8_u8(slot(bits, xv[b], s)),
                                       vreinterpretq_s8_s32(vdupq_n_s32(q_lo[w])));
                }
            }
        }
    }
    float out[8];
    for (int b = 0; b < 2; b++) {
        int32x4_t isum = acc[b];
        if (bits == 8) /* 128 * (u . hi) + u . lo, u . hi = (u - 128) . hi + 128 sum(hi) */
            isum = vaddq_s32(vshlq_n_s32(vaddq_s32(acch[b], vdupq_n_s32(128 * hsum)), 7),
                             vreinterpretq_s32_u32(accu[b]));
        vst1q_f32(out + 4 * b, vfmaq_n_f32(vdupq_n_f32(bias), vcvtq_f32_s32(isum), dq));
    }
    const int64_t a = t->t0 > rb ? t->t0 - rb : 0, e = t->t0 + t->count - rb < 8 ? t->t0 + t->count - rb : 8;
    for (int64_t r = a; r < e; r++) sc[rb - t->t0 + r] = out[r];
}

void tg_attn_int_scores(const tg_attn_tile *t, const tg_attn_int_queries *q, int gq, int64_t D, float *sc, int64_t ld,
                        bool vnni) {
    (void)vnni; /* one form: the same bits */
    const int64_t qw = D / 4, end = t->t0 + t->count;
    for (int j = 0; j < gq; j++) {
        int32_t hsum = 0; /* sum of the query's high bytes (int8 codes) */
        for (int64_t c = 0; t->bits == 8 && c < D; c++) hsum += ((const int8_t *)(const void *)(q->hi + j * qw))[c];
        for (int64_t rb = t->t0 / 8 * 8; rb < end; rb += 8)
            scores_block(t->bits, t, rb, q->lo + j * qw, q->hi + j * qw, q->dq[j], q->bias[j], hsum, D,
                         sc + (int64_t)j * ld);
    }
}

/* Tile j of a segment (rows of tile j's own, from its first in the segment) and the segment rows before it. */
INLINE tg_attn_tile tile_of(const tg_attn_tile *t, int64_t j, int64_t *before) {
    const int64_t first = t->G - t->t0;
    *before = j == 0 ? 0 : first + (j - 1) * t->G;
    const int64_t t0 = j == 0 ? t->t0 : 0, left = t->count - *before, room = t->G - t0;
    return (tg_attn_tile){t->tile + (size_t)j * t->next, t->bits, t->G, t0, left < room ? left : room, 0};
}

INLINE int64_t tiles_of(const tg_attn_tile *t) {
    return t->count <= t->G - t->t0 ? 1 : 1 + (t->count - (t->G - t->t0) + t->G - 1) / t->G;
}

void tg_attn_int_keys(const tg_attn_tile *t, const float *qh, int gq, int64_t D, const uint16_t *gscale,
                      const uint16_t *gzero, size_t gstride, int32_t *scratch, float *sc, int64_t ld, bool vnni) {
    float *dq = (float *)(void *)(scratch + (int64_t)gq * (D / 2));
    tg_attn_int_queries q = {scratch, scratch + (int64_t)gq * (D / 4), dq, dq + gq};
    const int64_t n = tiles_of(t);
    for (int64_t j = 0; j < n; j++) {
        int64_t before;
        const tg_attn_tile tj = tile_of(t, j, &before);
        if (j + 1 < n) tg_attn_int_prefetch_tile(t->tile + (size_t)(j + 1) * t->next, t->bits, t->G, D);
        tg_attn_int_prepare_keys(qh, gq, D, gscale + (size_t)j * gstride, gzero + (size_t)j * gstride, t->bits, &q);
        tg_attn_int_scores(&tj, &q, gq, D, sc + before, ld, vnni);
    }
}

/* ---- values ---------------------------------------------------------------------------------------------------- */

/* One run's weights: rows [R, R + 32) of a tile, those outside [t0, t0 + count) weighing nothing. lo / hi [gq][8]:
 * the byte operands of each 4-row quad (head j's at j * 8); dw, zs [gq]. */
typedef struct {
    int32_t lo[8], hi[8];
    float dw, zs;
} run_head;

/* Head j's weights of run R of tile t (p: segment rows' weights; tscale / tzero: segment row 0's scale and zero). */
INLINE void prepare_run_head(const int bits, const tg_attn_tile *t, int64_t R, const float *pj,
                             const uint16_t *tscale, const uint16_t *tzero, run_head *rw) {
    const float levels = bits == 8 ? (float)VAL_W8 : (float)VAL_W, step = 1.0f / levels;
    const int64_t end = t->t0 + t->count, last = R + RUN < end ? R + RUN : end, nv = ((last - R + 3) / 4 + 1) / 2;
    f8 w[RUN / 8], m = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}, zacc = m;
    for (int64_t v = 0; v < nv; v++) {
        const int64_t r0 = R + 8 * v - t->t0; /* segment row of lane 0 (the tile's own rows: scales in bounds) */
        float pv[8];
        for (int l = 0; l < 8; l++) pv[l] = r0 + l >= 0 && r0 + l < t->count ? pj[r0 + l] : 0.0f;
        const f8 sv = widen8(tscale + r0), zv = widen8(tzero + r0);
        const float32x4_t a = vld1q_f32(pv), b = vld1q_f32(pv + 4);
        w[v].lo = vmulq_f32(a, sv.lo), w[v].hi = vmulq_f32(b, sv.hi);
        zacc.lo = vfmaq_f32(zacc.lo, a, zv.lo), zacc.hi = vfmaq_f32(zacc.hi, b, zv.hi);
        m.lo = max_ps(m.lo, w[v].lo), m.hi = max_ps(m.hi, w[v].hi);
    }
    const float amax = hmax8(m);
    const float inv = amax > 0.0f && amax < INFINITY ? levels / amax : 0.0f;
    rw->dw = amax * step;
    rw->zs = hsum8(zacc);
    uint8_t lo[RUN], hi[RUN];
    for (int64_t v = 0; v < RUN / 8; v++)
        for (int h = 0; h < 2; h++) {
            int32_t q[4] = {0, 0, 0, 0};
            if (v < nv) vst1q_s32(q, vcvtnq_s32_f32(vmulq_n_f32(h ? w[v].hi : w[v].lo, inv)));
            for (int i = 0; i < 4; i++) {
                const int64_t r = 8 * v + 4 * h + i;
                if (bits == 8) { /* w8 = 128 hi + lo, both in [0, 127] (a logical shift, as vpsrld) */
                    lo[r] = packus((int32_t)((uint32_t)q[i] & 127u));
                    hi[r] = packus((int32_t)((uint32_t)q[i] >> 7));
                } else {
                    lo[r] = packus(q[i]);
                    hi[r] = 0;
                }
            }
        }
    memcpy(rw->lo, lo, sizeof lo);
    memcpy(rw->hi, hi, sizeof hi);
}

/* o[D] += run R's value sums for one head (rows quads i < n4). */
INLINE void values_run_head(const int bits, const tg_attn_tile *t, int64_t R, int64_t n4, const run_head *rw, int64_t D,
                            float *o) {
    const int cpb = 8 / bits;
    const int64_t lanes = D / cpb;
    for (int64_t l0 = 0; l0 < lanes; l0 += 4) {
        uint32x4_t acc[4] = {vdupq_n_u32(0), vdupq_n_u32(0), vdupq_n_u32(0), vdupq_n_u32(0)};
        for (int64_t i = 0; i < n4; i++) {
            const uint8x16_t x = vld1q_u8(t->tile + ((R / 4 + i) * lanes + l0) * 4);
            const uint8x16_t wl = vreinterpretq_u8_s32(vdupq_n_s32(rw->lo[i]));
            if (bits == 8) {
                acc[0] = vdotq_u32(acc[0], x, wl);
                acc[1] = vdotq_u32(acc[1], x, vreinterpretq_u8_s32(vdupq_n_s32(rw->hi[i])));
                continue;
            }
            for (int s = 0; s < cpb; s++) acc[s] = vdotq_u32(acc[s], slot(bits, x, s), wl);
        }
        for (int s = 0; s < cpb; s++) {
            const int32x4_t isum = bits == 8 ? vaddq_s32(vshlq_n_s32(vreinterpretq_s32_u32(acc[1]), 7),
                                                         vreinterpretq_s32_u32(acc[0]))
                                             : vreinterpretq_s32_u32(acc[s]);
            float *dst = o + l0 + s * lanes;
            const float32x4_t add = vfmaq_n_f32(vdupq_n_f32(rw->zs), vcvtq_f32_s32(isum), rw->dw);
            vst1q_f32(dst, vaddq_f32(vld1q_f32(dst), add));
        }
    }
}

void tg_attn_int_values(const tg_attn_tile *t, const float *p, int64_t ld, int gq, int64_t D, const uint16_t *tscale,
                        const uint16_t *tzero, size_t tstride, float *o, int32_t *scratch, bool vnni) {
    (void)scratch, (void)vnni; /* one form: the same bits */
    const int64_t n = tiles_of(t);
    for (int64_t j = 0; j < n; j++) {
        int64_t before;
        const tg_attn_tile tj = tile_of(t, j, &before);
        if (j + 1 < n) tg_attn_int_prefetch_tile(t->tile + (size_t)(j + 1) * t->next, t->bits, t->G, D);
        const size_t at = (size_t)j * tstride + (size_t)tj.t0 - (size_t)t->t0; /* segment row 0 of tile j */
        const int64_t end = tj.t0 + tj.count;
        for (int64_t R = tj.t0 / 8 * 8; R < end; R += RUN) {
            const int64_t last = R + RUN < end ? R + RUN : end, n4 = (last - R + 3) / 4;
            for (int h = 0; h < gq; h++) {
                run_head rw;
                prepare_run_head(t->bits, &tj, R, p + (int64_t)h * ld + before, tscale + at, tzero + at, &rw);
                values_run_head(t->bits, &tj, R, n4, &rw, D, o + (int64_t)h * D);
            }
        }
    }
}

/* ---- prefetches ------------------------------------------------------------------------------------------------ */

static void prefetch_bytes(const void *p, size_t n) {
    const uintptr_t end = (uintptr_t)p + n;
    for (uintptr_t a = (uintptr_t)p & ~(uintptr_t)63; a < end; a += 64) __builtin_prefetch((const void *)a, 0, 2);
}

void tg_attn_int_prefetch_tile(const uint8_t *tile, int bits, int64_t G, int64_t D) {
    prefetch_bytes(tile, (size_t)G * (size_t)D * (size_t)bits / 8);
}

void tg_attn_int_prefetch_scales(const uint16_t *scale, const uint16_t *zero, int64_t n) {
    prefetch_bytes(scale, (size_t)n * sizeof *scale);
    prefetch_bytes(zero, (size_t)n * sizeof *zero);
}

#endif
