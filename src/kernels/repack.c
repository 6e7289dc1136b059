/* repack.c — the repacked layout of repack.h: packing a matrix, and reading any block back as the file held it. */
#include "kernels/repack.h"

#include <string.h>

#include "kernels/kernels.h"

#define R TG_REPACK_ROWS

bool tg_repack_available(tg_dtype type) {
    return (type == TG_DT_Q8_0 || type == TG_DT_Q4_0) && tg_kernels()->type[type].repacked;
}

/* dst[0..16) = src[0..16) XOR 0x80 in every byte (Q8_0's codes as the unsigned bytes dpbusd takes), eight at a time */
static void flip16(uint8_t *dst, const uint8_t *src) {
    for (int h = 0; h < 16; h += 8) {
        uint64_t v;
        memcpy(&v, src + h, 8);
        v ^= 0x8080808080808080ull;
        memcpy(dst + h, &v, 8);
    }
}

/* Where the codes of row i (of 16) of a piece go: the unit's byte offset after the scales, for codes half h (Q8_0:
 * elements [16 h, 16 h + 16); Q4_0: h = 0, all sixteen bytes). Row i = 4 l + k sits in lane l of unit k (Q4_0) or
 * 2k + h (Q8_0). */
static size_t code_offset(bool q8, int i, int h) {
    const int k = i % 4, l = i / 4;
    return (size_t)32 + (size_t)(q8 ? 2 * k + h : k) * 64 + (size_t)l * 16;
}

void tg_repack_rows(tg_dtype type, const uint8_t *src, uint8_t *dst, int64_t rows, int64_t cols) {
    const bool q8 = type == TG_DT_Q8_0;
    const size_t bw = tg_weight_type_of(type)->block_bytes, rb = tg_row_bytes(type, cols);
    const int64_t nb = cols / 32, groups = rows / R;
    for (int64_t g = 0; g < groups; g++)
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *piece = dst + (size_t)g * R * rb + (size_t)b * R * bw;
            for (int i = 0; i < R; i++) {
                const uint8_t *blk = src + ((size_t)g * R + (size_t)i) * rb + (size_t)b * bw;
                memcpy(piece + 2 * i, blk, 2);
                if (q8) {
                    flip16(piece + code_offset(true, i, 0), blk + 2);
                    flip16(piece + code_offset(true, i, 1), blk + 18);
                } else {
                    memcpy(piece + code_offset(false, i, 0), blk + 2, 16);
                }
            }
        }
    memcpy(dst + (size_t)groups * R * rb, src + (size_t)groups * R * rb, (size_t)(rows - groups * R) * rb);
}

int64_t tg_repack_plain_from(const tg_tensor *w) { return w->row_group ? w->rows / R * R : 0; }

void tg_repack_block(const tg_tensor *w, int64_t r, int64_t b, uint8_t *blk) {
    const size_t bw = tg_weight_type_of(w->type)->block_bytes, rb = tg_row_bytes(w->type, w->cols);
    const uint8_t *data = w->data;
    if (r >= tg_repack_plain_from(w)) {
        memcpy(blk, data + (size_t)r * rb + (size_t)b * bw, bw);
        return;
    }
    const bool q8 = w->type == TG_DT_Q8_0;
    const int i = (int)(r % R);
    const uint8_t *piece = data + (size_t)(r / R) * R * rb + (size_t)b * R * bw;
    memcpy(blk, piece + 2 * i, 2);
    if (q8) {
        flip16(blk + 2, piece + code_offset(true, i, 0));
        flip16(blk + 18, piece + code_offset(true, i, 1));
    } else {
        memcpy(blk + 2, piece + code_offset(false, i, 0), 16);
    }
}
