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


# The special tokens of the folders that hold a template alone (llama.cpp's models/templates copies), as the
# models' tokenizer_config.json files name them.
LONE_TEMPLATE_SPECIAL = {
    "gemma-2-2b-it": {"bos_token": "<bos>", "eos_token": "<eos>"},
    "Phi-3.5-mini-instruct": {"bos_token": "<s>", "eos_token": "<|endoftext|>"},
    "Qwen2.5-7B-Instruct": {"eos_token": "<|im_end|>"},
    "Qwen3-0.6B": {"eos_token": "<|im_end|>"},
}


def real_templates():
    out = []
    for name in sorted(os.listdir(REALMETA)):
        path = os.path.join(REALMETA, name, "tokenizer_config.json")
        lone = name.split("__")[0]
        if not os.path.isfile(path) and lone not in LONE_TEMPLATE_SPECIAL:
            continue
        cfg = json.load(open(path, encoding="utf-8")) if os.path.isfile(path) else dict(LONE_TEMPLATE_SPECIAL[lone])
        ct = cfg.get("chat_template")
        source = "realmeta/%s/tokenizer_config.json" % name
        # newer repositories keep the template beside it: chat_template.jinja, or chat_template.json's "chat_template"
        jinja = os.path.join(REALMETA, name, "chat_template.jinja")
        cjson = os.path.join(REALMETA, name, "chat_template.json")
        if ct is None and os.path.isfile(jinja):
            ct, source = open(jinja, encoding="utf-8").read(), "realmeta/%s/chat_template.jinja" % name
        elif ct is None and os.path.isfile(cjson):
            ct = json.load(open(cjson, encoding="utf-8")).get("chat_template")
            source = "realmeta/%s/chat_template.json" % name
        if ct is None:
            continue
        if isinstance(ct, list):  # [{name, template}]: transformers uses "default"
            ct = {t["name"]: t["template"] for t in ct}["default"]
        special = {}
        for key in ("bos_token", "eos_token", "unk_token", "pad_token"):
            text = token_text(cfg.get(key))
            if text is not None:
                special[key] = text
        out.append((name, source, ct, special))
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
    "gemma": {"bos_token": "<bos>", "eos_token": "<eos>"},
    "phi3": {"bos_token": "<s>", "eos_token": "<|endoftext|>"},
    "qwen2.5": {"eos_token": "<|im_end|>"},
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


# Small templates, one per feature of the engine (name, template, variables): rendered once each.
M = [{"role": "system", "content": " sys "}, {"role": "user", "content": "Hi\nthere"},
     {"role": "assistant", "content": "Hello"}, {"role": "user", "content": "Bye"}]
FEATURES = [
    ("output", "a{{ 'b' }}c{{ 1 }}{{ 1.5 }}{{ none }}{{ true }}{{ undefined_name }}|", {}),
    ("string escapes", "{{ 'tab\\there\\n' }}{{ \"dq \\\"x\\\" \\\\ \\u00e9 \\x41 \\101 \\q\" }}{{ 'a' 'b' }}", {}),
    ("numbers", "{{ 1_000 }} {{ 0x1F }} {{ 0b101 }} {{ 0o17 }} {{ 1e3 }} {{ 2.5e-3 }} {{ 1.0e20 }} {{ 123456789.125 }}", {}),
    ("arithmetic", "{{ 7 + 3 }} {{ 7 - 10 }} {{ 6 * 7 }} {{ 7 / 2 }} {{ 8 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 8 }} {{ 2 ** -2 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ True + 1 }}", {}),
    ("string ops", "{{ 'ab' + 'cd' }} {{ 'x' ~ 1 ~ none ~ true }} {{ 'ab' * 3 }} {{ [1] * 2 }} {{ [1, 2] + [3] }} {{ -(3) }} {{ +4 }}", {}),
    ("comparisons", "{{ 1 < 2 }} {{ 2 <= 1 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ 1 == true }} {{ 'a' != 'a' }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ [1, 2] < [1, 3] }} {{ none == none }}", {}),
    ("in", "{{ 'ell' in 'hello' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} {{ 3 not in [3] }} {{ 'x' in undefined_name }}", {}),
    ("logic", "{{ 0 or 'x' }} {{ 1 and 'y' }} {{ '' and 'z' }} {{ not 0 }} {{ not [] }} {{ none or [] }} {{ 'a' if 1 else 'b' }} {{ 'a' if 0 else 'b' }} [{{ 'a' if 0 }}]", {}),
    ("precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ 1 ~ (2 + 3) }} {{ 1 ~ 2 * 3 }} {{ not 1 == 2 }} {{ 'a' ~ 'b' | upper }} {{ -1 | abs }}", {}),
    ("literals", "{{ [1, 'two', [3], {'k': none}] }} {{ (1, 2) }} {{ (1,) }} {{ () }} {{ {'a': 1, 'b': [true, false]} }} {{ [] }} {{ {} }} {{ [1, 2,] }}", {}),
    ("repr", "{{ ['it\\'s', \"q\\\"\", 'both \\' \"', 'nl\\n', 'é', '\\x01\\x7f'] }} {{ {'k': 1.5, 2: 'v'} }}", {}),
    ("floats", "{{ 0.1 + 0.2 }} {{ 1 / 3 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ -0.0 }} {{ 3.0 }} {{ 2.5e-7 }} {{ 12345678901234567.0 }}", {}),
    ("if elif else", "{% for x in [1, 2, 3, 4] %}{% if x == 1 %}one{% elif x == 2 %}two{% elif x == 3 %}three{% else %}other{% endif %},{% endfor %}", {}),
    ("for loop vars", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }};{% endfor %}", {}),
    ("for else", "{% for x in [] %}x{% else %}empty{% endfor %}{% for x in [1] %}{{ x }}{% else %}no{% endfor %}", {}),
    ("for filter", "{% for m in messages if m.role != 'system' %}{{ loop.index }}/{{ loop.length }}:{{ m.role }} {% endfor %}", {"messages": M}),
    ("for unpack", "{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}{% for a, b in [[1, 2], (3, 4)] %}{{ a + b }}{% endfor %}", {}),
    ("for dict and string", "{% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %}|{% for c in 'hé' %}[{{ c }}]{% endfor %}", {}),
    ("nested loops", "{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}|{% endfor %}", {}),
    ("break continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("loop cycle", "{% for x in range(5) %}{{ loop.cycle('a', 'b', 'c') }}{% endfor %}", {}),
    ("range", "{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ range(5, 0, -2) | list }} {{ range(0) | list }}", {}),
    ("set scoping", "{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = x + 10 %}{{ x }} {% endfor %}{{ x }}{% if true %}{% set x = 5 %}{% endif %}{{ x }}", {}),
    ("set shadows a variable", "{{ messages | length }}{% set messages = messages[1:] %}{{ messages | length }}", {"messages": M}),
    ("set tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c = 3, 4 %}{{ c }}", {}),
    ("set block", "{% set text %}  Hello {{ name }}!\n{% endset %}[{{ text }}]", {"name": "you"}),
    ("namespace", "{% set ns = namespace(found=false, count=0) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.found = true %}{% set ns.count = ns.count + 1 %}{% endif %}{% endfor %}{{ ns.found }} {{ ns.count }}", {"messages": M}),
    ("namespace from dict", "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}{{ ns['a'] }}", {}),
    ("indexing", "{{ messages[0]['role'] }} {{ messages[-1].content }} {{ messages[1]['content'] }} {{ messages[9] }}|{{ 'hello'[1] }} {{ 'hello'[-1] }} {{ messages.0.role }}", {"messages": M}),
    ("slicing", "{{ [1, 2, 3, 4, 5][1:] }} {{ [1, 2, 3, 4, 5][:2] }} {{ [1, 2, 3, 4, 5][::2] }} {{ [1, 2, 3, 4, 5][::-1] }} {{ [1, 2, 3, 4, 5][-2:] }} {{ 'héllo'[1:3] }} {{ 'héllo'[::-1] }} {{ [1, 2, 3][5:] }} {{ 'abcdef'[4:1:-1] }}", {}),
    ("attribute and item rules", "{{ d.items is callable }}|{{ d['items'] }}|{{ d['k'] }}|{{ d.k }}|{{ d.missing }}|{{ d['missing'] }}|{{ none.x }}|{{ 'abc'.nope }}|{{ (d.get('k'), d.get('z'), d.get('z', 9)) }}", {"d": {"k": "v", "items": "field"}}),
    ("string methods", "{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '  a'.lstrip() }}|{{ 'a  '.rstrip() }}|{{ 'Hello'.startswith('He') }}{{ 'Hello'.endswith('lo') }}{{ 'Hello'.startswith(('x', 'H')) }}|{{ 'a,b,,c'.split(',') }}{{ ' a  b '.split() }}{{ 'a b c'.split(' ', 1) }}|{{ 'hEllo wOrld'.upper() }}{{ 'HeLLo'.lower() }}{{ 'hello wORLD 2nd'.title() }}{{ 'hELLO'.capitalize() }}|{{ 'aXbX'.replace('X', '-') }}{{ 'ab'.replace('', '.') }}|{{ 'hello'.find('l') }}{{ 'hello'.count('l') }}{{ '-'.join(['a', 'b']) }}{{ 'a\\nb\\r\\nc'.splitlines() }}", {}),
    ("dict methods", "{% for k, v in d.items() %}{{ k }}:{{ v }} {% endfor %}{{ d.keys() | list }} {{ d.values() | list }}", {"d": {"z": 1, "a": [2], "m": {"n": None}}}),
    ("filters: text", "{{ '  x  ' | trim }}|{{ 'xxhixx' | trim('x') }}|{{ 'abc' | upper }}|{{ 'ABC' | lower }}|{{ 'hello wOrld-foo(bar [baz' | title }}|{{ 'hELLO world' | capitalize }}|{{ 'aaa' | replace('a', 'b', 2) }}|{{ 42 | string }}{{ none | string }}|{{ '<a href=\"x\">&\\'</a>' | e }}|{{ 'x' | safe }}", {}),
    ("filters: length first last", "{{ 'héllo' | length }} {{ [1, 2, 3] | length }} {{ {'a': 1} | length }} {{ undefined_name | length }} {{ [1, 2, 3] | count }} {{ [1, 2, 3] | first }} {{ [1, 2, 3] | last }} {{ 'abc' | first }} {{ 'abc' | last }} [{{ [] | first }}]", {}),
    ("filters: default", "{{ undefined_name | default('dflt') }} {{ '' | default('empty') }} {{ '' | default('empty', true) }} {{ none | d('n') }} {{ 0 | default(5, boolean=true) }}", {}),
    ("filters: join list items", "{{ [1, 2, 3] | join(', ') }} {{ ['a', 'b'] | join }} {{ 'abc' | list }} {{ {'a': 1} | list }} {% for k, v in {'x': 1, 'y': 2} | items %}{{ k }}{{ v }}{% endfor %} {{ messages | join('/', attribute='role') }}", {"messages": M}),
    ("filters: int float abs", "{{ '42' | int }} {{ '4.7' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ 3.9 | int }} {{ true | int }} {{ '1.5' | float }} {{ 2 | float }} {{ 'y' | float }} {{ -3 | abs }} {{ -2.5 | abs }}", {}),
    ("filters: select map", "{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | list }} {{ messages | rejectattr('role', 'equalto', 'user') | list | length }} {{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 2, 3, 4] | reject('even') | list }} {{ ['a', 'B'] | map('upper') | join }} {{ [0, 1, '', 'x'] | select | list }} {{ messages | selectattr('content') | list | length }}", {"messages": M}),
    ("filters: reverse indent", "{{ 'abc' | reverse }} {{ [1, 2, 3] | reverse | list }}|{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(3, first=true) }}|{{ 'a\\n\\nb' | indent('>', blank=true) }}", {}),
    ("tojson", "{{ data | tojson }}|{{ data | tojson(indent=2) }}|{{ 'é\"\\\\\\n\\t\\x01' | tojson }}|{{ [1.0, 2.5e-8, none, true] | tojson }}|{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}|{{ [1, [2]] | tojson(separators=(',', ':')) }}|{{ {} | tojson(indent=2) }}{{ [] | tojson(indent=2) }}|{{ (1, 2) | tojson }}|{{ {1: 'x', true: 'y', none: 'z'} | tojson }}", {"data": {"name": "get_weather", "args": {"city": "Zürich", "n": [1, 2]}, "ok": True, "none": None}}),
    ("tests", "{{ x is defined }}{{ y is defined }}{{ y is undefined }}{{ none is none }}{{ 'a' is string }}{{ 1 is string }}{{ {} is mapping }}{{ [] is mapping }}{{ [] is iterable }}{{ 'a' is iterable }}{{ 1 is iterable }}{{ [] is sequence }}{{ 1 is number }}{{ 1.5 is number }}{{ true is number }}{{ 1 is integer }}{{ 1.0 is float }}{{ true is boolean }}{{ 1 is boolean }}{{ true is true }}{{ false is false }}{{ 3 is odd }}{{ 3 is even }}{{ 9 is divisibleby 3 }}{{ 'a' is equalto 'a' }}{{ 2 is eq 3 }}{{ 1 is lt 2 }}{{ 2 is in [1, 2] }}{{ x is not none }}{{ 'abc' is lower }}{{ 'ABC' is upper }}{{ range is callable }}", {"x": 1}),
    ("whitespace control", "a  {{- ' b ' -}}  c\n  {%- if true -%}  d  {%- endif -%}\n  e {#- comment -#}  f\n{%+ if true %} g{% endif %}\n   {{ 'h' }}", {}),
    ("trim and lstrip blocks", "<ul>\n  {% for x in [1, 2] %}\n    <li>{{ x }}</li>\n  {% endfor %}\n</ul>\n  {# a comment #}\nafter\n\t{% if true %}\tx{% endif %}  \n{% if true +%}\nkept newline{% endif %}\n", {}),
    ("comments", "a{# one #}b{#- two -#} c {# multi\nline #}\nd", {}),
    ("newlines", "line1\r\nline2\rline3\n{{ 'x' }}\n\n", {}),
    ("generation tag", "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% else %}{{ m.content }}{% endif %}|{% endfor %}", {"messages": M}),
    ("print tag", "{% print 'p' ~ 1 %}", {}),
    ("strftime_now", "{{ strftime_now('%d %b %Y') }} {{ strftime_now('%Y-%m-%d %H:%M') }} {{ strftime_now is defined }}", {}),
    ("raise_exception", "{% if messages[0].role != 'user' %}{{ raise_exception('First message must come from the user, got ' + messages[0].role) }}{% endif %}ok", {"messages": M}),
    ("dict global", "{{ dict(a=1, b='x') }} {{ dict() }}", {}),
    ("undefined printing", "[{{ missing }}][{{ missing | trim }}][{{ missing ~ 'x' }}][{% for x in missing %}{{ x }}{% endfor %}][{{ missing | length }}][{{ missing is none }}][{{ d.nope is defined }}]", {"d": {}}),
    ("truthiness", "{% for v in [0, 1, '', 'a', [], [0], {}, {'a': 1}, none, 0.0, 0.5] %}{{ 'T' if v else 'F' }}{% endfor %}", {}),
    ("messages with tool calls", "{% for m in messages %}{% if m.tool_calls is defined %}{% for c in m.tool_calls %}{{ c.function.name }}({{ c.function.arguments | tojson }}){% endfor %}{% elif m.content is string %}{{ m.content }}{% endif %}{% endfor %}", {"messages": [{"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f", "arguments": {"a": [1, "b"]}}}]}, {"role": "tool", "content": "r"}]}),
    ("unicode case", "{% for s in ['straße', 'İstanbul', 'ΟΔΟΣ ΚΑΙ ΣΟΦΙΑ', 'Ωμέγα', 'ДОБРЫЙ день', 'éCOLE ÇA', 'x 日本 🙂', 'ŉ ſ ĸ ÿ µ'] %}{{ s.upper() }}|{{ s.lower() }}|{{ s.title() }}|{{ s.capitalize() }}|{{ s | title }}|{{ s is upper }}{{ s is lower }};{% endfor %}", {}),
    ("number strings", "{% for s in ['42', ' 42 ', '4.7', '-3', '+5', '1_000', '_1', '1__0', '0x10', '1e3', '1e', '.5', '5.', 'nan', '', 'abc', '1_0.5', '007', '+.5e-3'] %}[{{ s | int }}|{{ s | float }}]{% endfor %}{{ 'inf' | float }}{{ '-Infinity' | float }}", {}),
    ("content parts", "{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}{% for p in m.content %}{% if p.type == 'text' %}{{ p.text }}{% endif %}{% endfor %}{% endif %}{% endfor %}", {"messages": [{"role": "user", "content": [{"type": "text", "text": "part1 "}, {"type": "image"}, {"type": "text", "text": "part2"}]}]}),
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
        # templates with a thinking switch (Qwen3, SmolLM3): rendered with it unset, on and off
        thinking = (None, True, False) if "enable_thinking" in text else (None,)
        for conv_name, messages, tools in CONVERSATIONS:
            for agp, think in ((a, t) for a in (False, True) for t in thinking):
                variables = {"messages": messages, "tools": tools, "documents": None, "add_generation_prompt": agp}
                if think is not None:
                    variables["enable_thinking"] = think
                variables.update(special)
                label = conv_name if think is None else "%s, enable_thinking=%s" % (conv_name, think)
                case = {"template": name, "conversation": label, "vars": variables}
                try:
                    case["expected"] = tmpl.render(**variables)
                except Exception as e:
                    case["error"] = "%s: %s" % (type(e).__name__, e)
                doc["cases"].append(case)
    for name, text, variables in FEATURES:
        key = "feature: " + name
        doc["templates"][key] = {"source": "feature", "text": text}
        case = {"template": key, "conversation": "-", "vars": variables}
        try:
            case["expected"] = env.from_string(text).render(**variables)
        except Exception as e:  # any failure: the engine must fail too
            case["error"] = "%s: %s" % (type(e).__name__, e)
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
