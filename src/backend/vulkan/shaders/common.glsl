// common.glsl — what every shader of the Vulkan backend shares: the one descriptor set layout (the backend binds the
// same five buffers to every pipeline, only binding 0 changes) and the readers of packed data.
//   binding 0: wd   — a weight matrix (F32, F16 or Q8_0 rows as the file stores them) or the norm weights, as words
//   binding 1: act  — every activation [rows, ...] at the offsets the backend gives in push constants
//   binding 2: aux  — the call's row table (ids, positions, slots, RoPE cos / sin) written by the host
//   binding 3: kc, binding 4: vc — the device KV mirror (fp32 words or fp16 pairs)
layout(std430, set = 0, binding = 0) readonly buffer Weights { uint wd[]; };
layout(std430, set = 0, binding = 1) buffer Acts { float act[]; };
layout(std430, set = 0, binding = 2) readonly buffer Aux { uint aux[]; };
layout(std430, set = 0, binding = 3) buffer KCache { uint kc[]; };
layout(std430, set = 0, binding = 4) buffer VCache { uint vc[]; };

// weight types (the backend's upload accepts only these; kernels/tensor.h's tg_dtype values)
const uint WT_F32 = 0u;
const uint WT_F16 = 1u;
const uint WT_Q8_0 = 3u;

// byte `off` of the weights
uint w_byte(uint off) { return (wd[off >> 2] >> ((off & 3u) * 8u)) & 0xffu; }
// the fp16 at even byte `off` of the weights
float w_half(uint off) {
    const uint word = wd[off >> 2];
    return unpackHalf2x16((off & 2u) != 0u ? word >> 16 : word & 0xffffu).x;
}
// element c of the weight row starting at byte row_off
float w_elem(uint type, uint row_off, uint c) {
    if (type == WT_F32) return uintBitsToFloat(wd[(row_off >> 2) + c]);
    if (type == WT_F16) return w_half(row_off + 2u * c);
    // Q8_0: blocks of 32 codes, each an fp16 scale then 32 int8 codes (34 bytes)
    const uint blk = row_off + (c >> 5) * 34u;
    const int q = (int(w_byte(blk + 2u + (c & 31u))) << 24) >> 24;
    return w_half(blk) * float(q);
}

// element e of a KV mirror stored as fp32 words (half16 == 0) or fp16 pairs
float kv_get(bool keys, uint e, uint half16) {
    const uint word = keys ? kc[half16 != 0u ? e >> 1 : e] : vc[half16 != 0u ? e >> 1 : e];
    if (half16 == 0u) return uintBitsToFloat(word);
    return unpackHalf2x16((e & 1u) != 0u ? word >> 16 : word & 0xffffu).x;
}
