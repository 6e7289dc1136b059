#!/usr/bin/env bash
# coverage.sh — source coverage that the fuzzing corpora reach: builds each harness with clang's source-based
# coverage (-fprofile-instr-generate -fcoverage-mapping, no sanitizers) into fuzz/build/cov/, runs it once over
# fuzz/build/corpus/<harness> and fuzz/seeds/<harness> (-runs=0: no fuzzing), and prints llvm-cov's line and region
# coverage of the source files that harness targets.
#
# usage: fuzz/coverage.sh [HARNESS...]   (default: all five; run `fuzz/run.sh` first to grow the corpora)
set -euo pipefail
cd "$(dirname "$0")/.."
CC=${FUZZ_CC:-clang-14}
PROFDATA=${LLVM_PROFDATA:-llvm-profdata-14}
COV=${LLVM_COV:-llvm-cov-14}
out=fuzz/build/cov
mkdir -p "$out"
flags=(-std=c11 -O1 -g -pthread -fprofile-instr-generate -fcoverage-mapping -Iinclude -Isrc
       $(pkg-config --cflags jansson libpcre2-8))
libs=($(pkg-config --libs jansson libpcre2-8) -lm)
lib_src=$(find src -name '*.c' -not -path 'src/cli/*' | sort)

# the files each harness is meant to exercise
declare -A targets=(
    [gguf]="src/format/gguf.c src/model/load_gguf.c src/model/model.c src/tokenizer/load_gguf.c"
    [hf]="src/format/safetensors.c src/model/load_hf.c src/model/model.c src/tokenizer/load_hf.c"
    [tokenizer_json]="src/tokenizer/load_hf.c src/tokenizer/tokenizer.c src/tokenizer/pretokenize.c"
    [tokenize]="src/tokenizer/encode.c src/tokenizer/bpe.c src/tokenizer/spm.c src/tokenizer/pretokenize.c
                src/tokenizer/decode.c src/tokenizer/detok.c src/tokenizer/utf8.c"
    [args]="src/cli/args.c src/kvcache/policy.c"
)
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(gguf hf tokenizer_json tokenize args)

for h in "${harnesses[@]}"; do
    bin=$out/fuzz_$h
    # shellcheck disable=SC2086
    "$CC" "${flags[@]}" -fsanitize=fuzzer -o "$bin" "fuzz/fuzz_$h.c" src/cli/args.c $lib_src "${libs[@]}"
    rm -f "$out/$h.profraw"
    dirs=("fuzz/seeds/$h")
    [ -d "fuzz/build/corpus/$h" ] && dirs=("fuzz/build/corpus/$h" "${dirs[@]}")
    LLVM_PROFILE_FILE="$out/$h.profraw" "$bin" -runs=0 "${dirs[@]}" >"$out/$h.log" 2>&1 || true
    "$PROFDATA" merge -sparse "$out/$h.profraw" -o "$out/$h.profdata"
    echo "== $h ($(ls "${dirs[@]}" | wc -l) inputs)"
    # shellcheck disable=SC2086
    "$COV" report "$bin" -instr-profile="$out/$h.profdata" ${targets[$h]} | awk '/\.c |^TOTAL/' |
        awk '{ printf "  %-28s lines %7s  regions %7s  branches %7s\n", $1, $10, $4, $13 }'
done
