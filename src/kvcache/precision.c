/* precision.c — the KV precision traits table (precision.h) and the public listing of precisions by name. */
#include "kvcache/precision.h"

#include <string.h>

#include "kernels/vec.h"
#include "kvcache/attend_kernels.h"

/* A collapsed or inverted range (bug class 3) fails to compile. */
_Static_assert(TG_KIVI_INT8_QMAX - TG_KIVI_INT8_QMIN + 1 == 1 << 8, "int8 q-range must span 256 codes");
_Static_assert(TG_KIVI_INT4_QMAX - TG_KIVI_INT4_QMIN + 1 == 1 << 4, "int4 q-range must span 16 codes");
_Static_assert(TG_KIVI_INT2_QMAX - TG_KIVI_INT2_QMIN + 1 == 1 << 2, "int2 q-range must span 4 codes");

static void f32_put(const float *x, uint8_t *dst, int64_t n) { memcpy(dst, x, (size_t)n * sizeof(float)); }
static void f32_get(const uint8_t *src, float *out, int64_t n) { memcpy(out, src, (size_t)n * sizeof(float)); }
static void f16_put(const float *x, uint8_t *dst, int64_t n) { tg_f32_to_f16_row(x, (uint16_t *)(void *)dst, n); }
static void f16_get(const uint8_t *src, float *out, int64_t n) {
    tg_f16_to_f32_row((const uint16_t *)(const void *)src, out, n);
}
static void bf16_put(const float *x, uint8_t *dst, int64_t n) { tg_f32_to_bf16_row(x, (uint16_t *)(void *)dst, n); }
static void bf16_get(const uint8_t *src, float *out, int64_t n) {
    tg_bf16_to_f32_row((const uint16_t *)(const void *)src, out, n);
}

#define PLAIN(p, nm, b, kind, pt, gt) \
    {p, nm, b, (b) / 8, 1, kind, false, 0, {p, 0, 0, 0, false}, {p, 0, 0, 0, false}, false, false, pt, gt}
#define CODES(p, nm, b, qmin, qmax, resid, ck, cv)                                                                    \
    {p, nm, b, 1, 8 / (b), TG_SEG_CODES, true, resid, {p, b, qmin, qmax, false}, {p, b, qmin, qmax, true}, ck, cv,   \
     NULL, NULL}

/* In tg_kv_precision order: row i is precision i. */
static const tg_kv_traits traits[] = {
    PLAIN(TG_KV_FP32, "fp32", 32, TG_SEG_F32, f32_put, f32_get),
    PLAIN(TG_KV_FP16, "fp16", 16, TG_SEG_F16, f16_put, f16_get),
    PLAIN(TG_KV_BF16, "bf16", 16, TG_SEG_BF16, bf16_put, bf16_get),
    /* default clips (measured: docs/RESULTS.md): int8's steps are too fine to gain; int4's values gain a little, at a
     * search per token that costs more decode time than it is worth, and its keys lose; int2 gains on both */
    CODES(TG_KV_INT8, "int8", 8, TG_KIVI_INT8_QMIN, TG_KIVI_INT8_QMAX, 0, false, false),
    CODES(TG_KV_INT4, "int4", 4, TG_KIVI_INT4_QMIN, TG_KIVI_INT4_QMAX, 0, false, false),
    CODES(TG_KV_INT2, "int2", 2, TG_KIVI_INT2_QMIN, TG_KIVI_INT2_QMAX, 1, true, true),
};
#define N_TRAITS ((int)(sizeof traits / sizeof traits[0]))

const tg_kv_traits *tg_kv_traits_of(tg_kv_precision p) {
    return (int)p >= 0 && (int)p < N_TRAITS ? &traits[p] : NULL;
}

int tg_kv_precision_count(void) { return N_TRAITS; }

bool tg_kv_precision_parse(const char *name, tg_kv_precision *out) {
    for (int i = 0; name && i < N_TRAITS; i++)
        if (strcmp(name, traits[i].name) == 0) {
            if (out) *out = traits[i].id;
            return true;
        }
    return false;
}

const char *tg_kv_precision_name(tg_kv_precision p) {
    const tg_kv_traits *t = tg_kv_traits_of(p);
    return t ? t->name : "unknown";
}

bool tg_kv_precision_is_integer(tg_kv_precision p) {
    const tg_kv_traits *t = tg_kv_traits_of(p);
    return t && t->is_integer;
}
