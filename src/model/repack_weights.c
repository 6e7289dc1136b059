/* repack_weights.c — the model's matrices in the repacked layout (kernels/repack.h) where the build has kernels for
 * their type (Q8_0 / Q4_0 with AVX-512 VNNI): one anonymous buffer for all of them, the file's pages of each given
 * back once it is copied, so that the process holds the weights once (the same bytes, in another order). The
 * speed it buys and the load time it costs: docs/PERFORMANCE.md, "Session 28". */
#include "model/model.h"

#include <stdint.h>
#include <stdlib.h>

#include "kernels/repack.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/mapped_file.h"
#include "util/pages.h"

#define PIECE_ALIGN 64            /* each matrix's start in the buffer: a cache line */
#define SLICE_BYTES (1u << 20) /* rows repacked (and their file pages given back) at a time */

/* Whether w is repacked at load: a type with repacked kernels, at least one group of rows. */
static bool wanted(const tg_tensor *w) { return w->data && w->rows >= TG_REPACK_ROWS && tg_repack_available(w->type); }

/* The matrices the decode multiplies: each layer's seven (absent ones have no data), then the output matrix (the
 * token embedding when tied: it is repacked as the output and still looked up by row). out: 7 n_layers + 1. */
static size_t matrices(tg_model *m, tg_tensor **out) {
    size_t n = 0;
    for (int l = 0; l < m->hp.n_layers; l++) {
        tg_layer_weights *w = &m->layers[l];
        tg_tensor *const mats[] = {&w->wq, &w->wk, &w->wv, &w->wo, &w->w_gate, &w->w_up, &w->w_down};
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) out[n++] = mats[i];
    }
    out[n++] = m->hp.tied_embeddings ? &m->tok_embd : &m->lm_head;
    return n;
}

bool tg_model_repack(tg_model *m, const char *path, tg_error *err) {
    const size_t cap = (size_t)m->hp.n_layers * 7 + 1; /* n_layers <= TG_MAX_LAYERS */
    tg_tensor **mats = malloc(cap * sizeof *mats);
    if (!mats) return tg_fail(err, "%s: out of memory", path);
    const size_t n = matrices(m, mats);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!wanted(mats[i])) continue;
        const size_t bytes = (size_t)mats[i]->rows * tg_row_bytes(mats[i]->type, mats[i]->cols); /* in the file */
        if (!tg_add_size(total, (bytes + PIECE_ALIGN - 1) / PIECE_ALIGN * PIECE_ALIGN, &total)) {
            free(mats);
            return tg_fail(err, "%s: the weights to repack exceed the address space", path);
        }
    }
    uint8_t *buf = total ? tg_pages_alloc(total) : NULL;
    if (total && !buf) {
        free(mats);
        return tg_fail(err, "%s: out of memory for the repacked weights (%zu bytes)", path, total);
    }
    m->repacked = buf;
    m->repacked_bytes = total;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        tg_tensor *w = mats[i];
        if (!wanted(w)) continue;
        const size_t rb = tg_row_bytes(w->type, w->cols), bytes = (size_t)w->rows * rb;
        /* slices of whole groups (the last one with the rows past them), each slice's file pages given back as soon
         * as it is copied: the process never holds much of a matrix twice (a view into the file's mapping) */
        int64_t slice = (int64_t)(SLICE_BYTES / rb) / TG_REPACK_ROWS * TG_REPACK_ROWS;
        if (slice < TG_REPACK_ROWS) slice = TG_REPACK_ROWS;
        const uint8_t *src = w->data;
        for (int64_t r = 0; r < w->rows; r += slice) {
            const int64_t k = w->rows - r < slice || w->rows - r - slice < TG_REPACK_ROWS ? w->rows - r : slice;
            tg_repack_rows(w->type, src + (size_t)r * rb, buf + at + (size_t)r * rb, k, w->cols);
            if (m->gguf) tg_mapped_release(src + (size_t)r * rb, (size_t)k * rb);
            if (k != slice) break;
        }
        w->data = buf + at;
        w->row_group = TG_REPACK_ROWS;
        at += (bytes + PIECE_ALIGN - 1) / PIECE_ALIGN * PIECE_ALIGN;
    }
    if (m->hp.tied_embeddings) m->lm_head = m->tok_embd;
    free(mats);
    return true;
}

void tg_model_repack_free(tg_model *m) {
    tg_pages_free(m->repacked, m->repacked_bytes);
    m->repacked = NULL;
    m->repacked_bytes = 0;
}
