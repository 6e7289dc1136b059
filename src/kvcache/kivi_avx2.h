/* kivi_avx2.h — the AVX2 KIVI append into tiles (kivi_avx2.c; callers reach it through attend_kernels.h's table). Each
 * function writes exactly the bytes of the scalar path it stands in for (codec_kivi_provisional.c,
 * codec_kivi_grouped.c: tg_kivi_code and tg_kivi_tile_put per code). Tiles as kivi.h lays them out: head dim D a
 * multiple of 32 and at most TG_KIVI_AVX2_MAX_D, G % 8 == 0. */
#ifndef TG_KVCACHE_KIVI_AVX2_H
#define TG_KVCACHE_KIVI_AVX2_H

#include "kvcache/kivi.h"
#include "util/cpu_features.h"

#define TG_KIVI_AVX2_MAX_D 256 /* larger head dims take the scalar path */

/* The channels k of x (one row of D keys) outside their grid's span [zero_k, zero_k + levels * scale_k] (NaN is
 * never outside): their indices into out[0 .. D), in increasing order. Returns how many. */
int64_t tg_kivi_avx2_key_misses(const tg_kivi_range *r, const float *x, int64_t D, const uint16_t *scale,
                                const uint16_t *zero, int32_t *out);
/* Row t of a key tile (G rows of D channels) coded from x under the per-channel grid (scale, zero: fp16). */
void tg_kivi_avx2_key_row(const tg_kivi_range *r, const float *x, int64_t D, const uint16_t *scale,
                          const uint16_t *zero, uint8_t *tile, int64_t G, int64_t t);
/* Channel k of rows [0, t) of a key tile, dequantised on grid (s0, z0) and coded again on (s1, z1). */
void tg_kivi_avx2_recode_key_channel(const tg_kivi_range *r, uint8_t *tile, int64_t G, int64_t t, int64_t k,
                                     float s0, float z0, float s1, float z1);
/* A whole key group into a tile: G rows of D channels (row t at x + t * x_stride floats), one (scale, zero) per
 * channel fitted over the group (tg_kivi_quantize_channels'), then every row coded. */
void tg_kivi_avx2_key_group(const tg_kivi_range *r, const float *x, size_t x_stride, int64_t G, int64_t D,
                            uint16_t *scale, uint16_t *zero, uint8_t *tile);
/* Row t of a value tile from x: one (scale, zero) fitted over the row (tg_kivi_quantize_row's). Returns false,
 * having written nothing, when the row's minimum or maximum is a zero (whose sign the scalar path must pick). */
bool tg_kivi_avx2_value_row(const tg_kivi_range *r, const float *x, int64_t D, uint8_t *tile, int64_t t,
                            uint16_t *scale, uint16_t *zero);

#endif
