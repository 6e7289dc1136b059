#!/usr/bin/env bash
# Runs every unit-test binary (cmocka, built with ASan+UBSan) and every CLI test script, then prints one summary
# line "tests: N passed, M failed". Exit status is non-zero when anything failed.
#
# TG_TEST_JOBS (default: the machine's cores) tests run at once, the longest first; each test's output is printed
# whole when it ends, so outputs never interleave. No test depends on another, on timing or on the machine being
# quiet (tests/cli/lib.sh's wait_for_event), so running them side by side is also a check that they do not.
set -u
build=${1:-build/asan}
cd "$(dirname "$0")/.." || exit 2
export TINYGPT="$PWD/$build/tinygpt"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
jobs=${TG_TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# the tests: the longest first (from the suite's "time:" lines; only the order depends on it), then the rest
slow=(test_vulkan test_serve.sh test_kvcache test_vulkan.sh test_cli.sh test_errors.sh test_realmeta.sh test_kquant_llamacpp.sh
      test_family_chat.sh test_chat.sh test_park.sh)
all=()
for t in "$build"/tests/test_*; do [ -x "$t" ] && all+=("$t"); done
for s in tests/cli/test_*.sh; do [ -f "$s" ] && all+=("$s"); done
queue=()
for name in "${slow[@]}"; do
    for t in "${all[@]}"; do [ "$(basename "$t")" = "$name" ] && queue+=("$t"); done
done
for t in "${all[@]}"; do
    case " ${slow[*]} " in *" $(basename "$t") "*) ;; *) queue+=("$t") ;; esac
done

# run_one PATH: the test, its output in $logs/NAME.log, then its status and milliseconds in $logs/NAME.done
run_one() {
    local t=$1 name t0 rc
    name=$(basename "$t")
    t0=$(date +%s%N)
    case "$t" in
    *.sh) echo "== $name" >"$logs/$name.log"; bash "$t" >>"$logs/$name.log" 2>&1 ;;
    *) "$t" >"$logs/$name.log" 2>&1 ;;
    esac
    rc=$?
    echo "$rc $(( ($(date +%s%N) - t0) / 1000000 ))" >"$logs/$name.tmp" && mv "$logs/$name.tmp" "$logs/$name.done"
}

passed=0
failed=0
failures=()
times=()
# report: prints every test that ended since the last call, and counts it
report() {
    local d name rc ms
    for d in "$logs"/*.done; do
        [ -f "$d" ] || continue
        name=$(basename "$d" .done)
        read -r rc ms <"$d"
        cat "$logs/$name.log"
        if [ "$rc" -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); failures+=("$name"); fi
        times+=("$ms $name")
        rm -f "$d" "$logs/$name.log"
    done
}
running=0
for t in "${queue[@]}"; do
    if [ "$running" -ge "$jobs" ]; then
        wait -n
        running=$((running - 1))
        report
    fi
    run_one "$t" &
    running=$((running + 1))
done
wait
report
# the slowest ten, wall-clock milliseconds (where the suite's time goes; never a check)
printf '%s\n' "${times[@]}" | sort -rn | head -n 10 | awk '{ printf "time: %8.1f s  %s\n", $1 / 1000, $2 }'
if [ "$failed" -gt 0 ]; then printf 'failed: %s\n' "${failures[@]}"; fi
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ $((passed + failed)) -eq ${#queue[@]} ]
