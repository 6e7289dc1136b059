#!/usr/bin/env bash
# make_seeds.sh — regenerates the committed seed corpora fuzz/seeds/<harness>/ and the harnesses' fixed data
# fuzz/data/ (tiny.gguf, tiny-hf/) from the small models of tests/cli/errors_mkmodel.py, llama.cpp's vocab test
# texts and a few command lines. Deterministic; run from anywhere.
set -euo pipefail
cd "$(dirname "$0")/.."
VOCAB_DIR=${TG_VOCAB_DIR:-../shared/testdata/vocab}
sep=$'\n@@TG-PART@@\n'
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 tests/cli/errors_mkmodel.py "$tmp/m" --small

rm -rf fuzz/seeds fuzz/data
mkdir -p fuzz/seeds/{gguf,hf,tokenizer_json,tokenizer_text,tokenize,args} fuzz/data/tiny-hf
cp "$tmp/m/good.gguf" fuzz/data/tiny.gguf
cp "$tmp/m/good-hf/"* fuzz/data/tiny-hf/

# gguf: the good model, the vocab-only SentencePiece file and every malformed GGUF variant
for f in "$tmp"/m/*.gguf; do cp "$f" "fuzz/seeds/gguf/$(basename "$f")"; done

# hf: config.json SEP model.safetensors SEP tokenizer.json of every folder variant that has all three
for d in "$tmp"/m/*/; do
    name=$(basename "$d")
    [ -f "$d/config.json" ] && [ -f "$d/model.safetensors" ] && [ -f "$d/tokenizer.json" ] || continue
    { cat "$d/config.json"; printf '%s' "$sep"; cat "$d/model.safetensors"; printf '%s' "$sep"
      cat "$d/tokenizer.json"; } >"fuzz/seeds/hf/$name"
done
# a sharded folder: the index names model-00001-of-00001.safetensors
d="$tmp/m/good-hf"
{ cat "$d/config.json"; printf '%s' "$sep"; cat "$d/model.safetensors"; printf '%s' "$sep"; cat "$d/tokenizer.json"
  printf '%s' "$sep"
  python3 -c 'import json,struct,sys
b=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",b[:8])[0]; h=json.loads(b[8:8+n])
print(json.dumps({"metadata":{},"weight_map":{k:"model-00001-of-00001.safetensors" for k in h if k!="__metadata__"}}))' \
      "$d/model.safetensors"; } >fuzz/seeds/hf/sharded

# tokenizer_json: both tokenizer.json styles, with and without the config files
cp "$tmp/m/good-hf/tokenizer.json" fuzz/seeds/tokenizer_json/byte-level
cp "$tmp/m/spm-hf/tokenizer.json" fuzz/seeds/tokenizer_json/spm
{ cat "$tmp/m/spm-hf/tokenizer.json"; printf '%s' "$sep"
  printf '{"add_bos_token": true, "bos_token": {"content": "<s>"}, "eos_token": "</s>"}'; printf '%s' "$sep"
  printf '{"bos_token_id": 1, "eos_token_id": 2}'; } >fuzz/seeds/tokenizer_json/spm-configs

# tokenizer_text: tokenizer.json SEP text, for the configurations that rewrite text: Metaspace with 1- to 4-byte
# replacements (an emoji among them) and each prepend scheme, chains of Replace / Prepend normalizers, ByteLevel with
# a prefix space, Split, overlapping added tokens with lstrip / rstrip. The texts are ordinary (few spaces): the
# fuzzer has to find the hostile ones.
python3 - "$tmp/m/good-hf/tokenizer.json" "$tmp/m/spm-hf/tokenizer.json" fuzz/seeds/tokenizer_text "$sep" <<'EOF'
import copy, json, sys
byte_level, spm = (json.load(open(p)) for p in sys.argv[1:3])
out, sep = sys.argv[3], sys.argv[4].encode()
texts = ["Hello world, the cat sat on the mat.", "def f(x):\n    return x  # two  spaces",
         "caf\u00e9 \u4f60\u597d \U0001F600 <|endoftext|> <s>a</s>", "\u2581already \u2581 marked"]
# indented code, the shape of issue 11's reproducer (a deeply indented Python file): most bytes are spaces
code = "".join(" " * (4 * d) + line + "\n" for d, line in
               [(0, "class A:"), (1, "def f(self, x):"), (2, "if x:"), (3, "for i in x:"), (4, "while i:"),
                (5, "try:"), (6, "yield i"), (5, "except E:"), (6, "pass"), (0, ""), (6, "# end")])


def seed(name, base, edit, text):
    tok = copy.deepcopy(base)
    edit(tok)
    with open("%s/%s" % (out, name), "wb") as f:
        f.write(json.dumps(tok, ensure_ascii=False).encode() + sep + text.encode())


# a small SentencePiece-style tokenizer.json (a few pieces, unk, no byte fallback): small seeds leave most of each
# input to the text, where the mutations should land
small = {"version": "1.0", "normalizer": None, "pre_tokenizer": None, "post_processor": None, "decoder": None,
         "added_tokens": [{"id": 0, "content": "<unk>", "single_word": False, "lstrip": False, "rstrip": False,
                           "normalized": False, "special": True}],
         "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                   "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": False, "ignore_merges": False,
                   "vocab": {"<unk>": 0, "\u2581": 1, "\U0001F600": 2, "x": 3, "i": 4, "f": 5, "\u2581x": 6,
                             "_": 7, "\u00e9": 8},
                   "merges": ["\u2581 x"]}}


def metaspace(rep, scheme, split):  # Mistral's layout: no normalizer, the spaces reach the pre-tokenizer
    def edit(t):
        t["normalizer"] = None
        t["pre_tokenizer"] = {"type": "Metaspace", "replacement": rep, "prepend_scheme": scheme, "split": split}
    return edit


seed("byte-level", byte_level, lambda t: None, texts[0])
seed("spm", spm, lambda t: None, texts[2])
for i, (rep, scheme, split) in enumerate([("\U0001F600", "always", True), ("\U0001F600", "first", False),
                                          ("\u2581", "never", True), ("\u00e9", "always", False),
                                          ("_", "first", True)]):
    seed("metaspace-%d" % i, small, metaspace(rep, scheme, split), texts[i % len(texts)])


def chain(t):
    t["normalizer"] = {"type": "Sequence", "normalizers": [
        {"type": "Prepend", "prepend": "\u2581"},
        {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
        {"type": "Replace", "pattern": {"String": "a"}, "content": "aa"},
        {"type": "Replace", "pattern": {"String": "aa"}, "content": "\U0001F600a"},
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": "\u2581\u2581"}]}


seed("replace-chain", spm, chain, texts[1])


def byte_level_prefix(t):
    t["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "\\s+"}, "behavior": "MergedWithNext", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}]}


seed("byte-level-prefix", byte_level, byte_level_prefix, texts[1])
seed("byte-level-code", byte_level, lambda t: None, code)
seed("metaspace-code", small, metaspace("\u2581", "always", False), code)
seed("metaspace-emoji-code", small, metaspace("\U0001F600", "first", False), code)


def added(t):
    n = max([a["id"] for a in t["added_tokens"]] + list(t["model"]["vocab"].values())) + 1
    for i, (content, l, r) in enumerate([("<x>", True, False), ("<x>y", False, True), ("x>", False, False),
                                         ("the", True, True), ("\U0001F600", False, False), (" ", False, False)]):
        t["added_tokens"].append({"id": n + i, "content": content, "single_word": False, "lstrip": l, "rstrip": r,
                                  "normalized": False, "special": i % 2 == 0})


seed("added-tokens", byte_level, added, "a<x>y <x> the  x> <x>y\U0001F600  the<x")
seed("added-tokens-spm", spm, added, "the <x>y\u2581<x> \U0001F600 </s>")
EOF

# tokenize: byte 0 = vocabulary (0 gpt-2, 1 llama-spm, 2 tiny-hf), byte 1 = flags, then llama.cpp's test texts
i=0
for vocab in gpt-2 llama-spm; do
    inp="$VOCAB_DIR/ggml-vocab-$vocab.gguf.inp"
    [ -f "$inp" ] || continue
    python3 - "$inp" fuzz/seeds/tokenize "$i" <<'EOF'
import sys
texts = open(sys.argv[1], "rb").read().split(b"\n__ggml_vocab_test__\n")
for k, t in enumerate(texts):
    if t:
        open("%s/%s-%02d" % (sys.argv[2], sys.argv[3], k), "wb").write(bytes([int(sys.argv[3]), k % 4]) + t)
EOF
    i=$((i + 1))
done
printf '\002\000Hello world \xff\xfe \xe2\x82' >fuzz/seeds/tokenize/tiny-broken
printf '\002\002The quick brown fox' >fuzz/seeds/tokenize/tiny-ids

# args: NUL-separated words
w() { printf '%s\0' "$@"; }
w model.gguf --prompt "Once upon a time" --tokens 16 --seed 7 --temperature 0 >fuzz/seeds/args/basic
w --streaming-llm-window 256 --streaming-llm-sink 4 --kv-quantize int4 --kv-group-size 32 --kv-residual 128 \
    >fuzz/seeds/args/streaming
w --kv-budget 64M --kv-quantize-keys int2 --kv-quantize-values fp16 --streaming-llm-reposition >fuzz/seeds/args/budget
w --top-k=5 --top-p=0.9 --threads=2 --no-echo -- --prompt >fuzz/seeds/args/equals
w --kv-budget 1K --streaming-llm-sink 100000 >fuzz/seeds/args/too-small
w --kv-group-size 3 --kv-residual 8 --kv-quantize int8 --streaming-llm-window 8 >fuzz/seeds/args/group
# folder: part 0 = one kind byte per file (fuzz_folder.c: 0 absent, 1 file, 2 empty, 3 FIFO, 4 directory, 5 link
# inside, 6 link outside, 7 link into blobs/, 8 link to a secret file, 9 dangling, 10 link to /dev/zero), in the
# order config.json, tokenizer.json, tokenizer_config.json, generation_config.json, special_tokens_map.json,
# model.safetensors, model.safetensors.index.json, model-00001-of-00002, model-00002-of-00002; then each file's bytes
mkdir -p fuzz/seeds/folder
python3 - "$tmp/m/good-hf" fuzz/seeds/folder "$sep" <<'EOF'
import json, struct, sys
src, out, sep = sys.argv[1], sys.argv[2], sys.argv[3].encode()
rd = lambda f: open("%s/%s" % (src, f), "rb").read()
cfg, tok, st = rd("config.json"), rd("tokenizer.json"), rd("model.safetensors")
n = struct.unpack("<Q", st[:8])[0]
head = json.loads(st[8:8 + n])
data = st[8 + n:]
names = sorted((k for k in head if k != "__metadata__"), key=lambda k: head[k]["data_offsets"][0])
def shard(keys):
    h, blob = {}, b""
    for k in keys:
        b, e = head[k]["data_offsets"]
        h[k] = dict(head[k], data_offsets=[len(blob), len(blob) + e - b])
        blob += data[b:e]
    j = json.dumps(h, separators=(",", ":")).encode()
    j += b" " * ((-len(j)) % 8)
    return struct.pack("<Q", len(j)) + j + blob
half = len(names) // 2
s1, s2 = shard(names[:half]), shard(names[half:])
wmap = {k: "model-0000%d-of-00002.safetensors" % (1 if i < half else 2) for i, k in enumerate(names)}
index = json.dumps({"metadata": {}, "weight_map": wmap}).encode()
tcfg = b'{"add_bos_token": false, "eos_token": "<|endoftext|>"}'
gcfg = b'{"bos_token_id": 262, "eos_token_id": 262}'
files = [cfg, tok, tcfg, gcfg, b"{}", st, index, s1, s2]
seeds = {
    "good": [1, 1, 0, 0, 0, 1],
    "all-configs": [1, 1, 1, 1, 1, 1],
    "sharded": [1, 1, 1, 1, 0, 0, 1, 1, 1],
    "hub-blobs": [7, 7, 7, 7, 0, 0, 7, 7, 7],
    "links-inside": [5, 5, 0, 0, 0, 5],
    "fifo-config": [3, 1, 0, 0, 0, 1],
    "fifo-tokenizer": [1, 3, 0, 0, 0, 1],
    "fifo-shard": [1, 1, 0, 0, 0, 0, 1, 1, 3],
    "fifo-index": [1, 1, 0, 0, 0, 0, 3, 1, 1],
    "fifo-tokenizer-config": [1, 1, 3, 1, 0, 1],
    "dir-config": [4, 1, 0, 0, 0, 1],
    "dir-shard": [1, 1, 0, 0, 0, 0, 1, 4, 1],
    "empty-everything": [2, 2, 2, 2, 2, 2],
    "link-out-config": [6, 1, 0, 0, 0, 1],
    "secret-shard": [1, 1, 0, 0, 0, 0, 1, 8, 1],
    "secret-tokenizer": [1, 8, 0, 0, 0, 1],
    "dangling-weights": [1, 1, 0, 0, 0, 9],
    "dev-zero-generation-config": [1, 1, 0, 10, 0, 1],
}
for name, layout in seeds.items():
    open("%s/%s" % (out, name), "wb").write(sep.join([bytes(layout)] + files))
EOF

# chat_template: every template of tests/data/chat/refs.json (the real ones, the built-ins, the feature snippets),
# then FUZZ_SEP and the variables of its first case
mkdir -p fuzz/seeds/chat_template
python3 - fuzz/seeds/chat_template "$sep" <<'EOF'
import json, re, sys
doc = json.load(open("tests/data/chat/refs.json", encoding="utf-8"))
seen = set()
for case in doc["cases"]:
    name = case["template"]
    if name in seen:
        continue
    seen.add(name)
    text = doc["templates"][name]["text"]
    file = re.sub(r"[^A-Za-z0-9.+-]+", "_", name).strip("_")
    with open("%s/%s" % (sys.argv[1], file), "wb") as f:
        f.write(text.encode() + sys.argv[2].encode() + json.dumps(case["vars"], ensure_ascii=False).encode())
EOF
echo "seeds: $(find fuzz/seeds -type f | wc -l) files, $(du -sh fuzz/seeds | cut -f1)"
