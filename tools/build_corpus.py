#!/usr/bin/env python3
"""Builds tinygpt's English training corpus from Debian packages and splits it into train / held-out parts.

Responsibility: turn the texts that Debian ships (public-domain books, commentaries, dictionaries, fortune files)
into clean UTF-8 prose, then split it deterministically into
  tools/.corpus/train/<source>.txt   what training (tokenizer and model) may see,
  tools/.corpus/valid.txt            ~1 MB of blocks taken from every source, never trained on,
  tools/.corpus/long-heldout.txt     one contiguous ~300 KB passage (the end of Austen's "Persuasion"),
and copies the two held-out files to models/data/ (they are committed). Pure standard-library Python; needs the
Debian packages listed in SOURCES (install them with --install, as root) plus Rscript and mod2imp.

Usage: tools/build_corpus.py [--install] [--out tools/.corpus] [--models models]
"""
import argparse
import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

PACKAGES = [
    "r-base-core", "r-cran-janeaustenr", "libsword-utils", "sword-text-kjv", "sword-text-web",
    "sword-comm-tdavid", "sword-comm-mhcc", "sword-comm-scofield", "dict-devil", "dict-jargon",
    "fortunes", "fortunes-min",
]

# name -> (Debian package, licence, description); the order is the order of the corpus.
SOURCES = {
    "austen": ("r-cran-janeaustenr", "public domain (package: MIT)", "Jane Austen's six novels"),
    "kjv": ("sword-text-kjv", "public domain", "King James Bible (SWORD engKJV2006eb)"),
    "web": ("sword-text-web", "public domain", "World English Bible (SWORD engWEB2015eb)"),
    "tdavid": ("sword-comm-tdavid", "public domain", "C. H. Spurgeon, The Treasury of David (1885)"),
    "mhcc": ("sword-comm-mhcc", "public domain", "Matthew Henry's Concise Commentary"),
    "scofield": ("sword-comm-scofield", "public domain", "Scofield Reference Notes (1917)"),
    "devil": ("dict-devil", "public domain", "Ambrose Bierce, The Devil's Dictionary (1911)"),
    "jargon": ("dict-jargon", "public domain", "The Jargon File 4.4.7"),
    "fortunes": ("fortunes, fortunes-min", "BSD (as distributed by Debian)", "fortune cookie files (not -off)"),
}

SWORD_MODULES = {"kjv": "engKJV2006eb", "web": "engWEB2015eb", "tdavid": "TDavid", "mhcc": "MHCC",
                 "scofield": "Scofield"}
FORTUNE_DIR = Path("/usr/share/games/fortunes")
FORTUNE_SKIP = {"ascii-art", "translate-me"}
DICT_DIR = Path("/usr/share/dictd")

BLOCK_BYTES = 24 * 1024       # validation is drawn in blocks of about this size, cut at paragraph ends
VALID_EVERY = 30              # one block in VALID_EVERY goes to validation
VALID_PHASE = 13              # ... the one whose index % VALID_EVERY equals this
LONG_HELDOUT_BYTES = 300 * 1024


def run(cmd):
    """Runs cmd and returns its stdout as text; raises on a non-zero exit."""
    return subprocess.run(cmd, check=True, capture_output=True).stdout.decode("utf-8", errors="replace")


def squash(text):
    """Collapses runs of white space (newlines included) to one space and trims the ends."""
    return re.sub(r"\s+", " ", text).strip()


def unwrap(text):
    """Joins hard-wrapped lines into paragraphs; paragraphs (split at blank lines) are separated by one blank line."""
    paras = [squash(p) for p in re.split(r"\n[ \t]*\n", text)]
    return "\n\n".join(p for p in paras if p)


def austen():
    """Jane Austen's novels from janeaustenr, one paragraph per line pair, novels separated by their titles."""
    script = ('library(janeaustenr); b <- austen_books(); '
              'for (bk in levels(b$book)) { cat("\\n\\n\\f", bk, "\\n\\n", sep=""); '
              'writeLines(b$text[b$book == bk]) }')
    books = run(["Rscript", "-e", script]).split("\f")[1:]
    out = []
    for book in books:
        title, _, body = book.partition("\n")
        out.append((title.strip(), unwrap(body)))
    return out


INLINE_DROP = re.compile(r"<note\b[^>]*>.*?</note>", re.S)
BLOCK_TAG = re.compile(r"<(?:div|p|lg|l|title|lb|list|item|chapter)\b[^>]*>|</(?:div|p|lg|l|title|list|item)>")


def sword(module, verse_per_line):
    """A SWORD module dumped with mod2imp, markup removed, each paragraph kept once (mod2imp repeats linked
    entries). Bible verses become one line each; commentary paragraphs are separated by blank lines."""
    raw = run(["mod2imp", module])
    raw = re.sub(r"^\$\$\$.*$", "\n", raw, flags=re.M)
    raw = INLINE_DROP.sub("", raw)
    raw = BLOCK_TAG.sub("\n", raw)
    raw = re.sub(r"<[^>]*>", "", raw)
    raw = raw.replace("\u00b6", "")
    for ent, ch in (("&amp;", "&"), ("&lt;", "<"), ("&gt;", ">"), ("&quot;", '"'), ("&apos;", "'")):
        raw = raw.replace(ent, ch)
    seen = set()
    paras = []
    for line in raw.split("\n"):
        t = squash(line)
        t = re.sub(r" ([,.;:!?)])", r"\1", t)
        if len(t) < 2:
            continue
        key = hashlib.sha1(t.encode("utf-8")).digest()
        if key in seen:
            continue
        seen.add(key)
        paras.append(t)
    return ("\n" if verse_per_line else "\n\n").join(paras)


B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def b64num(s):
    """A number in dictd's index encoding (big-endian base 64 digits)."""
    n = 0
    for ch in s:
        n = n * 64 + B64.index(ch)
    return n


def dictd(name):
    """A dictd database (dictzip is gzip-compatible) without its 00-database* entries (found through the .index
    file), unwrapped into paragraphs."""
    raw = gzip.open(DICT_DIR / f"{name}.dict.dz", "rb").read()
    cuts = []
    for line in (DICT_DIR / f"{name}.index").read_text(encoding="utf-8").splitlines():
        head, off, length = line.split("\t")[:3]
        if head.startswith("00"):
            cuts.append((b64num(off), b64num(off) + b64num(length)))
    keep = bytearray()
    pos = 0
    for start, end in sorted(cuts):
        if start > pos:
            keep += raw[pos:start]
        pos = max(pos, end)
    keep += raw[pos:]
    return unwrap(keep.decode("utf-8", errors="replace"))


def fortunes():
    """Every fortune file (offensive ones are not installed), one cookie per paragraph, line breaks kept."""
    cookies = []
    for f in sorted(FORTUNE_DIR.iterdir()):
        if f.suffix in (".dat", ".u8") or f.is_symlink() or f.name in FORTUNE_SKIP or not f.is_file():
            continue
        text = f.read_text(encoding="utf-8", errors="replace")
        for c in text.split("\n%\n"):
            c = "\n".join(line.rstrip() for line in c.strip("\n%").split("\n")).strip()
            if c:
                cookies.append(c)
    return "\n\n".join(cookies)


def collect():
    """Returns {source name: text} in SOURCES order, plus Persuasion's text separately (it feeds long-heldout)."""
    texts = {}
    novels = austen()
    texts["austen"] = "\n\n".join(f"{title}\n\n{body}" for title, body in novels if title != "Persuasion")
    persuasion = next(body for title, body in novels if title == "Persuasion")
    for name, module in SWORD_MODULES.items():
        texts[name] = sword(module, verse_per_line=name in ("kjv", "web"))
    texts["devil"] = dictd("devil")
    texts["jargon"] = dictd("jargon")
    texts["fortunes"] = fortunes()
    return texts, persuasion


def blocks(text, size):
    """Cuts text into consecutive blocks of about size bytes, each ending at a paragraph or line end."""
    out = []
    start = 0
    while start < len(text):
        end = start + size
        if end >= len(text):
            out.append(text[start:])
            break
        nl = text.find("\n", end)
        end = len(text) if nl < 0 else nl + 1
        out.append(text[start:end])
        start = end
    return out


def split(texts, persuasion):
    """Deterministic split: Persuasion's last LONG_HELDOUT_BYTES (from a paragraph start) is the long held-out
    text, the rest of it is training text; every VALID_EVERY-th block of each source goes to validation."""
    cut = persuasion.find("\n\n", max(0, len(persuasion) - LONG_HELDOUT_BYTES))
    long_heldout = persuasion[cut + 2:]
    texts = dict(texts)
    texts["austen"] += "\n\nPersuasion\n\n" + persuasion[:cut]
    train, valid = {}, []
    for name, text in texts.items():
        kept = []
        for i, b in enumerate(blocks(text, BLOCK_BYTES)):
            (valid if i % VALID_EVERY == VALID_PHASE else kept).append(b)
        train[name] = "".join(kept)
    return train, "\n".join(v.strip("\n") for v in valid) + "\n", long_heldout.strip("\n") + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--install", action="store_true", help="apt-get install the source packages first")
    ap.add_argument("--out", default="tools/.corpus")
    ap.add_argument("--models", default="models", help="where data/valid.txt and data/long-heldout.txt go")
    args = ap.parse_args()
    if args.install:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", *PACKAGES], check=True, env=env)
    texts, persuasion = collect()
    train, valid, long_heldout = split(texts, persuasion)
    out = Path(args.out)
    (out / "train").mkdir(parents=True, exist_ok=True)
    stats = {"sources": {}, "valid_bytes": len(valid.encode()), "long_heldout_bytes": len(long_heldout.encode())}
    for name, text in train.items():
        (out / "train" / f"{name}.txt").write_text(text, encoding="utf-8")
        pkg, lic, desc = SOURCES[name]
        stats["sources"][name] = {"package": pkg, "licence": lic, "description": desc,
                                  "train_bytes": len(text.encode("utf-8"))}
    stats["train_bytes"] = sum(s["train_bytes"] for s in stats["sources"].values())
    (out / "valid.txt").write_text(valid, encoding="utf-8")
    (out / "long-heldout.txt").write_text(long_heldout, encoding="utf-8")
    (out / "stats.json").write_text(json.dumps(stats, indent=1) + "\n", encoding="utf-8")
    data = Path(args.models) / "data"
    data.mkdir(parents=True, exist_ok=True)
    (data / "valid.txt").write_text(valid, encoding="utf-8")
    (data / "long-heldout.txt").write_text(long_heldout, encoding="utf-8")
    json.dump(stats, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
