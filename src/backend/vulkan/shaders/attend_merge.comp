#version 450
// attend_merge.comp — one query head of one row: the partials of attend.comp's splits (each its running maximum m,
// sum l and unnormalised output a) combined as out = sum_z e^(m_z - M) a_z / sum_z e^(m_z - M) l_z, M the largest
// m_z; a split that saw no slot (m = -inf) adds nothing.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
#include "common.glsl"
layout(push_constant) uniform P {
    uint n_heads, head_dim, splits, part_off, out_off;
} p;
void main() {
    const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x, w = p.head_dim + 2u;
    const uint base = p.part_off + (t * p.n_heads + h) * p.splits * w;
    float big = -1.0 / 0.0;
    for (uint z = 0u; z < p.splits; z++) big = max(big, act[base + z * w]);
    float l = 0.0;
    for (uint z = 0u; z < p.splits; z++) {
        const float m = act[base + z * w];
        if (m > -1.0 / 0.0) l += exp(m - big) * act[base + z * w + 1u];
    }
    const uint obase = p.out_off + (t * p.n_heads + h) * p.head_dim;
    for (uint d = tid; d < p.head_dim; d += 64u) {
        float s = 0.0;
        for (uint z = 0u; z < p.splits; z++) {
            const float m = act[base + z * w];
            if (m > -1.0 / 0.0) s += exp(m - big) * act[base + z * w + 2u + d];
        }
        act[obase + d] = l > 0.0 ? s / l : 0.0;
    }
}
