#version 450
// kivi_store.comp — one step of appending a token to a device KIVI store (kivi.glsl's layout), from the token's
// keys or values staged in fp32 (kv_append rotated the keys): what kvcache.c's append and the KIVI codecs do, on
// the device. `mode` picks the step (vk_kivi.c records them in the CPU's order):
//   0 SINK  the row into sink `idx` at the store's float precision   (one invocation per two elements)
//   1 RING  the row into ring row idx % ring                         (one invocation per two elements)
//   2 KEY   token idx into its group with provisional per-channel grids (codec_kivi_provisional.c): the first row
//           fits each channel's grid to itself; a later one widens the grid of a channel it falls outside of and
//           re-codes that channel's earlier rows from their dequantised values (one invocation per word of a row,
//           so it alone writes that word of every row)
//   3 VALUE token idx's row quantised per token                      (one invocation per kv-head)
//   4 KFLUSH the ring's tokens [idx, idx + G) quantised per channel into their group (codec_kivi_grouped.c)
//   5 VFLUSH the same tokens quantised per token                     (one invocation per kv-head and row)
//   7 WKEY  token idx's key in a store without groups (group size 0: codec_kivi_whole.c): one grid per channel
//           for every held row [first, idx), re-fitted over their codes' values and the new key; where it changes,
//           the held rows re-coded (one invocation per word of a row, as KEY)
//   6 SINKQ  the idx sinks, complete, replaced by their round trip through the store's codes (kvcache.c's
//           quantize_sink_rows, --kv-quantize-sinks; the sinks fp32): keys per channel over the sinks (one
//           invocation per kv-head and channel), values per token (one invocation per kv-head and sink)
#extension GL_GOOGLE_include_directive : require
layout(local_size_x = 64) in;
#include "common.glsl"
#include "kivi.glsl"
layout(push_constant) uniform P {
    uint mode, d, src, idx, n_kv_heads, head_dim, first;
} p;

uint desc(uint i) { return aux[p.d + i]; }

// The code word of (unit u, kv-head h, row t), word w.
uint code_at(uint u, uint h, uint t, uint w) {
    return desc(D_CODES) + ((u * p.n_kv_heads + h) * desc(D_GROUP) + t) * desc(D_ROWW) + w;
}

// Element i of a slice: n values from element e0, stride apart, of the staged row or of a region.
float slice_get(bool staged, uint base, uint prec, uint e0, uint stride, uint i) {
    return staged ? act[p.src + e0 + i * stride] : reg_get(base, prec, e0 + i * stride);
}

// kivi.c's slice_error: the weighted squared error of a slice's n values coded on (s, z), fp32 in index order.
float slice_error(bool staged, uint base, uint prec, uint e0, uint stride, uint n, float s, float z, float levels,
                  float mid, float radius, float edge) {
    precise float e = 0.0;
    for (uint i = 0u; i < n; i++) {
        const float v = slice_get(staged, base, prec, e0, stride, i);
        if (isnan(v)) continue;
        precise float d = float(kivi_code(v, s, z, levels)) * s + z - v;
        precise float u = (v - mid) / radius;
        e += d * d * (1.0 + edge * u * u);
    }
    return e;
}

// kivi.c's tg_kivi_fit_slice: the grid of [lo, hi] (the slice's minimum and maximum), or with D_CLIP the clip of it
// whose codes reproduce the slice with the least weighted squared error (the first such, in kivi.c's order); keys
// (D_PERCH) weigh their ends by kivi.h's TG_KIVI_CLIP_KEY_EDGE.
uint kivi_fit_slice(bool staged, uint base, uint prec, uint e0, uint stride, uint n, float levels, float lo, float hi) {
    uint best_sz = kivi_fit(levels, lo, hi);
    precise float span = hi - lo;
    if (desc(D_CLIP) == 0u || n < 3u || !(span > 0.0) || isinf(span)) return best_sz;
    precise float mid = 0.5 * (lo + hi), radius = 0.5 * span;
    const float edge = desc(D_PERCH) != 0u ? 4.0 : 0.0;
    float best = slice_error(staged, base, prec, e0, stride, n, h2f(best_sz & 0xffffu), h2f(best_sz >> 16), levels,
                             mid, radius, edge);
    for (uint i = 0u; i <= 3u; i++) /* kivi.h's TG_KIVI_CLIP_STEPS and TG_KIVI_CLIP_DIV */
        for (uint j = 0u; j <= 3u; j++) {
            if (i == 0u && j == 0u) continue;
            precise float a = lo + span * (float(i) / 16.0), b = hi - span * (float(j) / 16.0);
            const uint sz = kivi_fit(levels, a, b);
            const float e = slice_error(staged, base, prec, e0, stride, n, h2f(sz & 0xffffu), h2f(sz >> 16), levels,
                                        mid, radius, edge);
            if (e < best) {
                best = e;
                best_sz = sz;
            }
        }
    return best_sz;
}

// Row x (n head_dim elements from element e0 of a region, or of the staged row) quantised per token into row t of
// unit u with its own grid.
void quantize_row(bool staged, uint base, uint prec, uint e0, uint u, uint h, uint t) {
    const uint bits = desc(D_BITS), cpw = 32u / bits, D = p.head_dim;
    const float levels = float((1u << bits) - 1u);
    float lo = 1.0 / 0.0, hi = -1.0 / 0.0;
    for (uint k = 0u; k < D; k++) {
        const float x = staged ? act[p.src + e0 + k] : reg_get(base, prec, e0 + k);
        if (x < lo) lo = x;
        if (x > hi) hi = x;
    }
    if (lo > hi) lo = hi = 0.0;
    const uint sz = kivi_fit_slice(staged, base, prec, e0, 1u, D, levels, lo, hi);
    const float s = h2f(sz & 0xffffu), z = h2f(sz >> 16);
    kc[desc(D_SCALES) + (u * p.n_kv_heads + h) * desc(D_GROUP) + t] = sz;
    for (uint w = 0u; w < D / cpw; w++) {
        uint word = 0u;
        for (uint j = 0u; j < cpw; j++) {
            const uint k = w * cpw + j;
            const float x = staged ? act[p.src + e0 + k] : reg_get(base, prec, e0 + k);
            word |= kivi_code(x, s, z, levels) << (j * bits);
        }
        kc[code_at(u, h, t, w)] = word;
    }
}

void main() {
    const uint i = gl_GlobalInvocationID.x + 65536u * gl_GlobalInvocationID.y;
    const uint H = p.n_kv_heads, D = p.head_dim, HD = H * D, prec = desc(D_PREC);
    const uint bits = desc(D_BITS), cpw = bits != 0u ? 32u / bits : 1u, G = desc(D_GROUP);
    const uint mask = bits != 0u ? (1u << bits) - 1u : 0u;
    const float levels = float(mask);
    if (p.mode <= 1u) {
        if (i >= HD / 2u) return;
        const uint base = p.mode == 0u ? desc(D_SINK) : desc(D_RING);
        const uint row = p.mode == 0u ? p.idx : p.idx % desc(D_RLEN);
        reg_put2(base, p.mode == 0u ? desc(D_SPREC) : prec, row * HD + 2u * i, act[p.src + 2u * i],
                 act[p.src + 2u * i + 1u]);
        return;
    }
    if (p.mode == 6u) {
        const uint S = p.idx, base = desc(D_SINK), per_ch = desc(D_PERCH);
        if (i >= (per_ch != 0u ? HD : H * S)) return;
        const uint h = per_ch != 0u ? i / D : i / S;
        /* a key channel: S values HD apart; a value row: D values */
        const uint e0 = per_ch != 0u ? h * D + i % D : ((i % S) * H + h) * D, stride = per_ch != 0u ? HD : 1u;
        const uint n = per_ch != 0u ? S : D;
        float lo = 1.0 / 0.0, hi = -1.0 / 0.0;
        for (uint j = 0u; j < n; j++) {
            const float x = uintBitsToFloat(kc[base + e0 + j * stride]);
            if (x < lo) lo = x;
            if (x > hi) hi = x;
        }
        if (lo > hi) lo = hi = 0.0;
        const uint sz = kivi_fit_slice(false, base, 0u, e0, stride, n, levels, lo, hi);
        const float s = h2f(sz & 0xffffu), z = h2f(sz >> 16);
        for (uint j = 0u; j < n; j++) {
            const uint at = base + e0 + j * stride;
            precise float v = float(kivi_code(uintBitsToFloat(kc[at]), s, z, levels)) * s + z;
            kc[at] = floatBitsToUint(v);
        }
        return;
    }
    const uint units = desc(D_UNITS);
    if (p.mode == 3u) {
        if (i >= H) return;
        quantize_row(true, 0u, 0u, i * D, (p.idx / G) % units, i, p.idx % G);
        return;
    }
    if (p.mode == 5u) {
        if (i >= H * G) return;
        const uint h = i / G, t = i % G, n = p.idx + t;
        quantize_row(false, desc(D_RING), prec, ((n % desc(D_RLEN)) * H + h) * D, (p.idx / G) % units, h, t);
        return;
    }
    const uint words = D / cpw;
    if (i >= H * words) return;
    const uint h = i / words, w = i % words, u = (p.idx / G) % units, sc0 = desc(D_SCALES) + (u * H + h) * D;
    if (p.mode == 4u) { /* a full group of the ring, per channel: the grids, then the rows' words */
        for (uint j = 0u; j < cpw; j++) {
            const uint k = w * cpw + j;
            float lo = 1.0 / 0.0, hi = -1.0 / 0.0;
            for (uint t = 0u; t < G; t++) {
                const float x = reg_get(desc(D_RING), prec, (((p.idx + t) % desc(D_RLEN)) * H + h) * D + k);
                if (x < lo) lo = x;
                if (x > hi) hi = x;
            }
            if (lo > hi) lo = hi = 0.0;
            /* the group's rows are contiguous in the ring (its length and idx are multiples of G) */
            const uint e0 = ((p.idx % desc(D_RLEN)) * H + h) * D + k;
            kc[sc0 + k] = kivi_fit_slice(false, desc(D_RING), prec, e0, HD, G, levels, lo, hi);
        }
        for (uint t = 0u; t < G; t++) {
            uint word = 0u;
            for (uint j = 0u; j < cpw; j++) {
                const uint k = w * cpw + j, sz = kc[sc0 + k];
                const float x = reg_get(desc(D_RING), prec, (((p.idx + t) % desc(D_RLEN)) * H + h) * D + k);
                word |= kivi_code(x, h2f(sz & 0xffffu), h2f(sz >> 16), levels) << (j * bits);
            }
            kc[code_at(u, h, t, w)] = word;
        }
        return;
    }
    if (p.mode == 7u) { /* one grid per channel over the rows held (G = their capacity, one unit) */
        const uint t = p.idx % G;
        uint word = 0u;
        for (uint j = 0u; j < cpw; j++) {
            const uint k = w * cpw + j, sh = j * bits, so_zo = kc[sc0 + k];
            const float so = h2f(so_zo & 0xffffu), zo = h2f(so_zo >> 16), x = act[p.src + h * D + k];
            uint umin = mask, umax = 0u;
            for (uint n = p.first; n < p.idx; n++) {
                const uint u = (kc[code_at(0u, h, n % G, w)] >> sh) & mask;
                umin = min(umin, u);
                umax = max(umax, u);
            }
            float lo = x, hi = x;
            if (p.idx > p.first) {
                precise float a = float(umin) * so + zo, b = float(umax) * so + zo;
                lo = a < lo ? a : lo;
                hi = b > hi ? b : hi;
            }
            const uint sz = kivi_fit(levels, lo, hi);
            const float sn = h2f(sz & 0xffffu), zn = h2f(sz >> 16);
            if (sz != so_zo) {
                for (uint n = p.first; n < p.idx; n++) {
                    const uint at = code_at(0u, h, n % G, w), old = kc[at];
                    precise float v = float((old >> sh) & mask) * so + zo;
                    kc[at] = (old & ~(mask << sh)) | (kivi_code(v, sn, zn, levels) << sh);
                }
                kc[sc0 + k] = sz;
            }
            word |= kivi_code(x, sn, zn, levels) << sh;
        }
        kc[code_at(0u, h, t, w)] = word;
        return;
    }
    /* mode 2: the provisional key of token idx, row t of its group */
    const uint t = p.idx % G;
    uint word = 0u;
    for (uint j = 0u; j < cpw; j++) {
        const uint k = w * cpw + j, sh = j * bits;
        const float x = act[p.src + h * D + k];
        uint sz;
        if (t == 0u) {
            sz = kivi_fit(levels, x, x);
        } else {
            sz = kc[sc0 + k];
            const float s = h2f(sz & 0xffffu), z = h2f(sz >> 16);
            precise float top = z + levels * s;
            if (x < z || x > top) { /* outside the span: widen, and re-code the group's earlier rows */
                sz = kivi_fit(levels, x < z ? x : z, x > top ? x : top);
                const float s1 = h2f(sz & 0xffffu), z1 = h2f(sz >> 16);
                for (uint r = 0u; r < t; r++) {
                    const uint at = code_at(u, h, r, w), old = kc[at];
                    precise float v = float((old >> sh) & mask) * s + z;
                    kc[at] = (old & ~(mask << sh)) | (kivi_code(v, s1, z1, levels) << sh);
                }
            }
        }
        kc[sc0 + k] = sz;
        const float s = h2f(sz & 0xffffu), z = h2f(sz >> 16);
        word |= kivi_code(x, s, z, levels) << sh;
    }
    kc[code_at(u, h, t, w)] = word;
}
