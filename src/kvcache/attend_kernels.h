/* attend_kernels.h — internal to src/kvcache: a block of up to eight cache rows as the attention kernels read it, and
 * the AVX2 kernels over such blocks (attend_avx2.c; attend.c holds the scalar reference and everything else). */
#ifndef TG_KVCACHE_ATTEND_KERNELS_H
#define TG_KVCACHE_ATTEND_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "util/cpu_features.h" /* TG_HAVE_AVX2: the one feature test */

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
} tg_attn_block;

#if TG_HAVE_AVX2
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
#endif

#endif
