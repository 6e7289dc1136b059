/* attend_int_avx2.c — attention over tiled KIVI codes in the integer domain (issue #16): the scores and value sums of
 * one segment of a tile (kivi.h: four adjacent bytes of a tile are one 32-bit lane, so that vpdpbusd's sums of four
 * byte products land where they are needed and no horizontal sum is ever taken).
 *
 * Keys, once per segment: the key grid is folded into the queries (qf = q * scale, bias = q . zero) and each folded
 * query head is quantised, q8 = round(qf / dq) with dq = max|qf| / Q (Q = 127 for int4 / int2 codes; Q = 8191 for
 * int8 codes, whose near-lossless grid deserves more than 8 bits: q8 = 128 qh + ql is taken as two byte operands),
 * so that q . (u * scale + zero) ~= dq * (q8 . u) + bias, off by at most dq / 2 * sum_k u_k. A lane is a row: eight
 * rows' scores per instruction and head.
 * Values, per run of up to 32 rows of a segment: each query head's weights w_r = p_r * scale_r are quantised,
 * w8 = round(w / dw) with dw = max w / W (W = 255 for int4 / int2 codes, unsigned byte operands against the codes;
 * W = 16383 for int8 codes, as 128 wh + wl against the codes as unsigned bytes), so that
 * o += dw * (sum_r w8_r u_r) + sum_r p_r zero_r. A lane is a channel.
 *
 * The integer sums are exact, so the VNNI instruction (AVX-512 VNNI / AVX-VNNI) and its AVX2 emulation give the same
 * bits; everything in floating point is one code path for both. attend.c keeps the float reference (simd off).
 * Where the build has AVX-512 VNNI, the VNNI path runs attend_int_avx512.c's 512-bit instances of these kernels
 * (the same bits: the tests compare them with the emulation here).
 *
 * Compiled twice (the Makefile's AVX512_TWICE): the AVX2 build holds the AVX2 table's entry points and instances, the
 * emulation's among them; the AVX-512 build (TG_ATTN_INT512) holds only what the AVX-512 table needs besides
 * attend_int_avx512.c's kernels: its entry points, the 256-bit VNNI instances for the tiles and head dims that the
 * 512-bit ones do not take, and for vnni off the AVX2 build's entry points (tg_attn_int_emul_*), not a second build of
 * the emulation. */
#include "kvcache/attend_int_inline.h"

#if TG_HAVE_AVX2

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "util/half.h"

#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define HAVE_VNNI 1
#define DP_VNNI(acc, u, s) _mm256_dpbusd_epi32(acc, u, s)
#elif defined(__AVXVNNI__)
#define HAVE_VNNI 1
#define DP_VNNI(acc, u, s) _mm256_dpbusd_avx_epi32(acc, u, s)
#else
#define HAVE_VNNI 0
#define DP_VNNI(acc, u, s) dp_emul(acc, u, s)
#endif

/* Bytes 0 and 2 (*even) and 1 and 3 (*odd) of each 32-bit lane of x as int16 words: unsigned, or signed (sgn). */
TG_INLINE void byte_words(__m256i x, const int sgn, __m256i *even, __m256i *odd) {
    *even = sgn ? _mm256_srai_epi16(_mm256_slli_epi16(x, 8), 8) : _mm256_and_si256(x, _mm256_set1_epi16(0x00ff));
    *odd = sgn ? _mm256_srai_epi16(x, 8) : _mm256_srli_epi16(x, 8);
}

/* acc + the four products of each lane's unsigned bytes u with an operand given as int16 words (byte_words' even /
 * odd split), in two vpmaddwd: exact while a pair of products stays within int32 (always, for words of at most 16383
 * against bytes). */
TG_INLINE __m256i dp_words(__m256i acc, __m256i u, __m256i even, __m256i odd) {
    __m256i ue, uo;
    byte_words(u, 0, &ue, &uo);
    return _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(ue, even), _mm256_madd_epi16(uo, odd)));
}

/* acc + the sums of four adjacent unsigned x signed byte products, exactly (vpdpbusd without VNNI, for any bytes). The
 * kernels take the cheaper forms below (dp_small; dp_words against wide14's operand); this general one backs DP_VNNI
 * where the build has no VNNI (and so no VNNI instances that could call it). */
TG_INLINE __m256i dp_emul(__m256i acc, __m256i u, __m256i s) {
    __m256i se, so;
    byte_words(s, 1, &se, &so);
    return dp_words(acc, u, se, so);
}

/* dp_emul where no two adjacent products can leave int16 (|u_k s_k + u_k+1 s_k+1| <= 32767: codes of at most four
 * bits against bytes, 15 * 255 * 2 at most): vpmaddubsw's pair sums are then exact, and one vpmaddwd by ones adds the
 * pairs — the same integers in three instructions. */
TG_INLINE __m256i dp_small(__m256i acc, __m256i u, __m256i s) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}

/* acc + the products of codes u with a byte operand of `bits`-bit codes (dp_small's bound holds below 8 bits). */
TG_INLINE __m256i dp(const int vnni, const int bits, __m256i acc, __m256i u, __m256i s) {
    return vnni ? DP_VNNI(acc, u, s) : bits < 8 ? dp_small(acc, u, s) : dp_emul(acc, u, s);
}

/* The 14-bit operand 128 hi + lo of int8 codes' queries and weights (lo bytes in [0, 127], hi bytes signed) as the
 * int16 words dp_words takes. Without VNNI the int8 codes meet it whole, in two vpmaddwd (codes at most 255 times at
 * most 16383), instead of two emulated dpbusd of its hi and lo bytes: the same integer as 128 * (hi products) + (lo
 * products). */
TG_INLINE void wide14(__m256i lo, __m256i hi, __m256i *even, __m256i *odd) {
    __m256i le, lo_odd, he, ho;
    byte_words(lo, 0, &le, &lo_odd);
    byte_words(hi, 1, &he, &ho);
    *even = _mm256_add_epi16(le, _mm256_slli_epi16(he, 7));
    *odd = _mm256_add_epi16(lo_odd, _mm256_slli_epi16(ho, 7));
}

/* Slot s of every byte of x (codes of `bits` bits) as bytes. */
TG_INLINE __m256i slot(const int bits, __m256i x, const int s) {
    if (bits == 8) return x;
    __m256i y = x;
    switch (s * bits) {
    case 2: y = _mm256_srli_epi16(x, 2); break;
    case 4: y = _mm256_srli_epi16(x, 4); break;
    case 6: y = _mm256_srli_epi16(x, 6); break;
    default: break;
    }
    return _mm256_and_si256(y, _mm256_set1_epi8(bits == 4 ? 0x0f : 0x03));
}

/* ---- keys ------------------------------------------------------------------------------------------------------ */

/* The folded queries of a key segment, quantised (tg_attn_int_prepare_keys) with head dim DD (a constant: the
 * folded query stays in registers), or 0: D. */
#if !TG_ATTN_INT512 /* the AVX-512 build prepares its queries at 512 bits (attend_int_avx512.c) */
TG_INLINE void prepare_keys(const float *qh, int gq, int64_t D, const uint16_t *gscale, const uint16_t *gzero,
                            const int bits, tg_attn_int_queries *q, const int DD) {
    const int64_t n = DD ? DD : D;
    __m256 sv[TG_ATTN_INT_MAX_D / 8], zv[TG_ATTN_INT_MAX_D / 8]; /* the grid, widened from fp16 once */
    for (int64_t k = 0; k < n; k += 8) {
        sv[k / 8] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(gscale + k)));
        zv[k / 8] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(gzero + k)));
    }
    for (int j = 0; j < gq; j++) prepare_key_head(qh + (int64_t)j * n, n, sv, zv, bits, q, j);
}

/* prepare_keys, instantiated once per (bits, head dim 32 / 64 / 128 / other): out of line, so that the kernels that
 * call it are not instantiated per head dim (they were: a two-minute compile of this file). */
#define PREPARE_KEYS(B, DD)                                                                                           \
    static __attribute__((noinline)) void prepare_keys_b##B##_d##DD(const float *qh, int gq, int64_t D,               \
                                                                     const uint16_t *gscale, const uint16_t *gzero,   \
                                                                     tg_attn_int_queries *q) {                        \
        prepare_keys(qh, gq, D, gscale, gzero, B, q, DD);                                                             \
    }
TG_ATTN_INT_INSTANCES(PREPARE_KEYS)
#undef PREPARE_KEYS

/* The instance for codes of `bits` bits and head dim D. */
static TG_ATTN_INT_LOOKUP(tg_attn_int_prepare_fn, prepare_keys_for, prepare_keys)

void tg_attn_int_prepare_keys(const float *qh, int gq, int64_t D, const uint16_t *gscale, const uint16_t *gzero,
                              int bits, tg_attn_int_queries *q) {
    prepare_keys_for(bits, D)(qh, gq, D, gscale, gzero, q);
}
#endif

/* Scores of tile rows [rb, rb + 8 NB) for NQ heads, stored for the rows of [t0, t0 + count). NB blocks at once: NB *
 * NQ independent accumulators keep the dot-product unit busy (one chain waits on each vpdpbusd's latency). */
TG_INLINE void scores_blocks(const int vnni, const int bits, const tg_attn_tile *t, int64_t rb, const int32_t *q_lo,
                             const int32_t *q_hi, const float *dq, const float *bias, int64_t D, float *sc, int64_t ld,
                             const int NQ, const int NB) {
    const int cpb = 8 / bits;
    const int64_t nchunk = D / (4 * cpb), qw = D / 4; /* int32 words per query head */
    __m256i acc[4][4], acch[4][4];
    for (int b = 0; b < NB; b++)
        for (int j = 0; j < NQ; j++) acc[b][j] = acch[b][j] = _mm256_setzero_si256();
    for (int64_t c = 0; c < nchunk; c++) {
        __m256i x[4];
        for (int b = 0; b < NB; b++)
            x[b] = _mm256_loadu_si256((const __m256i *)(const void *)(t->tile + (c * t->G + rb + 8 * b) * 4));
        for (int s = 0; s < cpb; s++) {
            __m256i xs[4];
            for (int b = 0; b < NB; b++) xs[b] = slot(bits, x[b], s);
            const int64_t w = c * cpb + s;
            for (int j = 0; j < NQ; j++) {
                const __m256i ql = _mm256_set1_epi32(q_lo[j * qw + w]);
                if (bits == 8 && !vnni) { /* the whole 14-bit query at once; acch stays 0 */
                    __m256i qe, qo;
                    wide14(ql, _mm256_set1_epi32(q_hi[j * qw + w]), &qe, &qo);
                    for (int b = 0; b < NB; b++) acc[b][j] = dp_words(acc[b][j], xs[b], qe, qo);
                    continue;
                }
                for (int b = 0; b < NB; b++) acc[b][j] = dp(vnni, bits, acc[b][j], xs[b], ql);
                if (bits == 8) {
                    const __m256i qh = _mm256_set1_epi32(q_hi[j * qw + w]);
                    for (int b = 0; b < NB; b++) acch[b][j] = dp(vnni, bits, acch[b][j], xs[b], qh);
                }
            }
        }
    }
    for (int b = 0; b < NB; b++) {
        const int64_t r0 = rb + 8 * b;
        const int64_t a = t->t0 > r0 ? t->t0 - r0 : 0, e = t->t0 + t->count - r0 < 8 ? t->t0 + t->count - r0 : 8;
        for (int j = 0; j < NQ; j++) {
            const __m256i isum = bits == 8 ? _mm256_add_epi32(_mm256_slli_epi32(acch[b][j], 7), acc[b][j]) : acc[b][j];
            const __m256 sv = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(dq[j]), _mm256_set1_ps(bias[j]));
            float *dst = sc + (int64_t)j * ld + (r0 - t->t0);
            if (a == 0 && e == 8) {
                _mm256_storeu_ps(dst, sv);
            } else {
                float out[8];
                _mm256_storeu_ps(out, sv);
                for (int64_t r = a; r < e; r++) dst[r] = out[r];
            }
        }
    }
}

/* NQ heads over every block of the segment: four blocks at a time while there are (two with many accumulators). */
TG_INLINE void scores_heads(const int vnni, const int bits, const tg_attn_tile *t, const int32_t *lo, const int32_t *hi,
                            const float *dq, const float *bias, int64_t D, float *sc, int64_t ld, const int NQ) {
    const int64_t end = t->t0 + t->count;
    int64_t rb = t->t0 / 8 * 8;
    const int wide = (bits == 8 ? 2 * NQ : NQ) <= 4;
    if (wide)
        for (; rb + 32 <= end + 7 && rb + 32 <= t->G; rb += 32)
            scores_blocks(vnni, bits, t, rb, lo, hi, dq, bias, D, sc, ld, NQ, 4);
    for (; rb + 16 <= end + 7 && rb + 16 <= t->G; rb += 16)
        scores_blocks(vnni, bits, t, rb, lo, hi, dq, bias, D, sc, ld, NQ, 2);
    for (; rb < end; rb += 8) scores_blocks(vnni, bits, t, rb, lo, hi, dq, bias, D, sc, ld, NQ, 1);
}

TG_INLINE void scores_all(const int vnni, const int bits, const tg_attn_tile *t, const tg_attn_int_queries *q, int gq,
                          int64_t D, float *sc, int64_t ld) {
    const int64_t qw = D / 4;
    int j = 0;
#define HEADS(NQ) scores_heads(vnni, bits, t, q->lo + j * qw, q->hi + j * qw, q->dq + j, q->bias + j, D, sc + j * ld, ld, NQ)
    for (; j + 4 <= gq; j += 4) HEADS(4);
    switch (gq - j) {
    case 3: HEADS(3); break;
    case 2: HEADS(2); break;
    case 1: HEADS(1); break;
    default: break;
    }
#undef HEADS
}

/* Tile j of a segment (rows of tile j's own, from its first in the segment) and the segment rows before it. */
TG_INLINE tg_attn_tile tile_of(const tg_attn_tile *t, int64_t j, int64_t *before) {
    const int64_t first = t->G - t->t0; /* the first tile's rows */
    *before = j == 0 ? 0 : first + (j - 1) * t->G;
    const int64_t t0 = j == 0 ? t->t0 : 0, left = t->count - *before, room = t->G - t0;
    return (tg_attn_tile){t->tile + (size_t)j * t->next, t->bits, t->G, t0, left < room ? left : room, 0};
}

/* Tiles a segment spans. */
TG_INLINE int64_t tiles_of(const tg_attn_tile *t) { return t->count <= t->G - t->t0 ? 1 : 1 + (t->count - (t->G - t->t0) + t->G - 1) / t->G; }

/* Every 64-byte line that the n bytes at p touch, brought into L2 once each (a prefetch never faults, so p may lie
 * past what is held). Into L2, not L1: see TILE_LEAD_BYTES. */
TG_INLINE void prefetch_bytes(const void *p, size_t n) {
    const uintptr_t end = (uintptr_t)p + n;
    for (uintptr_t a = (uintptr_t)p & ~(uintptr_t)63; a < end; a += 64) _mm_prefetch((const char *)a, _MM_HINT_T1);
}

void tg_attn_int_prefetch_tile(const uint8_t *tile, int bits, int64_t G, int64_t D) {
    prefetch_bytes(tile, (size_t)G * (size_t)D * (size_t)bits / 8);
}

void tg_attn_int_prefetch_scales(const uint16_t *scale, const uint16_t *zero, int64_t n) {
    prefetch_bytes(scale, (size_t)n * sizeof *scale);
    prefetch_bytes(zero, (size_t)n * sizeof *zero);
}

/* How far ahead a segment's tiles are fetched: the tiles covering at least this many bytes (at least one), into L2.
 * Without a lead the value kernel waits on each tile's first lines; into L1 the prefetches queue for this core's few
 * L1 miss buffers, where the loads wait too, so a few KB into L2 is the lead (docs/PERFORMANCE.md, Session 19). */
#define TILE_LEAD_BYTES 4096

/* While tile j of a segment's n is worked on, tile j + k (k tiles: TILE_LEAD_BYTES) comes in, in two halves (half 0,
 * then 1) with the next tile's query or run preparation between them; the first calls fetch tiles 1 .. k. Issued at
 * once, a tile's prefetches wait for miss buffers, and the core with them (docs/PERFORMANCE.md, Session 24). */
TG_INLINE void prefetch_next_tiles(const tg_attn_tile *t, int64_t D, int64_t j, int64_t n, int half) {
    const int64_t bytes = t->G * D * t->bits / 8, k = bytes < TILE_LEAD_BYTES ? TILE_LEAD_BYTES / bytes : 1;
    for (int64_t i = j == 0 ? 1 : j + k; i <= j + k && i < n; i++)
        prefetch_bytes(t->tile + (size_t)i * t->next + (size_t)half * (size_t)(bytes / 2), (size_t)(bytes / 2));
}

/* Tiles' queries at j: two sets in scratch (tile j's in set j % 2), so that tile j + 1's are prepared while tile j is
 * scored (two independent chains in flight). */
TG_INLINE tg_attn_int_queries queries_at(int32_t *scratch, int gq, int64_t D, int64_t j) {
    int32_t *base = scratch + (j & 1) * (int64_t)gq * (D / 2 + 2);
    float *dq = (float *)(void *)(base + (int64_t)gq * (D / 2));
    return (tg_attn_int_queries){base, base + (int64_t)gq * (D / 4), dq, dq + gq};
}

/* Instances, one per (dot-product form, code bits, head dim 32 / 64 / 128 / any other): out of line, each
 * instantiated once (the per-call overhead is paid once per tile, against a tile's rows * heads * head dim of work);
 * a constant head dim unrolls the chunk loop. */
#define SCORES_INSTANCE(V, B, DD)                                                                                     \
    static __attribute__((noinline)) void scores_v##V##_b##B##_d##DD(const tg_attn_tile *t,                          \
                                                                     const tg_attn_int_queries *q, int gq, int64_t D, \
                                                                     float *sc, int64_t ld) {                         \
        scores_all(V, B, t, q, gq, DD ? DD : D, sc, ld);                                                              \
    }
#define SCORES_INSTANCE_D(V, B)                                                                                       \
    SCORES_INSTANCE(V, B, 32) SCORES_INSTANCE(V, B, 64) SCORES_INSTANCE(V, B, 128) SCORES_INSTANCE(V, B, 0)
#if TG_ATTN_INT512
SCORES_INSTANCE_D(1, 8)
SCORES_INSTANCE_D(1, 4)
SCORES_INSTANCE_D(1, 2)

/* The VNNI scores instance for tiles of G rows of codes of `bits` bits (head dim D): at 512 bits where G allows. */
static tg_attn_int_scores_fn *scores_for(int bits, int64_t G, int64_t D) {
    static tg_attn_int_scores_fn *const table[3][4] = TG_ATTN_INT_TABLE(scores_v1);
    if (G % 16 == 0) return tg_attn_int512_scores_for(bits, D);
    return table[width_row(bits)][dim_column(D)];
}
#else
SCORES_INSTANCE_D(0, 8)
SCORES_INSTANCE_D(0, 4)
SCORES_INSTANCE_D(0, 2)
#if HAVE_VNNI
SCORES_INSTANCE_D(1, 8)
SCORES_INSTANCE_D(1, 4)
SCORES_INSTANCE_D(1, 2)
#define VNNI_TABLE TG_ATTN_INT_TABLE(scores_v1)
#else /* the "instruction" is the emulation: one instance serves both */
#define VNNI_TABLE TG_ATTN_INT_TABLE(scores_v0)
#endif

/* The scores instance for codes of `bits` bits (head dim D), with the VNNI instruction or its emulation. */
static tg_attn_int_scores_fn *scores_for(bool vnni, int bits, int64_t D) {
    static tg_attn_int_scores_fn *const table[2][3][4] = {TG_ATTN_INT_TABLE(scores_v0), VNNI_TABLE};
    return table[vnni && HAVE_VNNI][width_row(bits)][dim_column(D)];
}
#undef VNNI_TABLE
#endif
#undef SCORES_INSTANCE_D
#undef SCORES_INSTANCE

void tg_attn_int_keys(const tg_attn_tile *t, const float *qh, int gq, int64_t D, const uint16_t *gscale,
                      const uint16_t *gzero, size_t gstride, int32_t *scratch, float *sc, int64_t ld, bool vnni) {
#if TG_ATTN_INT512 /* the queries prepared at 512 bits (the same bits) */
    if (!vnni) {
        tg_attn_int_emul_keys(t, qh, gq, D, gscale, gzero, gstride, scratch, sc, ld);
        return;
    }
    tg_attn_int_prepare_fn *const prepare = tg_attn_int512_prepare_for(t->bits, D);
    tg_attn_int_scores_fn *const scores = scores_for(t->bits, t->G, D);
#else
    tg_attn_int_prepare_fn *const prepare = prepare_keys_for(t->bits, D);
    tg_attn_int_scores_fn *const scores = scores_for(vnni, t->bits, D);
#endif
    const int64_t n = tiles_of(t);
    if (n > 1) tg_attn_int_prefetch_scales(gscale + gstride, gzero + gstride, D); /* the first pass folds it in */
    tg_attn_int_queries q0 = queries_at(scratch, gq, D, 0);
    prepare(qh, gq, D, gscale, gzero, &q0);
    for (int64_t j = 0; j < n; j++) {
        int64_t before;
        const tg_attn_tile tj = tile_of(t, j, &before);
        prefetch_next_tiles(t, D, j, n, 0);
        /* the grid the next pass folds in was fetched by this one's predecessor: fetch the one after */
        if (j + 2 < n) tg_attn_int_prefetch_scales(gscale + (size_t)(j + 2) * gstride, gzero + (size_t)(j + 2) * gstride, D);
        const uint16_t *gs = gscale + (size_t)(j + 1) * gstride, *gz = gzero + (size_t)(j + 1) * gstride;
        if (j + 1 < n) { /* (the next segment's first grid: fetched by the attention sweep, attend.c) */
            tg_attn_int_queries qn = queries_at(scratch, gq, D, j + 1);
            prepare(qh, gq, D, gs, gz, &qn);
        }
        prefetch_next_tiles(t, D, j, n, 1);
        const tg_attn_int_queries q = queries_at(scratch, gq, D, j);
        scores(&tj, &q, gq, D, sc + before, ld);
    }
}

#if !TG_ATTN_INT512
void tg_attn_int_scores(const tg_attn_tile *t, const tg_attn_int_queries *q, int gq, int64_t D, float *sc, int64_t ld,
                        bool vnni) {
    scores_for(vnni, t->bits, D)(t, q, gq, D, sc, ld);
}

void tg_attn_int_emul_keys(const tg_attn_tile *t, const float *qh, int gq, int64_t D, const uint16_t *gscale,
                           const uint16_t *gzero, size_t gstride, int32_t *scratch, float *sc, int64_t ld) {
    tg_attn_int_keys(t, qh, gq, D, gscale, gzero, gstride, scratch, sc, ld, false);
}
#endif

/* ---- values ---------------------------------------------------------------------------------------------------- */

/* FULL: every row of the run's 8-row vectors lies in the segment (no masks); FULL == 2: and the run is all RUN rows
 * (its vector count a constant, as attend_int_avx512.c's). */
TG_INLINE void prepare_run(const int bits, const int FULL, const tg_attn_tile *t, int64_t R, int64_t n4,
                           const float *p, int64_t ld, int gq, const uint16_t *tscale, const uint16_t *tzero,
                           const run_weights *rw) {
    const int64_t nv = FULL == 2 ? RUN / 8 : (n4 + 1) / 2; /* 8-row vectors of the run */
    __m256 sv[RUN / 8], zv[RUN / 8];
    __m256i mk[RUN / 8];
    bool full[RUN / 8];
    for (int64_t v = 0; v < nv; v++) {
        /* rows R + 8 v + l: valid when inside the segment; their scales (the tile's own rows: in bounds) */
        const int64_t r0 = R + 8 * v - t->t0;
        full[v] = FULL || (r0 >= 0 && r0 + 8 <= t->count);
        const __m256i idx = _mm256_add_epi32(_mm256_set1_epi32((int)r0), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        mk[v] = FULL ? _mm256_setzero_si256()
                     : _mm256_and_si256(_mm256_cmpgt_epi32(idx, _mm256_set1_epi32(-1)),
                                        _mm256_cmpgt_epi32(_mm256_set1_epi32((int)t->count), idx));
        sv[v] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(tscale + r0)));
        zv[v] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(tzero + r0)));
    }
    for (int j = 0; j < gq; j++) {
        __m256 pv[RUN / 8];
        for (int64_t v = 0; v < nv; v++) {
            const float *pj = p + (int64_t)j * ld + (R + 8 * v - t->t0);
            pv[v] = full[v] ? _mm256_loadu_ps(pj) : _mm256_maskload_ps(pj, mk[v]);
        }
        prepare_run_head(pv, nv, sv, zv, bits, rw, j);
    }
}

/* o_j[channels of lane vectors v0 .. v0 + NV - 1] += the run's value sums for NQ heads (NV * NQ * slots independent
 * accumulators). */
TG_INLINE void values_vecs(const int vnni, const int bits, const tg_attn_tile *t, int64_t R, int64_t n4, int64_t v0,
                           const run_weights *rw, int j0, int64_t D, float *o, const int NQ, const int NV) {
    const int cpb = 8 / bits, ns = bits == 8 ? 2 : cpb; /* accumulators per (vector, head): int8 hi and lo */
    const int64_t lanes = D / cpb;
    __m256i acc[4][4][4];
    for (int v = 0; v < NV; v++)
        for (int j = 0; j < NQ; j++)
            for (int s = 0; s < ns; s++) acc[v][j][s] = _mm256_setzero_si256();
    for (int64_t i = 0; i < n4; i++) {
        const int64_t t4 = R / 4 + i;
        __m256i wl[4], wh[4];
        for (int j = 0; j < NQ; j++) {
            wl[j] = _mm256_set1_epi32(rw->lo[8 * (j0 + j) + i]);
            if (bits == 8) wh[j] = _mm256_set1_epi32(rw->hi[8 * (j0 + j) + i]);
            if (bits == 8 && !vnni) wide14(wl[j], wh[j], &wl[j], &wh[j]); /* even / odd words of the 14-bit weight */
        }
        for (int v = 0; v < NV; v++) {
            const __m256i x =
                _mm256_loadu_si256((const __m256i *)(const void *)(t->tile + (t4 * lanes + 8 * (v0 + v)) * 4));
            if (bits == 8) {
                for (int j = 0; j < NQ; j++) {
                    if (!vnni) { /* the whole weight at once; the hi sum stays 0 */
                        acc[v][j][0] = dp_words(acc[v][j][0], x, wl[j], wh[j]);
                        continue;
                    }
                    acc[v][j][0] = dp(vnni, bits, acc[v][j][0], x, wl[j]);
                    acc[v][j][1] = dp(vnni, bits, acc[v][j][1], x, wh[j]);
                }
                continue;
            }
            for (int s = 0; s < cpb; s++) {
                const __m256i xs = slot(bits, x, s);
                for (int j = 0; j < NQ; j++) acc[v][j][s] = dp(vnni, bits, acc[v][j][s], wl[j], xs);
            }
        }
    }
    for (int j = 0; j < NQ; j++) {
        const __m256 dw = _mm256_set1_ps(rw->dw[j0 + j]), zs = _mm256_set1_ps(rw->zs[j0 + j]);
        float *oj = o + (int64_t)(j0 + j) * D;
        for (int v = 0; v < NV; v++)
            for (int s = 0; s < cpb; s++) {
                const __m256i isum =
                    bits == 8 ? _mm256_add_epi32(_mm256_slli_epi32(acc[v][j][1], 7), acc[v][j][0]) : acc[v][j][s];
                float *dst = oj + 8 * (v0 + v) + s * lanes;
                const __m256 add = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), dw, zs);
                _mm256_storeu_ps(dst, _mm256_add_ps(_mm256_loadu_ps(dst), add));
            }
    }
}

/* NQ heads over every lane vector: NV at a time, NV * NQ * slots at most 16 accumulators. */
TG_INLINE void values_heads(const int vnni, const int bits, const tg_attn_tile *t, int64_t R, int64_t n4,
                            const run_weights *rw, int j0, int64_t D, float *o, const int NQ) {
    const int ns = bits == 8 ? 2 : 8 / bits;
    const int64_t nvec = D / (8 / bits) / 8;
    int64_t v = 0;
    if (4 * NQ * ns <= 16)
        for (; v + 4 <= nvec; v += 4) values_vecs(vnni, bits, t, R, n4, v, rw, j0, D, o, NQ, 4);
    if (2 * NQ * ns <= 16)
        for (; v + 2 <= nvec; v += 2) values_vecs(vnni, bits, t, R, n4, v, rw, j0, D, o, NQ, 2);
    for (; v < nvec; v++) values_vecs(vnni, bits, t, R, n4, v, rw, j0, D, o, NQ, 1);
}

TG_INLINE void prepare_run_at(const int bits, const tg_attn_tile *t, int64_t R, const float *p, int64_t ld, int gq,
                              const uint16_t *tscale, const uint16_t *tzero, const run_weights *rw) {
    int full;
    const int64_t n4 = run_quads(t, R, &full);
    if (full && n4 == RUN / 4) prepare_run(bits, 2, t, R, n4, p, ld, gq, tscale, tzero, rw);
    else if (full) prepare_run(bits, 1, t, R, n4, p, ld, gq, tscale, tzero, rw);
    else prepare_run(bits, 0, t, R, n4, p, ld, gq, tscale, tzero, rw);
}

/* n4: the run's row quads (run_quads; the constant RUN / 4 for a whole run, so that the kernels' loops unroll). */
TG_INLINE void values_run(const int vnni, const int bits, const tg_attn_tile *t, int64_t R, int64_t n4,
                          const run_weights *rw, int gq, int64_t D, float *o) {
    int j = 0;
    for (; j + 4 <= gq; j += 4) values_heads(vnni, bits, t, R, n4, rw, j, D, o, 4);
    switch (gq - j) {
    case 3: values_heads(vnni, bits, t, R, n4, rw, j, D, o, 3); break;
    case 2: values_heads(vnni, bits, t, R, n4, rw, j, D, o, 2); break;
    case 1: values_heads(vnni, bits, t, R, n4, rw, j, D, o, 1); break;
    default: break;
    }
}

#define PREPARE_RUN_INSTANCE(B)                                                                                       \
    static __attribute__((noinline)) void prepare_run_b##B(const tg_attn_tile *t, int64_t R, const float *p,          \
                                                           int64_t ld, int gq, const uint16_t *tscale,                \
                                                           const uint16_t *tzero, const run_weights *rw) {            \
        prepare_run_at(B, t, R, p, ld, gq, tscale, tzero, rw);                                                        \
    }
#if TG_ATTN_INT512 /* the 256-bit runs of the AVX-512 build: int2 codes at head dims 96, 160, 224 */
PREPARE_RUN_INSTANCE(2)
#else
PREPARE_RUN_INSTANCE(8)
PREPARE_RUN_INSTANCE(4)
PREPARE_RUN_INSTANCE(2)
#endif
#undef PREPARE_RUN_INSTANCE

#define VALUES_INSTANCE(V, B)                                                                                         \
    static __attribute__((noinline)) void values_v##V##_b##B(const tg_attn_tile *t, int64_t R, const run_weights *rw, \
                                                             int gq, int64_t D, float *o) {                           \
        const int64_t n4 = run_quads(t, R, NULL);                                                                     \
        if (n4 == RUN / 4) values_run(V, B, t, R, RUN / 4, rw, gq, D, o);                                             \
        else values_run(V, B, t, R, n4, rw, gq, D, o);                                                                \
    }
#if TG_ATTN_INT512
VALUES_INSTANCE(1, 2)
#else
VALUES_INSTANCE(0, 8)
VALUES_INSTANCE(0, 4)
VALUES_INSTANCE(0, 2)
#if HAVE_VNNI
VALUES_INSTANCE(1, 8)
VALUES_INSTANCE(1, 4)
VALUES_INSTANCE(1, 2)
#else
#define values_v1_b8 values_v0_b8
#define values_v1_b4 values_v0_b4
#define values_v1_b2 values_v0_b2
#endif
#endif
#undef VALUES_INSTANCE

/* Tile j of a value segment with where its row t0's weights and scales are. */
typedef struct {
    tg_attn_tile tile;
    const float *p;
    const uint16_t *tscale, *tzero;
} value_tile;

TG_INLINE void value_tile_at(const tg_attn_tile *t, int64_t j, const float *p, const uint16_t *tscale,
                             const uint16_t *tzero, size_t tstride, value_tile *out) {
    int64_t before;
    out->tile = tile_of(t, j, &before);
    const size_t at = (size_t)j * tstride + (size_t)out->tile.t0 - (size_t)t->t0; /* segment row 0 of tile j */
    out->p = p + before;
    out->tscale = tscale + at;
    out->tzero = tzero + at;
}

void tg_attn_int_values(const tg_attn_tile *t, const float *p, int64_t ld, int gq, int64_t D, const uint16_t *tscale,
                        const uint16_t *tzero, size_t tstride, float *o, int32_t *scratch, bool vnni) {
#if TG_ATTN_INT512
    const int64_t lanes = D / (8 / t->bits); /* int32 lanes of a row quad: 16 a register, or two quads of 8 */
    tg_attn_int_values_run_fn *values;
    tg_attn_int_prepare_run_fn *prepare;
    if (vnni && (lanes % 16 == 0 || (lanes == 8 && t->bits != 8))) {
        values = tg_attn_int512_values_run_for(t->bits, D);
        prepare = tg_attn_int512_prepare_run_for(t->bits);
    } else if (vnni && t->bits == 2) { /* (the only codes whose quads can be 24, 40 or 56 lanes: D % 32 == 0) */
        values = values_v1_b2;
        prepare = prepare_run_b2;
    } else {
        tg_attn_int_emul_values(t, p, ld, gq, D, tscale, tzero, tstride, o, scratch);
        return;
    }
#else
    static tg_attn_int_values_run_fn *const table[2][3] = {{values_v0_b8, values_v0_b4, values_v0_b2},
                                                           {values_v1_b8, values_v1_b4, values_v1_b2}};
    static tg_attn_int_prepare_run_fn *const prepares[3] = {prepare_run_b8, prepare_run_b4, prepare_run_b2};
    const int b = width_row(t->bits);
    tg_attn_int_values_run_fn *const values = table[vnni && HAVE_VNNI][b];
    tg_attn_int_prepare_run_fn *const prepare = prepares[b];
#endif
    const int64_t n = tiles_of(t);
    const uint16_t *s0 = tscale - t->t0, *z0 = tzero - t->t0; /* tile 0's row 0 */
    if (n > 1) tg_attn_int_prefetch_scales(s0 + tstride, z0 + tstride, t->G); /* tile 1's rows, needed soon */
    /* run k's weights in set k % 2: the next run's prepared before this one's sums (two independent chains); tile j
     * in vt[j % 2], each made once in place (no copies: a copied descriptor read back field by field waited on the
     * store) */
    const run_weights rw[2] = {run_weights_in(scratch, gq, 0), run_weights_in(scratch, gq, 1)};
    value_tile vt[2];
    value_tile_at(t, 0, p, tscale, tzero, tstride, &vt[0]);
    int64_t R = vt[0].tile.t0 / 8 * 8;
    prepare(&vt[0].tile, R, vt[0].p, ld, gq, vt[0].tscale, vt[0].tzero, &rw[0]);
    int k = 0;
    for (int64_t j = 0; j < n; j++) {
        prefetch_next_tiles(t, D, j, n, 0);
        /* tile j + 1's scales were fetched a tile ago; fetch j + 2's (the first tile's: by the sweep, attend.c) */
        if (j + 2 < n) tg_attn_int_prefetch_scales(s0 + (size_t)(j + 2) * tstride, z0 + (size_t)(j + 2) * tstride, t->G);
        const value_tile *cur = &vt[j & 1];
        value_tile *next = &vt[(j + 1) & 1];
        if (j + 1 < n) value_tile_at(t, j + 1, p, tscale, tzero, tstride, next);
        const int64_t end = cur->tile.t0 + cur->tile.count;
        for (bool first = true; R < end; R += RUN, k++) {
            const run_weights *w = &rw[(k + 1) & 1];
            if (R + RUN < end) prepare(&cur->tile, R + RUN, cur->p, ld, gq, cur->tscale, cur->tzero, w);
            else if (j + 1 < n) prepare(&next->tile, next->tile.t0 / 8 * 8, next->p, ld, gq, next->tscale, next->tzero, w);
            if (first) prefetch_next_tiles(t, D, j, n, 1);
            first = false;
            values(&cur->tile, R, &rw[k & 1], gq, D, o);
        }
        if (j + 1 < n) R = next->tile.t0 / 8 * 8;
    }
}

#if !TG_ATTN_INT512
void tg_attn_int_emul_values(const tg_attn_tile *t, const float *p, int64_t ld, int gq, int64_t D,
                             const uint16_t *tscale, const uint16_t *tzero, size_t tstride, float *o, int32_t *scratch) {
    tg_attn_int_values(t, p, ld, gq, D, tscale, tzero, tstride, o, scratch, false);
}
#endif

#else
typedef int tg_attend_int_avx2_unused; /* ISO C forbids an empty translation unit */
#endif
