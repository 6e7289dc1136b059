/* arith_order.h — the one arithmetic order of every kernel table (kernels.h), stated once and free of any instruction
 * set: a row times an activation gives the same bits whichever table, kernel, row grouping or token grouping computes
 * it (prefill in chunks == decoding token by token; a build for x86-64 == a -march=native build on the same CPU).
 *
 * The canonical order of one dot product (row r, activation t):
 *   float types:  acc = 0 (8 lanes); for each 8-column chunk in order: acc = fma(w_chunk, x_chunk, acc);
 *                 s = ((acc0 + acc1) + (acc2 + acc3)) + ((acc4 + acc5) + (acc6 + acc7));
 *                 if cols % 8: tail = 0; for each remaining column j in order: tail = fmaf(w_j, x_j, tail); s += tail.
 *   block types:  x is first quantised per block (quant.h: tg_quantize_q8x_ref for the 32-element types,
 *                 tg_quantize_q8k_ref for the K-quants); acc = 0; for each block b in order: isum = the exact int32
 *                 dot product of the codes (minus bias * sum(x_b)); acc = fmaf((float)isum, d_w(b) * d_x(b), acc).
 *                 Integer sums are exact, so their grouping (VNNI, 256 or 512 bits) never matters.
 * Vector primitives (vec.h) state their own orders (exp_shift_sum's blocks of eight lanes, etc.).
 *
 * A table is a faithful implementation of this order, or it has no kernel for the type: the scalar table has none,
 * and its generic paths are the exact references (matmul.c: decode the row exactly, accumulate in double, or in fp32
 * in column order for float types), compared with the fast tables within the tolerances of matmul.h. No file compiles
 * with -ffast-math or contracts a * b + c into an fma by itself (gcc and clang under -std=c11 do not). */
#ifndef TG_KERNELS_ARITH_ORDER_H
#define TG_KERNELS_ARITH_ORDER_H
#endif
