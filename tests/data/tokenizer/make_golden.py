#!/usr/bin/env python3
"""Golden data for tinygpt's tokenizer from Hugging Face `tokenizers` itself.

Responsibility: build small tokenizer.json variants covering the features tinygpt's tokenizer claims (byte-level BPE
with GPT-2's regex, add_prefix_space, Digits, a llama3-style Split regex with ignore_merges, every Split behaviour
and invert, SentencePiece-style BPE in the Llama-2 legacy, Metaspace "first" and Metaspace split layouts, byte
fallback and fuse_unk, added tokens with lstrip/rstrip and overlapping contents) and record, for a fixed list of
strings and for random ones, the library's ids with and without special tokens and its decoding (special tokens
skipped). tests/unit/test_tokenizer_golden.c checks tinygpt against every OUT/NAME/golden.json.

Usage (where `tokenizers` is installed): python3 make_golden.py OUT
"""
import json
import random
import sys
from pathlib import Path

import tokenizers
from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors,
                        trainers)

MS = "\u2581"
SPM_SPECIALS = ["<unk>", "<s>", "</s>"]
BL_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
             r"\s*[\r\n]+|\s+(?!\S)|\s+")

SENTENCES = [
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want "
    "of a wife.", "The LORD is my shepherd; I shall not want.", "Call me Ishmael. Some years ago, never mind how long",
    "In 2024-01-31 we sold 1,000,000 units at $3.14 each (or 314 cents).", "def f(x):\n    return x * 2\n",
    "Caf\u00e9, na\u00efve r\u00e9sum\u00e9 \u00fcber \u00c5ngstr\u00f6m",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 \u4e2d\u6587 \ud55c\uad6d\uc5b4",
    "don't won't I'm you're they'll we've she'd IT'S", "Hello world! Hello, World?",
    "    indented\n\tand tabbed\r\n", "emoji \U0001f999\U0001f680 \U0001f44d\U0001f3fd \u2764\ufe0f",
]

FIXED = [
    "", " ", "  ", "a", "Hello world", " Hello world", "Hello  world", "  leading", "trailing  ", "\n", "\n\n\n",
    "tab\tseparated\t", " \t \n\r\n mixed", "digits 0123456789 3.14159 1,000,000", "don't I'M they'LL",
    "UPPER lower MiXeD", "Caf\u00e9 na\u00efve", "\u65e5\u672c\u8a9e \ud55c\uad6d\uc5b4", "\U0001f999\U0001f680",
    "non\u00a0breaking\u200bzero\u3000wide\u2003em", "x\u180ey\u0085z", "\u2581already\u2581metaspace",
    "<s>", "</s>", "Hello <s> world</s> again", "<s><s>x", " <s> ", "<unk>", "<|im_start|>user\nHi<|im_end|>\n",
    "a <|tool|> b", "a<|tool|>b", "  <|tool|>  ", "<x>", "<x>y", "<x>yz<x>", "<|endoftext|><|endoftext|>",
    "the-final--countdown", "Xx xxx ABC def. g,h;i", "42abc 7 8 9x",
]

POOL = [" ", "  ", "\n", "\t", "\r\n", "   ", "\n\n", "a", "b", "e", "the", "The", "HELLO", "world", "don't", "'s",
        "'ll", "'RE", "I'm", "0", "7", "42", "123", "2024", "3.14", "1,000", ".", ",", "!", "?", "...", "(", ")",
        "-", "--", "_", "/", "\\", "\"", "'", "`", "~", "@", "#", "$", "%", "^", "&", "*", "+", "=", "|", ":", ";",
        "\u00e9", "\u00fc", "\u00f1", "\u00df", "\u00c4", "\u03a9", "\u03b1", "\u0434", "\u0416", "\u05e9",
        "\u0639", "\u0939", "\u0e01", "\u65e5\u672c", "\u4e2d\u6587", "\ud55c\uad6d\uc5b4", "\u30ab\u30bf",
        "\U0001f600", "\U0001f999", "\U0001f44d\U0001f3fd", "\u2764\ufe0f", "\u200b", "\u00a0", "\u2003", "\u3000",
        "e\u0301", "\u2581", "\u0085", "\u180e", "\uff11\uff12", "\u00bd", "\u216b", "<s>", "</s>", "<x>", "<x>y",
        "<|tool|>", "<|im_start|>", "<|im_end|>", " <|tool|> ", "x", "X", "xx"]


def random_strings(n, seed):
    rng = random.Random(seed)
    return ["".join(rng.choice(POOL) for _ in range(rng.randint(1, 24))) for _ in range(n)]


def corpus():
    rng = random.Random(7)
    lines = []
    for _ in range(400):
        lines.append(" ".join(rng.choice(SENTENCES) for _ in range(3)))
    return lines


def add_common_tokens(tok, spm):
    """Specials, then tokens exercising lstrip/rstrip and longest-match (ids after the trained vocab)."""
    specials = SPM_SPECIALS if spm else BL_SPECIALS
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    tok.add_special_tokens([AddedToken("<|tool|>", special=True, normalized=False, lstrip=True, rstrip=True)])
    tok.add_tokens([AddedToken("<x>", special=False, normalized=False),
                    AddedToken("<x>y", special=False, normalized=False)])


def byte_level(pre, ignore_merges=False):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=420, special_tokens=BL_SPECIALS, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus(), trainer)
    add_common_tokens(tok, False)
    return tok


def spm_style(layout, byte_fallback=True):
    """Llama/Mistral-style BPE: <unk>=0, <s>=1, </s>=2, <0x00>..<0xFF>=3..258, then learned pieces."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend(MS), normalizers.Replace(" ", MS)])
    tok.pre_tokenizer = pre_tokenizers.Split(MS, behavior="merged_with_next")
    trainer = trainers.BpeTrainer(vocab_size=420 - 256, special_tokens=SPM_SPECIALS, limit_alphabet=60,
                                  show_progress=False)
    tok.train_from_iterator(corpus(), trainer)
    learned = json.loads(tok.to_str())["model"]
    vocab = {s: i for i, s in enumerate(SPM_SPECIALS)}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for piece, _ in sorted(learned["vocab"].items(), key=lambda kv: kv[1]):
        if piece not in vocab:
            vocab[piece] = len(vocab)
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in learned["merges"]]
    final = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=byte_fallback,
                                 fuse_unk=True))
    strip = decoders.Sequence([decoders.Replace(MS, " "), decoders.ByteFallback(), decoders.Fuse(),
                               decoders.Strip(" ", 1, 0)])
    if layout == "legacy":
        final.normalizer = normalizers.Sequence([normalizers.Prepend(MS), normalizers.Replace(" ", MS)])
        final.decoder = strip
    elif layout == "metaspace":
        final.pre_tokenizer = pre_tokenizers.Metaspace(replacement=MS, prepend_scheme="first", split=False)
        final.decoder = strip
    elif layout == "metaspace-split":
        final.pre_tokenizer = pre_tokenizers.Metaspace(replacement=MS, prepend_scheme="always", split=True)
        final.decoder = decoders.Metaspace(replacement=MS, prepend_scheme="always", split=True)
    add_common_tokens(final, True)
    final.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                         special_tokens=[("<s>", 1)])
    return final


def variants():
    bl = lambda **kw: pre_tokenizers.ByteLevel(**kw)
    return {
        "bl-gpt2": byte_level(bl(add_prefix_space=False, use_regex=True)),
        "bl-prefix": byte_level(bl(add_prefix_space=True, use_regex=True)),
        "bl-digits": byte_level(pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                         bl(add_prefix_space=False, use_regex=True)])),
        "bl-llama3": byte_level(pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_RE), behavior="isolated", invert=False),
            bl(add_prefix_space=False, use_regex=False)]), ignore_merges=True),
        "bl-splits": byte_level(pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(r"\s+"), behavior="contiguous"),
            pre_tokenizers.Split(Regex(r"[.,;]"), behavior="merged_with_previous"),
            pre_tokenizers.Split(Regex(r"[A-Z]"), behavior="merged_with_next"),
            pre_tokenizers.Split("x", behavior="removed"),
            pre_tokenizers.Split(Regex(r"\p{N}+"), behavior="isolated", invert=True),
            bl(add_prefix_space=False, use_regex=False)])),
        "spm-legacy": spm_style("legacy"),
        "spm-metaspace": spm_style("metaspace"),
        "spm-metaspace-split": spm_style("metaspace-split"),
        "spm-nofallback": spm_style("legacy", byte_fallback=False),
    }


def main():
    out_root = Path(sys.argv[1])
    texts = FIXED + random_strings(120, 1)
    for name, tok in variants().items():
        out = out_root / name
        out.mkdir(parents=True, exist_ok=True)
        tok.save(str(out / "tokenizer.json"))
        spm = name.startswith("spm")
        cfg = ({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "add_bos_token": True} if spm else
               {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "add_bos_token": False})
        (out / "tokenizer_config.json").write_text(json.dumps(cfg, indent=1) + "\n")
        cases = []
        for text in texts:
            ids = tok.encode(text, add_special_tokens=False).ids
            cases.append({"text": text, "ids": ids, "ids_special": tok.encode(text).ids,
                          "decoded": tok.decode(ids, skip_special_tokens=True)})
        golden = {"decoded_skips_special": True, "tokenizers_version": tokenizers.__version__,
                  "tokenization": cases}
        (out / "golden.json").write_text(json.dumps(golden, ensure_ascii=False) + "\n")
        print(name, tok.get_vocab_size(), "tokens,", len(cases), "cases")


if __name__ == "__main__":
    main()
