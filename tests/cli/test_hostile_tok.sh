#!/usr/bin/env bash
# test_hostile_tok.sh — hostile tokenizers and texts (issue 11, tokenizer part): each reproducer runs the sanitizer
# build under `timeout 10` and must end within 10 s and 1 GiB of resident memory, with exit 0 or exactly one stderr
# line naming tokenizer.json (or the GGUF) and nothing on stdout.
#   1  a Metaspace pre-tokenizer whose replacement is a 4-byte emoji, over 9 KB of mostly spaces (was a heap overflow)
#   4a 24 and 30 chained Replace normalizers "a" -> "aa" (was 16.7 M ids / minutes; now the expansion ceiling)
#   4b 20,000 added tokens sharing a first byte, over a 120 KB text of that byte (was text x added tokens)
#   5  a Split pattern '(unclosed' (the message must name tokenizer.json)
# and the other ceilings: pre-tokenizer expansion (Metaspace steps whose replacement is four spaces), 65 normalizers.
# Uses $TINYGPT (the sanitizer build). Exit status is non-zero when any check failed.
set -u
cd "$(dirname "$0")/../.." || exit 2
T=${TINYGPT:-$PWD/build/asan/tinygpt}
if [ ! -x "$T" ]; then
    echo "test_hostile_tok: $T is not built" >&2
    exit 1
fi
if ! command -v python3 >/dev/null; then
    echo "test_hostile_tok: python3 is needed to write the hostile tokenizers" >&2
    exit 1
fi

. tests/cli/lib.sh

MAX_RSS_KIB=1048576

# The hostile inputs: Hugging Face folders (the tiny model of fuzz/data/tiny-hf with another tokenizer.json), a
# vocab-only GGUF with 20,000 added tokens, and the texts.
python3 - "$tmp" <<'PY' || { echo "test_hostile_tok: writing the inputs failed"; exit 1; }
import json, os, shutil, sys
sys.path.insert(0, "tests/cli")
import errors_mkmodel as mk
out = sys.argv[1]
base = json.load(open("fuzz/data/tiny-hf/tokenizer.json"))

def folder(name, edit):
    d = os.path.join(out, name)
    os.makedirs(d)
    for f in ("config.json", "model.safetensors"):
        shutil.copy(os.path.join("fuzz/data/tiny-hf", f), d)
    tok = json.loads(json.dumps(base))
    edit(tok)
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        json.dump(tok, f)

def metaspace(t):
    t["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\U0001F600", "prepend_scheme": "always",
                          "split": False}
folder("meta4", metaspace)

def replaces(n):
    def edit(t):
        t["normalizer"] = {"type": "Sequence", "normalizers": [
            {"type": "Replace", "pattern": {"String": "a"}, "content": "aa"}] * n}
    return edit
folder("replace4", replaces(4))
folder("replace24", replaces(24))
folder("replace30", replaces(30))

def many_steps(t):
    t["normalizer"] = {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "x"}] * 65}
folder("steps65", many_steps)

def pre_expand(t):  # each step turns a space into four: 4^8 times the spaces
    t["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Metaspace", "replacement": "    ", "prepend_scheme": "never", "split": False}] * 8}
folder("pre-expand", pre_expand)

def unclosed(t):
    t["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated",
                          "invert": False}
folder("pattern", unclosed)

# 20,000 user-defined tokens "a<n>z", all starting with the byte the text is made of
toks, types, scores = mk.spm_tokens()
added = ["a%dz" % i for i in range(20000)]
kvs = [
    ("general.architecture", mk.T_STRING, "llama"),
    ("tokenizer.ggml.model", mk.T_STRING, "llama"),
    ("tokenizer.ggml.tokens", mk.T_ARRAY, (mk.T_STRING, toks + added)),
    ("tokenizer.ggml.scores", mk.T_ARRAY, (mk.T_F32, scores + [0.0] * len(added))),
    ("tokenizer.ggml.token_type", mk.T_ARRAY, (mk.T_I32, types + [4] * len(added))),
    ("tokenizer.ggml.bos_token_id", mk.T_U32, 1),
    ("tokenizer.ggml.eos_token_id", mk.T_U32, 2),
]
with open(os.path.join(out, "added20k.gguf"), "wb") as f:
    f.write(mk.gguf_bytes(kvs, []))

with open(os.path.join(out, "spaces.txt"), "w") as f:  # an indented file: 9 KB, nearly all spaces
    f.write(("        " * 30 + "x = 1\n") * 37)
with open(os.path.join(out, "a120k.txt"), "w") as f:
    f.write("a" * 120000 + " a17z a19999z")
PY

# bounded NAME WANT_RC PATTERN ARGS... : `tinygpt ARGS` ends within 10 s and MAX_RSS_KIB; rc WANT_RC; when it fails,
# exactly one stderr line containing PATTERN (fixed string) and nothing on stdout; when it succeeds, one line of
# ids on stdout.
bounded() {
    local name=$1 want=$2 pattern=$3
    shift 3
    /usr/bin/time -f %M -o "$tmp/rss" timeout 10 "$T" "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$? rss lines
    rss=$(tail -1 "$tmp/rss" 2>/dev/null)
    lines=$(wc -l <"$tmp/err")
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        bad "$name: did not end within 10 s"
    elif ! [ "${rss:-x}" -eq "${rss:-x}" ] 2>/dev/null || [ "$rss" -gt "$MAX_RSS_KIB" ]; then
        bad "$name: resident memory ${rss:-unknown} KiB, limit $MAX_RSS_KIB"
    elif [ "$rc" -ne "$want" ]; then
        bad "$name: exit $rc, want $want; stderr: $(head -c 400 "$tmp/err")"
    elif [ "$rc" -ne 0 ] && [ "$lines" -ne 1 ]; then
        bad "$name: $lines lines on stderr, want 1: $(head -c 400 "$tmp/err")"
    elif [ "$rc" -ne 0 ] && ! grep -qF -- "$pattern" "$tmp/err"; then
        bad "$name: stderr lacks '$pattern': $(cat "$tmp/err")"
    elif [ "$rc" -ne 0 ] && [ -s "$tmp/out" ]; then
        bad "$name: printed on stdout before failing: $(head -c 200 "$tmp/out")"
    elif [ "$rc" -eq 0 ] && { [ -s "$tmp/err" ] || [ "$(wc -l <"$tmp/out")" -ne 1 ]; }; then
        bad "$name: succeeded but stdout is not one line of ids or stderr is not empty: $(head -c 200 "$tmp/err")"
    else
        ok
    fi
}

# 1: every space becomes the 4-byte replacement (and one goes in front): the text encodes. U+1F600 is not in the
# byte-level vocabulary (and there is no unk), so it is dropped; the 37 lines' 'x' must all come through.
bounded "metaspace 4-byte replacement, 9 KB of spaces" 0 "" tokenize "$tmp/meta4" "$(cat "$tmp/spaces.txt")"
x_id=$("$T" tokenize "$tmp/meta4" x 2>/dev/null)
if [ -n "$x_id" ] && [ "$(tr ' ' '\n' <"$tmp/out" | grep -cx -- "$x_id")" -eq 37 ]; then ok
else bad "metaspace: want the id of 'x' ($x_id) 37 times in the output"; fi

# 4a: Replace chains past the expansion ceiling: one error naming the file and the limit
limit="normalizer expands the input beyond"
bounded "24 chained Replace steps" 1 "$tmp/replace24/tokenizer.json: $limit" tokenize "$tmp/replace24" "aaaa"
grep -qF "(limit: 16x the input + 4096 bytes)" "$tmp/err" && ok ||
    bad "replace24: the limit is not stated: $(cat "$tmp/err")"
bounded "30 chained Replace steps" 1 "$tmp/replace30/tokenizer.json: $limit" tokenize "$tmp/replace30" "aaaa"
# a chain that stays under the ceiling still works: 4 steps turn "a" into 16 a's, and the empty text stays empty
bounded "4 Replace steps" 0 "" tokenize "$tmp/replace4" "a"
[ "$(wc -w <"$tmp/out")" -eq 16 ] && ok || bad "replace4: want 16 ids, got: $(cat "$tmp/out")"
bounded "24 Replace steps, empty text" 0 "" tokenize "$tmp/replace24" ""

# the same ceiling on the pre-tokenizer side, and the cap on the number of steps
bounded "8 chained space-multiplying Metaspace steps" 1 \
    "$tmp/pre-expand/tokenizer.json: pre-tokenizer expands the input beyond" tokenize "$tmp/pre-expand" "a b c d"
bounded "65 normalizers" 1 "$tmp/steps65/tokenizer.json: more than 64 normalizers (limit: 64)" tokenize "$tmp/steps65" x

# 4b: 20,000 added tokens over 120 KB: linear matching; the two real added tokens at the end are found
bounded "20k added tokens, 120 KB text" 0 "" tokenize "$tmp/added20k.gguf" "$(cat "$tmp/a120k.txt")"
# ids: 3 specials + 256 bytes + 17 pieces = 276, then "a<n>z" is 276 + n
last=$(tr ' ' '\n' <"$tmp/out" | tail -1)
n17=$(tr ' ' '\n' <"$tmp/out" | grep -cx 293)
[ "$last" = 20275 ] && [ "$n17" -eq 1 ] && ok ||
    bad "added20k: last id '$last' (want 20275), id 293 $n17 times (want 1)"

# 5: the pattern error names tokenizer.json
bounded "unclosed pattern" 1 "$tmp/pattern/tokenizer.json: tokenizer pattern '(unclosed'" tokenize "$tmp/pattern" x

echo "test_hostile_tok: $passed checks passed, $failed failed"
[ "$failed" -eq 0 ]
