#version 450
// matmul.comp — out[t, r] = row r of w . row t of in, for rows t0 .. n of the input: one invocation a weight row
// (x + 65536 y), which reads its row once per four activation rows and sums in fp32 in column order. No shared
// memory or barriers: the plain form, which lavapipe runs well; a tiled form for GPUs is the next issue's.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
#include "common.glsl"
layout(push_constant) uniform P {
    uint rows, cols, row_bytes, wtype, t0, n, in_off, ld_in, out_off, ld_out;
} p;
void main() {
    const uint r = gl_GlobalInvocationID.x + 65536u * gl_GlobalInvocationID.y;
    if (r >= p.rows) return;
    const uint row_off = r * p.row_bytes;
    for (uint t = p.t0; t < p.n; t += 4u) {
        const uint m = min(4u, p.n - t);
        float s[4] = float[4](0.0, 0.0, 0.0, 0.0);
        for (uint c = 0u; c < p.cols; c++) {
            const float w = w_elem(p.wtype, row_off, c);
            for (uint j = 0u; j < m; j++) s[j] += w * act[p.in_off + (t + j) * p.ld_in + c];
        }
        for (uint j = 0u; j < m; j++) act[p.out_off + (t + j) * p.ld_out + r] = s[j];
    }
}
