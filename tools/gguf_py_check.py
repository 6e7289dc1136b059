#!/usr/bin/python3
"""gguf_py_check.py — tinygpt's decoders against gguf-py's numpy dequantiser (gguf.quants, llama.cpp's own Python
reference) on every block of a GGUF file.

    tools/gguf_py_check.py GGUF_PY_DIR FILE DUMP_DIR [--sums OUT]

DUMP_DIR holds tinygpt's values (tools/gguf_dequant FILE DUMP_DIR: NAME.f32 per tensor). For every tensor: gguf-py's
values, compared bit for bit with tinygpt's (NaN equal to NaN), block by block. Prints one line per ggml type:
TYPE tensors blocks mismatched-blocks max-abs-diff; with --sums, writes "NAME TYPE sha256" of gguf-py's f32 values
(little-endian) per tensor to OUT (the fixture tests/cli/test_kquant_llamacpp.sh checks tinygpt's sums against).
Exit 1 when any block differs. Needs numpy (Debian's python3-numpy: run with /usr/bin/python3)."""
import hashlib
import os
import sys

import numpy as np


def main():
    args = sys.argv[1:]
    sums = None
    if "--sums" in args:
        i = args.index("--sums")
        sums = args[i + 1]
        del args[i:i + 2]
    if len(args) != 3:
        sys.exit(__doc__)
    sys.path.insert(0, args[0])
    from gguf import GGUFReader, quants
    from gguf.constants import GGML_QUANT_SIZES

    reader = GGUFReader(args[1])
    stats = {}
    lines = []
    bad = 0
    for t in reader.tensors:
        qtype = t.tensor_type
        ref = quants.dequantize(t.data, qtype).astype("<f4").reshape(-1)
        path = os.path.join(args[2], t.name + ".f32")
        ours = np.fromfile(path, dtype="<f4")
        elems = GGML_QUANT_SIZES[qtype][0]
        name = qtype.name
        s = stats.setdefault(name, [0, 0, 0, 0.0])
        s[0] += 1
        if ours.size != ref.size:
            print("%s: %s has %d values, gguf-py %d" % (args[1], t.name, ours.size, ref.size))
            bad += 1
            continue
        same = (ours.view("<u4") == ref.view("<u4")) | (np.isnan(ours) & np.isnan(ref))
        blocks = same.reshape(-1, elems).all(axis=1)
        s[1] += blocks.size
        s[2] += int((~blocks).sum())
        finite = np.isfinite(ours) & np.isfinite(ref)
        if finite.any():
            s[3] = max(s[3], float(np.max(np.abs(ours[finite].astype(np.float64) - ref[finite]))))
        if not blocks.all():
            bad += 1
        lines.append("%s %s %s" % (t.name, name, hashlib.sha256(ref.tobytes()).hexdigest()))
    for name, (n, blocks, mism, diff) in sorted(stats.items()):
        print("%-7s %3d tensors %9d blocks %6d differ  max |diff| %.3g" % (name, n, blocks, mism, diff))
    if sums:
        with open(sums, "w") as f:
            f.write("\n".join(lines) + "\n")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
