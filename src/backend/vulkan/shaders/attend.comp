#version 450
// attend.comp — one query head of one row over the KV mirror: softmax(q k^T) v over the slots the row may see (its
// own and earlier positions; with a StreamingLLM window the sinks and the last `window` positions; a layer's sliding
// window), in tiles of 64 slots with a running maximum. The query is already rotated and scaled (rope_q). A
// re-positioned cache's sinks are stored pre-RoPE and rotated here with the row's sink angles (host-computed). Each
// slot's position from the table at slot_pos_off (a ring's); slot_pos_off = 0xffffffff: the slot is the position.
// Split along the slots (flash-decoding): workgroup z of `splits` takes one contiguous share of them; with more than
// one split it writes its running maximum, sum and unnormalised output to the partials at part_off, and
// attend_merge.comp combines them. One split writes the output itself.
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
#include "common.glsl"
layout(push_constant) uniform P {
    uint n_heads, gq, head_dim, half_style, q_off, out_off, pos_off, slot_pos_off, n_slots, kvd, k16,
        v16, sink, window, layer_window, reposition, sink_cos_off, sink_sin_off, max_sink, splits, part_off;
} p;
shared float qs[256];
shared float sc[64];
void main() {
    const uint h = gl_WorkGroupID.x, t = gl_WorkGroupID.y, tid = gl_LocalInvocationID.x, half_d = p.head_dim / 2u;
    const uint kvh = h / p.gq, qbase = p.q_off + (t * p.n_heads + h) * p.head_dim;
    for (uint d = tid; d < p.head_dim; d += 64u) qs[d] = act[qbase + d];
    const int pos_q = int(aux[p.pos_off + t]);
    barrier();
    float acc[4] = float[4](0.0, 0.0, 0.0, 0.0);
    float m = -1.0 / 0.0, l = 0.0;
    const uint z = gl_WorkGroupID.z, chunk = ((p.n_slots + p.splits - 1u) / p.splits + 63u) / 64u * 64u;
    const uint s_begin = z * chunk, s_end = min(p.n_slots, s_begin + chunk);
    for (uint s0 = s_begin; s0 < s_end; s0 += 64u) {
        const uint slot = s0 + tid;
        float score = -1.0 / 0.0;
        if (slot < s_end) {
            const int pk = p.slot_pos_off == 0xffffffffu ? int(slot) : int(aux[p.slot_pos_off + slot]);
            bool vis = pk >= 0 && pk <= pos_q;
            const bool is_sink = pk >= 0 && uint(pk) < p.sink;
            if (p.window != 0u && !is_sink && uint(pos_q - pk) >= p.window) vis = false;
            if (p.layer_window != 0u && uint(pos_q - pk) >= p.layer_window) vis = false;
            if (vis) {
                const uint kb = slot * p.kvd + kvh * p.head_dim;
                const bool rot = p.reposition != 0u && is_sink;
                const uint ro = (t * p.max_sink + uint(pk)) * half_d;
                float dot = 0.0;
                for (uint j = 0u; j < half_d; j++) {
                    const uint ia = p.half_style != 0u ? j : 2u * j, ib = p.half_style != 0u ? j + half_d : 2u * j + 1u;
                    float a = kv_get(true, kb + ia, p.k16), b = kv_get(true, kb + ib, p.k16);
                    if (rot) {
                        const float c = uintBitsToFloat(aux[p.sink_cos_off + ro + j]);
                        const float s = uintBitsToFloat(aux[p.sink_sin_off + ro + j]);
                        const float a2 = a * c - b * s;
                        b = a * s + b * c;
                        a = a2;
                    }
                    dot += qs[ia] * a + qs[ib] * b;
                }
                score = dot;
            }
        }
        sc[tid] = score;
        barrier();
        float mt = m;
        for (uint j = 0u; j < 64u; j++) mt = max(mt, sc[j]);
        if (mt > -1.0 / 0.0) {
            const float r = exp(m - mt);
            l *= r;
            for (uint k = 0u; k < 4u; k++) acc[k] *= r;
            for (uint j = 0u; j < 64u && s0 + j < s_end; j++) {
                if (sc[j] == -1.0 / 0.0) continue;
                const float w = exp(sc[j] - mt);
                l += w;
                const uint vb = (s0 + j) * p.kvd + kvh * p.head_dim;
                for (uint k = 0u; k < 4u; k++) {
                    const uint d = tid + 64u * k;
                    if (d < p.head_dim) acc[k] += w * kv_get(false, vb + d, p.v16);
                }
            }
            m = mt;
        }
        barrier();
    }
    if (p.splits > 1u) {
        const uint pbase = p.part_off + ((t * p.n_heads + h) * p.splits + z) * (p.head_dim + 2u);
        if (tid == 0u) {
            act[pbase] = m;
            act[pbase + 1u] = l;
        }
        for (uint k = 0u; k < 4u; k++) {
            const uint d = tid + 64u * k;
            if (d < p.head_dim) act[pbase + 2u + d] = acc[k];
        }
        return;
    }
    const uint obase = p.out_off + (t * p.n_heads + h) * p.head_dim;
    for (uint k = 0u; k < 4u; k++) {
        const uint d = tid + 64u * k;
        if (d < p.head_dim) act[obase + d] = l > 0.0 ? acc[k] / l : 0.0;
    }
}
