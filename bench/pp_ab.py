#!/usr/bin/env python3
"""bench/pp_ab.py — two (or more) tinygpt binaries on the same prompt-processing tests, interleaved (A B A B ...),
medians of tokens/s and of tokens per CPU second (the steadier figure on a shared machine: time spent descheduled
does not count). For before/after comparisons of a kernel change; llama.cpp comparisons are bench/compare-llamacpp's.

  bench/pp_ab.py [--reps R] [--threads T] [--only TEXT] [--models-dir DIR] BINARY...

Tests: pp512 on the bundled model (next to this checkout) and on the SmolLM2-135M / TinyLlama-1.1B shape files
F16 / Q8_0 / Q4_0 (TinyLlama also Q4_K_M / Q6_K) that bench/compare-llamacpp generates (its --kquant makes the
K-quants; DIR = $TG_BENCH_MODELS_DIR or bench/.models; missing files are skipped), plus pp16 and tg16 on the
TinyLlama-1.1B Q8_0 file (16 tokens through the weights at once against one at a time: the batched decode of
tinygpt serve, issue #17). --only keeps the tests whose label contains TEXT."""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tests(models_dir):
    out = [("bundled F16 pp512", os.path.join(ROOT, "models", "tinygpt-flagship.gguf"), 512, 0)]
    for shape, label in (("smollm2-135m", "SmolLM2-135M"), ("tinyllama-1.1b", "TinyLlama-1.1B")):
        for t in ("f16", "q8_0", "q4_0"):
            out.append(("%s %s pp512" % (label, t.upper()), os.path.join(models_dir, "%s-%s.gguf" % (shape, t)), 512, 0))
    for t in ("q4_k_m", "q6_k"):  # bench/compare-llamacpp --kquant makes them with llama-quantize
        path = os.path.join(models_dir, "tinyllama-1.1b-%s.gguf" % t)
        out.append(("TinyLlama-1.1B %s pp512" % t.upper(), path, 512, 0))
    out.append(("TinyLlama-1.1B Q8_0 pp16+tg16", os.path.join(models_dir, "tinyllama-1.1b-q8_0.gguf"), 16, 16))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only")
    ap.add_argument("--models-dir", default=os.environ.get("TG_BENCH_MODELS_DIR") or os.path.join(ROOT, "bench", ".models"))
    ap.add_argument("binaries", nargs="+")
    args = ap.parse_args()
    loads = [os.getloadavg()[0]]
    print("| test | binary | tokens/s | tokens per CPU s |\n|---|---|---:|---:|")
    for label, path, pp, tg in tests(args.models_dir):
        if (args.only and args.only not in label) or not os.path.exists(path):
            continue
        res = {}
        for _ in range(args.reps):
            for b in args.binaries:
                cmd = [b, "bench", path, "--threads", str(args.threads), "--kv-quantize", "fp16", "--bandwidth-mib", "0",
                       "--json", "--prompt-tokens", str(pp), "--tokens", str(tg)]
                p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                if p.returncode != 0:
                    sys.exit("%s failed:\n%s" % (" ".join(cmd), p.stderr[-1500:]))
                for x in json.loads(p.stdout)["results"]:
                    res.setdefault((x["test"], b), []).append((x["tokens_per_s"], x["tokens"] / x["cpu_seconds"]))
                loads.append(os.getloadavg()[0])
        for (test, b), v in sorted(res.items()):
            print("| %s, %s | %s | %.1f | %.1f |" % (label.rsplit(" ", 1)[0], test, b, statistics.median(a for a, _ in v),
                                                   statistics.median(c for _, c in v)), flush=True)
    print("\n_%d repetitions interleaved (medians), %d threads, load average %.1f-%.1f during the run_" % (
        args.reps, args.threads, min(loads), max(loads)))


if __name__ == "__main__":
    main()
