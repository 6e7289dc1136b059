#!/usr/bin/env python3
"""chat_template_diff.py — a differential check of the chat-template engine against Python's jinja2: every input of
a fuzz corpus (template, optionally FUZZ_SEP and a JSON array of messages or an object of variables, as
fuzz/fuzz_chat_template.c reads them) is rendered by jinja2 with Hugging Face's settings (tools/chat_template_refs.py)
and by build/release/tools/chat_render; prints the disagreements and a tally.

    make tools && /usr/bin/python3 tools/chat_template_diff.py fuzz/build/corpus/chat_template [MAX_SHOWN]

"Same" and "both fail" are agreement. "only we fail" is expected for what the engine refuses on purpose (printing
functions, generators or loop objects, which Python prints as <... at 0x...>; jinja2's constant folding of
expressions like 1[::-1]). A "DIFF" or an "only jinja2 fails" is a bug.
"""
import collections
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEP = b"\n@@TG-PART@@\n"
DEFAULT_MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi \u00e9\n"},
                    {"role": "assistant", "content": " Hello "}, {"role": "user", "content": "Bye"}]


def main():
    corpus = sys.argv[1]
    max_shown = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    spec = importlib.util.spec_from_file_location("refs", os.path.join(ROOT, "tools", "chat_template_refs.py"))
    refs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(refs)
    env = refs.make_env()
    render = os.path.join(ROOT, "build", "release", "tools", "chat_render")
    tally = collections.Counter()
    shown = 0
    tmp = tempfile.mkdtemp()
    tfile, vfile = os.path.join(tmp, "t.jinja"), os.path.join(tmp, "v.json")
    for name in sorted(os.listdir(corpus)):
        data = open(os.path.join(corpus, name), "rb").read()
        parts = data.split(SEP, 1)
        try:
            text = parts[0].decode("utf-8")
        except UnicodeDecodeError:
            continue  # the engine rejects it at once; jinja2 cannot even be given it
        doc = None
        if len(parts) == 2:
            try:
                doc = json.loads(parts[1].decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                doc = None
        if isinstance(doc, dict):
            variables = doc
        else:
            variables = {"messages": doc if isinstance(doc, list) else DEFAULT_MESSAGES, "tools": None,
                         "bos_token": "<s>", "eos_token": "</s>"}
        variables["add_generation_prompt"] = False
        try:
            want, want_err = env.from_string(text).render(**variables), None
        except Exception as e:  # noqa: BLE001 — any failure counts
            want, want_err = None, "%s: %s" % (type(e).__name__, e)
        open(tfile, "wb").write(parts[0])
        json.dump(variables, open(vfile, "w"))
        try:
            p = subprocess.run([render, tfile, vfile], capture_output=True, timeout=60)
        except subprocess.TimeoutExpired:
            tally["timeout"] += 1
            continue
        got = p.stdout.decode("utf-8", "replace")
        if p.returncode == 0 and want is not None:
            kind = "same" if got == want else "DIFF"
        elif p.returncode != 0 and want is None:
            kind = "both fail"
        elif want is None:
            kind = "only jinja2 fails"
        else:
            kind = "only we fail"
        tally[kind] += 1
        if kind not in ("same", "both fail") and shown < max_shown:
            shown += 1
            print("%s %s\n  template %r\n  jinja2   %r\n  tinygpt  %r" %
                  (kind, name, text[:200], (want if want is not None else want_err)[:200], got[:200]))
    print(dict(tally))


if __name__ == "__main__":
    main()
