#version 450
// matmul.comp — out[t, r] = row r of w . row t of in, for rows t0 .. n of the input. Workgroup g takes weight rows
// [g rpw, (g + 1) rpw), one subgroup a row at a time: the subgroup's invocations take the row's blocks in turn, so
// neighbours read neighbouring bytes and the loads coalesce, each decoding whole words, and their fp32 partial sums
// meet in a subgroupAdd (no shared memory, no barrier). Activation rows 8 at a time: a weight row is read once per 8
// rows. Types without a block path here (the K-quants, rows whose length is not a multiple of 4) take one element
// at a time through w_elem.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 64) in;
#include "common.glsl"
layout(push_constant) uniform P {
    uint rows, cols, row_bytes, wtype, t0, n, in_off, ld_in, out_off, ld_out, vec_in, rpw;
} p;
#define NT 8u
float s[NT];
float bs[NT];

// in[t, c .. c + 3] (c a multiple of 4)
vec4 x4(uint t, uint c) {
    const uint i = p.in_off + t * p.ld_in + c;
    if (p.vec_in != 0u) return act4[i >> 2];
    return vec4(act[i], act[i + 1u], act[i + 2u], act[i + 3u]);
}

// the 4 weight bytes from byte `off` on, as a little-endian word (any alignment; the buffer has 16 bytes of slack)
uint w_bytes4(uint off) {
    const uint sh = (off & 3u) * 8u, lo = wd[off >> 2], hi = wd[(off >> 2) + 1u];
    return sh == 0u ? lo : (lo >> sh) | (hi << (32u - sh));
}

vec4 i8x4(uint v) {
    const int w = int(v);
    return vec4(bitfieldExtract(w, 0, 8), bitfieldExtract(w, 8, 8), bitfieldExtract(w, 16, 8),
                bitfieldExtract(w, 24, 8));
}

vec4 u4x4(uint v, uint sh) { // nibbles at bits sh, sh + 8, sh + 16, sh + 24
    return vec4((v >> sh) & 15u, (v >> (sh + 8u)) & 15u, (v >> (sh + 16u)) & 15u, (v >> (sh + 24u)) & 15u);
}

void accumulate(uint lane, uint L, uint row_off, uint t, uint m) {
    const uint nb = p.cols / 32u;
    if (p.wtype == WT_Q8_0) {
        for (uint b = lane; b < nb; b += L) {
            const uint blk = row_off + b * 34u, c0 = b * 32u;
            for (uint j = 0u; j < NT; j++) bs[j] = 0.0;
            for (uint g = 0u; g < 8u; g++) {
                const vec4 q = i8x4(w_bytes4(blk + 2u + 4u * g));
                for (uint j = 0u; j < NT; j++)
                    if (j < m) bs[j] += dot(q, x4(t + j, c0 + 4u * g));
            }
            const float d = w_half(blk);
            for (uint j = 0u; j < NT; j++) s[j] += d * bs[j];
        }
    } else if (p.wtype == WT_Q4_0) {
        for (uint b = lane; b < nb; b += L) {
            const uint blk = row_off + b * 18u, c0 = b * 32u;
            for (uint j = 0u; j < NT; j++) bs[j] = 0.0;
            for (uint g = 0u; g < 4u; g++) {
                const uint v = w_bytes4(blk + 2u + 4u * g);
                const vec4 lo = u4x4(v, 0u) - 8.0, hi = u4x4(v, 4u) - 8.0;
                for (uint j = 0u; j < NT; j++)
                    if (j < m) bs[j] += dot(lo, x4(t + j, c0 + 4u * g)) + dot(hi, x4(t + j, c0 + 16u + 4u * g));
            }
            const float d = w_half(blk);
            for (uint j = 0u; j < NT; j++) s[j] += d * bs[j];
        }
    } else if ((p.wtype == WT_F16 || p.wtype == WT_BF16) && p.cols % 4u == 0u) {
        const uint base = row_off >> 2;
        for (uint c = 4u * lane; c < p.cols; c += 4u * L) {
            const uint w0 = wd[base + c / 2u], w1 = wd[base + c / 2u + 1u];
            const vec4 w = p.wtype == WT_F16
                               ? vec4(unpackHalf2x16(w0), unpackHalf2x16(w1))
                               : vec4(uintBitsToFloat(w0 << 16), uintBitsToFloat(w0 & 0xffff0000u),
                                      uintBitsToFloat(w1 << 16), uintBitsToFloat(w1 & 0xffff0000u));
            for (uint j = 0u; j < NT; j++)
                if (j < m) s[j] += dot(w, x4(t + j, c));
        }
    } else if (p.wtype == WT_F32 && p.cols % 4u == 0u) {
        const uint base = row_off >> 2;
        for (uint c = 4u * lane; c < p.cols; c += 4u * L) {
            const vec4 w = vec4(uintBitsToFloat(wd[base + c]), uintBitsToFloat(wd[base + c + 1u]),
                                uintBitsToFloat(wd[base + c + 2u]), uintBitsToFloat(wd[base + c + 3u]));
            for (uint j = 0u; j < NT; j++)
                if (j < m) s[j] += dot(w, x4(t + j, c));
        }
    } else {
        for (uint c = lane; c < p.cols; c += L) {
            const float w = w_elem(p.wtype, row_off, c);
            for (uint j = 0u; j < NT; j++)
                if (j < m) s[j] += w * act[p.in_off + (t + j) * p.ld_in + c];
        }
    }
}

void main() {
    const uint lane = gl_SubgroupInvocationID, L = gl_SubgroupSize;
    const uint g = gl_WorkGroupID.x + gl_NumWorkGroups.x * gl_WorkGroupID.y, r_end = min((g + 1u) * p.rpw, p.rows);
    for (uint r = g * p.rpw + gl_SubgroupID; r < r_end; r += gl_NumSubgroups) {
        for (uint t = p.t0; t < p.n; t += NT) {
            const uint m = min(NT, p.n - t);
            for (uint j = 0u; j < NT; j++) s[j] = 0.0;
            accumulate(lane, L, r * p.row_bytes, t, m);
            for (uint j = 0u; j < NT; j++) {
                if (j >= m) break;
                const float sum = subgroupAdd(s[j]);
                if (lane == 0u) act[p.out_off + (t + j) * p.ld_out + r] = sum;
            }
        }
    }
}
