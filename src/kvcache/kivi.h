/* kivi.h — KIVI's asymmetric affine quantisation (int8 / int4 / int2): the q-range table, fitting an fp16
 * (scale, zero) pair to a range, quantising and packing rows, per-channel groups, and dequantising rows (the
 * quantised sinks' round trip; the tests' reference). Knows nothing of caches: the KIVI store codecs
 * (codec_kivi_*.c) lay the codes out, and attention reads them in place through segments (attend.c, and the AVX2
 * kernels of attend_avx2.c, which widen eight codes at a time in registers).
 *
 * Conventions. A quantised element is stored as the unsigned code u = q - qmin in [0, qmax - qmin], so that
 *   q = clamp(round((x - zero) / scale + qmin), qmin, qmax)   and   x' = (q - qmin) * scale + zero = u * scale + zero.
 * Packing: int8 one code per byte; int4 two per byte (element 2i in the low nibble, 2i+1 in the high one); int2 four
 * per byte (element 4i + j in bits 2j..2j+1). scale and zero are stored as fp16 bit patterns and widened to fp32
 * before any arithmetic (the design note's bug class 2). */
#ifndef TG_KVCACHE_KIVI_H
#define TG_KVCACHE_KIVI_H

#include <stdbool.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>

#include "tinygpt.h"

/* The q-range of each integer precision, spelled out (never inferred from a bit count: bug class 3). */
#define TG_KIVI_INT8_QMIN (-128)
#define TG_KIVI_INT8_QMAX 127
#define TG_KIVI_INT4_QMIN (-8)
#define TG_KIVI_INT4_QMAX 7
#define TG_KIVI_INT2_QMIN (-2)
#define TG_KIVI_INT2_QMAX 1

/* The smallest scale: an all-equal slice gets this instead of 0 (bug class 1). */
#define TG_KIVI_SCALE_FLOOR 1e-5f

typedef struct {
    tg_kv_precision precision;
    int bits;       /* storage bits per element: 8, 4, 2 */
    int qmin, qmax; /* inclusive integer range; qmax - qmin + 1 == 1 << bits */
    bool clip;      /* grids fitted to a slice by least squared error (tg_kivi_fit_slice), not to its whole range */
} tg_kivi_range;

/* The range entry of an integer precision (its row of precision.h's table); NULL for a float precision or an
 * out-of-range value. */
const tg_kivi_range *tg_kivi_range_of(tg_kv_precision p);
/* True for the integer precisions (int8 / int4 / int2). */
bool tg_kivi_is_quantized(tg_kv_precision p);
/* Bytes of one packed row of n elements (rounded up to whole bytes). */
size_t tg_kivi_row_bytes(const tg_kivi_range *r, int64_t n);

/* fp16 rounding towards -inf / +inf of a finite float (saturating at +-65504; NaN gives 0). */
uint16_t tg_kivi_f16_down(float x);
uint16_t tg_kivi_f16_up(float x);

/* Fits fp16 (scale, zero) to [lo, hi] so that both ends stay on the grid's span: zero is lo rounded down to fp16,
 * scale = max(TG_KIVI_SCALE_FLOOR, (hi - zero) / (qmax - qmin)) rounded up, so every x in [lo, hi] lies in
 * [zero, zero + (qmax - qmin) * scale] and is reproduced within half a step (plus fp32 rounding). lo <= hi, both
 * finite; values beyond the fp16 range saturate (finite, never NaN). */
void tg_kivi_fit(const tg_kivi_range *r, float lo, float hi, uint16_t *scale, uint16_t *zero);

/* The clips tg_kivi_fit_slice tries: each end of [lo, hi] moved inwards by 0 .. TG_KIVI_CLIP_STEPS steps of
 * (hi - lo) / TG_KIVI_CLIP_DIV, every pair of the two. */
#define TG_KIVI_CLIP_STEPS 3
#define TG_KIVI_CLIP_DIV 16.0f
/* The weight of a key's squared error at the ends of its channel's range over the middle's, less one: a key's error
 * counts 1 + TG_KIVI_CLIP_KEY_EDGE u^2 times, u in [-1, 1] its place in [lo, hi]. Attention's largest scores come
 * from keys at a channel's extremes, which a plain least-squares clip gives up first (docs/RESULTS.md, issue #51). */
#define TG_KIVI_CLIP_KEY_EDGE 4.0f

/* Fits fp16 (scale, zero) to the n values x[i * stride] whose minimum and maximum (NaN ignored) are lo <= hi: with
 * r->clip, the grid (tg_kivi_fit of a clip of [lo, hi], the clips above in order, the first of the least error) that
 * reproduces them best, the values beyond it coded at its ends: the error of a grid is the sum, in index order and
 * fp32, of each value's squared error times 1 + edge u^2 (u = (x - mid) / half of [lo, hi]; edge 0 for values,
 * TG_KIVI_CLIP_KEY_EDGE for keys); otherwise (or for n < 3) tg_kivi_fit(lo, hi). kivi_store.comp's kivi_fit_slice
 * does the same. */
void tg_kivi_fit_slice(const tg_kivi_range *r, const float *x, int64_t n, size_t stride, float lo, float hi,
                       float edge, uint16_t *scale, uint16_t *zero);

/* The code u = q - qmin of x for a widened (scale, zero); NaN maps to 0 (qmin). */
static inline int tg_kivi_code(float x, float scale, float zero, int levels) {
    float t = (x - zero) / scale;
    t = t > 0.0f ? t : 0.0f; /* also sends NaN to 0 */
    t = t < (float)levels ? t : (float)levels;
    return (int)roundf(t);
}

/* Reads / writes code i of a packed row. */
static inline int tg_kivi_get(const uint8_t *row, int bits, int64_t i) {
    switch (bits) {
    case 8: return row[i];
    case 4: return (row[i >> 1] >> ((i & 1) * 4)) & 0xf;
    default: return (row[i >> 2] >> ((i & 3) * 2)) & 0x3;
    }
}
static inline void tg_kivi_put(uint8_t *row, int bits, int64_t i, int u) {
    switch (bits) {
    case 8: row[i] = (uint8_t)u; break;
    case 4: {
        int sh = (int)(i & 1) * 4;
        row[i >> 1] = (uint8_t)((row[i >> 1] & ~(0xf << sh)) | ((u & 0xf) << sh));
        break;
    }
    default: {
        int sh = (int)(i & 3) * 2;
        row[i >> 2] = (uint8_t)((row[i >> 2] & ~(0x3 << sh)) | ((u & 0x3) << sh));
        break;
    }
    }
}

/* Tiles: the codes of one KIVI group (G rows = tokens, n codes = channels each, one kv-head) laid out so that integer
 * dot products need no horizontal sums (attend_int*.c): four adjacent bytes of the tile are one 32-bit lane of
 * vpdpbusd. cpb = 8 / bits codes per byte.
 *  keys (per channel: a lane is a row, its four bytes four channels):
 *    code (r, k) at byte ((k / (4 cpb)) * G + r) * 4 + k % 4, bits ((k % (4 cpb)) / 4) * bits — chunk k / (4 cpb)
 *    holds G rows of 4 cpb channels; byte j's slot s holds channel 4 (cpb chunk + s) + j;
 *  values (per token: a lane is a channel, its four bytes four rows):
 *    code (r, k) at byte ((r / 4) * (n / cpb) + k % (n / cpb)) * 4 + r % 4, bits (k / (n / cpb)) * bits — lane l's
 *    slot s holds channel l + s * (n / cpb).
 * Defined when n % 32 == 0 and G % 8 == 0 (tg_kivi_tiles_fit); a tile has exactly G * row_bytes bytes. */
static inline bool tg_kivi_tiles_fit(int64_t n, int64_t G) { return n > 0 && n % 32 == 0 && G > 0 && G % 8 == 0; }

/* Byte offset and bit shift of code (r, k) of a tile. */
static inline size_t tg_kivi_tile_at(bool keys, int bits, int64_t G, int64_t n, int64_t r, int64_t k, int *shift) {
    const int64_t cpb = 8 / bits;
    if (keys) {
        *shift = (int)((k % (4 * cpb)) / 4) * bits;
        return (size_t)(((k / (4 * cpb)) * G + r) * 4 + k % 4);
    }
    const int64_t lanes = n / cpb;
    *shift = (int)(k / lanes) * bits;
    return (size_t)(((r / 4) * lanes + k % lanes) * 4 + r % 4);
}
static inline int tg_kivi_tile_get(const uint8_t *tile, bool keys, int bits, int64_t G, int64_t n, int64_t r,
                                   int64_t k) {
    int sh;
    const size_t i = tg_kivi_tile_at(keys, bits, G, n, r, k, &sh);
    return (tile[i] >> sh) & ((1 << bits) - 1);
}
static inline void tg_kivi_tile_put(uint8_t *tile, bool keys, int bits, int64_t G, int64_t n, int64_t r, int64_t k,
                                    int u) {
    int sh;
    const size_t i = tg_kivi_tile_at(keys, bits, G, n, r, k, &sh);
    const int mask = ((1 << bits) - 1) << sh;
    tile[i] = (uint8_t)((tile[i] & ~mask) | ((u << sh) & mask));
}
/* Row r of a tile from a packed row (the layout above). */
void tg_kivi_tile_put_row(uint8_t *tile, bool keys, int bits, int64_t G, int64_t n, int64_t r, const uint8_t *row);

/* Per-token quantisation (values): one (scale, zero) over the n elements of x (tg_kivi_fit_slice, edge 0), codes
 * into row[tg_kivi_row_bytes(n)]. */
void tg_kivi_quantize_row(const tg_kivi_range *r, const float *x, int64_t n, uint8_t *row, uint16_t *scale,
                          uint16_t *zero);
/* Per-channel quantisation of a group (keys): x holds n_rows rows of n channels, row t at x + t * x_stride (floats);
 * one (scale, zero) per channel (tg_kivi_fit_slice over its rows, edge TG_KIVI_CLIP_KEY_EDGE) into scale[n] /
 * zero[n]; row t's codes into rows + t * tg_kivi_row_bytes(n). */
void tg_kivi_quantize_channels(const tg_kivi_range *r, const float *x, size_t x_stride, int n_rows, int64_t n,
                               uint8_t *rows, uint16_t *scale, uint16_t *zero);
/* out[i] = u_i * scale + zero (per-token scale). */
void tg_kivi_dequantize_row(const tg_kivi_range *r, const uint8_t *row, int64_t n, float scale, float zero,
                            float *out);
/* out[i] = u_i * scale[i] + zero[i] (per-channel fp16 scales, widened). */
void tg_kivi_dequantize_row_channels(const tg_kivi_range *r, const uint8_t *row, int64_t n, const uint16_t *scale,
                                     const uint16_t *zero, float *out);

#endif
