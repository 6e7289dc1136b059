/* gemv_kquant_avx2.c — decode (GEMV) and prefill (GEMM) kernels for the K-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K
 * against the tg_q8k_block form of the activations (quant.h: one fp32 scale per 256 elements, int8 codes, sums of
 * each 16 codes), and the AVX2 quantiser of that form.
 *
 * Per super-block of a weight row and an activation super-block: the weight codes are unpacked from the block as
 * stored into unsigned bytes (Q3_K / Q6_K biased by +4 / +32 so that they are unsigned), multiplied into the
 * activation's codes with maddubs (u8 x s8, pair sums within int16: at most 2 * 63 * 127), and the pairs multiplied by
 * their sub-block's integer scale and summed with madd (int32) — so each super-block gives an exact int32 sum per
 * lane of sum_sub scale * (codes . x codes). The bias and the mins are the scales (mins) times the activation's
 * 16-element code sums (one madd). Then, in eight lanes, acc = fma(d * dx, (float)isum, acc) (and, with mins,
 * acc = fma(-(dmin * dx), (float)msum, acc)); a row's result is tg_reduce1_ps(acc) over its super-blocks in order.
 *
 * Prefill: a super-block's codes are unpacked once and multiplied into up to four tokens' activations (one
 * accumulator each); decode is the same code for one token, so every (row, token) result has the same bits whether
 * decoded or prefilled, and does not depend on how the rows are split.
 * Error against the exact product: the activation's rounding, |x - dx q| <= dx / 2 per element (dx per 256
 * elements), so |fast - exact| <= sum_j |w_j| * dx(j) / 2 plus fp32 rounding of a few operations per super-block. */
#include "kernels/avx2.h"

#if TG_HAVE_AVX2

#include "kernels/avx2_inline.h"
#include "kernels/ggml_blocks.h"
#include "kernels/kquant_inline.h"

#define KQ_MAX_TOKENS 4 /* tokens per pass of the prefill kernel */

TG_INLINE __m256i bytes(int v) { return _mm256_set1_epi8((char)v); }

#if KQ_GFNI
TG_INLINE __m256i gf_bits(__m256i v, long long m) { return _mm256_gf2p8affine_epi64_epi8(v, _mm256_set1_epi64x(m), 0); }
#endif

/* The high nibble of each byte, as a byte. */
TG_INLINE __m256i hi_nibbles(__m256i q) {
#if KQ_GFNI
    return gf_bits(q, KQ_GF_HI4);
#else
    return _mm256_and_si256(_mm256_srli_epi16(q, 4), bytes(0x0F));
#endif
}

/* (a & m) | b, and a | (b & m). */
TG_INLINE __m256i and_or(__m256i a, __m256i m, __m256i b) {
#if KQ_TERNLOG
    return _mm256_ternarylogic_epi32(a, b, m, 0xEC);
#else
    return _mm256_or_si256(_mm256_and_si256(a, m), b);
#endif
}
TG_INLINE __m256i or_and(__m256i a, __m256i b, __m256i m) {
#if KQ_TERNLOG
    return _mm256_ternarylogic_epi32(a, b, m, 0xF8);
#else
    return _mm256_or_si256(a, _mm256_and_si256(b, m));
#endif
}

/* isum += madd(maddubs(w, x), sc): the 32 products of unsigned weight codes w and signed activation codes x,
 * pairs summed (int16, no saturation for codes below 64) and multiplied by the int16 scales sc, summed to int32. */
TG_INLINE __m256i dot_scaled(__m256i isum, __m256i w, const int8_t *x, __m256i sc) {
#if TG_AVX2_VNNI
    return _mm256_dpwssd_epi32(isum, _mm256_maddubs_epi16(w, ld256(x)), sc);
#else
    return _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(w, ld256(x)), sc));
#endif
}

/* The int16 scale pattern of 32 consecutive elements split into two 16-element groups with scales s0 (elements 0..15,
 * the low 128-bit lane of maddubs' output) and s1 (16..31, the high lane): from a vector whose two lanes both hold
 * eight int16 scales, pick scale 2k for the low lane and 2k + 1 for the high lane (k < 4). */
TG_INLINE __m256i pick16(__m256i sc8x2, int k) {
    const __m256i m = _mm256_setr_epi8((char)(4 * k), (char)(4 * k + 1), (char)(4 * k), (char)(4 * k + 1),
                                       (char)(4 * k), (char)(4 * k + 1), (char)(4 * k), (char)(4 * k + 1),
                                       (char)(4 * k), (char)(4 * k + 1), (char)(4 * k), (char)(4 * k + 1),
                                       (char)(4 * k), (char)(4 * k + 1), (char)(4 * k), (char)(4 * k + 1),
                                       (char)(4 * k + 2), (char)(4 * k + 3), (char)(4 * k + 2), (char)(4 * k + 3),
                                       (char)(4 * k + 2), (char)(4 * k + 3), (char)(4 * k + 2), (char)(4 * k + 3),
                                       (char)(4 * k + 2), (char)(4 * k + 3), (char)(4 * k + 2), (char)(4 * k + 3),
                                       (char)(4 * k + 2), (char)(4 * k + 3), (char)(4 * k + 2), (char)(4 * k + 3));
    return _mm256_shuffle_epi8(sc8x2, m);
}

/* Sixteen int16 scales (int8 or uint8 bytes at p, or already in a 128-bit register) as the two halves the 16-element
 * layouts use: lo = scales 0..7 in both lanes, hi = scales 8..15 in both lanes; all16 = scales 0..15 in order. */
typedef struct {
    __m256i lo, hi, all16;
} scales16;

TG_INLINE scales16 split16(__m256i all16) {
    scales16 s = {_mm256_permute2x128_si256(all16, all16, 0x00), _mm256_permute2x128_si256(all16, all16, 0x11), all16};
    return s;
}

/* acc[t] = fma(d * dx_t, (float)isum[t], acc[t]) for each token. */
TG_INLINE void scale_in(__m256 *acc, const __m256i *isum, float d, const tg_q8k_block *const *x, const int T) {
    for (int t = 0; t < T; t++)
        acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d * x[t]->d), _mm256_cvtepi32_ps(isum[t]), acc[t]);
}

/* acc[t] = fma(-(dmin * dx_t), (float)msum[t], acc[t]): the mins against the 16-code sums, m16 = 16 int16 mins. */
TG_INLINE void mins_out(__m256 *acc, __m256i m16, float dmin, const tg_q8k_block *const *x, const int T) {
    for (int t = 0; t < T; t++) {
        const __m256i ms = _mm256_madd_epi16(ld256(x[t]->bsums), m16);
        acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(-(dmin * x[t]->d)), _mm256_cvtepi32_ps(ms), acc[t]);
    }
}

/* The element order Q2_K, Q3_K and Q6_K share: element 128h + 32s + l (h < 2, s < 4, l < 32) has scale 8h + 2s + l/16.
 * codes[s] = the 32 unsigned codes of elements 128h + 32s + 0..31 for one h. */
TG_INLINE void dot_128(__m256i *isum, const __m256i codes[4], const scales16 *sc, int h,
                       const tg_q8k_block *const *x, const int T) {
    for (int s = 0; s < 4; s++) {
        const __m256i scv = pick16(h ? sc->hi : sc->lo, s);
        for (int t = 0; t < T; t++) isum[t] = dot_scaled(isum[t], codes[s], x[t]->q + 128 * h + 32 * s, scv);
    }
}

/* ---- one super-block of each type against T tokens' activation super-blocks x[t] ---- */

/* Q6_K: ql[128] (p), qh[64] (p + 128), scales[16] int8 (p + 192), d (p + 208); code = low nibble | 2 high bits << 4,
 * value d * sc * (code - 32). */

/* The unsigned 6-bit codes of elements 128h + 32s + 0..31 (s < 4) of a Q6_K super-block at p. */
TG_INLINE void q6_codes(const uint8_t *p, int h, __m256i codes[4]) {
    const __m256i ql0 = ld256(p + 64 * h), ql1 = ld256(p + 64 * h + 32), qh = ld256(p + 128 + 32 * h);
    const __m256i lo4 = bytes(0x0F), hi2 = bytes(0x30);
#if KQ_GFNI
    codes[0] = and_or(ql0, lo4, gf_bits(qh, KQ_GF_B01_45));
    codes[1] = and_or(ql1, lo4, gf_bits(qh, KQ_GF_B23_45));
    codes[2] = or_and(hi_nibbles(ql0), qh, hi2);
    codes[3] = _mm256_or_si256(hi_nibbles(ql1), gf_bits(qh, KQ_GF_B67_45));
#else
    codes[0] = and_or(ql0, lo4, _mm256_and_si256(_mm256_slli_epi16(qh, 4), hi2));
    codes[1] = and_or(ql1, lo4, _mm256_and_si256(_mm256_slli_epi16(qh, 2), hi2));
    codes[2] = or_and(hi_nibbles(ql0), qh, hi2);
    codes[3] = _mm256_or_si256(hi_nibbles(ql1), _mm256_and_si256(_mm256_srli_epi16(qh, 2), hi2));
#endif
}
TG_INLINE void sup_q6_k(const uint8_t *p, const tg_q8k_block *const *x, __m256 *acc, const int T) {
    const scales16 sc = split16(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(p + 192))));
    __m256i isum[KQ_MAX_TOKENS];
    for (int t = 0; t < T; t++) isum[t] = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        __m256i codes[4];
        q6_codes(p, h, codes);
        dot_128(isum, codes, &sc, h, x, T);
    }
    for (int t = 0; t < T; t++) /* minus 32 * sum_g sc_g * bsum_g */
        isum[t] = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(_mm256_madd_epi16(ld256(x[t]->bsums), sc.all16), 5));
    scale_in(acc, isum, f16_at(p + 208), x, T);
}

/* Q3_K: hmask[32] (p), qs[64] (p + 32), scales[12] (p + 96, sixteen 6-bit scales minus 32), d (p + 108); code = 2 low
 * bits | high bit << 2, value d * sc * (code - 4). */
TG_INLINE void sup_q3_k(const uint8_t *p, const tg_q8k_block *const *x, __m256 *acc, const int T) {
    const uint32_t a0 = u32_at(p + 96), a1 = u32_at(p + 100), a2 = u32_at(p + 104);
    const uint32_t lo4 = 0x0F0F0F0Fu, lo2 = 0x03030303u;
    const __m128i raw = _mm_setr_epi32((int)((a0 & lo4) | (a2 & lo2) << 4), (int)((a1 & lo4) | (a2 >> 2 & lo2) << 4),
                                       (int)((a0 >> 4 & lo4) | (a2 >> 4 & lo2) << 4),
                                       (int)((a1 >> 4 & lo4) | (a2 >> 6 & lo2) << 4));
    const scales16 sc = split16(_mm256_cvtepi8_epi16(_mm_sub_epi8(raw, _mm_set1_epi8(32))));
    __m256i isum[KQ_MAX_TOKENS];
    for (int t = 0; t < T; t++) isum[t] = _mm256_setzero_si256();
    __m256i hm = ld256(p); /* bit 4h + s of byte l: the high bit of element 128h + 32s + l */
    for (int h = 0; h < 2; h++) {
        const __m256i q = ld256(p + 32 + 32 * h);
        __m256i codes[4];
        for (int s = 0; s < 4; s++) {
            const __m256i low = _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * s)), bytes(3));
            codes[s] = _mm256_or_si256(low, _mm256_and_si256(_mm256_slli_epi16(hm, 2), bytes(4)));
            hm = _mm256_srli_epi16(hm, 1);
        }
        dot_128(isum, codes, &sc, h, x, T);
    }
    for (int t = 0; t < T; t++) /* minus 4 * sum_g sc_g * bsum_g */
        isum[t] = _mm256_sub_epi32(isum[t], _mm256_slli_epi32(_mm256_madd_epi16(ld256(x[t]->bsums), sc.all16), 2));
    scale_in(acc, isum, f16_at(p + 108), x, T);
}

/* Q2_K: scales[16] (p; low nibble scale, high nibble min), qs[64] (p + 16), d (p + 80), dmin (p + 82); value
 * d * sc * code - dmin * m. */
TG_INLINE void sup_q2_k(const uint8_t *p, const tg_q8k_block *const *x, __m256 *acc, const int T) {
    const __m128i sb = _mm_loadu_si128((const __m128i *)(const void *)p);
    const scales16 sc = split16(_mm256_cvtepu8_epi16(_mm_and_si128(sb, _mm_set1_epi8(0x0F))));
    const __m256i m16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sb, 4), _mm_set1_epi8(0x0F)));
    __m256i isum[KQ_MAX_TOKENS];
    for (int t = 0; t < T; t++) isum[t] = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        const __m256i q = ld256(p + 16 + 32 * h);
        const __m256i codes[4] = {_mm256_and_si256(q, bytes(3)), _mm256_and_si256(_mm256_srli_epi16(q, 2), bytes(3)),
                                  _mm256_and_si256(_mm256_srli_epi16(q, 4), bytes(3)),
                                  _mm256_and_si256(_mm256_srli_epi16(q, 6), bytes(3))};
        dot_128(isum, codes, &sc, h, x, T);
    }
    scale_in(acc, isum, f16_at(p + 80), x, T);
    mins_out(acc, m16, f16_at(p + 82), x, T);
}

/* The eight 6-bit scales and mins of a Q4_K / Q5_K scales[12] field at q (tg_k4_scale_min) as bytes 0..7 (scales)
 * and 8..15 (mins), in vector registers: with the field's words a0, a1, a2, the scales are a0 & 0x3F.. and
 * (a2 & 0x0F..) | (a0 >> 2 & 0x30..), the mins a1 & 0x3F.. and (a2 >> 4 & 0x0F..) | (a1 >> 2 & 0x30..). Reads 16
 * bytes at q (the field and the 4 bytes after it, inside the block). */
TG_INLINE __m128i k4_scales(const uint8_t *q) {
    const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)q);
    const __m128i lo = _mm_and_si128(_mm_srlv_epi32(_mm_shuffle_epi32(v, 0x98), _mm_setr_epi32(0, 0, 0, 4)),
                                     _mm_setr_epi32(0x3F3F3F3F, 0x0F0F0F0F, 0x3F3F3F3F, 0x0F0F0F0F));
    const __m128i hi = _mm_and_si128(_mm_srli_epi32(_mm_shuffle_epi32(v, 0x40), 2),
                                     _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
    return _mm_or_si128(lo, hi);
}

/* Q4_K / Q5_K: d, dmin (p, p + 2); scales[12] (p + 4); Q5_K: qh[32] (p + 16, bit sb of byte l: fifth bit of
 * element 32sb + l) and qs[128] (p + 48); Q4_K: qs[128] (p + 16). Sub-block sb = 2c + u of 32 elements: nibble u of
 * qs[32c + l]. Value d * sc * code - dmin * m. */
/* Keeps n bytes at p in memory: the compiler may not turn the stores before it and the loads after it into register
 * shuffles. Scale vectors read back with broadcast loads take the load ports; built with shuffles they would queue
 * on the one shuffle port, which the unpacking already keeps busy. */
TG_INLINE void kq_in_memory(void *p, size_t n) {
    __asm__("" : "+m"(*(char(*)[n])p));
}

/* d * dx and dmin * dx of a Q2_K / Q4_K / Q5_K super-block (fp16 d, dmin side by side at p) for token t, in dd[2 t]
 * and dd[2 t + 1]: one conversion of both fields, one product per token (the same products as scalar code). The
 * caller reads them back as broadcasts from memory, which cost no shuffle. */
TG_INLINE void d_dmin(const uint8_t *p, const tg_q8k_block *const *x, float *dd, const int T) {
    const __m128 h = _mm_cvtph_ps(_mm_cvtsi32_si128((int)u32_at(p)));
    for (int t = 0; t < T; t++) _mm_storel_pi((__m64 *)(void *)(dd + 2 * t), _mm_mul_ps(h, _mm_set1_ps(x[t]->d)));
}

/* acc[t] = fma(d * dx_t, (float)isum[t], acc[t]), then acc[t] = acc[t] - (dmin * dx_t) * (float)msum[t] in one
 * rounding (the same as fma(-(dmin * dx_t), msum, acc)), with dd from d_dmin and m16 the int16 mins for the
 * 16-code sums. */
TG_INLINE void scale_mins(__m256 *acc, const __m256i *isum, const float *dd, __m256i m16, const tg_q8k_block *const *x,
                          const int T) {
    for (int t = 0; t < T; t++) {
        acc[t] = _mm256_fmadd_ps(_mm256_broadcast_ss(dd + 2 * t), _mm256_cvtepi32_ps(isum[t]), acc[t]);
        const __m256i ms = _mm256_madd_epi16(ld256(x[t]->bsums), m16);
        acc[t] = _mm256_fnmadd_ps(_mm256_broadcast_ss(dd + 2 * t + 1), _mm256_cvtepi32_ps(ms), acc[t]);
    }
}

/* isum += madd(maddubs(w, x), (s, s)): dot_scaled with one int16 scale s for all 32 elements, given as the 32-bit
 * pair (s, s) in memory, which becomes a broadcast load (no shuffle port). */
TG_INLINE __m256i dot_scaled1(__m256i isum, __m256i w, const int8_t *x, const int32_t *s2) {
    return dot_scaled(isum, w, x, _mm256_set1_epi32(*s2));
}

TG_INLINE void sup_q45_k(const uint8_t *p, const tg_q8k_block *const *x, __m256 *acc, const int T, const bool five) {
    const __m256i sm = _mm256_broadcastsi128_si256(k4_scales(p + 4));
    /* dwords (sc_k, sc_k) for k < 8 and int16 pairs (m_k, m_k): byte k (scale) / 8 + k (min), zero-extended */
    int32_t s2[8];
    _mm256_storeu_si256((__m256i *)(void *)s2,
                        _mm256_shuffle_epi8(sm, _mm256_setr_epi32((int)0x80008000, (int)0x80018001, (int)0x80028002, (int)0x80038003,
                                                                  (int)0x80048004, (int)0x80058005,
                                                                  (int)0x80068006, (int)0x80078007)));
    kq_in_memory(s2, sizeof s2);
    const __m256i m16 = _mm256_shuffle_epi8(sm, _mm256_setr_epi32((int)0x80088008, (int)0x80098009, (int)0x800A800A, (int)0x800B800B,
                                                                  (int)0x800C800C, (int)0x800D800D, (int)0x800E800E, (int)0x800F800F));
    float dd[2 * KQ_MAX_TOKENS];
    d_dmin(p, x, dd, T);
    const uint8_t *qs = p + (five ? 48 : 16);
    __m256i qh = five ? ld256(p + 16) : _mm256_setzero_si256();
    __m256i isum[KQ_MAX_TOKENS];
    for (int t = 0; t < T; t++) isum[t] = _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
        const __m256i q = ld256(qs + 32 * c);
        __m256i lo = _mm256_and_si256(q, bytes(0x0F)), hi = hi_nibbles(q);
        if (five) {
            lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(qh, 4), bytes(0x10)));
            hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(qh, 3), bytes(0x10)));
            qh = _mm256_srli_epi16(qh, 2);
        }
        for (int t = 0; t < T; t++) {
            isum[t] = dot_scaled1(isum[t], lo, x[t]->q + 64 * c, s2 + 2 * c);
            isum[t] = dot_scaled1(isum[t], hi, x[t]->q + 64 * c + 32, s2 + 2 * c + 1);
        }
    }
    scale_mins(acc, isum, dd, m16, x, T);
}

TG_INLINE void sup_q4_k(const uint8_t *p, const tg_q8k_block *const *x, __m256 *acc, const int T) {
    sup_q45_k(p, x, acc, T, false);
}
TG_INLINE void sup_q5_k(const uint8_t *p, const tg_q8k_block *const *x, __m256 *acc, const int T) {
    sup_q45_k(p, x, acc, T, true);
}

/* Decode's two rows at once (super-blocks p[0] and p[1], one token x): sup_q45_k of each row, with the work that
 * does not depend on the codes done once for both: the two rows' scales and mins decoded in one 256-bit pass (row r
 * in lane r), and the activation's 16-code sums added in pairs once (madd with ones: bsp_j = bsums_2j + bsums_2j+1,
 * exact), so that each row's mins term is one madd of bsp against its mins zero-extended to dwords:
 * m_j * bsp_j, the same int32 as sup_q45_k's m_j * bsums_2j + m_j * bsums_2j+1. Same bits as sup_q45_k per row. */
TG_INLINE void sup2_q45_k(const uint8_t *const p[2], const tg_q8k_block *x, __m256 acc[2], const bool five) {
    union {
        int32_t s2[16]; /* (sc, sc) int16 pairs: [0..3] row 0 k 0..3, [4..7] row 1 k 0..3, [8..15] the same for k 4..7 */
        uint8_t b[64];
    } t;
    const __m256i sm = tg_k4_scales2(p[0], p[1]); /* per lane r: bytes 0..7 row r's scales, 8..15 its mins */
    _mm256_storeu_si256((__m256i *)(void *)t.s2,
                        _mm256_shuffle_epi8(sm, _mm256_setr_epi32((int)0x80008000, (int)0x80018001, (int)0x80028002,
                                                                  (int)0x80038003, (int)0x80008000, (int)0x80018001,
                                                                  (int)0x80028002, (int)0x80038003)));
    _mm256_storeu_si256((__m256i *)(void *)(t.s2 + 8),
                        _mm256_shuffle_epi8(sm, _mm256_setr_epi32((int)0x80048004, (int)0x80058005, (int)0x80068006,
                                                                  (int)0x80078007, (int)0x80048004, (int)0x80058005,
                                                                  (int)0x80068006, (int)0x80078007)));
    kq_in_memory(t.s2, sizeof t.s2);
    /* mins zero-extended to dwords: lane 0 of sm's bytes 8..15 (row 0), lane 1's (row 1) */
    const __m256i m32[2] = {_mm256_cvtepu8_epi32(_mm_srli_si128(_mm256_castsi256_si128(sm), 8)),
                            _mm256_cvtepu8_epi32(_mm_srli_si128(_mm256_extracti128_si256(sm, 1), 8))};
    const __m256i bsp = _mm256_madd_epi16(ld256(x->bsums), _mm256_set1_epi16(1));
    float dd[2][2];
    const tg_q8k_block *const xb[1] = {x};
    for (int r = 0; r < 2; r++) d_dmin(p[r], xb, dd[r], 1);
    __m256i qh[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()}, isum[2];
    for (int r = 0; r < 2; r++) {
        if (five) qh[r] = ld256(p[r] + 16);
        isum[r] = _mm256_setzero_si256();
    }
    for (int c = 0; c < 4; c++)
        for (int r = 0; r < 2; r++) {
            const __m256i q = ld256(p[r] + (five ? 48 : 16) + 32 * c);
            __m256i l4 = _mm256_and_si256(q, bytes(0x0F)), h4 = hi_nibbles(q);
            if (five) {
                l4 = _mm256_or_si256(l4, _mm256_and_si256(_mm256_slli_epi16(qh[r], 4), bytes(0x10)));
                h4 = _mm256_or_si256(h4, _mm256_and_si256(_mm256_slli_epi16(qh[r], 3), bytes(0x10)));
                qh[r] = _mm256_srli_epi16(qh[r], 2);
            }
            const int k = 2 * c; /* sub-blocks k (low nibbles) and k + 1 (high) */
            isum[r] = dot_scaled1(isum[r], l4, x->q + 64 * c, t.s2 + (k >> 2) * 8 + r * 4 + (k & 3));
            isum[r] = dot_scaled1(isum[r], h4, x->q + 64 * c + 32, t.s2 + ((k + 1) >> 2) * 8 + r * 4 + ((k + 1) & 3));
        }
    for (int r = 0; r < 2; r++) {
        acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(&dd[r][0]), _mm256_cvtepi32_ps(isum[r]), acc[r]);
        const __m256i ms = _mm256_madd_epi16(bsp, m32[r]);
        acc[r] = _mm256_fnmadd_ps(_mm256_broadcast_ss(&dd[r][1]), _mm256_cvtepi32_ps(ms), acc[r]);
    }
}
TG_INLINE void sup2_q4_k(const uint8_t *const p[2], const tg_q8k_block *x, __m256 acc[2]) { sup2_q45_k(p, x, acc, false); }
TG_INLINE void sup2_q5_k(const uint8_t *const p[2], const tg_q8k_block *x, __m256 acc[2]) { sup2_q45_k(p, x, acc, true); }

/* Decode's two rows of the other types: each row on its own. */
#define KQ_SUP2_EACH(NAME)                                                                                            \
    TG_INLINE void sup2_##NAME(const uint8_t *const p[2], const tg_q8k_block *x, __m256 acc[2]) {                    \
        const tg_q8k_block *const xb[1] = {x};                                                                        \
        sup_##NAME(p[0], xb, &acc[0], 1);                                                                             \
        sup_##NAME(p[1], xb, &acc[1], 1);                                                                             \
    }
KQ_SUP2_EACH(q2_k)
KQ_SUP2_EACH(q3_k)
KQ_SUP2_EACH(q6_k)
#undef KQ_SUP2_EACH

/* Decode streams the rows KQ_AHEAD rows ahead into L1 in address order while it computes (tg_prefetch_next: each step
 * prefetches the two rows' bytes per step of the pair KQ_AHEAD rows on): rows are short (a 2048-column Q4_K row is
 * 1152 bytes) next to what the hardware prefetcher needs to run ahead, as the Q8_0 kernels found (gemv_avx2.c). The
 * address-order stream replaced a strided prefetch of each step's blocks at no cost (these kernels are bound by their
 * instructions), so every decode kernel streams the same way. The stream runs on past the call's last row (a
 * prefetch never faults): the forward gives each thread a contiguous share of a matrix's rows in several calls
 * (forward.c), so the rows after one call are that thread's next call, which then starts with its first rows in
 * cache instead of missing on them. Four rows ahead is what the AVX2-only build (where
 * every K-quant type takes these kernels) decodes fastest with; the AVX-512 build's Q2_K / Q3_K do not mind
 * (docs/PERFORMANCE.md, K-quant files, Session 17). */
#define KQ_AHEAD 4

/* ---- rows: one weight row against T tokens (token t's super-blocks at xk + t * xs), results y[t * ldy] ---- */

#define KQ_ROW(NAME, BYTES)                                                                                           \
    TG_INLINE void row_##NAME(const uint8_t *row, int64_t nsup, const tg_q8k_block *xk, size_t xs, float *y,         \
                              size_t ldy, const int T) {                                                              \
        __m256 acc[KQ_MAX_TOKENS];                                                                                    \
        for (int t = 0; t < T; t++) acc[t] = _mm256_setzero_ps();                                                     \
        for (int64_t b = 0; b < nsup; b++) {                                                                          \
            const tg_q8k_block *xb[KQ_MAX_TOKENS];                                                                    \
            for (int t = 0; t < T; t++) xb[t] = xk + (size_t)t * xs + (size_t)b;                                      \
            sup_##NAME(row + (size_t)b * (BYTES), xb, acc, T);                                                        \
        }                                                                                                             \
        for (int t = 0; t < T; t++) y[(size_t)t * ldy] = tg_reduce1_ps(acc[t]);                                       \
    }                                                                                                                 \
    void tg_avx2_gemv_##NAME(const uint8_t *w, size_t ws, int64_t nr, const void *x, int64_t cols, float *y) {       \
        const int64_t nsup = cols / TG_QK_K;                                                                          \
        const tg_q8k_block *xk = x;                                                                                   \
        int64_t r = 0;                                                                                                \
        for (; r + 2 <= nr; r += 2) { /* two rows at a time: independent work side by side, one load of x */        \
            const uint8_t *r0 = w + (size_t)r * ws, *r1 = r0 + ws;                                                    \
            __m256 a[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};                                                 \
            uintptr_t next = (uintptr_t)r0 + KQ_AHEAD * ws;                                                            \
            for (int64_t b = 0; b < nsup; b++) {                                                                      \
                tg_prefetch_next(&next, 2 * (size_t)(BYTES));                                                        \
                const uint8_t *const p2[2] = {r0 + (size_t)b * (BYTES), r1 + (size_t)b * (BYTES)};                    \
                sup2_##NAME(p2, xk + b, a);                                                                           \
            }                                                                                                         \
            y[r] = tg_reduce1_ps(a[0]);                                                                               \
            y[r + 1] = tg_reduce1_ps(a[1]);                                                                           \
        }                                                                                                             \
        for (; r < nr; r++) row_##NAME(w + (size_t)r * ws, nsup, xk, 0, y + r, 0, 1);                                 \
    }                                                                                                                 \
    void tg_avx2_gemm_q8k_##NAME(const uint8_t *w, size_t ws, int64_t nr, const tg_q8k_block *xk, int64_t nsup,      \
                                 int64_t n, float *y, size_t ldy) {                                                   \
        for (int64_t t0 = 0; t0 < n; t0 += KQ_MAX_TOKENS) { /* a group of tokens passes over the rows (from cache) */ \
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

/* ---- the activation form: bit for bit tg_quantize_q8k_ref ---- */

void tg_avx2_quantize_q8k(const float *x, tg_q8k_block *dst, int64_t n) {
    const __m256 sign_mask = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < n / TG_Q8K_ELEMS; b++, x += TG_Q8K_ELEMS) {
        __m256 amax = _mm256_setzero_ps();
        for (int i = 0; i < TG_Q8K_ELEMS / 8; i++) amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_mask, _mm256_loadu_ps(x + 8 * i)));
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        const float am = _mm_cvtss_f32(m);
        const float ids = am != 0.0f ? 127.0f / am : 0.0f;
        dst[b].d = am != 0.0f ? 1.0f / ids : 0.0f;
        const __m256 id = _mm256_set1_ps(ids);
        for (int g = 0; g < TG_Q8K_ELEMS / 32; g++) { /* 32 elements: two 16-code sums */
            __m256i qi[4];
            for (int i = 0; i < 4; i++) {
                __m256 s = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x + 32 * g + 8 * i), id),
                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                s = _mm256_min_ps(_mm256_max_ps(s, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
                qi[i] = _mm256_cvtps_epi32(s);
            }
            __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
            p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(void *)(dst[b].q + 32 * g), p);
            for (int h = 0; h < 2; h++) {
                const __m256i s8 = _mm256_add_epi32(qi[2 * h], qi[2 * h + 1]);
                __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s8), _mm256_extracti128_si256(s8, 1));
                s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
                s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
                dst[b].bsums[2 * g + h] = (int16_t)_mm_cvtsi128_si32(s4);
            }
        }
    }
}

#else
typedef int tg_gemv_kquant_avx2_unused; /* ISO C forbids an empty translation unit */
#endif
