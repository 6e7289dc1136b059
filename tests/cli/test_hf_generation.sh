#!/usr/bin/env bash
# test_hf_generation.sh — what a Hugging Face folder says about generating, through `tinygpt sample`: on the
# transformers-made folder tests/data/real/rope-linear (config.json "eos_token_id": [0, 2]; generation_config.json
# do_sample, temperature 0.7, top_k 20, top_p 0.85; with the SmolLM2-layout tokenizer of our fixture), the sampling
# settings replace tinygpt's defaults when no flag is given and the banner says so, a flag overrides its setting, and
# generation stops at any id of the eos_token_id list (the greedy first token after "the" is 2, the list's second).
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/cli/lib.sh
T=${TINYGPT:?}
m=$tmp/m
mkdir "$m"
cp tests/data/real/rope-linear/config.json tests/data/real/rope-linear/model.safetensors \
    tests/data/real/rope-linear/generation_config.json tests/data/fixtures/smollm2/tokenizer.json "$m/"
run() { "$T" "$@" >"$tmp/out" 2>"$tmp/err"; rc=$?; }

run sample "$m" --prompt the --tokens 4 --seed 1 --threads 1
if [ "$rc" -eq 0 ] && grep -qF "sampling temperature 0.7 · top-k 20 · top-p 0.85 · seed 1" "$tmp/err" &&
    grep -qF "sampling defaults from generation_config.json: temperature 0.7, top-k 20, top-p 0.85 (flags override" \
        "$tmp/err"; then ok; else bad "sample without flags: $(head -c 600 "$tmp/err")"; fi

run sample "$m" --prompt the --tokens 4 --seed 1 --threads 1 --top-p 0.5
if [ "$rc" -eq 0 ] && grep -qF "sampling temperature 0.7 · top-k 20 · top-p 0.5 · seed 1" "$tmp/err" &&
    grep -qF "generation_config.json: temperature 0.7, top-k 20 (flags" "$tmp/err"; then ok; else
    bad "sample --top-p 0.5: $(head -c 600 "$tmp/err")"; fi

# greedy: the first token is 2, the second id of config.json's [0, 2]
run sample "$m" --prompt the --tokens 8 --temperature 0 --threads 1
if [ "$rc" -eq 0 ] && grep -qF "generated: 0 tokens" "$tmp/err" && grep -qF "stopped: end of sequence" "$tmp/err" &&
    ! grep -qF "sampling defaults" "$tmp/err"; then ok; else bad "greedy with eos [0, 2]: $(head -c 600 "$tmp/err")"; fi
run sample "$m" --prompt the --tokens 8 --temperature 0 --threads 1 --ignore-eos
if [ "$rc" -eq 0 ] && grep -qF "generated: 8 tokens" "$tmp/err"; then ok; else
    bad "greedy --ignore-eos: $(head -c 600 "$tmp/err")"; fi
run info "$m"
if [ "$rc" -eq 0 ] && grep -q "^BOS / EOS  *0 / 0, 2" "$tmp/out"; then ok; else bad "info BOS / EOS: $(cat "$tmp/out")"; fi

# without 2 in either list, greedy goes on
python3 - "$m" <<'PY'
import json, sys
for name in ("config.json", "generation_config.json"):
    p = sys.argv[1] + "/" + name
    c = json.load(open(p))
    c["eos_token_id"] = 0
    json.dump(c, open(p, "w"))
PY
run sample "$m" --prompt the --tokens 8 --temperature 0 --threads 1
if [ "$rc" -eq 0 ] && grep -qF "generated: 8 tokens" "$tmp/err"; then ok; else
    bad "greedy with eos 0 only: $(head -c 600 "$tmp/err")"; fi

# "do_sample": false: the file's settings are not sampling defaults (transformers ignores them too)
printf '{"do_sample": false, "temperature": 0.7}\n' >"$m/generation_config.json"
run sample "$m" --prompt the --tokens 2 --seed 1 --threads 1
if [ "$rc" -eq 0 ] && grep -qF "sampling temperature 0.8 · top-k 40 · top-p 0.95" "$tmp/err" &&
    ! grep -qF "sampling defaults" "$tmp/err"; then ok; else bad "do_sample false: $(head -c 600 "$tmp/err")"; fi

echo "test_hf_generation: $passed checks passed, $failed failed"
[ "$failed" -eq 0 ]
