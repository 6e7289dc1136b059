#!/usr/bin/env python3
"""Builds tests/data/yoco-tiny/: a tiny random YOCO model (issue #7, docs/yoco.md) with reference outputs from the
plain-PyTorch implementation in tools/yoco_ref.py (NaiveYoco), for tests/unit/test_yoco.c.

Responsibility: random weights (seeded) -> Hugging Face folder (config.json with "kv_source", fp32 safetensors
without k/v projections for the sharing layers, the smollm2 fixture's tokenizer) -> model-f32.gguf and
model-f16.gguf via tools/export_gguf.py -> golden.json + logits.f32: NaiveYoco's logits at every position of a
40-token prompt (computed in float64, stored as float32) and its greedy continuation (float64, with the smallest
top-1/top-2 logit gap on the way, so a test knows how safe an exact match is).

The weights are reloaded from the written safetensors before anything is computed, so the goldens describe the file.
Runs on a CPU in seconds (needs torch and numpy: Debian's python3-torch is enough).
Usage: tools/make_yoco_fixture.py [--out tests/data/yoco-tiny]
"""
import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import export_gguf  # noqa: E402
import yoco_ref  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TOKENIZER_FROM = ROOT / "tests/data/fixtures/smollm2"
SHAPE = {"layers": 4, "hidden": 64, "heads": 4, "kv_heads": 2, "inter": 128, "ctx": 128, "theta": 10000.0,
         "eps": 1e-5}
VOCAB = 1024
SEED = 7
INIT_STD = 0.08
N_GREEDY = 32


@torch.no_grad()
def greedy(model, prompt, n):
    """n argmax steps recomputing the whole sequence each time; returns (ids, smallest top-1/top-2 gap)."""
    seq, gap = list(prompt), float("inf")
    for _ in range(n):
        logits = model(input_ids=torch.tensor([seq])).logits[0, -1]
        top = torch.topk(logits, 2)
        gap = min(gap, float(top.values[0] - top.values[1]))
        seq.append(int(top.indices[0]))
    return seq[len(prompt):], gap


def main():
    ap = argparse.ArgumentParser(description="Build the tiny YOCO test model and its reference outputs.")
    ap.add_argument("--out", default=str(ROOT / "tests/data/yoco-tiny"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    kv_source = yoco_ref.kv_source_for(SHAPE["layers"])
    cfg = yoco_ref.hf_config(SHAPE, VOCAB, kv_source, bos_id=0, eos_id=0)
    model = yoco_ref.NaiveYoco(cfg, init_std=INIT_STD, seed=SEED)
    with torch.no_grad():  # norms away from 1 so a mixed-up norm shows
        gen = torch.Generator().manual_seed(SEED + 1)
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.copy_(1.0 + 0.3 * (torch.rand(p.shape, generator=gen) * 2 - 1))
    names = yoco_ref.save_hf_folder(model, cfg, out)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(TOKENIZER_FROM / f, out / f)
    gguf = {}
    for kind in ("f32", "f16"):
        export_gguf.export(out, out / f"model-{kind}.gguf", kind, name="yoco-tiny")
        gguf[f"model-{kind}.gguf"] = f"tools/export_gguf.py --outtype {kind}"

    ref = yoco_ref.NaiveYoco(cfg)
    yoco_ref.load_weights(ref, yoco_ref.read_safetensors_f32(out / "model.safetensors"))
    ref = ref.double().eval()
    prompt = json.loads((TOKENIZER_FROM / "golden.json").read_text())["prompt_ids"][:40]
    with torch.no_grad():
        logits = ref(input_ids=torch.tensor([prompt])).logits[0].float().numpy()
    logits.astype("<f4").tofile(out / "logits.f32")
    cont, gap = greedy(ref, prompt, N_GREEDY)
    golden = {
        "model": "yoco-tiny: random weights (normal, std %g, seed %d; norms 1 +- 0.3), tied embeddings" % (INIT_STD,
                                                                                                       SEED),
        "kv_source": kv_source,
        "tensors": names,
        "prompt_ids": prompt,
        "logits_file": "logits.f32",
        "logits_shape": [len(prompt), VOCAB],
        "logits_dtype": "float32 little-endian, computed in float64 by tools/yoco_ref.py NaiveYoco",
        "greedy_prompt_ids": prompt,
        "greedy_continuation": cont,
        "greedy_min_top2_gap": round(gap, 6),
        "gguf_files": gguf,
        "versions": {"torch": torch.__version__, "numpy": np.__version__},
        "notes": "Built by tools/make_yoco_fixture.py. The prompt is the smollm2 fixture's first 40 ids; the "
                 "tokenizer files are that fixture's.",
    }
    (out / "golden.json").write_text(json.dumps(golden, indent=1) + "\n")
    print(f"make_yoco_fixture: wrote {out} (kv_source {kv_source}, greedy min gap {gap:.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
