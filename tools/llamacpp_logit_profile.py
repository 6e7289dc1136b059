#!/usr/bin/python3
"""llamacpp_logit_profile.py — how far tinygpt's logits are from llama.cpp's at every position of llama.cpp's greedy
continuations (the files of one tools/llamacpp_kquant_refs.sh run), not only where the greedy ids part.

    llamacpp_logit_profile.py [--against GREEDY_LOGITS_2 | --ops OP_CHECK] REFS_JSON GGUF_DIR GREEDY_LOGITS WORK_DIR
                              [PRESET...]

For each file (GGUF_DIR/PRESET.gguf) and prompt: llama.cpp's logits before each of its own greedy ids
(tools/llamacpp_dump.sh: the prompt in one batch, then one token at a time, as llama-completion ran; kept in
WORK_DIR and re-used) and tinygpt's along the same ids (GREEDY_LOGITS --ban-eos --logits). One line per file:
prompts whose greedy ids are equal; positions whose logits agree within 1e-4 (the largest |tinygpt - llama.cpp|
over the vocabulary); the largest difference; per prompt, the difference at the first position (after the prompt
batch) and where the ids first differ, the logit gap there in tinygpt's logits. Agreement near 1e-6 at a position
means the two forward passes computed the same function there up to float rounding; a jump to 1e-3 and more, that
an activation was rounded to another 8-bit code (tools/op_check --chain shows where). TG_LLAMACPP_DIR: the llama.cpp
build. --against: a second tinygpt build's greedy_logits takes llama.cpp's place (the same ids; "greedy equal" then
counts prompts where both builds' argmax agree all along): how far two builds that differ by float rounding only
move apart — the noise floor of the comparison. --ops: instead, for the first prompt of each file, llama.cpp's graph of
the prompt batch (every intermediate tensor) and tools/op_check on it: each tinygpt operation fed llama.cpp's own
input, the largest relative difference from llama.cpp's output over all operations, and which. Needs numpy (/usr/bin/python3 on Debian with python3-numpy)."""
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def op_summary(op_check, model, pids, d):
    """The largest relative difference over op_check's operations on llama.cpp's prompt-batch graph."""
    os.makedirs(d, exist_ok=True)
    ids = os.path.join(d, "ids")
    open(ids, "w").write(" ".join(map(str, pids)) + "\n")
    r = subprocess.run([os.path.join(HERE, "llamacpp_dump.sh"), model, ids, str(len(pids)), d, "0"],
                       capture_output=True)
    if r.returncode != 0:
        sys.exit("llamacpp_logit_profile: llamacpp_dump %s: %s" % (model, r.stderr.decode()[-300:]))
    r = subprocess.run([op_check, model, os.path.join(d, "0"), "0", ",".join(map(str, pids))], capture_output=True)
    if r.returncode != 0:
        sys.exit("llamacpp_logit_profile: op_check %s: %s" % (model, r.stderr.decode()[-300:]))
    worst, what = 0.0, "-"
    for line in r.stdout.decode().splitlines():
        if "(rel " in line:
            v = float(line.split("(rel ")[1].split(")")[0])
            if v > worst:
                worst, what = v, line.split("  ")[0].strip()
    return "every operation on llama.cpp's inputs: largest relative difference %.2g (%s)" % (worst, what)


def main():
    args = sys.argv[1:]
    against = ops = None
    if len(args) > 1 and args[0] == "--against":
        against, args = args[1], args[2:]
    elif len(args) > 1 and args[0] == "--ops":
        ops, args = args[1], args[2:]
    if len(args) < 4:
        sys.exit(__doc__)
    refs, gdir, greedy, work = args[:4]
    only = set(args[4:])
    ref = json.load(open(refs, encoding="utf-8"))
    total = [0, 0, 0, 0]
    for preset, f in ref["files"].items():
        if only and preset not in only:
            continue
        model = os.path.join(gdir, preset + ".gguf")
        if not os.path.exists(model):
            print("%-7s (no %s)" % (preset, model))
            continue
        if ops:
            print("%-7s %s" % (preset, op_summary(ops, model, f["prompt_ids"][0], os.path.join(work, preset + ".ops"))))
            continue
        s = [0, 0, 0, 0]
        notes = []
        worst = 0.0
        for i, (pids, want) in enumerate(zip(f["prompt_ids"], f["greedy_ids"])):
            d = os.path.join(work, "%s.%d" % (preset, i))
            os.makedirs(d, exist_ok=True)
            ids = os.path.join(d, "ids")
            text = " ".join(map(str, pids + want)) + "\n"
            if not os.path.exists(ids) or open(ids).read() != text:
                open(ids, "w").write(text)
                if os.path.exists(os.path.join(d, "logits.f32")):
                    os.remove(os.path.join(d, "logits.f32"))
            other = os.path.join(d, "logits.f32")
            if against:
                other = os.path.join(d, "against.f32")
                r = subprocess.run([against, "--ban-eos", "--logits", other, model, ids, str(len(pids))],
                                   capture_output=True)
                if r.returncode != 0:
                    sys.exit("llamacpp_logit_profile: %s: %s" % (against, r.stderr.decode()[-300:]))
                mine = [line.split() for line in r.stdout.decode().splitlines()]
            elif not os.path.exists(other):
                r = subprocess.run([os.path.join(HERE, "llamacpp_dump.sh"), model, ids, str(len(pids)), d],
                                   capture_output=True)
                if r.returncode != 0:
                    sys.exit("llamacpp_logit_profile: llamacpp_dump %s: %s" % (model, r.stderr.decode()[-300:]))
            r = subprocess.run([greedy, "--ban-eos", "--logits", os.path.join(d, "tg.f32"), model, ids,
                                str(len(pids))], capture_output=True)
            if r.returncode != 0:
                sys.exit("llamacpp_logit_profile: greedy_logits %s: %s" % (model, r.stderr.decode()[-300:]))
            rows = [line.split() for line in r.stdout.decode().splitlines()]
            if against:  # where the two builds' argmax first part (llama.cpp's ids only drive both)
                first = next((x for x, y in zip(rows, mine) if x[1] != y[1]), None)
                if first:
                    first = [first[0], first[2], None, None, first[2]]  # the gap is not defined between two builds
            else:
                first = next((x for x in rows if x[1] != x[3]), None)
            a = np.fromfile(os.path.join(d, "tg.f32"), dtype=np.float32)
            vocab = a.size // len(want)
            a = a.reshape(-1, vocab)
            b = np.fromfile(other, dtype=np.float32).reshape(-1, vocab)[:len(a)]
            e = np.abs(a.astype(np.float64) - b).max(axis=1)
            worst = max(worst, float(e.max()))
            s[0] += first is None
            s[1] += 1
            s[2] += int((e <= 1e-4).sum())
            s[3] += len(e)
            note = "p%d: %.1g at 0" % (i + 1, e[0])
            if first and against:
                note += ", argmax parts at %s" % first[0]
            elif first:
                note += ", ids part at %s (gap %.2g)" % (first[0], float(first[2]) - float(first[4]))
            notes.append(note)
        print("%-7s greedy equal %d/%d · positions within 1e-4: %3d/%d · largest |dlogit| %.2g · %s" % (
            preset, s[0], s[1], s[2], s[3], worst, "; ".join(notes)))
        total = [x + y for x, y in zip(total, s)]
    if not ops:
        print("all: greedy equal %d/%d · positions within 1e-4: %d/%d" % tuple(total))


if __name__ == "__main__":
    main()
