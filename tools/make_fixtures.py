#!/usr/bin/env python3
"""Builds tinygpt's three tiny reference models and their golden outputs (runs on the GPU machine).

Responsibility: for each fixture in FIXTURES, train a tokenizer and a tiny Llama-family model briefly on the corpus,
save it as a Hugging Face folder (float32 safetensors, tokenizer.json, tokenizer_config.json,
generation_config.json), compute golden data with transformers in fp32 on the CPU (eager attention), and convert it
to GGUF with llama.cpp's convert_hf_to_gguf.py (falling back to tools/export_gguf.py where the converter refuses).

  llama-spm   LlamaForCausalLM, GQA 4/2 heads, Llama-2 legacy SentencePiece-style BPE (byte fallback), add_bos;
              config.json uses the old top-level "rope_theta" spelling.
  smollm2     LlamaForCausalLM with tied embeddings, byte-level BPE (GPT-2 regex), no BOS.
  mistral-sw  MistralForCausalLM, sliding_window 16 (< the 40-token golden prompt), Metaspace pre-tokenizer
              (prepend_scheme "first"); config.json uses the newer "rope_parameters" spelling.

Output per fixture, in OUT/<name>/: the HF files, golden.json, logits.f32 (raw little-endian float32 [T, V]) and
*.gguf. golden.json keys: prompt_ids, logits_file, logits_shape, greedy_prompt_ids, greedy_continuation,
tokenization [{text, ids, decoded}], gguf_files {file: which tool made it}, and notes.

Usage: tools/make_fixtures.py --corpus DIR --out DIR --converter DIR [--seconds S] [--only NAME ...]
"""
import argparse
import copy
import inspect
import json
import subprocess
import sys
import traceback
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer
from transformers import (AutoModelForCausalLM, AutoTokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM,
                          MistralConfig, MistralForCausalLM)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import export_gguf  # noqa: E402
import lm_common  # noqa: E402

FIXTURES = {
    "llama-spm": dict(arch="llama", tok="legacy", vocab=1000, hidden=64, heads=4, kv_heads=2, layers=3,
                      inter=192, tied=False, theta=10000.0, eps=1e-6, rope_spelling="rope_theta", q8_0=True,
                      special_text="Hello <s> world</s> again"),
    "smollm2": dict(arch="llama", tok="bytelevel", vocab=1024, hidden=64, heads=4, kv_heads=2, layers=3,
                    inter=172, tied=True, theta=100000.0, eps=1e-5, rope_spelling="rope_theta", q8_0=False,
                    special_text="<|im_start|>user\nHi there<|im_end|>\n"),
    "mistral-sw": dict(arch="mistral", tok="metaspace", vocab=960, hidden=64, heads=4, kv_heads=2, layers=2,
                       inter=172, tied=False, theta=1000000.0, eps=1e-5, rope_spelling="rope_parameters",
                       q8_0=False, sliding_window=16, special_text="Hello <s> world</s> again"),
}
MAX_POS = 256
TRAIN_SEQ = 128
PROMPT_LEN = 40
GREEDY_NEW = 48
PROMPT_TEXT = ("It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in "
               "want of a wife. However little known the feelings or views of such a man may be on his first "
               "entering a neighbourhood, this truth is so well fixed in the minds of the surrounding families.")
GREEDY_TEXT = "The LORD is my shepherd; I shall not"


def log(*a):
    print("[fixtures]", *a, flush=True)


def rope_kwargs(config_cls, theta):
    """RoPE base in whichever spelling this transformers' config class takes."""
    if "rope_parameters" in inspect.signature(config_cls.__init__).parameters:
        return {"rope_parameters": {"rope_type": "default", "rope_theta": theta}}
    return {"rope_theta": theta}


def build_model(spec, tok, family):
    """A freshly initialised tiny model of the fixture's shape."""
    if family == "spm":
        ids = dict(bos_token_id=1, eos_token_id=2, pad_token_id=None)
    else:
        ids = dict(bos_token_id=0, eos_token_id=0, pad_token_id=None)
    cls, model_cls = (MistralConfig, MistralForCausalLM) if spec["arch"] == "mistral" else (LlamaConfig,
                                                                                            LlamaForCausalLM)
    kw = dict(vocab_size=tok.get_vocab_size(), hidden_size=spec["hidden"], intermediate_size=spec["inter"],
              num_hidden_layers=spec["layers"], num_attention_heads=spec["heads"],
              num_key_value_heads=spec["kv_heads"], max_position_embeddings=MAX_POS, rms_norm_eps=spec["eps"],
              tie_word_embeddings=spec["tied"], hidden_act="silu", initializer_range=0.05, **ids,
              **rope_kwargs(cls, spec["theta"]))
    if spec["arch"] == "mistral":
        kw["sliding_window"] = spec["sliding_window"]
        kw["head_dim"] = spec["hidden"] // spec["heads"]
    else:
        kw["attention_bias"] = False
        kw["mlp_bias"] = False
    config = cls(**kw)
    torch.manual_seed(1234)
    return model_cls(config)


def train(model, stream, seconds, device):
    """Trains for about `seconds` (AdamW, warm-up then cosine over the time budget); returns (steps, last loss)."""
    model.to(device).train()
    batches = lm_common.Batches(stream, TRAIN_SEQ, 64, device, seed=7)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.01)
    clock = lm_common.Timer()
    step, ema = 0, None
    while clock() < seconds:
        frac = min(1.0, clock() / seconds)
        lr = 3e-3 * min(1.0, (step + 1) / 50) * (0.1 + 0.9 * 0.5 * (1 + np.cos(np.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = batches.next()
        logits = model(input_ids=x).logits
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 50 == 0:
            v = loss.item()
            ema = v if ema is None else 0.8 * ema + 0.2 * v
    return step, (ema if ema is not None else loss.item())


def respell_rope(out_dir, spelling, probe_ids, reference_logits):
    """Rewrites config.json's RoPE base into `spelling` ("rope_theta" top-level or "rope_parameters") and checks
    that transformers still loads identical logits; restores the original file if not. Returns a note."""
    path = out_dir / "config.json"
    original = path.read_text()
    cfg = json.loads(original)
    params = cfg.get("rope_parameters") or {}
    theta = params.get("rope_theta", cfg.get("rope_theta"))
    if spelling == "rope_theta":
        cfg.pop("rope_parameters", None)
        cfg["rope_theta"] = theta
    else:
        cfg.pop("rope_theta", None)
        cfg["rope_parameters"] = {"rope_type": "default", "rope_theta": theta}
    if json.dumps(cfg, sort_keys=True) == json.dumps(json.loads(original), sort_keys=True):
        return f"config.json already uses {spelling} (rope_theta {theta})"
    path.write_text(json.dumps(cfg, indent=2) + "\n")
    try:
        logits = golden_logits(out_dir, probe_ids)
        same = torch.equal(logits, reference_logits)
    except Exception as e:  # noqa: BLE001 - any load failure means the spelling is not accepted
        same = False
        log(f"reload with {spelling} failed: {e}")
    if not same:
        path.write_text(original)
        return f"transformers did not load the {spelling} spelling identically; kept its own config.json"
    return f"config.json rewritten to the {spelling} spelling (rope_theta {theta}); reload gives identical logits"


def sliding_window_check(out_dir, ids, windowed, w):
    """How much the logits change when the same weights run with full attention: zero before position w (the
    window covers everything there), non-zero after it if transformers applies the window."""
    try:
        model = load_eager(out_dir)
        model.config.sliding_window = None
        with torch.no_grad():
            full = model(input_ids=torch.tensor([ids])).logits[0].float()
    except Exception as e:  # noqa: BLE001 - the check is informative only
        return f"sliding window check failed: {e}"
    d_in = float((full[:w] - windowed[:w]).abs().max())
    d_out = float((full[w:] - windowed[w:]).abs().max())
    note = (f"sliding window check: max |logit diff| vs full attention = {d_in:.3g} at positions < {w}, "
            f"{d_out:.3g} at positions >= {w}")
    return note + ("; WARNING: the window had no effect" if d_out == 0.0 else "")


def load_eager(out_dir, **overrides):
    model = AutoModelForCausalLM.from_pretrained(out_dir, dtype=torch.float32, attn_implementation="eager",
                                                 **overrides)
    return model.eval()


def golden_logits(out_dir, ids, **overrides):
    model = load_eager(out_dir, **overrides)
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0].float()


def greedy(model, ids, n, eos_id):
    """generate(do_sample=False) and a plain argmax loop (full recompute per token); both must agree."""
    with torch.no_grad():
        inp = torch.tensor([ids])
        out = model.generate(input_ids=inp, attention_mask=torch.ones_like(inp), max_new_tokens=n, do_sample=False,
                             pad_token_id=eos_id)
        gen = out[0, len(ids):].tolist()
        seq = list(ids)
        manual = []
        for _ in range(len(gen)):
            nxt = int(model(input_ids=torch.tensor([seq])).logits[0, -1].argmax())
            manual.append(nxt)
            seq.append(nxt)
    return gen, manual


def run_converter(converter_dir, hf_dir, outfile, outtype):
    """llama.cpp's convert_hf_to_gguf.py; returns (ok, last lines of its output)."""
    cmd = [sys.executable, str(Path(converter_dir) / "convert_hf_to_gguf.py"), str(hf_dir), "--outtype", outtype,
           "--outfile", str(outfile)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-6:])
    return r.returncode == 0 and outfile.is_file(), tail


def compare_gguf(converter_dir, ours, theirs):
    """Tensor-by-tensor comparison of two GGUF files with gguf-py's reader; returns a one-line verdict."""
    sys.path.insert(0, str(Path(converter_dir) / "gguf-py"))
    import gguf  # noqa: E402
    a, b = gguf.GGUFReader(str(ours)), gguf.GGUFReader(str(theirs))
    ta = {t.name: t for t in a.tensors}
    tb = {t.name: t for t in b.tensors}
    if set(ta) != set(tb):
        return f"tensor names differ: {sorted(set(ta) ^ set(tb))}"
    bad = []
    for name in ta:
        x, y = ta[name], tb[name]
        if list(x.shape) != list(y.shape) or x.tensor_type != y.tensor_type or \
                x.data.tobytes() != y.data.tobytes():
            bad.append(name)
    if bad:
        return f"{len(bad)} of {len(ta)} tensors differ: {bad[:6]}"
    return f"all {len(ta)} tensors identical (names, shapes, types, bytes)"


def make_fixture(name, spec, corpus, out_root, converter_dir, seconds, device):
    out = out_root / name
    out.mkdir(parents=True, exist_ok=True)
    family = "bytelevel" if spec["tok"] == "bytelevel" else "spm"
    texts = [t for _, t in corpus]
    clock = lm_common.Timer()
    if family == "spm":
        tok = lm_common.train_spm_style(texts, spec["vocab"], spec["tok"])
    else:
        tok = lm_common.train_byte_level(texts, spec["vocab"])
    lm_common.save_tokenizer(tok, out, family, MAX_POS)
    log(f"{name}: tokenizer {tok.get_vocab_size()} ids in {clock():.1f}s")
    if family == "spm":
        stream = lm_common.encode_documents(tok, texts, sep_ids=[2], prefix_ids=[1])
    else:
        stream = lm_common.encode_documents(tok, texts, sep_ids=[0])
    model = build_model(spec, tok, family)
    steps, loss = train(model, stream, seconds, device)
    log(f"{name}: {stream.size} training tokens, {steps} steps, loss {loss:.3f}, {clock():.1f}s")
    model.to("cpu").float()
    lm_common.save_model(model, out)
    eos = 2 if family == "spm" else 0
    bos = 1 if family == "spm" else 0
    GenerationConfig(bos_token_id=bos, eos_token_id=eos, do_sample=False).save_pretrained(out)

    hf_tok = AutoTokenizer.from_pretrained(out)
    raw_tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    notes = []
    prompt_ids = hf_tok.encode(PROMPT_TEXT)[:PROMPT_LEN]
    if prompt_ids != raw_tok.encode(PROMPT_TEXT).ids[:PROMPT_LEN]:
        notes.append("AutoTokenizer and tokenizers.Tokenizer disagree on the prompt")
    logits = golden_logits(out, prompt_ids)
    notes.append(respell_rope(out, spec["rope_spelling"], prompt_ids, logits))
    logits = golden_logits(out, prompt_ids)
    logits.numpy().astype("<f4").tofile(out / "logits.f32")
    if spec["arch"] == "mistral":
        notes.append(sliding_window_check(out, prompt_ids, logits, spec["sliding_window"]))

    model = load_eager(out)
    greedy_ids = hf_tok.encode(GREEDY_TEXT)
    gen, manual = greedy(model, greedy_ids, GREEDY_NEW, eos)
    if gen != manual:
        notes.append(f"generate() and the argmax loop differ: {manual}")

    tokenization = []
    for text in lm_common.TOKENIZATION_STRINGS + [spec["special_text"]]:
        ids = hf_tok.encode(text, add_special_tokens=False)
        entry = {"text": text, "ids": ids, "decoded": raw_tok.decode(ids, skip_special_tokens=False)}
        raw_ids = raw_tok.encode(text, add_special_tokens=False).ids
        if raw_ids != ids:
            entry["ids_tokenizers_library"] = raw_ids
            notes.append(f"AutoTokenizer and tokenizers.Tokenizer disagree on {text!r}")
        tokenization.append(entry)

    gguf_files = {}
    ok, tail = run_converter(converter_dir, out, out / "model-f32.gguf", "f32")
    if ok:
        gguf_files["model-f32.gguf"] = "llama.cpp convert_hf_to_gguf.py f32"
        if spec["arch"] == "mistral":
            gguf_files["model-f32.gguf"] += " (writes plain llama and drops sliding_window)"
        ours = out_root / f".{name}-ours-f32.gguf"
        export_gguf.export(out, ours, "f32", name=name)
        notes.append("tools/export_gguf.py f32 vs converter f32: " +
                     compare_gguf(converter_dir, ours, out / "model-f32.gguf"))
        ours.unlink()
    else:
        notes.append(f"convert_hf_to_gguf.py refused: {tail.splitlines()[-1] if tail else '?'}")
        export_gguf.export(out, out / "model-f32.gguf", "f32", name=name)
        gguf_files["model-f32.gguf"] = "tools/export_gguf.py f32"
    if spec["q8_0"]:
        ok, tail = run_converter(converter_dir, out, out / "model-q8_0.gguf", "q8_0")
        if ok:
            gguf_files["model-q8_0.gguf"] = "llama.cpp convert_hf_to_gguf.py q8_0"
            ours = out_root / f".{name}-ours-q8_0.gguf"
            export_gguf.export(out, ours, "q8_0", name=name)
            notes.append("tools/export_gguf.py q8_0 vs converter q8_0: " +
                         compare_gguf(converter_dir, ours, out / "model-q8_0.gguf"))
            ours.unlink()
        else:
            notes.append(f"q8_0 conversion failed: {tail}")
    if family == "spm":
        # our exporter keeps BPE merge ranks as scores (the converter writes -1000 for every piece) and, for
        # Mistral, llama.attention.sliding_window
        kind = "f32" if spec["arch"] == "mistral" else "f16"
        export_gguf.export(out, out / f"model-ours-{kind}.gguf", kind, name=name)
        gguf_files[f"model-ours-{kind}.gguf"] = f"tools/export_gguf.py {kind}" + (
            " (keeps llama.attention.sliding_window)" if spec["arch"] == "mistral" else "")

    golden = {
        "model": name,
        "prompt_text": PROMPT_TEXT,
        "prompt_ids": prompt_ids,
        "logits_file": "logits.f32",
        "logits_shape": [len(prompt_ids), int(logits.shape[1])],
        "logits_dtype": "float32 little-endian, row-major [T, V], transformers fp32 CPU eager attention",
        "greedy_prompt_text": GREEDY_TEXT,
        "greedy_prompt_ids": greedy_ids,
        "greedy_continuation": gen,
        "greedy_text": raw_tok.decode(gen, skip_special_tokens=False),
        "tokenization": tokenization,
        "gguf_files": gguf_files,
        "training": {"steps": steps, "final_train_loss": round(loss, 4), "train_tokens": int(stream.size),
                     "seconds": seconds},
        "versions": {"torch": torch.__version__, "transformers": __import__("transformers").__version__,
                     "tokenizers": __import__("tokenizers").__version__},
        "notes": notes,
    }
    (out / "golden.json").write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n")
    log(f"{name}: done in {clock():.1f}s; notes: " + " | ".join(notes))


def main():
    ap = argparse.ArgumentParser(description="Build the tiny reference models and golden outputs.")
    ap.add_argument("--corpus", required=True, help="folder made by tools/build_corpus.py (train/*.txt)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--converter", required=True, help="folder with convert_hf_to_gguf.py, conversion/, gguf-py/")
    ap.add_argument("--seconds", type=float, default=30.0, help="training time per fixture")
    ap.add_argument("--corpus-chars", type=int, default=600_000, help="characters taken from each source")
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = True
    device = "cuda" if torch.cuda.is_available() else "cpu"
    corpus = lm_common.read_corpus(args.corpus, args.corpus_chars)
    out_root = Path(args.out)
    failed = []
    for name, spec in FIXTURES.items():
        if args.only and name not in args.only:
            continue
        try:
            make_fixture(name, copy.deepcopy(spec), corpus, out_root, args.converter, args.seconds, device)
        except Exception:  # noqa: BLE001 - report and go on with the next fixture
            traceback.print_exc()
            failed.append(name)
    if failed:
        log("FAILED:", failed)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
