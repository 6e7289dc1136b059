#version 450
// matmul.comp — out[t, r] = row r of w . row t of in, for rows t0 .. n of the input. Each subgroup takes NR weight
// rows (a workgroup 64 / subgroup-size subgroups: vk_run.c's dispatch) and walks them together: a row is cut into
// units of a few words (4 codes of a Q8_0 block; 4 bytes, 8 codes, of a Q4_0 block or of a Q4_K / Q5_K / Q6_K chunk;
// 4 F16 / BF16 / F32 elements) and lane i takes units i, i + L, ... (L the subgroup size), so neighbouring lanes read
// neighbouring words of the weights and neighbouring vec4s of the activations (coalesced loads), and each
// activation vec4 read serves the NR rows. A unit is decoded to fp32 vec4s (its `parts`) and dotted with the
// activations; the lanes' fp32 partial sums meet in a subgroupAdd (no shared memory, no barrier). Activation rows NT
// at a time: a weight row is read once per NT rows; decode (one row) has a copy of its own. With add_out the sum is
// added to out (the residual add fused). Rows whose length is not a multiple of 4 take one element at a time through
// w_elem.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
layout(local_size_x = 64) in;
#include "common.glsl"
layout(push_constant) uniform P {
    uint rows, cols, row_bytes, wtype, t0, n, in_off, ld_in, out_off, ld_out, vec_in, add_out;
} p;
#define NR 2u // weight rows a subgroup (vk_run.c's dispatch counts on it)
#define NT 8u // activation rows a pass
float s[NR][NT];  // the invocation's partial sums: weight row k . activation row t + j
vec4 w[NR][4];    // the unit being summed, decoded: weight row k's part i
uint ro[NR];      // byte offset of each weight row (the last row repeated past the matrix's end)
uint t, m;        // the pass's first activation row and its row count (1 .. NT)

// in[t, c .. c + 3] (c a multiple of 4); v4: the input is vec4-aligned (act4)
vec4 x4(uint row, uint c, bool v4) {
    const uint i = p.in_off + row * p.ld_in + c;
    if (v4) return act4[i >> 2];
    return vec4(act[i], act[i + 1u], act[i + 2u], act[i + 3u]);
}

// the 4 weight bytes from byte `off` on, as a little-endian word (any alignment; the buffer has 16 bytes of slack)
uint w_bytes4(uint off) {
    const uint sh = (off & 3u) * 8u, lo = wd[off >> 2], hi = wd[(off >> 2) + 1u];
    return sh == 0u ? lo : (lo >> sh) | (hi << (32u - sh));
}

vec4 i8x4(uint v) {
    const int x = int(v);
    return vec4(bitfieldExtract(x, 0, 8), bitfieldExtract(x, 8, 8), bitfieldExtract(x, 16, 8),
                bitfieldExtract(x, 24, 8));
}

vec4 u4x4(uint v, uint sh) { // nibbles at bits sh, sh + 8, sh + 16, sh + 24
    return vec4((v >> sh) & 15u, (v >> (sh + 8u)) & 15u, (v >> (sh + 16u)) & 15u, (v >> (sh + 24u)) & 15u);
}

vec4 bit4(uint v) { return vec4(v & 1u, (v >> 8) & 1u, (v >> 16) & 1u, (v >> 24) & 1u); } // bit 0 of each byte

// s[k][j] += w[k][i] . in[t + j, c0 + i stride .. + 3] over the unit's parts i; mt: NT, or 1 where m is 1 (decode).
// Rows j >= m repeat row m - 1 (their sums are not stored), so the loops have no branch.
void add(uint c0, uint stride, uint parts, bool v4, uint mt) {
    for (uint i = 0u; i < parts; i++)
        for (uint j = 0u; j < mt; j++) {
            const vec4 x = x4(t + min(j, m - 1u), c0 + i * stride, v4);
            for (uint k = 0u; k < NR; k++) s[k][j] += dot(w[k][i], x);
        }
}

// Q8_0 (34-byte blocks: an fp16 scale, then 32 int8 codes): unit u is codes 4 (u mod 8) .. + 3 of block u / 8
void unit_q8_0(uint u, bool v4, uint mt) {
    const uint at = (u >> 3) * 34u, q = at + 2u + 4u * (u & 7u);
    for (uint k = 0u; k < NR; k++) w[k][0] = w_half(ro[k] + at) * i8x4(w_bytes4(ro[k] + q));
    add(4u * u, 0u, 1u, v4, mt);
}

// Q4_0 (18-byte blocks: an fp16 scale, 16 bytes: element l the low nibble of byte l, l + 16 the high one, minus 8):
// unit u is bytes 4 (u mod 4) .. + 3 of block u / 4, elements 4 (u mod 4) .. + 3 and 16 more
void unit_q4_0(uint u, bool v4, uint mt) {
    const uint at = (u >> 2) * 18u, q = at + 2u + 4u * (u & 3u);
    for (uint k = 0u; k < NR; k++) {
        const float d = w_half(ro[k] + at);
        const uint v = w_bytes4(ro[k] + q);
        w[k][0] = d * (u4x4(v, 0u) - 8.0);
        w[k][1] = d * (u4x4(v, 4u) - 8.0);
    }
    add(32u * (u >> 2) + 4u * (u & 3u), 16u, 2u, v4, mt);
}

// byte i of the 12 scale bytes of a K-quant super-block, held as 3 words
uint sc_byte(uvec3 sc, uint i) { return (sc[i >> 2] >> (8u * (i & 3u))) & 255u; }

// Q4_K / Q5_K (super-blocks of 256, 4-byte aligned: fp16 d and dmin, 12 scale bytes, Q5_K's qh[32], qs[128];
// chunk ch of 64 elements: the low nibbles of qs[32 ch ..] are sub-block 2 ch, the high ones 2 ch + 1, Q5_K's fifth
// bits 2 ch and 2 ch + 1 of qh[l]; value d sc q - dmin min): unit u is bytes 4 l4 .. + 3 (l4 = u mod 8) of chunk
// (u / 8) mod 4 of super-block u / 32
void unit_q45_k(uint u, bool v4, uint mt) {
    const bool five = p.wtype == WT_Q5_K;
    const uint sb = u >> 5, ch = (u >> 3) & 3u, l4 = u & 7u;
    for (uint k = 0u; k < NR; k++) {
        const uint bw = (ro[k] + sb * (five ? 176u : 144u)) >> 2; // the super-block's first word
        const vec2 dm = unpackHalf2x16(wd[bw]);
        const uvec3 sc = uvec3(wd[bw + 1u], wd[bw + 2u], wd[bw + 3u]);
        const uint v = wd[bw + (five ? 12u : 4u) + 8u * ch + l4];
        vec4 lo = u4x4(v, 0u), hi = u4x4(v, 4u);
        if (five) {
            const uint h = wd[bw + 4u + l4] >> (2u * ch);
            lo += 16.0 * bit4(h);
            hi += 16.0 * bit4(h >> 1);
        }
        for (uint i = 0u; i < 2u; i++) { // sub-block 2 ch + i (common.glsl's k_scale_min)
            const uint j = 2u * ch + i, b4 = sc_byte(sc, j + 4u);
            const uint sv = j < 4u ? sc_byte(sc, j) & 63u : (b4 & 15u) | ((sc_byte(sc, j - 4u) >> 6) << 4);
            const uint mv = j < 4u ? b4 & 63u : (b4 >> 4) | ((sc_byte(sc, j) >> 6) << 4);
            w[k][i] = dm.x * float(sv) * (i == 0u ? lo : hi) - dm.y * float(mv);
        }
    }
    add(256u * sb + 64u * ch + 4u * l4, 32u, 2u, v4, mt);
}

// Q6_K (210-byte super-blocks: ql[128], qh[64], int8 scales[16], fp16 d; element h 128 + qt 32 + l is the low
// nibble (qt < 2) or high of ql[h 64 + (qt mod 2) 32 + l] with bits 2 qt of qh[h 32 + l] above it, minus 32, times
// d scales[h 8 + l / 16 + 2 qt]): unit u is l = 4 l4 .. + 3 (l4 = u mod 8) of half h = (u / 8) mod 2 of
// super-block u / 16, for the four qt
void unit_q6_k(uint u, bool v4, uint mt) {
    const uint sb = u >> 4, h = (u >> 3) & 1u, l4 = u & 7u;
    for (uint k = 0u; k < NR; k++) {
        const uint blk = ro[k] + sb * 210u, ql = blk + h * 64u + 4u * l4, sc = blk + 192u + h * 8u + (l4 >> 2);
        const uint v0 = w_bytes4(ql), v1 = w_bytes4(ql + 32u), hb = w_bytes4(blk + 128u + h * 32u + 4u * l4);
        const float d = w_half(blk + 208u);
        for (uint qt = 0u; qt < 4u; qt++) {
            const uint hv = hb >> (2u * qt);
            const vec4 q = u4x4((qt & 1u) != 0u ? v1 : v0, qt >= 2u ? 4u : 0u) +
                           16.0 * vec4(hv & 3u, (hv >> 8) & 3u, (hv >> 16) & 3u, (hv >> 24) & 3u) - 32.0;
            w[k][qt] = d * float((int(w_byte(sc + 2u * qt)) << 24) >> 24) * q;
        }
    }
    add(256u * sb + 128u * h + 4u * l4, 32u, 4u, v4, mt);
}

// F16 / BF16 (4-byte aligned rows: cols mod 4 == 0): unit u is elements 4 u .. + 3, two words
void unit_f16(uint u, bool v4, uint mt) {
    for (uint k = 0u; k < NR; k++) {
        const uint at = (ro[k] >> 2) + 2u * u, w0 = wd[at], w1 = wd[at + 1u];
        w[k][0] = p.wtype == WT_F16 ? vec4(unpackHalf2x16(w0), unpackHalf2x16(w1))
                                    : vec4(uintBitsToFloat(w0 << 16), uintBitsToFloat(w0 & 0xffff0000u),
                                           uintBitsToFloat(w1 << 16), uintBitsToFloat(w1 & 0xffff0000u));
    }
    add(4u * u, 0u, 1u, v4, mt);
}

// F32 (cols mod 4 == 0): unit u is elements 4 u .. + 3
void unit_f32(uint u, bool v4, uint mt) {
    for (uint k = 0u; k < NR; k++) {
        const uint at = (ro[k] >> 2) + 4u * u;
        w[k][0] = vec4(uintBitsToFloat(wd[at]), uintBitsToFloat(wd[at + 1u]), uintBitsToFloat(wd[at + 2u]),
                       uintBitsToFloat(wd[at + 3u]));
    }
    add(4u * u, 0u, 1u, v4, mt);
}

// units lane, lane + L, ... of `count` (neighbouring lanes, neighbouring units)
#define UNITS(count, f)                                                                                              \
    for (uint u = gl_SubgroupInvocationID; u < (count); u += gl_SubgroupSize) f(u, v4, mt);

// the invocation's share of the pass; decode's call has constant v4 and mt, so a copy of its own without their
// branches
void pass(bool v4, uint mt) {
    if (p.wtype == WT_Q8_0) UNITS(p.cols / 4u, unit_q8_0)
    else if (p.wtype == WT_Q4_0) UNITS(p.cols / 8u, unit_q4_0)
    else if (p.wtype == WT_Q4_K || p.wtype == WT_Q5_K) UNITS(p.cols / 8u, unit_q45_k)
    else if (p.wtype == WT_Q6_K) UNITS(p.cols / 16u, unit_q6_k)
    else if ((p.wtype == WT_F16 || p.wtype == WT_BF16) && p.cols % 4u == 0u) UNITS(p.cols / 4u, unit_f16)
    else if (p.wtype == WT_F32 && p.cols % 4u == 0u) UNITS(p.cols / 4u, unit_f32)
    else {
        for (uint c = gl_SubgroupInvocationID; c < p.cols; c += gl_SubgroupSize)
            for (uint k = 0u; k < NR; k++) {
                const float e = w_elem(p.wtype, ro[k], c);
                for (uint j = 0u; j < NT; j++)
                    s[k][j] += e * act[p.in_off + (t + min(j, m - 1u)) * p.ld_in + c];
            }
    }
}

void main() {
    const uint g = gl_WorkGroupID.x + gl_NumWorkGroups.x * gl_WorkGroupID.y;
    const uint r0 = (g * gl_NumSubgroups + gl_SubgroupID) * NR;
    if (r0 >= p.rows) return; // the whole subgroup: the grid's last line may pass the matrix's end
    for (uint k = 0u; k < NR; k++) ro[k] = min(r0 + k, p.rows - 1u) * p.row_bytes;
    for (t = p.t0; t < p.n; t += NT) {
        m = min(NT, p.n - t);
        for (uint k = 0u; k < NR; k++)
            for (uint j = 0u; j < NT; j++) s[k][j] = 0.0;
        if (m == 1u && p.vec_in != 0u) pass(true, 1u); // decode
        else pass(p.vec_in != 0u, NT);
        for (uint k = 0u; k < NR; k++)
            for (uint j = 0u; j < NT; j++) {
                if (j >= m) break;
                const float sum = subgroupAdd(s[k][j]);
                const uint at = p.out_off + (t + j) * p.ld_out + r0 + k;
                if (subgroupElect() && r0 + k < p.rows) act[at] = p.add_out != 0u ? act[at] + sum : sum;
            }
    }
}
