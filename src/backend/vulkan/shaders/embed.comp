#version 450
// embed.comp — x[t, c] = row ids[t] of the embedding matrix, widened to fp32.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
#include "common.glsl"
layout(push_constant) uniform P {
    uint n, cols, row_bytes, wtype, out_off, ids_off;
} p;
void main() {
    const uint i = gl_GlobalInvocationID.x + 65536u * gl_GlobalInvocationID.y;
    if (i >= p.n * p.cols) return;
    const uint t = i / p.cols, c = i % p.cols;
    const uint row = aux[p.ids_off + t];
    act[p.out_off + i] = w_elem(p.wtype, row * p.row_bytes, c);
}
