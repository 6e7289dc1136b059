#!/usr/bin/env python3
"""Builds tiny random-weight Qwen2, Qwen3, Gemma 2, Gemma 3, Phi-3 and SmolLM3 folders with transformers' own outputs
as goldens (issue #50), for tests/unit/test_families.c, and (--gguf) converts each with llama.cpp's
convert_hf_to_gguf.py.

Responsibility: for each family, a transformers config of a tiny shape (hidden 64, vocab 1024: the smollm2
fixture's tokenizer), a model built by transformers with a fixed seed, its weights moved off their defaults where a
default would hide a mistake (norm weights 1 +- 0.3 -- Gemma's, which scale by 1 + w, +- 0.3 around 0 --, q/k/v
biases and q/k norm weights random: transformers initialises biases to 0 and norms to 1 or 0), rounded to fp16 and
written by save_pretrained (fp16 safetensors: half the bytes, and every value exact in fp32), reloaded from the
folder in fp32, then run by transformers in fp32 (eager attention, CPU) for:
  logits.f32  [T, V] float32 of the smollm2 fixture's 40-token prompt, every position;
  golden.json the prompt, per-token NLL (nll[i] = -log p(prompt[i + 1] | prompt[.. i])), and a 32-token greedy
              continuation of the greedy prompt with each step's top-1/top-2 logit margin.
Qwen2's config keeps use_sliding_window false (its sliding_window must then be ignored); Qwen3's head_dim (32)
differs from hidden / heads (16) and its embeddings are untied. Gemma 2 / 3: window 8 on the sliding layers (the
prompt is 40 tokens), query_pre_attn_scalar = head_dim (llama.cpp scales by head_dim), Gemma 2's soft-caps small
enough to bite, Gemma 3's local base 10000 and linear scaling 2 on the global layers, six layers with the real models'
pattern (five sliding, then one full: llama.cpp's converter does not write layer_types and takes that default).
Phi-3: partial rotary 0.5, LongRoPE factors, original context 512 of 1024 (attention factor sqrt(1 + ln 2 / ln 512);
transformers and llama.cpp with its 512-token context both take the short factors for the prompts), and
logits-long.f32: transformers past the original context, one token a call, where it takes the long factors.
SmolLM3: 4 layers, the 4th without RoPE (llama.cpp's fixed step).
Needs torch and transformers 5.x (the GPU machine has them; a CPU is enough).
Usage: tools/make_family_fixtures.py --out DIR [--tar] [--only NAME ...]
         (--tar: one DIR/<name>.tar per folder instead of folders)
       CONVERT_HF_TO_GGUF=/path/to/llama.cpp/convert_hf_to_gguf.py tools/make_family_fixtures.py --gguf --out DIR
         (after the first step: DIR/<name>/model-llamacpp-f16.gguf from each folder, listed in its golden.json's
         gguf_files; llama.cpp's gguf-py must be importable: PYTHONPATH=/path/to/llama.cpp/gguf-py)
"""
import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import torch
import transformers

ROOT = Path(__file__).resolve().parent.parent
TOKENIZER_FROM = ROOT / "tests/data/fixtures/smollm2"
VOCAB = 1024
SEED = 50
INIT_STD = 0.08
N_GREEDY = 32

FAMILIES = {
    "qwen2-tiny": ("Qwen2Config", "Qwen2ForCausalLM", dict(
        hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=128, rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
        use_sliding_window=False, sliding_window=16, max_window_layers=2)),
    "qwen3-tiny": ("Qwen3Config", "Qwen3ForCausalLM", dict(
        hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
        head_dim=32, max_position_embeddings=128, rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=False,
        use_sliding_window=False, sliding_window=None, attention_bias=False)),
    "gemma2-tiny": ("Gemma2Config", "Gemma2ForCausalLM", dict(
        hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, query_pre_attn_scalar=16, max_position_embeddings=128, rope_theta=1000000.0, rms_norm_eps=1e-6,
        tie_word_embeddings=True, sliding_window=8, attn_logit_softcapping=1.5, final_logit_softcapping=4.0,
        hidden_activation="gelu_pytorch_tanh", layer_types=["sliding_attention", "full_attention",
                                                            "sliding_attention"])),
    "gemma3-tiny": ("Gemma3TextConfig", "Gemma3ForCausalLM", dict(
        hidden_size=64, intermediate_size=96, num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, query_pre_attn_scalar=16, max_position_embeddings=128, rms_norm_eps=1e-6,
        tie_word_embeddings=True, sliding_window=8, hidden_activation="gelu_pytorch_tanh",
        layer_types=["sliding_attention"] * 5 + ["full_attention"],
        rope_parameters={"full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1000000.0},
                         "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}})),
    "phi3-tiny": ("Phi3Config", "Phi3ForCausalLM", dict(
        hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=1024, original_max_position_embeddings=512, rope_theta=10000.0, rms_norm_eps=1e-6,
        tie_word_embeddings=False, partial_rotary_factor=0.5, sliding_window=None, pad_token_id=0,
        rope_scaling={"rope_type": "longrope", "short_factor": [1.0, 1.5, 2.0, 3.0],
                      "long_factor": [2.0, 4.0, 8.0, 16.0]})),
    "smollm3-tiny": ("SmolLM3Config", "SmolLM3ForCausalLM", dict(
        hidden_size=64, intermediate_size=96, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=128, rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
        no_rope_layers=[1, 1, 1, 0], no_rope_layer_interval=4, use_sliding_window=False, sliding_window=None,
        pad_token_id=0)),
}
GEMMA = ("gemma2-tiny", "gemma3-tiny")
# Families whose golden.json also holds a sequence past the original context fed as transformers generates (LongRoPE:
# the first LONG_SPLIT ids in one call, then one id a call), and the logits of those single steps.
LONG = {"phi3-tiny": 512}
N_LONG = 16


@torch.no_grad()
def greedy(model, prompt, n):
    """n argmax steps recomputing the whole sequence each time; returns (ids, each step's top-1/top-2 margin)."""
    seq, margins = list(prompt), []
    for _ in range(n):
        logits = model(input_ids=torch.tensor([seq])).logits[0, -1]
        top = torch.topk(logits, 2)
        margins.append(round(float(top.values[0] - top.values[1]), 6))
        seq.append(int(top.indices[0]))
    return seq[len(prompt):], margins


@torch.no_grad()
def long_steps(model, out, split):
    """split random ids in one call, then N_LONG more one call each (transformers' own cache): the logits of those
    steps in logits-long.f32 [N_LONG, V]; the golden.json keys that name them."""
    gen = torch.Generator().manual_seed(SEED + 2)
    ids = [int(x) for x in torch.randint(1, VOCAB, (split + N_LONG,), generator=gen)]
    res = model(input_ids=torch.tensor([ids[:split]]), use_cache=True)
    cache, rows = res.past_key_values, []
    for i in range(split, split + N_LONG):
        res = model(input_ids=torch.tensor([[ids[i]]]), past_key_values=cache, use_cache=True)
        cache = res.past_key_values
        rows.append(res.logits[0, -1].float())
    torch.stack(rows).numpy().astype("<f4").tofile(out / "logits-long.f32")
    return {"long_ids": ids, "long_split": split, "long_logits_file": "logits-long.f32",
            "long_logits_note": "ids[:long_split] in one call, then one id a call with transformers' cache; the "
                                "logits of each single step, [len(ids) - long_split, V]"}


def build(name, out):
    cfg_cls, model_cls, shape = FAMILIES[name]
    fixture = json.loads((TOKENIZER_FROM / "golden.json").read_text())
    cfg = getattr(transformers, cfg_cls)(vocab_size=VOCAB, bos_token_id=0, eos_token_id=0, initializer_range=INIT_STD,
                                         **shape)
    torch.manual_seed(SEED)
    model = getattr(transformers, model_cls)(cfg).float().eval()
    gen = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            if pname.endswith("norm.weight"):
                p.copy_((0.0 if name in GEMMA else 1.0) + 0.3 * (torch.rand(p.shape, generator=gen) * 2 - 1))
            elif pname.endswith(".bias"):
                p.copy_(0.2 * torch.randn(p.shape, generator=gen))
    out.mkdir(parents=True, exist_ok=True)
    model.half().save_pretrained(out, safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(TOKENIZER_FROM / f, out / f)
    if name == "phi3-tiny":  # llama.cpp's Phi-3 converter reads a BPE tokenizer.json only for a GPT2Tokenizer class
        tc = json.loads((out / "tokenizer_config.json").read_text())
        tc["tokenizer_class"] = "GPT2Tokenizer"
        (out / "tokenizer_config.json").write_text(json.dumps(tc, indent=2) + "\n")
    ref = getattr(transformers, model_cls).from_pretrained(out, attn_implementation="eager",
                                                             dtype=torch.float32).eval()
    prompt = fixture["prompt_ids"]
    with torch.no_grad():
        logits = ref(input_ids=torch.tensor([prompt])).logits[0].float()
    logits.numpy().astype("<f4").tofile(out / "logits.f32")
    logp = torch.log_softmax(logits.double(), dim=-1)
    nll = [round(-float(logp[i, prompt[i + 1]]), 7) for i in range(len(prompt) - 1)]
    gprompt = fixture["greedy_prompt_ids"]
    cont, margins = greedy(ref, gprompt, N_GREEDY)
    long_golden = long_steps(ref, out, LONG[name]) if name in LONG else {}
    golden = {
        "model": "%s: %s random weights (normal, std %g, seed %d; norms 1 +- 0.3, Gemma's 0 +- 0.3; biases normal "
                 "std 0.2), saved in fp16" % (name, model_cls, INIT_STD, SEED),
        "tensors": sorted(n for n, _ in ref.named_parameters()),
        "prompt_ids": prompt,
        "logits_file": "logits.f32",
        "logits_shape": [len(prompt), VOCAB],
        "logits_dtype": "float32 little-endian, row-major [T, V], transformers fp32 CPU eager attention",
        "nll": nll,
        "mean_nll": round(sum(nll) / len(nll), 7),
        "greedy_prompt_ids": gprompt,
        "greedy_continuation": cont,
        "greedy_margins": margins,
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "gguf_files": {},
        **long_golden,
        "notes": "Built by tools/make_family_fixtures.py. The prompts and tokenizer files are the smollm2 fixture's.",
    }
    (out / "golden.json").write_text(json.dumps(golden, indent=1) + "\n")
    print(f"{name}: mean nll {golden['mean_nll']:.5f}, greedy min margin {min(margins):.4f}", flush=True)


def convert(folder):
    """folder/model-llamacpp-f16.gguf by llama.cpp's converter ($CONVERT_HF_TO_GGUF), listed in golden.json."""
    script = os.environ.get("CONVERT_HF_TO_GGUF")
    if not script:
        sys.exit("--gguf needs CONVERT_HF_TO_GGUF=/path/to/llama.cpp/convert_hf_to_gguf.py")
    if folder.name == "gemma2-tiny" and not (folder / "tokenizer.model").is_file():
        # llama.cpp's Gemma2Model reads only a SentencePiece tokenizer.model; the fixtures share a BPE tokenizer.json
        print(f"{folder.name}: skipped (llama.cpp converts Gemma 2 only with a SentencePiece tokenizer.model)")
        return
    out = folder / "model-llamacpp-f16.gguf"
    subprocess.run([sys.executable, script, str(folder), "--outtype", "f16", "--outfile", str(out)], check=True)
    golden = json.loads((folder / "golden.json").read_text())
    golden.setdefault("gguf_files", {})[out.name] = "llama.cpp convert_hf_to_gguf.py --outtype f16 (%s)" % script
    (folder / "golden.json").write_text(json.dumps(golden, indent=1) + "\n")
    print(f"{folder.name}: {out.name}", flush=True)


def main():
    ap = argparse.ArgumentParser(description="Build the tiny family fixtures with transformers' goldens.")
    ap.add_argument("--out", required=True)
    ap.add_argument("--tar", action="store_true")
    ap.add_argument("--gguf", action="store_true", help="convert the folders already in --out with llama.cpp")
    ap.add_argument("--only", nargs="*", help="only these families")
    args = ap.parse_args()
    out = Path(args.out)
    names = args.only or list(FAMILIES)
    if args.gguf:
        for name in names:
            convert(out / name)
        return 0
    print("torch", torch.__version__, "transformers", transformers.__version__, flush=True)
    for name in names:
        if not args.tar:
            build(name, out / name)
            continue
        with tempfile.TemporaryDirectory() as tmp:
            build(name, Path(tmp) / name)
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as tf:
                tf.add(Path(tmp) / name, arcname=name)
            (out / f"{name}.tar").write_bytes(buf.getvalue())
    return 0


if __name__ == "__main__":
    sys.exit(main())
