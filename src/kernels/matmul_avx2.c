/* matmul_avx2.c — AVX2 + FMA + F16C micro-kernels: a tile of nr weight rows against nt activation vectors.
 *
 * Float weights (F32, F16, BF16) are widened to fp32 eight at a time and multiplied with float activations by FMA.
 * Quantised weights (Q8_0, Q4_0) use integer dot products against activations that the caller quantised once into
 * tg_q8x_block form: per 32-element block, sum(qw * qx) is exact in int32 and is scaled by dw * dx in fp32. Every
 * tile body is one always-inline function with constant tile sizes, instantiated for the shapes tg_avx2_tile
 * accepts, so the accumulators live in registers. */
#include "kernels/avx2.h"

#if TG_KERNELS_AVX2

#include <immintrin.h>
#include <string.h>

#include "util/half.h"

#define TG_INLINE static inline __attribute__((always_inline))

TG_INLINE float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

TG_INLINE float load_f32(const uint8_t *p) {
    float v;
    memcpy(&v, p, 4);
    return v;
}

TG_INLINE uint16_t load_u16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* Eight weights starting at element k of a float-type row, widened to fp32. */
TG_INLINE __m256 load8_w(tg_dtype type, const uint8_t *row, int64_t k) {
    if (type == TG_DT_F32) return _mm256_loadu_ps((const float *)(const void *)(row + 4 * k));
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)(row + 2 * k));
    if (type == TG_DT_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); /* BF16 */
}

TG_INLINE float load1_w(tg_dtype type, const uint8_t *row, int64_t k) {
    if (type == TG_DT_F32) return load_f32(row + 4 * k);
    uint16_t h = load_u16(row + 2 * k);
    return type == TG_DT_F16 ? tg_f16_to_f32(h) : tg_bf16_to_f32(h);
}

/* Float weights: NR rows x NT vectors, 8 columns per step, scalar tail for cols % 8. */
TG_INLINE void tile_float(tg_dtype type, const uint8_t *w, size_t ws, const uint8_t *x, size_t xs, int64_t cols,
                          float *y, size_t ldy, const int NR, const int NT) {
    __m256 acc[TG_TILE_MAX_ROWS][TG_TILE_MAX_VECS];
    for (int r = 0; r < NR; r++)
        for (int t = 0; t < NT; t++) acc[r][t] = _mm256_setzero_ps();
    int64_t k = 0;
    for (; k + 8 <= cols; k += 8) {
        __m256 xv[TG_TILE_MAX_VECS];
        for (int t = 0; t < NT; t++) xv[t] = _mm256_loadu_ps((const float *)(const void *)(x + t * xs) + k);
        for (int r = 0; r < NR; r++) {
            __m256 wv = load8_w(type, w + r * ws, k);
            for (int t = 0; t < NT; t++) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
        }
    }
    for (int r = 0; r < NR; r++) {
        for (int t = 0; t < NT; t++) {
            const float *xt = (const float *)(const void *)(x + t * xs);
            float s = hsum_ps(acc[r][t]);
            for (int64_t j = k; j < cols; j++) s += load1_w(type, w + r * ws, j) * xt[j];
            y[(size_t)t * ldy + (size_t)r] = s;
        }
    }
}

/* The 32 weights of one block in element order: signed int8 for Q8_0; for Q4_0 the raw nibbles 0..15 (the -8
 * offset is applied afterwards as an exact integer correction). */
TG_INLINE __m256i load_qblock(tg_dtype type, const uint8_t *blk) {
    if (type == TG_DT_Q8_0) return _mm256_loadu_si256((const __m256i *)(const void *)(blk + 2));
    __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(blk + 2));
    __m128i lo = _mm_and_si128(b, _mm_set1_epi8(0x0f));
    __m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(0x0f));
    return _mm256_set_m128i(hi, lo);
}

/* Quantised weights: NR rows x NT vectors of tg_q8x_block, one 32-element block per step. maddubs multiplies an
 * unsigned by a signed byte vector. Q8_0: |w| times x carrying w's sign; pair sums stay within int16
 * (2 * 128 * 127). Q4_0: nibble times x (pair sums <= 2 * 15 * 127), then sum((n - 8) x) = sum(n x) - 8 sum(x),
 * the correction subtracted in int32 from lane 0, so the block's integer dot product is exact either way. */
TG_INLINE void tile_quant(tg_dtype type, const uint8_t *w, size_t ws, const uint8_t *x, size_t xs, int64_t cols,
                          float *y, size_t ldy, const int NR, const int NT) {
    const size_t bw = type == TG_DT_Q8_0 ? sizeof(tg_block_q8_0) : sizeof(tg_block_q4_0);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[TG_TILE_MAX_ROWS][TG_TILE_MAX_VECS];
    for (int r = 0; r < NR; r++)
        for (int t = 0; t < NT; t++) acc[r][t] = _mm256_setzero_ps();
    const int64_t nb = cols / TG_QK;
    for (int64_t b = 0; b < nb; b++) {
        __m256i wq[TG_TILE_MAX_ROWS], wa[TG_TILE_MAX_ROWS];
        float dw[TG_TILE_MAX_ROWS];
        for (int r = 0; r < NR; r++) {
            const uint8_t *blk = w + r * ws + (size_t)b * bw;
            wq[r] = load_qblock(type, blk);
            wa[r] = type == TG_DT_Q8_0 ? _mm256_sign_epi8(wq[r], wq[r]) : wq[r];
            dw[r] = _cvtsh_ss(load_u16(blk));
        }
        for (int t = 0; t < NT; t++) {
            const tg_q8x_block *xb = (const tg_q8x_block *)(const void *)(x + t * xs) + b;
            __m256i xq = _mm256_loadu_si256((const __m256i *)(const void *)xb->q);
            __m256i corr = _mm256_setr_epi32(8 * xb->sum, 0, 0, 0, 0, 0, 0, 0);
            for (int r = 0; r < NR; r++) {
                __m256i p32;
                if (type == TG_DT_Q8_0) {
                    p32 = _mm256_madd_epi16(_mm256_maddubs_epi16(wa[r], _mm256_sign_epi8(xq, wq[r])), ones);
                } else {
                    p32 = _mm256_sub_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(wa[r], xq), ones), corr);
                }
                acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p32), _mm256_set1_ps(dw[r] * xb->d), acc[r][t]);
            }
        }
    }
    for (int r = 0; r < NR; r++)
        for (int t = 0; t < NT; t++) y[(size_t)t * ldy + (size_t)r] = hsum_ps(acc[r][t]);
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
