/* types.c — the weight-format table (types.h): one row per type, its reference decoder, encoder and non-finite
 * finder; no instruction set (the kernels are kernels.h's tables). */
#include "kernels/types.h"

#include <stdio.h>
#include <string.h>

#include "kernels/ggml_blocks.h"
#include "util/half.h"

static inline uint16_t load_u16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* ---- reference decoders ---- */

static void decode_f32(const uint8_t *src, float *out, int64_t n) { memcpy(out, src, (size_t)n * sizeof(float)); }

static void decode_f16(const uint8_t *src, float *out, int64_t n) {
    for (int64_t j = 0; j < n; j++) out[j] = tg_f16_to_f32(load_u16(src + 2 * j));
}

static void decode_bf16(const uint8_t *src, float *out, int64_t n) {
    for (int64_t j = 0; j < n; j++) out[j] = tg_bf16_to_f32(load_u16(src + 2 * j));
}

/* Q8_0: x[j] = d * q[j] (tg_block_q8_0) */
static void decode_q8_0(const uint8_t *p, float *out, int64_t n) {
    for (int64_t b = 0; b < n / TG_QK; b++, p += sizeof(tg_block_q8_0), out += TG_QK) {
        float d = tg_f16_to_f32(load_u16(p));
        for (int j = 0; j < TG_QK; j++) out[j] = d * (float)(int8_t)p[2 + j];
    }
}

/* Q4_0: x[j] = d * (nibble - 8), low nibbles elements 0..15, high 16..31 (tg_block_q4_0) */
static void decode_q4_0(const uint8_t *p, float *out, int64_t n) {
    for (int64_t b = 0; b < n / TG_QK; b++, p += sizeof(tg_block_q4_0), out += TG_QK) {
        float d = tg_f16_to_f32(load_u16(p));
        for (int j = 0; j < TG_QK / 2; j++) {
            out[j] = d * (float)((p[2 + j] & 0x0f) - 8);
            out[j + TG_QK / 2] = d * (float)((p[2 + j] >> 4) - 8);
        }
    }
}

/* ---- non-finite finders: a bit test per element, or per fp16 block scale (integer codes are always finite; a bad
 * scale spoils its whole block, so the block's first element is the first bad one) ---- */

static int64_t non_finite_f32(const uint8_t *p, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, p + 4 * i, 4);
        if ((u & 0x7f800000u) == 0x7f800000u) return i;
    }
    return -1;
}

static int64_t non_finite_u16(const uint8_t *p, int64_t n, uint16_t exp) {
    for (int64_t i = 0; i < n; i++)
        if ((load_u16(p + 2 * i) & exp) == exp) return i;
    return -1;
}

static int64_t non_finite_f16(const uint8_t *p, int64_t n) { return non_finite_u16(p, n, 0x7c00u); }
static int64_t non_finite_bf16(const uint8_t *p, int64_t n) { return non_finite_u16(p, n, 0x7f80u); }

static int64_t non_finite_scales(const uint8_t *p, int64_t n, size_t block_bytes) {
    for (int64_t b = 0; b < n / TG_QK; b++)
        if ((load_u16(p + (size_t)b * block_bytes) & 0x7c00u) == 0x7c00u) return b * TG_QK;
    return -1;
}

static int64_t non_finite_q8_0(const uint8_t *p, int64_t n) { return non_finite_scales(p, n, sizeof(tg_block_q8_0)); }
static int64_t non_finite_q4_0(const uint8_t *p, int64_t n) { return non_finite_scales(p, n, sizeof(tg_block_q4_0)); }

/* ---- reference encoders ---- */

static void encode_f32(const float *x, uint8_t *dst, int64_t n) { memcpy(dst, x, (size_t)n * sizeof(float)); }

static void encode_f16(const float *x, uint8_t *dst, int64_t n) {
    for (int64_t j = 0; j < n; j++) {
        const uint16_t h = tg_f32_to_f16(x[j]);
        memcpy(dst + 2 * j, &h, 2);
    }
}

static void encode_bf16(const float *x, uint8_t *dst, int64_t n) {
    for (int64_t j = 0; j < n; j++) {
        const uint16_t h = tg_f32_to_bf16(x[j]);
        memcpy(dst + 2 * j, &h, 2);
    }
}

static void encode_q8_0(const float *x, uint8_t *dst, int64_t n) { tg_quantize_row_q8_0(x, dst, n); }
static void encode_q4_0(const float *x, uint8_t *dst, int64_t n) { tg_quantize_row_q4_0(x, dst, n); }

/* ---- the table ---- */

static const tg_weight_type table[TG_DT_COUNT] = {
    [TG_DT_F32] = {"F32", 0, "F32", 1, 4, 4, decode_f32, non_finite_f32, encode_f32, TG_ACT_F32},
    [TG_DT_F16] = {"F16", 1, "F16", 1, 2, 2, decode_f16, non_finite_f16, encode_f16, TG_ACT_F32},
    [TG_DT_BF16] = {"BF16", 30, "BF16", 1, 2, 2, decode_bf16, non_finite_bf16, encode_bf16,
                    TG_ACT_F32},
    [TG_DT_Q8_0] = {"Q8_0", 8, NULL, TG_QK, sizeof(tg_block_q8_0), 2, decode_q8_0, non_finite_q8_0,
                    encode_q8_0, TG_ACT_Q8X},
    [TG_DT_Q4_0] = {"Q4_0", 2, NULL, TG_QK, sizeof(tg_block_q4_0), 2, decode_q4_0, non_finite_q4_0,
                    encode_q4_0, TG_ACT_Q8X},
    /* the GGUF block types (ggml_blocks.h): read, never written; integer dot products against the quantised
     * activations, the 32-element ones against tg_q8x_block rows, the K-quants against the tg_q8k_block form */
#define GGML_ROW(T, NAME, NUM, ELEMS, BYTES, dec, nf, act) [T] = {NAME, NUM, NULL, ELEMS, BYTES, 1, dec, nf, NULL, act}
    GGML_ROW(TG_DT_Q4_1, "Q4_1", 3, 32, TG_Q4_1_BYTES, tg_decode_q4_1, tg_non_finite_q4_1, TG_ACT_Q8X),
    GGML_ROW(TG_DT_Q5_0, "Q5_0", 6, 32, TG_Q5_0_BYTES, tg_decode_q5_0, tg_non_finite_q5_0, TG_ACT_Q8X),
    GGML_ROW(TG_DT_Q5_1, "Q5_1", 7, 32, TG_Q5_1_BYTES, tg_decode_q5_1, tg_non_finite_q5_1, TG_ACT_Q8X),
    GGML_ROW(TG_DT_Q2_K, "Q2_K", 10, TG_QK_K, TG_Q2_K_BYTES, tg_decode_q2_k, tg_non_finite_q2_k, TG_ACT_Q8K),
    GGML_ROW(TG_DT_Q3_K, "Q3_K", 11, TG_QK_K, TG_Q3_K_BYTES, tg_decode_q3_k, tg_non_finite_q3_k, TG_ACT_Q8K),
    GGML_ROW(TG_DT_Q4_K, "Q4_K", 12, TG_QK_K, TG_Q4_K_BYTES, tg_decode_q4_k, tg_non_finite_q4_k, TG_ACT_Q8K),
    GGML_ROW(TG_DT_Q5_K, "Q5_K", 13, TG_QK_K, TG_Q5_K_BYTES, tg_decode_q5_k, tg_non_finite_q5_k, TG_ACT_Q8K),
    GGML_ROW(TG_DT_Q6_K, "Q6_K", 14, TG_QK_K, TG_Q6_K_BYTES, tg_decode_q6_k, tg_non_finite_q6_k, TG_ACT_Q8K),
    GGML_ROW(TG_DT_IQ4_NL, "IQ4_NL", 20, 32, TG_IQ4_NL_BYTES, tg_decode_iq4_nl, tg_non_finite_iq4_nl, TG_ACT_Q8X),
#undef GGML_ROW
};

const tg_weight_type *tg_weight_type_of(tg_dtype type) {
    return (unsigned)type < TG_DT_COUNT ? &table[type] : NULL;
}

bool tg_dtype_from_ggml(uint32_t ggml_type, tg_dtype *out) {
    for (int t = 0; t < TG_DT_COUNT; t++) {
        if (table[t].ggml_type >= 0 && (uint32_t)table[t].ggml_type == ggml_type) {
            *out = (tg_dtype)t;
            return true;
        }
    }
    return false;
}

bool tg_dtype_from_safetensors(const char *dtype, tg_dtype *out) {
    for (int t = 0; t < TG_DT_COUNT; t++) {
        if (table[t].safetensors_dtype && strcmp(table[t].safetensors_dtype, dtype) == 0) {
            *out = (tg_dtype)t;
            return true;
        }
    }
    return false;
}

void tg_weight_type_names(bool safetensors, char *buf, size_t n) {
    size_t len = 0;
    if (n > 0) buf[0] = '\0';
    for (int t = 0; t < TG_DT_COUNT && len < n; t++) {
        if (safetensors ? !table[t].safetensors_dtype : table[t].ggml_type < 0) continue;
        int w = snprintf(buf + len, n - len, "%s%s", len ? ", " : "", table[t].name);
        if (w < 0) break;
        len += (size_t)w;
    }
}

void tg_dequantize_row(tg_dtype type, const void *src, float *out, int64_t n) {
    const tg_weight_type *wt = tg_weight_type_of(type);
    if (wt) wt->decode_row(src, out, n);
}
