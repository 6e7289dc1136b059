#version 450
// matmul.comp — out[t, r] = row r of w . row t of in, for rows t0 .. n of the input. Workgroup g takes weight rows
// [g rpw, (g + 1) rpw), one subgroup a row at a time: the subgroup's invocations take the row's blocks in turn, so
// neighbours read neighbouring bytes and the loads coalesce, each decoding whole words, and their fp32 partial sums
// meet in a subgroupAdd (no shared memory, no barrier). Activation rows 8 at a time: a weight row is read once per 8
// rows; with add_out the sum is added to out (the residual add fused). Q4_K / Q5_K / Q6_K go 32 elements (a sub-block: one scale) per step; rows whose length is not a multiple of 4
// take one element at a time through w_elem.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 64) in;
#include "common.glsl"
layout(push_constant) uniform P {
    uint rows, cols, row_bytes, wtype, t0, n, in_off, ld_in, out_off, ld_out, vec_in, rpw, add_out;
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
    } else if (p.wtype == WT_Q4_K || p.wtype == WT_Q5_K) {
        // sub-block j of a super-block: chunk j / 2, nibble j % 2 of qs[chunk * 32 + l]; Q5_K's fifth bit is bit
        // 2 chunk + j % 2 of qh[l]; value d sc q - dmin m (k_scale_min)
        const bool five = p.wtype == WT_Q5_K;
        const uint units = p.cols / 32u, sbb = five ? 176u : 144u;
        for (uint u = lane; u < units; u += L) {
            const uint blk = row_off + (u >> 3) * sbb, j = u & 7u, chunk = j >> 1, hi = j & 1u, c0 = u * 32u;
            const uint qw = (blk + (five ? 48u : 16u) + chunk * 32u) >> 2, hw = (blk + 16u) >> 2;
            for (uint k = 0u; k < NT; k++) bs[k] = 0.0;
            float xs[NT];
            for (uint k = 0u; k < NT; k++) xs[k] = 0.0;
            for (uint g = 0u; g < 8u; g++) {
                vec4 q = u4x4(wd[qw + g], 4u * hi);
                if (five) {
                    const uint h = wd[hw + g] >> (2u * chunk + hi);
                    q += 16.0 * vec4(h & 1u, (h >> 8) & 1u, (h >> 16) & 1u, (h >> 24) & 1u);
                }
                for (uint k = 0u; k < NT; k++)
                    if (k < m) {
                        const vec4 x = x4(t + k, c0 + 4u * g);
                        bs[k] += dot(q, x);
                        xs[k] += x.x + x.y + x.z + x.w;
                    }
            }
            const uvec2 sm = k_scale_min(blk + 4u, j);
            const float d1 = w_half(blk) * float(sm.x), m1 = w_half(blk + 2u) * float(sm.y);
            for (uint k = 0u; k < NT; k++) s[k] += d1 * bs[k] - m1 * xs[k];
        }
    } else if (p.wtype == WT_Q6_K) {
        // unit j = 4 h + qt of a super-block (ggml's order: element h 128 + qt 32 + l): low nibble (qt < 2) or high
        // of ql[h 64 + (qt % 2) 32 + l], bits 2 qt of qh[h 32 + l], minus 32; int8 scales[h 8 + l / 16 + 2 qt]
        const uint units = p.cols / 32u;
        for (uint u = lane; u < units; u += L) {
            const uint blk = row_off + (u >> 3) * 210u, j = u & 7u, h = j >> 2, qt = j & 3u, c0 = u * 32u;
            const uint lo_at = blk + h * 64u + (qt & 1u) * 32u, hb_at = blk + 128u + h * 32u;
            const uint nsh = qt >= 2u ? 4u : 0u;
            float b0[NT], b1[NT];
            for (uint k = 0u; k < NT; k++) b0[k] = b1[k] = 0.0;
            for (uint g = 0u; g < 8u; g++) {
                const uint lv = w_bytes4(lo_at + 4u * g), hv = w_bytes4(hb_at + 4u * g) >> (2u * qt);
                const vec4 q = u4x4(lv, nsh) + 16.0 * vec4(hv & 3u, (hv >> 8) & 3u, (hv >> 16) & 3u, (hv >> 24) & 3u)
                               - 32.0;
                for (uint k = 0u; k < NT; k++)
                    if (k < m) {
                        const float v = dot(q, x4(t + k, c0 + 4u * g));
                        if (g < 4u) b0[k] += v;
                        else b1[k] += v;
                    }
            }
            const uint sc_at = blk + 192u + h * 8u + 2u * qt;
            const float d = w_half(blk + 208u);
            const float s0 = d * float((int(w_byte(sc_at)) << 24) >> 24);
            const float s1 = d * float((int(w_byte(sc_at + 1u)) << 24) >> 24);
            for (uint k = 0u; k < NT; k++) s[k] += s0 * b0[k] + s1 * b1[k];
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
                const uint at = p.out_off + (t + j) * p.ld_out + r;
                if (lane == 0u) act[at] = p.add_out != 0u ? act[at] + sum : sum;
            }
        }
    }
}
