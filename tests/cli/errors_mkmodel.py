#!/usr/bin/env python3
"""errors_mkmodel.py — writes tiny random Llama models (a GGUF file and a Hugging Face folder) and a battery of
malformed variants of them, for tests/cli/test_errors.sh and the fuzzers' seed corpora. Standard library only.

Usage: errors_mkmodel.py OUTDIR [--small]

Writes into OUTDIR:
  good.gguf, good-hf/ (config.json, model.safetensors, tokenizer.json)      models that load and run
  <variant>.gguf, <variant>-hf/                                             one file or folder per defect (VARIANTS)
  MANIFEST: one line per variant, "name<TAB>what is wrong"

The model: byte-level BPE vocabulary (256 byte tokens + a few merges + <|endoftext|>), F32 weights drawn from a
fixed linear congruential generator, so the output is identical on every run. --small writes a smaller model
(1 layer, width 8) for seed corpora.
"""
import json
import math
import os
import struct
import sys

# ---- the model ------------------------------------------------------------------------------------------------------


def byte_to_unicode():
    """GPT-2's reversible map from bytes to printable characters (printable Latin-1 bytes map to themselves, the
    rest to U+0100 onward, in byte order)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    table = {}
    extra = 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


B2U = byte_to_unicode()
MERGES = [("Ġ", "t"), ("h", "e"), ("t", "h"), ("i", "n"), ("Ġ", "a"), ("e", "r")]
EOS_TEXT = "<|endoftext|>"


def vocab_tokens():
    toks = [B2U[b] for b in range(256)]
    toks += [a + b for a, b in MERGES]
    toks.append(EOS_TEXT)
    return toks


class Rng:
    """A 64-bit LCG: deterministic weights without numpy."""

    def __init__(self, seed):
        self.s = seed

    def uniform(self, lo, hi):
        self.s = (self.s * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        return lo + (hi - lo) * ((self.s >> 11) / float(1 << 53))


def hparams(small):
    if small:
        return dict(n_layers=1, d_model=8, n_heads=2, n_kv_heads=1, ffn=16, ctx=64)
    return dict(n_layers=2, d_model=32, n_heads=4, n_kv_heads=2, ffn=64, ctx=64)


def weights(hp, n_vocab):
    """(gguf name, hf name, rows, cols, floats) for every tensor; norms are 1-D (rows = 0)."""
    rng = Rng(12345)
    d, ff = hp["d_model"], hp["ffn"]
    hd = d // hp["n_heads"]
    kvd = hp["n_kv_heads"] * hd

    def mat(rows, cols, scale):
        return [rng.uniform(-scale, scale) for _ in range(rows * cols)]

    out = [("token_embd.weight", "model.embed_tokens.weight", n_vocab, d, mat(n_vocab, d, 1.0))]
    for layer in range(hp["n_layers"]):
        g, h = "blk.%d." % layer, "model.layers.%d." % layer
        s = 1.0 / math.sqrt(d)
        out += [
            (g + "attn_norm.weight", h + "input_layernorm.weight", 0, d, [1.0] * d),
            (g + "attn_q.weight", h + "self_attn.q_proj.weight", d, d, mat(d, d, s)),
            (g + "attn_k.weight", h + "self_attn.k_proj.weight", kvd, d, mat(kvd, d, s)),
            (g + "attn_v.weight", h + "self_attn.v_proj.weight", kvd, d, mat(kvd, d, s)),
            (g + "attn_output.weight", h + "self_attn.o_proj.weight", d, d, mat(d, d, s)),
            (g + "ffn_norm.weight", h + "post_attention_layernorm.weight", 0, d, [1.0] * d),
            (g + "ffn_gate.weight", h + "mlp.gate_proj.weight", ff, d, mat(ff, d, s)),
            (g + "ffn_up.weight", h + "mlp.up_proj.weight", ff, d, mat(ff, d, s)),
            (g + "ffn_down.weight", h + "mlp.down_proj.weight", d, ff, mat(d, ff, 1.0 / math.sqrt(ff))),
        ]
    out += [("output_norm.weight", "model.norm.weight", 0, d, [1.0] * d),
            ("output.weight", "lm_head.weight", n_vocab, d, mat(n_vocab, d, s))]
    return out


# ---- GGUF ------------------------------------------------------------------------------------------------------------

T_U32, T_I32, T_F32, T_BOOL, T_STRING, T_ARRAY, T_U64 = 4, 5, 6, 7, 8, 9, 10


def gstr(s):
    b = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


def gvalue(t, v):
    if t == T_U32:
        return struct.pack("<I", v)
    if t == T_I32:
        return struct.pack("<i", v)
    if t == T_U64:
        return struct.pack("<Q", v)
    if t == T_F32:
        return struct.pack("<f", v)
    if t == T_BOOL:
        return struct.pack("<B", 1 if v else 0)
    if t == T_STRING:
        return gstr(v)
    et, items = v
    return struct.pack("<IQ", et, len(items)) + b"".join(gvalue(et, x) for x in items)


def gguf_bytes(kvs, tensors, version=3, magic=b"GGUF", n_kv=None, n_tensors=None, fix=None):
    """kvs: [(key, type, value)]; tensors: [(name, ggml_type, ne list, data bytes)]. fix: {tensor name: {"ne": [...],
    "type": n, "offset": n}} written in the info instead of the true values (the data is laid out normally)."""
    fix = fix or {}
    align = 32
    head = magic + struct.pack("<IQQ", version, len(tensors) if n_tensors is None else n_tensors,
                               len(kvs) if n_kv is None else n_kv)
    meta = b"".join(gstr(k) + struct.pack("<I", t) + gvalue(t, v) for k, t, v in kvs)
    infos, data, off = b"", b"", 0
    for name, ty, ne, blob in tensors:
        f = fix.get(name, {})
        ne_w = f.get("ne", ne)
        infos += gstr(name) + struct.pack("<I", len(ne_w)) + b"".join(struct.pack("<Q", x) for x in ne_w)
        infos += struct.pack("<IQ", f.get("type", ty), f.get("offset", off))
        pad = (-len(blob)) % align
        data += blob + b"\0" * pad
        off += len(blob) + pad
    body = head + meta + infos
    body += b"\0" * ((-len(body)) % align)
    return body + data


def f32s(xs):
    return struct.pack("<%df" % len(xs), *xs)


def f16s(xs):
    return struct.pack("<%de" % len(xs), *xs)


def q8_0(xs, bad_scale=None):
    """Q8_0 blocks: fp16 scale d = max|x| / 127, then 32 int8 q = round(x / d); bad_scale replaces the first d."""
    out = b""
    for b in range(0, len(xs), 32):
        blk = xs[b:b + 32]
        d = max(abs(x) for x in blk) / 127.0
        q = [0 if d == 0 else max(-127, min(127, int(round(x / d)))) for x in blk]
        out += struct.pack("<e", bad_scale if (b == 0 and bad_scale is not None) else d)
        out += struct.pack("<32b", *q)
    return out


def gguf_model(hp, drop_keys=(), extra_kvs=(), replace_kvs=None, tensor_edit=None, drop_tensors=(), encode=None,
               **kw):
    """encode: {tensor name: (ggml type, function floats -> bytes)} for tensors not stored as F32."""
    toks = vocab_tokens()
    replace_kvs = replace_kvs or {}
    kvs = [
        ("general.architecture", T_STRING, "llama"),
        ("general.name", T_STRING, "tinygpt-errors"),
        ("llama.block_count", T_U32, hp["n_layers"]),
        ("llama.context_length", T_U32, hp["ctx"]),
        ("llama.embedding_length", T_U32, hp["d_model"]),
        ("llama.feed_forward_length", T_U32, hp["ffn"]),
        ("llama.attention.head_count", T_U32, hp["n_heads"]),
        ("llama.attention.head_count_kv", T_U32, hp["n_kv_heads"]),
        ("llama.rope.freq_base", T_F32, 10000.0),
        ("llama.attention.layer_norm_rms_epsilon", T_F32, 1e-5),
        ("tokenizer.ggml.model", T_STRING, "gpt2"),
        ("tokenizer.ggml.pre", T_STRING, "gpt-2"),
        ("tokenizer.ggml.tokens", T_ARRAY, (T_STRING, toks)),
        ("tokenizer.ggml.token_type", T_ARRAY, (T_I32, [1] * (len(toks) - 1) + [3])),
        ("tokenizer.ggml.merges", T_ARRAY, (T_STRING, ["%s %s" % m for m in MERGES])),
        ("tokenizer.ggml.eos_token_id", T_U32, len(toks) - 1),
        ("tokenizer.ggml.bos_token_id", T_U32, len(toks) - 1),
        ("tokenizer.ggml.add_bos_token", T_BOOL, False),
    ]
    kvs = [(k, replace_kvs.get(k, (t, v))[0], replace_kvs.get(k, (t, v))[1]) for k, t, v in kvs if k not in drop_keys]
    kvs += list(extra_kvs)
    tensors = []
    for gname, _, rows, cols, xs in weights(hp, len(toks)):
        if gname in drop_tensors:
            continue
        if tensor_edit and gname in tensor_edit:
            xs = tensor_edit[gname](list(xs))
        ne = [cols] if rows == 0 else [cols, rows]
        ty, enc = (encode or {}).get(gname, (0, f32s))
        tensors.append((gname, ty, ne, enc(xs)))
    return gguf_bytes(kvs, tensors, **kw)


def spm_tokens():
    """A SentencePiece-style vocabulary: <unk> <s> </s>, the 256 byte tokens, then a few pieces."""
    pieces = ["\u2581", "\u2581t", "he", "\u2581the", "in", "er", "\u2581a", "or", "\u2581to", "e", "t", "a", "o", "h", "i", "n", "r"]
    toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + pieces
    types = [2, 3, 3] + [6] * 256 + [1] * len(pieces)
    scores = [0.0, 0.0, 0.0] + [0.0] * 256 + [-float(i) for i in range(len(pieces))]
    return toks, types, scores


def gguf_spm_vocab():
    """A vocab-only GGUF (no tensors) with a SentencePiece-style tokenizer, as llama.cpp's ggml-vocab-*.gguf."""
    toks, types, scores = spm_tokens()
    kvs = [
        ("general.architecture", T_STRING, "llama"),
        ("tokenizer.ggml.model", T_STRING, "llama"),
        ("tokenizer.ggml.tokens", T_ARRAY, (T_STRING, toks)),
        ("tokenizer.ggml.scores", T_ARRAY, (T_F32, scores)),
        ("tokenizer.ggml.token_type", T_ARRAY, (T_I32, types)),
        ("tokenizer.ggml.bos_token_id", T_U32, 1),
        ("tokenizer.ggml.eos_token_id", T_U32, 2),
        ("tokenizer.ggml.add_space_prefix", T_BOOL, True),
    ]
    return gguf_bytes(kvs, [])


def hf_spm_tokenizer():
    """tokenizer.json of a Llama-2-style tokenizer: Metaspace normalizer, byte fallback, merges."""
    toks, _, _ = spm_tokens()
    merges = ["\u2581 t", "h e", "\u2581t he", "i n", "e r", "\u2581 a", "o r", "\u2581t o"]
    return {
        "version": "1.0",
        "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, t in enumerate(toks[:3])],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                                    {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(toks)}, "merges": merges},
    }


# ---- Hugging Face folder --------------------------------------------------------------------------------------------


def safetensors_bytes(entries, header_edit=None, header_len=None):
    """entries: [(name, dtype, shape, data bytes)]."""
    header, data = {}, b""
    for name, dtype, shape, blob in entries:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    if header_edit:
        header_edit(header)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((-len(h)) % 8)
    return struct.pack("<Q", len(h) if header_len is None else header_len) + h + data


def hf_config(hp, n_vocab):
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
        "hidden_size": hp["d_model"], "intermediate_size": hp["ffn"], "num_hidden_layers": hp["n_layers"],
        "num_attention_heads": hp["n_heads"], "num_key_value_heads": hp["n_kv_heads"],
        "max_position_embeddings": hp["ctx"], "vocab_size": n_vocab, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
        "tie_word_embeddings": False, "bos_token_id": n_vocab - 1, "eos_token_id": n_vocab - 1,
    }


def hf_tokenizer():
    toks = vocab_tokens()
    return {
        "version": "1.0",
        "added_tokens": [{"id": len(toks) - 1, "content": EOS_TEXT, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(toks[:-1])}, "merges": ["%s %s" % m for m in MERGES]},
    }


def hf_files(hp, config_edit=None, tok_edit=None, tensor_edit=None, dtype_of=None, st_kw=None, spm=False):
    """{file name: bytes} of a Hugging Face folder (byte-level or, with spm, SentencePiece-style tokenizer), with
    optional edits."""
    n_vocab = len(spm_tokens()[0] if spm else vocab_tokens())
    cfg = hf_config(hp, n_vocab)
    if config_edit:
        config_edit(cfg)
    tok = hf_spm_tokenizer() if spm else hf_tokenizer()
    if tok_edit:
        tok_edit(tok)
    entries = []
    for _, hname, rows, cols, xs in weights(hp, n_vocab):
        if tensor_edit and hname in tensor_edit:
            xs = tensor_edit[hname](list(xs))
        shape = [cols] if rows == 0 else [rows, cols]
        dt = (dtype_of or {}).get(hname, "F32")
        blob = f32s(xs) if dt == "F32" else bytes(len(xs) * {"I8": 1, "I32": 4, "F64": 8}[dt])
        entries.append((hname, dt, shape, blob))
    return {
        "config.json": json.dumps(cfg, indent=1, allow_nan=True).encode(),
        "model.safetensors": safetensors_bytes(entries, **(st_kw or {})),
        "tokenizer.json": json.dumps(tok, ensure_ascii=False).encode(),
    }


# ---- the variants ---------------------------------------------------------------------------------------------------


def put_nan(xs):
    xs[0] = float("nan")
    return xs


def put_inf(xs):
    xs[1] = float("inf")
    return xs


def variants(hp):
    """(name, what is wrong, bytes of a GGUF file | {file: bytes} of a folder | None to skip)."""
    g = lambda **kw: gguf_model(hp, **kw)  # noqa: E731
    hf = lambda **kw: hf_files(hp, **kw)  # noqa: E731
    good = g()
    big = 1 << 63
    yield "good", "a model that loads and runs", good
    yield "good-hf", "a model that loads and runs", hf()
    yield "spm-vocab", "a vocab-only file (SentencePiece-style tokenizer, no weights)", gguf_spm_vocab()
    yield "spm-hf", "a model with a SentencePiece-style tokenizer.json", hf(spm=True)
    yield "hf-vocab", "tokenizer.json has more tokens than vocab_size", dict(hf(), **{
        "tokenizer.json": json.dumps(hf_spm_tokenizer(), ensure_ascii=False).encode()})
    yield "magic", "wrong magic", good[:3] + b"X" + good[4:]
    yield "version", "GGUF version 4", g(version=4)
    yield "version1", "GGUF version 1", g(version=1)
    yield "bigendian", "a big-endian GGUF (version bytes swapped)", g(version=3 << 24)
    yield "trunc-header", "cut inside the metadata", good[:200]
    yield "trunc-data", "cut inside the tensor data", good[:len(good) - 100]
    yield "nkv-huge", "metadata count 2^63", g(n_kv=big)
    yield "ntensors-huge", "tensor count 2^63", g(n_tensors=big)
    yield "strlen-huge", "a key length of 2^64-1", good[:24] + struct.pack("<Q", (1 << 64) - 1) + good[32:]
    yield "offset-past", "a tensor offset past the end", g(fix={"output.weight": {"offset": 1 << 20}})
    yield "offset-overflow", "a tensor offset near 2^64", g(fix={"output.weight": {"offset": (1 << 64) - 32}})
    yield "ne-overflow", "tensor dimensions whose product overflows", g(fix={"token_embd.weight": {"ne": [1 << 40, 1 << 40]}})
    yield "shape", "attn_q shape disagrees with the hyper-parameters", g(
        replace_kvs={"llama.embedding_length": (T_U32, hp["d_model"] * 2)})
    yield "missing-tensor", "no blk.0.ffn_up.weight", g(drop_tensors=("blk.0.ffn_up.weight",))
    yield "arch", "architecture gpt2", g(replace_kvs={"general.architecture": (T_STRING, "gpt2")})
    yield "arch-falcon", "architecture falcon (a llama.cpp architecture tinygpt does not run)", g(
        replace_kvs={"general.architecture": (T_STRING, "falcon")})
    yield "arch-gemma", "architecture gemma", g(replace_kvs={"general.architecture": (T_STRING, "gemma")})
    yield "rope-yarn", "RoPE scaling yarn", g(extra_kvs=[("llama.rope.scaling.type", T_STRING, "yarn"),
                                                         ("llama.rope.scaling.factor", T_F32, 4.0)])
    yield "rope-unknown", "a RoPE scaling type nobody knows", g(extra_kvs=[("llama.rope.scaling.type", T_STRING,
                                                                            "nonsense")])
    yield "qblock-matrix", "a Q6_K matrix whose rows are not whole 256-blocks", g(
        fix={"blk.0.attn_q.weight": {"type": 14}})
    yield "qtype", "a tensor of type Q8_1 (known to GGUF, not supported)", g(fix={"output_norm.weight": {"type": 9}})
    yield "qblock", "a Q4_K tensor whose rows are not whole blocks", g(fix={"output_norm.weight": {"type": 12}})
    yield "ggmltype", "a tensor of unknown type 99", g(fix={"output_norm.weight": {"type": 99}})
    yield "nomerges", "a BPE tokenizer without merges", g(drop_keys=("tokenizer.ggml.merges",))
    yield "novocab", "no tokenizer.ggml.tokens", g(drop_keys=("tokenizer.ggml.tokens", "tokenizer.ggml.token_type"))
    yield "tokmodel", "unsupported tokenizer model", g(replace_kvs={"tokenizer.ggml.model": (T_STRING, "wordpiece")})
    yield "nan", "a NaN weight in output_norm", g(tensor_edit={"output_norm.weight": put_nan})
    yield "inf", "an Inf weight in token_embd", g(tensor_edit={"token_embd.weight": put_inf})
    yield "nan-f16", "a NaN in an F16 matrix", g(tensor_edit={"output.weight": put_nan}, encode={"output.weight": (1, f16s)})
    yield "inf-q8", "an infinite Q8_0 block scale", g(
        encode={"blk.0.ffn_down.weight": (8, lambda xs: q8_0(xs, float("inf")))})
    yield "good-q8", "Q8_0 and F16 matrices that load and run", g(
        encode={"blk.0.ffn_down.weight": (8, q8_0), "output.weight": (1, f16s)})
    yield "hf-noconfig", "a folder without config.json", {"notes.txt": b"hello\n"}
    yield "hf-badjson", "config.json is not JSON", dict(hf(), **{"config.json": b"{\"hidden_size\": 32,"})
    yield "hf-arch", "unsupported architecture", hf(config_edit=lambda c: c.update(architectures=["GPT2LMHeadModel"]))
    yield "hf-shape", "hidden_size disagrees with the tensors", hf(
        config_edit=lambda c: c.update(intermediate_size=hp["ffn"] + 2))
    yield "hf-dtype", "a tensor of dtype I8", hf(dtype_of={"model.norm.weight": "I8"})
    yield "hf-headerlen", "safetensors header length 2^63", hf(st_kw={"header_len": big})
    files = hf()
    yield "hf-trunc", "model.safetensors cut short", dict(files, **{"model.safetensors": files["model.safetensors"][:-64]})

    def past_end(h):
        h["model.norm.weight"]["data_offsets"] = [1 << 40, (1 << 40) + 4 * hp["d_model"]]
    yield "hf-offsets", "data_offsets past the end", hf(st_kw={"header_edit": past_end})

    def huge_shape(h):
        h["model.norm.weight"]["shape"] = [1 << 62, 1 << 62]
    yield "hf-shape-overflow", "a shape whose product overflows", hf(st_kw={"header_edit": huge_shape})
    yield "hf-noweights", "no model.safetensors", {k: v for k, v in hf().items() if k != "model.safetensors"}
    yield "hf-notok", "no tokenizer.json", {k: v for k, v in hf().items() if k != "tokenizer.json"}
    yield "hf-nomerges", "tokenizer.json without merges", hf(tok_edit=lambda t: t["model"].pop("merges"))
    yield "hf-novocab", "tokenizer.json without a vocab", hf(tok_edit=lambda t: t["model"].pop("vocab"))
    yield "hf-nan", "a NaN weight in model.norm", hf(tensor_edit={"model.norm.weight": put_nan})


def main():
    if len(sys.argv) < 2:
        sys.stderr.write(__doc__)
        return 2
    out = sys.argv[1]
    hp = hparams("--small" in sys.argv[2:])
    os.makedirs(out, exist_ok=True)
    manifest = []
    for name, what, content in variants(hp):
        manifest.append("%s\t%s" % (name, what))
        if isinstance(content, dict):
            d = os.path.join(out, name)
            os.makedirs(d, exist_ok=True)
            for fname, blob in content.items():
                with open(os.path.join(d, fname), "wb") as f:
                    f.write(blob)
        else:
            with open(os.path.join(out, name + ".gguf"), "wb") as f:
                f.write(content)
    with open(os.path.join(out, "MANIFEST"), "w") as f:
        f.write("\n".join(manifest) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
