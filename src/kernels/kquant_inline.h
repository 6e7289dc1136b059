/* kquant_inline.h — internal to src/kernels: what the K-quant kernels of both widths share (gemv_kquant_avx2.c,
 * gemv_kquant_avx512.c): field readers, the two-row Q4_K / Q5_K scale decode, and the choice of unpacking
 * instructions. Include only from files compiled when TG_HAVE_AVX2 is set, after avx2_inline.h. */
#ifndef TG_KERNELS_KQUANT_INLINE_H
#define TG_KERNELS_KQUANT_INLINE_H

#include <string.h>

#include "kernels/avx2_inline.h"

/* fp16 at p as fp32 through F16C (util/half.h's portable conversion branches; the values are the same) */
TG_INLINE float f16_at(const uint8_t *p) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(tg_ld16(p)))); }

TG_INLINE uint32_t u32_at(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

TG_INLINE __m256i ld256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* Where the CPU has them, GFNI's byte-wise bit permutation (gf2p8affineqb: bits moved within each byte, one
 * instruction for a shift and its mask) and AVX-512VL's three-input logic (vpternlogd: an AND and an OR in one)
 * unpack the codes in fewer instructions. The codes are the same bytes on every path, so the sums and the results
 * are the same bits. */
#if defined(__GFNI__)
#define KQ_GFNI 1
#else
#define KQ_GFNI 0
#endif
#if defined(__AVX512VL__)
#define KQ_TERNLOG 1
#else
#define KQ_TERNLOG 0
#endif

#if KQ_GFNI
/* gf2p8affineqb matrices: result bit i of a byte is the parity of (byte & row 7 - i) */
#define KQ_GF_HI4 0x1020408000000000LL /* bits 4..7 -> 0..3 (byte >> 4) */
#define KQ_GF_B01_45 0x0000000001020000LL /* bits 0, 1 -> 4, 5; others 0 */
#define KQ_GF_B23_45 0x0000000004080000LL /* bits 2, 3 -> 4, 5 */
#define KQ_GF_B67_45 0x0000000040800000LL /* bits 6, 7 -> 4, 5 */
#endif

/* The 6-bit scales and mins of two Q4_K / Q5_K super-blocks as bytes, from v: their scales[12] fields (at + 4 in
 * each block), row a's in the lower 128-bit lane and row b's in the upper (the last four bytes of each lane unused).
 * Lane 0 (row a) and lane 1 (row b) of the result each hold its eight scales in bytes 0..7 and its eight mins in
 * 8..15. With the field's words a0, a1, a2, the scales are a0 & 0x3F.. and (a2 & 0x0F..) | (a0 >> 2 & 0x30..), the
 * mins a1 & 0x3F.. and (a2 >> 4 & 0x0F..) | (a1 >> 2 & 0x30..). */
TG_INLINE __m256i tg_k4_scales2_of(const __m256i v) {
    const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(_mm256_shuffle_epi32(v, 0x98), _mm256_setr_epi32(0, 0, 0, 4, 0, 0, 0, 4)),
                                        _mm256_setr_epi32(0x3F3F3F3F, 0x0F0F0F0F, 0x3F3F3F3F, 0x0F0F0F0F, 0x3F3F3F3F,
                                                          0x0F0F0F0F, 0x3F3F3F3F, 0x0F0F0F0F));
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi32(_mm256_shuffle_epi32(v, 0x40), 2),
                                        _mm256_setr_epi32(0, 0x30303030, 0, 0x30303030, 0, 0x30303030, 0, 0x30303030));
    return _mm256_or_si256(lo, hi);
}

/* tg_k4_scales2_of the blocks at pa and pb (reads 16 bytes at pa + 4 and pb + 4, inside the blocks). */
TG_INLINE __m256i tg_k4_scales2(const uint8_t *pa, const uint8_t *pb) {
    return tg_k4_scales2_of(_mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(pa + 4))),
        _mm_loadu_si128((const __m128i *)(const void *)(pb + 4)), 1));
}

#endif
