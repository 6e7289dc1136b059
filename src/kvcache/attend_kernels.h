/* attend_kernels.h — internal to src/kvcache: a block of up to eight cache rows as the attention kernels read it, the
 * attention and KIVI-append kernel table of an instruction set (tg_attn_kernels, chosen at run time), and the AVX2
 * kernels that fill it (attend_avx2.c, attend_int_avx2.c, kivi_avx2.c; attend_group_avx512.c for AVX-512;
 * attend_neon.c's tg_attn_neon_* below; attend_int_dotprod.c defines the tg_attn_int_* kernels on aarch64). attend.c
 * holds the scalar reference (no table) and everything else. */
#ifndef TG_KVCACHE_ATTEND_KERNELS_H
#define TG_KVCACHE_ATTEND_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvcache/kivi.h"
#include "util/cpu_features.h"

/* How the rows of a block are stored. */
enum { TG_SEG_F32, TG_SEG_F16, TG_SEG_BF16, TG_SEG_CODES };

#define TG_ATTN_BLK 8 /* rows per block */

/* Up to TG_ATTN_BLK rows of one kv-head, all stored alike. An element of a SEG_CODES row is u * scale + zero with the
 * per-channel grid (keys) or the row's own scale and zero (values). */
typedef struct {
    int kind;                       /* TG_SEG_* */
    int bits;                       /* TG_SEG_CODES: 8, 4, 2 */
    int nr;                         /* rows in use, 1..TG_ATTN_BLK; rows[nr..] repeat rows[0] */
    const uint8_t *rows[TG_ATTN_BLK];
    const float *grid;              /* keys' per-channel grid: [2 * head_dim] scales then zeros; NULL for values */
    const float *bias;              /* codes keys, AVX2 kernels: [gq] q_i . zero, the grid's zeros folded out of the
                                     * scores (the queries passed in are then q_i * scale) */
    float tscale[TG_ATTN_BLK];      /* values: each row's scale and zero */
    float tzero[TG_ATTN_BLK];
    const uint8_t *tile;            /* codes in a tile (kivi.h; the scalar reference only): rows tile_row0 .. of a tile
                                     * of tile_group rows; rows[] unused */
    int64_t tile_row0, tile_group;
} tg_attn_block;

/* The integer kernels (attend_int_avx2.c) over one segment of KIVI tiles (kivi.h's layout): rows [t0, t0 + count)
 * of a tile of G rows of head_dim codes of `bits` bits and, where count > G - t0, of the tiles that follow it `next`
 * bytes apart (the consecutive groups of one kv-head: tile j at tile + j * next, its rows t0 + count - j * G past
 * its start). next = 0: one tile, count <= G - t0. */
typedef struct {
    const uint8_t *tile;
    int bits;
    int64_t G, t0, count;
    size_t next;
} tg_attn_tile;

/* Quantised queries of a key segment: per head j, its codes as byte operands, four channels an int32
 * (lo / hi at j * head_dim / 4; hi only for int8 codes), its step dq[j] and the folded grid's bias[j]. */
typedef struct {
    int32_t *lo, *hi;
    float *dq, *bias;
} tg_attn_int_queries;

#define TG_ATTN_INT_MAX_D 256 /* the largest head dim the integer kernels take (larger: the float path) */

/* int32 words of scratch the integer kernels need for gq heads of head_dim D: two tiles' tg_attn_int_queries (lo, hi,
 * dq, bias: D / 2 + 2 per head each), or two value runs' weights (18 per head each). */
#define TG_ATTN_INT_SCRATCH_WORDS(gq, D) ((size_t)(gq) * ((size_t)(D) + 4 > 36 ? (size_t)(D) + 4 : 36))

/* ---- the AVX2 kernels (declared for every build; defined where the instruction-set files were compiled with their
 * flags: callers reach them through a table only) ---- */

/* The queries qh[gq][D] of a key segment whose per-channel grid is gscale / gzero (fp16, [D]) folded and quantised
 * for codes of `bits` bits into q: bias_j = q_j . zero (an fp32 fma chain over 8 lanes, then summed), q_j * scale
 * quantised (lo, hi, dq). D % 32 == 0, D <= TG_ATTN_INT_MAX_D. */
void tg_attn_int_prepare_keys(const float *qh, int gq, int64_t D, const uint16_t *gscale, const uint16_t *gzero,
                              int bits, tg_attn_int_queries *q);
/* sc[j * ld + i] = score of segment row i for head j: dq_j * (q8_j . u_i) + bias_j. vnni: use the instruction when
 * the build has it, at 512 bits with AVX-512 VNNI for tiles of a multiple of 16 rows (the same bits either way).
 * D % 32 == 0. */
void tg_attn_int_scores(const tg_attn_tile *t, const tg_attn_int_queries *q, int gq, int64_t D, float *sc, int64_t ld,
                        bool vnni);
/* The scores of every row of a segment of one or more tiles: per tile j, tg_attn_int_prepare_keys with the grid at
 * gscale / gzero + j * gstride (fp16 elements), then tg_attn_int_scores of its rows into sc (row i of the segment at
 * sc[head * ld + i]) — the bits of those calls tile by tile (the next tile's queries are prepared before this one's
 * scores, into the other half of scratch: TG_ATTN_INT_SCRATCH_WORDS(gq, D)). D % 32 == 0. */
void tg_attn_int_keys(const tg_attn_tile *t, const float *qh, int gq, int64_t D, const uint16_t *gscale,
                      const uint16_t *gzero, size_t gstride, int32_t *scratch, float *sc, int64_t ld, bool vnni);
/* o_j += sum_i p[j * ld + i] (u_i * scale_i + zero_i) over the segment's rows, in the integer domain (runs of 32
 * rows of a tile, the weights quantised per run; tile after tile); tscale / tzero: the fp16 scale and zero of segment
 * row 0 (rows of a tile contiguous; tile j's tstride elements after tile j - 1's); scratch:
 * TG_ATTN_INT_SCRATCH_WORDS(gq, D). vnni: as tg_attn_int_scores (512 bits when head dim / codes per byte is a
 * multiple of 16, or 8 for int4 / int2 codes). D % 32 == 0. */
void tg_attn_int_values(const tg_attn_tile *t, const float *p, int64_t ld, int gq, int64_t D, const uint16_t *tscale,
                        const uint16_t *tzero, size_t tstride, float *o, int32_t *scratch, bool vnni);

/* Fetches a tile of G rows of D codes of `bits` bits (G * D * bits / 8 bytes from tile) into the cache: a tile is
 * 0.5-2 KB, too short a stream for the hardware prefetcher to run ahead of the kernels, so the kernels fetch the
 * next tile of a run while working on one, and the attention sweep a run's first tile while the segment before it
 * runs. */
void tg_attn_int_prefetch_tile(const uint8_t *tile, int bits, int64_t G, int64_t D);
/* A segment's first scales fetched the same way: keys' per-channel grid (scale and zero [D] each) or values' per-row
 * scale and zero ([G] each), n fp16 values at each. */
void tg_attn_int_prefetch_scales(const uint16_t *scale, const uint16_t *zero, int64_t n);

/* Folds a codes segment's per-channel grid into the queries: qf[i * D + c] = qh[i * D + c] * scale[c] and
 * bias[i] = qh_i . zero, so that q_i . (u * scale + zero) = qf_i . u + bias_i. */
void tg_attn_avx2_fold(const float *qh, int gq, int64_t D, const float *grid, float *qf, float *bias);
/* sc[i * ld + r] = q_i . row_r for query heads i < gq (q_i at qh + i * D) and rows r < b->nr; D % 8 == 0. For codes
 * keys, qh and b->bias come from tg_attn_avx2_fold. */
void tg_attn_avx2_scores(const tg_attn_block *b, const float *qh, int gq, int64_t D, float *sc, int64_t ld);
/* o_i += sum_r p[i * ld + r] row_r for query heads i < gq (o_i at o + i * D); D % 8 == 0. */
void tg_attn_avx2_values(const tg_attn_block *b, const float *p, int64_t ld, int gq, int64_t D, float *o);
/* out[D] = row r of the block as fp32; D % 8 == 0. */
void tg_attn_avx2_widen(const tg_attn_block *b, int r, int64_t D, float *out);

/* A plain segment's float rows as the run kernels read them: row i (i < count) of kind TG_SEG_F32 / F16 / BF16 at
 * p + i * stride, each fetched into L2 `lead` rows before the kernels reach it (the first ones as the run starts).
 * beside (or NULL): the same tokens' rows of the other stream (a key run's values, beside_stride apart, at least
 * count of them), fetched into L2 with them, so that the value pass that follows the softmax finds them there. */
typedef struct {
    int kind;
    const uint8_t *p;
    size_t stride;
    int64_t count, lead;
    const uint8_t *beside;
    size_t beside_stride;
} tg_attn_rows;

/* Whether the run kernels take float rows of this kind and head dim (builds with AVX-512, D % 16 == 0). */
bool tg_attn_avx2_runs(int kind, int64_t D);
/* tg_attn_avx2_scores over every row of the run, eight at a time: sc[i * ld + r] for rows r < count, the bits of
 * the block kernel's calls. */
void tg_attn_avx2_scores_rows(const tg_attn_rows *s, const float *qh, int gq, int64_t D, float *sc, int64_t ld);
/* tg_attn_avx2_values over every row of the run, the accumulators held in registers across its rows instead of
 * stored and reloaded per block: the same FMAs in the same order per element of o, so the bits of the block calls. */
void tg_attn_avx2_values_rows(const tg_attn_rows *s, const float *p, int64_t ld, int gq, int64_t D, float *o);

/* ---- the aarch64 float block kernels (attend_neon.c): the contracts and bits of tg_attn_avx2_fold / scores /
 * values / widen above; runs() is false ---- */
void tg_attn_neon_fold(const float *qh, int gq, int64_t D, const float *grid, float *qf, float *bias);
void tg_attn_neon_scores(const tg_attn_block *b, const float *qh, int gq, int64_t D, float *sc, int64_t ld);
void tg_attn_neon_values(const tg_attn_block *b, const float *p, int64_t ld, int gq, int64_t D, float *o);
void tg_attn_neon_widen(const tg_attn_block *b, int r, int64_t D, float *out);
bool tg_attn_neon_runs(int kind, int64_t D);

/* ---- prefill groups at 512 bits (attend_group_avx512.c; attend_group.c's arithmetic) ---- */

/* rows[r] = row i0 + r of a float segment (kind TG_SEG_F32 / F16 / BF16, rows at p + i * stride) as fp32 for r < n:
 * fp32 rows read in place, fp16 / bf16 widened (exactly) into tile [n][D]. D % 16 == 0. */
void tg_attn512_group_widen(int kind, const uint8_t *p, size_t stride, int64_t i0, int64_t n, int64_t D, float *tile,
                            const float **rows);
/* s[e][r] = q[e] . rows[r] for r < n, e < ne (attend_group.c's pairs of heads, the 8-lane order of the scores). */
void tg_attn512_group_scores(const float *const *rows, int64_t n, int64_t D, const float *const *q, float *const *s,
                             int ne);
/* o[e][0 .. D) += sum over rows r < n (in order) of p[e][r] * rows[r], for ne heads. */
void tg_attn512_group_values(const float *const *rows, int64_t n, int64_t D, const float *const *p, float *const *o,
                             int ne);

/* ---- the table ---- */

/* One instruction set's attention and KIVI-append kernels (contracts above and in kivi_avx2.h); every entry gives the
 * bits of the AVX2 kernel of the same name (the AVX-512 table's at 512 bits where the file says so). group_*: NULL
 * where the set has no prefill-group kernels. The aarch64 tables have no kivi_* entries (NULL: the scalar append),
 * no run kernels (runs() false; scores_rows / values_rows NULL) and, on NEON without dotprod, no int_* entries. */
typedef struct {
    tg_isa isa;
    void (*fold)(const float *qh, int gq, int64_t D, const float *grid, float *qf, float *bias);
    void (*scores)(const tg_attn_block *b, const float *qh, int gq, int64_t D, float *sc, int64_t ld);
    void (*values)(const tg_attn_block *b, const float *p, int64_t ld, int gq, int64_t D, float *o);
    void (*widen)(const tg_attn_block *b, int r, int64_t D, float *out);
    bool (*runs)(int kind, int64_t D);
    void (*scores_rows)(const tg_attn_rows *s, const float *qh, int gq, int64_t D, float *sc, int64_t ld);
    void (*values_rows)(const tg_attn_rows *s, const float *p, int64_t ld, int gq, int64_t D, float *o);
    void (*int_keys)(const tg_attn_tile *t, const float *qh, int gq, int64_t D, const uint16_t *gscale,
                     const uint16_t *gzero, size_t gstride, int32_t *scratch, float *sc, int64_t ld, bool vnni);
    void (*int_values)(const tg_attn_tile *t, const float *p, int64_t ld, int gq, int64_t D, const uint16_t *tscale,
                       const uint16_t *tzero, size_t tstride, float *o, int32_t *scratch, bool vnni);
    void (*int_prefetch_tile)(const uint8_t *tile, int bits, int64_t G, int64_t D);
    void (*int_prefetch_scales)(const uint16_t *scale, const uint16_t *zero, int64_t n);
    int64_t (*kivi_key_misses)(const tg_kivi_range *r, const float *x, int64_t D, const uint16_t *scale,
                               const uint16_t *zero, int32_t *out);
    void (*kivi_key_row)(const tg_kivi_range *r, const float *x, int64_t D, const uint16_t *scale,
                         const uint16_t *zero, uint8_t *tile, int64_t G, int64_t t);
    void (*kivi_recode_key_channel)(const tg_kivi_range *r, uint8_t *tile, int64_t G, int64_t t, int64_t k, float s0,
                                    float z0, float s1, float z1);
    void (*kivi_key_group)(const tg_kivi_range *r, const float *x, size_t x_stride, int64_t G, int64_t D,
                           uint16_t *scale, uint16_t *zero, uint8_t *tile);
    bool (*kivi_value_row)(const tg_kivi_range *r, const float *x, int64_t D, uint8_t *tile, int64_t t,
                           uint16_t *scale, uint16_t *zero);
    void (*group_widen)(int kind, const uint8_t *p, size_t stride, int64_t i0, int64_t n, int64_t D, float *tile,
                        const float **rows);
    void (*group_scores)(const float *const *rows, int64_t n, int64_t D, const float *const *q, float *const *s,
                         int ne);
    void (*group_values)(const float *const *rows, int64_t n, int64_t D, const float *const *p, float *const *o,
                         int ne);
} tg_attn_kernels;

/* The table of the kernel instruction set in use (kernels/kernels.h's tg_kernels()->isa), chosen once; NULL for the
 * scalar set: the callers' reference paths. */
const tg_attn_kernels *tg_attn_kernels_get(void);
/* The table of `isa` where this build and this CPU have one (NULL for scalar): for tests. */
const tg_attn_kernels *tg_attn_kernels_for(tg_isa isa);
/* The instruction-set files' tables (attend_table_avx2.c and its AVX-512 build; attend_table_neon.c), NULL where
 * compiled without them. */
const tg_attn_kernels *tg_attn_kernels_avx2(void);
const tg_attn_kernels *tg_attn_kernels_avx512(void);
const tg_attn_kernels *tg_attn_kernels_neon(void);
const tg_attn_kernels *tg_attn_kernels_dotprod(void);
const tg_attn_kernels *tg_attn_kernels_i8mm(void);

#endif
