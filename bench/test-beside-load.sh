#!/usr/bin/env bash
# bench/test-beside-load.sh — issue 55's check that no test depends on timing: `make test` RUNS times in a row (default
# 3) while bench/serve-load keeps a server busy beside it (4 and 16 streaming clients of 128 tokens each on the
# bundled model, over and over, at the same priority), so that every test runs on a loaded machine. Not a test
# itself: it takes about RUNS x 20 minutes on 2 cores. Prints each run's summary line and, at the end, the rows the
# load produced and the machine's load average; the exit status is non-zero when any run failed.
#
#   bench/test-beside-load.sh [RUNS]            logs in $TG_BESIDE_DIR (default /tmp/tg-beside)
set -u
cd "$(dirname "$0")/.." || exit 2
runs=${1:-3}
dir=${TG_BESIDE_DIR:-/tmp/tg-beside}
mkdir -p "$dir"
make -j2 tinygpt >/dev/null || exit 2
stop=$dir/stop
rm -f "$stop"
(
    while [ ! -f "$stop" ]; do
        python3 bench/serve-load --tinygpt ./tinygpt --clients 4,16 --tokens 128 --threads 2 --run-limit 600 \
            >>"$dir/load.txt" 2>&1
    done
) &
load=$!
sleep 5 # the first server is up and loading the model: the load is there when the tests start
status=0
for k in $(seq "$runs"); do
    t0=$(date +%s)
    make test >"$dir/test$k.log" 2>&1
    st=$?
    [ "$st" -eq 0 ] || status=1
    echo "run $k: exit $st, $(($(date +%s) - t0)) s, $(grep -E '^tests: ' "$dir/test$k.log" | tail -1)," \
        "load average $(cut -d' ' -f1-3 /proc/loadavg)"
    [ "$st" -eq 0 ] || grep -E '^(FAIL|failed)' "$dir/test$k.log" | head -20
done
touch "$stop"
wait "$load"
echo "the load beside (bench/serve-load rows, $dir/load.txt):"
grep -E '^\| tinygpt' "$dir/load.txt" | head -40; echo "$(grep -c '^| tinygpt' "$dir/load.txt") rows"
exit $status
