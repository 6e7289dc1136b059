/* repack.h — Q8_0 / Q4_0 weight rows interleaved in groups of sixteen, the layout of the AVX-512 decode and prefill
 * kernels of gemv_repacked_avx512.c (the model loader repacks those matrices once; tg_tensor.row_group says so).
 *
 * Why: in the file's layout (row after row of 34- or 18-byte blocks) a kernel that takes sixteen rows at once
 * gathers sixteen scattered fp16 scales per block (sixteen loads and inserts) and assembles each pair of rows'
 * codes from two places: it was bound by those instructions, not by the memory (docs/PERFORMANCE.md, Session 28).
 * Repacked, block b of a group of sixteen
 * rows is one contiguous piece: the sixteen scales, then the sixteen rows' codes in the order the kernel's
 * registers take them.
 *
 * The layout of a matrix of R rows and C columns (nb = C / 32 blocks a row, bw = 34 (Q8_0) or 18 (Q4_0) bytes a
 * block, the file's row bytes rb = nb * bw): rows [16 g, 16 g + 16) for g < R / 16 occupy the same bytes
 * [16 g rb, 16 (g + 1) rb) as in the file, as nb pieces of 16 bw bytes; piece b holds
 *   bytes [0, 32):   the sixteen rows' fp16 scales d, row i's at 2 i;
 *   then the codes, 64-byte units: Q8_0 eight units (k = 0..3, h = 0..1 in that order: unit 2k + h holds elements
 *   [16 h, 16 h + 16) of rows k, 4 + k, 8 + k, 12 + k, sixteen bytes each, every code as q XOR 0x80, the unsigned
 *   byte q + 128 that dpbusd takes); Q4_0 four units (k = 0..3: the sixteen bytes of nibbles of rows k, 4 + k,
 *   8 + k, 12 + k, as stored).
 * The last R % 16 rows keep the file's layout (at the file's offsets). A sub-view that starts at a multiple of 16
 * rows and ends at one or at R is itself a repacked matrix. The values are the file's, bit for bit (tg_repack_block
 * gives any block back as the file held it). */
#ifndef TG_KERNELS_REPACK_H
#define TG_KERNELS_REPACK_H

#include <stdbool.h>
#include <stdint.h>

#include "kernels/tensor.h"

#define TG_REPACK_ROWS 16

/* Whether this build has kernels for `type` in the repacked layout (Q8_0 and Q4_0 where AVX-512 VNNI is there). */
bool tg_repack_available(tg_dtype type);

/* dst = the repacked layout of the rows x cols matrix src of `type` (tg_repack_available; cols a multiple of 32);
 * both rows * tg_row_bytes(type, cols) bytes, not overlapping. */
void tg_repack_rows(tg_dtype type, const uint8_t *src, uint8_t *dst, int64_t rows, int64_t cols);

/* Block b of row r of w (repacked or not) as the file stored it, into blk (tg_weight_type.block_bytes). */
void tg_repack_block(const tg_tensor *w, int64_t r, int64_t b, uint8_t *blk);

/* The first row of w that keeps the file's layout: rows / 16 * 16 when w is repacked, else 0. */
int64_t tg_repack_plain_from(const tg_tensor *w);

#endif
