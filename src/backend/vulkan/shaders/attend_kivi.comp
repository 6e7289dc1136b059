#version 450
// attend_kivi.comp — one query head of a row over a device KIVI cache (kivi.glsl's stores), reading every key and
// value where it is stored: sinks and ring rows at their float precision, quantised groups as codes widened with
// their fp16 grid (per channel for keys, per token for values) as they are read; no dequantised copy. The row sees
// sinks [s0, s0 + ns) and non-sink tokens [lo, lo + nn) (the host's view of the CPU cache after this token's
// append: kvcache/attend.c's make_view); a token n < qend of a KIVI store is in its codes, else in its ring.
// softmax(q k^T) v in tiles of 64 tokens with a running maximum; the query is already rotated and scaled. A
// re-positioned cache's sinks are stored pre-RoPE and rotated here with the row's sink angles (host-computed).
// A rotated cache (kvcache/rotate.h: rot_k, rot_v): the query is rotated by R = H diag(s) here as the keys were
// (kivi_rotate.comp), so scores are unchanged; a re-positioned sink's key, stored without R and rotated only by
// RoPE here, meets the query before R instead (the CPU rotates that key by R as it reads it: (R q).(R k) = q.k);
// the output is rotated back by R^T (rot_v).
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
#include "common.glsl"
#include "kivi.glsl"
layout(push_constant) uniform P {
    uint n_heads, gq, head_dim, half_style, q_off, out_off, dk, dv, n_kv_heads, s0, ns, lo, nn, qend_k, qend_v, rot,
        cos_off, sin_off, rot_k, rot_v, sign_off, block;
} p;
shared float qs[256];
shared float q0[256]; // rot_k: the query before R (for re-positioned sinks)
shared float sc[64];

// qs[0, head_dim) <- the unnormalised Walsh–Hadamard transform of each block (rotate.c's tg_fwht_ref's
// butterflies): the query before attention, the output (rot_v) after it
void fwht_q() {
    const uint tid = gl_LocalInvocationID.x;
    for (uint len = 1u; len < p.block; len *= 2u) {
        for (uint j2 = tid; j2 < p.head_dim / 2u; j2 += 64u) {
            const uint j = (j2 / len) * 2u * len + j2 % len;
            precise float a = qs[j], b = qs[j + len];
            qs[j] = a + b;
            qs[j + len] = a - b;
        }
        barrier();
    }
}

// Element k of kv-head h of token i of the row's view (sinks first) in the store of descriptor d.
float elem(uint d, uint i, uint h, uint k, uint qend) {
    const uint H = p.n_kv_heads, D = p.head_dim;
    if (i < p.ns) return reg_get(aux[d + D_SINK], aux[d + D_SPREC], ((p.s0 + i) * H + h) * D + k);
    const uint n = p.lo + (i - p.ns);
    if (aux[d + D_BITS] == 0u || n >= qend)
        return reg_get(aux[d + D_RING], aux[d + D_PREC], ((n % aux[d + D_RLEN]) * H + h) * D + k);
    const uint bits = aux[d + D_BITS], cpw = 32u / bits, G = aux[d + D_GROUP];
    const uint uh = ((n / G) % aux[d + D_UNITS]) * H + h, t = n % G;
    const uint word = kc[aux[d + D_CODES] + (uh * G + t) * aux[d + D_ROWW] + k / cpw];
    const uint code = (word >> ((k % cpw) * bits)) & ((1u << bits) - 1u);
    const uint sz = kc[aux[d + D_SCALES] + (aux[d + D_PERCH] != 0u ? uh * D + k : uh * G + t)];
    precise float x = float(code) * h2f(sz & 0xffffu) + h2f(sz >> 16);
    return x;
}

void main() {
    const uint h = gl_WorkGroupID.x, tid = gl_LocalInvocationID.x, half_d = p.head_dim / 2u;
    const uint kvh = h / p.gq, qbase = p.q_off + h * p.head_dim, total = p.ns + p.nn;
    const uint sgn = p.sign_off + kvh * p.head_dim; // rot_k / rot_v: the kv-head's signs
    for (uint d = tid; d < p.head_dim; d += 64u) {
        const float q = act[qbase + d];
        q0[d] = q;
        qs[d] = q;
        if (p.rot_k != 0u) { // the signs exist only in a rotated cache's row table
            precise float r = q * uintBitsToFloat(aux[sgn + d]);
            qs[d] = r;
        }
    }
    barrier();
    if (p.rot_k != 0u) fwht_q();
    float acc[4] = float[4](0.0, 0.0, 0.0, 0.0);
    float m = -1.0 / 0.0, l = 0.0;
    for (uint i0 = 0u; i0 < total; i0 += 64u) {
        const uint i = i0 + tid;
        float score = -1.0 / 0.0;
        if (i < total) {
            const bool rot = p.rot != 0u && i < p.ns, raw = rot && p.rot_k != 0u;
            float dot = 0.0;
            for (uint j = 0u; j < half_d; j++) {
                const uint ia = p.half_style != 0u ? j : 2u * j, ib = p.half_style != 0u ? j + half_d : 2u * j + 1u;
                float a = elem(p.dk, i, kvh, ia, p.qend_k), b = elem(p.dk, i, kvh, ib, p.qend_k);
                if (rot) {
                    const float c = uintBitsToFloat(aux[p.cos_off + (p.s0 + i) * half_d + j]);
                    const float s = uintBitsToFloat(aux[p.sin_off + (p.s0 + i) * half_d + j]);
                    const float a2 = a * c - b * s;
                    b = a * s + b * c;
                    a = a2;
                }
                const float qa = raw ? q0[ia] : qs[ia], qb = raw ? q0[ib] : qs[ib];
                dot += qa * a + qb * b;
            }
            score = dot;
        }
        sc[tid] = score;
        barrier();
        float mt = m;
        for (uint j = 0u; j < 64u; j++) mt = max(mt, sc[j]);
        if (mt > -1.0 / 0.0) {
            const float r = exp(m - mt);
            l *= r;
            for (uint k = 0u; k < 4u; k++) acc[k] *= r;
            for (uint j = 0u; j < 64u && i0 + j < total; j++) {
                const float w = exp(sc[j] - mt);
                l += w;
                for (uint k = 0u; k < 4u; k++) {
                    const uint d = tid + 64u * k;
                    if (d < p.head_dim) acc[k] += w * elem(p.dv, i0 + j, kvh, d, p.qend_v);
                }
            }
            m = mt;
        }
        barrier();
    }
    const uint obase = p.out_off + h * p.head_dim;
    if (p.rot_v != 0u) { // R^T: the transform, then the signs (rotate.c's tg_rot_inverse)
        for (uint k = 0u; k < 4u; k++) { // the query is read no more (the loop ended at a barrier)
            const uint d = tid + 64u * k;
            if (d < p.head_dim) qs[d] = l > 0.0 ? acc[k] / l : 0.0;
        }
        barrier();
        fwht_q();
        for (uint d = tid; d < p.head_dim; d += 64u) {
            precise float o = qs[d] * uintBitsToFloat(aux[sgn + d]);
            act[obase + d] = o;
        }
        return;
    }
    for (uint k = 0u; k < 4u; k++) {
        const uint d = tid + 64u * k;
        if (d < p.head_dim) act[obase + d] = l > 0.0 ? acc[k] / l : 0.0;
    }
}
