/* gemv_avx2.c — the decode kernels: y = W x for a range of weight rows and ONE activation vector, written so that
 * the work per weight byte is small (decoding streams every weight once per token and should run at the memory's
 * read speed).
 *
 * Float weights (F32, F16, BF16): eight rows at a time, one accumulator each (eight independent FMA chains), the
 * eight rows' lane sums reduced together into one vector.
 * Quantised weights (Q8_0, Q4_0) against the tg_q8x_block form of x: per 32-element block, each row's integer dot
 * product is exact in int32 (AVX-512 VNNI's dpbusd on 256-bit registers where the target has it, else AVX2's
 * maddubs + madd); eight rows' products are reduced together in the integer domain, so one int -> float conversion
 * and one FMA serve eight rows, scaled by their fp16 scales times x's block scale.
 * Rows are short next to what the hardware prefetcher needs to lock on: the float kernel and the sixteen-row kernel
 * of AVX-512 builds stream the rows ahead of them into L2 in address order (tg_prefetch_next_l2); the eight-row
 * quantised kernel prefetches the same columns of the next group of rows into L2. Every kernel follows the
 * canonical arithmetic order of avx2_inline.h (the prefill tiles too), so a row's result does not depend on which
 * kernel or which grouping of rows computed it. */
#include "kernels/avx2.h"

#if TG_HAVE_AVX2

#include "kernels/avx2_inline.h"

/* How far ahead the kernels stream their next rows into L2: whole groups of rows, at least this many bytes. For
 * quant_rows16 (groups of sixteen rows): one group of short rows (SmolLM2-135M's Q8_0 and Q4_0) is too short a lead;
 * groups of longer rows (TinyLlama-1.1B's) stay one ahead. float_rows (groups of eight) gains from the same lead over
 * a strided prefetch of the next rows' columns. docs/PERFORMANCE.md, Session 22, has the leads tried. */
#define STREAM_LEAD ((size_t)12 * 1024)

/* Where the stream of a kernel's next rows starts, for a group of rows at w of `group` bytes: the whole number of
 * groups nearest STREAM_LEAD bytes on, at least one. Rounding up instead (tg_stream_start) puts SmolLM2-135M's
 * groups of sixteen Q8_0 rows and of eight F16 rows two groups ahead, where one is better, while its shorter Q4_0
 * groups still need two (docs/PERFORMANCE.md, Session 25). */
TG_INLINE uintptr_t stream_start(const uint8_t *w, size_t group) {
    const size_t groups = (STREAM_LEAD + group / 2) / group;
    return (uintptr_t)w + (groups > 1 ? groups : 1) * group;
}

/* Float rows: R (8, 4 or 1) at a time, one accumulator each (R independent FMA chains), streaming the rows about
 * STREAM_LEAD bytes ahead (stream_start) into L2 in address order as these are read (short rows defeat the hardware
 * prefetcher; a step that prefetches the same columns of the next R rows reads them in a strided order). */
TG_INLINE void float_rows(tg_dtype type, const uint8_t *w, size_t ws, const float *x, int64_t cols, float *y,
                          const int R) {
    const int64_t c8 = cols & ~(int64_t)7;
    const size_t esz = type == TG_DT_F32 ? 4 : 2;
    __m256 acc[8];
    for (int r = 0; r < R; r++) acc[r] = _mm256_setzero_ps();
    uintptr_t next = stream_start(w, (size_t)R * ws);
    for (int64_t k = 0; k < c8; k += 8) {
        const __m256 xv = _mm256_loadu_ps(x + k);
        tg_prefetch_next_l2(&next, (size_t)R * 8 * esz);
        for (int r = 0; r < R; r++) acc[r] = _mm256_fmadd_ps(tg_w8(type, w + (size_t)r * ws, k), xv, acc[r]);
    }
    if (R == 8) {
        __m256 s = tg_reduce8_ps(acc);
        if (c8 < cols) {
            float t[8];
            for (int r = 0; r < 8; r++) t[r] = tg_tail(type, w + (size_t)r * ws, x, c8, cols);
            s = _mm256_add_ps(s, _mm256_loadu_ps(t));
        }
        _mm256_storeu_ps(y, s);
    } else if (R == 4) {
        __m128 s = tg_reduce4_ps(acc[0], acc[1], acc[2], acc[3]);
        if (c8 < cols) {
            float t[4];
            for (int r = 0; r < 4; r++) t[r] = tg_tail(type, w + (size_t)r * ws, x, c8, cols);
            s = _mm_add_ps(s, _mm_loadu_ps(t));
        }
        _mm_storeu_ps(y, s);
    } else {
        float s = tg_reduce1_ps(acc[0]);
        if (c8 < cols) s += tg_tail(type, w, x, c8, cols);
        y[0] = s;
    }
}

TG_INLINE void gemv_float(tg_dtype type, const uint8_t *w, size_t ws, int64_t nr, const float *x, int64_t cols,
                          float *y) {
    int64_t r = 0;
    for (; r + 8 <= nr; r += 8) float_rows(type, w + (size_t)r * ws, ws, x, cols, y + r, 8);
    for (; r + 4 <= nr; r += 4) float_rows(type, w + (size_t)r * ws, ws, x, cols, y + r, 4);
    for (; r < nr; r++) float_rows(type, w + (size_t)r * ws, ws, x, cols, y + r, 1);
}

/* Eight fp16 block scales of eight rows (block pointers p[r]) as fp32, times the activation's block scale. */
TG_INLINE __m256 scales8(const uint8_t *const p[8], float dx) {
    __m128i h = _mm_cvtsi32_si128(tg_ld16(p[0]));
    h = _mm_insert_epi16(h, tg_ld16(p[1]), 1);
    h = _mm_insert_epi16(h, tg_ld16(p[2]), 2);
    h = _mm_insert_epi16(h, tg_ld16(p[3]), 3);
    h = _mm_insert_epi16(h, tg_ld16(p[4]), 4);
    h = _mm_insert_epi16(h, tg_ld16(p[5]), 5);
    h = _mm_insert_epi16(h, tg_ld16(p[6]), 6);
    h = _mm_insert_epi16(h, tg_ld16(p[7]), 7);
    return _mm256_mul_ps(_mm256_cvtph_ps(h), _mm256_set1_ps(dx));
}

/* Quantised rows, eight at a time: per block, the eight rows' integer dot products are reduced together into one
 * vector (exact), so one conversion and one FMA serve eight rows. */
TG_INLINE void quant_rows8(tg_dtype type, const uint8_t *w, size_t ws, const tg_q8x_block *x, int64_t nb, float *y) {
    const size_t bw = type == TG_DT_Q8_0 ? sizeof(tg_block_q8_0) : sizeof(tg_block_q4_0);
    const int32_t bias = tg_qbias(type);
    const size_t ahead = 8 * ws; /* the same blocks of the next eight rows */
    /* One prefetch per row every 64 / bw blocks (Q8_0 every block, Q4_0 every third: 54 bytes, so that no line is
     * skipped): prefetching each 18-byte Q4_0 block, 3.5 per cache line, issues several prefetches per line and
     * slows the decode; every fourth block skips lines. */
    const int64_t pf_every = (int64_t)(64 / bw);
    const uint8_t *p[8];
    for (int r = 0; r < 8; r++) p[r] = w + (size_t)r * ws;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const __m256i xq = _mm256_loadu_si256((const __m256i *)(const void *)x[b].q);
        __m256i d[8];
        const bool pf = b % pf_every == 0;
        for (int r = 0; r < 8; r++) {
            if (pf) _mm_prefetch((const char *)p[r] + ahead, _MM_HINT_T1);
            d[r] = tg_qdot(type, tg_qload(type, p[r]), xq);
        }
        __m256i s = tg_reduce8_epi32(d);
        if (bias) s = _mm256_sub_epi32(s, _mm256_set1_epi32(bias * x[b].sum));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), scales8(p, x[b].d), acc);
        for (int r = 0; r < 8; r++) p[r] += bw;
    }
    _mm256_storeu_ps(y, acc);
}

/* One quantised row, the same arithmetic one lane at a time. */
TG_INLINE float quant_row1(tg_dtype type, const uint8_t *p, const tg_q8x_block *x, int64_t nb) {
    const size_t bw = type == TG_DT_Q8_0 ? sizeof(tg_block_q8_0) : sizeof(tg_block_q4_0);
    const int32_t bias = tg_qbias(type);
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++, p += bw) {
        const __m256i d = tg_qdot(type, tg_qload(type, p), _mm256_loadu_si256((const __m256i *)(const void *)x[b].q));
        __m128i h = _mm_add_epi32(_mm256_castsi256_si128(d), _mm256_extracti128_si256(d, 1));
        h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
        h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
        const int32_t isum = _mm_cvtsi128_si32(h) - bias * x[b].sum;
        acc = fmaf((float)isum, tg_f16_to_f32(tg_ld16(p)) * x[b].d, acc);
    }
    return acc;
}

#if TG_HAVE_KQ512
/* Sixteen rows' block sums: d[i] holds row i's 8 partial sums in its lower half and row i + 8's in its upper half;
 * lane r of the result is row r's total (exact integer sums, so the order of the additions does not matter). */
TG_INLINE __m512i reduce16_epi32(const __m512i d[8]) {
    const __m512i a = hadd512(hadd512(d[0], d[1]), hadd512(d[2], d[3])); /* lanes: r0-3 r0-3 r8-11 r8-11 */
    const __m512i b = hadd512(hadd512(d[4], d[5]), hadd512(d[6], d[7])); /* r4-7 r4-7 r12-15 r12-15 */
    const __m512i s = _mm512_add_epi32(_mm512_shuffle_i64x2(a, b, 0x88), _mm512_shuffle_i64x2(a, b, 0xDD));
    return _mm512_shuffle_i64x2(s, s, 0xD8); /* (r0-3, r8-11, r4-7, r12-15) -> (r0-3, r4-7, r8-11, r12-15) */
}

/* Rows i and i + 8's codes of one block side by side, in tg_qload's order in each half. */
TG_INLINE __m512i qload2(tg_dtype type, const uint8_t *a, const uint8_t *b) {
    if (type == TG_DT_Q8_0)
        return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)(a + 2))),
                                  _mm256_loadu_si256((const __m256i *)(const void *)(b + 2)), 1);
    const __m256i ba = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(a + 2)));
    const __m256i bb = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(b + 2)));
    const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(ba), bb, 1); /* each row's 16 bytes twice */
    /* low nibbles in the first copy, high nibbles in the second: shift 0 / 4 per 128-bit lane */
    const int s4 = 0x00040004; /* two int16 shift counts of 4 */
    const __m512i shift = _mm512_setr_epi32(0, 0, 0, 0, s4, s4, s4, s4, 0, 0, 0, 0, s4, s4, s4, s4);
    return _mm512_and_si512(_mm512_srlv_epi16(v, shift), _mm512_set1_epi8(0x0f));
}

/* Quantised rows, sixteen at a time, two rows per 512-bit register: per block the integer sums of quant_rows8 (VNNI
 * dpbusd, the same biases), one conversion and one FMA for sixteen rows, each lane the float operations of
 * quant_rows8's lane for its row (the same bits): fewer conversions and FMAs per row than quant_rows8, which helps
 * where the decode is not yet bound by memory (Q4_0). The scales as quant_rows8 reads them: a 512-bit gather of the
 * sixteen is slower. The next sixteen rows stream into L2 meanwhile (tg_prefetch_next_l2), not into L1, where the
 * prefetches wait for the core's few L1 miss buffers (docs/PERFORMANCE.md, Sessions 12 and 16). */
TG_INLINE void quant_rows16(tg_dtype type, const uint8_t *w, size_t ws, const tg_q8x_block *x, int64_t nb, float *y) {
    const size_t bw = type == TG_DT_Q8_0 ? sizeof(tg_block_q8_0) : sizeof(tg_block_q4_0);
    const int32_t bias = tg_qbias(type);
    __m512 acc = _mm512_setzero_ps();
    /* the sixteen rows about STREAM_LEAD bytes ahead (stream_start), streamed in as these are read, a line once */
    uintptr_t next = stream_start(w, 16 * ws);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = w + (size_t)b * bw;
        tg_prefetch_lines_l2(&next, 16 * bw);
        __m512i xq = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(const void *)x[b].q));
        __m512i d[8];
        for (int r = 0; r < 8; r++) {
            const uint8_t *pa = blk + (size_t)r * ws, *pb = pa + 8 * ws;
            __m512i wq = qload2(type, pa, pb);
            if (type == TG_DT_Q8_0) wq = _mm512_xor_si512(wq, _mm512_set1_epi8((char)0x80));
            d[r] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wq, xq);
        }
        __m512i s = reduce16_epi32(d);
        if (bias) s = _mm512_sub_epi32(s, _mm512_set1_epi32(bias * x[b].sum));
        const uint8_t *ps[16];
        for (int r = 0; r < 16; r++) ps[r] = blk + (size_t)r * ws;
        const __m512 sc = _mm512_insertf32x8(_mm512_castps256_ps512(scales8(ps, x[b].d)), scales8(ps + 8, x[b].d), 1);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), sc, acc);
    }
    _mm512_storeu_ps(y, acc);
}
#endif

TG_INLINE void gemv_quant(tg_dtype type, const uint8_t *w, size_t ws, int64_t nr, const tg_q8x_block *x,
                          int64_t cols, float *y) {
    const int64_t nb = cols / TG_QK;
    int64_t r = 0;
#if TG_HAVE_KQ512
    for (; r + 16 <= nr; r += 16) quant_rows16(type, w + (size_t)r * ws, ws, x, nb, y + r);
#endif
    for (; r + 8 <= nr; r += 8) quant_rows8(type, w + (size_t)r * ws, ws, x, nb, y + r);
    for (; r < nr; r++) y[r] = quant_row1(type, w + (size_t)r * ws, x, nb);
}

#define TG_GEMV_FN(name, kernel, type)                                                                            \
    void tg_avx2_gemv_##name(const uint8_t *w, size_t w_stride, int64_t nr, const void *x, int64_t cols, float *y) { \
        kernel(type, w, w_stride, nr, x, cols, y);                                                                 \
    }
TG_GEMV_FN(f32, gemv_float, TG_DT_F32)
TG_GEMV_FN(f16, gemv_float, TG_DT_F16)
TG_GEMV_FN(bf16, gemv_float, TG_DT_BF16)
TG_GEMV_FN(q8_0, gemv_quant, TG_DT_Q8_0)
TG_GEMV_FN(q4_0, gemv_quant, TG_DT_Q4_0)
#undef TG_GEMV_FN

#else
typedef int tg_gemv_avx2_unused; /* ISO C forbids an empty translation unit */
#endif
