/* matmul_avx2.c — the prefill tiles: a few weight rows against a few activation vectors (AVX2 + FMA + F16C, and
 * AVX-512 VNNI's 256-bit dpbusd where the target has it).
 *
 * Float weights (F32, F16, BF16) are widened to fp32 eight at a time and multiplied with float activations by FMA.
 * Quantised weights (Q8_0, Q4_0) use integer dot products against activations that the caller quantised once into
 * tg_q8x_block form. Both follow the canonical arithmetic order of avx2_inline.h, so a tile gives the same bits as
 * the decode kernel for every (row, activation) pair. Every tile body is one always-inline function with constant
 * tile sizes, instantiated for the shapes tg_avx2_tile accepts, so the accumulators live in registers. */
#include "kernels/avx2.h"

#if TG_KERNELS_AVX2

#include "kernels/avx2_inline.h"

/* Float weights: NR rows x NT vectors, one accumulator per (row, vector) pair, 8 columns per step; the canonical
 * reduction and tail of avx2_inline.h. */
TG_INLINE void tile_float(tg_dtype type, const uint8_t *w, size_t ws, const uint8_t *x, size_t xs, int64_t cols,
                          float *y, size_t ldy, const int NR, const int NT) {
    __m256 acc[TG_TILE_MAX_ROWS][TG_TILE_MAX_VECS];
    for (int r = 0; r < NR; r++)
        for (int t = 0; t < NT; t++) acc[r][t] = _mm256_setzero_ps();
    const int64_t c8 = cols & ~(int64_t)7;
    for (int64_t k = 0; k < c8; k += 8) {
        __m256 xv[TG_TILE_MAX_VECS];
        for (int t = 0; t < NT; t++) xv[t] = _mm256_loadu_ps((const float *)(const void *)(x + t * xs) + k);
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

/* Quantised weights: NR rows x NT vectors of tg_q8x_block (NR * NT <= 8), one 32-element block per step. The pairs'
 * integer dot products are reduced together into one vector (lane r * NT + t), then converted and scaled by
 * d_w(r) * d_x(t) with one FMA: per pair exactly the canonical arithmetic of the decode kernel. */
TG_INLINE void tile_quant(tg_dtype type, const uint8_t *w, size_t ws, const uint8_t *x, size_t xs, int64_t cols,
                          float *y, size_t ldy, const int NR, const int NT) {
    const size_t bw = type == TG_DT_Q8_0 ? sizeof(tg_block_q8_0) : sizeof(tg_block_q4_0);
    const int32_t bias = tg_qbias(type);
    __m256 acc = _mm256_setzero_ps();
    const int64_t nb = cols / TG_QK;
    for (int64_t b = 0; b < nb; b++) {
        const tg_q8x_block *xb[TG_TILE_MAX_VECS];
        __m256i xq[TG_TILE_MAX_VECS];
        for (int t = 0; t < NT; t++) {
            xb[t] = (const tg_q8x_block *)(const void *)(x + t * xs) + b;
            xq[t] = _mm256_loadu_si256((const __m256i *)(const void *)xb[t]->q);
        }
        __m256i d[8];
        float sc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        int32_t bi[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int r = 0; r < NR; r++) {
            const uint8_t *blk = w + r * ws + (size_t)b * bw;
            const __m256i wq = tg_qload(type, blk);
            const float dw = tg_f16_to_f32(tg_ld16(blk));
            for (int t = 0; t < NT; t++) {
                d[r * NT + t] = tg_qdot(type, wq, xq[t]);
                sc[r * NT + t] = dw * xb[t]->d;
                bi[r * NT + t] = bias * xb[t]->sum;
            }
        }
        for (int p = NR * NT; p < 8; p++) d[p] = _mm256_setzero_si256();
        __m256i s = tg_reduce8_epi32(d);
        s = _mm256_sub_epi32(s, _mm256_loadu_si256((const __m256i *)(const void *)bi));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_loadu_ps(sc), acc);
    }
    float out[8];
    _mm256_storeu_ps(out, acc);
    for (int r = 0; r < NR; r++)
        for (int t = 0; t < NT; t++) y[(size_t)t * ldy + (size_t)r] = out[r * NT + t];
}

TG_INLINE void tile_any(tg_dtype type, const uint8_t *w, size_t ws, const uint8_t *x, size_t xs, int64_t cols,
                        float *y, size_t ldy, const int NR, const int NT) {
    switch (type) {
    case TG_DT_F32: tile_float(TG_DT_F32, w, ws, x, xs, cols, y, ldy, NR, NT); break;
    case TG_DT_F16: tile_float(TG_DT_F16, w, ws, x, xs, cols, y, ldy, NR, NT); break;
    case TG_DT_BF16: tile_float(TG_DT_BF16, w, ws, x, xs, cols, y, ldy, NR, NT); break;
    case TG_DT_Q8_0: tile_quant(TG_DT_Q8_0, w, ws, x, xs, cols, y, ldy, NR, NT); break;
    case TG_DT_Q4_0: tile_quant(TG_DT_Q4_0, w, ws, x, xs, cols, y, ldy, NR, NT); break;
    default: break;
    }
}

#define TG_TILE_FN(R, T)                                                                                            \
    static void tile_##R##x##T(tg_dtype type, const uint8_t *w, size_t ws, const uint8_t *x, size_t xs,            \
                               int64_t cols, float *y, size_t ldy) {                                               \
        tile_any(type, w, ws, x, xs, cols, y, ldy, R, T);                                                          \
    }
TG_TILE_FN(1, 1)
TG_TILE_FN(2, 1)
TG_TILE_FN(3, 1)
TG_TILE_FN(4, 1)
TG_TILE_FN(1, 2)
TG_TILE_FN(1, 3)
TG_TILE_FN(1, 4)
TG_TILE_FN(2, 2)
TG_TILE_FN(2, 3)
TG_TILE_FN(2, 4)
#undef TG_TILE_FN

void tg_avx2_tile(tg_dtype type, const uint8_t *w, size_t w_stride, int nr, const uint8_t *x, size_t x_stride, int nt,
                  int64_t cols, float *y, size_t ldy) {
    typedef void (*tile_fn)(tg_dtype, const uint8_t *, size_t, const uint8_t *, size_t, int64_t, float *, size_t);
    static const tile_fn table[TG_TILE_MAX_ROWS][TG_TILE_MAX_VECS] = {
        {tile_1x1, tile_1x2, tile_1x3, tile_1x4},
        {tile_2x1, tile_2x2, tile_2x3, tile_2x4},
        {tile_3x1, NULL, NULL, NULL},
        {tile_4x1, NULL, NULL, NULL},
    };
    if (nr < 1 || nt < 1 || nr > TG_TILE_MAX_ROWS || nt > TG_TILE_MAX_VECS) return;
    tile_fn fn = table[nr - 1][nt - 1];
    if (fn) fn(type, w, w_stride, x, x_stride, cols, y, ldy);
}

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
        dst[b].d = am / 127.0f;
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
    }
}

#else
typedef int tg_matmul_avx2_unused; /* ISO C forbids an empty translation unit */
#endif
