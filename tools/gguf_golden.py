#!/usr/bin/env python3
"""Records llama.cpp's behaviour on tinygpt's GGUF files next to the transformers goldens.

Responsibility: run llama.cpp's own tools (llama-tokenize, llama-completion) on the fixture GGUFs and the bundled
model, and write what they produce where the C engine's tests can compare against it:
  * fixtures: golden.json gains "gguf_tokenization" = {gguf file: [ids of each "tokenization" string, in order]}
    and "gguf_tokenization_agreement" = {gguf file: "k/N strings identical to transformers"};
  * flagship: compares llama-tokenize with transformers' ids (models/golden/flagship-tokenization.json) and
    llama-completion's greedy text with models/golden/flagship-greedy.json; prints a summary (and writes it as JSON
    with --report).
Standard library only. Usage:
  tools/gguf_golden.py --bin /path/to/llama.cpp/build/bin fixtures tests/data/fixtures/*
  tools/gguf_golden.py --bin /path/to/llama.cpp/build/bin flagship models/tinygpt-flagship.gguf [--report F]
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path


def tokenize(bin_dir, gguf, text):
    """llama.cpp's ids for text: exact bytes on stdin, no escape processing, no BOS, special tokens parsed (as
    transformers does by default)."""
    cmd = [str(Path(bin_dir) / "llama-tokenize"), "-m", str(gguf), "--stdin", "--no-escape", "--no-bos", "--ids",
           "--log-disable"]
    r = subprocess.run(cmd, input=text.encode("utf-8"), capture_output=True)
    lines = [ln for ln in r.stdout.decode("utf-8", "replace").splitlines() if ln.startswith("[")]
    if r.returncode != 0 or not lines:
        raise RuntimeError(f"llama-tokenize failed on {gguf} for {text!r}: {r.stderr.decode()[-400:]}")
    return json.loads(lines[-1])


def fixtures(bin_dir, dirs):
    ok = True
    for d in map(Path, dirs):
        golden_path = d / "golden.json"
        golden = json.loads(golden_path.read_text(encoding="utf-8"))
        texts = [t["text"] for t in golden["tokenization"]]
        result, agreement = {}, {}
        for fname in golden["gguf_files"]:
            ids = [tokenize(bin_dir, d / fname, t) for t in texts]
            result[fname] = ids
            same = sum(a == t["ids"] for a, t in zip(ids, golden["tokenization"]))
            agreement[fname] = f"{same}/{len(texts)} strings identical to transformers"
            print(f"{d.name}/{fname}: {agreement[fname]}")
            for a, t in zip(ids, golden["tokenization"]):
                if a != t["ids"]:
                    print(f"    {t['text'][:40]!r}: hf {t['ids'][:12]} llama.cpp {a[:12]}")
        golden["gguf_tokenization"] = result
        golden["gguf_tokenization_agreement"] = agreement
        golden_path.write_text(json.dumps(golden, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return ok


def complete(bin_dir, gguf, prompt, n):
    """llama-completion's greedy continuation text: its stdout less the echoed prompt (the logs go to stderr; it
    ends the text with a blank line, removed by the caller's comparison)."""
    cmd = [str(Path(bin_dir) / "llama-completion"), "-m", str(gguf), "-p", prompt, "-n", str(n), "--temp", "0",
           "--top-k", "1", "--seed", "1", "-c", "512", "-no-cnv", "--no-escape", "--no-warmup", "-t", "2"]
    r = subprocess.run(cmd, capture_output=True)
    out = r.stdout.decode("utf-8", "replace")
    if r.returncode != 0:
        raise RuntimeError(f"llama-completion failed: {r.stderr.decode()[-400:]}")
    return out[len(prompt):] if out.startswith(prompt) else out


def flagship(bin_dir, gguf, golden_dir, report):
    summary = {"gguf": str(gguf)}
    tok = json.loads((golden_dir / "flagship-tokenization.json").read_text(encoding="utf-8"))
    same = 0
    for t in tok:
        ids = tokenize(bin_dir, gguf, t["text"])
        if ids == t["ids"]:
            same += 1
        else:
            print(f"tokenize differs on {t['text'][:40]!r}: hf {t['ids'][:12]} llama.cpp {ids[:12]}")
    summary["tokenization"] = f"{same}/{len(tok)} texts tokenised identically by llama-tokenize and transformers"
    print(summary["tokenization"])
    greedy = json.loads((golden_dir / "flagship-greedy.json").read_text(encoding="utf-8"))
    results = []
    for g in greedy:
        prompt_ids = tokenize(bin_dir, gguf, g["prompt"])
        text = complete(bin_dir, gguf, g["prompt"], len(g["continuation_ids"]))
        if text != g["text"] and text.endswith("\n\n"):
            text = text[:-2]
        n_same = 0
        for a, b in zip(text, g["text"]):
            if a != b:
                break
            n_same += 1
        results.append({"prompt": g["prompt"], "prompt_ids_identical": prompt_ids == g["prompt_ids"],
                        "identical": text == g["text"], "common_prefix_chars": n_same,
                        "golden_chars": len(g["text"]), "llama_cpp_text": text})
        print(f"greedy {g['prompt']!r}: identical={text == g['text']} common prefix {n_same}/{len(g['text'])}")
    summary["greedy"] = results
    if report:
        Path(report).write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help="llama.cpp's build/bin folder")
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fixtures")
    f.add_argument("dirs", nargs="+")
    g = sub.add_parser("flagship")
    g.add_argument("gguf")
    g.add_argument("--golden", default="models/golden")
    g.add_argument("--report", default=None)
    args = ap.parse_args()
    if args.cmd == "fixtures":
        return 0 if fixtures(args.bin, args.dirs) else 1
    return 0 if flagship(args.bin, Path(args.gguf), Path(args.golden), args.report) else 1


if __name__ == "__main__":
    sys.exit(main())
