"""The YOCO variant of tinygpt's model in PyTorch (issue #7; docs/yoco.md): two implementations that must agree.

Responsibility: the architecture "the upper half of the layers reuse the K/V of one middle layer" — with L layers,
layers 0 .. L/2-1 hold their own K/V, layers L/2 .. L-1 have no k/v projections and attend (causally, same
positions) to the post-RoPE K/V of layer L/2-1 — as
  * build_hf_yoco(): transformers' LlamaForCausalLM with only the attention of the sharing layers replaced (the
    embeddings, norms, MLPs, RoPE table and the holding layers' attention are transformers' own code), and
  * NaiveYoco: an independent plain-PyTorch implementation (explicit masked softmax, no transformers), which
    tools/make_yoco_fixture.py checks against the C engine on this machine's CPU;
plus what both share: kv_source, the config.json of the Hugging Face folder, an fp32 safetensors writer/reader,
tied-embedding bookkeeping, and cross_check() (same weights, same logits). Both use Hugging Face parameter names
(model.layers.N.self_attn.q_proj.weight, ...), so a state dict moves between them unchanged.

Needs torch and numpy; transformers only inside build_hf_yoco().
"""
import json
import struct
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

ARCH_NAME = "TinyGPTYocoForCausalLM"
CONFIG_KEY = "kv_source"


# --------------------------------------------------------------------------------------------------------------------
# which layer holds what


def kv_source_for(n_layers):
    """kv_source[l] = the layer whose K/V layer l reads: l for l < L/2 (the self-decoder), L/2-1 above it."""
    if n_layers < 2:
        raise ValueError(f"YOCO needs at least 2 layers, got {n_layers}")
    half = n_layers // 2
    return [l if l < half else half - 1 for l in range(n_layers)]


def validate_kv_source(kv_source, n_layers):
    """The rules the C loader enforces: one entry per layer, kv_source[l] <= l, and a source holds its own K/V."""
    if len(kv_source) != n_layers:
        raise ValueError(f"kv_source has {len(kv_source)} entries for {n_layers} layers")
    for l, s in enumerate(kv_source):
        if not isinstance(s, int) or not 0 <= s <= l:
            raise ValueError(f"kv_source[{l}] = {s!r} must be an integer in [0, {l}]")
        if kv_source[s] != s:
            raise ValueError(f"kv_source[{l}] = {s}, but layer {s} reads layer {kv_source[s]}'s K/V")


def shared_sources(kv_source):
    """The layers whose K/V another layer reads."""
    return sorted({s for l, s in enumerate(kv_source) if s != l})


# --------------------------------------------------------------------------------------------------------------------
# config.json


def hf_config(shape, vocab_size, kv_source, bos_id, eos_id):
    """The Hugging Face config.json of a YOCO model as a dict. shape: {layers, hidden, heads, kv_heads, inter, ctx,
    theta, eps}. "architectures" names a class transformers does not have, "model_type" stays "llama" (the shapes
    and names are Llama's), "kv_source" says which layer reads which layer's K/V."""
    validate_kv_source(kv_source, shape["layers"])
    return {
        "architectures": [ARCH_NAME],
        "model_type": "llama",
        CONFIG_KEY: list(kv_source),
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": bos_id,
        "eos_token_id": eos_id,
        "head_dim": shape["hidden"] // shape["heads"],
        "hidden_act": "silu",
        "hidden_size": shape["hidden"],
        "initializer_range": 0.02,
        "intermediate_size": shape["inter"],
        "max_position_embeddings": shape["ctx"],
        "mlp_bias": False,
        "num_attention_heads": shape["heads"],
        "num_hidden_layers": shape["layers"],
        "num_key_value_heads": shape["kv_heads"],
        "pad_token_id": None,
        "rms_norm_eps": shape["eps"],
        "rope_parameters": {"rope_theta": float(shape["theta"]), "rope_type": "default"},
        "tie_word_embeddings": True,
        "dtype": "float32",
        "use_cache": False,
        "vocab_size": vocab_size,
    }


def config_shape(cfg):
    """(n_layers, d_model, n_heads, n_kv_heads, head_dim, ffn_dim, vocab, theta, eps, kv_source) of a config dict."""
    heads = cfg["num_attention_heads"]
    rope = cfg.get("rope_parameters") or {}
    theta = float(rope.get("rope_theta", cfg.get("rope_theta", 10000.0)))
    kv = cfg.get(CONFIG_KEY) or list(range(cfg["num_hidden_layers"]))
    validate_kv_source(kv, cfg["num_hidden_layers"])
    return (cfg["num_hidden_layers"], cfg["hidden_size"], heads, cfg.get("num_key_value_heads", heads),
            cfg.get("head_dim") or cfg["hidden_size"] // heads, cfg["intermediate_size"], cfg["vocab_size"], theta,
            float(cfg["rms_norm_eps"]), kv)


# --------------------------------------------------------------------------------------------------------------------
# RoPE in transformers' half-split layout


def rotate_half(x):
    """(x1, x2) -> (-x2, x1) over the last dimension's halves."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope_tables(n_tokens, head_dim, theta, device):
    """cos, sin: [n_tokens, head_dim] fp32 for positions 0 .. n_tokens-1 (frequency i used by dims i and i + d/2)."""
    with torch.autocast(device_type=torch.device(device).type, enabled=False):
        inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).to(device).float() / head_dim))
        pos = torch.arange(n_tokens, device=device, dtype=torch.float32)
        freqs = pos[:, None] * inv[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()


# --------------------------------------------------------------------------------------------------------------------
# transformers' Llama with the sharing layers' attention replaced


class CrossLayerAttention(nn.Module):
    """Attention of a layer without k/v projections: its own queries (q_proj, RoPE) over the K/V that layer `src`
    computed in the same forward pass (k_proj / v_proj outputs stashed by forward hooks, RoPE applied here with the
    same table, so the keys equal the source's post-RoPE keys), causal over the same positions; then o_proj.
    Called by transformers' LlamaDecoderLayer with keyword arguments; returns (output, None) as LlamaAttention does."""

    def __init__(self, q_proj, o_proj, src, stash, n_heads, n_kv_heads, head_dim):
        super().__init__()
        self.q_proj = q_proj
        self.o_proj = o_proj
        self.src = src
        self.stash = stash
        self.n_heads, self.n_kv_heads, self.head_dim = n_heads, n_kv_heads, head_dim

    def forward(self, hidden_states, position_embeddings=None, attention_mask=None, **kwargs):
        b, t, _ = hidden_states.shape
        hd = self.head_dim
        k_raw, v_raw = self.stash.get((self.src, "k")), self.stash.get((self.src, "v"))
        if k_raw is None or v_raw is None or k_raw.shape[:2] != (b, t) or position_embeddings is None:
            raise RuntimeError(f"layer reading layer {self.src}'s K/V found nothing of shape ({b}, {t}) stashed")
        cos, sin = position_embeddings            # [b, t, hd]
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q = self.q_proj(hidden_states).view(b, t, self.n_heads, hd).transpose(1, 2)   # [b, H, t, hd]
        k = k_raw.view(b, t, self.n_kv_heads, hd).transpose(1, 2)                     # [b, Hkv, t, hd]
        v = v_raw.view(b, t, self.n_kv_heads, hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.n_heads // self.n_kv_heads
        k = k.repeat_interleave(rep, dim=1).to(v.dtype)
        v = v.repeat_interleave(rep, dim=1)
        out = F.scaled_dot_product_attention(q.to(v.dtype), k, v, is_causal=True)       # [b, H, t, hd]
        out = out.transpose(1, 2).reshape(b, t, self.n_heads * hd)
        return self.o_proj(out), None


def _stash_hook(stash, key):
    def hook(module, inputs, output):
        stash[key] = output
    return hook


def build_hf_yoco(config, kv_source):
    """A freshly initialised transformers LlamaForCausalLM(config) turned into the YOCO model: the attention of every
    layer l with kv_source[l] != l is replaced by CrossLayerAttention (keeping that layer's initialised q_proj and
    o_proj; its k_proj / v_proj are dropped), and the source layers' k_proj / v_proj outputs are stashed by forward
    hooks. config.use_cache is switched off: this model runs full sequences only (no incremental decoding)."""
    from transformers import LlamaForCausalLM
    validate_kv_source(kv_source, config.num_hidden_layers)
    config.use_cache = False
    model = LlamaForCausalLM(config)
    stash = {}
    hd = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    for src in shared_sources(kv_source):
        attn = model.model.layers[src].self_attn
        attn.k_proj.register_forward_hook(_stash_hook(stash, (src, "k")))
        attn.v_proj.register_forward_hook(_stash_hook(stash, (src, "v")))
    for l, layer in enumerate(model.model.layers):
        if kv_source[l] != l:
            old = layer.self_attn
            layer.self_attn = CrossLayerAttention(old.q_proj, old.o_proj, kv_source[l], stash,
                                                  config.num_attention_heads, config.num_key_value_heads, hd)
    return model


# --------------------------------------------------------------------------------------------------------------------
# the independent implementation


class NaiveRMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


class NaiveAttention(nn.Module):
    def __init__(self, d, n_heads, n_kv_heads, head_dim, own_kv):
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim, self.own_kv = n_heads, n_kv_heads, head_dim, own_kv
        self.q_proj = nn.Linear(d, n_heads * head_dim, bias=False)
        if own_kv:
            self.k_proj = nn.Linear(d, n_kv_heads * head_dim, bias=False)
            self.v_proj = nn.Linear(d, n_kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(n_heads * head_dim, d, bias=False)

    def forward(self, x, cos, sin, kv):
        """x: [b, t, d]; cos/sin: [t, hd]; kv: (k [b, Hkv, t, hd] post-RoPE, v) of the source layer when the layer
        reads another's K/V. Returns (output [b, t, d], (k, v) this layer's K/V or the borrowed ones)."""
        b, t, _ = x.shape
        hd = self.head_dim
        q = self.q_proj(x).view(b, t, self.n_heads, hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        if self.own_kv:
            k = self.k_proj(x).view(b, t, self.n_kv_heads, hd).transpose(1, 2)
            v = self.v_proj(x).view(b, t, self.n_kv_heads, hd).transpose(1, 2)
            k = k * cos + rotate_half(k) * sin
        else:
            k, v = kv
        rep = self.n_heads // self.n_kv_heads
        kk = k.repeat_interleave(rep, dim=1)
        vv = v.repeat_interleave(rep, dim=1)
        scores = torch.matmul(q, kk.transpose(-1, -2)) * (hd ** -0.5)      # [b, H, t, t]
        future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
        p = torch.softmax(scores.float(), dim=-1).to(vv.dtype)
        out = torch.matmul(p, vv).transpose(1, 2).reshape(b, t, self.n_heads * hd)
        return self.o_proj(out), (k, v)


class NaiveMLP(nn.Module):
    def __init__(self, d, ff):
        super().__init__()
        self.gate_proj = nn.Linear(d, ff, bias=False)
        self.up_proj = nn.Linear(d, ff, bias=False)
        self.down_proj = nn.Linear(ff, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class NaiveLayer(nn.Module):
    def __init__(self, d, n_heads, n_kv_heads, head_dim, ff, eps, own_kv):
        super().__init__()
        self.input_layernorm = NaiveRMSNorm(d, eps)
        self.self_attn = NaiveAttention(d, n_heads, n_kv_heads, head_dim, own_kv)
        self.post_attention_layernorm = NaiveRMSNorm(d, eps)
        self.mlp = NaiveMLP(d, ff)


class NaiveYoco(nn.Module):
    """The YOCO model from its config dict, written out plainly: pre-norm Llama blocks (RMSNorm, RoPE half-split,
    grouped-query attention with an explicit causal mask, SwiGLU), tied embeddings, and layers with
    kv_source[l] != l attending to layer kv_source[l]'s post-RoPE K/V. forward(input_ids) returns an object with
    .logits [b, t, vocab], like transformers' models."""

    def __init__(self, cfg, init_std=0.02, seed=None):
        super().__init__()
        (n_layers, d, n_heads, n_kv, hd, ff, vocab, theta, eps, kv) = config_shape(cfg)
        if not cfg.get("tie_word_embeddings", False):
            raise ValueError("NaiveYoco supports tied embeddings only")
        self.kv_source, self.head_dim, self.theta = list(kv), hd, theta
        self.model = nn.Module()
        self.model.embed_tokens = nn.Embedding(vocab, d)
        self.model.layers = nn.ModuleList(NaiveLayer(d, n_heads, n_kv, hd, ff, eps, kv[l] == l)
                                          for l in range(n_layers))
        self.model.norm = NaiveRMSNorm(d, eps)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        if seed is not None:
            torch.manual_seed(seed)
        for mod in self.modules():
            if isinstance(mod, (nn.Linear, nn.Embedding)):
                nn.init.normal_(mod.weight, mean=0.0, std=init_std)
        self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, input_ids):
        b, t = input_ids.shape
        cos, sin = rope_tables(t, self.head_dim, self.theta, input_ids.device)
        h = self.model.embed_tokens(input_ids)
        held = {}
        for l, layer in enumerate(self.model.layers):
            src = self.kv_source[l]
            a, kv = layer.self_attn(layer.input_layernorm(h), cos, sin, held.get(src))
            if src == l:
                held[l] = kv
            h = h + a
            h = h + layer.mlp(layer.post_attention_layernorm(h))
        return SimpleNamespace(logits=self.lm_head(self.model.norm(h)))


# --------------------------------------------------------------------------------------------------------------------
# weights in and out


def tied(model):
    """True when the output head and the embedding table are one tensor."""
    return model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()


def export_state(model, kv_source):
    """{HF name: fp32 numpy array} of the model's parameters (buffers such as RoPE tables are not weights), without
    lm_head.weight (tied), checked against kv_source: the sharing layers have no k/v projections, every holding layer
    has both."""
    if not tied(model):
        raise RuntimeError("the output head is not tied to the embeddings")
    out = {}
    for name, t in model.named_parameters():  # a shared tensor once, under its first name (the embedding's)
        if name == "lm_head.weight":
            continue
        out[name] = t.detach().to("cpu", torch.float32).numpy().copy()
    for l, s in enumerate(kv_source):
        for proj in ("k_proj", "v_proj"):
            present = f"model.layers.{l}.self_attn.{proj}.weight" in out
            if present != (s == l):
                raise RuntimeError(f"layer {l} (kv_source {s}) {'has' if present else 'lacks'} {proj}")
    return out


def write_safetensors(tensors, path):
    """tensors: {name: numpy array}, written as F32 in name order; the data section starts 8-byte aligned."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name], dtype="<f4")
        raw = arr.tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    header["__metadata__"] = {"format": "pt"}
    head = json.dumps(header, separators=(",", ":")).encode("utf-8")
    head += b" " * ((8 - (8 + len(head)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for raw in blobs:
            f.write(raw)


def read_safetensors_f32(path):
    """{name: fp32 numpy array} of an F32/F16/BF16 .safetensors file (the reader export_gguf.py uses)."""
    import export_gguf
    return {k: np.asarray(v, dtype=np.float32) for k, v in export_gguf.read_safetensors(path).items()}


def save_hf_folder(model, cfg, out_dir):
    """Writes model.safetensors (fp32, no lm_head) and config.json into out_dir; returns the tensor names."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    state = export_state(model, cfg[CONFIG_KEY])
    write_safetensors(state, out_dir / "model.safetensors")
    (out_dir / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    return sorted(state)


def load_weights(model, tensors):
    """Loads {HF name: numpy array} into model: every parameter but the tied lm_head must be given, nothing extra."""
    sd = {k: torch.from_numpy(np.array(v, dtype=np.float32)) for k, v in tensors.items()}
    missing, unexpected = model.load_state_dict(sd, strict=False)
    params = {n for n, t in model.state_dict(keep_vars=True).items() if isinstance(t, nn.Parameter)}
    missing = [k for k in missing if k in params and k != "lm_head.weight"]
    if missing or unexpected:
        raise RuntimeError(f"weights do not fit the model: missing {missing}, unexpected {unexpected}")
    if not tied(model):
        raise RuntimeError("the output head is not tied to the embeddings after loading")
    return model


def round_to_f16(tensors):
    """The weights as a GGUF F16 file stores them: every matrix rounded to fp16 (and back), vectors (norms) kept."""
    return {k: (v.astype(np.float16).astype(np.float32) if v.ndim >= 2 else v.copy()) for k, v in tensors.items()}


@torch.no_grad()
def cross_check(model_a, model_b, ids):
    """Max |logit difference| of two models on ids [b, t] (eval mode, no autocast)."""
    la = model_a(input_ids=ids).logits.float()
    lb = model_b(input_ids=ids).logits.float()
    return float((la - lb).abs().max())
