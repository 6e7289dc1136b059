/* attend.c — attention of one query over the cache's own storage, in independent pieces that callers may run on
 * their own threads.
 *
 * A piece is (kv-head h, share s of n_split of the visible non-sink tokens; the visible sinks go with share 0). It
 * walks its tokens as segments, which the stores' codecs hand out (codec.h: runs of rows stored alike, a plain ring
 * up to its wrap, one KIVI group, the residual, the sinks) and widens the key rows to fp32 eight at a time into a
 * small tile, in registers (fp32 rows are read in place; fp16 / bf16 rows are converted; KIVI codes become
 * u * scale + zero with the group's per-channel grid, widened once per segment, or with the token's own scale for
 * values). Keys are stored rotated at their absolute positions, and so is the query, except that a re-positioning
 * cache keeps its few sinks pre-RoPE and rotates them here, in the tile, to where the query must see them
 * (O(sinks x head_dim) per query; the window's keys are read exactly as vanilla reads them).
 * It scores them against the gq query heads that share h (eight rows' dot products reduced together), takes the
 * softmax over its share (max m, l = sum of exp(score - m), exp eight lanes at a time), then widens the value rows
 * the same way and accumulates o = sum exp(score - m) v per query head. tg_kvcache_attend_combine merges the shares
 * of a head: out = sum_s e^(m_s - M) o_s / sum_s e^(m_s - M) l_s. No dequantised copy of the cache is ever made: the
 * most ever widened is one eight-row tile. Scalar reference kernels (tg_kvcache_set_simd(c, false), or the scalar
 * instruction set) sit beside the kernel table's (attend_kernels.h: AVX2, AVX-512, chosen at run time). */
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/vec.h"
#include "kvcache/attend_kernels.h"
#include "kvcache/codec.h"
#include "kvcache/rotate.h"
#include "util/half.h"

#define BLK TG_ATTN_BLK
/* Blocks the block kernels prefetch a segment's rows into L1 ahead of the block being worked on (the first ones as the
 * segment starts): sinks, residual rings, codes that are not tiled, head dims the run kernels do not take. One block
 * (1 KB of fp16 rows at head dim 64) is too short a lead for rows that come from DRAM; four were the best of the
 * leads tried, and the integer kernels' tiles gain nothing from a longer lead into L1 (docs/PERFORMANCE.md,
 * Session 13). */
#define PF_BLOCKS 4
/* The run kernels' lead (tg_attn_rows.lead): the rows covering at least this many bytes (at least a block), fetched
 * into L2 (attend_avx2.c's fetch_rows) rather than PF_BLOCKS blocks into L1. In L1 the prefetches queue for this
 * core's few L1 miss buffers, where the loads wait too. A few KB into L2 is what attention alone and the whole decode
 * both did best with, on both guests measured (docs/PERFORMANCE.md, Sessions 19 and 25). */
#define RUN_LEAD_BYTES 4096
/* Values beside keys: a float run of keys fetches the same tokens' value rows into L2 with its own rows (the run
 * kernels' tg_attn_rows.beside), so that the value pass after the softmax reads them from L2 rather than starting a
 * second stream from memory (a share's values are 64 KB at depth 1024 on the SmolLM2-135M shape: the L2 holds them).
 * The value pass keeps its own stream as well (dropping it was slower). The integer kernels' tiles gain nothing from
 * the same: they are bound by their instructions, not by the reads (docs/PERFORMANCE.md, Session 26). */

/* What one query may see in a layer: sinks [s0, s1], non-sink tokens [lo, hi] (each empty when first > last). */
typedef struct {
    const tg_kvcache *c;
    const tg_layer_cache *L;
    int64_t s0, s1;
    int64_t lo, hi;
    int gq;           /* query heads per kv-head */
    int64_t sink_off; /* re-positioning: sink j is rotated to position sink_off + j (-1: sinks stored rotated) */
    const float *rot; /* rot_k: the piece's kv-head's signs, for keys kept pre-RoPE (rotated here after RoPE) */
    const tg_attn_kernels *ak; /* the kernel table; NULL: the scalar reference (c->simd off, or no table) */
} view;

const tg_attn_kernels *tg_attn_kernels_for(tg_isa isa) {
    if (isa > tg_cpu_features_get()->best) return NULL;
    switch (isa) {
    case TG_ISA_AVX2: return tg_attn_kernels_avx2();
#if defined(__x86_64__)
    case TG_ISA_AVX512: return tg_attn_kernels_avx512();
#endif
    case TG_ISA_NEON: return tg_attn_kernels_neon();
    case TG_ISA_DOTPROD: return tg_attn_kernels_dotprod();
    case TG_ISA_I8MM: return tg_attn_kernels_i8mm();
    default: return NULL;
    }
}

const tg_attn_kernels *tg_attn_kernels_get(void) { return tg_attn_kernels_for(tg_kernels()->isa); }

static void make_view(const tg_kvcache *c, int layer, int64_t pos, view *vw) {
    const tg_cache_geom *g = &c->g;
    const tg_layer_cache *L = &c->layers[c->kv_source[layer]];
    const int window = c->layer_window[layer];
    vw->c = c;
    vw->L = L;
    vw->gq = g->n_heads / g->n_kv_heads;
    /* sinks j <= pos inside the sliding window; non-sink tokens held, not in the future, inside the window */
    vw->s0 = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
    vw->s1 = pos < L->n_sink - 1 ? pos : L->n_sink - 1;
    vw->lo = L->first;
    vw->hi = L->n_appended - 1;
    if (pos - g->sink < vw->hi) vw->hi = pos - g->sink;
    if (window > 0 && pos - window + 1 - g->sink > vw->lo) vw->lo = pos - window + 1 - g->sink;
    vw->sink_off = g->reposition && !g->slot_rope ? tg_kvcache_sink_offset(c, L, pos) : -1;
    vw->ak = c->simd ? tg_attn_kernels_get() : NULL;
    vw->rot = NULL;
}

static int64_t span(int64_t a, int64_t b) { return b >= a ? b - a + 1 : 0; }

int tg_kvcache_attend_splits(const tg_kvcache *c, int layer, int64_t pos) {
    view vw;
    make_view(c, layer, pos, &vw);
    const int64_t n = span(vw.lo, vw.hi) + span(vw.s0, vw.s1);
    const int64_t s = n / TG_ATTN_SPLIT_TOKENS;
    return s < 1 ? 1 : s > TG_ATTN_MAX_SPLITS ? TG_ATTN_MAX_SPLITS : (int)s;
}

size_t tg_kvcache_work_floats(const tg_kvcache *c) {
    const size_t D = (size_t)c->g.head_dim, gq = (size_t)(c->g.n_heads / c->g.n_kv_heads);
    return BLK * D + 2 * D + gq * (D + 1) + TG_ATTN_INT_SCRATCH_WORDS(gq, D) + gq * (size_t)c->g.max_stored;
}

size_t tg_kvcache_part_floats(const tg_kvcache *c) {
    return (size_t)(c->g.n_heads / c->g.n_kv_heads) * ((size_t)c->g.head_dim + 2);
}

void tg_kvcache_query(tg_kvcache *c, int layer, int64_t pos, const float *q, float *q_out) {
    const tg_cache_geom *g = &c->g;
    const int64_t NH = g->n_heads, D = g->head_dim;
    if (q_out != q) memmove(q_out, q, (size_t)(NH * D) * sizeof(float));
    const tg_layer_cache *L = &c->layers[c->kv_source[layer]];
    if (g->slot_rope) {
        /* the reference: the query sits at its own slot, the sinks, then its place among the held non-sink tokens */
        const int64_t qpos = pos < g->sink ? pos : L->n_sink + (pos - g->sink - L->first);
        tg_rope_table_apply(c->rope_tab, q_out, (int)NH, qpos, c->shape.rope_style);
    } else {
        tg_kvcache_rope_at(c, pos);
        tg_rope_apply(q_out, (int)NH, (int)D, c->rope_cos, c->rope_sin, c->shape.rope_style);
        /* re-positioned sinks: their angles for this query, once per offset (the pieces rotate the sinks with them) */
        if (g->reposition && g->sink > 0) tg_kvcache_sink_angles(c, tg_kvcache_sink_offset(c, L, pos));
    }
    tg_scale_f32(q_out, 1.0f / sqrtf((float)D), NH * D);
    const int64_t gq = NH / g->n_kv_heads;
    for (int64_t i = 0; g->rot_k && i < NH; i++) /* rotated as the keys are: every score unchanged */
        tg_rot_apply(q_out + i * D, tg_kvcache_rot_sign(c, layer, (int)(i / gq)), (int)D);
}

void tg_kvcache_rot_output(const tg_kvcache *c, int layer, int h, float *o) {
    const int gq = c->g.n_heads / c->g.n_kv_heads, D = c->g.head_dim;
    for (int i = 0; c->g.rot_v && i < gq; i++) tg_rot_inverse(o + (int64_t)i * D, tg_kvcache_rot_sign(c, layer, h), D);
}

/* ---- blocks: the kernels' view of up to eight rows ------------------------------------------------------------ */

/* Rows [i0, i0 + nr) of a segment as a block; grid is the segment's widened per-channel grid (keys' codes). */
static void make_block(const tg_segment *g, int64_t i0, int nr, const float *grid, tg_attn_block *b) {
    b->kind = g->kind;
    b->bits = g->bits;
    b->nr = nr;
    b->grid = g->kind == TG_SEG_CODES && g->gscale ? grid : NULL;
    b->tile = g->tiled ? g->p : NULL;
    b->tile_row0 = g->t0 + i0;
    b->tile_group = g->group;
    for (int r = 0; r < BLK; r++) b->rows[r] = g->p + (size_t)(i0 + (r < nr ? r : 0)) * g->stride;
    if (g->kind != TG_SEG_CODES || g->gscale) return;
    if (g->tstride == 1 && nr == BLK && !g->tiled) { /* a grouped store's scales are contiguous: eight at once */
        tg_f16_to_f32_row(g->tscale + i0, b->tscale, BLK);
        tg_f16_to_f32_row(g->tzero + i0, b->tzero, BLK);
        return;
    }
    for (int r = 0; r < nr; r++) {
        b->tscale[r] = tg_f16_to_f32(g->tscale[(size_t)(i0 + r) * g->tstride]);
        b->tzero[r] = tg_f16_to_f32(g->tzero[(size_t)(i0 + r) * g->tstride]);
    }
}

/* Element k of row r of a block as fp32 (the scalar reference of the kernels' widening). */
static float elem(const tg_attn_block *b, int r, int64_t k, int64_t D) {
    const uint8_t *row = b->rows[r];
    uint16_t h;
    switch (b->kind) {
    case TG_SEG_F32: {
        float f;
        memcpy(&f, row + 4 * k, 4);
        return f;
    }
    case TG_SEG_F16: memcpy(&h, row + 2 * k, 2); return tg_f16_to_f32(h);
    case TG_SEG_BF16: memcpy(&h, row + 2 * k, 2); return tg_bf16_to_f32(h);
    default: {
        const float u = b->tile ? (float)tg_kivi_tile_get(b->tile, b->grid != NULL, b->bits, b->tile_group, D,
                                                          b->tile_row0 + r, k)
                                : (float)tg_kivi_get(row, b->bits, k);
        return b->grid ? u * b->grid[k] + b->grid[D + k] : u * b->tscale[r] + b->tzero[r];
    }
    }
}

static void scores_ref(const tg_attn_block *b, const float *qh, int gq, int64_t D, float *sc, int64_t ld) {
    for (int i = 0; i < gq; i++)
        for (int r = 0; r < b->nr; r++) {
            float s = 0.0f;
            for (int64_t k = 0; k < D; k++) s += qh[(int64_t)i * D + k] * elem(b, r, k, D);
            sc[(int64_t)i * ld + r] = s;
        }
}

static void values_ref(const tg_attn_block *b, const float *p, int64_t ld, int gq, int64_t D, float *o) {
    for (int i = 0; i < gq; i++)
        for (int r = 0; r < b->nr; r++)
            for (int64_t k = 0; k < D; k++) o[(int64_t)i * D + k] += p[(int64_t)i * ld + r] * elem(b, r, k, D);
}

/* Whether keys of this segment are re-positioned (widened and rotated first: re-positioned sinks, every key of the
 * slot_rope reference). */
static bool repositioned(const view *vw, bool keys, bool is_sink) {
    return keys && (vw->c->g.slot_rope || (is_sink && vw->sink_off >= 0));
}

/* Whether the integer kernels take a segment (with the tiles that follow it: g->run rows). */
static bool int_path_of(const view *vw, bool keys, bool is_sink, const tg_segment *g) {
    const int64_t D = vw->c->g.head_dim;
    return g->tiled && vw->ak && vw->ak->int_keys && D % 8 == 0 && !repositioned(vw, keys, is_sink) &&
           D <= TG_ATTN_INT_MAX_D;
}

/* Scores (keys) or value sums (values) over one segment; its rows' scores start at sc (row i of query head j at
 * sc[j * ld + i]). values (keys only, or NULL): the value rows of the same tokens, which a float run of keys fetches
 * into L2 beside its own (see RUN_LEAD_BYTES). Keys stored pre-RoPE (re-positioned sinks: is_sink; every key of the
 * slot_rope reference) are widened into tile and rotated first. Returns the rows done: g->count, or g->run where the
 * integer kernels take the tiles that follow in the same pass. */
static int64_t run_segment(const view *vw, bool keys, bool is_sink, const tg_segment *g, const float *qh, float *sc,
                        int64_t ld, float *o, float *tile, float *grid, float *qfold, const tg_segment *values) {
    const tg_kvcache *c = vw->c;
    const int64_t D = c->g.head_dim;
    const tg_attn_kernels *ak = vw->ak;
    bool simd = ak && D % 8 == 0;
    const bool repo = repositioned(vw, keys, is_sink);
    const bool int_path = int_path_of(vw, keys, is_sink, g);
    if (g->kind == TG_SEG_CODES && g->gscale && !int_path) {
        tg_f16_to_f32_row(g->gscale, grid, D);
        tg_f16_to_f32_row(g->gzero, grid + D, D);
    }
    if (g->tiled) {
        if (int_path) { /* the integer domain (attend_int_avx2.c), this tile and those that follow */
            const tg_attn_tile t = {g->p, g->bits, g->group, g->t0, g->run, g->tile_next};
            int32_t *ilo = (int32_t *)(void *)(qfold + (int64_t)vw->gq * (D + 1)); /* the integer scratch */
            if (keys) {
                ak->int_keys(&t, qh, vw->gq, D, g->gscale, g->gzero, g->scale_next, ilo, sc, ld, c->int_vnni);
            } else {
                ak->int_values(&t, sc, ld, vw->gq, D, g->tscale, g->tzero, g->scale_next, o, ilo, c->int_vnni);
            }
            return g->run;
        }
        simd = false; /* the float reference reads tiles element by element */
    }
    if (simd && !repo && ak->runs(g->kind, D)) { /* plain float rows: the run kernels take them whole */
        const int64_t lead = RUN_LEAD_BYTES / (D * (g->kind == TG_SEG_F32 ? 4 : 2));
        const bool beside = values && values->kind == g->kind && !values->tiled && values->count >= g->count;
        const tg_attn_rows rows = {g->kind, g->p, g->stride, g->count, lead > BLK ? lead : BLK,
                                   beside ? values->p : NULL, beside ? values->stride : 0};
        if (keys) ak->scores_rows(&rows, qh, vw->gq, D, sc, ld);
        else ak->values_rows(&rows, sc, ld, vw->gq, D, o);
        return g->count;
    }
    const size_t row_bytes = g->kind == TG_SEG_F32 ? (size_t)D * 4
                             : g->kind == TG_SEG_CODES ? (size_t)(D * g->bits + 7) / 8 : (size_t)D * 2;
    tg_attn_block b;
    const float *qk = qh; /* the queries the kernels score with (folded with a codes segment's grid) */
    if (simd && keys && !repo && g->kind == TG_SEG_CODES) {
        ak->fold(qh, vw->gq, D, grid, qfold, qfold + (int64_t)vw->gq * D);
        qk = qfold;
    }
    int64_t fetched = 0; /* rows [0, fetched) of the segment prefetched (by the kernel table's paths) */
    for (int64_t i0 = 0; i0 < g->count; i0 += BLK) {
        const int nr = (int)(g->count - i0 < BLK ? g->count - i0 : BLK);
        const int64_t until = i0 + (PF_BLOCKS + 1) * BLK < g->count ? i0 + (PF_BLOCKS + 1) * BLK : g->count;
        for (; ak && fetched < until; fetched++)
            for (size_t off = 0; off < row_bytes; off += 64)
                __builtin_prefetch((const char *)g->p + (size_t)fetched * g->stride + off, 0, 3);
        make_block(g, i0, nr, grid, &b);
        b.bias = qk != qh ? qfold + (int64_t)vw->gq * D : NULL;
        if (repo) { /* rotate each key to its slot or sink position: widen into the tile first */
            for (int r = 0; r < nr; r++) {
                float *dst = tile + (int64_t)r * D;
                if (simd) ak->widen(&b, r, D, dst);
                else
                    for (int64_t k = 0; k < D; k++) dst[k] = elem(&b, r, k, D);
                if (c->g.slot_rope) tg_kvcache_rotate_slot(c, dst, g->slot0 + i0 + r);
                else tg_kvcache_rotate_sink(c, dst, g->slot0 + i0 + r, vw->sink_off);
                if (vw->rot) tg_rot_apply(dst, vw->rot, (int)D);
            }
            b.kind = TG_SEG_F32;
            b.grid = NULL;
            b.bias = NULL;
            for (int r = 0; r < BLK; r++) b.rows[r] = (const uint8_t *)(const void *)(tile + (int64_t)(r < nr ? r : 0) * D);
        }
        if (simd) {
            if (keys) ak->scores(&b, qk, vw->gq, D, sc + i0, ld);
            else ak->values(&b, sc + i0, ld, vw->gq, D, o);
            continue;
        }
        if (keys) scores_ref(&b, qh, vw->gq, D, sc + i0, ld);
        else values_ref(&b, sc + i0, ld, vw->gq, D, o);
    }
    return g->count;
}

/* The piece's tokens in order (visible sinks [s0, s1], then non-sink tokens [a, b]), segment by segment; returns how
 * many there are. */
static int64_t sweep(const view *vw, int h, bool keys, int64_t s0, int64_t s1, int64_t a, int64_t b, const float *qh,
                     float *sc, int64_t ld, float *o, float *tile, float *grid, float *qfold) {
    int64_t t = 0;
    if (s1 >= s0) {
        tg_segment g;
        tg_store_sink_segment(vw->c, vw->L, keys, h, s0, s1, &g);
        run_segment(vw, keys, true, &g, qh, sc + t, ld, o, tile, grid, qfold, NULL);
        t += g.count;
    }
    /* each segment looked up before the one ahead of it runs: where the integer kernels take it, its first tile and
     * that tile's scales are fetched meanwhile */
    tg_segment g, next;
    bool g_int = false;
    if (a <= b) {
        tg_store_segment(vw->c, vw->L, keys, h, a, b, &g);
        g_int = int_path_of(vw, keys, false, &g);
    }
    for (int64_t n = a; n <= b;) {
        const int64_t rows = g_int ? g.run : g.count; /* what run_segment does of it */
        const bool more = n + rows <= b;
        bool next_int = false;
        if (more) {
            tg_store_segment(vw->c, vw->L, keys, h, n + rows, b, &next);
            next_int = int_path_of(vw, keys, false, &next);
            if (next_int) { /* next_int: vw->ak is set */
                vw->ak->int_prefetch_tile(next.p, next.bits, next.group, vw->c->g.head_dim);
                if (keys) vw->ak->int_prefetch_scales(next.gscale, next.gzero, vw->c->g.head_dim);
                else vw->ak->int_prefetch_scales(next.tscale, next.tzero, next.group - next.t0);
            }
        }
        /* a float run of keys fetches these tokens' value rows beside its own: looked up for float keys only */
        tg_segment values;
        const bool with_values = vw->ak && keys && !g.tiled && g.kind != TG_SEG_CODES;
        if (with_values) tg_store_segment(vw->c, vw->L, false, h, n, b, &values);
        const int64_t done =
            run_segment(vw, keys, false, &g, qh, sc + t, ld, o, tile, grid, qfold, with_values ? &values : NULL);
        t += done;
        n += done;
        if (more) {
            g = next;
            g_int = next_int;
        }
    }
    return t;
}

/* Where a piece's scores start in its work space: after the tile [BLK][D], the grid [2D], the folded queries [gq][D],
 * their biases [gq] and the integer kernels' quantised queries (TG_ATTN_INT_SCRATCH_WORDS). */
static int64_t scores_offset(int64_t D, int gq) {
    return BLK * D + 2 * D + (int64_t)gq * (D + 1) + (int64_t)TG_ATTN_INT_SCRATCH_WORDS(gq, D);
}

void tg_kvcache_attend_piece(const tg_kvcache *c, int layer, int64_t pos, const float *q_rot, int h, int split,
                             int n_split, float *part, float *work) {
    view vw;
    make_view(c, layer, pos, &vw);
    if (c->g.rot_k) vw.rot = tg_kvcache_rot_sign(c, layer, h);
    const int64_t D = c->g.head_dim, ld = c->g.max_stored;
    const int gq = vw.gq;
    const int64_t len = span(vw.lo, vw.hi);
    const int64_t a = vw.lo + len * split / n_split, b = vw.lo + len * (split + 1) / n_split - 1;
    const int64_t s0 = split == 0 ? vw.s0 : 0, s1 = split == 0 ? vw.s1 : -1;
    const float *qh = q_rot + (int64_t)h * gq * D;
    /* work: tile [BLK][D], grid [2D], folded queries [gq][D] + biases [gq], quantised queries, scores
     * [gq][max_stored] */
    float *tile = work, *grid = tile + BLK * D, *qfold = grid + 2 * D, *sc = work + scores_offset(D, gq);

    const int64_t nt = sweep(&vw, h, true, s0, s1, a, b, qh, sc, ld, NULL, tile, grid, qfold);
    float *o = part + 2 * gq; /* part: m[gq], l[gq], o[gq][D] */
    memset(o, 0, (size_t)(gq * D) * sizeof(float));
    if (tg_kvcache_piece_softmax(c, sc, ld, nt, part)) sweep(&vw, h, false, s0, s1, a, b, NULL, sc, ld, o, tile, grid, qfold);
    tg_kvcache_rot_output(c, layer, h, o);
}

bool tg_kvcache_piece_softmax(const tg_kvcache *c, float *sc, int64_t ld, int64_t nt, float *part) {
    const int gq = c->g.n_heads / c->g.n_kv_heads;
    const float cap = c->shape.attn_softcap;
    bool any = false;
    for (int i = 0; i < gq; i++) {
        float *si = sc + (int64_t)i * ld;
        for (int64_t t = 0; cap > 0.0f && t < nt; t++) /* the soft-cap keeps a masked -inf score masked */
            if (si[t] > -INFINITY) si[t] = cap * tanhf(si[t] / cap);
        const float m = tg_max_skip_nan(si, nt); /* NaN scores are skipped here and make the sum NaN later */
        part[i] = m;
        if (m == -INFINITY) {
            part[gq + i] = 0.0f;
            for (int64_t t = 0; t < nt; t++) si[t] = 0.0f;
            continue;
        }
        if (c->simd) {
            part[gq + i] = tg_exp_shift_sum(si, nt, m);
        } else {
            double sum = 0.0;
            for (int64_t t = 0; t < nt; t++) sum += (double)(si[t] = expf(si[t] - m));
            part[gq + i] = (float)sum;
        }
        any = true;
    }
    return any;
}

int64_t tg_kvcache_visible(const tg_kvcache *c, int layer, int64_t pos, int64_t *s1, int64_t *lo, int64_t *hi,
                           bool *plain) {
    view vw;
    make_view(c, layer, pos, &vw);
    *s1 = vw.s1;
    *lo = vw.lo;
    *hi = vw.hi;
    *plain = c->layer_window[layer] == 0 && vw.sink_off < 0 && !c->g.slot_rope;
    return span(vw.s0, vw.s1) + span(vw.lo, vw.hi);
}

void tg_kvcache_attend_combine(const tg_kvcache *c, const float *parts, int n_split, float *out) {
    const int64_t D = c->g.head_dim;
    const int gq = c->g.n_heads / c->g.n_kv_heads;
    const size_t pf = tg_kvcache_part_floats(c);
    for (int i = 0; i < gq; i++) {
        float M = -INFINITY;
        for (int s = 0; s < n_split; s++) {
            const float *p = parts + (size_t)s * pf;
            if (p[gq + i] != 0.0f && p[i] > M) M = p[i];
        }
        float *oi = out + (int64_t)i * D;
        memset(oi, 0, (size_t)D * sizeof(float));
        if (M == -INFINITY) continue; /* nothing visible */
        double den = 0.0;
        for (int s = 0; s < n_split; s++) {
            const float *p = parts + (size_t)s * pf;
            if (p[gq + i] == 0.0f) continue;
            const float w = n_split == 1 ? 1.0f : expf(p[i] - M);
            den += (double)w * p[gq + i];
            tg_axpy_f32(w, p + 2 * gq + (int64_t)i * D, oi, D);
        }
        tg_scale_f32(oi, (float)(1.0 / den), D);
    }
}

/* ---- the attention-sink meter --------------------------------------------------------------------------------- */

int64_t tg_kvcache_piece_mass(const tg_kvcache *c, int layer, int64_t pos, int h, int split, int n_split,
                              const float *part, const float *work, float *mass) {
    (void)h;
    view vw;
    make_view(c, layer, pos, &vw);
    const int64_t D = c->g.head_dim, ld = c->g.max_stored;
    const int gq = vw.gq;
    const int64_t len = span(vw.lo, vw.hi), ns = span(vw.s0, vw.s1), nvis = ns + len;
    const int64_t a = vw.lo + len * split / n_split, b = vw.lo + len * (split + 1) / n_split - 1;
    /* the piece's token t is visible token first + t (share 0 holds the sinks, then the oldest non-sink tokens) */
    const int64_t first = split == 0 ? 0 : ns + (a - vw.lo);
    const int64_t nt = (split == 0 ? ns : 0) + span(a, b);
    const float *sc = work + scores_offset(D, gq); /* the piece's scores, now exp(score - m) */
    static const int64_t first_n[3] = {1, 4, 16};
    for (int i = 0; i < gq; i++) {
        const float *si = sc + (int64_t)i * ld;
        float *mi = mass + (int64_t)i * TG_MASS_FLOATS;
        mi[0] = part[i];
        mi[1] = part[gq + i];
        for (int r = 0; r < 3; r++) { /* visible tokens [0, first_n[r]) */
            double s = 0.0;
            for (int64_t t = 0; t < nt && first + t < first_n[r]; t++) s += si[t];
            mi[2 + r] = (float)s;
        }
        double s = 0.0; /* visible tokens [nvis - 16, nvis) */
        for (int64_t t = nt - 1; t >= 0 && first + t >= nvis - TG_MASS_NEWEST; t--) s += si[t];
        mi[5] = (float)s;
    }
    return nvis;
}

void tg_kvcache_mass_combine(const tg_kvcache *c, const float *mass, int n_split, double *shares) {
    const int gq = c->g.n_heads / c->g.n_kv_heads;
    const size_t pf = (size_t)gq * TG_MASS_FLOATS;
    for (int i = 0; i < gq; i++) {
        float M = -INFINITY;
        for (int s = 0; s < n_split; s++) {
            const float *p = mass + (size_t)s * pf + (size_t)i * TG_MASS_FLOATS;
            if (p[1] != 0.0f && p[0] > M) M = p[0];
        }
        double *out = shares + (size_t)i * TG_MASS_RANGES;
        for (int r = 0; r < TG_MASS_RANGES; r++) out[r] = 0.0;
        if (M == -INFINITY) continue;
        double den = 0.0;
        for (int s = 0; s < n_split; s++) {
            const float *p = mass + (size_t)s * pf + (size_t)i * TG_MASS_FLOATS;
            if (p[1] == 0.0f) continue;
            const double w = n_split == 1 ? 1.0 : (double)expf(p[0] - M);
            den += w * p[1];
            for (int r = 0; r < TG_MASS_RANGES; r++) out[r] += w * p[2 + r];
        }
        for (int r = 0; r < TG_MASS_RANGES; r++) out[r] /= den;
    }
}
