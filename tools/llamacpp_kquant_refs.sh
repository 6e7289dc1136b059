#!/usr/bin/env bash
# llamacpp_kquant_refs.sh — llama.cpp's references for tinygpt's GGUF block types: an F16 model quantised by the
# peer's own llama-quantize to each preset, and for each file what llama.cpp computes on it.
#
#   TG_LLAMACPP_DIR=/path/to/llama.cpp tools/llamacpp_kquant_refs.sh F16_MODEL OUT_DIR CTX CHUNKS TOKENS \
#       PROMPTS_FILE TEXT_FILE PRESET...
#
# For each PRESET (Q2_K, Q3_K_M, Q4_K_M, ...): OUT_DIR/PRESET.gguf (`llama-quantize --allow-requantize`), then
#   - llama-completion's greedy continuation of each line of PROMPTS_FILE (its token ids, from the session file of
#     --prompt-cache-all, and its text): TOKENS tokens, `--temp 0`, f32 KV cache
#     (`-ctk f32 -ctv f32`), no flash attention (`-fa off`), EOS ignored, no weight repacking (`--no-repack`:
#     repacking can die with "Illegal instruction" on this CPU), one thread;
#   - llama-perplexity on TEXT_FILE with `-c CTX --chunks CHUNKS` (same cache settings): its estimate (see below);
#   - gguf-py's dequantisation of every tensor (tools/gguf_py_check.py, /usr/bin/python3 with numpy), compared bit for
#     bit with tinygpt's decoders (tools/gguf_dequant, built here), and its sha256 per tensor.
# OUT_DIR/refs.json gathers them: {"ctx", "chunks", "tokens", "text", "prompts", "files": {PRESET: {"file",
# "perplexity", "prompt_ids": [llama.cpp's ids of each prompt], "greedy_ids": [TOKENS ids per prompt], "greedy_text":
# [the text per prompt], "types": {tensor: ggml type}, "sha256": {tensor: sum},
# "dequant_check": the check's summary lines}}}. The F16 source itself is listed under "F16" when given as a PRESET.
set -u
cd "$(dirname "$0")/.." || exit 2
if [ $# -lt 8 ]; then sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//; /^set -u/d' >&2; exit 2; fi
src=$1 out=$2 ctx=$3 chunks=$4 tokens=$5 prompts=$6 text=$7
shift 7
bin=${TG_LLAMACPP_DIR:?set TG_LLAMACPP_DIR to a llama.cpp checkout built by bench/build-llamacpp.sh}/build/bin
gguf_py=$TG_LLAMACPP_DIR/gguf-py
for t in llama-quantize llama-completion llama-perplexity llama-tokenize; do
    [ -x "$bin/$t" ] || { echo "llamacpp_kquant_refs: $bin/$t not built" >&2; exit 1; }
done
make -s -j2 build/release/tools/gguf_dequant >&2 || exit 1
mkdir -p "$out"
export LD_LIBRARY_PATH=$bin${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
common=(-ctk f32 -ctv f32 -fa off --no-repack)

for preset in "$@"; do
    f=$out/$preset.gguf
    if [ "$preset" = F16 ]; then
        [ -s "$f" ] && [ "$f" -nt "$src" ] || cp "$src" "$f"
    elif ! [ -s "$f" ] || ! [ "$f" -nt "$src" ]; then
        "$bin/llama-quantize" --allow-requantize "$src" "$f" "$preset" >"$out/$preset.quantize.log" 2>&1 ||
            { echo "llamacpp_kquant_refs: llama-quantize $preset failed: $(tail -2 "$out/$preset.quantize.log")" >&2; exit 1; }
    fi
    echo "llamacpp_kquant_refs: $preset: $(du -k "$f" | cut -f1) KiB" >&2
    # greedy continuations, one per prompt: the text, and the ids from the session file that --prompt-cache-all
    # writes at the end (prompt + generated ids; TOKENS + 1 generated, as the last sampled one may not be evaluated)
    n=0
    while IFS= read -r p; do
        [ -n "$p" ] || continue
        if [ -s "$out/$preset.session.$n" ] && [ "$out/$preset.session.$n" -nt "$f" ] && [ -s "$out/$preset.prompt.$n" ]; then
            n=$((n + 1))
            continue
        fi
        rm -f "$out/$preset.session.$n"
        "$bin/llama-completion" -m "$f" -p "$p" -n $((tokens + 1)) --temp 0 --ignore-eos -t 1 --seed 1 -no-cnv \
            --no-display-prompt --no-warmup "${common[@]}" -c "$ctx" --prompt-cache "$out/$preset.session.$n" \
            --prompt-cache-all >"$out/$preset.greedy.$n.txt" 2>"$out/$preset.greedy.$n.log" </dev/null ||
            { echo "llamacpp_kquant_refs: llama-completion $preset failed: $(tail -2 "$out/$preset.greedy.$n.log")" >&2; exit 1; }
        # the prompt's ids (BOS included) as llama.cpp tokenizes it: where the session's continuation starts
        "$bin/llama-tokenize" -m "$f" -p "$p" --ids --log-disable 2>/dev/null | tail -n 1 >"$out/$preset.prompt.$n"
        n=$((n + 1))
    done <"$prompts"
    # llama.cpp's logger is asynchronous and never flushed at exit (common/log.cpp leaks it on purpose): on a loaded
    # machine the log's tail, final estimate included, is often lost although the run finished (exit 0). So it runs
    # CHUNKS + 1 chunks (TEXT_FILE must hold them) and the result is the running estimate printed after chunk CHUNKS,
    # "[CHUNKS]PPL" (exp of the mean NLL over the first CHUNKS chunks: what --chunks CHUNKS prints as its final
    # estimate), printed while the last chunk is computed; if even that was lost, it runs again.
    for try in 1 2 3 4 5 6; do
        if ! [ -s "$out/$preset.ppl" ] || ! [ "$out/$preset.ppl" -nt "$f" ]; then
            "$bin/llama-perplexity" -m "$f" -f "$text" -c "$ctx" --chunks $((chunks + 1)) -t 2 -b "$ctx" \
                "${common[@]}" >"$out/$preset.ppl.log" 2>&1 ||
                { echo "llamacpp_kquant_refs: llama-perplexity $preset failed: $(tail -2 "$out/$preset.ppl.log")" >&2; exit 1; }
            grep -q "calculating perplexity over $((chunks + 1)) chunks" "$out/$preset.ppl.log" ||
                { echo "llamacpp_kquant_refs: $text holds fewer than $((chunks + 1)) chunks of $ctx tokens" >&2; exit 1; }
            v=$(grep -o "\[$chunks\][0-9.]*" "$out/$preset.ppl.log" | head -n 1 | sed 's/^\[[0-9]*\]//')
            [ -n "$v" ] && echo "$v" >"$out/$preset.ppl"
        fi
        [ -s "$out/$preset.ppl" ] && [ "$out/$preset.ppl" -nt "$f" ] && break
        echo "llamacpp_kquant_refs: llama-perplexity $preset: its log lost the result (try $try)" >&2
    done
    [ -s "$out/$preset.ppl" ] || exit 1
    rm -rf "$out/$preset.dq"
    mkdir -p "$out/$preset.dq"
    build/release/tools/gguf_dequant "$f" "$out/$preset.dq" >"$out/$preset.types" || exit 1
    /usr/bin/python3 tools/gguf_py_check.py "$gguf_py" "$f" "$out/$preset.dq" --sums "$out/$preset.sums" \
        >"$out/$preset.dqcheck" 2>&1
    echo "llamacpp_kquant_refs: $preset: gguf-py check exit $?: $(tr -s ' ' <"$out/$preset.dqcheck" | paste -sd';')" >&2
    rm -rf "$out/$preset.dq"
done

python3 - "$out" "$ctx" "$chunks" "$tokens" "$prompts" "$text" "$@" <<'PY'
import json, os, re, struct, sys
out, ctx, chunks, tokens, prompts, text = sys.argv[1:7]
presets = sys.argv[7:]
ps = [l.rstrip("\n") for l in open(prompts, encoding="utf-8") if l.strip()]
ref = {"ctx": int(ctx), "chunks": int(chunks), "tokens": int(tokens), "text": text, "prompts": ps, "files": {}}
for p in presets:
    types, sums = {}, {}
    for line in open(os.path.join(out, p + ".types")):
        name, ty, _ = line.split()
        types[name] = ty
    for line in open(os.path.join(out, p + ".sums")):
        name, ty, s = line.split()
        sums[name] = s
    entry = ref["files"][p] = {
        "file": p + ".gguf",
        "perplexity": float(open(os.path.join(out, p + ".ppl")).read()),
        "prompt_ids": [], "greedy_ids": [], "greedy_text": [],
        "types": types, "sha256": sums,
        "dequant_check": [l.strip() for l in open(os.path.join(out, p + ".dqcheck")) if l.strip()],
    }
    for i in range(len(ps)):
        raw = open(os.path.join(out, "%s.session.%d" % (p, i)), "rb").read()
        magic, version, n = struct.unpack_from("<3I", raw)
        assert magic == 0x6767736E, "%s: not a llama.cpp session file" % p
        ids = list(struct.unpack_from("<%di" % n, raw, 12))
        prompt = [int(x) for x in re.findall(r"-?[0-9]+", open(os.path.join(out, "%s.prompt.%d" % (p, i))).read())]
        n_gen = int(tokens)
        assert ids[:len(prompt)] == prompt and n >= len(prompt) + n_gen, "%s: session %s, prompt %s" % (p, ids, prompt)
        entry["prompt_ids"].append(prompt)
        entry["greedy_ids"].append(ids[len(prompt):len(prompt) + n_gen])
        text = open(os.path.join(out, "%s.greedy.%d.txt" % (p, i)), "rb").read().decode("utf-8", "replace")
        entry["greedy_text"].append(text.split("\nmain: saving final output")[0])
json.dump(ref, open(os.path.join(out, "refs.json"), "w"), indent=1, ensure_ascii=False)
print("llamacpp_kquant_refs: wrote %s" % os.path.join(out, "refs.json"), file=sys.stderr)
PY
