#!/usr/bin/env bash
# Runs every unit-test binary (cmocka, built with ASan+UBSan) and every CLI test script, then prints one summary
# line "tests: N passed, M failed". Exit status is non-zero when anything failed.
set -u
build=${1:-build/asan}
cd "$(dirname "$0")/.." || exit 2
export TINYGPT="$PWD/$build/tinygpt"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
passed=0
failed=0
failures=()
times=()
for t in "$build"/tests/test_*; do
    [ -x "$t" ] || continue
    name=$(basename "$t")
    t0=$(date +%s%N)
    if "$t"; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=("$name"); fi
    times+=("$(( ($(date +%s%N) - t0) / 1000000 )) $name")
done
for s in tests/cli/test_*.sh; do
    [ -f "$s" ] || continue
    name=$(basename "$s")
    echo "== $name"
    t0=$(date +%s%N)
    if bash "$s"; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=("$name"); fi
    times+=("$(( ($(date +%s%N) - t0) / 1000000 )) $name")
done
# the slowest ten, wall-clock milliseconds (where the suite's time goes; never a check)
printf '%s\n' "${times[@]}" | sort -rn | head -n 10 | awk '{ printf "time: %8.1f s  %s\n", $1 / 1000, $2 }' 
if [ "$failed" -gt 0 ]; then printf 'failed: %s\n' "${failures[@]}"; fi
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
