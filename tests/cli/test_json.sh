#!/usr/bin/env bash
# One surface (issue 15): `sample --json` (the report as one JSON object on stderr, the text alone on stdout, the
# same text as without --json), `info --json` (one object on stdout, the numbers of the text output, the cache
# table with --cache-table), and the bundled model as every command's default (tokenize, info, bench, perplexity),
# with bench taking sample's cache flags and defaults (an fp32 cache; --kv-budget, --kv-quantize-sinks,
# --kv-residual-precision).
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/cli/lib.sh
T=${TINYGPT:-./tinygpt}
M=models/tinygpt-flagship.gguf
if [ ! -f "$M" ]; then
    echo "skip: $M not present"
    exit 0
fi
G=(-p "Once upon a time" -n 6 --temperature 0 -t 1)

# ---- sample --json ------------------------------------------------------------------------------------------------
"$T" sample "${G[@]}" --json >"$tmp/out" 2>"$tmp/err" || bad "sample --json: exit $?: $(tail -1 "$tmp/err")"
"$T" sample "$M" "${G[@]}" >"$tmp/out.text" 2>"$tmp/err.text"
cmp -s "$tmp/out" "$tmp/out.text" && ok || bad "sample --json changed the text on stdout"
[ "$(wc -l <"$tmp/err")" -eq 1 ] && ok || bad "sample --json: stderr is not one line: $(head -c 300 "$tmp/err")"
python3 - "$tmp/err" "$tmp/err.text" <<'PY' && ok || bad "sample --json: the report is not as expected: $(head -c 600 "$tmp/err")"
import json, re, sys
d = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
assert d["model"].endswith("models/tinygpt-flagship.gguf"), d["model"]
assert d["stop"] == "tokens" and d["generated"]["tokens"] == 6, d
assert d["sampling"]["temperature"] == 0 and d["sampling"]["top_p"] == 0.95, d["sampling"]
assert d["prompt"]["tokens"] == int(re.search(r"^prompt: (\d+) tokens", text, re.M)[1])
c = d["cache"]
assert c["position"] == d["prompt"]["tokens"] + 5 and c["stored"] == c["position"], c
assert c["bytes_total"] == c["bytes_k_data"] + c["bytes_v_data"] + c["bytes_scales"] + c["bytes_residual"], c
assert c["bytes_if_fp32"] == c["bytes_total"] and c["policy"].startswith("K fp32 / V fp32"), c
assert d["model_info"]["n_layers"] == 12 and d["model_info"]["vocab_size"] == 8192, d["model_info"]
PY
"$T" sample "${G[@]}" --json --kv-quantize int4 --streaming-llm-window 8 -n 30 2>"$tmp/err" >/dev/null
python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["cache"]; assert c["window"] == 8 and c["sink"] == 4 and c["stored"] < c["position"] and c["quantized"] > 0, c' \
    "$tmp/err" && ok || bad "sample --json (int4 window): $(head -c 600 "$tmp/err")"

# ---- info --json ------------------------------------------------------------------------------------------------
"$T" info --json >"$tmp/info.json" 2>"$tmp/err" || bad "info --json: exit $?: $(cat "$tmp/err")"
"$T" info "$M" >"$tmp/info.txt" || bad "info failed"
python3 - "$tmp/info.json" "$tmp/info.txt" <<'PY' && ok || bad "info --json differs from info: $(head -c 600 "$tmp/info.json")"
import json, re, sys
d = json.load(open(sys.argv[1]))
t = open(sys.argv[2]).read()
field = lambda name: re.search(r"^%s\s+(.*)$" % name, t, re.M)[1]
assert d["n_params"] == int(re.search(r"\((\d+)\)", field("parameters"))[1])
assert d["context_length"] == int(field("context length"))
assert d["vocab_size"] == int(field("vocab")) and d["d_model"] == int(field("d_model"))
assert d["weight_types"] == field("weight types") and d["rope_scaling"] == field("rope scaling")
bos, eos = field("BOS / EOS").split(" / ")
assert d["bos"] == int(bos) and d["eos_ids"][0] == int(eos.split()[0].rstrip(","))
assert d["kv_bytes_per_token"]["fp32"] == float(re.search(r"fp32 ([\d.]+) KiB", field("KV cache/token"))[1]) * 1024
assert "cache_table" not in d
PY
"$T" info "$M" --json --cache-table >"$tmp/table.json" || bad "info --json --cache-table failed"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["cache_table"]; assert len(r) == 72 and all(x["bytes"] > 0 for x in r) and [x["ratio_to_bf16"] for x in r if x["precision"] == "bf16" and x["policy"] == "unbounded"] == [1.0] * 6, r[:3]' \
    "$tmp/table.json" && ok || bad "info --json --cache-table: $(head -c 400 "$tmp/table.json")"

# a path JSON cannot carry (not UTF-8): one error line, nothing on stdout
bad_dir="$tmp/$(printf 'bad\377')"
cp -r models/flagship-hf "$bad_dir"
"$T" info "$bad_dir" --json >"$tmp/o" 2>"$tmp/e"
[ $? -eq 1 ] && [ ! -s "$tmp/o" ] && [ "$(wc -l <"$tmp/e")" -eq 1 ] && grep -q "not UTF-8" "$tmp/e" && ok ||
    bad "info --json on a non-UTF-8 path: $(cat "$tmp/e")"

# ---- the bundled model by default; bench with sample's cache flags --------------------------------------------------
[ "$("$T" tokenize "Hello world")" = "$("$T" tokenize "$M" "Hello world")" ] && ok || bad "tokenize TEXT: not the bundled model"
"$T" info | head -1 | grep -q 'tinygpt-flagship.gguf' && ok || bad "info: not the bundled model"
"$T" bench --prompt-tokens 4 --tokens 2 --bandwidth-mib 0 --no-warmup --json >"$tmp/b.json" 2>"$tmp/err" &&
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["model"].endswith("tinygpt-flagship.gguf") and d["kv_keys"] == "fp32" and d["kv_values"] == "fp32", d' "$tmp/b.json" &&
    ok || bad "bench: not the bundled model with an fp32 cache: $(head -c 300 "$tmp/b.json") $(cat "$tmp/err")"
"$T" bench --prompt-tokens 4 --tokens 2 --bandwidth-mib 0 --no-warmup --json --kv-quantize int4 --kv-budget 1M \
    --kv-quantize-sinks --kv-residual-precision bf16 >"$tmp/b.json" 2>"$tmp/err" &&
    python3 -c 'import json,sys; p=json.load(open(sys.argv[1]))["cache_policy"]; assert "kv-budget" in p and "sinks quantised" in p, p' "$tmp/b.json" &&
    ok || bad "bench with sample's cache flags: $(head -c 400 "$tmp/b.json") $(cat "$tmp/err")"
printf 'the cat sat on the mat. the dog sat on the log.\n' >"$tmp/text"
"$T" perplexity "$tmp/text" --quiet >"$tmp/p1" 2>/dev/null && "$T" perplexity "$M" "$tmp/text" --quiet >"$tmp/p2" 2>/dev/null &&
    [ "$(grep '^perplexity' "$tmp/p1")" = "$(grep '^perplexity' "$tmp/p2")" ] && grep -q 'tinygpt-flagship.gguf' "$tmp/p1" &&
    ok || bad "perplexity FILE: not the bundled model: $(cat "$tmp/p1")"

echo "test_json: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
