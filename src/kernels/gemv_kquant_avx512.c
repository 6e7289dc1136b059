/* gemv_kquant_avx512.c — decode (GEMV) and prefill (GEMM) kernels for Q4_K, Q5_K and Q6_K with two weight rows
 * per 512-bit register (AVX-512 BW + VNNI), against the tg_q8k_block form of the activations.
 *
 * gemv_kquant_avx2.c computes one row's super-block in 256-bit registers: the codes unpacked into 32 bytes, maddubs
 * into the activation's codes, madd / dpwssd by the sub-block scales into eight int32 lanes, then eight float lanes
 * acc = fma(d * dx, (float)isum, acc) (and the mins' fnmadd). Here the lower half of every register does that for
 * row a and the upper half for row b: the two rows' codes are loaded side by side, the activation's 32 bytes are
 * broadcast to both halves, and the scales, mins and d * dx of each row sit in its own half. Every int32 lane holds
 * the same integer as there (lane l: elements 4l .. 4l + 3 of each group, weighed by the group's scale), reached with
 * fewer instructions — each group's four-element sums in one dpbusd (at most 4 * 63 * 128: within int16), two
 * groups' sums put side by side as int16 pairs and weighed by one dpwssd; Q6_K's -32 offset folded into a dpwssd of
 * the bsums — and the float operations are the same in the same order; each half is reduced by tg_reduce1_ps, so a
 * (row, token) result has the same bits as the 256-bit kernels give (and as the scalar reference's tolerance allows,
 * gemv_kquant_avx2.c's comment). The unpacking and the dot products take half the instructions of two 256-bit rows;
 * from L2 the kernels are bound by the vector instructions issued (on Zen 4 about two 512-bit ones a cycle), so
 * every instruction saved per super-block shows. */
#include "kernels/avx2.h"

#if TG_HAVE_KQ512

#include "kernels/avx2_inline.h"
#include "kernels/ggml_blocks.h"
#include "kernels/kquant_inline.h"

/* Tokens per pass of the prefill kernel: 8 is no faster (docs/PERFORMANCE.md, Session 24), and a pass of 4 keeps
 * fewer accumulators live. */
#define KQ5_TOKENS 4

/* The two rows' bytes side by side: a's in the lower half of a 512-bit register (the lower 128-bit lane of a 256-bit
 * one), b's in the upper. b's are read by a masked load of the register-wide span that ends where they end: its
 * lower elements are masked off, so nothing below b is read (a masked load neither reads nor faults on them). The
 * span's start is computed as an integer, so no pointer arithmetic leaves the weights (the conversion back to a
 * pointer is implementation-defined; gcc and clang keep the address). An insert is one more shuffle instruction;
 * the masked load is faster (docs/PERFORMANCE.md, K-quant files, Session 21). */
TG_INLINE const void *span_ending_at(const uint8_t *p, size_t len, size_t span) {
    return (const void *)((uintptr_t)(const void *)p + len - span);
}
/* 32 bytes at a in the lower half, 32 at b in the upper. */
TG_INLINE __m512i pair512(const uint8_t *a, const uint8_t *b) {
    return _mm512_mask_loadu_epi64(_mm512_castsi256_si512(ld256(a)), 0xF0, span_ending_at(b, 32, 64));
}
/* 16 bytes at a in the lower 128-bit lane, 16 at b in the upper. */
TG_INLINE __m256i pair256(const uint8_t *a, const uint8_t *b) {
    return _mm256_mask_loadu_epi64(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)a)), 0xC,
                                   span_ending_at(b, 16, 32));
}
/* 32 bytes at p in both halves (a broadcast load). */
TG_INLINE __m512i both512(const void *p) { return _mm512_broadcast_i64x4(ld256(p)); }
TG_INLINE __m512i bytes512(int v) { return _mm512_set1_epi8((char)v); }
#if KQ_GFNI
TG_INLINE __m512i gf_bits512(__m512i v, long long m) { return _mm512_gf2p8affine_epi64_epi8(v, _mm512_set1_epi64(m), 0); }
#endif

TG_INLINE __m512i hi_nibbles512(__m512i q) {
#if KQ_GFNI
    return gf_bits512(q, KQ_GF_HI4);
#else
    return _mm512_and_si512(_mm512_srli_epi16(q, 4), bytes512(0x0F));
#endif
}

/* isum += two groups' products, weighed: lane l's four-element sums of wa . x[0..32) and of wb . x[32..64) (codes
 * below 64 times |x| <= 128, four of them: within int16), the activation's bytes in both halves, side by side as an
 * int16 pair and multiplied by sc's pair (sc_a, sc_b) — the integer gemv_kquant_avx2.c's two dot_scaled add. */
TG_INLINE __m512i dot2_512(__m512i isum, __m512i wa, __m512i wb, const int8_t *x, __m512i sc) {
    const __m512i pa = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wa, both512(x));
    const __m512i pb = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wb, both512(x + 32));
    /* bytes 2, 3 of each dword take pb's bytes 0, 1: pa's low word with pb's above it, in one instruction (rather
     * than a shift and a blend) */
    const __m512i low_word_up = _mm512_broadcast_i32x4(_mm_setr_epi32(0x01000000, 0x05040000, 0x09080000, 0x0D0C0000));
    const __m512i pair = _mm512_mask_shuffle_epi8(pa, (__mmask64)0xCCCCCCCCCCCCCCCCull, pb, low_word_up);
    return _mm512_dpwssd_epi32(isum, pair, sc);
}

/* The two rows' sums of each token into its accumulator: acc[t] lower half row a, upper half row b. */
typedef struct {
    const tg_q8k_block *x[KQ5_TOKENS];
} kq5_tokens;

/* ---- Q4_K / Q5_K: two rows' super-blocks pa, pb (layout: gemv_kquant_avx2.c's sup_q45_k) against T tokens ---- */
TG_INLINE void pair_q45_k(const uint8_t *pa, const uint8_t *pb, const kq5_tokens *tk, __m512 *acc, const int T,
                          const bool five) {
    /* lane 0: row a's scales (bytes 0..7) and mins (8..15); lane 1: b's */
    const __m256i sm = tg_k4_scales2_of(pair256(pa + 4, pb + 4));
    /* int16 pairs (m_j, m_j) of the mins, dword j of half r for row r (j < 8), as scale_mins takes them */
    const __m512i m16 = _mm512_cvtepu8_epi16(_mm256_unpackhi_epi8(sm, sm));
    /* d, dmin of both rows: (d_a, dmin_a, d_b, dmin_b) */
    const __m128 h =
        _mm_cvtph_ps(_mm_unpacklo_epi32(_mm_cvtsi32_si128((int)u32_at(pa)), _mm_cvtsi32_si128((int)u32_at(pb))));
    const uint8_t *qa = pa + (five ? 48 : 16), *qb = pb + (five ? 48 : 16);
    __m512i qh = five ? pair512(pa + 16, pb + 16) : _mm512_setzero_si512();
    /* int16 pairs (sc_2c, sc_2c + 1) of the scales: dword c of each 128-bit lane, row a's in lanes 0-1, b's in 2-3 */
    const __m512i sc16 =
        _mm512_cvtepu8_epi16(_mm256_permutevar8x32_epi32(sm, _mm256_setr_epi32(0, 1, 0, 1, 4, 5, 4, 5)));
    const __m512i scs[4] = {_mm512_shuffle_epi32(sc16, _MM_PERM_AAAA), _mm512_shuffle_epi32(sc16, _MM_PERM_BBBB),
                            _mm512_shuffle_epi32(sc16, _MM_PERM_CCCC), _mm512_shuffle_epi32(sc16, _MM_PERM_DDDD)};
    __m512i isum[KQ5_TOKENS];
    for (int t = 0; t < T; t++) isum[t] = _mm512_setzero_si512();
    for (int c = 0; c < 4; c++) {
        const __m512i q = pair512(qa + 32 * c, qb + 32 * c), s = scs[c];
        __m512i lo = _mm512_and_si512(q, bytes512(0x0F)), hi = hi_nibbles512(q);
        if (five) {
            lo = _mm512_or_si512(lo, _mm512_and_si512(_mm512_slli_epi16(qh, 4), bytes512(0x10)));
            hi = _mm512_or_si512(hi, _mm512_and_si512(_mm512_slli_epi16(qh, 3), bytes512(0x10)));
            qh = _mm512_srli_epi16(qh, 2);
        }
        for (int t = 0; t < T; t++) isum[t] = dot2_512(isum[t], lo, hi, tk->x[t]->q + 64 * c, s); /* groups 2c, 2c+1 */
    }
    /* d and dmin of both rows, each row's in its half (spread once; a product with dx is the same lane by lane) */
    const __m512i pick_d = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2);
    const __m512 hv = _mm512_castps128_ps512(h);
    const __m512 dv = _mm512_permutexvar_ps(pick_d, hv);
    const __m512 dminv = _mm512_permutexvar_ps(_mm512_add_epi32(pick_d, _mm512_set1_epi32(1)), hv);
    for (int t = 0; t < T; t++) {
        /* d * dx and dmin * dx of both rows (the products d_dmin makes) */
        const __m512 dx = _mm512_set1_ps(tk->x[t]->d);
        const __m512 d = _mm512_mul_ps(dv, dx), dmin = _mm512_mul_ps(dminv, dx);
        acc[t] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(isum[t]), acc[t]);
        const __m512i ms = _mm512_madd_epi16(both512(tk->x[t]->bsums), m16);
        acc[t] = _mm512_fnmadd_ps(dmin, _mm512_cvtepi32_ps(ms), acc[t]);
    }
}

/* ---- Q6_K (layout: gemv_kquant_avx2.c's sup_q6_k) ---- */

/* The unsigned 6-bit codes of elements 128h + 32s + 0..31 (s < 4) of both rows (q6_codes, twice as wide). */
TG_INLINE void q6_codes512(const uint8_t *pa, const uint8_t *pb, int h, __m512i codes[4]) {
    const __m512i ql0 = pair512(pa + 64 * h, pb + 64 * h), ql1 = pair512(pa + 64 * h + 32, pb + 64 * h + 32);
    const __m512i qh = pair512(pa + 128 + 32 * h, pb + 128 + 32 * h);
    const __m512i lo4 = bytes512(0x0F), hi2 = bytes512(0x30);
#if KQ_GFNI
    codes[0] = _mm512_ternarylogic_epi32(ql0, gf_bits512(qh, KQ_GF_B01_45), lo4, 0xEC);
    codes[1] = _mm512_ternarylogic_epi32(ql1, gf_bits512(qh, KQ_GF_B23_45), lo4, 0xEC);
    codes[2] = _mm512_ternarylogic_epi32(hi_nibbles512(ql0), qh, hi2, 0xF8);
    codes[3] = _mm512_or_si512(hi_nibbles512(ql1), gf_bits512(qh, KQ_GF_B67_45));
#else
    codes[0] = _mm512_ternarylogic_epi32(ql0, _mm512_and_si512(_mm512_slli_epi16(qh, 4), hi2), lo4, 0xEC);
    codes[1] = _mm512_ternarylogic_epi32(ql1, _mm512_and_si512(_mm512_slli_epi16(qh, 2), hi2), lo4, 0xEC);
    codes[2] = _mm512_ternarylogic_epi32(hi_nibbles512(ql0), qh, hi2, 0xF8);
    codes[3] = _mm512_or_si512(hi_nibbles512(ql1), _mm512_and_si512(_mm512_srli_epi16(qh, 2), hi2));
#endif
}

TG_INLINE void pair_q6_k(const uint8_t *pa, const uint8_t *pb, const kq5_tokens *tk, __m512 *acc, const int T) {
    /* sixteen int16 scales of row a, then of row b; per 128-bit lane: a 0..7, a 8..15, b 0..7, b 8..15 */
    const __m512i all16 = _mm512_cvtepi8_epi16(pair256(pa + 192, pb + 192));
    const __m512i sc[2] = {_mm512_shuffle_i64x2(all16, all16, 0xA0), _mm512_shuffle_i64x2(all16, all16, 0xF5)};
    __m512i isum[KQ5_TOKENS];
    for (int t = 0; t < T; t++) isum[t] = _mm512_setzero_si512();
    for (int h = 0; h < 2; h++) {
        __m512i codes[4];
        q6_codes512(pa, pb, h, codes);
        for (int sp = 0; sp < 2; sp++) { /* groups s = 2 sp and 2 sp + 1 */
            /* int16 pairs (scale of group 2sp, of group 2sp + 1) for each dword lane: lanes 0-3 (elements 0..15 of
             * a group) take scales 4sp and 4sp + 2 of this half's eight, lanes 4-7 scales 4sp + 1 and 4sp + 3 */
            const int lo = 0x05040100 + sp * 0x08080808, hi = lo + 0x02020202;
            const __m512i m = _mm512_broadcast_i64x4(_mm256_setr_epi32(lo, lo, lo, lo, hi, hi, hi, hi));
            const __m512i scv = _mm512_shuffle_epi8(sc[h], m);
            for (int t = 0; t < T; t++)
                isum[t] = dot2_512(isum[t], codes[2 * sp], codes[2 * sp + 1], tk->x[t]->q + 128 * h + 64 * sp, scv);
        }
    }
    /* d of both rows (d_a, d_b), and the scales times -32 (the codes' offset, folded in as their bsums' weights) */
    const __m128 h =
        _mm_cvtph_ps(_mm_unpacklo_epi16(_mm_cvtsi32_si128(tg_ld16(pa + 208)), _mm_cvtsi32_si128(tg_ld16(pb + 208))));
    const __m512i off = _mm512_mullo_epi16(all16, _mm512_set1_epi16(-32));
    const __m512 dv = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                                            _mm512_castps128_ps512(h));
    for (int t = 0; t < T; t++) { /* minus 32 * sum_g sc_g * bsum_g, then acc = fma(d * dx, isum, acc) */
        const __m512i sum = _mm512_dpwssd_epi32(isum[t], both512(tk->x[t]->bsums), off);
        const __m512 d = _mm512_mul_ps(dv, _mm512_set1_ps(tk->x[t]->d));
        acc[t] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sum), acc[t]);
    }
}

/* Decode takes PAIRS pairs of rows side by side through the super-blocks (KQ5_PAIR's argument, at most KQ5_PAIRS_MAX)
 * while the rows KQ5_LEAD_BYTES or more ahead stream into L2 (tg_prefetch_next_l2). Each pair's arithmetic is rows2's,
 * so the results keep their bits whatever PAIRS is. More pairs hide memory latency when the rows are prefetched in a
 * strided order; with the address-order stream one pair of each type is the fastest (docs/PERFORMANCE.md, K-quant
 * files, Sessions 11, 12 and 16). */
#define KQ5_PAIRS_MAX 4

/* How far ahead decode streams: whole groups of 2 * PAIRS rows, at least this many bytes, into L2. The next group
 * alone (a few KB of a 2048-column pair) is too short a lead for L2; into L1 the prefetches queue for this core's few
 * L1 miss buffers, where the loads wait too, so a longer lead there is slower (docs/PERFORMANCE.md, K-quant files,
 * Session 19). */
#define KQ5_LEAD_BYTES 6144

/* y[t * ldy] = row a . token t, y[t * ldy + 1] = row b . token t (b == a for an odd last row: only a's is stored);
 * token t's super-blocks at xk + t * xs. */
#define KQ5_PAIR(NAME, BYTES, PAIRS, CALL)                                                                            \
    _Static_assert((PAIRS) >= 1 && (PAIRS) <= KQ5_PAIRS_MAX, "pairs of rows in flight: 1 to KQ5_PAIRS_MAX");          \
    TG_INLINE void rows2_##NAME(const uint8_t *ra, const uint8_t *rb, int64_t nsup, const tg_q8k_block *xk,           \
                                size_t xs, float *y, size_t ldy, const int T, const bool both) {                      \
        __m512 acc[KQ5_TOKENS];                                                                                       \
        for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_ps();                                                     \
        for (int64_t b = 0; b < nsup; b++) {                                                                          \
            kq5_tokens tk;                                                                                            \
            for (int t = 0; t < T; t++) tk.x[t] = xk + (size_t)t * xs + (size_t)b;                                    \
            CALL;                                                                                                     \
        }                                                                                                             \
        for (int t = 0; t < T; t++) {                                                                                 \
            y[(size_t)t * ldy] = tg_reduce1_ps(_mm512_castps512_ps256(acc[t]));                                       \
            if (both) y[(size_t)t * ldy + 1] = tg_reduce1_ps(_mm512_extractf32x8_ps(acc[t], 1));                      \
        }                                                                                                             \
    }                                                                                                                 \
    /* Decode: P pairs of rows r0 + 2p, r0 + 2p + 1 side by side, each pair's arithmetic that of rows2 (T = 1); y[2p], \
     * y[2p + 1] = their dot products with x. */                                                                      \
    TG_INLINE void pairs_##NAME(const uint8_t *r0, size_t ws, int64_t nsup, const tg_q8k_block *xk, float *y,         \
                                const int P) {                                                                        \
        __m512 accs[KQ5_PAIRS_MAX][1];                                                                                \
        const int T = 1;                                                                                              \
        for (int p = 0; p < P; p++) accs[p][0] = _mm512_setzero_ps();                                                 \
        uintptr_t next = tg_stream_start(r0, 2 * (size_t)P * ws, KQ5_LEAD_BYTES);                                \
        for (int64_t b = 0; b < nsup; b++) {                                                                          \
            kq5_tokens tk;                                                                                            \
            tk.x[0] = xk + (size_t)b;                                                                                 \
            tg_prefetch_next_l2(&next, 2 * (size_t)P * (BYTES));                                                      \
            for (int p = 0; p < P; p++) {                                                                             \
                const uint8_t *ra = r0 + 2 * (size_t)p * ws, *rb = ra + ws;                                           \
                __m512 *acc = accs[p];                                                                                \
                CALL;                                                                                                 \
            }                                                                                                         \
        }                                                                                                             \
        for (int p = 0; p < P; p++) {                                                                                 \
            y[2 * p] = tg_reduce1_ps(_mm512_castps512_ps256(accs[p][0]));                                             \
            y[2 * p + 1] = tg_reduce1_ps(_mm512_extractf32x8_ps(accs[p][0], 1));                                      \
        }                                                                                                             \
    }                                                                                                                 \
    void tg_avx512_gemv_##NAME(const uint8_t *w, size_t ws, int64_t nr, const void *x, int64_t cols, float *y) {      \
        const int64_t nsup = cols / TG_QK_K;                                                                          \
        int64_t r = 0;                                                                                                \
        for (; r + 2 * (PAIRS) <= nr; r += 2 * (PAIRS)) pairs_##NAME(w + (size_t)r * ws, ws, nsup, x, y + r, PAIRS);  \
        for (; r + 2 <= nr; r += 2) pairs_##NAME(w + (size_t)r * ws, ws, nsup, x, y + r, 1);                          \
        if (r < nr) rows2_##NAME(w + (size_t)r * ws, w + (size_t)r * ws, nsup, x, 0, y + r, 0, 1, false);             \
    }                                                                                                                 \
    void tg_avx512_gemm_q8k_##NAME(const uint8_t *w, size_t ws, int64_t nr, const tg_q8k_block *xk, int64_t nsup,     \
                                   int64_t n, float *y, size_t ldy) {                                                 \
        for (int64_t t0 = 0; t0 < n; t0 += KQ5_TOKENS) { /* a group of tokens passes over the rows (from cache) */    \
            const tg_q8k_block *xg = xk + (size_t)t0 * (size_t)nsup;                                                  \
            float *yg = y + (size_t)t0 * ldy;                                                                         \
            const int64_t nt = n - t0 < KQ5_TOKENS ? n - t0 : KQ5_TOKENS;                                             \
            for (int64_t r = 0; r < nr; r += 2) {                                                                     \
                const uint8_t *ra = w + (size_t)r * ws, *rb = r + 1 < nr ? ra + ws : ra;                              \
                const bool both = r + 1 < nr;                                                                         \
                switch (nt) { /* constant token counts, so that the sums stay in registers */                         \
                case 4: rows2_##NAME(ra, rb, nsup, xg, (size_t)nsup, yg + r, ldy, 4, both); break;                    \
                case 3: rows2_##NAME(ra, rb, nsup, xg, (size_t)nsup, yg + r, ldy, 3, both); break;                    \
                case 2: rows2_##NAME(ra, rb, nsup, xg, (size_t)nsup, yg + r, ldy, 2, both); break;                    \
                default: rows2_##NAME(ra, rb, nsup, xg, (size_t)nsup, yg + r, ldy, 1, both); break;                   \
                }                                                                                                     \
            }                                                                                                         \
        }                                                                                                             \
    }

KQ5_PAIR(q4_k, TG_Q4_K_BYTES, 1, pair_q45_k(ra + (size_t)b * TG_Q4_K_BYTES, rb + (size_t)b * TG_Q4_K_BYTES, &tk, acc, T, false))
KQ5_PAIR(q5_k, TG_Q5_K_BYTES, 1, pair_q45_k(ra + (size_t)b * TG_Q5_K_BYTES, rb + (size_t)b * TG_Q5_K_BYTES, &tk, acc, T, true))
KQ5_PAIR(q6_k, TG_Q6_K_BYTES, 1, pair_q6_k(ra + (size_t)b * TG_Q6_K_BYTES, rb + (size_t)b * TG_Q6_K_BYTES, &tk, acc, T))
#undef KQ5_PAIR

#else
typedef int tg_gemv_kquant_avx512_unused; /* ISO C forbids an empty translation unit */
#endif
