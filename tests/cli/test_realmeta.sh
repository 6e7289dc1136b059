#!/usr/bin/env bash
# test_realmeta.sh — tinygpt on the unedited config / tokenizer / generation files of real public models
# (../shared/testdata/realmeta, PROVENANCE.md there), with sparse safetensors of the shapes each config implies built
# at test time (no disk): info's parameter count, shapes, RoPE scaling, context, BOS / EOS against values computed
# independently in tests/cli/realmeta_check.py; a few generated tokens for the model under 200M parameters; Qwen2.5,
# an unknown RoPE type, Gemma, a folder without config.json and PyTorch pickle weights refused in one line.
set -u
cd "$(dirname "$0")/../.." || exit 2
. tests/cli/lib.sh
if [ ! -d ../shared/testdata/realmeta ]; then
    echo "test_realmeta: ../shared/testdata/realmeta is missing"
    exit 1
fi
python3 tests/cli/realmeta_check.py "${TINYGPT:?}" "$tmp/realmeta"
status=$?

# The real TinyStories-656K folder, unedited: `sample` at temperature 0 (fp32 cache, the default) prints
# transformers' greedy continuation of each prompt (tests/data/real/tinystories-656k.json; the ids are compared in
# tests/unit/test_real_models.c). transformers decodes the new ids alone, which strips their first space.
python3 - "$TINYGPT" <<'PY' || status=1
import json, subprocess, sys
ref = json.load(open("tests/data/real/tinystories-656k.json"))
bad = 0
for p in ref["prompts"]:
    r = subprocess.run([sys.argv[1], "sample", "../shared/testdata/models/TinyStories-656K-hf", "--prompt", p["prompt"],
                        "--tokens", "40", "--temperature", "0", "--kv-quantize", "fp32", "--no-echo", "--threads", "2"],
                       capture_output=True)
    text = r.stdout.decode()
    if r.returncode != 0 or text.lstrip(" ") != p["greedy_text"]:
        bad += 1
        print("FAIL: TinyStories-656K sample %r -> exit %d, %r, want %r: %s" % (
            p["prompt"], r.returncode, text[:120], p["greedy_text"][:120], r.stderr.decode()[-300:]))
print("test_realmeta: TinyStories-656K greedy text: %d of %d prompts equal transformers'" % (3 - bad, 3))
sys.exit(1 if bad else 0)
PY
exit $status
