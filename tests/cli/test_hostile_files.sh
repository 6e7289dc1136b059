#!/usr/bin/env bash
# test_hostile_files.sh — hostile files in and around a model (issue 11, findings 3 and 5): a FIFO, a directory or
# a device where a file should be, a shard or config that is a symlink out of the folder, an index.json naming an
# absolute path or '..', overlapping or out-of-order tensor data in GGUF and safetensors. Each run must end within
# 10 s (a FIFO that blocks counts as a failure: it is killed, the suite goes on) and 1 GiB of RSS, and either succeed
# or print exactly one line on stderr naming the file, nothing on stdout, and exit 1. No file's contents may appear
# in a message. Inputs are built here from tests/cli/errors_mkmodel.py. Uses $TINYGPT (the sanitizer build).
set -u
cd "$(dirname "$0")/../.." || exit 2
T=${TINYGPT:-$PWD/build/asan/tinygpt}
if [ ! -x "$T" ]; then
    echo "test_hostile_files: $T is not built" >&2
    exit 1
fi
if ! command -v python3 >/dev/null || [ ! -x /usr/bin/time ]; then
    echo "test_hostile_files: python3 and /usr/bin/time are needed" >&2
    exit 1
fi

. tests/cli/lib.sh

# hostile STATUS PATTERN ARGS... : tinygpt ARGS ends within 10 s and 1 GiB; STATUS 0: it succeeds; STATUS 1: exit
# 1, one stderr line containing PATTERN (fixed string), nothing on stdout, and no "root:" (the first bytes of
# /etc/passwd, which some inputs point at).
hostile() {
    local want=$1 pattern=$2
    shift 2
    /usr/bin/time -f %M -o "$tmp/rss" timeout -k 2 10 "$T" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null
    local rc=$? rss lines
    rss=$(tail -n 1 "$tmp/rss")
    lines=$(wc -l <"$tmp/err")
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        bad "tinygpt $* -> did not end within 10 s (hang)"
    elif ! [ "$rss" -le 1048576 ] 2>/dev/null; then
        bad "tinygpt $* -> max RSS $rss KiB (over 1 GiB)"
    elif [ "$want" -eq 0 ]; then
        if [ "$rc" -eq 0 ]; then ok; else bad "tinygpt $* -> exit $rc, want 0: $(head -c 400 "$tmp/err")"; fi
    elif [ "$rc" -ne "$want" ]; then
        bad "tinygpt $* -> exit $rc, want $want; stderr: $(head -c 400 "$tmp/err")"
    elif [ "$lines" -ne 1 ]; then
        bad "tinygpt $* -> $lines lines on stderr, want 1: $(head -c 400 "$tmp/err")"
    elif ! grep -qF -- "$pattern" "$tmp/err"; then
        bad "tinygpt $* -> stderr lacks '$pattern': $(cat "$tmp/err")"
    elif grep -qF "root:" "$tmp/err"; then
        bad "tinygpt $* -> the message echoes a file's contents: $(cat "$tmp/err")"
    elif [ -s "$tmp/out" ]; then
        bad "tinygpt $* -> printed on stdout: $(head -c 200 "$tmp/out")"
    else
        ok
    fi
}

python3 tests/cli/errors_mkmodel.py "$tmp/m" >/dev/null || { echo "test_hostile_files: errors_mkmodel.py failed"; exit 1; }
good="$tmp/m/good-hf"
shard=model-00001-of-00001.safetensors

# folder NAME: a fresh copy of the good folder as $tmp/NAME
folder() {
    rm -rf "${tmp:?}/$1"
    cp -r "$good" "$tmp/$1"
}
# sharded NAME: a copy whose weights are one shard named by model.safetensors.index.json
sharded() {
    folder "$1"
    mv "$tmp/$1/model.safetensors" "$tmp/$1/$shard"
    python3 - "$tmp/$1/$shard" "$tmp/$1/model.safetensors.index.json" "${2:-$shard}" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
h = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])
json.dump({"metadata": {}, "weight_map": {k: sys.argv[3] for k in h if k != "__metadata__"}}, open(sys.argv[2], "w"))
PY
}

hostile 0 "" info "$good"
sharded ok-sharded
hostile 0 "" info "$tmp/ok-sharded"

# ---- finding 3: FIFOs and devices never block -------------------------------------------------------------------
for f in config.json tokenizer.json model.safetensors tokenizer_config.json generation_config.json; do
    folder "fifo-$f"
    rm -f "$tmp/fifo-$f/$f"
    mkfifo "$tmp/fifo-$f/$f"
    hostile 1 "fifo-$f/$f: not a regular file (a FIFO)" info "$tmp/fifo-$f"
done
hostile 1 "fifo-tokenizer.json/tokenizer.json: not a regular file (a FIFO)" sample "$tmp/fifo-tokenizer.json" \
    --prompt hi --tokens 2
sharded fifo-shard
rm "$tmp/fifo-shard/$shard"
mkfifo "$tmp/fifo-shard/$shard"
hostile 1 "fifo-shard/$shard: not a regular file (a FIFO)" info "$tmp/fifo-shard"
sharded fifo-index
rm "$tmp/fifo-index/model.safetensors.index.json"
mkfifo "$tmp/fifo-index/model.safetensors.index.json"
hostile 1 "fifo-index/model.safetensors.index.json: not a regular file (a FIFO)" info "$tmp/fifo-index"
folder dev-config
rm "$tmp/dev-config/config.json"
ln -s /dev/zero "$tmp/dev-config/config.json"
hostile 1 "dev-config/config.json: a symlink that leaves the model folder" info "$tmp/dev-config"
mkfifo "$tmp/top.gguf"
hostile 1 "top.gguf: not a model (a FIFO;" info "$tmp/top.gguf"
hostile 1 "/dev/zero: not a model (a character device;" info /dev/zero

# ---- finding 5: directories name the file -----------------------------------------------------------------------
for f in config.json tokenizer.json model.safetensors tokenizer_config.json; do
    folder "dir-$f"
    rm -f "$tmp/dir-$f/$f"
    mkdir "$tmp/dir-$f/$f"
    hostile 1 "dir-$f/$f: is a directory" info "$tmp/dir-$f"
done
sharded dir-shard
rm "$tmp/dir-shard/$shard"
mkdir "$tmp/dir-shard/$shard"
hostile 1 "dir-shard/$shard: is a directory" info "$tmp/dir-shard"

# ---- finding 5: files a folder refers to stay in the folder -----------------------------------------------------
sharded link-shard
rm "$tmp/link-shard/$shard"
ln -s /etc/passwd "$tmp/link-shard/$shard"
hostile 1 "link-shard/$shard: a symlink that leaves the model folder" info "$tmp/link-shard"
folder link-single
rm "$tmp/link-single/model.safetensors"
ln -s /etc/passwd "$tmp/link-single/model.safetensors"
hostile 1 "link-single/model.safetensors: a symlink that leaves the model folder" info "$tmp/link-single"
folder link-config
cp "$good/config.json" "$tmp/outside-config.json"
rm "$tmp/link-config/config.json"
ln -s ../outside-config.json "$tmp/link-config/config.json"
hostile 1 "link-config/config.json: a symlink that leaves the model folder" info "$tmp/link-config"
folder link-tok
rm "$tmp/link-tok/tokenizer.json"
ln -s /etc/passwd "$tmp/link-tok/tokenizer.json"
hostile 1 "link-tok/tokenizer.json: a symlink that leaves the model folder" tokenize "$tmp/link-tok" hi
sharded index-abs /etc/passwd
hostile 1 "'/etc/passwd' is not a plain file name inside the folder" info "$tmp/index-abs"
sharded index-dotdot "../good-hf/model.safetensors"
hostile 1 "'../good-hf/model.safetensors' is not a plain file name inside the folder" info "$tmp/index-dotdot"
sharded index-dots ".."
hostile 1 "'..' is not a plain file name inside the folder" info "$tmp/index-dots"
# a symlink inside the folder is followed
folder link-inside
mv "$tmp/link-inside/config.json" "$tmp/link-inside/real-config.json"
ln -s real-config.json "$tmp/link-inside/config.json"
hostile 0 "" info "$tmp/link-inside"
# a Hugging Face hub snapshot: every file a symlink into ../../blobs/
hub="$tmp/hub/models--org--tiny"
mkdir -p "$hub/blobs" "$hub/snapshots/0123abcd"
for f in config.json tokenizer.json model.safetensors; do
    cp "$good/$f" "$hub/blobs/blob-$f"
    ln -s "../../blobs/blob-$f" "$hub/snapshots/0123abcd/$f"
done
hostile 0 "" info "$hub/snapshots/0123abcd"
hostile 0 "" sample "$hub/snapshots/0123abcd" --prompt hi --tokens 2 --seed 1

# ---- finding 5: overlapping or out-of-order tensor data ---------------------------------------------------------
python3 - "$tmp" <<'PY'
import os, sys
sys.path.insert(0, "tests/cli")
import errors_mkmodel as mk
out = sys.argv[1]
hp = mk.hparams(False)
names = [w[0] for w in mk.weights(hp, len(mk.vocab_tokens()))]
# GGUF: the second tensor's data at offset 0 overlaps the first; the last tensor's at 0 is stored out of order
open(os.path.join(out, "overlap.gguf"), "wb").write(mk.gguf_model(hp, fix={names[1]: {"offset": 0}}))
open(os.path.join(out, "order.gguf"), "wb").write(mk.gguf_model(hp, fix={names[-1]: {"offset": 0}}))
# safetensors: o_proj's data_offsets are q_proj's (same size, so both are well-formed alone)
def same_range(h):
    h["model.layers.0.self_attn.o_proj.weight"]["data_offsets"] = h["model.layers.0.self_attn.q_proj.weight"]["data_offsets"]
def hole(h):
    h["model.norm.weight"]["data_offsets"] = [x + 4 for x in h["model.norm.weight"]["data_offsets"]]
for name, edit in (("st-overlap", same_range), ("st-hole", hole)):
    os.makedirs(os.path.join(out, name), exist_ok=True)
    files = mk.hf_files(hp, st_kw={"header_edit": edit})
    if name == "st-hole":
        files["model.safetensors"] += b"\0" * 4
    for f, blob in files.items():
        open(os.path.join(out, name, f), "wb").write(blob)
PY
hostile 1 "overlap.gguf: tensors 'token_embd.weight' and 'blk.0.attn_norm.weight' overlap" info "$tmp/overlap.gguf"
hostile 1 "order.gguf: tensor data out of order: tensor 'output.weight'" info "$tmp/order.gguf"
hostile 1 "st-overlap/model.safetensors: tensors 'model.layers.0.self_attn.q_proj.weight' and 'model.layers.0.self_attn.o_proj.weight' overlap" \
    info "$tmp/st-overlap"
hostile 1 "st-hole/model.safetensors: a hole in the data" info "$tmp/st-hole"

echo "test_hostile_files: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
