#!/usr/bin/env bash
# run.sh — runs one libFuzzer harness: fuzz/run.sh HARNESS [SECONDS] [extra libFuzzer flags...]
# HARNESS is gguf, hf, folder, tokenizer_json, tokenizer_text, tokenize, args, cli_text, chat_template,
# serve_request or serve_http
# (fuzz/build/fuzz_HARNESS, built by `make fuzz`).
# The growing corpus lives in fuzz/build/corpus/HARNESS (seeded from fuzz/seeds/HARNESS, which stays untouched),
# crashes land in fuzz/build/crashes/HARNESS/, the log in fuzz/build/logs/HARNESS.log; one job, one process.
# At the end it prints the executions, the coverage (libFuzzer's "cov" = covered edges) and the corpus size.
set -euo pipefail
cd "$(dirname "$0")/.."
h=${1:?usage: fuzz/run.sh HARNESS [SECONDS] [libFuzzer flags...]}
secs=${2:-600}
shift $(($# >= 2 ? 2 : 1))
bin=fuzz/build/fuzz_$h
[ -x "$bin" ] || { echo "run.sh: $bin is not built (make fuzz)" >&2; exit 2; }
mkdir -p "fuzz/build/corpus/$h" "fuzz/build/crashes/$h" fuzz/build/logs
dict=()
case $h in
hf | tokenizer_json | tokenizer_text | folder | serve_request | serve_http) dict=(-dict=fuzz/dict/json.dict) ;;
args) dict=(-dict=fuzz/dict/args.dict) ;;
gguf) dict=(-dict=fuzz/dict/gguf.dict) ;;
chat_template) dict=(-dict=fuzz/dict/jinja.dict) ;;
esac
log=fuzz/build/logs/$h.log
# serve_http's server threads free a request's memory after its answer is read, which libFuzzer's per-input leak
# check would report: that harness runs without it (the server's leaks are test_serve.sh's to find: its ASan server
# exits, and LeakSanitizer reports)
leaks=1
[ "$h" = serve_http ] && leaks=0
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=$leaks:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
"$bin" "fuzz/build/corpus/$h" "fuzz/seeds/$h" "${dict[@]}" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 \
    -malloc_limit_mb=1024 -max_len=65536 -print_final_stats=1 -artifact_prefix="fuzz/build/crashes/$h/" "$@" \
    >"$log" 2>&1 || status=$?
execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo "?")
cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$log" | tail -1 || echo "?")
echo "$h: ${secs}s, $execs executions, $cov, corpus $(ls "fuzz/build/corpus/$h" | wc -l) files, exit $status"
ls "fuzz/build/crashes/$h" | sed 's/^/  crash: /'
exit $status
