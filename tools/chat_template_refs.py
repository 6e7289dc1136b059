#!/usr/bin/env python3
"""chat_template_refs.py — writes tests/data/chat/refs.json: what Python's jinja2 renders for every real chat
template in ../shared/testdata/realmeta/*/tokenizer_config.json and every built-in template of
src/chat/builtin_templates.c, over a fixed set of conversations, with Hugging Face transformers' settings:

    ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols, generation tag])
    filters["tojson"] = json.dumps(x, ensure_ascii=False, indent=..., separators=..., sort_keys=...)
    globals raise_exception(msg) -> TemplateError, strftime_now(fmt) -> a FIXED date (2026-12-01 10:00:00)
    render(messages=..., tools=..., documents=None, add_generation_prompt=..., bos_token=..., eos_token=..., ...)

tests/unit/test_chat_template.c renders the same cases with tinygpt's engine and compares byte for byte. The
reference is a tool we do not control: run this with Debian's python3-jinja2 (`apt-get install python3-jinja2`,
then `/usr/bin/python3 tools/chat_template_refs.py`); the fixture is committed, so the tests need no Python.
The built-in template texts are read from the C source, so the fixture checks them too.
"""
import calendar
import datetime
import json
import os
import re
import sys

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REALMETA = os.path.join(ROOT, "..", "shared", "testdata", "realmeta")
OUT = os.path.join(ROOT, "tests", "data", "chat", "refs.json")
NOW = datetime.datetime(2026, 12, 1, 10, 0, 0)


class GenerationTag(Extension):
    """transformers' AssistantTracker without the tracking: {% generation %}...{% endgeneration %} renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return NOW.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def token_text(tok):
    if isinstance(tok, dict):
        return tok.get("content")
    return tok


def real_templates():
    out = []
    for name in sorted(os.listdir(REALMETA)):
        path = os.path.join(REALMETA, name, "tokenizer_config.json")
        if not os.path.isfile(path):
            continue
        cfg = json.load(open(path, encoding="utf-8"))
        ct = cfg.get("chat_template")
        if ct is None:
            continue
        if isinstance(ct, list):  # [{name, template}]: transformers uses "default"
            ct = {t["name"]: t["template"] for t in ct}["default"]
        special = {}
        for key in ("bos_token", "eos_token", "unk_token", "pad_token"):
            text = token_text(cfg.get(key))
            if text is not None:
                special[key] = text
        out.append((name, "realmeta/%s/tokenizer_config.json" % name, ct, special))
    return out


def c_string_literals(body):
    """Concatenates the C string literals of body (only the escapes builtin_templates.c uses)."""
    text = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', body))
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "\\": "\\", '"': '"'}[m.group(1)], text)


BUILTIN_SPECIAL = {
    "chatml": {"bos_token": "<s>", "eos_token": "</s>"},
    "smollm2": {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"},
    "zephyr": {"bos_token": "<s>", "eos_token": "</s>"},
    "llama2": {"bos_token": "<s>", "eos_token": "</s>"},
    "llama3": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "llama3.2": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "mistral": {"bos_token": "<s>", "eos_token": "</s>"},
}


def builtin_templates():
    src = open(os.path.join(ROOT, "src", "chat", "builtin_templates.c"), encoding="utf-8").read()
    table = src[src.index("BUILTINS[] = {") : src.index("};")]
    out = []
    for m in re.finditer(r'\{"([^"]+)",\n(.*?)\},\n', table, re.S):
        name, body = m.group(1), m.group(2)
        out.append((name, "builtin", c_string_literals(body), BUILTIN_SPECIAL[name]))
    return out


SYSTEM = {"role": "system", "content": "You are a concise assistant."}
U1 = {"role": "user", "content": "Hello! Who are you?"}
A1 = {"role": "assistant", "content": "I am a small language model."}
U2 = {"role": "user", "content": "What can you do?"}
UNICODE = {"role": "user", "content": "  Ünïcödé: 日本語, emoji 🙂, quotes \"'\\\nsecond line\n\n\tindented line  \n"}
A_WS = {"role": "assistant", "content": "\n  Sure — here it is.  \n"}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "City name"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    }
]
TOOL_CALL = {
    "role": "assistant",
    "content": "",
    "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Zürich", "days": 2}}}],
}
TOOL_RESULT = {"role": "tool", "content": "{\"temp_c\": 3.5, \"sky\": \"snow\"}"}

CONVERSATIONS = [
    ("user", [U1], None),
    ("system+user", [SYSTEM, U1], None),
    ("multi-turn", [U1, A1, U2], None),
    ("system+multi-turn", [SYSTEM, U1, A1, U2], None),
    ("unicode+newlines", [SYSTEM, UNICODE, A_WS, U2], None),
    ("user-user (not alternating)", [U1, U2], None),
    ("tools", [U1], TOOLS),
    ("tool call+result", [SYSTEM, U1, TOOL_CALL, TOOL_RESULT], TOOLS),
]


def main():
    env = make_env()
    templates = real_templates() + builtin_templates()
    names = [t[0] for t in templates]
    missing = set(BUILTIN_SPECIAL) - set(names)
    if missing:
        sys.exit("chat_template_refs.py: built-ins not found in builtin_templates.c: %s" % sorted(missing))
    doc = {
        "generator": "tools/chat_template_refs.py",
        "jinja2_version": jinja2.__version__,
        "python_version": sys.version.split()[0],
        "strftime_now": NOW.isoformat(),
        "now_epoch_utc": calendar.timegm(NOW.timetuple()),
        "templates": {},
        "cases": [],
    }
    for name, source, text, special in templates:
        doc["templates"][name] = {"source": source, "text": text}
        tmpl = env.from_string(text)
        for conv_name, messages, tools in CONVERSATIONS:
            for agp in (False, True):
                variables = {"messages": messages, "tools": tools, "documents": None, "add_generation_prompt": agp}
                variables.update(special)
                case = {"template": name, "conversation": conv_name, "vars": variables}
                try:
                    case["expected"] = tmpl.render(**variables)
                except jinja2.exceptions.TemplateError as e:
                    case["error"] = str(e)
                doc["cases"].append(case)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    n_err = sum("error" in c for c in doc["cases"])
    print("%s: %d templates, %d cases (%d raise an error), jinja2 %s" %
          (os.path.relpath(OUT, ROOT), len(templates), len(doc["cases"]), n_err, jinja2.__version__))


if __name__ == "__main__":
    main()
