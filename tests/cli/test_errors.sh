#!/usr/bin/env bash
# test_errors.sh — every user-facing error of docs/errors.md, triggered on purpose: each must be exactly one line on
# stderr naming the file or flag and the problem, print nothing on stdout, and exit with 1 (2 for bad usage).
# Malformed models are written by tests/cli/errors_mkmodel.py (tiny random Llama models, GGUF and Hugging Face).
# Then the Unix behaviour of `sample`: a closed pipe, Ctrl-C, invalid UTF-8 in the prompt, streamed UTF-8.
# Uses $TINYGPT (the sanitizer build). Exit status is non-zero when any check failed.
set -u
cd "$(dirname "$0")/../.." || exit 2
T=${TINYGPT:-$PWD/build/asan/tinygpt}
if [ ! -x "$T" ]; then
    echo "test_errors: $T is not built" >&2
    exit 1
fi
if ! command -v python3 >/dev/null; then
    echo "test_errors: python3 is needed to write the malformed models" >&2
    exit 1
fi

. tests/cli/lib.sh

run() {
    "$T" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
}

# expect_fail STATUS PATTERN ARGS... : exit STATUS, exactly one line on stderr containing PATTERN (fixed string),
# nothing on stdout.
expect_fail() {
    local want=$1 pattern=$2
    shift 2
    run "$@"
    local lines
    lines=$(wc -l <"$tmp/err")
    if [ "$rc" -ne "$want" ]; then
        bad "tinygpt $* -> exit $rc, want $want; stderr: $(head -c 400 "$tmp/err")"
    elif [ "$lines" -ne 1 ]; then
        bad "tinygpt $* -> $lines lines on stderr, want 1: $(head -c 400 "$tmp/err")"
    elif ! grep -qF -- "$pattern" "$tmp/err"; then
        bad "tinygpt $* -> stderr lacks '$pattern': $(cat "$tmp/err")"
    elif [ -s "$tmp/out" ]; then
        bad "tinygpt $* -> printed on stdout: $(head -c 200 "$tmp/out")"
    else
        ok
    fi
}

# model_fails_in "CMDS" NAME PATTERN : loading $tmp/m/NAME fails the same way for each of CMDS (info, tokenize,
# sample); the message names the file (or the file inside the folder) and contains PATTERN. What each command reads
# differs: info reads a folder's config.json and the headers (not the values) of whatever weights and tokenizer are
# there, tokenize a folder's tokenizer files only; a GGUF file is read whole by all three.
model_fails_in() {
    local cmds=$1 name=$2 pattern=$3 path="$tmp/m/$2" cmd
    [ -e "$path" ] || path="$path.gguf"
    for cmd in $cmds; do
        case $cmd in
        info) expect_fail 1 "$pattern" info "$path" ;;
        tokenize) expect_fail 1 "$pattern" tokenize "$path" hello ;;
        sample) expect_fail 1 "$pattern" sample "$path" --prompt hi --tokens 2 --seed 1 ;;
        esac
        grep -qF "$name" "$tmp/err" || bad "$cmd $name: the message does not name the file: $(cat "$tmp/err")"
    done
}
# model_fails NAME PATTERN : the same for all three commands.
model_fails() { model_fails_in "info tokenize sample" "$@"; }
# A folder's config / weights defects: everything but tokenize, which reads only the tokenizer files.
hf_model_fails() { model_fails_in "info sample" "$@"; }

python3 tests/cli/errors_mkmodel.py "$tmp/m" >/dev/null || { echo "test_errors: errors_mkmodel.py failed"; exit 1; }
good="$tmp/m/good.gguf"
good_hf="$tmp/m/good-hf"

# ---- the good models work (so that the failures below are about the defects) ----------------------------------
for m in "$good" "$good_hf" "$tmp/m/good-q8.gguf" "$tmp/m/spm-hf"; do
    run sample "$m" --prompt "hello" --tokens 4 --seed 1 --threads 1
    [ "$rc" -eq 0 ] && ok || bad "sample $(basename "$m") -> exit $rc: $(tail -c 300 "$tmp/err")"
done

# ---- files that are missing, unreadable or not models -----------------------------------------------------------
expect_fail 1 "$tmp/nothere.gguf: cannot open: No such file or directory" info "$tmp/nothere.gguf"
expect_fail 1 "$tmp/nothere.gguf: cannot open" sample "$tmp/nothere.gguf" --prompt hi
expect_fail 1 "good.gguf/inside: cannot open: Not a directory" info "$good/inside"
if [ "$(id -u)" -ne 0 ]; then
    cp "$good" "$tmp/locked.gguf"
    chmod 000 "$tmp/locked.gguf"
    expect_fail 1 "locked.gguf: cannot open: Permission denied" info "$tmp/locked.gguf"
else
    echo "skip: running as root, a chmod 000 file is still readable"
fi
expect_fail 1 "/dev/null: not a model" info /dev/null
printf 'hello, not a model\n' >"$tmp/notes.txt"
expect_fail 1 "notes.txt: not a model" info "$tmp/notes.txt"
: >"$tmp/empty.gguf"
expect_fail 1 "empty.gguf: not a model" info "$tmp/empty.gguf"
mkdir "$tmp/emptydir"
expect_fail 1 "emptydir: not a model" sample "$tmp/emptydir" --prompt hi
hf_model_fails hf-noconfig "not a model"
model_fails magic "not a model"

# ---- GGUF: version, truncation, counts and offsets ---------------------------------------------------------------
model_fails version "unsupported GGUF version 4"
model_fails version1 "unsupported GGUF version 1"
model_fails bigendian "a big-endian file?"
model_fails trunc-header "truncated"
model_fails trunc-data "truncated: tensor 'output.weight' data"
printf 'GGUF\003\000\000\000\001\000' >"$tmp/cut.gguf" # the header itself cut short
expect_fail 1 "cut.gguf: truncated: the GGUF header" info "$tmp/cut.gguf"
model_fails nkv-huge "9223372036854775808 metadata entries cannot fit"
model_fails ntensors-huge "9223372036854775808 tensor infos cannot fit"
model_fails strlen-huge "string length 18446744073709551615"
model_fails offset-past "extends past the end of the file"
model_fails offset-overflow "data offset 18446744073709551584 extends past the end of the file"
model_fails ne-overflow "element count overflows"

# ---- model structure: shapes, architecture, types, tokenizer ----------------------------------------------------
model_fails shape "tensor 'token_embd.weight' has shape [263, 32] (rows, cols), expected [263, 64]"
model_fails missing-tensor "tensor 'blk.0.ffn_up.weight' not found"
model_fails arch "unsupported architecture 'gpt2'"
model_fails arch-falcon "unsupported architecture 'falcon'"
model_fails arch-gemma "unsupported architecture 'gemma'"
model_fails rope-yarn "rope scaling type 'yarn' is not supported"
model_fails rope-unknown "rope scaling type 'nonsense' is not supported"
model_fails qblock-matrix "is not a multiple of the Q6_K block size"
model_fails qtype "has type Q8_1 (ggml type 9), which is not supported"
model_fails qblock "is not a multiple of the Q4_K block size"
model_fails ggmltype "unknown ggml type 99"
model_fails nomerges "no tokenizer.ggml.merges"
model_fails novocab "missing metadata key llama.vocab_size"
model_fails tokmodel "unsupported tokenizer.ggml.model 'wordpiece'"
# the weights' values: info describes the file without reading them
model_fails_in "tokenize sample" nan "the output norm weights hold a NaN or infinite value"
model_fails_in "tokenize sample" inf "the token embedding weights hold a NaN or infinite value (row 0, column 1)"
model_fails_in "tokenize sample" nan-f16 "the output weights hold a NaN or infinite value"
model_fails_in "tokenize sample" inf-q8 "the down weights of layer 0 hold a NaN or infinite value"

# ---- Hugging Face folders ---------------------------------------------------------------------------------------
hf_model_fails hf-badjson "hf-badjson/config.json: bad JSON at line 1"
hf_model_fails hf-arch "unsupported architecture 'GPT2LMHeadModel'"
hf_model_fails hf-shape "expected [66, 32]"
hf_model_fails hf-dtype "has dtype I8, which is not supported"
hf_model_fails hf-headerlen "bad header length: the first 8 bytes give more than"
hf_model_fails hf-trunc "truncated: tensor 'lm_head.weight' data_offsets"
hf_model_fails hf-offsets "extend past the end of the data section"
hf_model_fails hf-shape-overflow "element count overflows"
model_fails_in sample hf-noweights "no weights: neither model.safetensors nor model.safetensors.index.json"
model_fails_in "tokenize sample" hf-notok "hf-notok/tokenizer.json: cannot open"
# ... but info describes a folder without weights or tokenizer, naming what is absent
run info "$tmp/m/hf-noweights"
[ "$rc" -eq 0 ] && grep -q "^absent  *weights (no model.safetensors or model.safetensors.index.json)" "$tmp/out" && ok ||
    bad "info hf-noweights -> exit $rc, no 'absent weights' line: $(cat "$tmp/out" "$tmp/err" | head -c 600)"
run info "$tmp/m/hf-notok"
[ "$rc" -eq 0 ] && grep -q "^absent  *tokenizer.json" "$tmp/out" && ok ||
    bad "info hf-notok -> exit $rc, no 'absent tokenizer.json' line: $(cat "$tmp/out" "$tmp/err" | head -c 600)"
model_fails hf-nomerges "hf-nomerges/tokenizer.json: model.merges missing"
model_fails hf-novocab "hf-novocab/tokenizer.json: model.vocab missing"
hf_model_fails hf-vocab "the tokenizer has 276 tokens but \"vocab_size\" is 263"
expect_fail 1 "spm-vocab.gguf has no weights" sample "$tmp/m/spm-vocab.gguf" --prompt hi

# ---- the context and the cache flags -----------------------------------------------------------------------------
long=$(printf 'hello world %.0s' $(seq 1 80)) # 160 tokens and more; the context is 64
expect_fail 1 "the context holds 64; bound the cache with --streaming-llm-window" sample "$good" --prompt "$long"
run sample "$good" --prompt "$long" --tokens 4 --streaming-llm-window 16 --seed 1 --threads 1
[ "$rc" -eq 0 ] && ok || bad "a long prompt with --streaming-llm-window 16 -> exit $rc: $(tail -c 300 "$tmp/err")"
expect_fail 2 "--streaming-llm-window: expected a positive integer" sample "$good" --streaming-llm-window 0
expect_fail 2 "--kv-budget: expected a size in bytes" sample "$good" --kv-budget 0
expect_fail 2 "--kv-group-size: expected a non-negative integer" sample "$good" --kv-group-size -1
expect_fail 1 "--kv-budget 1024: too small; even 4 sink tokens" sample "$good" --prompt hi --kv-budget 1K
expect_fail 1 "--kv-budget 4096: too small; even 1000 sink tokens" sample "$good" --prompt hi --kv-budget 4K \
    --streaming-llm-sink 1000
expect_fail 1 "--kv-residual 8 is not a multiple of --kv-group-size 3" sample "$good" --prompt hi \
    --kv-quantize int4 --kv-group-size 3 --kv-residual 8
expect_fail 1 "--kv-residual 48 is not a multiple of --kv-group-size 32" sample "$good" --prompt hi \
    --kv-quantize int2 --kv-residual 48 --streaming-llm-window 64
expect_fail 1 "--streaming-llm-sink 4 needs --streaming-llm-window" sample "$good" --prompt hi --streaming-llm-sink 4
expect_fail 1 "--kv-budget and --streaming-llm-window are exclusive" sample "$good" --prompt hi --kv-budget 1M \
    --streaming-llm-window 8
# a flag value with a newline: the message stays one line
run sample "$good" --tokens $'1\n2'
if [ "$rc" -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -qF "got '1?2'" "$tmp/err"; then ok; else
    bad "a flag value with a newline -> exit $rc, stderr: $(cat "$tmp/err")"
fi

# A full disk: the write error is reported (after the banner, for sample: it shows only when writing).
if [ -w /dev/full ]; then
    for cmd in "info $good" "tokenize $good hello" "sample $good --prompt hi --tokens 4 --seed 1 --threads 1"; do
        # shellcheck disable=SC2086
        "$T" $cmd >/dev/full 2>"$tmp/err"
        frc=$?
        if [ "$frc" -eq 1 ] && [ "$(tail -1 "$tmp/err")" == "tinygpt: writing to stdout: No space left on device" ] &&
            [ "$(grep -c 'No space' "$tmp/err")" -eq 1 ]; then
            ok
        else
            bad "tinygpt ${cmd%% *} >/dev/full -> exit $frc, stderr: $(tail -c 300 "$tmp/err")"
        fi
    done
fi

# ---- Unix behaviour -----------------------------------------------------------------------------------------------
streaming=(--streaming-llm-window 32 --ignore-eos --seed 5 --threads 1)
# A reader that goes away: exit 0, no error message.
"$T" sample "$good" --prompt "hello" --tokens 100000 "${streaming[@]}" 2>"$tmp/err" | head -c 100 >"$tmp/out"
prc=${PIPESTATUS[0]}
if [ "$prc" -eq 0 ] && [ "$(wc -c <"$tmp/out")" -eq 100 ] &&
    ! grep -qiE "error|broken pipe|^tinygpt: (write|stdout)" "$tmp/err"; then
    ok
else
    bad "sample | head -c 100 -> exit $prc, $(wc -c <"$tmp/out") bytes, stderr: $(tail -c 300 "$tmp/err")"
fi
# Ctrl-C: generation stops, the speed and cache report are still printed, exit 0.
timeout --preserve-status -s INT 3 "$T" sample "$good" --prompt "hello" --tokens 100000000 "${streaming[@]}" \
    >"$tmp/out" 2>"$tmp/err"
irc=$?
if [ "$irc" -eq 0 ] && grep -qF "stopped: interrupted" "$tmp/err" && grep -qE "^cache: " "$tmp/err" &&
    grep -qE "^generated: [0-9]+ tokens" "$tmp/err"; then
    ok
else
    bad "SIGINT -> exit $irc, stderr: $(tail -c 400 "$tmp/err")"
fi
# Invalid UTF-8 in the prompt: byte fallback (SentencePiece <0xFF> token = id 3 + 0xFF) and byte-level tokens.
run tokenize "$tmp/m/spm-vocab.gguf" $'a\xffb\xc3'
if [ "$rc" -eq 0 ] && grep -qw 258 "$tmp/out" && grep -qw 198 "$tmp/out"; then ok; else
    bad "tokenize invalid UTF-8 (SentencePiece) -> exit $rc, ids '$(cat "$tmp/out")' lack <0xFF>=258 or <0xC3>=198"
fi
run tokenize "$good" $'a\xffb\xc3'
[ "$rc" -eq 0 ] && [ "$(wc -w <"$tmp/out")" -eq 4 ] && ok ||
    bad "tokenize invalid UTF-8 (byte-level) -> exit $rc, ids '$(cat "$tmp/out")', want 4 ids"
run sample "$good" --prompt $'caf\xc3 \xff\xfe end' --tokens 16 --seed 3 --threads 1
if [ "$rc" -eq 0 ] && iconv -f UTF-8 -t UTF-8 "$tmp/out" >/dev/null 2>&1; then ok; else
    bad "sample with an invalid UTF-8 prompt -> exit $rc or invalid UTF-8 on stdout: $(od -c "$tmp/out" | head -3)"
fi
# Streamed output never splits a character: every read from the pipe (each one or more whole writes of the tool)
# is valid UTF-8 on its own. The random model emits many bytes >= 0x80, so split characters are common. The reader
# opens the FIFO first (the tool's open blocks until then), so it is reading while the tool writes.
mkfifo "$tmp/fifo"
python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
reads = bad = 0
while True:
    chunk = os.read(fd, 1 << 16)
    if not chunk:
        break
    reads += 1
    try:
        chunk.decode("utf-8")
    except UnicodeDecodeError:
        bad += 1
        print("split character in read %d: %r" % (reads, chunk[-8:]))
print("reads %d bad %d" % (reads, bad))
sys.exit(1 if bad or reads < 20 else 0)' "$tmp/fifo" >"$tmp/reads" &
reader=$!
"$T" sample "$good" --prompt "hello" --tokens 2000 "${streaming[@]}" --no-echo >"$tmp/fifo" 2>"$tmp/err"
wait "$reader"
src=$?
[ "$src" -eq 0 ] && ok || bad "streamed UTF-8: $(tail -3 "$tmp/reads")"

# --progress N (for bench/soak.sh): one line every N generated tokens with the resident memory.
run sample "$good" --prompt "hello" --tokens 20 --progress 5 "${streaming[@]}"
line='^progress: [0-9]+ tokens, [0-9.]+ tokens/s, rss [0-9]+ KiB, cache [0-9]+ tokens, cpu [0-9.]+ s$'
n_progress=$(grep -cE "$line" "$tmp/err")
[ "$rc" -eq 0 ] && [ "$n_progress" -eq 4 ] && ok || bad "--progress 5 over 20 tokens -> exit $rc, $n_progress lines"
expect_fail 2 "--progress: expected a positive integer" sample "$good" --progress 0

echo "test_errors: $passed checks passed, $failed failed"
[ "$failed" -eq 0 ]
