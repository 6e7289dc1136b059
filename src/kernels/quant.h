/* quant.h — the Q8_0 / Q4_0 block formats: quantising and dequantising rows, and the Q8 forms of activations (32-element
 * blocks for Q8_0 / Q4_0, 256-element super-blocks for the K-quants). */
#ifndef TG_KERNELS_QUANT_H
#define TG_KERNELS_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/tensor.h"

#define TG_QK 32 /* elements per Q8_0 / Q4_0 block, and per block of the Q8 activation form */

/* On-disk blocks (ggml's exact layouts; no padding, 2-byte alignment). Row data in a file may sit at any byte
 * offset, so the kernels read blocks through byte pointers and memcpy, never through these structs; the structs
 * document the layout and are used for buffers we allocate ourselves. */
typedef struct {
    uint16_t d;        /* fp16 scale */
    int8_t q[TG_QK];   /* x[j] = d * q[j] */
} tg_block_q8_0;       /* 34 bytes */

typedef struct {
    uint16_t d;            /* fp16 scale */
    uint8_t q[TG_QK / 2];  /* byte j: low nibble = element j, high nibble = element j + 16; x = d * (nibble - 8) */
} tg_block_q4_0;           /* 18 bytes */

/* One block of an activation vector quantised for the integer dot-product path, as llama.cpp's AVX2
 * quantize_row_q8_0 / quantize_row_q8_1 make their blocks: with d32 = max|x| / 127 and id = 127 / max|x| in fp32,
 * q = round-half-even(x * id), the scale d = fp16(d32) (block_q8_0.d, block_q8_1.d) and the offset term
 * s = fp16(d32 * sum) (block_q8_1.s, which Q4_1 / Q5_1 weights' m multiplies), both kept here widened to fp32. So the
 * integer sums and the scale products of every dot product are llama.cpp's. Where fp16 would overflow (d32 > 65504,
 * i.e. max|x| above 8.3e6, or |d32 * sum| above 65504), where llama.cpp's result is Inf or NaN, the fp32 value is
 * kept instead. Error per element: |x[j] - d * q[j]| <= d32 / 2 + 127 |d - d32|, with |d - d32| <= 2^-11 d32 (or
 * 2^-25 where d is an fp16 subnormal). */
typedef struct {
    float d;         /* fp16(max|x| / 127), widened */
    float s;         /* fp16((max|x| / 127) * sum), widened */
    int32_t sum;     /* sum of q[j]: lets Q4_0 kernels use the unsigned nibbles and subtract 8 * sum exactly */
    int8_t q[TG_QK];
} tg_q8x_block; /* 44 bytes */

/* Eight activation rows' blocks b side by side for the prefill kernels: the same codes as tg_q8x_block, interleaved
 * four bytes at a time (q[c][t][i] = element 4c + i of token t), so that one 32-byte load holds four consecutive
 * elements of eight tokens. Tokens missing from the last group of a chunk are all zero (d = 0, sum = 0). */
typedef struct {
    int8_t q[TG_QK / 4][8][4];
    float d[8];
    int32_t sum[8];
} tg_q8x_pack8; /* 320 bytes */

/* One 256-element super-block of an activation vector quantised for the K-quant weights (Q2_K..Q6_K): one fp32
 * scale for the 256 elements (q = round-half-even(x * id) with id = 127 / max|x|, and d = 1 / id, both in fp32 — the
 * codes and the scale llama.cpp's quantize_row_q8_K gives, up to the sign of both, so that the integer dot products
 * and the per-super-block scales are llama.cpp's; |x[j] - d * q[j]| <= d / 2 up to fp32 rounding) and the
 * sums of the codes of each 16-element group, which the K-quants' offsets and mins multiply (their sub-blocks are 16
 * or 32 elements, always whole groups). The integer dot products of a super-block stay exact in int32. */
#define TG_Q8K_ELEMS 256
typedef struct {
    float d;
    int16_t bsums[TG_Q8K_ELEMS / 16]; /* bsums[g] = q[16g] + ... + q[16g + 15] */
    int8_t q[TG_Q8K_ELEMS];
} tg_q8k_block; /* 292 bytes */

/* Interleaves the blocks of nt <= 8 rows (row t's blocks at src + t * stride blocks) into nb packs at dst. */
void tg_pack8_q8x(const tg_q8x_block *src, int64_t stride, int nt, int64_t nb, tg_q8x_pack8 *dst);

/* Quantises x[n] (n a multiple of 32) into n/32 Q8_0 blocks at dst (tg_row_bytes(TG_DT_Q8_0, n) bytes, any
 * alignment): d = fp16(max|x| / 127), q = round-half-even(x / d) clamped to [-127, 127]. An all-zero block gets
 * d = 0 and q = 0. */
void tg_quantize_row_q8_0(const float *x, void *dst, int64_t n);
/* Quantises x[n] (n a multiple of 32) into n/32 Q4_0 blocks at dst: with m the element of largest magnitude,
 * d = fp16(m / -8) and nibble = clamp(round(x / d) + 8, 0, 15), so m maps exactly to nibble 0. */
void tg_quantize_row_q4_0(const float *x, void *dst, int64_t n);

/* Quantises x[n] (n a multiple of 32) into n/32 activation blocks (see tg_q8x_block); scalar reference. */
void tg_quantize_q8x_ref(const float *x, tg_q8x_block *dst, int64_t n);
/* Same result bit for bit as tg_quantize_q8x_ref, by the kernel table in use (kernels.h). */
void tg_quantize_q8x(const float *x, tg_q8x_block *dst, int64_t n);

/* Quantises x[n] (n a multiple of 256) into n/256 super-blocks (see tg_q8k_block); scalar reference. */
void tg_quantize_q8k_ref(const float *x, tg_q8k_block *dst, int64_t n);
/* Same result bit for bit as tg_quantize_q8k_ref, by the kernel table in use (kernels.h). */
void tg_quantize_q8k(const float *x, tg_q8k_block *dst, int64_t n);

#endif
