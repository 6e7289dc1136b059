#!/usr/bin/env bash
# hostile_input_repro.sh BIN — runs the hostile-input reproducers of issue 11 (tests/cli/test_hostile_*.sh hold
# them as tests) with the tinygpt binary BIN from the repository root and prints each command, the first lines of
# its output, its exit status, time and max RSS (to compare any binary, an old one too, case by case).
# MAXMEM="--max-memory 1T" lets 4c run past the memory check on binaries that have it.
B=$(realpath "${1:?usage: tools/hostile_input_repro.sh BIN}"); cd "$(dirname "$0")/.." || exit 2; D=$(mktemp -d); trap 'rm -rf "$D"' EXIT
python3 - "$D" <<'PY'
import json, os, shutil, sys
d = sys.argv[1]
base = json.load(open("fuzz/data/tiny-hf/tokenizer.json"))
def folder(name, edit=None):
    p = os.path.join(d, name); os.makedirs(p)
    for f in ("config.json", "model.safetensors", "tokenizer.json"):
        shutil.copy(os.path.join("fuzz/data/tiny-hf", f), p)
    if edit:
        t = json.loads(json.dumps(base)); edit(t)
        json.dump(t, open(os.path.join(p, "tokenizer.json"), "w"))
def meta(t): t["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\U0001F600", "prepend_scheme": "always", "split": False}
folder("meta4", meta)
def rep(t): t["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "Replace", "pattern": {"String": "a"}, "content": "aa"}] * 30}
folder("replace30", rep)
def pat(t): t["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated", "invert": False}
folder("pattern", pat)
folder("fifo"); os.remove(os.path.join(d, "fifo", "config.json")); os.mkfifo(os.path.join(d, "fifo", "config.json"))
folder("dircfg"); os.remove(os.path.join(d, "dircfg", "config.json")); os.mkdir(os.path.join(d, "dircfg", "config.json"))
folder("passwd"); os.remove(os.path.join(d, "passwd", "model.safetensors")); os.symlink("/etc/passwd", os.path.join(d, "passwd", "model.safetensors"))
line = "    " * 2000 + "def f(x):\n" + "        return x\n" * 40
open(os.path.join(d, "spaces.txt"), "w").write(line)
open(os.path.join(d, "prompts.txt"), "wb").write(b"a\xc3" + b"\x80" * 400 + b"\n")
PY
run() { local a show=""; for a in "$@"; do a=${a//$D\//}; [ ${#a} -gt 40 ] && a="'${a:0:20}…' (${#a} bytes)"; show+=" $a"; done; echo "\$ tinygpt$show"; /usr/bin/time -o "$D/time" -f "%e s, max RSS %M KiB" timeout 60 "$B" "$@" >"$D/out" 2>"$D/err"; rc=$?; head -c 300 "$D/out" | head -3; head -3 "$D/err" | cut -c1-300; echo "[rc=$rc, stdout $(wc -c <"$D/out") bytes, $(tail -1 "$D/time")]"; echo; }
echo "## 1 Metaspace with a 4-byte replacement over 9 KB of mostly spaces"
run tokenize "$D/meta4" "$(cat "$D/spaces.txt")"
echo "## 2 compare: a prompt line of one lead byte and 400 continuation bytes (the overflow shows under an ASan build)"
run compare models/tinygpt-flagship.gguf --prompts "$D/prompts.txt" --tokens 1 --kv-quantize int8 --streaming-llm-window 64
echo "## 3 a FIFO as config.json"
run info "$D/fifo"
echo "## 4a 30 chained Replace normalizers"
run tokenize "$D/replace30" aaaa
echo "## 4c re-positioning with a 16M window"
run sample models/tinygpt-flagship.gguf --prompt "a" --tokens 2 --streaming-llm-window 16777216 --streaming-llm-reposition --temperature 0 $MAXMEM
echo "## 4d perplexity --max-tokens 2 on /dev/zero"
run perplexity models/tinygpt-flagship.gguf /dev/zero --max-tokens 2
echo "## 4e a 45 GiB cache on a 23 GiB machine"
run sample models/tinygpt-flagship.gguf --prompt hi --tokens 2 --streaming-llm-window 4000000
echo "## 5 --every 1000000"
run perplexity models/tinygpt-flagship.gguf models/data/valid.txt --max-tokens 100 --every 1000000
echo "## 5 a tokenizer pattern that does not compile"
run tokenize "$D/pattern" x
echo "## 5 a directory as config.json"
run info "$D/dircfg"
echo "## 5 model.safetensors a symlink to /etc/passwd"
run info "$D/passwd"
