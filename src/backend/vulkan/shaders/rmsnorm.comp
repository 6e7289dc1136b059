#version 450
// rmsnorm.comp — out[t] = in[t] * 1 / sqrt(mean(in[t]^2) + eps) * w, one workgroup a row (the CPU's tg_rmsnorm sums
// in double; here fp32 partial sums: the tests' tolerance covers it).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
#include "common.glsl"
layout(push_constant) uniform P {
    uint d, in_off, out_off, ld, w_off;
    float eps;
} p;
shared float part[64];
void main() {
    const uint t = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x;
    const uint base = p.in_off + t * p.ld;
    float s = 0.0;
    for (uint c = tid; c < p.d; c += 64u) s += act[base + c] * act[base + c];
    part[tid] = s;
    barrier();
    for (uint w = 32u; w > 0u; w >>= 1) {
        if (tid < w) part[tid] += part[tid + w];
        barrier();
    }
    const float scale = 1.0 / sqrt(part[0] / float(p.d) + p.eps);
    for (uint c = tid; c < p.d; c += 64u)
        act[p.out_off + t * p.ld + c] = act[base + c] * scale * uintBitsToFloat(wd[p.w_off + c]);
}
