/* ggml_blocks.c — reference decoders and non-finite finders of the GGUF block types in ggml_blocks.h. Every product
 * and sum is its own statement so that no compiler contracts it into an FMA (one rounding per operation, as
 * ggml's and numpy's). */
#include "kernels/ggml_blocks.h"

#include <string.h>

#include "util/half.h"

static inline float f16_at(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return tg_f16_to_f32(v);
}

static inline uint32_t u32_at(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* d * q + m, rounded twice */
static inline float scale_add(float d, float q, float m) {
    const float t = d * q;
    return t + m;
}

/* d * q - m, rounded twice */
static inline float scale_sub(float d, float q, float m) {
    const float t = d * q;
    return t - m;
}

void tg_decode_q4_1(const uint8_t *p, float *out, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++, p += TG_Q4_1_BYTES, out += 32) {
        const float d = f16_at(p), m = f16_at(p + 2);
        for (int j = 0; j < 16; j++) {
            out[j] = scale_add(d, (float)(p[4 + j] & 0xF), m);
            out[j + 16] = scale_add(d, (float)(p[4 + j] >> 4), m);
        }
    }
}

void tg_decode_q5_0(const uint8_t *p, float *out, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++, p += TG_Q5_0_BYTES, out += 32) {
        const float d = f16_at(p);
        const uint32_t qh = u32_at(p + 2);
        for (int j = 0; j < 16; j++) {
            const int lo = (p[6 + j] & 0xF) | (int)((qh >> j) & 1) << 4;
            const int hi = (p[6 + j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            out[j] = d * (float)(lo - 16);
            out[j + 16] = d * (float)(hi - 16);
        }
    }
}

void tg_decode_q5_1(const uint8_t *p, float *out, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++, p += TG_Q5_1_BYTES, out += 32) {
        const float d = f16_at(p), m = f16_at(p + 2);
        const uint32_t qh = u32_at(p + 4);
        for (int j = 0; j < 16; j++) {
            const int lo = (p[8 + j] & 0xF) | (int)((qh >> j) & 1) << 4;
            const int hi = (p[8 + j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            out[j] = scale_add(d, (float)lo, m);
            out[j + 16] = scale_add(d, (float)hi, m);
        }
    }
}

/* Q2_K: element 128h + 32s + l (h < 2, s < 4 the bit pair, l < 32) is bits 2s..2s+1 of qs[32h + l]; its scale byte
 * is scales[8h + 2s + l / 16]. */
void tg_decode_q2_k(const uint8_t *p, float *out, int64_t n) {
    for (int64_t b = 0; b < n / TG_QK_K; b++, p += TG_Q2_K_BYTES, out += TG_QK_K) {
        const uint8_t *sc = p, *qs = p + 16;
        const float d = f16_at(p + 80), dmin = f16_at(p + 82);
        for (int e = 0; e < TG_QK_K; e++) {
            const int h = e / 128, s = (e % 128) / 32, l = e % 32;
            const uint8_t k = sc[8 * h + 2 * s + l / 16];
            const float dl = d * (float)(k & 0xF), ml = dmin * (float)(k >> 4);
            out[e] = scale_sub(dl, (float)((qs[32 * h + l] >> (2 * s)) & 3), ml);
        }
    }
}

/* Q3_K: as Q2_K's low bits (qs), the third bit in hmask[l] bit 4h + s (set: no offset, clear: minus 4), scale
 * 16-element group 8h + 2s + l / 16. */
void tg_decode_q3_k(const uint8_t *p, float *out, int64_t n) {
    for (int64_t b = 0; b < n / TG_QK_K; b++, p += TG_Q3_K_BYTES, out += TG_QK_K) {
        const uint8_t *hm = p, *qs = p + 32, *sc = p + 96;
        const float d = f16_at(p + 108);
        for (int e = 0; e < TG_QK_K; e++) {
            const int h = e / 128, s = (e % 128) / 32, l = e % 32;
            const float dl = d * (float)tg_q3k_scale(8 * h + 2 * s + l / 16, sc);
            const int q = ((qs[32 * h + l] >> (2 * s)) & 3) - ((hm[l] >> (4 * h + s)) & 1 ? 0 : 4);
            out[e] = dl * (float)q;
        }
    }
}

/* Q4_K: element 64c + 32u + l (c < 4, u: low/high nibble) is nibble u of qs[32c + l], sub-block 2c + u. */
void tg_decode_q4_k(const uint8_t *p, float *out, int64_t n) {
    for (int64_t b = 0; b < n / TG_QK_K; b++, p += TG_Q4_K_BYTES, out += TG_QK_K) {
        const float d = f16_at(p), dmin = f16_at(p + 2);
        const uint8_t *qs = p + 16;
        for (int sb = 0; sb < 8; sb++) {
            uint8_t sc, m;
            tg_k4_scale_min(sb, p + 4, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            const int c = sb / 2, shift = 4 * (sb % 2);
            for (int l = 0; l < 32; l++) out[32 * sb + l] = scale_sub(d1, (float)((qs[32 * c + l] >> shift) & 0xF), m1);
        }
    }
}

/* Q5_K: Q4_K's nibbles plus a fifth bit, bit sb of qh[l]. */
void tg_decode_q5_k(const uint8_t *p, float *out, int64_t n) {
    for (int64_t b = 0; b < n / TG_QK_K; b++, p += TG_Q5_K_BYTES, out += TG_QK_K) {
        const float d = f16_at(p), dmin = f16_at(p + 2);
        const uint8_t *qh = p + 16, *qs = p + 48;
        for (int sb = 0; sb < 8; sb++) {
            uint8_t sc, m;
            tg_k4_scale_min(sb, p + 4, &sc, &m);
            const float d1 = d * (float)sc, m1 = dmin * (float)m;
            const int c = sb / 2, shift = 4 * (sb % 2);
            for (int l = 0; l < 32; l++) {
                const int q = ((qs[32 * c + l] >> shift) & 0xF) | ((qh[l] >> sb) & 1) << 4;
                out[32 * sb + l] = scale_sub(d1, (float)q, m1);
            }
        }
    }
}

/* Q6_K: element 128h + 32s + l: low nibble s of ql[64h + 32(s % 2) + l] (nibble s / 2), high bits 2s..2s+1 of
 * qh[32h + l], minus 32; scale scales[8h + 2s + l / 16]. */
void tg_decode_q6_k(const uint8_t *p, float *out, int64_t n) {
    for (int64_t b = 0; b < n / TG_QK_K; b++, p += TG_Q6_K_BYTES, out += TG_QK_K) {
        const uint8_t *ql = p, *qh = p + 128;
        const int8_t *sc = (const int8_t *)(p + 192);
        const float d = f16_at(p + 208);
        for (int e = 0; e < TG_QK_K; e++) {
            const int h = e / 128, s = (e % 128) / 32, l = e % 32;
            const int lo = (ql[64 * h + 32 * (s % 2) + l] >> (4 * (s / 2))) & 0xF;
            const int q = (lo | ((qh[32 * h + l] >> (2 * s)) & 3) << 4) - 32;
            const float dl = d * (float)sc[8 * h + 2 * s + l / 16];
            out[e] = dl * (float)q;
        }
    }
}

static const int8_t iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

void tg_decode_iq4_nl(const uint8_t *p, float *out, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++, p += TG_IQ4_NL_BYTES, out += 32) {
        const float d = f16_at(p);
        for (int j = 0; j < 16; j++) {
            out[j] = d * (float)iq4nl_values[p[2 + j] & 0xF];
            out[j + 16] = d * (float)iq4nl_values[p[2 + j] >> 4];
        }
    }
}

/* The first element of the first block whose fp16 field at off0 (or off1 >= 0) is Inf/NaN, or -1. */
static int64_t non_finite_fields(const uint8_t *p, int64_t n, int64_t elems, size_t bytes, int off0, int off1) {
    for (int64_t b = 0; b < n / elems; b++, p += bytes) {
        uint16_t a, c = 0;
        memcpy(&a, p + off0, 2);
        if (off1 >= 0) memcpy(&c, p + off1, 2);
        if ((a & 0x7c00u) == 0x7c00u || (c & 0x7c00u) == 0x7c00u) return b * elems;
    }
    return -1;
}

int64_t tg_non_finite_q4_1(const uint8_t *p, int64_t n) { return non_finite_fields(p, n, 32, TG_Q4_1_BYTES, 0, 2); }
int64_t tg_non_finite_q5_0(const uint8_t *p, int64_t n) { return non_finite_fields(p, n, 32, TG_Q5_0_BYTES, 0, -1); }
int64_t tg_non_finite_q5_1(const uint8_t *p, int64_t n) { return non_finite_fields(p, n, 32, TG_Q5_1_BYTES, 0, 2); }
int64_t tg_non_finite_q2_k(const uint8_t *p, int64_t n) { return non_finite_fields(p, n, 256, TG_Q2_K_BYTES, 80, 82); }
int64_t tg_non_finite_q3_k(const uint8_t *p, int64_t n) { return non_finite_fields(p, n, 256, TG_Q3_K_BYTES, 108, -1); }
int64_t tg_non_finite_q4_k(const uint8_t *p, int64_t n) { return non_finite_fields(p, n, 256, TG_Q4_K_BYTES, 0, 2); }
int64_t tg_non_finite_q5_k(const uint8_t *p, int64_t n) { return non_finite_fields(p, n, 256, TG_Q5_K_BYTES, 0, 2); }
int64_t tg_non_finite_q6_k(const uint8_t *p, int64_t n) { return non_finite_fields(p, n, 256, TG_Q6_K_BYTES, 208, -1); }
int64_t tg_non_finite_iq4_nl(const uint8_t *p, int64_t n) {
    return non_finite_fields(p, n, 32, TG_IQ4_NL_BYTES, 0, -1);
}

bool tg_ggml_scale_fields(tg_dtype t, int at[2]) {
    switch (t) {
    case TG_DT_Q4_1:
    case TG_DT_Q5_1:
    case TG_DT_Q4_K:
    case TG_DT_Q5_K: at[0] = 0, at[1] = 2; return true;
    case TG_DT_Q5_0:
    case TG_DT_IQ4_NL: at[0] = 0, at[1] = -1; return true;
    case TG_DT_Q2_K: at[0] = 80, at[1] = 82; return true;
    case TG_DT_Q3_K: at[0] = 108, at[1] = -1; return true;
    case TG_DT_Q6_K: at[0] = 208, at[1] = -1; return true;
    default: return false;
    }
}
