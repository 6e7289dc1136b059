#!/usr/bin/env python3
"""kquant_refs.py — the reference fixture for tinygpt's GGUF block decoders (tests/unit/test_ggml_blocks.c).

For every block type tinygpt reads beyond Q8_0/Q4_0 it writes random but valid blocks (random bytes for the codes
and sub-block scales, finite fp16 d / dmin of either sign spanning normal and subnormal magnitudes, some zero) and
gguf-py's numpy dequantisation of them (gguf.quants.dequantize, llama.cpp's own Python reference), to
tests/data/kquant/NAME.bin:

    char magic[4] = "TGKQ"; u32 ggml_type; u32 n_blocks; u32 block_elems; u32 block_bytes;
    u8 blocks[n_blocks * block_bytes]; f32 values[n_blocks * block_elems]        (all little-endian)

Usage: tools/kquant_refs.py GGUF_PY_DIR [OUT_DIR]   (GGUF_PY_DIR: the gguf-py folder of a llama.cpp checkout, e.g.
the one in node-llama-cpp@3.21.1's llama/gitRelease.bundle). Deterministic (fixed seed)."""
import os
import struct
import sys

import numpy as np

# name: (ggml type, block elements, block bytes, byte offsets of the fp16 scale fields, blocks written)
TYPES = {
    "Q4_1": (3, 32, 20, (0, 2), 384),
    "Q5_0": (6, 32, 22, (0,), 384),
    "Q5_1": (7, 32, 24, (0, 2), 384),
    "Q2_K": (10, 256, 84, (80, 82), 96),
    "Q3_K": (11, 256, 110, (108,), 96),
    "Q4_K": (12, 256, 144, (0, 2), 96),
    "Q5_K": (13, 256, 176, (0, 2), 96),
    "Q6_K": (14, 256, 210, (208,), 96),
    "IQ4_NL": (20, 32, 18, (0,), 384),
}


def random_f16(rng, n):
    """n finite fp16 values: magnitudes 2^-24 .. 2^4 (subnormals included), either sign, one in 16 zero."""
    mag = np.exp2(rng.uniform(-24.0, 4.0, n)).astype(np.float32)
    v = (mag * rng.choice([-1.0, 1.0], n)).astype(np.float16)
    v[rng.integers(0, 16, n) == 0] = 0
    assert np.all(np.isfinite(v))
    return v


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    sys.path.insert(0, sys.argv[1])
    from gguf import quants
    from gguf.constants import GGMLQuantizationType

    out_dir = sys.argv[2] if len(sys.argv) == 3 else os.path.join(os.path.dirname(__file__), "..", "tests", "data",
                                                                  "kquant")
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(20261201)
    for name, (ggml, elems, nbytes, scale_offsets, nblocks) in TYPES.items():
        blocks = rng.integers(0, 256, (nblocks, nbytes), dtype=np.uint8)
        for off in scale_offsets:
            blocks[:, off:off + 2] = random_f16(rng, nblocks).view(np.uint8).reshape(nblocks, 2)
        values = quants.dequantize(blocks, GGMLQuantizationType(ggml)).astype(np.float32).reshape(-1)
        assert values.size == nblocks * elems and np.all(np.isfinite(values))
        with open(os.path.join(out_dir, name + ".bin"), "wb") as f:
            f.write(b"TGKQ" + struct.pack("<4I", ggml, nblocks, elems, nbytes))
            f.write(blocks.tobytes())
            f.write(values.astype("<f4").tobytes())
        print(f"{name}: {nblocks} blocks, {values.size} values")


if __name__ == "__main__":
    main()
