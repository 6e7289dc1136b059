#!/usr/bin/env python3
"""persist_turns.py — a 40-turn conversation's prefill cost per turn, with and without reuse (issue 53).

Each turn appends a user message (~50 tokens of text) to the transcript and generates a reply (--reply tokens,
greedy); the next turn's prompt is the transcript so far. With reuse, `tinygpt sample --prompt-cache FILE` restores
the previous turn's session and prefills only the new text; without, the whole transcript is prefilled. Prints one
row per turn: prompt tokens, tokens prefilled and prefill seconds (the report's "prompt" time: time to first token
minus one sampling step) for both, and the ratio. Not a timed test: numbers on a shared machine are noisy.

usage: bench/persist_turns.py [--tinygpt ./tinygpt] [--model MODEL] [--turns 40] [--reply 100] [cache flags...]
  e.g. bench/persist_turns.py --kv-quantize int4 --streaming-llm-window 512
Note: the prompt cache saves the state after the prompt, so the reply is re-read as part of the next prompt (the
reply's tokens are prefilled again, not the history); `chat --session` keeps the reply too.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

USER = ("Tell me more about the river, the old bridge, the market by the water and the people who came there "
        "every morning, and say what changed over the years. ")


def run(tg, model, prompt, reply, flags, cache=None):
    cmd = [tg, "sample", model, "--prompt", prompt, "--temperature", "0", "--tokens", str(reply), "--no-echo",
           "--json", "--threads", "0", "--ignore-eos"] + flags
    if cache:
        cmd += ["--prompt-cache", cache]
    p = subprocess.run(cmd, capture_output=True, text=True, check=True)
    rep = json.loads(p.stderr.strip().splitlines()[-1])
    return p.stdout, rep


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tinygpt", default="./tinygpt")
    ap.add_argument("--model", default="models/tinygpt-flagship.gguf")
    ap.add_argument("--turns", type=int, default=40)
    ap.add_argument("--reply", type=int, default=100)
    a, flags = ap.parse_known_args()
    with tempfile.TemporaryDirectory() as d:
        cache = os.path.join(d, "prompt.cache")
        transcript = ""
        print("turn  prompt  reuse:prefilled  reuse:s  fresh:prefilled  fresh:s  fresh/reuse")
        for k in range(1, a.turns + 1):
            transcript += "User: " + USER + "\nAssistant:"
            text, r = run(a.tinygpt, a.model, transcript, a.reply, flags, cache)
            _, f = run(a.tinygpt, a.model, transcript, a.reply, flags)
            if text != _:
                sys.exit(f"turn {k}: the reply with reuse differs from the fresh one")
            rs, fs = r["prompt"]["seconds"], f["prompt"]["seconds"]
            print(f"{k:4d}  {f['prompt']['tokens']:6d}  {r['prompt']['tokens']:15d}  {rs:7.3f}  "
                  f"{f['prompt']['tokens']:15d}  {fs:7.3f}  {fs / rs if rs > 0 else 0:10.1f}", flush=True)
            transcript += text + "\n"


if __name__ == "__main__":
    main()
