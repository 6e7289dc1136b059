// common.glsl — what every shader of the Vulkan backend shares: the one descriptor set layout (the backend binds the
// same six bindings to every pipeline, only binding 0 changes) and the readers of packed data.
//   binding 0: wd   — a weight matrix (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K or Q6_K rows as the file stores
//                     them) or the norm weights, as words
//   binding 1: act  — every activation [rows, ...] at the offsets the backend gives in push constants
//   binding 2: aux  — the call's row table (ids, positions, slots, RoPE cos / sin) written by the host
//   binding 3: kc, binding 4: vc — the device KV mirror (fp32 words or fp16 pairs)
//   binding 5: act4 — the activations again, as vec4s (16-byte loads where an offset and a row length allow)
layout(std430, set = 0, binding = 0) readonly buffer Weights { uint wd[]; };
layout(std430, set = 0, binding = 1) buffer Acts { float act[]; };
layout(std430, set = 0, binding = 2) readonly buffer Aux { uint aux[]; };
layout(std430, set = 0, binding = 3) buffer KCache { uint kc[]; };
layout(std430, set = 0, binding = 4) buffer VCache { uint vc[]; };
layout(std430, set = 0, binding = 5) readonly buffer Acts4 { vec4 act4[]; };

// weight types (the backend's upload accepts only these; kernels/tensor.h's tg_dtype values)
const uint WT_F32 = 0u;
const uint WT_F16 = 1u;
const uint WT_BF16 = 2u;
const uint WT_Q8_0 = 3u;
const uint WT_Q4_0 = 4u;
const uint WT_Q4_K = 10u;
const uint WT_Q5_K = 11u;
const uint WT_Q6_K = 12u;

// byte `off` of the weights
uint w_byte(uint off) { return (wd[off >> 2] >> ((off & 3u) * 8u)) & 0xffu; }
// the 16 bits at even byte `off` of the weights
uint w_u16(uint off) {
    const uint word = wd[off >> 2];
    return (off & 2u) != 0u ? word >> 16 : word & 0xffffu;
}
// the fp16 at even byte `off` of the weights
float w_half(uint off) { return unpackHalf2x16(w_u16(off)).x; }

// Q4_K / Q5_K: the 6-bit scale (x) and min (y) of sub-block j from the 12 scale bytes at byte q (ggml's packing)
uvec2 k_scale_min(uint q, uint j) {
    if (j < 4u) return uvec2(w_byte(q + j) & 63u, w_byte(q + j + 4u) & 63u);
    return uvec2((w_byte(q + j + 4u) & 15u) | ((w_byte(q + j - 4u) >> 6) << 4),
                 (w_byte(q + j + 4u) >> 4) | ((w_byte(q + j) >> 6) << 4));
}

// element c of the weight row starting at byte row_off (the CPU's plain decoders, kernels/types.c and
// kernels/ggml_blocks.c, element by element)
float w_elem(uint type, uint row_off, uint c) {
    if (type == WT_F32) return uintBitsToFloat(wd[(row_off >> 2) + c]);
    if (type == WT_F16) return w_half(row_off + 2u * c);
    if (type == WT_BF16) return uintBitsToFloat(w_u16(row_off + 2u * c) << 16);
    if (type == WT_Q8_0) { // blocks of 32: an fp16 scale, then 32 int8 codes (34 bytes)
        const uint blk = row_off + (c >> 5) * 34u;
        const int q = (int(w_byte(blk + 2u + (c & 31u))) << 24) >> 24;
        return w_half(blk) * float(q);
    }
    if (type == WT_Q4_0) { // blocks of 32: an fp16 scale, 16 bytes: element j low nibble of byte j, j + 16 high
        const uint blk = row_off + (c >> 5) * 18u, j = c & 31u, b = w_byte(blk + 2u + (j & 15u));
        return w_half(blk) * float(int(j < 16u ? b & 15u : b >> 4) - 8);
    }
    // super-blocks of 256
    const uint e = c & 255u;
    if (type == WT_Q6_K) { // ql[128], qh[64], int8 scales[16], fp16 d (210 bytes)
        const uint blk = row_off + (c >> 8) * 210u, h = e >> 7, w = e & 127u, qt = w >> 5, l = w & 31u;
        const uint lo = w_byte(blk + h * 64u + l + (qt & 1u) * 32u), hb = w_byte(blk + 128u + h * 32u + l);
        const int q = int(((qt >= 2u ? lo >> 4 : lo & 15u) | (((hb >> (2u * qt)) & 3u) << 4))) - 32;
        const int sc = (int(w_byte(blk + 192u + h * 8u + (l >> 4) + 2u * qt)) << 24) >> 24;
        return w_half(blk + 208u) * float(sc) * float(q);
    }
    // Q4_K (fp16 d, dmin, scales[12], qs[128]: 144 bytes) and Q5_K (the same, then qh[32] before qs: 176 bytes)
    const bool five = type == WT_Q5_K;
    const uint blk = row_off + (c >> 8) * (five ? 176u : 144u), chunk = e >> 6, hi = (e >> 5) & 1u, l = e & 31u;
    const uint b = w_byte(blk + (five ? 48u : 16u) + chunk * 32u + l);
    uint q = hi != 0u ? b >> 4 : b & 15u;
    if (five) q += ((w_byte(blk + 16u + l) >> (2u * chunk + hi)) & 1u) << 4;
    const uvec2 sm = k_scale_min(blk + 4u, 2u * chunk + hi);
    const float d1 = w_half(blk) * float(sm.x), m1 = w_half(blk + 2u) * float(sm.y);
    return d1 * float(q) - m1;
}

// element e of a KV mirror stored as fp32 words (half16 == 0) or fp16 pairs
float kv_get(bool keys, uint e, uint half16) {
    const uint word = keys ? kc[half16 != 0u ? e >> 1 : e] : vc[half16 != 0u ? e >> 1 : e];
    if (half16 == 0u) return uintBitsToFloat(word);
    return unpackHalf2x16((e & 1u) != 0u ? word >> 16 : word & 0xffffu).x;
}
