#!/usr/bin/env python3
"""Builds tiny random-weight Hugging Face folders (qwen2, qwen3, gemma2, gemma3, smollm3, phi3; tests/data/families/
phi3-ownref-tiny is its Phi-3 folder, renamed: the other families' committed fixtures are transformers' own, see
tests/data/families/README.md) with goldens from a plain-Python float64 forward pass written here from the transformers model
definitions' maths (no numpy, torch or transformers needed: the machine that runs the suite has none).
tools/make_family_fixtures.py makes the same kind of folders with transformers' own outputs where transformers is
installed; until those are committed, these goldens are an independent second implementation, not transformers'.

Responsibility: the shapes of make_family_fixtures.py (hidden 64, 4 heads, 2 KV heads, 3 layers, vocab 1024 with the
smollm2 fixture's tokenizer, context 128; Qwen2: q/k/v biases, tied embeddings, use_sliding_window false with a
sliding_window that must be ignored; Qwen3: head_dim 32 != 64 / 4, per-head q/k RMSNorm, untied; the newer
families: head_dim 16, ffn 96, weights rounded to fp16 and stored as F16 (< 1.2 MB a folder) -- Gemma 2: sliding
window 8 on layers 0 and 2 (the default pattern), query_pre_attn_scalar 24, soft-caps 1.5 / 4; Gemma 3: q/k norms,
layer_types, local base 10000 / global 1e6 with linear scaling 2; SmolLM3: 4 layers, the 4th without RoPE; Phi-3:
fused qkv / gate_up, partial rotary 0.5, LongRoPE short factors with attention factor 1.1, untied), random weights
(seeded; normal std 0.08, norms 1 +- 0.3 -- Gemma's w of 1 + w: 0 +- 0.3 --, biases std 0.2), then
  logits.f32  [T, V] float32: the logits at every position of the smollm2 fixture's 40-token prompt;
  golden.json the prompt, per-token NLL (nll[i] = -log p(prompt[i + 1] | prompt[.. i])), a 32-token greedy
              continuation of the greedy prompt with each step's top-1 / top-2 logit margin;
  model-f32.gguf / model-f16.gguf the same weights in llama.cpp's layout for the family (written here, not by
              llama.cpp: Gemma's norms with llama.cpp's + 1, SmolLM3's Q/K rows permuted, Phi-3's LongRoPE factor
              tensors), except Gemma 2's (llama.cpp scales its queries by head_dim, not query_pre_attn_scalar).
The maths: x = embed[ids] (Gemma: * sqrt(hidden)); per layer h = rms(x) * w_in; q = h Wq^T (+ bq), k, v likewise;
Qwen3 / Gemma 3: each head of q and k rms-normed; RoPE rotate_half on the first rotated dims of each head with the
layer's frequencies (none on SmolLM3's no-RoPE layers); causal softmax(q k^T * scale) v over the layer's window (GQA:
query head h reads KV head h // (heads / kv_heads)), scores soft-capped c tanh(s / c) (Gemma 2); x += o Wo^T (Gemma:
x += rms(o Wo^T) * w_post); h = rms(x) * w_ffn; x += (act(h Wg^T) * (h Wu^T)) Wd^T (act: silu, Gemma gelu-tanh;
Gemma: post-normed); logits = rms(x) * w_norm . lm_head^T (Gemma 2: soft-capped). rms(x) = x / sqrt(mean(x^2) +
eps) (Gemma: * (1 + w)).
Usage: tools/family_ref.py [--out tests/data/families] [FAMILY ...]   (about a minute a family)
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
    # Gemma 2: the default sliding / full pattern (no layer_types: layers 0 and 2 slide), window 8 (the prompt is
    # 40 tokens), query_pre_attn_scalar 24 != head_dim 16 (so no GGUF: llama.cpp scales by head_dim), soft-caps
    # small enough to bite on random weights
    "gemma2-tiny": dict(arch="Gemma2ForCausalLM", model_type="gemma2", head_dim=16, bias=False, qk_norm=False,
                        tied=True, gemma=True, ffn=96, f16=True, gguf=False, window=8, qpas=24.0,
                        attn_cap=1.5, final_cap=4.0, sliding=[True, False, True],
                        extra={"head_dim": 16, "query_pre_attn_scalar": 24, "sliding_window": 8,
                               "attn_logit_softcapping": 1.5, "final_logit_softcapping": 4.0,
                               "hidden_activation": "gelu_pytorch_tanh", "hidden_act": "gelu_pytorch_tanh",
                               "attention_bias": False, "cache_implementation": "hybrid"}),
    # Gemma 3: q/k norms, explicit layer_types, local base 10000 on the sliding layers, global base 1e6 with linear
    # scaling 2, query_pre_attn_scalar = head_dim (llama.cpp's rule), no soft-caps
    "gemma3-tiny": dict(arch="Gemma3ForCausalLM", model_type="gemma3_text", gguf_arch="gemma3", head_dim=16, bias=False, qk_norm=True,
                        tied=True, gemma=True, ffn=96, f16=True, gguf=True, window=8, qpas=16.0, attn_cap=0.0,
                        final_cap=0.0, sliding=[True, False, True], local_theta=10000.0, rope_linear=2.0,
                        extra={"head_dim": 16, "query_pre_attn_scalar": 16, "sliding_window": 8,
                               "layer_types": ["sliding_attention", "full_attention", "sliding_attention"],
                               "rope_local_base_freq": 10000.0, "rope_scaling": {"rope_type": "linear", "factor": 2.0},
                               "attn_logit_softcapping": None, "final_logit_softcapping": None,
                               "hidden_activation": "gelu_pytorch_tanh", "hidden_act": "gelu_pytorch_tanh",
                               "attention_bias": False}),
    # SmolLM3: every 4th layer without RoPE (llama.cpp's fixed step; no_rope_layers lists it too), tied; llama.cpp's
    # converter permutes its Q/K rows (Llama's interleaved RoPE)
    "smollm3-tiny": dict(arch="SmolLM3ForCausalLM", model_type="smollm3", head_dim=16, bias=False, qk_norm=False,
                         tied=True, ffn=96, f16=True, gguf=True, layers=4, rope_layers=[1, 1, 1, 0], permute=True,
                         extra={"head_dim": 16, "no_rope_layers": [1, 1, 1, 0], "no_rope_layer_interval": 4,
                                "use_sliding_window": False, "sliding_window": None, "attention_bias": False,
                                "mlp_bias": False}),
    # Phi-3 / Phi-4-mini: fused qkv and gate_up, partial rotary 0.5 (8 of 16 dims), LongRoPE with its short factors
    # (the context does not pass the original one) and an explicit attention factor, untied
    "phi3-tiny": dict(arch="Phi3ForCausalLM", model_type="phi3", head_dim=16, bias=False, qk_norm=False, tied=False,
                      ffn=96, f16=True, gguf=True, fused=True, partial=0.5, attn_factor=1.1,
                      short=[1.0, 1.5, 2.0, 3.0], long=[2.0, 4.0, 8.0, 16.0],
                      extra={"partial_rotary_factor": 0.5, "original_max_position_embeddings": CTX,
                             "rope_scaling": {"type": "longrope", "short_factor": [1.0, 1.5, 2.0, 3.0],
                                              "long_factor": [2.0, 4.0, 8.0, 16.0], "attention_factor": 1.1},
                             "sliding_window": None, "attention_bias": False, "pad_token_id": 0}),
}


def NL(fam):
    """The family's layer count."""
    return fam.get("layers", LAYERS)


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def f16(x):
    return struct.unpack("<e", struct.pack("<e", x))[0]


def make_weights(fam, rng):
    """{name: (shape, flat list of fp32-representable floats)} in transformers' names."""
    hd = fam["head_dim"]
    w = {}

    rnd = f16 if fam.get("f16") else f32
    ffn = fam.get("ffn", FFN)
    gemma = fam.get("gemma", False)

    def mat(name, rows, cols):
        w[name] = ([rows, cols], [rnd(rng.gauss(0.0, INIT_STD)) for _ in range(rows * cols)])

    def norm(name, n):  # Gemma keeps w of the multiplier 1 + w
        w[name] = ([n], [rnd((0.0 if gemma else 1.0) + 0.3 * (2 * rng.random() - 1)) for _ in range(n)])

    def bias(name, n):
        w[name] = ([n], [f32(rng.gauss(0.0, 0.2)) for _ in range(n)])

    mat("model.embed_tokens.weight", VOCAB, HIDDEN)
    for l in range(NL(fam)):
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
        if gemma:
            norm(p + "pre_feedforward_layernorm.weight", HIDDEN)
            norm(p + "post_feedforward_layernorm.weight", HIDDEN)
        mat(p + "mlp.gate_proj.weight", ffn, HIDDEN)
        mat(p + "mlp.up_proj.weight", ffn, HIDDEN)
        mat(p + "mlp.down_proj.weight", HIDDEN, ffn)
    norm("model.norm.weight", HIDDEN)
    if not fam["tied"]:
        mat("lm_head.weight", VOCAB, HIDDEN)
    if fam.get("fused"):  # Phi-3: [q | k | v] and [gate | up] as one matrix each
        for l in range(NL(fam)):
            p = "model.layers.%d." % l
            parts = [w.pop(p + "self_attn.%s_proj.weight" % m) for m in "qkv"]
            w[p + "self_attn.qkv_proj.weight"] = ([sum(t[0][0] for t in parts), HIDDEN], sum((t[1] for t in parts), []))
            parts = [w.pop(p + "mlp.%s_proj.weight" % m) for m in ("gate", "up")]
            w[p + "mlp.gate_up_proj.weight"] = ([sum(t[0][0] for t in parts), HIDDEN], sum((t[1] for t in parts), []))
    return w


def write_safetensors(path, weights, half=False):
    header, blobs, off = {}, [], 0
    for name in sorted(weights):
        shape, data = weights[name]
        blob = struct.pack("<%d%s" % (len(data), "e" if half else "f"), *data)
        header[name] = {"dtype": "F16" if half else "F32", "shape": shape, "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def write_config(path, name, fam):
    cfg = {"architectures": [fam["arch"]], "model_type": fam["model_type"], "hidden_act": "silu",
           "hidden_size": HIDDEN, "intermediate_size": fam.get("ffn", FFN), "num_hidden_layers": NL(fam),
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
    arch = fam.get("gguf_arch", fam["model_type"])
    tj = json.loads((hf_dir / "tokenizer.json").read_text(encoding="utf-8"))
    vocab = dict(tj["model"]["vocab"])
    special = {t["id"] for t in tj.get("added_tokens", []) if t.get("special")}
    for t in tj.get("added_tokens", []):
        vocab[t["content"]] = t["id"]
    tokens = [""] * VOCAB
    for text, tid in vocab.items():
        tokens[tid] = text
    kv = [("general.architecture", G_STR, arch), ("general.name", G_STR, name), ("general.file_type", G_U32, 0),
          (arch + ".block_count", G_U32, NL(fam)), (arch + ".context_length", G_U32, CTX),
          (arch + ".embedding_length", G_U32, HIDDEN), (arch + ".feed_forward_length", G_U32, fam.get("ffn", FFN)),
          (arch + ".attention.head_count", G_U32, HEADS), (arch + ".attention.head_count_kv", G_U32, KV_HEADS),
          (arch + ".rope.freq_base", G_F32, THETA), (arch + ".attention.layer_norm_rms_epsilon", G_F32, EPS)]
    if fam.get("gemma"):
        kv += [(arch + ".attention.sliding_window", G_U32, fam["window"])]
        if "layer_types" in fam["extra"]:  # S, F, S: llama.cpp's period 2 (its Gemma 3 default is 6)
            kv += [(arch + ".attention.sliding_window_pattern", G_U32, 2)]
        if fam["attn_cap"]:
            kv += [(arch + ".attn_logit_softcapping", G_F32, fam["attn_cap"])]
        if fam["final_cap"]:
            kv += [(arch + ".final_logit_softcapping", G_F32, fam["final_cap"])]
        if fam.get("rope_linear"):
            kv += [(arch + ".rope.scaling.type", G_STR, "linear"), (arch + ".rope.scaling.factor", G_F32,
                                                                      fam["rope_linear"])]
    if fam.get("fused"):  # Phi-3 as llama.cpp's converter writes it: partial rotary, LongRoPE keys and factors
        rd = int(fam["head_dim"] * fam["partial"])
        kv += [(arch + ".rope.dimension_count", G_U32, rd), (arch + ".rope.scaling.attn_factor", G_F32,
                                                              fam["attn_factor"]),
               (arch + ".rope.scaling.original_context_length", G_U32, CTX)]
    if fam["qk_norm"] or fam.get("gemma") or fam["head_dim"] != HIDDEN // HEADS:
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
    for l in range(NL(fam)):
        hp, gp = "model.layers.%d." % l, "blk.%d." % l
        pairs = [("input_layernorm.weight", "attn_norm.weight"), ("self_attn.q_proj.weight", "attn_q.weight"),
                 ("self_attn.q_proj.bias", "attn_q.bias"), ("self_attn.k_proj.weight", "attn_k.weight"),
                 ("self_attn.k_proj.bias", "attn_k.bias"), ("self_attn.v_proj.weight", "attn_v.weight"),
                 ("self_attn.v_proj.bias", "attn_v.bias"), ("self_attn.q_norm.weight", "attn_q_norm.weight"),
                 ("self_attn.k_norm.weight", "attn_k_norm.weight"), ("self_attn.o_proj.weight", "attn_output.weight"),
                 ("mlp.gate_proj.weight", "ffn_gate.weight"),
                 ("mlp.up_proj.weight", "ffn_up.weight"), ("mlp.down_proj.weight", "ffn_down.weight")]
        pairs += [("self_attn.qkv_proj.weight", "attn_qkv.weight"), ("mlp.gate_up_proj.weight", "ffn_up.weight")]
        if fam.get("gemma"):
            pairs += [("post_attention_layernorm.weight", "post_attention_norm.weight"),
                      ("pre_feedforward_layernorm.weight", "ffn_norm.weight"),
                      ("post_feedforward_layernorm.weight", "post_ffw_norm.weight")]
        else:
            pairs += [("post_attention_layernorm.weight", "ffn_norm.weight")]
        names += [(hp + h, gp + g) for h, g in pairs if hp + h in weights]
    names += [("model.norm.weight", "output_norm.weight")]
    if not fam["tied"]:
        names += [("lm_head.weight", "output.weight")]
    weights = dict(weights)
    if fam.get("fused"):
        weights["rope_factors_long"] = ([len(fam["long"])], fam["long"])
        weights["rope_factors_short"] = ([len(fam["short"])], fam["short"])
        names += [("rope_factors_long", "rope_factors_long.weight"), ("rope_factors_short", "rope_factors_short.weight")]
    if fam.get("permute"):  # llama.cpp's converter reorders Llama's Q/K rows for its interleaved RoPE
        for l in range(NL(fam)):
            for m, nh in (("q", HEADS), ("k", KV_HEADS)):
                n = "model.layers.%d.self_attn.%s_proj.weight" % (l, m)
                shape, data = weights[n]
                hd, cols = shape[0] // nh, shape[1]
                order = [h * hd + j * (hd // 2) + i for h in range(nh) for i in range(hd // 2) for j in range(2)]
                weights[n] = (shape, [v for r in order for v in data[r * cols:(r + 1) * cols]])
    head = struct.pack("<IIQQ", 0x46554747, 3, len(names), len(kv))
    head += b"".join(gguf_value(G_STR, k) + struct.pack("<I", t) + gguf_value(t, v) for k, t, v in kv)
    blobs, off = [], 0
    for hname, gname in names:
        shape, data = weights[hname]
        ne = list(reversed(shape))
        half = fam.get("f16") and len(shape) == 2  # llama.cpp keeps norms (1-D) in F32
        if fam.get("gemma") and hname.endswith("norm.weight"):
            data = [f32(v + 1.0) for v in data]  # llama.cpp's converter stores Gemma's 1 + w
        head += gguf_value(G_STR, gname) + struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne)
        head += struct.pack("<IQ", 1 if half else 0, off)
        blob = struct.pack("<%d%s" % (len(data), "e" if half else "f"), *data)
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
        for n in list(self.rows):  # Phi-3's fused matrices, split as transformers splits them
            if n.endswith("qkv_proj.weight"):
                p, r, qd = n[:-len("qkv_proj.weight")], self.rows[n], HEADS * fam["head_dim"]
                kvd = KV_HEADS * fam["head_dim"]
                self.rows[p + "q_proj.weight"], self.rows[p + "k_proj.weight"] = r[:qd], r[qd:qd + kvd]
                self.rows[p + "v_proj.weight"] = r[qd + kvd:]
            if n.endswith("gate_up_proj.weight"):
                p, r = n[:-len("gate_up_proj.weight")], self.rows[n]
                self.rows[p + "gate_proj.weight"], self.rows[p + "up_proj.weight"] = r[:len(r) // 2], r[len(r) // 2:]
        head = "model.embed_tokens.weight" if fam["tied"] else "lm_head.weight"
        self.head = self.rows[head]
        self.gemma = fam.get("gemma", False)
        self.rd = int(self.hd * fam.get("partial", 1.0))  # rotated dims per head
        half = self.rd // 2
        glob = [THETA ** (-2.0 * i / self.rd) / fam.get("rope_linear", 1.0) / fam.get("short", [1.0] * half)[i]
                for i in range(half)]
        self.af = fam.get("attn_factor", 1.0)  # LongRoPE: cos and sin of the rotated dims scaled
        loc = [fam.get("local_theta", THETA) ** (-2.0 * i / self.rd) for i in range(half)]
        self.sliding = fam.get("sliding", [False] * NL(fam))
        # per layer: the pair frequencies, or None (a layer without RoPE)
        self.inv = [None if not fam.get("rope_layers", [1] * NL(fam))[l] else
                    (loc if self.sliding[l] and "local_theta" in fam else glob) for l in range(NL(fam))]
        self.scale = 1.0 / math.sqrt(fam.get("qpas", self.hd))
        self.reset()

    def reset(self):
        self.k = [[] for _ in range(NL(self.fam))]
        self.v = [[] for _ in range(NL(self.fam))]

    def vec(self, name):
        return self.w[name][1]

    def mv(self, name, x):
        return [math.fsum(a * b for a, b in zip(r, x)) for r in self.rows[name]]

    def rms(self, x, wt):
        s = 1.0 / math.sqrt(math.fsum(v * v for v in x) / len(x) + EPS)
        return [v * s * ((1.0 + g) if self.gemma else g) for v, g in zip(x, wt)]

    def rope(self, x, pos, inv):
        if inv is None:
            return list(x)
        hd, half, out = self.hd, self.rd // 2, list(x)
        for h in range(len(x) // hd):
            b = h * hd
            for i in range(half):
                c, s = math.cos(pos * inv[i]) * self.af, math.sin(pos * inv[i]) * self.af
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
        if self.gemma:
            x = [v * f32(math.sqrt(HIDDEN)) for v in x]
        for l in range(NL(fam)):
            p = "model.layers.%d." % l
            h = self.rms(x, self.vec(p + "input_layernorm.weight"))
            q, k, v = (self.mv(p + "self_attn.%s_proj.weight" % m, h) for m in "qkv")
            if fam["bias"]:
                q, k, v = ([a + b for a, b in zip(t, self.vec(p + "self_attn.%s_proj.bias" % m))]
                           for t, m in ((q, "q"), (k, "k"), (v, "v")))
            if fam["qk_norm"]:
                q = self.heads_norm(q, self.vec(p + "self_attn.q_norm.weight"))
                k = self.heads_norm(k, self.vec(p + "self_attn.k_norm.weight"))
            q, k = self.rope(q, pos, self.inv[l]), self.rope(k, pos, self.inv[l])
            self.k[l].append(k)
            self.v[l].append(v)
            # the keys this layer sees: all, or (a sliding layer) those with pos - key_pos < window
            first = max(0, pos + 1 - fam["window"]) if self.sliding[l] else 0
            cap = fam.get("attn_cap", 0.0)
            att = []
            for hh in range(HEADS):
                kv = hh // (HEADS // KV_HEADS)
                qh = q[hh * hd:(hh + 1) * hd]
                sc = [math.fsum(a * b for a, b in zip(qh, kk[kv * hd:(kv + 1) * hd])) * self.scale
                      for kk in self.k[l][first:]]
                if cap:
                    sc = [cap * math.tanh(s / cap) for s in sc]
                m = max(sc)
                e = [math.exp(s - m) for s in sc]
                z = math.fsum(e)
                vs = self.v[l][first:]
                att += [math.fsum(e[t] * vs[t][kv * hd + i] for t in range(len(e))) / z for i in range(hd)]
            o = self.mv(p + "self_attn.o_proj.weight", att)
            if self.gemma:  # post-norm of the block's output; the feed-forward's own pre-norm
                o = self.rms(o, self.vec(p + "post_attention_layernorm.weight"))
                x = [a + b for a, b in zip(x, o)]
                h = self.rms(x, self.vec(p + "pre_feedforward_layernorm.weight"))
            else:
                x = [a + b for a, b in zip(x, o)]
                h = self.rms(x, self.vec(p + "post_attention_layernorm.weight"))
            g, u = self.mv(p + "mlp.gate_proj.weight", h), self.mv(p + "mlp.up_proj.weight", h)
            if self.gemma:  # GeGLU, tanh approximation
                a = [0.5 * gi * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (gi + 0.044715 * gi ** 3))) * ui
                     for gi, ui in zip(g, u)]
            else:
                a = [gi / (1.0 + math.exp(-gi)) * ui for gi, ui in zip(g, u)]
            d = self.mv(p + "mlp.down_proj.weight", a)
            if self.gemma:
                d = self.rms(d, self.vec(p + "post_feedforward_layernorm.weight"))
            x = [a0 + b0 for a0, b0 in zip(x, d)]
        h = self.rms(x, self.vec("model.norm.weight"))
        logits = [math.fsum(a * b for a, b in zip(r, h)) for r in self.head]
        cap = fam.get("final_cap", 0.0)
        return [cap * math.tanh(v / cap) for v in logits] if cap else logits


def log_softmax_at(logits, i):
    m = max(logits)
    return logits[i] - m - math.log(math.fsum(math.exp(v - m) for v in logits))


def build(name, out):
    fam = FAMILIES[name]
    rng = random.Random("%s-%d" % (name, SEED))
    weights = make_weights(fam, rng)
    out.mkdir(parents=True, exist_ok=True)
    write_safetensors(out / "model.safetensors", weights, half=fam.get("f16", False))
    write_config(out / "config.json", name, fam)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copyfile(TOKENIZER_FROM / f, out / f)
    gguf_name = "model-f16.gguf" if fam.get("f16") else "model-f32.gguf"
    if fam.get("gguf", True):
        write_gguf(out / gguf_name, name, fam, weights, out)
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
                 "'%s-%d'), %s safetensors" % (name, fam["arch"], INIT_STD, name, SEED,
                                               "fp16 (values exact in fp16)" if fam.get("f16") else "fp32"),
        "reference": "tools/family_ref.py: plain-Python float64 forward pass (not transformers)",
        "prompt_ids": prompt,
        "logits_file": "logits.f32",
        "logits_shape": [len(prompt), VOCAB],
        "logits_dtype": "float32 little-endian, row-major [T, V], computed in float64",
        "nll": nll,
        "greedy_prompt_ids": gprompt,
        "greedy_continuation": cont,
        "greedy_margins": margins,
        "gguf_files": {gguf_name: "tools/family_ref.py write_gguf: llama.cpp's %s layout, %s"
                       % (fam.get("gguf_arch", fam["model_type"]), "F16 matrices, F32 norms" if fam.get("f16")
                          else "F32")} if fam.get("gguf", True) else {},
        "notes": "Built by tools/family_ref.py. The prompts and tokenizer files are the smollm2 fixture's.",
    }
    (out / "golden.json").write_text(json.dumps(golden, indent=1) + "\n")
    print("%s: mean nll %.5f, greedy min margin %.4f" % (name, sum(nll) / len(nll), min(margins)), flush=True)


def main():
    ap = argparse.ArgumentParser(description="Build the tiny Qwen2 / Qwen3 fixtures with a plain-Python reference.")
    ap.add_argument("--out", default=str(ROOT / "tests/data/families"))
    ap.add_argument("families", nargs="*", help="only these (default: every family)")
    args = ap.parse_args()
    for name in args.families or FAMILIES:
        build(name, Path(args.out) / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
