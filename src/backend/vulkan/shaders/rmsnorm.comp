#version 450
// rmsnorm.comp — out[t] = in[t] * 1 / sqrt(mean(in[t]^2) + eps) * w, one workgroup of 256 a row (the CPU's
// tg_rmsnorm sums in double; here fp32 partial sums: the tests' tolerance covers it). Neighbouring invocations take
// neighbouring vec4s where the row starts on a 16-byte boundary (act4), then the elements past the last whole vec4;
// the squares meet in a subgroupAdd, then one shared-memory step (one barrier), and each invocation scales what it
// read again (the row is in cache by then).
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#define WG 256u
layout(local_size_x = 256) in;
#include "common.glsl"
layout(push_constant) uniform P {
    uint d, in_off, out_off, ld, w_off;
    float eps;
} p;
shared float part[WG]; // one a subgroup (a subgroup has at least one invocation)
void main() {
    const uint t = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
    const uint base = p.in_off + t * p.ld, dst = p.out_off + t * p.ld;
    const uint nv = (base & 3u) == 0u ? p.d / 4u : 0u; // whole vec4s read through act4
    float s = 0.0;
    for (uint i = tid; i < nv; i += WG) {
        const vec4 x = act4[(base >> 2) + i];
        s += dot(x, x);
    }
    for (uint c = 4u * nv + tid; c < p.d; c += WG) s += act[base + c] * act[base + c];
    s = subgroupAdd(s);
    if (subgroupElect()) part[gl_SubgroupID] = s;
    barrier();
    float sum = 0.0;
    for (uint i = 0u; i < gl_NumSubgroups; i++) sum += part[i];
    const float scale = 1.0 / sqrt(sum / float(p.d) + p.eps);
    for (uint i = tid; i < nv; i += WG) {
        const vec4 x = act4[(base >> 2) + i] * scale;
        const uint c = 4u * i, w = p.w_off + c;
        act[dst + c] = x.x * uintBitsToFloat(wd[w]);
        act[dst + c + 1u] = x.y * uintBitsToFloat(wd[w + 1u]);
        act[dst + c + 2u] = x.z * uintBitsToFloat(wd[w + 2u]);
        act[dst + c + 3u] = x.w * uintBitsToFloat(wd[w + 3u]);
    }
    for (uint c = 4u * nv + tid; c < p.d; c += WG)
        act[dst + c] = act[base + c] * scale * uintBitsToFloat(wd[p.w_off + c]);
}
