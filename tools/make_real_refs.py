#!/usr/bin/env python3
"""References for models and tokenizers this project did not make (runs on the GPU machine, which has transformers
and tokenizers; nothing here needs the GPU itself).

Responsibility: read unedited third-party files (../shared/testdata, copied next to the checkout by the caller) and
write small JSON fixtures that tinygpt's tests compare against:

  tinystories-656k.json   the real TinyStories-656K folder through transformers (fp32, eager attention, CPU):
                          for each prompt the prompt ids (BOS first, as the tokenizer adds it), the greedy
                          continuation (GREEDY_NEW tokens, do_sample=False), its text, and per step the gap between
                          the best and second-best logit (so a test can tell a tie from a real difference), plus the
                          top-8 logits of the first generated position.
  tokenizer-ids.json      for each real tokenizer.json: the ids the Hugging Face `tokenizers` library produces for
                          a list of texts (llama.cpp's vocab test texts plus a few hostile ones), without and with
                          special tokens (the tokenizer's post-processor, e.g. BOS), and transformers'
                          AutoTokenizer ids for the same text (they differ only where the tokenizer_config says so).

Usage: tools/make_real_refs.py --testdata DIR --out DIR
"""
import argparse
import json
import sys
from pathlib import Path

import torch
import tokenizers
import transformers
from tokenizers import Tokenizer
from transformers import AutoModelForCausalLM, AutoTokenizer

GREEDY_NEW = 40
STORY_PROMPTS = ["Once upon a time", "Lily and Ben went to the park. They saw", "The little dog was sad because"]
EXTRA_TEXTS = [
    "Hello <s> world</s> again",
    "<|start_story|>Once upon a time<|end_story|>",
    "emoji \U0001F600\U0001F469\u200d\U0001F4BB and CJK \u4f60\u597d\u4e16\u754c",
    "def f(x):\n        return x  # indented\n\n\n\tTab",
    "    many     spaces    between      words     ",
    "\u00e9\u00e8\u00ea \u00df \u0130stanbul \u03a3\u03c3\u03c2",
]


def vocab_texts(testdata: Path):
    inp = testdata / "vocab" / "ggml-vocab-llama-spm.gguf.inp"
    parts = inp.read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
    if parts and parts[-1].endswith("\n__ggml_vocab_test__"):
        parts[-1] = parts[-1][: -len("\n__ggml_vocab_test__")]
    return [p for p in parts] + EXTRA_TEXTS


def tinystories(folder: Path):
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32, attn_implementation="eager")
    model.eval()
    out = []
    for text in STORY_PROMPTS:
        ids = tok(text, return_tensors="pt").input_ids
        with torch.no_grad():
            g = model.generate(ids, max_new_tokens=GREEDY_NEW, do_sample=False, output_scores=True,
                               return_dict_in_generate=True, pad_token_id=tok.pad_token_id or 0)
        new = g.sequences[0, ids.shape[1]:].tolist()
        gaps = []
        for s in g.scores:
            top = torch.topk(s[0].float(), 2).values
            gaps.append(float(top[0] - top[1]))
        first = torch.topk(g.scores[0][0].float(), 8)
        out.append(dict(prompt=text, prompt_ids=ids[0].tolist(), greedy_ids=new,
                        greedy_text=tok.decode(new, skip_special_tokens=False), top1_top2_gap=gaps,
                        first_top8_ids=first.indices.tolist(), first_top8_logits=first.values.tolist()))
    return dict(model="TinyStories-656K-hf", greedy_new=GREEDY_NEW, dtype="float32", attn="eager",
                eos_token_id=tok.eos_token_id, prompts=out)


def tokenizer_ids(path: Path, texts):
    t = Tokenizer.from_file(str(path))
    try:
        auto = AutoTokenizer.from_pretrained(path.parent)
    except Exception as e:  # a folder without a usable tokenizer_config: the raw tokenizer is the reference
        print(f"AutoTokenizer({path.parent}): {e}", file=sys.stderr)
        auto = None
    rows = []
    for text in texts:
        row = dict(text=text, ids=t.encode(text, add_special_tokens=False).ids,
                   ids_special=t.encode(text, add_special_tokens=True).ids)
        if auto is not None:
            row["transformers_ids"] = auto(text).input_ids
        rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--testdata", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    env = dict(torch=torch.__version__, transformers=transformers.__version__, tokenizers=tokenizers.__version__)
    print(env)
    story = tinystories(a.testdata / "models" / "TinyStories-656K-hf")
    story["made_by"] = env
    (a.out / "tinystories-656k.json").write_text(json.dumps(story, indent=1, ensure_ascii=False) + "\n")
    texts = vocab_texts(a.testdata)
    toks = {}
    for name, rel in [("TinyStories-656K-hf", "models/TinyStories-656K-hf/tokenizer.json"),
                      ("TinyLlama-1.1B-Chat-v1.0", "realmeta/TinyLlama-1.1B-Chat-v1.0/tokenizer.json")]:
        toks[name] = tokenizer_ids(a.testdata / rel, texts)
    (a.out / "tokenizer-ids.json").write_text(
        json.dumps(dict(made_by=env, tokenizers=toks), indent=1, ensure_ascii=False) + "\n")
    for p in story["prompts"]:
        print(repr(p["prompt"]), "->", repr(p["greedy_text"]), "min gap %.4f" % min(p["top1_top2_gap"]))


if __name__ == "__main__":
    main()
