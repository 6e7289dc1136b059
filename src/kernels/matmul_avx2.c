/* matmul_avx2.c — the prefill tiles: a few weight rows against a few activation vectors (AVX2 + FMA + F16C; with
 * AVX-512 F, 512-bit float tiles; with AVX-512 VNNI, the 256-bit dpbusd).
 *
 * Float weights (F32, F16, BF16): tiles of up to 4 rows x 4 activations (AVX2), widened to fp32 eight columns at a
 * time and multiplied by FMA, one 8-lane accumulator per (row, activation); with AVX-512, 4 rows x 8 activations,
 * one 16-lane register holding two rows' 8-lane accumulators (each lane sees the same FMA sequence). Each tile
 * body is an always-inline function with constant sizes, instantiated for every shape, so the accumulators live in
 * registers.
 * Quantised weights (Q8_0, Q4_0): activations quantised once and packed eight tokens wide (tg_q8x_pack8), so one
 * broadcast dword of four weight codes against one 32-byte load gives eight tokens' partial dot products in eight
 * int32 lanes (VNNI dpbusd, or AVX2 maddubs + madd) and no horizontal reduction is ever needed; two groups of eight
 * share each unpacked weight block (16 tokens per pass over the weights, batched decoding's case). With AVX-512
 * VNNI two groups fill one 512-bit register and two registers share each block (32 tokens per pass), so each weight
 * block is unpacked once for twice the tokens (docs/PERFORMANCE.md has the prefill rates).
 * Both follow the canonical arithmetic order of avx2_inline.h, so prefill gives the same bits as the decode kernel
 * for every (row, activation) pair, on every ISA. */
#include "kernels/avx2.h"

#if TG_HAVE_AVX2

#include "kernels/avx2_inline.h"

#if !TG_TILE_AVX512
/* Float weights: NR rows x NT vectors, one accumulator per (row, vector) pair, 8 columns per step; the canonical
 * reduction and tail of avx2_inline.h. (With AVX-512, tile_float512 below computes the same lanes.) */
TG_INLINE void tile_float(tg_dtype type, const uint8_t *w, size_t ws, const uint8_t *x, size_t xs, int64_t cols,
                          float *y, size_t ldy, const int NR, const int NT) {
    __m256 acc[4][4];
    for (int r = 0; r < NR; r++)
        for (int t = 0; t < NT; t++) acc[r][t] = _mm256_setzero_ps();
    const int64_t c8 = cols & ~(int64_t)7;
    for (int64_t k = 0; k < c8; k += 8) {
        __m256 xv[4];
        for (int t = 0; t < NT; t++) {
            xv[t] = _mm256_loadu_ps((const float *)(const void *)(x + t * xs) + k);
            /* keep the activation in a register: folding its load into every row's FMA doubles the loads per step */
            __asm__("" : "+v"(xv[t]));
        }
        for (int r = 0; r < NR; r++) {
            const __m256 wv = tg_w8(type, w + r * ws, k);
            for (int t = 0; t < NT; t++) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
        }
    }
    for (int r = 0; r < NR; r++) {
        for (int t = 0; t < NT; t++) {
            float s = tg_reduce1_ps(acc[r][t]);
            if (c8 < cols) s += tg_tail(type, w + r * ws, (const float *)(const void *)(x + t * xs), c8, cols);
            y[(size_t)t * ldy + (size_t)r] = s;
        }
    }
}

#endif

/* ---- prefill with quantised weights: rows x eight packed activations --------------------------------------- */

/* The 32 codes of a weight block in element order, as the unsigned (VNNI: Q8_0 biased by 128; Q4_0 nibbles) or,
 * without VNNI, signed (Q8_0) / unsigned (Q4_0) bytes that qdot8 takes. */
TG_INLINE __m256i wcodes(tg_dtype type, const uint8_t *blk) {
    __m256i v = tg_qload(type, blk);
#if TG_AVX2_VNNI
    if (type == TG_DT_Q8_0) v = _mm256_xor_si256(v, _mm256_set1_epi8((char)0x80));
#endif
    return v;
}

/* acc (8 lanes, one per token) += the dot products of four weight codes (the same four, broadcast in wb) with four
 * codes of each token (xv). Exact in int32. */
TG_INLINE __m256i qdot8(tg_dtype type, __m256i acc, __m256i wb, __m256i xv) {
#if TG_AVX2_VNNI
    (void)type;
    return _mm256_dpbusd_epi32(acc, wb, xv);
#else
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i p;
    if (type == TG_DT_Q8_0) p = _mm256_maddubs_epi16(_mm256_sign_epi8(wb, wb), _mm256_sign_epi8(xv, wb));
    else p = _mm256_maddubs_epi16(wb, xv);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, ones));
#endif
}

/* Rows per pass of the quantised prefill kernel, for one group of eight tokens and for two groups at once (each
 * row and group holds two registers, its integer and its float sums): 8 and 4 where AVX-512 gives 32 vector
 * registers, 4 and 2 with AVX2's 16. */
#if defined(__AVX512VL__)
#define TG_QROWS 8
#define TG_QROWS2 4
#else
#define TG_QROWS 4
#define TG_QROWS2 2
#endif

/* The fp16 scales of R (<= 8) blocks ws bytes apart (the same block of R rows), in lanes 0..R-1. */
TG_INLINE __m128i row_scales(const uint8_t *blk0, size_t ws, const int R) {
    __m128i h = _mm_cvtsi32_si128(tg_ld16(blk0)); /* the insert selectors must be constants */
    if (R > 1) h = _mm_insert_epi16(h, tg_ld16(blk0 + ws), 1);
    if (R > 2) h = _mm_insert_epi16(h, tg_ld16(blk0 + 2 * ws), 2);
    if (R > 3) h = _mm_insert_epi16(h, tg_ld16(blk0 + 3 * ws), 3);
    if (R > 4) h = _mm_insert_epi16(h, tg_ld16(blk0 + 4 * ws), 4);
    if (R > 5) h = _mm_insert_epi16(h, tg_ld16(blk0 + 5 * ws), 5);
    if (R > 6) h = _mm_insert_epi16(h, tg_ld16(blk0 + 6 * ws), 6);
    if (R > 7) h = _mm_insert_epi16(h, tg_ld16(blk0 + 7 * ws), 7);
    return h;
}

/* R rows (R <= TG_QROWS, R * G <= TG_QROWS) of a Q8_0 / Q4_0 matrix against G (1 or 2) groups of eight packed
 * activations, group g's blocks at xp + g * nb: acc[g * R + j] lane t = the canonical dot product of row j with
 * token t of group g. Per block, lane t of the integer sum gathers four elements at a time (one weight dword
 * broadcast against the eight tokens' dwords), so no horizontal reduction is needed. The block's codes (unpacked /
 * biased) and the rows' scales go to small buffers once per block, and each dword is broadcast from there for
 * every group: a load, not a cross-lane shuffle, so the shuffle port does not limit the integer dot products. */
TG_INLINE void gemm_quant_rows(tg_dtype type, const uint8_t *w, size_t ws, const tg_q8x_pack8 *xp, int64_t nb,
                               __m256 *acc, const int R, const int G) {
    const size_t bw = type == TG_DT_Q8_0 ? sizeof(tg_block_q8_0) : sizeof(tg_block_q4_0);
    const int32_t bias = tg_qbias(type);
    for (int j = 0; j < R * G; j++) acc[j] = _mm256_setzero_ps();
    int32_t codes[TG_QROWS][TG_QK / 4] __attribute__((aligned(32)));
    float dw[8] __attribute__((aligned(32)));
    for (int64_t b = 0; b < nb; b++) {
        __m256i is[TG_QROWS];
        const uint8_t *blk0 = w + (size_t)b * bw;
        for (int j = 0; j < R; j++)
            _mm256_store_si256((__m256i *)(void *)codes[j], wcodes(type, blk0 + (size_t)j * ws));
        const __m128i h = row_scales(blk0, ws, R);
        for (int j = 0; j < R * G; j++) is[j] = _mm256_setzero_si256();
        _mm256_store_ps(dw, _mm256_cvtph_ps(h)); /* the rows' fp16 scales, exactly (finite: the loader checks) */
        /* the codes are in memory now (the compiler would otherwise keep them in registers and shuffle) */
        __asm__("" : "+m"(codes), "+m"(dw));
        for (int c = 0; c < TG_QK / 4; c++) {
            __m256i xv[2];
            for (int g = 0; g < G; g++)
                xv[g] = _mm256_loadu_si256((const __m256i *)(const void *)xp[(size_t)g * (size_t)nb + (size_t)b].q[c]);
            for (int j = 0; j < R; j++) {
                const __m256i wb = _mm256_set1_epi32(codes[j][c]);
                for (int g = 0; g < G; g++) is[g * R + j] = qdot8(type, is[g * R + j], wb, xv[g]);
            }
        }
        for (int g = 0; g < G; g++) {
            const tg_q8x_pack8 *p = &xp[(size_t)g * (size_t)nb + (size_t)b];
            const __m256i bs = _mm256_mullo_epi32(_mm256_loadu_si256((const __m256i *)(const void *)p->sum),
                                                  _mm256_set1_epi32(bias));
            const __m256 dx = _mm256_loadu_ps(p->d);
            for (int j = 0; j < R; j++)
                acc[g * R + j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(is[g * R + j], bs)),
                                                 _mm256_mul_ps(_mm256_set1_ps(dw[j]), dx), acc[g * R + j]);
        }
    }
}

/* acc[g * R + j] lane t -> y of token g * 8 + t (t < nt[g]), row j. */
TG_INLINE void store_quant_rows(const __m256 *acc, const int R, const int G, const int nt[2], float *y, size_t ldy) {
    float out[TG_QROWS][8];
    for (int g = 0; g < G; g++) {
        for (int j = 0; j < R; j++) _mm256_storeu_ps(out[j], acc[g * R + j]);
        for (int t = 0; t < nt[g]; t++)
            for (int j = 0; j < R; j++) y[(size_t)(g * 8 + t) * ldy + (size_t)j] = out[j][t];
    }
}

/* One pass over the rows for G groups of eight tokens: RSTEP rows at a time, then the rows left one by one. */
TG_INLINE void gemm_quant_pass(tg_dtype type, const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8x_pack8 *pg,
                               int64_t nb, const int nt[2], float *yg, size_t ldy, const int RSTEP, const int G) {
    __m256 acc[TG_QROWS];
    int64_t r = 0;
    for (; r + RSTEP <= nr; r += RSTEP) {
        gemm_quant_rows(type, w + (size_t)r * w_stride, w_stride, pg, nb, acc, RSTEP, G);
        store_quant_rows(acc, RSTEP, G, nt, yg + r, ldy);
    }
    for (; r < nr; r++) {
        gemm_quant_rows(type, w + (size_t)r * w_stride, w_stride, pg, nb, acc, 1, G);
        store_quant_rows(acc, 1, G, nt, yg + r, ldy);
    }
}

/* (unused where the 512-bit kernel below replaces it) */
TG_INLINE __attribute__((unused)) void gemm_quant(tg_dtype type, const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8x_pack8 *xp,
                          int64_t nb, int64_t n, float *y, size_t ldy) {
    for (int64_t g = 0; g * 8 < n;) {
        const int nt[2] = {(int)(n - g * 8 < 8 ? n - g * 8 : 8), (int)(n - g * 8 - 8 < 8 ? n - g * 8 - 8 : 8)};
        const tg_q8x_pack8 *pg = xp + (size_t)g * (size_t)nb;
        float *yg = y + (size_t)g * 8 * ldy;
        if (nt[1] > 0) { /* two groups in each pass: every weight block unpacked once for sixteen tokens */
            gemm_quant_pass(type, w, w_stride, nr, pg, nb, nt, yg, ldy, TG_QROWS2, 2);
            g += 2;
        } else {
            gemm_quant_pass(type, w, w_stride, nr, pg, nb, nt, yg, ldy, TG_QROWS, 1);
            g += 1;
        }
    }
}

#if TG_AVX2_VNNI && defined(__AVX512BW__)
/* ---- the same with 512-bit registers (AVX-512 VNNI): sixteen tokens per register ----------------------------- *
 * Two packed groups of eight side by side in one 16-lane register (group 2h in lanes 0-7, group 2h + 1 in lanes
 * 8-15). Each lane sees exactly the integer sum and the float steps of gemm_quant_rows (the bias term is subtracted
 * before the products are added instead of after: the same int32, exact), so prefill keeps the decode kernel's
 * bits; each dpbusd does the work of two. Where the token count is not a multiple of sixteen the upper half repeats
 * the lower group (its lanes are computed and dropped). */
#define TG_QROWS512 8  /* rows per pass for one register of sixteen tokens */
#define TG_QROWS512_2 4 /* ... for two (32 tokens): is + acc = 2 * R * G registers of 32 */

/* Column c (four elements) of packed groups lo and hi as one register: lo's eight tokens, then hi's. */
TG_INLINE __m512i x16_pair(const tg_q8x_pack8 *lo, const tg_q8x_pack8 *hi, int c) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)lo->q[c])),
                              _mm256_loadu_si256((const __m256i *)(const void *)hi->q[c]), 1);
}

/* R rows against G registers of sixteen tokens; register g's groups are lo[g] and hi[g] (block b at index b). */
TG_INLINE void gemm_quant512_rows(tg_dtype type, const uint8_t *w, size_t ws, const tg_q8x_pack8 *const *lo,
                                  const tg_q8x_pack8 *const *hi, int64_t nb, __m512 *acc, const int R, const int G) {
    const size_t bw = type == TG_DT_Q8_0 ? sizeof(tg_block_q8_0) : sizeof(tg_block_q4_0);
    const __m512i bias = _mm512_set1_epi32(-tg_qbias(type));
    for (int j = 0; j < R * G; j++) acc[j] = _mm512_setzero_ps();
    int32_t codes[TG_QROWS512][TG_QK / 4] __attribute__((aligned(32)));
    float dw[8] __attribute__((aligned(32)));
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk0 = w + (size_t)b * bw;
        for (int j = 0; j < R; j++)
            _mm256_store_si256((__m256i *)(void *)codes[j], wcodes(type, blk0 + (size_t)j * ws));
        const __m128i h = row_scales(blk0, ws, R);
        _mm256_store_ps(dw, _mm256_cvtph_ps(h));
        __asm__("" : "+m"(codes), "+m"(dw));
        __m512i is[TG_QROWS512];
        for (int g = 0; g < G; g++) {
            const __m512i sums = _mm512_inserti64x4(
                _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(const void *)lo[g][b].sum)),
                _mm256_loadu_si256((const __m256i *)(const void *)hi[g][b].sum), 1);
            const __m512i start = _mm512_mullo_epi32(sums, bias); /* -bias * sum(x) */
            for (int j = 0; j < R; j++) is[g * R + j] = start;
        }
        for (int c = 0; c < TG_QK / 4; c++) {
            __m512i xv[2];
            for (int g = 0; g < G; g++) xv[g] = x16_pair(&lo[g][b], &hi[g][b], c);
            for (int j = 0; j < R; j++) {
                const __m512i wb = _mm512_set1_epi32(codes[j][c]);
                for (int g = 0; g < G; g++) is[g * R + j] = _mm512_dpbusd_epi32(is[g * R + j], wb, xv[g]);
            }
        }
        for (int g = 0; g < G; g++) {
            const __m512 dx = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(lo[g][b].d)),
                                                 _mm256_loadu_ps(hi[g][b].d), 1);
            for (int j = 0; j < R; j++)
                acc[g * R + j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(is[g * R + j]),
                                                 _mm512_mul_ps(_mm512_set1_ps(dw[j]), dx), acc[g * R + j]);
        }
    }
}

/* acc[g * R + j] lane t -> y of token 16 g + t (t < nt[g]), row j. */
TG_INLINE void store_quant512_rows(const __m512 *acc, const int R, const int G, const int nt[2], float *y,
                                   size_t ldy) {
    float out[TG_QROWS512][16];
    for (int g = 0; g < G; g++) {
        for (int j = 0; j < R; j++) _mm512_storeu_ps(out[j], acc[g * R + j]);
        for (int t = 0; t < nt[g]; t++)
            for (int j = 0; j < R; j++) y[(size_t)(g * 16 + t) * ldy + (size_t)j] = out[j][t];
    }
}

TG_INLINE void gemm_quant512_pass(tg_dtype type, const uint8_t *w, size_t w_stride, int64_t nr,
                                  const tg_q8x_pack8 *const *lo, const tg_q8x_pack8 *const *hi, int64_t nb,
                                  const int nt[2], float *yg, size_t ldy, const int RSTEP, const int G) {
    __m512 acc[TG_QROWS512];
    int64_t r = 0;
    for (; r + RSTEP <= nr; r += RSTEP) {
        gemm_quant512_rows(type, w + (size_t)r * w_stride, w_stride, lo, hi, nb, acc, RSTEP, G);
        store_quant512_rows(acc, RSTEP, G, nt, yg + r, ldy);
    }
    for (; r < nr; r++) {
        gemm_quant512_rows(type, w + (size_t)r * w_stride, w_stride, lo, hi, nb, acc, 1, G);
        store_quant512_rows(acc, 1, G, nt, yg + r, ldy);
    }
}

/* gemm_quant's contract, 32 tokens per pass over the weights (16 for the last one where fewer are left). */
TG_INLINE void gemm_quant512(tg_dtype type, const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8x_pack8 *xp,
                             int64_t nb, int64_t n, float *y, size_t ldy) {
    const int64_t groups = (n + 7) / 8;
    for (int64_t t0 = 0; t0 < n;) {
        const int64_t left = n - t0;
        const int G = left > 16 ? 2 : 1;
        const tg_q8x_pack8 *lo[2], *hi[2];
        int nt[2] = {0, 0};
        for (int g = 0; g < G; g++) {
            const int64_t first = t0 / 8 + 2 * g; /* the register's lower group */
            lo[g] = xp + (size_t)first * (size_t)nb;
            hi[g] = first + 1 < groups ? lo[g] + nb : lo[g];
            const int64_t in = left - 16 * g;
            nt[g] = (int)(in < 16 ? in : 16);
        }
        if (G == 2) /* constant sizes in each call, so that the sums stay in registers */
            gemm_quant512_pass(type, w, w_stride, nr, lo, hi, nb, nt, y + (size_t)t0 * ldy, ldy, TG_QROWS512_2, 2);
        else
            gemm_quant512_pass(type, w, w_stride, nr, lo, hi, nb, nt, y + (size_t)t0 * ldy, ldy, TG_QROWS512, 1);
        t0 += 16 * G;
    }
}
#define TG_GEMM_QUANT gemm_quant512
#else
#define TG_GEMM_QUANT gemm_quant
#endif

void tg_avx2_gemm_q8_0(const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8x_pack8 *xp, int64_t nb, int64_t n,
                       float *y, size_t ldy) {
    TG_GEMM_QUANT(TG_DT_Q8_0, w, w_stride, nr, xp, nb, n, y, ldy);
}

void tg_avx2_gemm_q4_0(const uint8_t *w, size_t w_stride, int64_t nr, const tg_q8x_pack8 *xp, int64_t nb, int64_t n,
                       float *y, size_t ldy) {
    TG_GEMM_QUANT(TG_DT_Q4_0, w, w_stride, nr, xp, nb, n, y, ldy);
}

#if TG_TILE_AVX512
/* ---- float weights on AVX-512: one 16-lane register = two rows' 8-lane accumulators ------------------------- *
 * Lanes 0-7 of acc[p][t] are row 2p's accumulator for token t, lanes 8-15 row 2p+1's: each lane sees exactly the
 * FMA sequence of the 8-lane AVX2 kernels (element k + i of the row times element k + i of the token, k in steps
 * of 8, in order), and each half is then reduced in the canonical order, so the bits are those of the decode
 * kernel. One register of weights (two rows, 8 columns, widened once) serves up to 8 tokens, and the token's 8
 * floats are broadcast to both halves straight from memory. */

/* Columns [k, k + 8) of rows w0 and w1 as fp32: w0's in lanes 0-7, w1's in lanes 8-15. */
TG_INLINE __m512 w16_pair(tg_dtype type, const uint8_t *w0, const uint8_t *w1, int64_t k) {
    if (type == TG_DT_F32) {
        const __m512d lo = _mm512_castpd256_pd512(_mm256_loadu_pd((const double *)(const void *)(w0 + 4 * k)));
        return _mm512_castpd_ps(_mm512_insertf64x4(lo, _mm256_loadu_pd((const double *)(const void *)(w1 + 4 * k)), 1));
    }
    const __m256i h = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(w0 + 2 * k))),
        _mm_loadu_si128((const __m128i *)(const void *)(w1 + 2 * k)), 1);
    if (type == TG_DT_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* Token t's columns [k, k + 8) in both halves. */
TG_INLINE __m512 x16_dup(const float *x, int64_t k) {
    return _mm512_castpd_ps(_mm512_broadcast_f64x4(_mm256_loadu_pd((const double *)(const void *)(x + k))));
}

/* NR (1..6) rows x NT (1..8) tokens; NP = (NR + 1) / 2 row pairs, an odd last row paired with itself (its upper
 * half is computed and dropped). Six rows: 24 accumulators, three weight registers and one activation register of
 * the 32; each token's eight floats are loaded once per three row pairs. */
TG_INLINE void tile_float512(tg_dtype type, const uint8_t *w, size_t ws, const uint8_t *x, size_t xs, int64_t cols,
                             float *y, size_t ldy, const int NR, const int NT, const float *wide, float *store) {
    const int NP = (NR + 1) / 2;
    const uint8_t *row[6];
    for (int r = 0; r < 6; r++) row[r] = w + (size_t)(r < NR ? r : NR - 1) * ws;
    __m512 acc[3][8];
    for (int p = 0; p < NP; p++)
        for (int t = 0; t < NT; t++) acc[p][t] = _mm512_setzero_ps();
    const int64_t c8 = cols & ~(int64_t)7;
    for (int64_t k = 0; k < c8; k += 8) {
        __m512 wv[3];
        for (int p = 0; p < NP; p++) { /* widened rows: the same 16 floats, loaded (or kept for the next tokens) */
            wv[p] = wide ? _mm512_load_ps(wide + (size_t)p * 2 * (size_t)cols + 2 * k)
                         : w16_pair(type, row[2 * p], row[2 * p + 1], k);
            if (store) _mm512_store_ps(store + (size_t)p * 2 * (size_t)cols + 2 * k, wv[p]);
        }
        for (int t = 0; t < NT; t++) {
            const __m512 xv = x16_dup((const float *)(const void *)(x + t * xs), k);
            for (int p = 0; p < NP; p++) acc[p][t] = _mm512_fmadd_ps(wv[p], xv, acc[p][t]);
        }
    }
    for (int t = 0; t < NT; t++) {
        const float *xt = (const float *)(const void *)(x + t * xs);
        __m256 h[8];
        for (int p = 0; p < NP; p++) {
            h[2 * p] = _mm512_castps512_ps256(acc[p][t]);
            h[2 * p + 1] = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc[p][t]), 1));
        }
        for (int r = 2 * NP; r < 8; r++) h[r] = h[0];
        float s[8];
        _mm_storeu_ps(s, tg_reduce4_ps(h[0], h[1], h[2], h[3])); /* each output lane reduces one input: order kept */
        if (NR > 4) _mm_storeu_ps(s + 4, tg_reduce4_ps(h[4], h[5], h[6], h[7]));
        for (int r = 0; r < NR; r++) {
            if (c8 < cols) s[r] += tg_tail(type, row[r], xt, c8, cols); /* never with wide (cols % 8 == 0) */
            y[(size_t)t * ldy + (size_t)r] = s[r];
        }
    }
}

#endif

/* Every tile shape of every float type, instantiated with constant sizes; tg_avx2_tile_<type> picks by shape. */
typedef void (*tile_fn)(const uint8_t *, size_t, const uint8_t *, size_t, int64_t, float *, size_t);
#if TG_TILE_AVX512
#define TG_TILE_CALL(type, w, ws, x, xs, cols, y, ldy, R, T) tile_float512(type, w, ws, x, xs, cols, y, ldy, R, T, NULL, NULL)
#else
#define TG_TILE_CALL(type, w, ws, x, xs, cols, y, ldy, R, T) tile_float(type, w, ws, x, xs, cols, y, ldy, R, T)
#endif
#define TG_TILE_FN(name, type, R, T)                                                                                \
    static void tile_##name##_##R##x##T(const uint8_t *w, size_t ws, const uint8_t *x, size_t xs, int64_t cols,    \
                                         float *y, size_t ldy) {                                                   \
        TG_TILE_CALL(type, w, ws, x, xs, cols, y, ldy, R, T);                                                      \
    }
#if TG_TILE_AVX512
#define TG_TILE_ROW(name, type, R)                                                                                  \
    TG_TILE_FN(name, type, R, 1) TG_TILE_FN(name, type, R, 2) TG_TILE_FN(name, type, R, 3)                         \
    TG_TILE_FN(name, type, R, 4) TG_TILE_FN(name, type, R, 5) TG_TILE_FN(name, type, R, 6)                         \
    TG_TILE_FN(name, type, R, 7) TG_TILE_FN(name, type, R, 8)
#define TG_TILE_SHAPES(name, R)                                                                                     \
    {tile_##name##_##R##x1, tile_##name##_##R##x2, tile_##name##_##R##x3, tile_##name##_##R##x4,                   \
     tile_##name##_##R##x5, tile_##name##_##R##x6, tile_##name##_##R##x7, tile_##name##_##R##x8}
#else
#define TG_TILE_ROW(name, type, R)                                                                                  \
    TG_TILE_FN(name, type, R, 1) TG_TILE_FN(name, type, R, 2) TG_TILE_FN(name, type, R, 3) TG_TILE_FN(name, type, R, 4)
#define TG_TILE_SHAPES(name, R)                                                                                     \
    {tile_##name##_##R##x1, tile_##name##_##R##x2, tile_##name##_##R##x3, tile_##name##_##R##x4}
#endif
#if TG_TILE_MAX_ROWS > 4
#define TG_TILE_ROWS_5_6(name, type) TG_TILE_ROW(name, type, 5) TG_TILE_ROW(name, type, 6)
#define TG_TILE_SHAPES_5_6(name) , TG_TILE_SHAPES(name, 5), TG_TILE_SHAPES(name, 6)
#else
#define TG_TILE_ROWS_5_6(name, type)
#define TG_TILE_SHAPES_5_6(name)
#endif
#define TG_TILE_TYPE(name, type)                                                                                    \
    TG_TILE_ROW(name, type, 1) TG_TILE_ROW(name, type, 2) TG_TILE_ROW(name, type, 3) TG_TILE_ROW(name, type, 4)     \
    TG_TILE_ROWS_5_6(name, type)                                                                                    \
    void tg_avx2_tile_##name(const uint8_t *w, size_t w_stride, int nr, const uint8_t *x, size_t x_stride, int nt,  \
                             int64_t cols, float *y, size_t ldy) {                                                 \
        static const tile_fn shapes[TG_TILE_MAX_ROWS][TG_TILE_MAX_VECS] = {                                        \
            TG_TILE_SHAPES(name, 1), TG_TILE_SHAPES(name, 2), TG_TILE_SHAPES(name, 3),                             \
            TG_TILE_SHAPES(name, 4) TG_TILE_SHAPES_5_6(name)};                                                     \
        if (nr < 1 || nt < 1 || nr > TG_TILE_MAX_ROWS || nt > TG_TILE_MAX_VECS) return;                            \
        shapes[nr - 1][nt - 1](w, w_stride, x, x_stride, cols, y, ldy);                                            \
    }
TG_TILE_TYPE(f32, TG_DT_F32)
TG_TILE_TYPE(f16, TG_DT_F16)
TG_TILE_TYPE(bf16, TG_DT_BF16)

#if TG_TILE_AVX512
/* The same shapes on widened rows (the row pointers only serve the tail, which widened rows never have). */
#define TG_WIDE_FN(R, T)                                                                                           \
    static void wide_##R##x##T(const float *wp, const uint8_t *x, size_t xs, int64_t cols, float *y, size_t ldy) { \
        tile_float512(TG_DT_F32, (const uint8_t *)wp, 0, x, xs, cols, y, ldy, R, T, wp, NULL);                     \
    }
#define TG_WIDE_ROW(R)                                                                                             \
    TG_WIDE_FN(R, 1) TG_WIDE_FN(R, 2) TG_WIDE_FN(R, 3) TG_WIDE_FN(R, 4) TG_WIDE_FN(R, 5) TG_WIDE_FN(R, 6)          \
    TG_WIDE_FN(R, 7) TG_WIDE_FN(R, 8)
#define TG_WIDE_SHAPES(R) {wide_##R##x1, wide_##R##x2, wide_##R##x3, wide_##R##x4, wide_##R##x5, wide_##R##x6, wide_##R##x7, wide_##R##x8}
TG_WIDE_ROW(1) TG_WIDE_ROW(2) TG_WIDE_ROW(3) TG_WIDE_ROW(4) TG_WIDE_ROW(5) TG_WIDE_ROW(6)
void tg_avx512_tile_wide(const float *wp, int nr, const uint8_t *x, size_t x_stride, int nt, int64_t cols, float *y,
                         size_t ldy) {
    typedef void (*wide_fn)(const float *, const uint8_t *, size_t, int64_t, float *, size_t);
    static const wide_fn shapes[6][8] = {TG_WIDE_SHAPES(1), TG_WIDE_SHAPES(2), TG_WIDE_SHAPES(3),
                                         TG_WIDE_SHAPES(4), TG_WIDE_SHAPES(5), TG_WIDE_SHAPES(6)};
    if (nr < 1 || nt < 1 || nr > 6 || nt > 8) return;
    shapes[nr - 1][nt - 1](wp, x, x_stride, cols, y, ldy);
}
#undef TG_WIDE_SHAPES
#undef TG_WIDE_ROW
#undef TG_WIDE_FN

/* The first eight tokens' tile on the stored rows, keeping the rows widened (tg_avx512_tile_widen). */
#define TG_WIDEN_FN(name, type, R)                                                                                 \
    static void widen_##name##_##R(const uint8_t *w, size_t ws, const uint8_t *x, size_t xs, int64_t cols,         \
                                   float *y, size_t ldy, float *dst) {                                             \
        tile_float512(type, w, ws, x, xs, cols, y, ldy, R, 8, NULL, dst);                                          \
    }
#define TG_WIDEN_TYPE(name, type)                                                                                  \
    TG_WIDEN_FN(name, type, 1) TG_WIDEN_FN(name, type, 2) TG_WIDEN_FN(name, type, 3) TG_WIDEN_FN(name, type, 4)    \
    TG_WIDEN_FN(name, type, 5) TG_WIDEN_FN(name, type, 6)
TG_WIDEN_TYPE(f32, TG_DT_F32)
TG_WIDEN_TYPE(f16, TG_DT_F16)
TG_WIDEN_TYPE(bf16, TG_DT_BF16)
void tg_avx512_tile_widen(tg_dtype type, const uint8_t *w, size_t w_stride, int nr, const uint8_t *x, size_t x_stride,
                          int64_t cols, float *y, size_t ldy, float *dst) {
    typedef void (*widen_fn)(const uint8_t *, size_t, const uint8_t *, size_t, int64_t, float *, size_t, float *);
#define TG_WIDEN_ROW(name) {widen_##name##_1, widen_##name##_2, widen_##name##_3, widen_##name##_4, widen_##name##_5, widen_##name##_6}
    static const widen_fn shapes[3][6] = {TG_WIDEN_ROW(f32), TG_WIDEN_ROW(f16), TG_WIDEN_ROW(bf16)};
#undef TG_WIDEN_ROW
    const int ti = type == TG_DT_F32 ? 0 : type == TG_DT_F16 ? 1 : type == TG_DT_BF16 ? 2 : -1;
    if (ti < 0 || nr < 1 || nr > 6) return;
    shapes[ti][nr - 1](w, w_stride, x, x_stride, cols, y, ldy, dst);
}
#undef TG_WIDEN_TYPE
#undef TG_WIDEN_FN
#endif
#undef TG_TILE_TYPE
#undef TG_TILE_SHAPES
#undef TG_TILE_SHAPES_5_6
#undef TG_TILE_ROWS_5_6
#undef TG_TILE_ROW
#undef TG_TILE_FN
#undef TG_TILE_CALL

void tg_avx2_quantize_q8x(const float *x, tg_q8x_block *dst, int64_t n) {
    const __m256 sign_mask = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < n / TG_QK; b++, x += TG_QK) {
        __m256 v[4];
        __m256 amax = _mm256_setzero_ps();
        for (int i = 0; i < 4; i++) {
            v[i] = _mm256_loadu_ps(x + 8 * i);
            amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_mask, v[i]));
        }
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        float am = _mm_cvtss_f32(m);
        const float d = am / 127.0f;
        const __m256 id = _mm256_set1_ps(am != 0.0f ? 127.0f / am : 0.0f);
        __m256i qi[4];
        for (int i = 0; i < 4; i++) {
            __m256 s = _mm256_round_ps(_mm256_mul_ps(v[i], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            s = _mm256_min_ps(_mm256_max_ps(s, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
            qi[i] = _mm256_cvtps_epi32(s);
        }
        /* int32 -> int8 with the two packs, which interleave 128-bit lanes; a final permute restores order. */
        __m256i p01 = _mm256_packs_epi32(qi[0], qi[1]);
        __m256i p23 = _mm256_packs_epi32(qi[2], qi[3]);
        __m256i p = _mm256_packs_epi16(p01, p23);
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)(void *)dst[b].q, p);
        __m256i s32 = _mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3]));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
        dst[b].sum = _mm_cvtsi128_si32(s4);
        /* the scale and the offset term in fp16, as llama.cpp's blocks hold them (fp32 where fp16 overflows) */
        const __m128 ds = _mm_setr_ps(d, d * (float)dst[b].sum, 0.0f, 0.0f);
        const __m128 h = _mm_cvtph_ps(_mm_cvtps_ph(ds, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        const __m128 inf = _mm_set1_ps(INFINITY);
        const __m128 r = _mm_blendv_ps(h, ds, _mm_cmpeq_ps(_mm_andnot_ps(_mm_set1_ps(-0.0f), h), inf));
        dst[b].d = _mm_cvtss_f32(r);
        dst[b].s = _mm_cvtss_f32(_mm_movehdup_ps(r));
    }
}

#else
typedef int tg_matmul_avx2_unused; /* ISO C forbids an empty translation unit */
#endif
