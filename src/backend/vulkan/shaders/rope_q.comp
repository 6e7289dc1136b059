#version 450
// rope_q.comp — the queries rotated at each row's position and scaled by 1/sqrt(head_dim), in place: one invocation
// per rotation pair (i, partner) so no pair is read by one invocation while another writes it.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
#include "common.glsl"
layout(push_constant) uniform P {
    uint n, n_heads, head_dim, half_style, q_off, cos_off, sin_off;
    float scale;
} p;
void main() {
    const uint half_d = p.head_dim / 2u, i = gl_GlobalInvocationID.x + 65536u * gl_GlobalInvocationID.y;
    if (i >= p.n * p.n_heads * half_d) return;
    const uint t = i / (p.n_heads * half_d), h = (i / half_d) % p.n_heads, j = i % half_d;
    const uint base = p.q_off + (t * p.n_heads + h) * p.head_dim;
    const uint ia = p.half_style != 0u ? j : 2u * j, ib = p.half_style != 0u ? j + half_d : 2u * j + 1u;
    const float c = uintBitsToFloat(aux[p.cos_off + t * half_d + j]);
    const float s = uintBitsToFloat(aux[p.sin_off + t * half_d + j]);
    const float a = act[base + ia], b = act[base + ib];
    act[base + ia] = (a * c - b * s) * p.scale;
    act[base + ib] = (a * s + b * c) * p.scale;
}
