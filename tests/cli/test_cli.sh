#!/usr/bin/env bash
# test_cli.sh — the tinygpt command-line tool: help and exit statuses, one-line messages naming the bad flag or
# file, `tokenize` against llama.cpp's vocab test cases, and `sample` on the fixture models (streaming to a closed
# pipe, seeds, the context limit). Uses $TINYGPT (the sanitizer build); cases whose data is absent are skipped with
# a message. Exit status is non-zero when any check failed.
set -u
cd "$(dirname "$0")/../.." || exit 2
T=${TINYGPT:-$PWD/build/asan/tinygpt}
VOCAB_DIR=${TG_SHARED_DIR:-../shared}/testdata/vocab
FIXTURE_DIR=${TG_FIXTURE_DIR:-tests/data/fixtures}
if [ ! -x "$T" ]; then
    echo "test_cli: $T is not built" >&2
    exit 1
fi

. tests/cli/lib.sh

# run ARGS... : runs the tool, leaving stdout in $tmp/out, stderr in $tmp/err and the status in $rc.
run() {
    "$T" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
}

# expect_fail STATUS PATTERN ARGS... : the tool exits with STATUS, prints exactly one line on stderr that contains
# PATTERN (a fixed string), and nothing on stdout.
expect_fail() {
    local want=$1 pattern=$2
    shift 2
    run "$@"
    local lines
    lines=$(wc -l <"$tmp/err")
    if [ "$rc" -ne "$want" ]; then
        bad "tinygpt $* -> exit $rc, want $want; stderr: $(head -c 300 "$tmp/err")"
    elif [ "$lines" -ne 1 ]; then
        bad "tinygpt $* -> $lines lines on stderr, want 1: $(head -c 300 "$tmp/err")"
    elif ! grep -qF -- "$pattern" "$tmp/err"; then
        bad "tinygpt $* -> stderr lacks '$pattern': $(cat "$tmp/err")"
    elif [ -s "$tmp/out" ]; then
        bad "tinygpt $* -> printed on stdout: $(head -c 200 "$tmp/out")"
    else
        ok
    fi
}

# expect_ok PATTERN ARGS... : exit 0 and stdout contains PATTERN (when not empty).
expect_ok() {
    local pattern=$1
    shift
    run "$@"
    if [ "$rc" -ne 0 ]; then
        bad "tinygpt $* -> exit $rc; stderr: $(head -c 300 "$tmp/err")"
    elif [ -n "$pattern" ] && ! grep -qF -- "$pattern" "$tmp/out"; then
        bad "tinygpt $* -> stdout lacks '$pattern'"
    else
        ok
    fi
}

# ---- help and usage ---------------------------------------------------------------------------------------------
expect_ok "usage: tinygpt" --help
expect_ok "usage: tinygpt" help
expect_ok "usage: tinygpt" -h
expect_ok "usage: tinygpt sample" sample --help
expect_ok "--kv-quantize" sample --help
expect_ok "usage: tinygpt tokenize" tokenize --help
expect_ok "usage: tinygpt info" info --help
expect_ok "usage: tinygpt sample" help sample
run
if [ "$rc" -eq 2 ] && grep -qF "usage: tinygpt" "$tmp/err"; then ok; else bad "tinygpt (no arguments) -> exit $rc"; fi

expect_fail 2 "unknown command 'frobnicate'" frobnicate
expect_fail 2 "unknown command 'frob?nicate'" $'frob\nnicate'
expect_fail 2 "unknown option '--bogus'" sample --bogus 1
expect_fail 2 "unknown option '--bogus'" sample --prompt hi --bogus
expect_fail 2 "unknown option '--bos'" info x.gguf --bos
expect_fail 2 "--tokens: missing value" sample --tokens
expect_fail 2 "--prompt: missing value" sample --prompt
expect_fail 2 "tinygpt sample: --tokens: expected a positive integer, got 'abc'" sample --tokens abc
expect_fail 2 "--tokens: expected a positive integer, got '12abc'" sample --tokens 12abc
expect_fail 2 "--tokens: expected a positive integer, got ''" sample --tokens ''
expect_fail 2 "--tokens: expected a positive integer, got ' 5'" sample --tokens ' 5'
expect_fail 2 "--tokens: expected a positive integer, got '0'" sample --tokens 0
expect_fail 2 "--tokens: expected a positive integer, got '99999999999999999999'" sample --tokens 99999999999999999999
expect_fail 2 "--top-k: expected a non-negative integer" sample --top-k 1.5
expect_fail 2 "--top-k: expected a non-negative integer" sample --top-k -1
expect_fail 2 "--threads: expected a non-negative integer up to 4096, got '5000'" sample --threads 5000
expect_fail 2 "--temperature: expected a number" sample --temperature warm
expect_fail 2 "--temperature: expected a number" sample --temperature -0.5
expect_fail 2 "--temperature: expected a number" sample --temperature nan
expect_fail 2 "--top-p: expected a number from 0 to 1, got '1.5'" sample --top-p 1.5
expect_fail 2 "--seed: expected a non-negative integer" sample --seed -1
expect_fail 2 "--seed: expected a non-negative integer" sample --seed 18446744073709551616
expect_fail 2 "--kv-budget: expected a size in bytes" sample --kv-budget 12X
expect_fail 2 "--kv-budget: expected a size in bytes" sample --kv-budget 0
expect_fail 2 "--kv-budget: expected a size in bytes" sample --kv-budget 99999999999T
expect_fail 2 "--kv-quantize: expected one of fp32, fp16, bf16, int8, int4, int2, got 'int3'" sample --kv-quantize int3
expect_fail 2 "--kv-quantize-keys: expected one of" sample --kv-quantize-keys q4
expect_fail 2 "--kv-quantize-values: expected one of" sample --kv-quantize-values ''
expect_fail 2 "--streaming-llm-window: expected a positive integer" sample --streaming-llm-window 0
expect_fail 2 "--streaming-llm-sink: expected a non-negative integer" sample --streaming-llm-sink x
expect_fail 2 "--kv-group-size: expected a non-negative integer" sample --kv-group-size -4
expect_fail 2 "--kv-residual: expected a non-negative integer" sample --kv-residual many
expect_fail 2 "--no-echo: takes no value" sample --no-echo=yes
expect_fail 2 "--tokens: expected a positive integer, got 'x'" sample --tokens=x
expect_fail 2 "unexpected argument 'extra'" sample a.gguf extra
expect_fail 2 "expected [MODEL] TEXT" tokenize

# ---- files that are not models ----------------------------------------------------------------------------------
expect_fail 1 "$tmp/missing.gguf" info "$tmp/missing.gguf"
expect_fail 1 "$tmp/missing.gguf" sample "$tmp/missing.gguf" --prompt hi --tokens 2
expect_fail 1 "$tmp/missing.gguf" tokenize "$tmp/missing.gguf" hello
mkdir "$tmp/emptydir"
expect_fail 1 "emptydir" info "$tmp/emptydir"
echo "just some text, not a model" >"$tmp/notes.txt"
expect_fail 1 "notes.txt" info "$tmp/notes.txt"
expect_fail 1 "notes.txt" sample "$tmp/notes.txt" --prompt hi
# A GGUF v3 header cut short: magic, version, then half of the tensor count.
printf 'GGUF\003\000\000\000\001\000\000' >"$tmp/cut.gguf"
expect_fail 1 "cut.gguf" info "$tmp/cut.gguf"
: >"$tmp/empty.gguf"
expect_fail 1 "empty.gguf" info "$tmp/empty.gguf"

# ---- the bundled model --------------------------------------------------------------------------------------------
if [ -f models/tinygpt-flagship.gguf ]; then
    run sample --prompt "Once upon a time" --tokens 4 --seed 1
    if [ "$rc" -eq 0 ] && [ -s "$tmp/out" ]; then ok; else bad "sample with the bundled model -> exit $rc: $(head -c 300 "$tmp/err")"; fi
else
    expect_fail 1 "models/tinygpt-flagship.gguf" sample --prompt hi --tokens 2
fi

# ---- tokenize: llama.cpp's vocab test cases ---------------------------------------------------------------------
# The .inp file holds the inputs separated by "\n__ggml_vocab_test__\n"; line i of .out the expected ids.
sep=$'\n__ggml_vocab_test__\n'
n_vocab=0
for vocab in "$VOCAB_DIR"/ggml-vocab-*.gguf; do
    [ -f "$vocab" ] && [ -f "$vocab.inp" ] && [ -f "$vocab.out" ] || continue
    n_vocab=$((n_vocab + 1))
    name=$(basename "$vocab")
    raw=$(cat "$vocab.inp"; printf x)
    raw=${raw%x}
    mapfile -t want <"$vocab.out"
    total=0 matched=0 shown=0
    while [ -n "$raw" ]; do
        if [[ "$raw" == *"$sep"* ]]; then
            text=${raw%%"$sep"*}
            raw=${raw#*"$sep"}
        else
            text=$raw
            raw=
        fi
        expect=${want[$total]-MISSING}
        expect=${expect# }
        total=$((total + 1))
        got=$("$T" tokenize "$vocab" -- "$text" 2>"$tmp/err")
        trc=$?
        if [ "$trc" -eq 0 ] && [ "$got" == "$expect" ]; then
            matched=$((matched + 1))
        elif [ "$shown" -lt 5 ]; then
            shown=$((shown + 1))
            printf '  %s case %d %q: got [%s] (exit %d %s), want [%s]\n' "$name" "$total" "$text" "$got" "$trc" \
                "$(head -c 200 "$tmp/err")" "$expect"
        fi
    done
    echo "tokenize $name: $matched of $total cases match"
    if [ "$total" -eq "${#want[@]}" ] && [ "$matched" -eq "$total" ] && [ "$total" -gt 0 ]; then
        ok
    else
        bad "tokenize $name: $matched of $total cases match (.out has ${#want[@]} lines)"
    fi
done
if [ "$n_vocab" -eq 0 ]; then
    echo "skip: no vocab GGUFs in $VOCAB_DIR"
else
    spm="$VOCAB_DIR/ggml-vocab-llama-spm.gguf"
    if [ -f "$spm" ]; then
        expect_ok "1" tokenize "$spm" "" --bos
        [ "$(cat "$tmp/out")" == "1" ] && ok || bad "tokenize --bos of an empty text on llama-spm: '$(cat "$tmp/out")', want '1'"
        expect_ok "vocab" info "$spm"
        expect_fail 1 "tokenize" sample "$spm" --prompt hi --tokens 2
        head -c 5000 "$spm" >"$tmp/vocab-cut.gguf"
        expect_fail 1 "vocab-cut.gguf" tokenize "$tmp/vocab-cut.gguf" hello
    fi
fi

# ---- sample: the fixture models -----------------------------------------------------------------------------------
model=
for cand in "$FIXTURE_DIR"/*/*.gguf "$FIXTURE_DIR"/*/; do
    [ -e "$cand" ] || continue
    [ -d "$cand" ] && [ ! -f "$cand/config.json" ] && continue
    if "$T" info "$cand" >"$tmp/info" 2>/dev/null && ! grep -q "^weights *none" "$tmp/info"; then
        model=${cand%/}
        break
    fi
done
if [ -z "$model" ]; then
    echo "skip: no fixture model with weights in $FIXTURE_DIR/ (sample cases not run)"
else
    echo "sample cases on $model"
    ctx=$(awk '/^context length/ {print $3}' "$tmp/info")
    expect_ok "" sample "$model" --prompt "Hello" --tokens 8 --seed 7
    grep -qF "seed 7" "$tmp/err" && ok || bad "the banner does not print the seed: $(cat "$tmp/err")"
    grep -qE "^generated: [0-9]+ tokens" "$tmp/err" && ok || bad "no 'generated:' report line: $(cat "$tmp/err")"
    grep -qE "^cache: " "$tmp/err" && ok || bad "no 'cache:' report line: $(cat "$tmp/err")"
    cp "$tmp/out" "$tmp/first"
    expect_ok "" sample "$model" --prompt "Hello" --tokens 8 --seed 7
    cmp -s "$tmp/out" "$tmp/first" && ok || bad "the same seed gave different text"
    expect_ok "" sample "$model" --prompt "Hello" --tokens 8 --temperature 0
    cp "$tmp/out" "$tmp/greedy"
    expect_ok "" sample "$model" --prompt "Hello" --tokens 8 --temperature 0 --seed 99
    cmp -s "$tmp/out" "$tmp/greedy" && ok || bad "greedy output depends on the seed"
    expect_ok "" sample "$model" --prompt "Hello" --tokens 8 --temperature 0 --no-echo
    [ "$(head -c 5 "$tmp/greedy")" == "Hello" ] && ok || bad "the prompt is not echoed: $(head -c 50 "$tmp/greedy")"
    [ "$(head -c 5 "$tmp/out")" != "Hello" ] && ok || bad "--no-echo still printed the prompt"
    expect_ok "" sample "$model" --prompt "" --tokens 4 --seed 3
    # A closed pipe stops the run quietly with status 0.
    "$T" sample "$model" --prompt "Hello" --tokens 100000 --ignore-eos --streaming-llm-window 32 2>"$tmp/err" | head -c 10 >/dev/null
    prc=${PIPESTATUS[0]}
    [ "$prc" -eq 0 ] && ok || bad "sample | head -c 10 -> exit $prc: $(tail -c 300 "$tmp/err")"
    if [ -n "$ctx" ] && [ "$ctx" -gt 0 ] && [ "$ctx" -le 8192 ]; then
        long=$(printf 'hello world %.0s' $(seq 1 "$ctx"))
        expect_fail 1 "--streaming-llm-window" sample "$model" --prompt "$long" --tokens 4
        run sample "$model" --prompt "$long" --tokens 4 --streaming-llm-window 32 --seed 1
        [ "$rc" -eq 0 ] && ok || bad "a long prompt with --streaming-llm-window 32 -> exit $rc: $(tail -c 300 "$tmp/err")"
        grep -qF "StreamingLLM cap" "$tmp/err" && ok || bad "no 'stored N of M' cache line under StreamingLLM: $(cat "$tmp/err")"
        run sample "$model" --prompt "Hello" --tokens $((ctx + 10)) --ignore-eos --seed 1
        if [ "$rc" -eq 0 ] && grep -qF -- "--streaming-llm-window" "$tmp/err"; then ok; else
            bad "reaching the context -> exit $rc without a note naming --streaming-llm-window: $(cat "$tmp/err")"
        fi
    fi
    if [ -f "$model" ]; then
        size=$(stat -c %s "$model")
        head -c $((size / 2)) "$model" >"$tmp/half.gguf"
        expect_fail 1 "half.gguf" sample "$tmp/half.gguf" --prompt hi --tokens 2
    fi
    expect_ok "KV cache/token" info "$model"
    expect_ok "StreamingLLM 4+256" info "$model" --cache-table
fi

# ---- sample: greedy text against the fixtures' transformers goldens ------------------------------------------------
# golden.json's greedy_prompt_text / greedy_text: 48 greedy tokens from transformers in fp32. Checked on the files
# that carry the same model exactly: the Hugging Face folder and the fp32 GGUFs written by tools/export_gguf.py
# (golden.json's gguf_files says who made each; llama.cpp's converter changes the tokenizer scores and drops the
# sliding window). Leading spaces are not compared (transformers decodes the continuation alone, the tool as a
# continuation of the prompt).
json_string() { # json_string KEY FILE: a string value without escapes (empty when absent or escaped)
    local v
    v=$(grep -o "\"$1\": *\"[^\"\\]*\"" "$2" | head -n 1)
    v=${v#*: }
    v=${v#\"}
    printf '%s' "${v%\"}"
}
n_golden=0
for golden in "$FIXTURE_DIR"/*/golden.json; do
    [ -f "$golden" ] || continue
    dir=$(dirname "$golden")
    prompt=$(json_string greedy_prompt_text "$golden")
    want=$(json_string greedy_text "$golden")
    if [ -z "$prompt" ] || [ -z "$want" ]; then
        echo "skip: $golden has no plain greedy_prompt_text / greedy_text"
        continue
    fi
    for m in "$dir" "$dir"/*.gguf; do
        [ -e "$m" ] || continue
        [ -d "$m" ] && [ ! -f "$m/config.json" ] && continue
        [ -f "$m" ] && ! grep -qF "\"$(basename "$m")\": \"tools/export_gguf.py f32" "$golden" && continue
        n_golden=$((n_golden + 1))
        run sample "$m" --prompt "$prompt" --tokens 48 --temperature 0 --ignore-eos --no-echo --threads 1
        got=$(cat "$tmp/out")
        if [ "$rc" -eq 0 ] && [ "${got# }" == "${want# }" ]; then
            ok
        else
            bad "greedy text of $m (exit $rc): got '$got', want '$want'; $(tail -c 200 "$tmp/err")"
        fi
    done
done
[ "$n_golden" -gt 0 ] && echo "greedy goldens: $n_golden models checked" || echo "skip: no fixture goldens in $FIXTURE_DIR"

echo "test_cli: $passed checks passed, $failed failed"
[ "$failed" -eq 0 ]
