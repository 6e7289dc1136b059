/* half.h — fp16 and bf16 <-> fp32 conversions (scalar reference; kernels may use F16C). */
#ifndef TG_UTIL_HALF_H
#define TG_UTIL_HALF_H

#include <stdint.h>
#include <string.h>

static inline float tg_bits_to_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t tg_f32_to_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* IEEE binary16 -> binary32, exact for every input including subnormals, Inf and NaN. */
static inline float tg_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    if (exp == 0x1f) return tg_bits_to_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0) return tg_bits_to_f32(sign);
        float f = (float)man * (1.0f / 16777216.0f); /* man * 2^-24 */
        return sign ? -f : f;
    }
    return tg_bits_to_f32(sign | ((exp + 112) << 23) | (man << 13));
}

/* binary32 -> binary16, round to nearest even; overflow gives Inf, NaN stays NaN. */
static inline uint16_t tg_f32_to_f16(float f) {
    uint32_t x = tg_f32_to_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds to >= 65520 -> Inf */
    if (ax < 0x38800000u) {                                  /* below 2^-14: subnormal or zero */
        float af = tg_bits_to_f32(ax);
        /* af * 2^24 rounded to nearest even integer gives the subnormal mantissa */
        float m = af * 16777216.0f;
        uint32_t mi = (uint32_t)m;
        float frac = m - (float)mi;
        if (frac > 0.5f || (frac == 0.5f && (mi & 1))) mi++;
        return (uint16_t)(sign | mi);
    }
    uint32_t exp = (ax >> 23) - 112;
    uint32_t man = ax & 0x7fffff;
    uint32_t h = (exp << 10) | (man >> 13);
    uint32_t rest = man & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++;
    return (uint16_t)(sign | h);
}

static inline float tg_bf16_to_f32(uint16_t b) { return tg_bits_to_f32((uint32_t)b << 16); }

/* binary32 -> bfloat16, round to nearest even; NaN stays NaN. */
static inline uint16_t tg_f32_to_bf16(float f) {
    uint32_t x = tg_f32_to_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

#endif
