#!/usr/bin/env python3
"""llamacpp_kquant_table.py — the comparison table of tinygpt against llama.cpp on the files of one
tools/llamacpp_kquant_refs.sh run (bench/kquant-vs-llamacpp.sh prints it for the bundled model).

    llamacpp_kquant_table.py REFS_DIR TINYGPT GREEDY_LOGITS [TEXT]

REFS_DIR: refs.json and the GGUF files it names. TEXT: the perplexity text (default: refs.json's). One Markdown row
per file: the types in it, gguf-py's check of every block, greedy (prompts whose 64 ids equal llama.cpp's; else the
first difference and its logit gap in tinygpt's logits), perplexity (tinygpt, computed as llama-perplexity does;
llama.cpp's; the difference)."""
import json
import os
import subprocess
import sys
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))


def compare(*args):
    r = subprocess.run([sys.executable, os.path.join(HERE, "llamacpp_compare.py")] + list(args), capture_output=True)
    if r.returncode != 0:
        sys.exit("llamacpp_kquant_table: %s" % r.stderr.decode().strip()[-300:])
    return r.stdout.decode()


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    d, tinygpt, greedy = sys.argv[1:4]
    ref = json.load(open(os.path.join(d, "refs.json"), encoding="utf-8"))
    text = sys.argv[4] if len(sys.argv) == 5 else ref["text"]
    print("| file | tensor types | gguf-py check (blocks differing / all) | greedy: prompts equal to llama.cpp's "
          "(%d tokens) | first difference: token, logit gap | perplexity tinygpt | llama.cpp | difference |"
          % ref["tokens"])
    print("|---|---|---|---:|---|---:|---:|---:|")
    for preset, f in ref["files"].items():
        model = os.path.join(d, f["file"])
        types = ", ".join("%s %d" % kv for kv in sorted(Counter(f["types"].values()).items(), key=lambda x: -x[1]))
        blocks = diff = 0
        for line in f["dequant_check"]:
            w = line.split()
            if len(w) >= 6 and w[4] == "blocks":
                blocks += int(w[3])
                diff += int(w[5])
        matched, diffs = 0, []
        for i, (pids, want) in enumerate(zip(f["prompt_ids"], f["greedy_ids"])):
            g = json.loads(compare("greedy", greedy, model, ",".join(map(str, pids)), ",".join(map(str, want))))
            if g["match"]:
                matched += 1
            else:
                diffs.append("prompt %d: token %d, %.2g" % (i + 1, g["first_diff"], g["gap"]))
        ours = float(compare("ppl", tinygpt, model, text, str(ref["ctx"]), str(ref["chunks"])).split()[1])
        theirs = f["perplexity"]
        print("| %s | %s | %d / %d | %d / %d | %s | %.4f | %.4f | %+.3f %% |" % (
            preset, types, diff, blocks, matched, len(f["greedy_ids"]), "; ".join(diffs) or "–", ours, theirs,
            100.0 * (ours / theirs - 1.0)))


if __name__ == "__main__":
    main()
