#!/usr/bin/env python3
"""llamacpp_compare.py — tinygpt's side of the comparisons with llama.cpp (Python standard library only, so that
`make test` can run it without llama.cpp; tests/cli/test_kquant_llamacpp.sh, bench/kquant-vs-llamacpp.sh).
The references come from tools/llamacpp_kquant_refs.sh.

    llamacpp_compare.py ppl TINYGPT MODEL TEXT CTX CHUNKS
        tinygpt's perplexity computed as llama-perplexity computes it (`llama-perplexity -f TEXT -c CTX --chunks
        CHUNKS`): the text tokenized whole; chunk i = tokens [i*CTX, (i+1)*CTX); when the model adds BOS to prompts
        (`tinygpt info`), the text starts with BOS and each chunk's first token is replaced by BOS; only the second
        half of each chunk is scored (the tokens at chunk positions CTX/2+1 .. CTX-1, each against the chunk's
        tokens before it). tinygpt runs those chunks as token ids (`perplexity --ids --csv`: CTX-token segments, a
        fresh cache each) and the rows at those positions are averaged. Prints: perplexity P scored N
    llamacpp_compare.py greedy GREEDY_LOGITS MODEL PROMPT_IDS REFERENCE_IDS
        tinygpt's greedy decode (fp32 cache, EOS ignored) against llama.cpp's, token by token: PROMPT_IDS (BOS
        included) and REFERENCE_IDS (the ids llama-completion generated; both comma-separated) go through
        tools/greedy_logits --ban-eos, which teacher-forces the reference and gives tinygpt's argmax before each
        token (EOS ids excluded, as llama-completion --ignore-eos excludes them). Equal
        argmax everywhere = tinygpt's own greedy decode generates the same ids. Otherwise, at the first difference,
        the logit gap = logit(tinygpt's argmax) - logit(llama.cpp's token), in tinygpt's logits there. Prints one
        JSON object: match, tokens (compared), first_diff (index into the continuation, -1 if none), gap, and the
        two ids there.

TEXT for `ppl` is read whole and passed to `tinygpt tokenize` on its command line: keep it under ~100 KB."""
import json
import os
import subprocess
import sys
import tempfile


def run(args, **kw):
    r = subprocess.run(args, capture_output=True, **kw)
    if r.returncode != 0:
        sys.exit("llamacpp_compare: %s -> exit %d: %s" % (" ".join(args[:3]), r.returncode,
                                                          r.stderr.decode(errors="replace").strip()[-400:]))
    return r.stdout.decode(errors="replace")


def adds_bos(tinygpt, model):
    """Whether the model's tokenizer adds BOS to prompts (llama.cpp's llama_vocab_get_add_bos), from `info`."""
    return "BOS added to prompts" in run([tinygpt, "info", model])


def tokenize(tinygpt, model, text, bos=True):
    return [int(x) for x in run([tinygpt, "tokenize", model] + (["--bos"] if bos else []) + ["--", text]).split()]


def csv_rows(tinygpt, model, ids, threads="1"):
    """(index, context, token, nll) of every scored token of the id sequence, teacher-forced."""
    with tempfile.TemporaryDirectory() as d:
        idf, csvf = os.path.join(d, "ids.txt"), os.path.join(d, "nll.csv")
        with open(idf, "w") as f:
            f.write(" ".join(map(str, ids)) + "\n")
        run([tinygpt, "perplexity", model, idf, "--ids", "--csv", csvf, "--quiet", "--threads", threads,
             "--kv-quantize", "fp32"])
        rows = []
        with open(csvf) as f:
            next(f)
            for line in f:
                i, c, t, nll = line.strip().split(",")[:4]
                rows.append((int(i), int(c), int(t), float(nll)))
        return rows


def cmd_ppl(tinygpt, model, text_path, ctx, chunks):
    import math
    ctx, chunks = int(ctx), int(chunks)
    with open(text_path, encoding="utf-8") as f:
        text = f.read()
    add_bos = adds_bos(tinygpt, model)
    toks = tokenize(tinygpt, model, text, bos=add_bos)
    n = min(chunks, len(toks) // ctx)
    if n < 1:
        sys.exit("llamacpp_compare: %s has %d tokens, fewer than one chunk of %d" % (text_path, len(toks), ctx))
    ids = []
    for i in range(n):
        chunk = toks[i * ctx:(i + 1) * ctx]
        ids += ([toks[0]] + chunk[1:]) if add_bos else chunk
    first = ctx // 2
    total, count = 0.0, 0
    for i, c, t, nll in csv_rows(tinygpt, model, ids, threads="0"):
        p = i % ctx
        if first + 1 <= p <= ctx - 1:
            if c != p or t != ids[i]:
                sys.exit("llamacpp_compare: row %d has context %d, token %d (want %d, %d)" % (i, c, t, p, ids[i]))
            total += nll
            count += 1
    if count != n * (ctx - 1 - first):
        sys.exit("llamacpp_compare: scored %d tokens, want %d" % (count, n * (ctx - 1 - first)))
    print("perplexity %.6f scored %d" % (math.exp(total / count), count))


def cmd_greedy(greedy_logits, model, prompt_ids, ref_ids):
    p = [int(x) for x in prompt_ids.split(",") if x]
    r = [int(x) for x in ref_ids.split(",") if x]
    with tempfile.TemporaryDirectory() as d:
        idf = os.path.join(d, "ids.txt")
        with open(idf, "w") as f:
            f.write(" ".join(map(str, p + r)) + "\n")
        rows = [line.split() for line in run([greedy_logits, "--ban-eos", model, idf, str(len(p))]).splitlines()]
    out = {"match": True, "tokens": len(rows), "first_diff": -1, "gap": None}
    for k, best, lbest, ref, lref in rows:
        if int(best) != int(ref):
            out.update(match=False, first_diff=int(k), gap=round(float(lbest) - float(lref), 8),
                       tinygpt_id=int(best), llamacpp_id=int(ref))
            break
    print(json.dumps(out))


def main():
    a = sys.argv[1:]
    if len(a) == 6 and a[0] == "ppl":
        cmd_ppl(*a[1:])
    elif len(a) == 5 and a[0] == "greedy":
        cmd_greedy(*a[1:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
