/* rotate.h — internal to src/kvcache: the per-head rotation of a KIVI cache (issue #51). Each kv-head's keys (after
 * RoPE) and values are multiplied by a fixed orthogonal R = H diag(s) / sqrt(b) before they are quantised: H the
 * Walsh–Hadamard matrix of order b applied to each block of b consecutive channels (b the largest power of two that
 * divides head_dim, so a head of 64 is one block, a head of 96 three of 32), s fixed pseudo-random signs of the
 * layer and kv-head. A channel with outliers is spread over the b channels of its block, so the per-channel key
 * grids and per-token value grids fit the bell-shaped rotated values. The query is rotated by the same R, so every
 * score q.k = (Rq).(Rk) is unchanged; the attention output sum p v is read back once per head as R^T (sum p Rv). O(b
 * log b) per block, outside the attention kernels: they see rotated rows and a rotated query like any others. */
#ifndef TG_KVCACHE_ROTATE_H
#define TG_KVCACHE_ROTATE_H

#include <stdint.h>

/* The Walsh–Hadamard block of a head of head_dim channels: its largest power-of-two divisor (0 for head_dim <= 0). */
int tg_rot_block(int head_dim);
/* The plain in-place fast Walsh–Hadamard transform of x[n] (n a power of two), unnormalised: x <- H_n x. */
void tg_fwht_ref(float *x, int n);
/* sign[head_dim]: the signs s of (layer, kv_head), already divided by sqrt(block): +-1/sqrt(b). Deterministic. */
void tg_rot_signs(float *sign, int layer, int kv_head, int head_dim);
/* x[head_dim] <- R x (sign from tg_rot_signs). */
void tg_rot_apply(float *x, const float *sign, int head_dim);
/* x[head_dim] <- R^T x, the inverse of tg_rot_apply (up to rounding). */
void tg_rot_inverse(float *x, const float *sign, int head_dim);

#endif
