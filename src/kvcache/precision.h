/* precision.h — internal to src/kvcache: the KV precision traits table, one row per tg_kv_precision. A row holds
 * what the cache, its codecs, attention and the public listing (tg_kv_precision_count / _name / _parse) know of a
 * precision: its name, its storage bits and bytes, the segment kind attention reads its rows as, whether it is an
 * integer (KIVI) code with its q-range, and its element codec (the fp32 <-> storage row converters of a plain
 * precision; KIVI's quantiser, parameterised by the q-range, for an integer one). Adding a precision: its enum value
 * in tinygpt.h, a row in precision.c, and, if no existing codec and segment kind stores it, those too. */
#ifndef TG_KVCACHE_PRECISION_H
#define TG_KVCACHE_PRECISION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvcache/kivi.h"
#include "tinygpt.h"

typedef struct {
    tg_kv_precision id;
    const char *name;    /* what --kv-quantize and the reports call it */
    int bits;            /* storage bits per element: 32, 16, 8, 4, 2 */
    size_t unit_bytes;   /* bytes of one storage unit: an element of a plain precision, a packed byte of codes */
    int unit_elems;      /* elements per unit: 1 for plain precisions, 8 / bits for packed codes */
    int seg_kind;        /* TG_SEG_* (attend_kernels.h): how attention reads its rows */
    bool is_integer;     /* KIVI codes with an fp16 (scale, zero) per group; false: rows kept as floats */
    int auto_residual_groups; /* TG_KV_RESIDUAL_AUTO: full-precision residual groups kept (int2: one) */
    tg_kivi_range range; /* integer: bits and the q-range constants (kivi.h); zero for a plain precision */
    tg_kivi_range clip_range; /* integer: the same with grids fitted by least squared error (kivi.h's clip) */
    bool clip_keys, clip_values; /* TG_KV_CLIP_DEFAULT: whether keys' / values' grids are fitted so (measured on the
                                  * real models: docs/RESULTS.md, issue #51) */
    /* plain: n floats of x into dst at this precision, and back (NULL for an integer precision) */
    void (*put)(const float *x, uint8_t *dst, int64_t n);
    void (*get)(const uint8_t *src, float *out, int64_t n);
} tg_kv_traits;

/* The row of precision p; NULL for a value that is no tg_kv_precision. */
const tg_kv_traits *tg_kv_traits_of(tg_kv_precision p);

#endif
