#version 450
// kivi_rotate.comp — a rotated KIVI cache's staged rows (kvcache/rotate.h) before they are stored: each kv-head's
// keys (rot_k; not a re-positioned sink's, kept pre-RoPE and met by the unrotated query in attend_kivi.comp) and
// values (rot_v) multiplied by R = H diag(s): the fixed signs s of the layer and kv-head (already divided by
// sqrt(block)), then the unnormalised Walsh–Hadamard transform of each block of `block` channels with rotate.c's
// butterflies (every element the same fp32 sums as tg_fwht_ref's: the CPU's rotated rows bit for bit). One
// workgroup per kv-head and row.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
#include "common.glsl"
layout(push_constant) uniform P {
    uint kvd, head_dim, block, stage, sign_off, pos_off, sink_raw, rot_k, rot_v;
} p;
shared float x[256];

// act[base, base + head_dim) <- R act[...] with kv-head h's signs.
void rotate(uint base, uint h) {
    const uint tid = gl_LocalInvocationID.x, D = p.head_dim;
    for (uint d = tid; d < D; d += 64u) {
        precise float v = act[base + d] * uintBitsToFloat(aux[p.sign_off + h * D + d]);
        x[d] = v;
    }
    barrier();
    for (uint len = 1u; len < p.block; len *= 2u) {
        for (uint q = tid; q < D / 2u; q += 64u) {
            const uint j = (q / len) * 2u * len + q % len;
            precise float a = x[j], b = x[j + len];
            x[j] = a + b;
            x[j + len] = a - b;
        }
        barrier();
    }
    for (uint d = tid; d < D; d += 64u) act[base + d] = x[d];
    barrier();
}

void main() {
    const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y;
    const uint row = p.stage + 2u * t * p.kvd + h * p.head_dim; // kv_append.comp's staging of row t
    if (p.rot_k != 0u && aux[p.pos_off + t] >= p.sink_raw) rotate(row, h);
    if (p.rot_v != 0u) rotate(row + p.kvd, h);
}
