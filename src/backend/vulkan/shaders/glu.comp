#version 450
// glu.comp — gate = silu(gate) * up elementwise over count floats (silu(g) = g / (1 + exp(-g))).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
#include "common.glsl"
layout(push_constant) uniform P {
    uint count, gate_off, up_off;
} p;
void main() {
    const uint i = gl_GlobalInvocationID.x + 65536u * gl_GlobalInvocationID.y;
    if (i >= p.count) return;
    const float g = act[p.gate_off + i];
    const float sg = g < -88.0 ? 0.0 : g / (1.0 + exp(-g));
    act[p.gate_off + i] = sg * act[p.up_off + i];
}
