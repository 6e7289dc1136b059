#!/usr/bin/env bash
# make test-aarch64's runner: the aarch64 build (BUILD: its test binaries and tinygpt, cross-compiled under UBSan) run
# under qemu-user once per CPU model in CPUS, so that every kernel table runs: `max` (dotprod + i8mm: the i8mm
# table), `neoverse-n1` (dotprod, no i8mm: the dotprod table), `cortex-a53` (ARMv8.0: the NEON table). For each model:
# the unit tests named (of test_forward, chunked prefill against token-by-token decoding alone: the whole file is too
# slow emulated), `tinygpt bench`'s kernel line, and the bundled model's greedy golden (the first prompt of
# models/golden/flagship-greedy.json, 16 tokens, fp32 cache, which must be the start of the golden text transformers
# computed); on `neoverse-n1`, whose dotprod table is `max`'s i8mm one but for the Q8_0 / Q4_0 prefill (and which
# test_isa on `max` also runs), test_isa and test_forward's chunked prefill alone of the unit tests. Once, on `max`:
# the scalar table (TG_ISA=scalar) on the same golden. Prints "tests: N passed, M failed"; non-zero exit when anything
# failed.
# usage: tests/aarch64.sh BUILD "CPUS" TEST...
set -u
cd "$(dirname "$0")/.." || exit 2
build=$1 cpus=$2
shift 2
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TG_TEST_QUICK=1 # the unit tests that know it sweep fewer shapes under emulation (test_attend_int)
passed=0 failed=0 failures=()
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); failures+=("$1"); echo "FAIL: $1"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

MODEL=models/tinygpt-flagship.gguf
python3 - models/golden/flagship-greedy.json "$tmp" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))[0]
open(f"{sys.argv[2]}/prompt", "w").write(c["prompt"])
open(f"{sys.argv[2]}/golden", "w").write(c["text"])
PY

# golden NAME CPU [ENV...]: 16 greedy tokens of the first prompt, the start of the golden text
golden() {
    local name=$1 wrap=$2
    shift 2
    env "$@" "$wrap" "$build/tinygpt" sample "$MODEL" --prompt "$(cat "$tmp/prompt")" --tokens 16 --temperature 0 \
        --ignore-eos --no-echo --threads 2 >"$tmp/out" 2>"$tmp/err" || { bad "$name: exit $?: $(tail -1 "$tmp/err")"; return; }
    local n
    n=$(wc -c <"$tmp/out")
    if [ "$n" -gt 0 ] && cmp -s -n "$n" "$tmp/out" "$tmp/golden"; then ok; echo "$name: ok ($(cat "$tmp/out" | head -c 60)...)"
    else bad "$name: greedy differs from the golden: $(cat "$tmp/out")"; fi
}

for cpu in $cpus; do
    wrap="$PWD/$build/qemu-$cpu"
    printf '#!/bin/sh\nexec qemu-aarch64 -cpu %s "$@"\n' "$cpu" >"$wrap"
    chmod +x "$wrap"
    echo "== qemu-aarch64 -cpu $cpu"
    for t in "$@"; do
        # neoverse-n1's dotprod table differs from max's i8mm one in the Q8_0 / Q4_0 prefill alone: of the unit
        # tests, test_isa's dispatch and test_forward's chunked prefill
        [ "$cpu" = neoverse-n1 ] && [ "$t" != test_isa ] && [ "$t" != test_forward ] && continue
        [ -x "$build/tests/$t" ] || { bad "$cpu $t: not built"; continue; }
        filter=
        [ "$t" = test_forward ] && filter='*chunk_equals_single_tokens'
        if TG_TEST_EMULATOR="$wrap" TG_TEST_FILTER=$filter "$wrap" "$build/tests/$t" >"$tmp/log" 2>&1; then ok
        else bad "$cpu $t"; grep -E 'ERROR|FAILED|runtime error' "$tmp/log" | head -20; fi
    done
    line=$("$wrap" "$build/tinygpt" bench "$MODEL" --tokens 2 --prompt-tokens 8 --threads 1 --bandwidth-mib 0 \
        --no-warmup 2>&1 | grep "kernels:")
    echo "$cpu bench: $line"
    case "$cpu:$line" in
        cortex-a53:*"kernels: neon)"*|neoverse-n1:*"kernels: dotprod)"*|max:*"kernels: i8mm)"*) ok ;;
        *) bad "$cpu: bench's kernel line: $line" ;;
    esac
    golden "$cpu golden" "$wrap"
done
golden "max TG_ISA=scalar golden" "$PWD/$build/qemu-max" TG_ISA=scalar

[ "$failed" -gt 0 ] && printf 'failed: %s\n' "${failures[@]}"
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
