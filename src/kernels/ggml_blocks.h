/* ggml_blocks.h — internal to src/kernels: the GGUF block types beyond Q8_0 / Q4_0 (Q4_1, Q5_0, Q5_1, the K-quants
 * Q2_K..Q6_K, IQ4_NL): their sizes, reference row decoders and non-finite finders, for the rows of types.c.
 *
 * Layouts (ggml-common.h; every field little-endian, blocks packed, no alignment beyond 1 byte):
 *   Q4_1   20 B / 32:  d, m (fp16); qs[16] nibbles as Q4_0            x = d * q + m
 *   Q5_0   22 B / 32:  d; qh (u32, bit j = 5th bit of element j); qs[16]      x = d * (q - 16)
 *   Q5_1   24 B / 32:  d, m; qh; qs[16]                                x = d * q + m
 *   Q2_K   84 B / 256: scales[16] (low nibble scale, high min, per 16); qs[64] (2 bits); d, dmin
 *   Q3_K  110 B / 256: hmask[32]; qs[64]; scales[12] (16 six-bit scales, minus 32); d
 *   Q4_K  144 B / 256: d, dmin; scales[12] (8 six-bit scales and mins, per 32); qs[128]
 *   Q5_K  176 B / 256: d, dmin; scales[12]; qh[32]; qs[128]
 *   Q6_K  210 B / 256: ql[128]; qh[64]; scales[16] (int8, per 16); d
 *   IQ4_NL 18 B / 32:  d; qs[16] nibbles indexing a fixed 16-value table
 * The decoders compute exactly ggml's dequantize_row_* products and sums in fp32, one rounding per operation in
 * the same order (the scale products first: (d * sc) * q - dmin * m), so they agree bit for bit with ggml and with
 * gguf-py's numpy dequantisers. */
#ifndef TG_KERNELS_GGML_BLOCKS_H
#define TG_KERNELS_GGML_BLOCKS_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/tensor.h"

#define TG_QK_K 256 /* elements per K-quant super-block */

#define TG_Q4_1_BYTES 20
#define TG_Q5_0_BYTES 22
#define TG_Q5_1_BYTES 24
#define TG_Q2_K_BYTES 84
#define TG_Q3_K_BYTES 110
#define TG_Q4_K_BYTES 144
#define TG_Q5_K_BYTES 176
#define TG_Q6_K_BYTES 210
#define TG_IQ4_NL_BYTES 18

/* out[n] = the n elements (a multiple of the type's block) of a row at src (any alignment). */
void tg_decode_q4_1(const uint8_t *src, float *out, int64_t n);
void tg_decode_q5_0(const uint8_t *src, float *out, int64_t n);
void tg_decode_q5_1(const uint8_t *src, float *out, int64_t n);
void tg_decode_q2_k(const uint8_t *src, float *out, int64_t n);
void tg_decode_q3_k(const uint8_t *src, float *out, int64_t n);
void tg_decode_q4_k(const uint8_t *src, float *out, int64_t n);
void tg_decode_q5_k(const uint8_t *src, float *out, int64_t n);
void tg_decode_q6_k(const uint8_t *src, float *out, int64_t n);
void tg_decode_iq4_nl(const uint8_t *src, float *out, int64_t n);

/* Index of the first element that decodes non-finite, or -1: a bad fp16 d or dmin spoils its whole block (Inf * 0
 * is NaN), and finite scales never overflow fp32, so this is a bit test of the scale fields. */
int64_t tg_non_finite_q4_1(const uint8_t *src, int64_t n);
int64_t tg_non_finite_q5_0(const uint8_t *src, int64_t n);
int64_t tg_non_finite_q5_1(const uint8_t *src, int64_t n);
int64_t tg_non_finite_q2_k(const uint8_t *src, int64_t n);
int64_t tg_non_finite_q3_k(const uint8_t *src, int64_t n);
int64_t tg_non_finite_q4_k(const uint8_t *src, int64_t n);
int64_t tg_non_finite_q5_k(const uint8_t *src, int64_t n);
int64_t tg_non_finite_q6_k(const uint8_t *src, int64_t n);
int64_t tg_non_finite_iq4_nl(const uint8_t *src, int64_t n);

/* The byte offsets of the fp16 scale fields of a block of type t (at[0] = d, at[1] = dmin or m, or -1 if it has
 * one); false if t is not one of these types. For tests and tools that make random valid blocks (random codes,
 * chosen scales): tinygpt has no encoder for them. */
bool tg_ggml_scale_fields(tg_dtype t, int at[2]);

/* The 6-bit scale and min of sub-block j < 8 of a Q4_K / Q5_K scales[12] field (ggml's get_scale_min_k4). */
static inline void tg_k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* The signed scale (-32..31) of sub-block j < 16 of a Q3_K scales[12] field. */
static inline int tg_q3k_scale(int j, const uint8_t *s) {
    const int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
    const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | hi << 4) - 32;
}

#endif
