// kivi.glsl — the device KIVI stores (vk_kivi.c lays them out), shared by kivi_store.comp and attend_kivi.comp: the
// store descriptors in aux, exact fp16 / bf16 conversions (util/half.h's), reading and writing a region at a float
// precision, and KIVI's fit and code (kvcache/kivi.c's, step for step, so the device stores the CPU's codes).
//
// All of a cache's stores live in kc (binding 3) as 32-bit words. A store's descriptor (aux[d + D_*]):
//   D_PREC   the float precision of its ring: 0 fp32, 1 fp16, 2 bf16
//   D_SPREC  the float precision of its sinks (fp32 when they are quantised: --kv-quantize-sinks)
//   D_BITS   8 / 4 / 2 for a KIVI store, 0 for a plain one (every non-sink token in the ring)
//   D_SINK   word offset of the sinks [sink][n_kv_heads][head_dim]
//   D_RING   word offset of the ring [ring][n_kv_heads][head_dim]: non-sink token n in row n % ring (a KIVI store's
//            full-precision residual; a plain store's rows)
//   D_RLEN   rows of the ring (0: none)
//   D_CODES  word offset of the codes [units][n_kv_heads][G][row_words]: token n in unit (n / G) % units, row n % G;
//            code k of a row in word k / (32 / bits), bits (k % (32 / bits)) * bits (kivi.h's packing, in words)
//   D_SCALES word offset of the (scale | zero << 16) fp16 pairs: keys [units][n_kv_heads][head_dim] (per channel of
//            a group), values [units][n_kv_heads][G] (per token)
//   D_UNITS, D_GROUP, D_ROWW (words a row of codes), D_PERCH (1: keys, scales per channel)
//   D_CLIP   1: grids fitted by least squared error (kivi.h's tg_kivi_fit_slice), 0: to the slice's whole range
const uint D_PREC = 0u, D_BITS = 1u, D_SINK = 2u, D_RING = 3u, D_RLEN = 4u, D_CODES = 5u, D_SCALES = 6u,
           D_UNITS = 7u, D_GROUP = 8u, D_ROWW = 9u, D_PERCH = 10u, D_CLIP = 11u, D_SPREC = 12u;

// IEEE binary16 -> binary32, exact for every input (subnormals included: the scale floor 1e-5 is one).
float h2f(uint h) {
    const uint sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1fu) return uintBitsToFloat(sign | 0x7f800000u | (m << 13));
    if (e == 0u) {
        const float f = float(m) * (1.0 / 16777216.0);
        return sign != 0u ? -f : f;
    }
    return uintBitsToFloat(sign | ((e + 112u) << 23) | (m << 13));
}

// binary32 -> binary16, round to nearest even (util/half.h's tg_f32_to_f16).
uint f2h(float f) {
    const uint x = floatBitsToUint(f), sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u);
    if (ax >= 0x477ff000u) return sign | 0x7c00u;
    if (ax < 0x38800000u) {
        precise float m = uintBitsToFloat(ax) * 16777216.0;
        uint mi = uint(m);
        precise float frac = m - float(mi);
        if (frac > 0.5 || (frac == 0.5 && (mi & 1u) != 0u)) mi++;
        return sign | mi;
    }
    const uint man = ax & 0x7fffffu, rest = man & 0x1fffu;
    uint h = ((((ax >> 23) - 112u) << 10) | (man >> 13));
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u) != 0u)) h++;
    return sign | h;
}

// binary32 -> bfloat16, round to nearest even (NaN stays NaN).
uint f2bf(float f) {
    const uint x = floatBitsToUint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;
    return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}

// Element e of the region at word `base` stored at precision prec.
float reg_get(uint base, uint prec, uint e) {
    if (prec == 0u) return uintBitsToFloat(kc[base + e]);
    const uint w = kc[base + (e >> 1)], h = (e & 1u) != 0u ? w >> 16 : w & 0xffffu;
    return prec == 1u ? h2f(h) : uintBitsToFloat(h << 16);
}

// Elements e, e + 1 (e even) of the region at word `base` set to a, b at precision prec (one word at 16 bits).
void reg_put2(uint base, uint prec, uint e, float a, float b) {
    if (prec == 0u) {
        kc[base + e] = floatBitsToUint(a);
        kc[base + e + 1u] = floatBitsToUint(b);
    } else if (prec == 1u) {
        kc[base + (e >> 1)] = f2h(a) | (f2h(b) << 16);
    } else {
        kc[base + (e >> 1)] = f2bf(a) | (f2bf(b) << 16);
    }
}

// kivi.c's fp16 rounding towards -inf / +inf of a float (saturating; NaN gives 0).
uint f16_down(float x) {
    if (isnan(x)) return 0u;
    if (x >= 65504.0) return 0x7bffu;
    if (x <= -65504.0) return 0xfbffu;
    const uint h = f2h(x);
    if (h2f(h) <= x) return h;
    if ((h & 0x8000u) != 0u) return h + 1u;
    return h == 0u ? 0x8001u : h - 1u;
}
uint f16_up(float x) {
    if (isnan(x)) return 0u;
    if (x >= 65504.0) return 0x7bffu;
    if (x <= -65504.0) return 0xfbffu;
    const uint h = f2h(x);
    if (h2f(h) >= x) return h;
    if ((h & 0x8000u) != 0u) return h == 0x8000u ? 1u : h - 1u;
    return h + 1u;
}

float clamp_f16(float x) { return isnan(x) ? 0.0 : clamp(x, -65504.0, 65504.0); }

// kivi.c's tg_kivi_fit: (scale | zero << 16) fp16 covering [lo, hi] with `levels` steps.
uint kivi_fit(float levels, float lo, float hi) {
    lo = clamp_f16(lo);
    hi = clamp_f16(hi);
    if (hi < lo) hi = lo;
    const uint z = f16_down(lo);
    const float zf = h2f(z);
    precise float s = (hi - zf) / levels;
    if (!(s >= 1e-5)) s = 1e-5;
    uint sh = f16_up(s);
    for (;;) {
        precise float top = zf + levels * h2f(sh);
        if (!(top < hi && sh < 0x7bffu)) break;
        sh++;
    }
    return sh | (z << 16);
}

// kivi.h's tg_kivi_code: the code of x on the grid (scale, zero); NaN gives 0 (roundf, half away from zero).
uint kivi_code(float x, float s, float z, float levels) {
    precise float t = (x - z) / s;
    t = t > 0.0 ? t : 0.0;
    t = t < levels ? t : levels;
    const float f = floor(t);
    precise float r = t - f;
    return uint(f) + (r >= 0.5 ? 1u : 0u);
}
