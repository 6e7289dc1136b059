/* codec.h — internal to src/kvcache: store codecs. A codec is one way of keeping a store's (the keys' or the values'
 * of a layer) non-sink tokens: plain fp32 / fp16 / bf16 rows (codec_plain.c), KIVI groups with a full-precision
 * residual (codec_kivi_grouped.c), KIVI groups quantised as tokens arrive, with provisional key grids
 * (codec_kivi_provisional.c), KIVI with one key grid over the whole history (codec_kivi_whole.c), and the
 * test-only fp32-copy (codec_fp32_copy.c, chosen by name). Each is one table of operations; codec.c holds the table that picks a store's codec, and the segment lookups that attention,
 * read-back and row loading read every store through.
 *
 * A segment is a run of rows of one kv-head stored alike (one way of widening to fp32, a fixed stride): a plain ring
 * up to its wrap, one KIVI group, the residual ring up to its wrap, the sinks. Adding a codec = one codec_*.c file
 * defining a tg_store_codec, and one row in codec.c's table. */
#ifndef TG_KVCACHE_CODEC_H
#define TG_KVCACHE_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvcache/attend_kernels.h"
#include "kvcache/cache_internal.h"
#include "kvcache/precision.h"

/* Rows of one kv-head that sit at a fixed stride and share one way of widening (TG_SEG_* of attend_kernels.h). */
typedef struct {
    int kind;                       /* TG_SEG_F32 rows are read in place; the others are widened */
    int bits;                       /* TG_SEG_CODES: 8, 4, 2 */
    const uint8_t *p;               /* the first row */
    size_t stride;                  /* bytes from one row to the next */
    int64_t count;                  /* rows */
    int64_t slot0;                  /* cache slot of the first row (re-positioned keys are rotated to it) */
    const uint16_t *gscale, *gzero; /* TG_SEG_CODES keys: the per-channel fp16 grid [head_dim] */
    const uint16_t *tscale, *tzero; /* TG_SEG_CODES values: the first row's own fp16 scale and zero */
    size_t tstride;                 /* TG_SEG_CODES values: elements from one row's scale to the next */
    bool tiled;                     /* TG_SEG_CODES in a tile (kivi.h): p is the tile of `group` rows, the segment
                                     * its rows [t0, t0 + count) (stride unused) */
    int64_t t0, group;
    /* tiled: the rows from the first on (>= count) that the tiles following this one in memory hold alike (the next
     * groups of the kv-head in one chunk), tile_next bytes apart, their scales (keys' grids, values' own) scale_next
     * elements apart; the integer attention reads them in one pass. count elsewhere. */
    int64_t run;
    size_t tile_next, scale_next;
} tg_segment;

/* One way of storing a store's non-sink tokens. Every operation gets the cache (geometry, scratch) and the store's
 * layout sg (sg->codec is this codec). */
struct tg_store_codec {
    const char *name;
    /* Whether this codec keeps a store of precision p under geometry g (the table takes the first that does); NULL:
     * chosen only by name (tg_store_codec_named), never by a policy. */
    bool (*selects)(const tg_cache_geom *g, tg_kv_precision p);
    /* Fills sg's layout from the resolved capacities of g (sg->precision, per_channel and codec are set, the rest
     * zero): range, row and buffer bytes, the sinks' precision, whether appends re-code held rows. False when a
     * byte count overflows. */
    bool (*geometry)(const tg_cache_geom *g, tg_store_geom *sg);
    /* Stores non-sink token L->n_appended: x[n_kv_heads * head_dim] (keys already rotated where they must be).
     * NULL for a codec that stores head by head (insert_head). */
    void (*insert)(const tg_kvcache *c, const tg_store_geom *sg, tg_store *s, const tg_layer_cache *L,
                   const float *x);
    /* Stores kv-head h's row x[head_dim] of non-sink token n, writing nothing of the other kv-heads and, of this
     * one, only token n's row and the rows of n's group (a KIVI key grid widened re-codes them): kv-heads may be
     * stored by different threads at once, while others read older groups. scratch: head_dim bytes of the
     * caller's. NULL: the codec stores every kv-head at once (insert). */
    void (*insert_head)(const tg_kvcache *c, const tg_store_geom *sg, tg_store *s, int64_t n, int h, const float *x,
                        uint8_t *scratch);
    /* Whether insert_head codes the row (work worth spreading over a team's threads: tg_kvcache_append_start
     * leaves such stores to tg_kvcache_append_head), not just copies it. */
    bool insert_codes;
    /* Quantises residual tokens [qend, qend + group) into their group (NULL: a codec without groups). */
    void (*flush)(const tg_kvcache *c, const tg_store_geom *sg, tg_store *s, int64_t qend);
    /* *g = the segment of kv-head h's rows that starts at held non-sink token n: count = every row from n stored
     * alike (the caller cuts it and sets slot0). Out-parameters, not returned structs: a segment is looked up per
     * KIVI group, and returned copies cost a stalled store-to-load forward each. */
    void (*segment_at)(const tg_kvcache *c, const tg_store_geom *sg, const tg_store *s, const tg_layer_cache *L,
                       int h, int64_t n, tg_segment *g);
};

extern const tg_store_codec tg_codec_plain, tg_codec_kivi_grouped, tg_codec_kivi_provisional, tg_codec_kivi_whole;
extern const tg_store_codec tg_codec_fp32_copy; /* tests only: selected by name */

/* The codec the table picks for a store of precision p under g; NULL when none does. */
const tg_store_codec *tg_store_codec_for(const tg_cache_geom *g, tg_kv_precision p);
/* The codec of that name in the table (tests force codecs by name); NULL when there is none. */
const tg_store_codec *tg_store_codec_named(const char *name);

/* *g = the longest run of kv-head h's held non-sink tokens that starts at n, ends at most at last and is stored
 * alike (g->run: the tiles that follow, also cut at last). */
void tg_store_segment(const tg_kvcache *c, const tg_layer_cache *L, bool keys, int h, int64_t n, int64_t last,
                      tg_segment *g);
/* *g = kv-head h's sinks [s0, s1] (s0 <= s1). */
void tg_store_sink_segment(const tg_kvcache *c, const tg_layer_cache *L, bool keys, int h, int64_t s0, int64_t s1,
                           tg_segment *g);
/* Makes g a segment of sg's codes: keys with the per-channel grid at element `grid` of the scales and zeros
 * (one chunk's), values with their own scales from element `token` on, tstride apart. */
void tg_segment_codes(tg_segment *g, const tg_store_geom *sg, const uint16_t *scale, const uint16_t *zero, size_t grid,
                      size_t token, size_t tstride);
/* The grouped KIVI layout's byte counts into sg (codes, scales + zeros per group, sinks; no residual; a unit is
 * one group of every kv-head): false when they overflow. */
bool tg_kivi_group_geometry(const tg_cache_geom *g, tg_store_geom *sg);
/* Where a grouped store keeps the group unit of non-sink token n: its chunk k and its index i in the chunk. */
void tg_kivi_unit_of(const tg_kvcache *c, const tg_store_geom *sg, int64_t n, int64_t *k, int64_t *i);
/* The codes of group unit i of chunk k, kv-head h: G rows (or a tile). A chunk holds them head-major
 * ([n_kv_heads][units][G][row_bytes]), so that one kv-head's groups follow one another (its attention reads them in
 * order: the hardware prefetcher streams them). Scales stay unit-major ([units][n_kv_heads][...]). */
uint8_t *tg_kivi_group_rows(const tg_kvcache *c, const tg_store_geom *sg, const tg_store *s, int64_t k, int64_t i,
                            int64_t h);
/* *g = the codes of kv-head h from token n to the end of n's quantised group, or to `end` (exclusive) when that comes
 * first: the grouped KIVI layout shared by the KIVI codecs (G tokens of a unit contiguous per kv-head, as a tile
 * where kivi.h's tiles fit). */
void tg_kivi_group_segment(const tg_kvcache *c, const tg_store_geom *sg, const tg_store *s, int h, int64_t n,
                           int64_t end, tg_segment *g);
/* Row i of a segment as fp32 into out[head_dim] (the scalar reference of the kernels' widening). */
void tg_segment_widen(const tg_segment *g, int64_t i, int64_t head_dim, float *out);

/* Bytes per element of an fp32 / fp16 / bf16 row; the segment kind of such rows. */
size_t tg_plain_elem_bytes(tg_kv_precision p);
int tg_plain_seg_kind(tg_kv_precision p);
/* n floats of x into dst at precision p (fp32 / fp16 / bf16), and back. */
void tg_plain_put(tg_kv_precision p, const float *x, uint8_t *dst, int64_t n);
void tg_plain_get(tg_kv_precision p, const uint8_t *src, float *out, int64_t n);

/* Checked a * b * c * d; clears *ok on overflow. */
size_t tg_mul4(bool *ok, size_t a, size_t b, size_t c, size_t d);

#endif
