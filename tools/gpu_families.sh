#!/usr/bin/env bash
# gpu_families.sh — runs on the GPU machine (issue #50): the references we do not control for the model families.
# 1. tools/make_family_fixtures.py writes tiny random-weight folders with transformers' save_pretrained and
#    transformers' fp32 logits / NLL / greedy ids as goldens;
# 2. llama.cpp's own convert_hf_to_gguf.py converts each folder to an F32 GGUF (model-llamacpp-f32.gguf);
# 3. llama.cpp runs each GGUF (tools/llamacpp_dump.cpp against its shared libraries, CPU, f32 cache, one thread) over
#    the greedy prompt followed by transformers' greedy continuation: greedy-llamacpp.json holds llama.cpp's argmax
#    before each continuation token (llama.cpp's own greedy where it agrees), and llamacpp-logits.f32 its logits.
# Everything lands in $OUT/families.tar.gz (one folder per family) and $OUT/log.txt.
# Expects .devcarry/lcpp.tgz: llama.cpp's upstream source from node-llama-cpp@3.21.1 (bench/build-llamacpp.sh names
# the package), without .git, models, docs, tests and examples.
# Usage, from the repository root on the GPU machine: bash tools/gpu_families.sh
set -u
out=${OUT:?OUT must be set}
work=/tmp/tgfam
rm -rf "$work" && mkdir -p "$work/llama.cpp" "$work/fam"
exec > >(tee "$out/log.txt") 2>&1
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c 'import torch, transformers, numpy; print("torch", torch.__version__, "transformers",
transformers.__version__, "numpy", numpy.__version__)'

tar -xzf .devcarry/lcpp.tgz -C "$work/llama.cpp" || exit 2
(cd "$work/llama.cpp" && cmake -S . -B build -DGGML_CUDA=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DGGML_NATIVE=ON -DCMAKE_BUILD_TYPE=Release >/dev/null &&
    cmake --build build -j 16 --target llama llama-completion >"$work/build.log" 2>&1) ||
    { tail -n 30 "$work/build.log"; echo "llama.cpp build failed"; }
P=$work/llama.cpp
g++ -O2 -std=c++17 -I"$P/include" -I"$P/ggml/include" tools/llamacpp_dump.cpp -o "$work/llamacpp_dump" \
    -L"$P/build/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$P/build/bin" || echo "llamacpp_dump build failed"

timeout 420 python3 "${FIXTURE_SCRIPT:-tools/make_family_fixtures.py}" --out "$work/fam"
echo "make_family_fixtures rc=$?"

export PYTHONPATH=$P/gguf-py
for d in "$work"/fam/*/; do
    name=$(basename "$d")
    echo "== $name"
    # The fixtures carry the smollm2 fixture's byte-level BPE tokenizer (tokenizer.json only); llama.cpp's Gemma 2
    # and Phi-3 converters read a SentencePiece tokenizer.model, so their vocabulary step takes the converter's own
    # byte-level BPE path (_set_vocab_gpt2, as it does for Gemma 3 and Phi-4), with the pre-tokenizer named. The weights and hyperparameters are
    # converted by llama.cpp's code unchanged; the logits below come from token ids, not text.
    (cd "$P" && timeout 120 python3 - "$d" "$d/model-llamacpp-f32.gguf" <<'PYEOF'
import runpy, sys
sys.path.insert(0, ".")
import conversion.base, conversion.gemma, conversion.phi
for cls in (conversion.gemma.Gemma2Model, conversion.phi.Phi3MiniModel):
    cls.set_vocab = lambda self: self._set_vocab_gpt2()
# the fixtures' tokenizer is SmolLM2's, whose pre-tokenizer llama.cpp names "smollm" (its hash table keys on
# the real tokenizer's, which the fixtures' transformers re-save changes)
conversion.base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "smollm"
# (Gemma 3's converter does not write the folder's layer_types: llama.cpp takes five sliding layers in six, the
# fixture's own pattern, so the file is left as the converter writes it: tests/data/families/README.md.)
# (a neutral model name: llama.cpp sets Phi-3 token attributes by the name, looking up tokens this vocabulary lacks)
sys.argv = ["convert_hf_to_gguf.py", sys.argv[1], "--outtype", "f32", "--outfile", sys.argv[2], "--model-name",
            "tinygpt-fixture"]
runpy.run_path("convert_hf_to_gguf.py", run_name="__main__")
PYEOF
    ) >"$d/convert.log" 2>&1 || { echo "convert failed"; tail -n 15 "$d/convert.log"; continue; }
    python3 - "$d" <<'EOF' || continue
import json, sys
d = sys.argv[1]
g = json.load(open(d + "/golden.json"))
ids = g["greedy_prompt_ids"] + g["greedy_continuation"]
open(d + "/ids.txt", "w").write(" ".join(map(str, ids)) + "\n")
EOF
    n_prompt=$(python3 -c "import json; print(len(json.load(open('$d/golden.json'))['greedy_prompt_ids']))")
    mkdir -p "$d/dump"
    timeout 120 "$work/llamacpp_dump" "$d/model-llamacpp-f32.gguf" "$d/ids.txt" "$n_prompt" "$d/dump" \
        >"$d/dump.log" 2>&1 || { echo "llamacpp_dump failed"; tail -n 15 "$d/dump.log"; continue; }
    mv "$d/dump/logits.f32" "$d/llamacpp-logits.f32"
    rm -rf "$d/dump" "$d/ids.txt"
    python3 - "$d" <<'EOF'
import json, sys
import numpy as np
d = sys.argv[1]
g = json.load(open(d + "/golden.json"))
cont = g["greedy_continuation"]
V = g["logits_shape"][1]
lg = np.fromfile(d + "/llamacpp-logits.f32", dtype="<f4").reshape(-1, V)
am = [int(x) for x in lg.argmax(axis=1)][:len(cont)]
first = next((i for i, (a, b) in enumerate(zip(am, cont)) if a != b), None)
json.dump({"argmax_before_each": am, "transformers_greedy": cont, "first_difference": first,
           "note": "llama.cpp (convert_hf_to_gguf.py F32, CPU) fed the greedy prompt + transformers' greedy ids"},
          open(d + "/greedy-llamacpp.json", "w"), indent=1)
print("llama.cpp argmax equals transformers greedy:", first is None, "first difference at", first)
EOF
done
tar -czf "$out/families.tar.gz" -C "$work/fam" .
ls -la "$out"
