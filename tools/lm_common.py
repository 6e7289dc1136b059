"""Helpers shared by tools/make_fixtures.py and tools/train.py (they run on the GPU machine).

Responsibility: reading the corpus built by tools/build_corpus.py, building the two tokenizer families tinygpt
supports with Hugging Face `tokenizers`, writing the small JSON files that sit beside a saved model, and turning a
token stream into training batches. Needs numpy and tokenizers; torch only inside the functions that use it.
"""
import inspect
import json
import time
from pathlib import Path

import numpy as np
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

SPM_SPECIALS = ["<unk>", "<s>", "</s>"]
BYTELEVEL_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
METASPACE = "\u2581"

# Strings whose tokenisation every fixture records (whitespace runs, tabs, newlines, digits, punctuation, accents,
# CJK, emoji, leading/trailing spaces, the empty string; the special token is appended per tokenizer family).
TOKENIZATION_STRINGS = [
    "Hello world",
    "It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in "
    "want of a wife.",
    "  leading spaces",
    "trailing  ",
    "",
    " ",
    "a",
    "multiple   spaces    between     words",
    "tab\tseparated\tvalues\t",
    "line one\nline two\n\nline four\n",
    "\n\n\n",
    " \t \n\r\n mixed whitespace",
    "digits 0123456789, 3.14159 and 1,000,000 and 2024-01-31",
    "Punctuation!? (yes); [no]: {maybe}... \"quoted\" 'single' -- dashes \u2014 \u2013 end.",
    "don't won't I'm you're they'll we've she'd IT'S",
    "UPPER lower MiXeD CamelCase snake_case",
    "Accents: caf\u00e9, na\u00efve, r\u00e9sum\u00e9, Zo\u00eb, \u00c5ngstr\u00f6m, \u00fcber",
    "CJK: \u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 \u4e2d\u6587 \ud55c\uad6d\uc5b4",
    "Emoji: \U0001f999\U0001f680 \U0001f44d\U0001f3fd \u2764\ufe0f",
    "http://example.com/path?q=1&r=2#frag",
    "Antidisestablishmentarianism and supercalifragilisticexpialidocious",
    "non\u00a0breaking\u200bzero-width",
]


def read_corpus(corpus_dir, limit_per_source=None):
    """[(source name, text)] from corpus_dir/train/*.txt in name order, each cut to limit_per_source characters
    (at a line end) when given."""
    out = []
    for f in sorted(Path(corpus_dir, "train").glob("*.txt")):
        text = f.read_text(encoding="utf-8")
        if limit_per_source is not None and len(text) > limit_per_source:
            cut = text.rfind("\n", 0, limit_per_source)
            text = text[:cut if cut > 0 else limit_per_source]
        out.append((f.stem, text))
    return out


def chunks(text, size=4096):
    """Splits text at line ends into pieces of about size characters (newlines kept), for batched encoding."""
    out = []
    start = 0
    while start < len(text):
        end = text.find("\n", start + size)
        end = len(text) if end < 0 else end + 1
        out.append(text[start:end])
        start = end
    return out


def paragraphs(texts):
    """Every non-empty line of every text (the unit the SentencePiece-style trainer sees)."""
    for text in texts:
        for line in text.split("\n"):
            if line.strip():
                yield line


def train_spm_style(texts, vocab_size, layout, limit_alphabet=100):
    """A Llama/Mistral-style BPE with byte fallback: <unk>=0, <s>=1, </s>=2, <0x00>..<0xFF> = 3..258, then the
    learned pieces. layout "legacy": Llama-2's normalizer (Prepend + Replace " " by U+2581), no pre-tokenizer;
    layout "metaspace": Mistral's Metaspace pre-tokenizer (prepend_scheme "first", split false), no normalizer.
    Training splits words at U+2581 so no merge crosses a word boundary, as SentencePiece does."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    if layout == "legacy":
        tok.normalizer = normalizers.Sequence([normalizers.Prepend(METASPACE), normalizers.Replace(" ", METASPACE)])
        tok.pre_tokenizer = pre_tokenizers.Split(METASPACE, behavior="merged_with_next")
    elif layout == "metaspace":
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="first", split=True)
    else:
        raise ValueError(f"unknown layout {layout}")
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - 256, special_tokens=SPM_SPECIALS,
                                  limit_alphabet=limit_alphabet, show_progress=False)
    tok.train_from_iterator(paragraphs(texts), trainer)
    learned = json.loads(tok.to_str())["model"]
    vocab = {s: i for i, s in enumerate(SPM_SPECIALS)}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for piece, _ in sorted(learned["vocab"].items(), key=lambda kv: kv[1]):
        if piece not in vocab:
            vocab[piece] = len(vocab)
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in learned["merges"]]
    final = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    if layout == "legacy":
        final.normalizer = normalizers.Sequence([normalizers.Prepend(METASPACE),
                                                 normalizers.Replace(" ", METASPACE)])
    else:
        final.pre_tokenizer = pre_tokenizers.Metaspace(replacement=METASPACE, prepend_scheme="first", split=False)
    final.decoder = decoders.Sequence([decoders.Replace(METASPACE, " "), decoders.ByteFallback(), decoders.Fuse(),
                                       decoders.Strip(" ", 1, 0)])
    final.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPM_SPECIALS])
    final.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                         special_tokens=[("<s>", 1)])
    return final


def train_byte_level(texts, vocab_size, min_frequency=2):
    """A GPT-2-style byte-level BPE (ByteLevel pre-tokenizer with GPT-2's regex, no prefix space; ByteLevel
    decoder) whose first ids are <|endoftext|>=0, <|im_start|>=1, <|im_end|>=2, as in SmolLM2."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=BYTELEVEL_SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), min_frequency=min_frequency,
                                  show_progress=False)
    tok.train_from_iterator((c for t in texts for c in chunks(t, 1 << 16)), trainer)
    return tok


def added_tokens_decoder(tok):
    """The added_tokens_decoder block of tokenizer_config.json for the special tokens of tok."""
    out = {}
    for tid, t in sorted(tok.get_added_tokens_decoder().items()):
        out[str(tid)] = {"content": t.content, "lstrip": t.lstrip, "normalized": t.normalized, "rstrip": t.rstrip,
                         "single_word": t.single_word, "special": t.special}
    return out


def save_tokenizer(tok, out_dir, family, max_len):
    """Writes tokenizer.json and a tokenizer_config.json that loads it verbatim (PreTrainedTokenizerFast).
    family "spm": BOS <s> added, EOS </s>; "bytelevel": no BOS added, <|endoftext|> as BOS/EOS/UNK."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tok.save(str(out_dir / "tokenizer.json"))
    if family == "spm":
        cfg = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": None,
               "add_bos_token": True, "add_eos_token": False, "legacy": True}
    else:
        cfg = {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>",
               "pad_token": None, "add_bos_token": False, "add_eos_token": False}
    cfg.update({"tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False,
                "model_max_length": max_len, "added_tokens_decoder": added_tokens_decoder(tok)})
    (out_dir / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n")


def encode_documents(tok, docs, sep_ids, prefix_ids=()):
    """One uint16/uint32 stream: for each document, prefix_ids + ids + sep_ids (documents are long texts; they are
    encoded in line-aligned chunks, which only forbids merges across a chunk boundary)."""
    parts = []
    for doc in docs:
        pieces = chunks(doc)
        ids = [i for enc in tok.encode_batch(pieces, add_special_tokens=False) for i in enc.ids]
        parts.append(np.asarray(list(prefix_ids) + ids + list(sep_ids), dtype=np.int64))
    stream = np.concatenate(parts)
    return stream.astype(np.uint16 if stream.max() < 65536 else np.uint32)


def save_model(model, out_dir):
    """save_pretrained as safetensors (transformers 5 always writes safetensors and no longer takes the flag)."""
    takes_flag = "safe_serialization" in inspect.signature(model.save_pretrained).parameters
    model.save_pretrained(out_dir, **({"safe_serialization": True} if takes_flag else {}))


class Batches:
    """Random (input, target) windows of length seq from a token stream held on the GPU."""

    def __init__(self, stream, seq, batch, device, seed, first=None):
        """first: a token id that replaces each window's first input token (a BOS every sequence starts with),
        or None to keep the stream's own token there."""
        import torch
        self.torch = torch
        self.first = first
        self.data = torch.from_numpy(stream.astype(np.int64)).to(device)
        self.seq, self.batch = seq, batch
        self.gen = torch.Generator(device=device)
        self.gen.manual_seed(seed)
        self.offsets = torch.arange(seq + 1, device=device)

    def next(self):
        torch = self.torch
        start = torch.randint(0, self.data.numel() - self.seq - 1, (self.batch, 1), generator=self.gen,
                              device=self.data.device)
        win = self.data[start + self.offsets]
        if self.first is not None:
            win[:, 0] = self.first
        return win[:, :-1], win[:, 1:]


class Timer:
    """Seconds since construction."""

    def __init__(self):
        self.t0 = time.time()

    def __call__(self):
        return time.time() - self.t0
