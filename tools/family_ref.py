#!/usr/bin/env python3
"""Builds tests/data/families/{qwen2-tiny,qwen3-tiny}: tiny random-weight Qwen2 / Qwen3 Hugging Face folders with
goldens from a plain-Python float64 forward pass written here from the transformers model definitions' maths (no
numpy, torch or transformers needed: the machine that runs the suite has none). tools/make_family_fixtures.py
makes the same kind of folders with transformers' own outputs where transformers is installed; until those are
committed, these goldens are an independent second implementation, not transformers'.

Responsibility: the shapes of make_family_fixtures.py (hidden 64, 4 heads, 2 KV heads, 3 layers, ffn 128, vocab
1024 with the smollm2 fixture's tokenizer, context 128; Qwen2: q/k/v biases, tied embeddings, use_sliding_window
false with a sliding_window that must be ignored; Qwen3: head_dim 32 != 64 / 4, per-head q/k RMSNorm, untied), random
weights (seeded; normal std 0.08, norms 1 +- 0.3, biases std 0.2) rounded to fp32 and written as F32 safetensors
with a config.json in transformers' layout, then
  logits.f32  [T, V] float32: the logits at every position of the smollm2 fixture's 40-token prompt;
  golden.json the prompt, per-token NLL (nll[i] = -log p(prompt[i + 1] | prompt[.. i])), a 32-token greedy
              continuation of the greedy prompt with each step's top-1 / top-2 logit margin;
  model-f32.gguf the same weights in llama.cpp's qwen2 / qwen3 GGUF layout (written here, not by llama.cpp).
The maths: x = embed[ids]; per layer h = rms(x) * w_in; q = h Wq^T (+ bq), k, v likewise; Qwen3: each head of q and
k rms-normed with q_norm / k_norm; RoPE rotate_half with theta^(-2i/head_dim); causal softmax(q k^T / sqrt(hd)) v
(GQA: query head h reads KV head h // (heads / kv_heads)); x += o Wo^T; h = rms(x) * w_post; x += (silu(h Wg^T) *
(h Wu^T)) Wd^T; logits = rms(x) * w_norm . lm_head^T. rms(x) = x / sqrt(mean(x^2) + eps).
Usage: tools/family_ref.py [--out tests/data/families]   (about a minute)
"""
import argparse
import json
import math
import random
import shutil
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOKENIZER_FROM = ROOT / "tests/data/fixtures/smollm2"
VOCAB, HIDDEN, HEADS, KV_HEADS, LAYERS, FFN, CTX = 1024, 64, 4, 2, 3, 128, 128
EPS, THETA = 1e-6, 1000000.0
INIT_STD, SEED, N_GREEDY = 0.08, 50, 32

FAMILIES = {
    "qwen2-tiny": dict(arch="Qwen2ForCausalLM", model_type="qwen2", head_dim=HIDDEN // HEADS, bias=True,
                       qk_norm=False, tied=True,
                       extra={"use_sliding_window": False, "sliding_window": 16, "max_window_layers": 2}),
    "qwen3-tiny": dict(arch="Qwen3ForCausalLM", model_type="qwen3", head_dim=32, bias=False, qk_norm=True,
                       tied=False, extra={"head_dim": 32, "use_sliding_window": False, "sliding_window": None,
                                          "attention_bias": False}),
}


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def make_weights(fam, rng):
    """{name: (shape, flat list of fp32-representable floats)} in transformers' names."""
    hd = fam["head_dim"]
    w = {}

    def mat(name, rows, cols):
        w[name] = ([rows, cols], [f32(rng.gauss(0.0, INIT_STD)) for _ in range(rows * cols)])

    def norm(name, n):
        w[name] = ([n], [f32(1.0 + 0.3 * (2 * rng.random() - 1)) for _ in range(n)])

    def bias(name, n):
        w[name] = ([n], [f32(rng.gauss(0.0, 0.2)) for _ in range(n)])

    mat("model.embed_tokens.weight", VOCAB, HIDDEN)
    for l in range(LAYERS):
        p = "model.layers.%d." % l
        norm(p + "input_layernorm.weight", HIDDEN)
        mat(p + "self_attn.q_proj.weight", HEADS * hd, HIDDEN)
        mat(p + "self_attn.k_proj.weight", KV_HEADS * hd, HIDDEN)
        mat(p + "self_attn.v_proj.weight", KV_HEADS * hd, HIDDEN)
        if fam["bias"]:
            bias(p + "self_attn.q_proj.bias", HEADS * hd)
            bias(p + "self_attn.k_proj.bias", KV_HEADS * hd)
            bias(p + "self_attn.v_proj.bias", KV_HEADS * hd)
        if fam["qk_norm"]:
            norm(p + "self_attn.q_norm.weight", hd)
            norm(p + "self_attn.k_norm.weight", hd)
        mat(p + "self_attn.o_proj.weight", HIDDEN, HEADS * hd)
        norm(p + "post_attention_layernorm.weight", HIDDEN)
        mat(p + "mlp.gate_proj.weight", FFN, HIDDEN)
        mat(p + "mlp.up_proj.weight", FFN, HIDDEN)
        mat(p + "mlp.down_proj.weight", HIDDEN, FFN)
    norm("model.norm.weight", HIDDEN)
    if not fam["tied"]:
        mat("lm_head.weight", VOCAB, HIDDEN)
    return w


def write_safetensors(path, weights):
    header, blobs, off = {}, [], 0
    for name in sorted(weights):
        shape, data = weights[name]
        blob = struct.pack("<%df" % len(data), *data)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def write_config(path, name, fam):
    cfg = {"architectures": [fam["arch"]], "model_type": fam["model_type"], "hidden_act": "silu",
           "hidden_size": HIDDEN, "intermediate_size": FFN, "num_hidden_layers": LAYERS,
           "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS, "max_position_embeddings": CTX,
           "rms_norm_eps": EPS, "rope_theta": THETA, "rope_scaling": None, "vocab_size": VOCAB,
           "tie_word_embeddings": fam["tied"], "bos_token_id": 0, "eos_token_id": 0, "torch_dtype": "float32",
           "initializer_range": INIT_STD, "attention_dropout": 0.0, "use_cache": True}
    cfg.update(fam["extra"])
    Path(path).write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")


# GGUF (v3) value types and llama.cpp's token types
G_U32, G_I32, G_F32, G_BOOL, G_STR, G_ARR = 4, 5, 6, 7, 8, 9
TOK_NORMAL, TOK_CONTROL = 1, 3


def gguf_value(vtype, value):
    if vtype == G_STR:
        b = value.encode("utf-8")
        return struct.pack("<Q", len(b)) + b
    if vtype == G_ARR:
        et, vals = value
        return struct.pack("<IQ", et, len(vals)) + b"".join(gguf_value(et, v) for v in vals)
    return struct.pack({G_U32: "<I", G_I32: "<i", G_F32: "<f", G_BOOL: "<?"}[vtype], value)


def write_gguf(path, name, fam, weights, hf_dir):
    """The folder as llama.cpp's convert_hf_to_gguf.py lays out qwen2 / qwen3 (F32): <arch>.* keys, blk.N.* names,
    the Q/K rows in the file's order (llama.cpp rotates them NEOX-style), the output matrix only when untied; the
    tokenizer as a GPT-2 byte-level BPE ("gpt-2" pre-tokenizer: the smollm2 fixture's tokenizer.json)."""
    arch = fam["model_type"]
    tj = json.loads((hf_dir / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = dict(tj["model"]["vocab"])
    special = {t["id"] for t in tj.get("added_tokens", []) if t.get("special")}
    for t in tj.get("added_tokens", []):
        vocab[t["content"]] = t["id"]
    tokens = [""] * VOCAB
    for text, tid in vocab.items():
        tokens[tid] = text
    kv = [("general.architecture", G_STR, arch), ("general.name", G_STR, name), ("general.file_type", G_U32, 0),
          (arch + ".block_count", G_U32, LAYERS), (arch + ".context_length", G_U32, CTX),
          (arch + ".embedding_length", G_U32, HIDDEN), (arch + ".feed_forward_length", G_U32, FFN),
          (arch + ".attention.head_count", G_U32, HEADS), (arch + ".attention.head_count_kv", G_U32, KV_HEADS),
          (arch + ".rope.freq_base", G_F32, THETA), (arch + ".attention.layer_norm_rms_epsilon", G_F32, EPS)]
    if fam["qk_norm"]:
        kv += [(arch + ".attention.key_length", G_U32, fam["head_dim"]),
               (arch + ".attention.value_length", G_U32, fam["head_dim"])]
    kv += [("tokenizer.ggml.model", G_STR, "gpt2"), ("tokenizer.ggml.pre", G_STR, "gpt-2"),
           ("tokenizer.ggml.tokens", G_ARR, (G_STR, tokens)),
           ("tokenizer.ggml.token_type", G_ARR, (G_I32, [TOK_CONTROL if i in special else TOK_NORMAL
                                                         for i in range(VOCAB)])),
           ("tokenizer.ggml.merges", G_ARR, (G_STR, [m if isinstance(m, str) else " ".join(m)
                                                    for m in tj["model"]["merges"]])),
           ("tokenizer.ggml.bos_token_id", G_U32, 0), ("tokenizer.ggml.eos_token_id", G_U32, 0),
           ("tokenizer.ggml.add_bos_token", G_BOOL, False)]
    names = [("model.embed_tokens.weight", "token_embd.weight")]
    for l in range(LAYERS):
        hp, gp = "model.layers.%d." % l, "blk.%d." % l
        pairs = [("input_layernorm.weight", "attn_norm.weight"), ("self_attn.q_proj.weight", "attn_q.weight"),
                 ("self_attn.q_proj.bias", "attn_q.bias"), ("self_attn.k_proj.weight", "attn_k.weight"),
                 ("self_attn.k_proj.bias", "attn_k.bias"), ("self_attn.v_proj.weight", "attn_v.weight"),
                 ("self_attn.v_proj.bias", "attn_v.bias"), ("self_attn.q_norm.weight", "attn_q_norm.weight"),
                 ("self_attn.k_norm.weight", "attn_k_norm.weight"), ("self_attn.o_proj.weight", "attn_output.weight"),
                 ("post_attention_layernorm.weight", "ffn_norm.weight"), ("mlp.gate_proj.weight", "ffn_gate.weight"),
                 ("mlp.up_proj.weight", "ffn_up.weight"), ("mlp.down_proj.weight", "ffn_down.weight")]
        names += [(hp + h, gp + g) for h, g in pairs if hp + h in weights]
    names += [("model.norm.weight", "output_norm.weight")]
    if not fam["tied"]:
        names += [("lm_head.weight", "output.weight")]
    head = struct.pack("<IIQQ", 0x46554747, 3, len(names), len(kv))
    head += b"".join(gguf_value(G_STR, k) + struct.pack("<I", t) + gguf_value(t, v) for k, t, v in kv)
    blobs, off = [], 0
    for hname, gname in names:
        shape, data = weights[hname]
        ne = list(reversed(shape))
        head += gguf_value(G_STR, gname) + struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne)
        head += struct.pack("<IQ", 0, off)
        blob = struct.pack("<%df" % len(data), *data)
        blob += b"\0" * (-len(blob) % 32)
        blobs.append(blob)
        off += len(blob)
    head += b"\0" * (-len(head) % 32)
    with open(path, "wb") as f:
        f.write(head + b"".join(blobs))


class Model:
    """The float64 forward pass, one token at a time with a K/V list per layer."""

    def __init__(self, fam, w):
        self.fam, self.hd = fam, fam["head_dim"]
        self.w = {n: (s, d) for n, (s, d) in w.items()}
        self.rows = {}
        for n, (s, d) in w.items():
            if len(s) == 2:
                self.rows[n] = [d[r * s[1]:(r + 1) * s[1]] for r in range(s[0])]
        head = "model.embed_tokens.weight" if fam["tied"] else "lm_head.weight"
        self.head = self.rows[head]
        half = self.hd // 2
        self.inv = [THETA ** (-2.0 * i / self.hd) for i in range(half)]
        self.reset()

    def reset(self):
        self.k = [[] for _ in range(LAYERS)]
        self.v = [[] for _ in range(LAYERS)]

    def vec(self, name):
        return self.w[name][1]

    def mv(self, name, x):
        return [math.fsum(a * b for a, b in zip(r, x)) for r in self.rows[name]]

    @staticmethod
    def rms(x, wt):
        s = 1.0 / math.sqrt(math.fsum(v * v for v in x) / len(x) + EPS)
        return [v * s * g for v, g in zip(x, wt)]

    def rope(self, x, pos):
        hd, half, out = self.hd, self.hd // 2, list(x)
        for h in range(len(x) // hd):
            b = h * hd
            for i in range(half):
                c, s = math.cos(pos * self.inv[i]), math.sin(pos * self.inv[i])
                a0, a1 = x[b + i], x[b + i + half]
                out[b + i], out[b + i + half] = a0 * c - a1 * s, a0 * s + a1 * c
        return out

    def heads_norm(self, x, wt):
        hd = self.hd
        return [v for h in range(len(x) // hd) for v in self.rms(x[h * hd:(h + 1) * hd], wt)]

    def step(self, tok, pos):
        """The logits after token tok at position pos (the caches grow by one)."""
        hd, fam = self.hd, self.fam
        x = list(self.rows["model.embed_tokens.weight"][tok])
        for l in range(LAYERS):
            p = "model.layers.%d." % l
            h = self.rms(x, self.vec(p + "input_layernorm.weight"))
            q, k, v = (self.mv(p + "self_attn.%s_proj.weight" % m, h) for m in "qkv")
            if fam["bias"]:
                q, k, v = ([a + b for a, b in zip(t, self.vec(p + "self_attn.%s_proj.bias" % m))]
                           for t, m in ((q, "q"), (k, "k"), (v, "v")))
            if fam["qk_norm"]:
                q = self.heads_norm(q, self.vec(p + "self_attn.q_norm.weight"))
                k = self.heads_norm(k, self.vec(p + "self_attn.k_norm.weight"))
            q, k = self.rope(q, pos), self.rope(k, pos)
            self.k[l].append(k)
            self.v[l].append(v)
            att = []
            for hh in range(HEADS):
                kv = hh // (HEADS // KV_HEADS)
                qh = q[hh * hd:(hh + 1) * hd]
                sc = [math.fsum(a * b for a, b in zip(qh, kk[kv * hd:(kv + 1) * hd])) / math.sqrt(hd)
                      for kk in self.k[l]]
                m = max(sc)
                e = [math.exp(s - m) for s in sc]
                z = math.fsum(e)
                att += [math.fsum(e[t] * self.v[l][t][kv * hd + i] for t in range(len(e))) / z for i in range(hd)]
            x = [a + b for a, b in zip(x, self.mv(p + "self_attn.o_proj.weight", att))]
            h = self.rms(x, self.vec(p + "post_attention_layernorm.weight"))
            g, u = self.mv(p + "mlp.gate_proj.weight", h), self.mv(p + "mlp.up_proj.weight", h)
            a = [gi / (1.0 + math.exp(-gi)) * ui for gi, ui in zip(g, u)]
            x = [a0 + b0 for a0, b0 in zip(x, self.mv(p + "mlp.down_proj.weight", a))]
        h = self.rms(x, self.vec("model.norm.weight"))
        return [math.fsum(a * b for a, b in zip(r, h)) for r in self.head]


def log_softmax_at(logits, i):
    m = max(logits)
    return logits[i] - m - math.log(math.fsum(math.exp(v - m) for v in logits))


def build(name, out):
    fam = FAMILIES[name]
    rng = random.Random("%s-%d" % (name, SEED))
    weights = make_weights(fam, rng)
    out.mkdir(parents=True, exist_ok=True)
    write_safetensors(out / "model.safetensors", weights)
    write_config(out / "config.json", name, fam)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(TOKENIZER_FROM / f, out / f)
    write_gguf(out / "model-f32.gguf", name, fam, weights, out)
    fixture = json.loads((TOKENIZER_FROM / "golden.json").read_text())
    prompt, gprompt = fixture["prompt_ids"], fixture["greedy_prompt_ids"]
    model = Model(fam, weights)
    rows = [model.step(t, i) for i, t in enumerate(prompt)]
    with open(out / "logits.f32", "wb") as f:
        for r in rows:
            f.write(struct.pack("<%df" % VOCAB, *r))
    nll = [round(-log_softmax_at(rows[i], prompt[i + 1]), 9) for i in range(len(prompt) - 1)]
    model.reset()
    for i, t in enumerate(gprompt):
        logits = model.step(t, i)
    cont, margins = [], []
    for i in range(N_GREEDY):
        order = sorted(range(VOCAB), key=lambda j: -logits[j])
        margins.append(round(logits[order[0]] - logits[order[1]], 6))
        cont.append(order[0])
        logits = model.step(order[0], len(gprompt) + i)
    golden = {
        "model": "%s: %s, random weights (normal std %g, norms 1 +- 0.3, biases std 0.2; Python random seeded "
                 "'%s-%d'), fp32 safetensors" % (name, fam["arch"], INIT_STD, name, SEED),
        "reference": "tools/family_ref.py: plain-Python float64 forward pass (not transformers)",
        "prompt_ids": prompt,
        "logits_file": "logits.f32",
        "logits_shape": [len(prompt), VOCAB],
        "logits_dtype": "float32 little-endian, row-major [T, V], computed in float64",
        "nll": nll,
        "greedy_prompt_ids": gprompt,
        "greedy_continuation": cont,
        "greedy_margins": margins,
        "gguf_files": {"model-f32.gguf": "tools/family_ref.py write_gguf: llama.cpp's %s layout, F32"
                       % fam["model_type"]},
        "notes": "Built by tools/family_ref.py. The prompts and tokenizer files are the smollm2 fixture's.",
    }
    (out / "golden.json").write_text(json.dumps(golden, indent=1) + "\n")
    print("%s: mean nll %.5f, greedy min margin %.4f" % (name, sum(nll) / len(nll), min(margins)), flush=True)


def main():
    ap = argparse.ArgumentParser(description="Build the tiny Qwen2 / Qwen3 fixtures with a plain-Python reference.")
    ap.add_argument("--out", default=str(ROOT / "tests/data/families"))
    args = ap.parse_args()
    for name in FAMILIES:
        build(name, Path(args.out) / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
