#version 450
// kv_append.comp — each row's keys rotated at its position (a re-positioned cache's sinks stay pre-RoPE) and its
// values, stored into the device KV mirror at the row's slot (fp32, or fp16 pairs: one invocation per two adjacent
// elements, so a word is written by one invocation). With `stage` (a KIVI cache, vk_kivi.c) row t's rotated keys and
// values go to act[stage + 2 t kvd, + kvd) and the kvd floats after them in fp32 instead, for kivi_store.comp to
// store.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
#include "common.glsl"
layout(push_constant) uniform P {
    uint n, kvd, head_dim, half_style, k_off, v_off, cos_off, sin_off, pos_off, slot_off, k16, v16,
        sink_raw, stage;
} p;
float rotated(uint t, uint e) {
    const uint half_d = p.head_dim / 2u, hb = (e / p.head_dim) * p.head_dim, d = e % p.head_dim;
    const uint src = p.k_off + t * p.kvd;
    const float x = act[src + e];
    if (aux[p.pos_off + t] < p.sink_raw) return x;
    uint j, partner;
    bool first;
    if (p.half_style != 0u) {
        j = d % half_d;
        first = d < half_d;
        partner = first ? d + half_d : d - half_d;
    } else {
        j = d / 2u;
        first = (d & 1u) == 0u;
        partner = first ? d + 1u : d - 1u;
    }
    const float c = uintBitsToFloat(aux[p.cos_off + t * half_d + j]);
    const float s = uintBitsToFloat(aux[p.sin_off + t * half_d + j]);
    const float y = act[src + hb + partner];
    return first ? x * c - y * s : y * s + x * c;
}
void main() {
    const uint i = gl_GlobalInvocationID.x + 65536u * gl_GlobalInvocationID.y, pairs = p.kvd / 2u;
    if (i >= p.n * pairs) return;
    const uint t = i / pairs, e = 2u * (i % pairs);
    if (p.stage != 0u) {
        const uint st = p.stage + 2u * t * p.kvd;
        act[st + e] = rotated(t, e);
        act[st + e + 1u] = rotated(t, e + 1u);
        act[st + p.kvd + e] = act[p.v_off + t * p.kvd + e];
        act[st + p.kvd + e + 1u] = act[p.v_off + t * p.kvd + e + 1u];
        return;
    }
    const uint dst = aux[p.slot_off + t] * p.kvd + e; // in the layer's own buffers
    const float k0 = rotated(t, e), k1 = rotated(t, e + 1u);
    const float v0 = act[p.v_off + t * p.kvd + e], v1 = act[p.v_off + t * p.kvd + e + 1u];
    if (p.k16 != 0u) {
        kc[dst >> 1] = packHalf2x16(vec2(k0, k1));
    } else {
        kc[dst] = floatBitsToUint(k0);
        kc[dst + 1u] = floatBitsToUint(k1);
    }
    if (p.v16 != 0u) {
        vc[dst >> 1] = packHalf2x16(vec2(v0, v1));
    } else {
        vc[dst] = floatBitsToUint(v0);
        vc[dst + 1u] = floatBitsToUint(v1);
    }
}
