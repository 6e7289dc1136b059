/* kivi_avx2.c — the KIVI append into tiles, eight channels at a time: one token into the group being filled
 * (codec_kivi_provisional.c) or a whole group out of the residual ring (codec_kivi_grouped.c), the bytes of their
 * scalar paths (tg_kivi_code per channel, tg_kivi_tile_put per code), which stay the reference
 * (tg_kvcache_set_simd(c, false); test_kvcache_codecs compares the two byte for byte).
 *
 * Every float step is the scalar one, lane for lane: (x - zero) / scale by a true division, the clamp to
 * [0, levels] as max / min whose NaN and signed-zero cases pick what the scalar ternaries pick, and roundf's
 * half-away-from-zero on a non-negative t as trunc(t) + (t - trunc(t) >= 0.5) (the difference is exact). A tile's
 * 32-bit word holds codes of one row only (keys: lane = row; values: byte = row), so a row is written with plain
 * stores and no read-modify-write. */
#include "kvcache/kivi_avx2.h"

#if TG_HAVE_AVX2

#include <immintrin.h>
#include <string.h>

#include "util/half.h"

#define TG_INLINE static inline __attribute__((always_inline))

/* tg_kivi_code of eight floats on per-lane grids (scale s, zero z), as int32. */
TG_INLINE __m256i code8(__m256 x, __m256 s, __m256 z, __m256 levels) {
    __m256 t = _mm256_div_ps(_mm256_sub_ps(x, z), s);
    t = _mm256_max_ps(t, _mm256_setzero_ps()); /* t > 0 ? t : 0 — NaN and -0 give the second operand, +0 */
    t = _mm256_min_ps(t, levels);
    const __m256 whole = _mm256_round_ps(t, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 up = _mm256_and_ps(_mm256_cmp_ps(_mm256_sub_ps(t, whole), _mm256_set1_ps(0.5f), _CMP_GE_OQ),
                                    _mm256_set1_ps(1.0f));
    return _mm256_cvttps_epi32(_mm256_add_ps(whole, up));
}

/* Eight int32 codes (0..255) as eight bytes at out. */
TG_INLINE void store_bytes8(uint8_t *out, __m256i c) {
    const __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
    _mm_storel_epi64((__m128i *)(void *)out, _mm_packus_epi16(w, w));
}

TG_INLINE __m256 widen8(const uint16_t *h) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)h)); }

TG_INLINE uint32_t load32(const uint8_t *p) {
    uint32_t w;
    memcpy(&w, p, 4);
    return w;
}

int64_t tg_kivi_avx2_key_misses(const tg_kivi_range *r, const float *x, int64_t D, const uint16_t *scale,
                                const uint16_t *zero, int32_t *out) {
    const __m256 levels = _mm256_set1_ps((float)(r->qmax - r->qmin));
    int64_t n = 0;
    for (int64_t k = 0; k < D; k += 8) {
        const __m256 s = widen8(scale + k), z = widen8(zero + k), xv = _mm256_loadu_ps(x + k);
        const __m256 top = _mm256_add_ps(z, _mm256_mul_ps(levels, s));
        int m = _mm256_movemask_ps(
            _mm256_or_ps(_mm256_cmp_ps(xv, z, _CMP_LT_OQ), _mm256_cmp_ps(xv, top, _CMP_GT_OQ)));
        for (; m; m &= m - 1) out[n++] = (int32_t)(k + __builtin_ctz((unsigned)m));
    }
    return n;
}

void tg_kivi_avx2_key_row(const tg_kivi_range *r, const float *x, int64_t D, const uint16_t *scale,
                          const uint16_t *zero, uint8_t *tile, int64_t G, int64_t t) {
    const __m256 levels = _mm256_set1_ps((float)(r->qmax - r->qmin));
    uint8_t codes[TG_KIVI_AVX2_MAX_D];
    for (int64_t k = 0; k < D; k += 8)
        store_bytes8(codes + k, code8(_mm256_loadu_ps(x + k), widen8(scale + k), widen8(zero + k), levels));
    /* word (c, t) of the tile: byte j, slot s = channel 4 (cpb c + s) + j (kivi.h) */
    const int bits = r->bits, cpb = 8 / bits;
    for (int64_t c = 0; c < D / (4 * cpb); c++) {
        uint32_t w = 0;
        for (int s = 0; s < cpb; s++) w |= load32(codes + 4 * (cpb * c + s)) << (s * bits);
        memcpy(tile + (size_t)((c * G + t) * 4), &w, 4);
    }
}

void tg_kivi_avx2_recode_key_channel(const tg_kivi_range *r, uint8_t *tile, int64_t G, int64_t t, int64_t k,
                                     float s0, float z0, float s1, float z1) {
    const int bits = r->bits, cpb = 8 / bits;
    const int sh = (int)(k % 4) * 8 + (int)((k % (4 * cpb)) / 4) * bits; /* the channel's bits in a row's word */
    const __m128i count = _mm_cvtsi32_si128(sh);
    const __m256i mask = _mm256_set1_epi32((1 << bits) - 1), hole = _mm256_sll_epi32(mask, count);
    const __m256 vs0 = _mm256_set1_ps(s0), vz0 = _mm256_set1_ps(z0), vs1 = _mm256_set1_ps(s1),
                 vz1 = _mm256_set1_ps(z1), levels = _mm256_set1_ps((float)(r->qmax - r->qmin));
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    uint8_t *words = tile + (size_t)((k / (4 * cpb)) * G * 4);
    for (int64_t i = 0; i < t; i += 8) { /* rows i..i+7 (G % 8 == 0: inside the tile); rows >= t keep their word */
        __m256i *p = (__m256i *)(void *)(words + i * 4);
        const __m256i w = _mm256_loadu_si256(p);
        const __m256 old = _mm256_add_ps(
            _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srl_epi32(w, count), mask)), vs0), vz0);
        const __m256i u = code8(old, vs1, vz1, levels);
        const __m256i nw = _mm256_or_si256(_mm256_andnot_si256(hole, w), _mm256_sll_epi32(u, count));
        const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(t - i)), lane); /* lanes i + l < t */
        _mm256_storeu_si256(p, _mm256_blendv_epi8(w, nw, keep));
    }
}

void tg_kivi_avx2_key_group(const tg_kivi_range *r, const float *x, size_t x_stride, int64_t G, int64_t D,
                            uint16_t *scale, uint16_t *zero, uint8_t *tile) {
    for (int64_t k = 0; k < D; k += 8) { /* a lane is a channel: its rows in order, as range_of takes them */
        __m256 lo = _mm256_set1_ps(INFINITY), hi = _mm256_set1_ps(-INFINITY);
        for (int64_t t = 0; t < G; t++) {
            const __m256 v = _mm256_loadu_ps(x + (size_t)t * x_stride + (size_t)k);
            lo = _mm256_min_ps(v, lo); /* NaN, or a tie (a zero of the other sign): the earlier value stays */
            hi = _mm256_max_ps(v, hi);
        }
        float l8[8], h8[8];
        _mm256_storeu_ps(l8, lo);
        _mm256_storeu_ps(h8, hi);
        for (int i = 0; i < 8; i++) {
            if (l8[i] > h8[i]) l8[i] = h8[i] = 0.0f;
            tg_kivi_fit_slice(r, x + k + i, G, x_stride, l8[i], h8[i], TG_KIVI_CLIP_KEY_EDGE, &scale[k + i],
                              &zero[k + i]);
        }
    }
    for (int64_t t = 0; t < G; t++) tg_kivi_avx2_key_row(r, x + (size_t)t * x_stride, D, scale, zero, tile, G, t);
}

bool tg_kivi_avx2_value_row(const tg_kivi_range *r, const float *x, int64_t D, uint8_t *tile, int64_t t,
                            uint16_t *scale, uint16_t *zero) {
    __m256 lo = _mm256_set1_ps(INFINITY), hi = _mm256_set1_ps(-INFINITY);
    for (int64_t k = 0; k < D; k += 8) { /* NaN lanes keep the second operand: ignored, as range_of does */
        const __m256 v = _mm256_loadu_ps(x + k);
        lo = _mm256_min_ps(v, lo);
        hi = _mm256_max_ps(v, hi);
    }
    float l8[8], h8[8], mn = INFINITY, mx = -INFINITY;
    _mm256_storeu_ps(l8, lo);
    _mm256_storeu_ps(h8, hi);
    for (int i = 0; i < 8; i++) {
        if (l8[i] < mn) mn = l8[i];
        if (h8[i] > mx) mx = h8[i];
    }
    /* an end at zero: which zero range_of keeps depends on the order of +0 and -0 in x: the scalar path decides */
    if (mn == 0.0f || mx == 0.0f) return false;
    if (mn > mx) mn = mx = 0.0f;
    tg_kivi_fit_slice(r, x, D, 1, mn, mx, 0.0f, scale, zero);
    const __m256 levels = _mm256_set1_ps((float)(r->qmax - r->qmin));
    const __m256 s = _mm256_set1_ps(tg_f16_to_f32(*scale)), z = _mm256_set1_ps(tg_f16_to_f32(*zero));
    uint8_t codes[TG_KIVI_AVX2_MAX_D];
    for (int64_t k = 0; k < D; k += 8) store_bytes8(codes + k, code8(_mm256_loadu_ps(x + k), s, z, levels));
    /* byte ((t / 4) lanes + l) 4 + t % 4 of the tile: slot s = channel l + s lanes (kivi.h) */
    const int bits = r->bits, cpb = 8 / bits;
    const int64_t lanes = D / cpb;
    uint8_t *dst = tile + (size_t)((t / 4) * lanes * 4 + t % 4);
    for (int64_t l = 0; l < lanes; l++) {
        unsigned b = 0;
        for (int sl = 0; sl < cpb; sl++) b |= (unsigned)codes[l + sl * lanes] << (sl * bits);
        dst[l * 4] = (uint8_t)b;
    }
    return true;
}

#endif
