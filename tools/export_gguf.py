#!/usr/bin/env python3
"""Writes a Hugging Face Llama-family folder as a GGUF v3 file (tinygpt's own exporter).

Responsibility: HF folder (config.json, *.safetensors, tokenizer.json, tokenizer_config.json) -> one GGUF v3 file
with llama.cpp's tensor names and layout, for the cases llama.cpp's convert_hf_to_gguf.py refuses (byte-level BPE
tokenizers whose pre-tokenizer hash it does not know) or drops information (sliding_window).

What it writes (llama.cpp's conventions, so llama.cpp can load the file):
  * general.architecture = "llama", general.alignment = 32, general.file_type, general.quantization_version;
  * llama.* hyper-parameters; llama.attention.sliding_window when config.json has one;
  * for a YOCO model (config.json "architectures": ["TinyGPTYocoForCausalLM"] with "kv_source"; docs/yoco.md):
    tinygpt.kv_source (INT32 array, one entry per layer: the layer whose K/V it reads), and no attn_k / attn_v
    tensors for the layers that read another layer's K/V;
  * tensors token_embd, blk.N.{attn_norm, attn_q, attn_k, attn_v, attn_output, ffn_norm, ffn_gate, ffn_up,
    ffn_down}, output_norm, output (left out when the embeddings are tied). Q and K rows are permuted from HF's
    half-split RoPE layout to the interleaved-pair layout llama.cpp's RoPE expects. Norms are always F32; 2-D weights
    are F32, F16 or Q8_0 (rows whose length is not a multiple of 32 fall back to F16 in a Q8_0 file);
  * tokenizer.ggml.model "gpt2" (byte-level BPE: tokens, token_type, merges, pre = "gpt-2", llama.cpp's name for
    GPT-2's regex) or "llama" (SentencePiece-style BPE with byte fallback: tokens, scores = -merge rank,
    token_type, add_space_prefix), special ids, add_bos/eos.

Pure Python + numpy. Usage: tools/export_gguf.py HF_DIR OUT.gguf [--outtype f32|f16|q8_0] [--name NAME]
"""
import argparse
import json
import struct
import sys
from pathlib import Path

import numpy as np

GGUF_MAGIC = 0x46554747  # "GGUF" little-endian
GGUF_VERSION = 3
ALIGNMENT = 32

# GGUF metadata value types
GGUF_UINT8, GGUF_INT8, GGUF_UINT16, GGUF_INT16, GGUF_UINT32, GGUF_INT32 = 0, 1, 2, 3, 4, 5
GGUF_FLOAT32, GGUF_BOOL, GGUF_STRING, GGUF_ARRAY, GGUF_UINT64, GGUF_INT64, GGUF_FLOAT64 = 6, 7, 8, 9, 10, 11, 12
NUMPY_OF = {GGUF_UINT8: "<u1", GGUF_INT8: "<i1", GGUF_UINT16: "<u2", GGUF_INT16: "<i2", GGUF_UINT32: "<u4",
            GGUF_INT32: "<i4", GGUF_FLOAT32: "<f4", GGUF_UINT64: "<u8", GGUF_INT64: "<i8", GGUF_FLOAT64: "<f8"}

# ggml tensor types and llama_ftype values
GGML_F32, GGML_F16, GGML_Q8_0 = 0, 1, 8
QK8_0 = 32
OUTTYPES = {"f32": (GGML_F32, 0), "f16": (GGML_F16, 1), "q8_0": (GGML_Q8_0, 7)}

# YOCO (docs/yoco.md): the Hugging Face architecture name and the GGUF key of the layer map
YOCO_ARCH = "TinyGPTYocoForCausalLM"
KV_SOURCE_KEY = "tinygpt.kv_source"

# llama.cpp token types
TOK_NORMAL, TOK_UNKNOWN, TOK_CONTROL, TOK_USER_DEFINED, TOK_UNUSED, TOK_BYTE = 1, 2, 3, 4, 5, 6


class ExportError(Exception):
    """Raised when the HF folder holds something this exporter does not handle."""


# --------------------------------------------------------------------------------------------------------------------
# GGUF writer


class GGUFWriter:
    """Collects metadata and tensors in memory, then writes one GGUF v3 file."""

    def __init__(self):
        self.kv = []        # (key, value type, value)
        self.tensors = []   # (name, ne list (innermost first), ggml type, raw bytes)

    def add(self, key, vtype, value):
        if any(k == key for k, _, _ in self.kv):
            raise ExportError(f"duplicate metadata key {key}")
        self.kv.append((key, vtype, value))

    def add_array(self, key, elem_type, values):
        self.add(key, GGUF_ARRAY, (elem_type, list(values)))

    def add_tensor(self, name, data, ggml_type):
        """data: numpy array in HF (row-major, outermost first) order; stored as ggml_type."""
        ne = list(reversed(data.shape))
        if ggml_type == GGML_F32:
            raw = np.ascontiguousarray(data, dtype="<f4").tobytes()
        elif ggml_type == GGML_F16:
            raw = np.ascontiguousarray(data, dtype="<f2").tobytes()
        elif ggml_type == GGML_Q8_0:
            raw = quantize_q8_0(data)
        else:
            raise ExportError(f"unsupported ggml type {ggml_type}")
        self.tensors.append((name, ne, ggml_type, raw))

    @staticmethod
    def _string(s):
        b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
        return struct.pack("<Q", len(b)) + b

    def _value(self, vtype, value):
        if vtype == GGUF_STRING:
            return self._string(value)
        if vtype == GGUF_BOOL:
            return struct.pack("<?", bool(value))
        if vtype == GGUF_ARRAY:
            elem_type, values = value
            head = struct.pack("<IQ", elem_type, len(values))
            if elem_type == GGUF_STRING:
                return head + b"".join(self._string(v) for v in values)
            if elem_type == GGUF_BOOL:
                return head + bytes(1 if v else 0 for v in values)
            return head + np.asarray(values, dtype=NUMPY_OF[elem_type]).tobytes()
        return np.asarray([value], dtype=NUMPY_OF[vtype]).tobytes()

    def write(self, path):
        out = bytearray()
        out += struct.pack("<IIQQ", GGUF_MAGIC, GGUF_VERSION, len(self.tensors), len(self.kv))
        for key, vtype, value in self.kv:
            out += self._string(key) + struct.pack("<I", vtype) + self._value(vtype, value)
        offset = 0
        for name, ne, ggml_type, raw in self.tensors:
            out += self._string(name) + struct.pack("<I", len(ne)) + struct.pack(f"<{len(ne)}Q", *ne)
            out += struct.pack("<IQ", ggml_type, offset)
            offset += pad(len(raw))
        out += b"\0" * (pad(len(out)) - len(out))
        with open(path, "wb") as f:
            f.write(out)
            for _, _, _, raw in self.tensors:
                f.write(raw)
                f.write(b"\0" * (pad(len(raw)) - len(raw)))


def pad(n):
    """n rounded up to a multiple of ALIGNMENT."""
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def round_half_away(x):
    """C's roundf (halves away from zero), element-wise, in float32."""
    a = np.abs(x)
    fl = np.floor(a)
    return np.sign(x) * (fl + np.floor(2 * (a - fl)))


def quantize_q8_0(data):
    """Q8_0 as ggml's reference quantiser: per block of 32 along a row, d = max|x| / 127 (stored fp16),
    q = roundf(x / d) as int8; block = 2 bytes d + 32 bytes q."""
    x = np.ascontiguousarray(data, dtype=np.float32)
    if x.shape[-1] % QK8_0:
        raise ExportError(f"Q8_0 needs rows divisible by {QK8_0}, got {x.shape}")
    blocks = x.reshape(-1, QK8_0)
    d = (np.abs(blocks).max(axis=1, keepdims=True) / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d == 0, np.float32(0), np.float32(1) / d).astype(np.float32)
    q = round_half_away(blocks * inv).astype(np.int8)
    packed = np.concatenate([d.astype("<f2").view(np.uint8), q.view(np.uint8)], axis=1)
    return packed.tobytes()


# --------------------------------------------------------------------------------------------------------------------
# reading the HF folder


def read_safetensors(path):
    """{name: float32 numpy array} from one .safetensors file (F32, F16 and BF16 tensors)."""
    raw = Path(path).read_bytes()
    if len(raw) < 8:
        raise ExportError(f"{path}: too short")
    (n,) = struct.unpack_from("<Q", raw, 0)
    if 8 + n > len(raw):
        raise ExportError(f"{path}: header length {n} past the end")
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        if not 0 <= begin <= end <= len(raw) - base:
            raise ExportError(f"{path}: tensor {name} out of range")
        buf = raw[base + begin:base + end]
        dt = info["dtype"]
        if dt == "F32":
            arr = np.frombuffer(buf, dtype="<f4")
        elif dt == "F16":
            arr = np.frombuffer(buf, dtype="<f2").astype(np.float32)
        elif dt == "BF16":
            arr = (np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ExportError(f"{path}: tensor {name} has unsupported dtype {dt}")
        shape = tuple(info["shape"])
        if arr.size != int(np.prod(shape, dtype=np.int64)):
            raise ExportError(f"{path}: tensor {name} size does not match its shape")
        out[name] = arr.reshape(shape)
    return out


def read_weights(hf_dir):
    """All tensors of the folder (single file or sharded with model.safetensors.index.json)."""
    hf_dir = Path(hf_dir)
    index = hf_dir / "model.safetensors.index.json"
    if index.is_file():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    weights = {}
    for f in files:
        weights.update(read_safetensors(hf_dir / f))
    return weights


def rope_theta(config):
    """RoPE base from either spelling: rope_parameters.rope_theta (transformers >= 5) or rope_theta."""
    params = config.get("rope_parameters") or config.get("rope_scaling") or {}
    rope_type = params.get("rope_type", params.get("type", "default"))
    if rope_type not in ("default", None):
        raise ExportError(f"RoPE scaling type {rope_type!r} is not supported")
    return float(params.get("rope_theta", config.get("rope_theta", 10000.0)))


def permute_rope(w, n_head):
    """HF stores each head's rotary pairs as (first half, second half); llama.cpp wants them interleaved
    (x0, x_{d/2}, x1, ...). Reorders the rows of a (n_head * head_dim, n_embd) weight accordingly."""
    rows = w.shape[0]
    return w.reshape(n_head, 2, rows // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


LAYER_MAP = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def kv_source_of(config):
    """The YOCO layer map of config.json ("kv_source"), validated: one entry per layer, kv_source[l] in [0, l], and a
    layer another reads holds its own K/V. The identity when absent."""
    n_layer = config["num_hidden_layers"]
    kv = config.get("kv_source")
    if kv is None:
        return list(range(n_layer))
    if not isinstance(kv, list) or len(kv) != n_layer:
        raise ExportError(f"kv_source must be a list of {n_layer} layer numbers")
    for l, s in enumerate(kv):
        if not isinstance(s, int) or isinstance(s, bool) or not 0 <= s <= l:
            raise ExportError(f"kv_source[{l}] = {s!r} must be a layer number in [0, {l}]")
        if kv[s] != s:
            raise ExportError(f"kv_source[{l}] = {s}, but layer {s} itself reads layer {kv[s]}")
    return kv


def map_tensors(weights, config):
    """Yields (gguf name, float32 array) in llama.cpp's order, with Q/K permuted; raises on unknown tensors and on
    k/v projections of a layer that reads another layer's K/V."""
    n_layer = config["num_hidden_layers"]
    kv_source = kv_source_of(config)
    n_head = config["num_attention_heads"]
    n_head_kv = config.get("num_key_value_heads", n_head)
    tied = bool(config.get("tie_word_embeddings", False))
    left = dict(weights)
    if tied:
        left.pop("lm_head.weight", None)
    for name in [k for k in left if k.endswith("rotary_emb.inv_freq")]:
        del left[name]

    def take(name):
        if name not in left:
            raise ExportError(f"missing tensor {name}")
        return left.pop(name)

    yield "token_embd.weight", take("model.embed_tokens.weight")
    for i in range(n_layer):
        for hf, gg in LAYER_MAP.items():
            if kv_source[i] != i and hf.startswith(("self_attn.k_proj", "self_attn.v_proj")):
                if f"model.layers.{i}.{hf}" in left:
                    raise ExportError(f"layer {i} reads layer {kv_source[i]}'s K/V but has model.layers.{i}.{hf}")
                continue
            w = take(f"model.layers.{i}.{hf}")
            if hf.startswith("self_attn.q_proj"):
                w = permute_rope(w, n_head)
            elif hf.startswith("self_attn.k_proj"):
                w = permute_rope(w, n_head_kv)
            yield f"blk.{i}.{gg}", w
    yield "output_norm.weight", take("model.norm.weight")
    if not tied:
        yield "output.weight", take("lm_head.weight")
    if left:
        raise ExportError(f"tensors this exporter does not know: {sorted(left)}")


def special_content(value):
    """A special token entry of tokenizer_config.json (a string or {"content": ...}) as its text, or None."""
    if isinstance(value, dict):
        return value.get("content")
    return value


def tokenizer_metadata(w, hf_dir, config, pre_override=None):
    """Adds tokenizer.ggml.* keys from tokenizer.json / tokenizer_config.json."""
    tj = json.loads((hf_dir / "tokenizer.json").read_text(encoding="utf-8"))
    tc_path = hf_dir / "tokenizer_config.json"
    tc = json.loads(tc_path.read_text(encoding="utf-8")) if tc_path.is_file() else {}
    model = tj["model"]
    if model.get("type") != "BPE":
        raise ExportError(f"tokenizer model {model.get('type')} is not BPE")
    pre = json.dumps(tj.get("pre_tokenizer"))
    dec = json.dumps(tj.get("decoder"))
    byte_level = '"ByteLevel"' in pre or '"ByteLevel"' in dec
    vocab = dict(model["vocab"])
    added = {t["id"]: t for t in tj.get("added_tokens", [])}
    for tid, t in added.items():
        vocab[t["content"]] = tid
    n_vocab = max(int(config.get("vocab_size", 0)), max(vocab.values()) + 1)
    tokens = [f"[PAD{i}]" for i in range(n_vocab)]
    types = [TOK_UNUSED] * n_vocab
    for text, tid in vocab.items():
        tokens[tid] = text
        types[tid] = TOK_NORMAL
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]
    unk = model.get("unk_token")
    for tid, t in added.items():
        types[tid] = TOK_CONTROL if t.get("special") else TOK_USER_DEFINED
    if byte_level:
        if pre_override is None:
            p = tj.get("pre_tokenizer") or {}
            if p.get("type") != "ByteLevel" or not p.get("use_regex", True) or p.get("add_prefix_space", False):
                raise ExportError("byte-level tokenizer with a pre-tokenizer other than GPT-2's ByteLevel regex; "
                                  "pass --pre to name llama.cpp's pre-tokenizer type")
        w.add("tokenizer.ggml.model", GGUF_STRING, "gpt2")
        w.add("tokenizer.ggml.pre", GGUF_STRING, pre_override or "gpt-2")
        w.add_array("tokenizer.ggml.tokens", GGUF_STRING, tokens)
        w.add_array("tokenizer.ggml.token_type", GGUF_INT32, types)
        w.add_array("tokenizer.ggml.merges", GGUF_STRING, merges)
        default_bos = False
    else:
        if not model.get("byte_fallback"):
            raise ExportError("SentencePiece-style export needs a BPE model with byte_fallback")
        rank = {}
        for r, m in enumerate(merges):
            rank.setdefault(m.replace(" ", ""), r)
        scores = [0.0] * n_vocab
        for text, tid in vocab.items():
            if len(text) == 6 and text.startswith("<0x") and text.endswith(">"):
                types[tid] = TOK_BYTE
            if text in rank and types[tid] == TOK_NORMAL:
                scores[tid] = -float(rank[text])
        if unk is not None and unk in vocab:
            types[vocab[unk]] = TOK_UNKNOWN
        norm = json.dumps(tj.get("normalizer"))
        prefix = '"Prepend"' in norm or ('"Metaspace"' in pre and '"prepend_scheme": "never"' not in pre
                                         and '"add_prefix_space": false' not in pre)
        w.add("tokenizer.ggml.model", GGUF_STRING, "llama")
        w.add("tokenizer.ggml.pre", GGUF_STRING, pre_override or "default")
        w.add_array("tokenizer.ggml.tokens", GGUF_STRING, tokens)
        w.add_array("tokenizer.ggml.scores", GGUF_FLOAT32, scores)
        w.add_array("tokenizer.ggml.token_type", GGUF_INT32, types)
        w.add("tokenizer.ggml.add_space_prefix", GGUF_BOOL, prefix)
        default_bos = True
    ids = {}
    for key in ("bos", "eos", "unk", "pad"):
        text = special_content(tc.get(f"{key}_token"))
        if text is not None and text in vocab:
            ids[key] = vocab[text]
        elif isinstance(config.get(f"{key}_token_id"), int):
            ids[key] = config[f"{key}_token_id"]
    for key, name in (("bos", "bos_token_id"), ("eos", "eos_token_id"), ("unk", "unknown_token_id"),
                      ("pad", "padding_token_id")):
        if key in ids:
            w.add(f"tokenizer.ggml.{name}", GGUF_UINT32, ids[key])
    w.add("tokenizer.ggml.add_bos_token", GGUF_BOOL, bool(tc.get("add_bos_token", default_bos)))
    w.add("tokenizer.ggml.add_eos_token", GGUF_BOOL, bool(tc.get("add_eos_token", False)))


def export(hf_dir, out_path, outtype="f32", name=None, pre_override=None):
    """Converts the HF folder hf_dir to GGUF file out_path. Returns a list of (tensor name, ne, ggml type)."""
    hf_dir = Path(hf_dir)
    config = json.loads((hf_dir / "config.json").read_text())
    arch = (config.get("architectures") or ["?"])[0]
    if arch not in ("LlamaForCausalLM", "MistralForCausalLM", YOCO_ARCH):
        raise ExportError(f"architecture {arch} is not supported")
    if (arch == YOCO_ARCH) != ("kv_source" in config):
        raise ExportError(f"\"kv_source\" belongs with architecture {YOCO_ARCH} and only there")
    kv_source = kv_source_of(config)
    if outtype not in OUTTYPES:
        raise ExportError(f"unknown outtype {outtype}")
    wtype, ftype = OUTTYPES[outtype]
    n_embd = config["hidden_size"]
    n_head = config["num_attention_heads"]
    head_dim = config.get("head_dim") or n_embd // n_head
    w = GGUFWriter()
    w.add("general.architecture", GGUF_STRING, "llama")
    w.add("general.name", GGUF_STRING, name or hf_dir.name)
    w.add("general.alignment", GGUF_UINT32, ALIGNMENT)
    w.add("general.file_type", GGUF_UINT32, ftype)
    w.add("general.quantization_version", GGUF_UINT32, 2)
    w.add("llama.context_length", GGUF_UINT32, config.get("max_position_embeddings", 2048))
    w.add("llama.embedding_length", GGUF_UINT32, n_embd)
    w.add("llama.block_count", GGUF_UINT32, config["num_hidden_layers"])
    w.add("llama.feed_forward_length", GGUF_UINT32, config["intermediate_size"])
    w.add("llama.attention.head_count", GGUF_UINT32, n_head)
    w.add("llama.attention.head_count_kv", GGUF_UINT32, config.get("num_key_value_heads", n_head))
    w.add("llama.rope.freq_base", GGUF_FLOAT32, rope_theta(config))
    w.add("llama.attention.layer_norm_rms_epsilon", GGUF_FLOAT32, float(config.get("rms_norm_eps", 1e-6)))
    w.add("llama.rope.dimension_count", GGUF_UINT32, head_dim)
    w.add("llama.vocab_size", GGUF_UINT32, config["vocab_size"])
    if config.get("head_dim") is not None:
        w.add("llama.attention.key_length", GGUF_UINT32, head_dim)
        w.add("llama.attention.value_length", GGUF_UINT32, head_dim)
    if config.get("sliding_window") is not None:
        w.add("llama.attention.sliding_window", GGUF_UINT32, int(config["sliding_window"]))
    if arch == YOCO_ARCH:
        w.add_array(KV_SOURCE_KEY, GGUF_INT32, kv_source)
    tokenizer_metadata(w, hf_dir, config, pre_override)
    for tname, data in map_tensors(read_weights(hf_dir), config):
        if data.ndim == 1:
            t = GGML_F32
        elif wtype == GGML_Q8_0 and data.shape[-1] % QK8_0:
            t = GGML_F16
        else:
            t = wtype
        w.add_tensor(tname, data, t)
    w.write(out_path)
    return [(n, ne, t) for n, ne, t, _ in w.tensors]


def main():
    ap = argparse.ArgumentParser(description="Export a Hugging Face Llama-family folder as GGUF v3.")
    ap.add_argument("hf_dir")
    ap.add_argument("out")
    ap.add_argument("--outtype", default="f32", choices=sorted(OUTTYPES))
    ap.add_argument("--name", default=None, help="general.name (default: the folder name)")
    ap.add_argument("--pre", default=None, help="tokenizer.ggml.pre to write instead of the detected one")
    args = ap.parse_args()
    try:
        tensors = export(args.hf_dir, args.out, args.outtype, args.name, args.pre)
    except (ExportError, OSError, KeyError, ValueError) as e:
        print(f"export_gguf: {e}", file=sys.stderr)
        return 1
    print(f"export_gguf: wrote {args.out} ({len(tensors)} tensors, {args.outtype})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
