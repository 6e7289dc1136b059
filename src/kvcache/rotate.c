/* rotate.c — the per-head Walsh–Hadamard rotation of a KIVI cache (rotate.h): signs, the transform and its inverse.
 * Plain C: one transform per head per token is a few hundred additions, small beside the token's attention, so no
 * SIMD kernel sits beside it. */
#include "kvcache/rotate.h"

#include <math.h>

int tg_rot_block(int head_dim) { return head_dim > 0 ? head_dim & -head_dim : 0; }

void tg_fwht_ref(float *x, int n) {
    for (int len = 1; len < n; len *= 2)
        for (int i = 0; i < n; i += 2 * len)
            for (int j = i; j < i + len; j++) {
                const float a = x[j], b = x[j + len];
                x[j] = a + b;
                x[j + len] = a - b;
            }
}

/* splitmix64: the signs' bits from the layer and kv-head (no state kept anywhere) */
static uint64_t mix(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void tg_rot_signs(float *sign, int layer, int kv_head, int head_dim) {
    const float mag = (float)(1.0 / sqrt((double)tg_rot_block(head_dim)));
    uint64_t bits = 0;
    for (int i = 0; i < head_dim; i++) {
        if (i % 64 == 0) bits = mix(((uint64_t)(uint32_t)layer << 40) ^ ((uint64_t)(uint32_t)kv_head << 20) ^
                                    (uint64_t)(i / 64));
        sign[i] = (bits >> (i % 64)) & 1 ? -mag : mag;
    }
}

void tg_rot_apply(float *x, const float *sign, int head_dim) {
    const int b = tg_rot_block(head_dim);
    for (int i = 0; i < head_dim; i++) x[i] *= sign[i];
    for (int i = 0; i < head_dim; i += b) tg_fwht_ref(x + i, b);
}

void tg_rot_inverse(float *x, const float *sign, int head_dim) {
    const int b = tg_rot_block(head_dim);
    for (int i = 0; i < head_dim; i += b) tg_fwht_ref(x + i, b);
    for (int i = 0; i < head_dim; i++) x[i] *= sign[i];
}
