#!/usr/bin/env python3
"""realmeta_check.py TINYGPT SCRATCH — `tinygpt info` (and, under 200M parameters, `sample`) on the real, unedited
Hugging Face metadata of ../shared/testdata/realmeta (PROVENANCE.md there), with weights built here.

For each folder with a config.json, the folder's files are copied to SCRATCH and a safetensors file of exactly the
shapes the config implies is written beside them: the header is real, the data a hole (os.truncate), so even a 7B
model costs no disk. Where the folder has a model.safetensors.index.json, the tensors go into the shards it names
and the names must be exactly the ones the config implies. The expected values are computed here from the JSON files,
independently of tinygpt: the parameter count (also checked against the index's total_size where there is one),
layers, heads, head size, context, RoPE theta and scaling, BOS / EOS, tied embeddings, the weight type; Qwen2's
q/k/v biases and Qwen3's per-head q/k norms are among the tensors. Folders tinygpt must refuse (an architecture it
does not know yet, e.g. Phi-3 or Gemma, a RoPE type it does not know, no config.json, PyTorch pickle weights) must
fail with one line naming the reason and exit 1.

Prints "FAIL: ..." per failed check and a last line "test_realmeta: N checks passed, M failed"; exit 1 on any
failure.
"""
import json
import math
import os
import shutil
import struct
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
REALMETA = os.path.join(ROOT, "..", "shared", "testdata", "realmeta")
# real configs this repository keeps itself (PROVENANCE.md there)
REALMETA_EXTRA = os.path.join(ROOT, "tests", "data", "realmeta-extra")
FIXTURE_TOKENIZER = os.path.join(ROOT, "tests", "data", "fixtures", "smollm2")  # SmolLM2-layout tokenizer
DTYPES = {"float32": ("F32", 4), "float16": ("F16", 2), "bfloat16": ("BF16", 2)}
# the config.json architectures tinygpt runs, and the name `info` gives each
SUPPORTED = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3"}

tinygpt, scratch = sys.argv[1], sys.argv[2]
passed = 0
failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL: " + what)


def run(*args, timeout=300):
    p = subprocess.run([tinygpt] + list(args), capture_output=True, timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def load(folder, name):
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)  # Python reads transformers' 1e30 "no limit" as an int


def tensor_shapes(cfg):
    """The tensors transformers' LlamaForCausalLM (Qwen2: with q/k/v biases; Qwen3: with q/k norms) holds,
    {name: [rows, cols]} (1-D: [n])."""
    d, ff, vocab = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    heads = cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads") or heads
    hd = cfg.get("head_dim") or d // heads
    t = {"model.embed_tokens.weight": [vocab, d], "model.norm.weight": [d]}
    if not cfg.get("tie_word_embeddings", False):
        t["lm_head.weight"] = [vocab, d]
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        t[p + "input_layernorm.weight"] = [d]
        t[p + "post_attention_layernorm.weight"] = [d]
        t[p + "self_attn.q_proj.weight"] = [heads * hd, d]
        t[p + "self_attn.k_proj.weight"] = [kv * hd, d]
        t[p + "self_attn.v_proj.weight"] = [kv * hd, d]
        t[p + "self_attn.o_proj.weight"] = [d, heads * hd]
        t[p + "mlp.gate_proj.weight"] = [ff, d]
        t[p + "mlp.up_proj.weight"] = [ff, d]
        t[p + "mlp.down_proj.weight"] = [d, ff]
        if cfg["architectures"][0] == "Qwen2ForCausalLM":
            for m, rows in (("q", heads * hd), ("k", kv * hd), ("v", kv * hd)):
                t[p + "self_attn.%s_proj.bias" % m] = [rows]
        if cfg["architectures"][0] == "Qwen3ForCausalLM":
            t[p + "self_attn.q_norm.weight"] = [hd]
            t[p + "self_attn.k_norm.weight"] = [hd]
    return t


def write_sparse_safetensors(path, shapes, dtype):
    """A safetensors file of these tensors: the header written, the data left as a hole."""
    name, size = DTYPES[dtype]
    header, offset = {}, 0
    for k in sorted(shapes):
        n = math.prod(shapes[k]) * size
        header[k] = {"dtype": name, "shape": shapes[k], "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-(8 + len(text)) % 8)  # data section aligned to 8 bytes
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
    os.truncate(path, 8 + len(text) + offset)


def copy_folder(src, dst):
    shutil.rmtree(dst, ignore_errors=True)
    os.makedirs(dst)
    for n in os.listdir(src):
        shutil.copyfile(os.path.join(src, n), os.path.join(dst, n))


def token_id(tokenizer, tcfg, key):
    """The id of tokenizer_config.json's bos_token / eos_token in tokenizer.json, or None."""
    tok = (tcfg or {}).get(key)
    if isinstance(tok, dict):
        tok = tok.get("content")
    if not isinstance(tok, str):
        return None
    for a in tokenizer.get("added_tokens", []):
        if a["content"] == tok:
            return a["id"]
    return tokenizer["model"]["vocab"].get(tok)


def ids_of(v):
    return [] if v is None else (v if isinstance(v, list) else [v])


def expected_bos_eos(folder, cfg):
    tokenizer, tcfg, gcfg = load(folder, "tokenizer.json"), load(folder, "tokenizer_config.json"), \
        load(folder, "generation_config.json") or {}
    eos = []
    if tokenizer:
        bos = token_id(tokenizer, tcfg, "bos_token")
        e = token_id(tokenizer, tcfg, "eos_token")
        if e is not None:
            eos.append(e)
    else:
        bos = cfg.get("bos_token_id")
        if bos is None:
            bos = gcfg.get("bos_token_id")
    for e in ids_of(cfg.get("eos_token_id")) + ids_of(gcfg.get("eos_token_id")):
        if e not in eos:
            eos.append(e)
    return (-1 if bos is None else bos), eos


def expected_rope(cfg):
    """(theta, scaling line) as `info` prints them, from rope_scaling or else rope_parameters."""
    theta = cfg.get("rope_theta", 10000.0)
    rope = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    theta = rope.get("rope_theta", theta)
    kind = rope.get("rope_type", rope.get("type", "default"))
    if kind == "default":
        return theta, "none"
    if kind == "linear":
        return theta, "linear (factor %g)" % rope["factor"]
    assert kind == "llama3", kind
    orig = rope.get("original_max_position_embeddings", cfg["max_position_embeddings"])
    return theta, "llama3 (factor %g, low %g, high %g, original context %d)" % (
        rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"], orig)


def info_fields(out):
    """`info`'s "key   value" lines as a dict."""
    f = {}
    for line in out.splitlines():
        if len(line) > 17 and line[16] == " ":
            f[line[:16].strip()] = line[17:].strip()
    return f


def check_info(name, folder, cfg, weights):
    rc, out, err = run("info", folder)
    check(rc == 0 and not err, "%s: info -> exit %d: %s" % (name, rc, err.strip()[:300]))
    if rc != 0:
        return
    f = info_fields(out)
    shapes = tensor_shapes(cfg)
    n = sum(math.prod(s) for s in shapes.values())
    params = f.get("parameters", "")
    check(params.split("(")[1].split(",")[0].rstrip(")") == str(n) if "(" in params else False,
          "%s: parameters '%s', want %d" % (name, params, n))
    heads = cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads") or heads
    hd = cfg.get("head_dim") or cfg["hidden_size"] // heads
    want = {
        "architecture": SUPPORTED[cfg["architectures"][0]],
        "context length": str(cfg["max_position_embeddings"]),
        "layers": "%d (%d hold their own K/V)" % (cfg["num_hidden_layers"], cfg["num_hidden_layers"]),
        "heads": "%d query, %d KV, head dim %d" % (heads, kv, hd),
        "d_model": str(cfg["hidden_size"]),
        "ffn": str(cfg["intermediate_size"]),
        "vocab": str(cfg["vocab_size"]),
        "tied embeddings": "yes" if cfg.get("tie_word_embeddings", False) else "no",
    }
    theta, scaling = expected_rope(cfg)
    want["rope theta"] = "%g" % theta
    want["rope scaling"] = scaling
    bos, eos = expected_bos_eos(folder, cfg)
    want["BOS / EOS"] = "%d / %s" % (bos, ", ".join(str(e) for e in eos))
    if weights:
        want["weight types"] = DTYPES[cfg.get("torch_dtype") or cfg.get("dtype")][0]
    for k, v in want.items():
        got = f.get(k, "")
        if k == "BOS / EOS":
            got = got.split(" (")[0]
        check(got == v, "%s: info '%s' is '%s', want '%s'" % (name, k, got, v))
    has_tok = os.path.exists(os.path.join(folder, "tokenizer.json"))
    absent = f.get("absent", "")
    check(("tokenizer.json" in absent) != has_tok, "%s: info 'absent' = '%s' (tokenizer.json there: %s)" %
          (name, absent, has_tok))
    check(("weights" in absent) != weights, "%s: info 'absent' = '%s' (weights built: %s)" % (name, absent, weights))
    return n


def expect_refusal(name, args, fragment):
    rc, out, err = run(*args)
    lines = err.strip().splitlines()
    check(rc == 1 and len(lines) == 1 and fragment in err and not out,
          "%s: %s -> exit %d, stdout %d bytes, stderr %r; want exit 1 and one line with %r" %
          (name, " ".join(args[:1]), rc, len(out), err.strip()[:300], fragment))


# Families whose configs `info` describes (issue #50) but whose tensor lists this script does not model: the row
# and the exact parameter count (checked against each checkpoint's published total: Gemma 2 2B 2,614,341,888;
# Phi-3 / 3.5 mini 3,821,079,552 = the index's total_size / 2 bytes; SmolLM3-3B 3,075,098,624 = its index's
# total_parameters; Gemma 3 4B's text part 3,880,263,168).
INFO_ONLY = {"Gemma2ForCausalLM": ("gemma2", 2614341888), "Gemma3ForConditionalGeneration": ("gemma3", 3880263168),
             "Phi3ForCausalLM": ("phi3", 3821079552), "SmolLM3ForCausalLM": ("smollm3", 3075098624)}
# folders whose architecture's row above is another model's (Phi-4-mini is a Phi3ForCausalLM)
INFO_ONLY_BY_FOLDER = {"Phi-4-mini-instruct__mlx-mirror": ("phi3", 3836021760)}


def expect_info_only(name, dst, cfg):
    arch, params = INFO_ONLY_BY_FOLDER.get(name) or INFO_ONLY[cfg["architectures"][0]]
    rc, out, err = run("info", dst)
    check(rc == 0 and ("architecture     %s\n" % arch) in out and ("(%d, " % params) in out,
          "%s: info -> exit %d; want architecture %s and %d parameters: %s" % (name, rc, arch, params,
                                                                               (out + err)[:300]))


def main():
    os.makedirs(scratch, exist_ok=True)
    built = 0
    folders = [(name, os.path.join(d, name)) for d in (REALMETA, REALMETA_EXTRA) for name in sorted(os.listdir(d))]
    for name, src in folders:
        if not os.path.isdir(src):
            continue
        cfg = load(src, "config.json")
        dst = os.path.join(scratch, name)
        copy_folder(src, dst)
        if cfg is None:  # Meta-Llama-3-8B: its index and tokenizer files only
            expect_refusal(name, ["info", dst], "config.json)")
            continue
        if cfg["architectures"][0] in INFO_ONLY:
            expect_info_only(name, dst, cfg)
            continue
        if cfg["architectures"][0] not in SUPPORTED:  # others: refused by name, before any weight is read
            expect_refusal(name, ["info", dst], "unsupported architecture '%s'" % cfg["architectures"][0])
            continue
        # the config alone: info describes it, naming what is absent
        check_info(name + " (config only)", dst, cfg, False)
        pickle = os.path.exists(os.path.join(src, "pytorch_model.bin.index.json"))
        if pickle:
            rc, out, _ = run("info", dst)
            check("pytorch_model.bin.index.json names PyTorch pickle weights" in out,
                  "%s: info does not say that the weights are PyTorch pickle files" % name)
            expect_refusal(name, ["sample", dst, "--prompt", "hi", "--tokens", "1"],
                           "pytorch_model.bin.index.json names PyTorch pickle weights, which tinygpt does not read")
        # then with weights of the implied shapes
        shapes = tensor_shapes(cfg)
        dtype = cfg.get("torch_dtype") or cfg.get("dtype")
        index = load(src, "model.safetensors.index.json")
        elem = DTYPES[dtype][1]
        n = sum(math.prod(s) for s in shapes.values())
        if index:
            check(sorted(index["weight_map"]) == sorted(shapes),
                  "%s: the index's tensors differ from the config's: %s" %
                  (name, sorted(set(index["weight_map"]) ^ set(shapes))[:6]))
            check(index["metadata"]["total_size"] == n * elem, "%s: index total_size %d, the config's shapes give %d" %
                  (name, index["metadata"]["total_size"], n * elem))
            for shard in sorted(set(index["weight_map"].values())):
                write_sparse_safetensors(os.path.join(dst, shard),
                                         {k: shapes[k] for k, v in index["weight_map"].items() if v == shard}, dtype)
        else:
            if pickle:  # its index also lists the rotary inv_freq buffers (fp32, head_dim / 2 each)
                p = load(src, "pytorch_model.bin.index.json")
                heads = cfg["num_attention_heads"]
                hd = cfg.get("head_dim") or cfg["hidden_size"] // heads
                inv = cfg["num_hidden_layers"] * hd // 2 * 4
                check(p["metadata"]["total_size"] == n * elem + inv, "%s: pickle index total_size %d, want %d" %
                      (name, p["metadata"]["total_size"], n * elem + inv))
            write_sparse_safetensors(os.path.join(dst, "model.safetensors"), shapes, dtype)
        check_info(name, dst, cfg, True)
        built += 1
        if n < 200_000_000:
            # generate a few tokens from the (zero) weights; the realmeta folder has no tokenizer, so the
            # SmolLM2-layout tokenizer of our fixture is put beside the config (49152 ids cover its 1024)
            if not os.path.exists(os.path.join(dst, "tokenizer.json")):
                for f in ("tokenizer.json", "tokenizer_config.json"):
                    shutil.copyfile(os.path.join(FIXTURE_TOKENIZER, f), os.path.join(dst, f))
            rc, out, err = run("sample", dst, "--prompt", "Hello", "--tokens", "3", "--temperature", "0",
                               "--ignore-eos", "--threads", "2")
            check(rc == 0 and "generated: 3 tokens" in err,
                  "%s: sample -> exit %d: %s" % (name, rc, err.strip()[-400:]))
    check(built >= 6, "only %d realmeta configs were built" % built)

    # refusals made from real configs: an unknown RoPE type, Gemma
    base = os.path.join(scratch, "Llama-3.2-1B__resaved-tf4.48")
    cfg = load(base, "config.json")
    for case, edit, fragment in [
        ("rope-yarn", lambda c: c["rope_scaling"].update(rope_type="yarn"),
         "rope_scaling type 'yarn' is not supported (supported: default, linear, llama3)"),
        ("rope-unknown", lambda c: c["rope_scaling"].update(rope_type="nonsense"),
         "rope_scaling type 'nonsense' is not supported"),
        ("gemma", lambda c: c.update(architectures=["GemmaForCausalLM"], model_type="gemma"),
         "unsupported architecture 'GemmaForCausalLM'"),
    ]:
        d = os.path.join(scratch, case)
        os.makedirs(d, exist_ok=True)
        c = json.loads(json.dumps(cfg))
        edit(c)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(c, f)
        expect_refusal(case, ["info", d], fragment)
        shutil.rmtree(d)
    for name in os.listdir(scratch):
        shutil.rmtree(os.path.join(scratch, name), ignore_errors=True)
    print("test_realmeta: %d checks passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
