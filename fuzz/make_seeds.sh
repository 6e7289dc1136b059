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
mkdir -p fuzz/seeds/{gguf,hf,tokenizer_json,tokenize,args} fuzz/data/tiny-hf
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
