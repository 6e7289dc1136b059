/* avx2_inline.h — internal to src/kernels: the inline building blocks shared by the decode kernels (gemv_avx2.c) and
 * the prefill tiles (matmul_avx2.c), and the one arithmetic order both follow, so that a row times an activation
 * gives the same bits whichever kernel computes it (prefill in chunks == decoding token by token).
 *
 * The canonical order of one dot product is kernels/arith_order.h's; these blocks implement it.
 * Include only from files compiled when TG_HAVE_AVX2 is set. */
#ifndef TG_KERNELS_AVX2_INLINE_H
#define TG_KERNELS_AVX2_INLINE_H

#include "kernels/arith_order.h"
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/avx2.h"
#include "util/half.h"

#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define TG_AVX2_VNNI 1
#else
#define TG_AVX2_VNNI 0
#endif

#define TG_INLINE static inline __attribute__((always_inline))

#if TG_HAVE_KQ512
/* hadd_epi32 within each 128-bit lane of two 512-bit registers: (a0 + a1, a2 + a3, b0 + b1, b2 + b3) per lane (the
 * reductions of gemv_avx2.c's sixteen-row kernel and of the repacked kernels). */
TG_INLINE __m512i hadd512(__m512i a, __m512i b) {
    const __m512 fa = _mm512_castsi512_ps(a), fb = _mm512_castsi512_ps(b);
    return _mm512_add_epi32(_mm512_castps_si512(_mm512_shuffle_ps(fa, fb, 0x88)),
                            _mm512_castps_si512(_mm512_shuffle_ps(fa, fb, 0xDD)));
}
#endif

/* The decode kernels' prefetch. A kernel takes a group of rows through their blocks together (row r + 1 starts where
 * row r ends: the group is one stretch of memory) and meanwhile streams a later group into L1 in address order, at
 * the rate it consumes its own: *next is where that group's unprefetched bytes begin; each call prefetches `bytes`
 * from there, a line at a time, and moves on. Called once per block step with bytes = the group's bytes per step
 * (the rows times one block), it has covered that group when the current one is done. Address order is what the
 * memory system streams best: prefetching each step's blocks of the rows one group ahead issues the same lines in a
 * strided order, which bench/read_patterns.c, reading alone in both orders, finds slower (docs/PERFORMANCE.md,
 * K-quant files, Session 12). A
 * prefetch never faults, so it may run past the matrix (into the next call's rows, which is where the thread goes);
 * the stream's position is an integer address, so no pointer is formed outside the weights. */
TG_INLINE void tg_prefetch_next(uintptr_t *next, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)(*next + o), _MM_HINT_T0);
    *next += bytes;
}

/* tg_prefetch_next into L2, for the AVX-512 decode kernels (the sixteen-row Q8_0 / Q4_0 one, the K-quant pairs): a
 * prefetch into L1 waits for one of the core's few L1 miss buffers, as the loads do, which can starve a decode bound
 * by memory (docs/PERFORMANCE.md, Sessions 16 and 19). Into L2 the stream needs a longer lead than one group:
 * tg_stream_start. */
TG_INLINE void tg_prefetch_next_l2(uintptr_t *next, size_t bytes) {
    for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)(*next + o), _MM_HINT_T1);
    *next += bytes;
}

/* tg_prefetch_next_l2 issuing each line once: the lines that START in [*next, *next + bytes) (a line that straddles
 * the step's start was the previous step's). tg_prefetch_next_l2 prefetches from *next itself, so a step whose bytes
 * are not a multiple of 64 touches its last line again in the next step (Q8_0's sixteen rows: 544 bytes, 9
 * prefetches a step for 8.5 lines). For gemv_avx2.c's sixteen-row Q8_0 / Q4_0 kernel only, where it helps; the
 * float rows' 128-byte steps (the same count of lines, one line later) and the K-quant pairs do not gain from it
 * (docs/PERFORMANCE.md, Session 25). */
TG_INLINE void tg_prefetch_lines_l2(uintptr_t *next, size_t bytes) {
    const uintptr_t end = *next + bytes;
    for (uintptr_t a = (*next + 63) & ~(uintptr_t)63; a < end; a += 64) _mm_prefetch((const char *)a, _MM_HINT_T1);
    *next = end;
}

/* Where a kernel's stream starts, for a group of rows at w of `group` bytes: the first whole group at least `lead`
 * bytes on (at least the next group). */
TG_INLINE uintptr_t tg_stream_start(const uint8_t *w, size_t group, size_t lead) {
    return (uintptr_t)w + (lead + group - 1) / group * group;
}

TG_INLINE uint16_t tg_ld16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* Eight sums in the canonical lane order: out lane r = ((v_r0 + v_r1) + (v_r2 + v_r3)) + ((v_r4 + v_r5) + ...). */
TG_INLINE __m256 tg_reduce8_ps(const __m256 v[8]) {
    const __m256 a = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
    const __m256 b = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
}

/* Four sums, same order, as one 128-bit vector. */
TG_INLINE __m128 tg_reduce4_ps(__m256 a, __m256 b, __m256 c, __m256 d) {
    const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

/* One sum, same order. */
TG_INLINE float tg_reduce1_ps(__m256 v) {
    __m256 h = _mm256_hadd_ps(v, v);
    h = _mm256_hadd_ps(h, h);
    return _mm_cvtss_f32(_mm_add_ss(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)));
}

/* Eight exact int32 sums: lane r = the total of v_r's lanes. */
TG_INLINE __m256i tg_reduce8_epi32(const __m256i v[8]) {
    const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

/* Eight weights of a float-type row starting at element k, as fp32. */
TG_INLINE __m256 tg_w8(tg_dtype type, const uint8_t *row, int64_t k) {
    if (type == TG_DT_F32) return _mm256_loadu_ps((const float *)(const void *)(row + 4 * k));
    const __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(row + 2 * k));
    if (type == TG_DT_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

TG_INLINE float tg_w1(tg_dtype type, const uint8_t *row, int64_t k) {
    if (type == TG_DT_F32) {
        float f;
        memcpy(&f, row + 4 * k, 4);
        return f;
    }
    const uint16_t h = tg_ld16(row + 2 * k);
    return type == TG_DT_F16 ? tg_f16_to_f32(h) : tg_bf16_to_f32(h);
}

/* The canonical tail of a float dot product: columns [k, cols) in order, fused. */
TG_INLINE float tg_tail(tg_dtype type, const uint8_t *row, const float *x, int64_t k, int64_t cols) {
    float t = 0.0f;
    for (int64_t j = k; j < cols; j++) t = fmaf(tg_w1(type, row, j), x[j], t);
    return t;
}

/* The 32 codes of a weight block as the bytes qdot takes: Q8_0's signed bytes, Q4_0's nibbles in element order. */
TG_INLINE __m256i tg_qload(tg_dtype type, const uint8_t *blk) {
    if (type == TG_DT_Q8_0) return _mm256_loadu_si256((const __m256i *)(const void *)(blk + 2));
    const __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(blk + 2));
    const __m128i m = _mm_set1_epi8(0x0f);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m), _mm_and_si128(b, m));
}

/* Per-lane int32 partial sums of a block's products; their total is the block's integer dot product plus
 * tg_qbias(type) * sum(x). VNNI's dpbusd multiplies unsigned by signed bytes: Q8_0 codes are biased to w + 128 (an
 * XOR with 0x80). AVX2's maddubs does the same with Q8_0's signs moved onto x (no bias) and pair sums that stay
 * within int16 (2 * 128 * 127, 2 * 15 * 127). Q4_0 nibbles are w + 8 either way. */
TG_INLINE __m256i tg_qdot(tg_dtype type, __m256i wq, __m256i xq) {
#if TG_AVX2_VNNI
    if (type == TG_DT_Q8_0) wq = _mm256_xor_si256(wq, _mm256_set1_epi8((char)0x80));
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), wq, xq);
#else
    const __m256i ones = _mm256_set1_epi16(1);
    if (type == TG_DT_Q8_0)
        return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(wq, wq), _mm256_sign_epi8(xq, wq)), ones);
    return _mm256_madd_epi16(_mm256_maddubs_epi16(wq, xq), ones);
#endif
}

TG_INLINE int32_t tg_qbias(tg_dtype type) {
#if TG_AVX2_VNNI
    return type == TG_DT_Q8_0 ? 128 : 8;
#else
    return type == TG_DT_Q8_0 ? 0 : 8;
#endif
}

#endif
