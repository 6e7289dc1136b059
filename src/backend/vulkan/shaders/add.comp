#version 450
// add.comp — out += in elementwise over count floats (the residual connection).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
#include "common.glsl"
layout(push_constant) uniform P {
    uint count, out_off, in_off;
} p;
void main() {
    const uint i = gl_GlobalInvocationID.x + 65536u * gl_GlobalInvocationID.y;
    if (i >= p.count) return;
    act[p.out_off + i] += act[p.in_off + i];
}
