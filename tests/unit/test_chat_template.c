/* test_chat_template.c — the chat-template engine against Python's jinja2: every case of tests/data/chat/refs.json
 * (written by tools/chat_template_refs.py with Debian's python3-jinja2 and Hugging Face's settings: the real
 * templates of ../shared/testdata/realmeta, the built-ins, one snippet per feature) must render byte for byte the
 * same, and fail where jinja2 failed. Then hostile templates (deep nesting, huge loops, output and memory bombs,
 * unclosed tags, unsupported features) must fail with one clear line, finding templates in model files, and the
 * fuzz seeds replayed through the harness (fuzz/fuzz_chat_template.c, linked in with its entry point renamed
 * regress_chat_template_one: the Makefile's TOOL_PARTS_test_chat_template). Run from the repository root (tests/run.sh
 * does). */
#define _GNU_SOURCE
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>
#include <jansson.h>

#include "chat/chat_template.h"
#include "chat/template_source.h"
#include "gguf_builder.h"

int regress_chat_template_one(const uint8_t *data, size_t size);

/* The real model folders: $TG_SHARED_DIR/testdata/realmeta (default ../shared), as test_gguf.c finds them. */
static const char *realmeta(const char *model) {
    static char path[1024];
    const char *dir = getenv("TG_SHARED_DIR");
    snprintf(path, sizeof path, "%s/testdata/realmeta/%s", dir && *dir ? dir : "../shared", model);
    return path;
}

/* Renders src with vars (a JSON text); returns the malloc'ed output or NULL with err filled. */
/* lim NULL: the defaults without the wall-clock deadline (a loaded machine must not change which limit a test
 * meets first). */
static char *render_with(const char *src, const char *vars_json, const tg_chat_limits *lim, tg_error *err) {
    tg_chat_limits untimed = tg_chat_default_limits();
    untimed.max_seconds = 0;
    if (!lim) lim = &untimed;
    tg_chat_template *t = tg_chat_template_compile(src, strlen(src), lim, err);
    if (!t) return NULL;
    json_t *vars = vars_json ? json_loads(vars_json, 0, NULL) : json_object();
    assert_non_null(vars);
    tg_chat_clock clock = {.now = 1796119200, .utc = true};
    size_t len;
    char *out = tg_chat_template_render(t, vars, &clock, &len, err);
    if (out) assert_int_equal(strlen(out), len);
    json_decref(vars);
    tg_chat_template_free(t);
    return out;
}

/* Asserts that rendering fails with a one-line message containing `want`. */
static void expect_error(const char *src, const char *vars_json, const tg_chat_limits *lim, const char *want) {
    tg_error err = {0};
    char *out = render_with(src, vars_json, lim, &err);
    if (out) fail_msg("rendered %.60s... instead of failing with '%s'", out, want);
    if (!strstr(err.msg, want)) fail_msg("message '%s' does not contain '%s'", err.msg, want);
    assert_null(strchr(err.msg, '\n'));
    assert_true(strncmp(err.msg, "chat template: ", 15) == 0);
}

static void expect_output(const char *src, const char *vars_json, const char *want) {
    tg_error err = {0};
    char *out = render_with(src, vars_json, NULL, &err);
    if (!out) fail_msg("failed: %s", err.msg);
    assert_string_equal(out, want);
    free(out);
}

static void test_jinja2_references(void **state) {
    (void)state;
    json_error_t je;
    json_t *doc = json_load_file("tests/data/chat/refs.json", 0, &je);
    if (!doc) fail_msg("tests/data/chat/refs.json: %s (line %d)", je.text, je.line);
    const json_t *templates = json_object_get(doc, "templates"), *cases = json_object_get(doc, "cases");
    assert_true(json_array_size(cases) >= 150);
    tg_chat_clock clock = {.now = json_integer_value(json_object_get(doc, "now_epoch_utc")), .utc = true};
    assert_int_equal(clock.now, 1796119200);
    const char *current = NULL;
    size_t same = 0, total = 0, all_same = 0, all_total = 0, feature_same = 0, feature_total = 0;
    char *failures = NULL;
    size_t i;
    const json_t *c;
    json_array_foreach(cases, i, c) {
        const char *name = json_string_value(json_object_get(c, "template"));
        const json_t *tinfo = json_object_get(templates, name);
        const char *text = json_string_value(json_object_get(tinfo, "text"));
        const char *source = json_string_value(json_object_get(tinfo, "source"));
        assert_non_null(text);
        if (strcmp(source, "builtin") == 0) { /* the fixture was rendered from the C source's own text */
            const char *b = tg_chat_builtin(name);
            assert_non_null(b);
            assert_string_equal(b, text);
        }
        bool feature = strcmp(source, "feature") == 0;
        if (!feature && (!current || strcmp(current, name) != 0)) {
            if (current) print_message("%s: %zu/%zu identical\n", current, same, total);
            current = name;
            same = total = 0;
        }
        tg_error err = {0};
        tg_chat_template *t = tg_chat_template_compile(text, strlen(text), NULL, &err);
        char *out = NULL;
        size_t len = 0;
        if (t) out = tg_chat_template_render(t, json_object_get(c, "vars"), &clock, &len, &err);
        const json_t *expected = json_object_get(c, "expected");
        bool ok;
        if (expected) {
            ok = out && len == json_string_length(expected) && memcmp(out, json_string_value(expected), len) == 0;
        } else { /* jinja2 failed: so must we, with the template's own message when it raised one */
            const char *want = json_string_value(json_object_get(c, "error"));
            ok = !out && err.msg[0] && !strchr(err.msg, '\n');
            if (ok && strncmp(want, "TemplateError: ", 15) == 0) ok = strstr(err.msg, want + 15) != NULL;
        }
        if (!ok && !failures) {
            size_t n = 512 + (out ? len : 0) + (expected ? json_string_length(expected) : 0);
            failures = malloc(n);
            snprintf(failures, n, "%s / %s / add_generation_prompt=%d:\n  expected %s\n  got      %s", name,
                     json_string_value(json_object_get(c, "conversation")),
                     json_is_true(json_object_get(json_object_get(c, "vars"), "add_generation_prompt")),
                     expected ? json_string_value(expected) : json_string_value(json_object_get(c, "error")),
                     out ? out : err.msg);
        }
        free(out);
        tg_chat_template_free(t);
        if (feature) {
            feature_same += ok;
            feature_total++;
        } else {
            same += ok;
            total++;
        }
        all_same += ok;
        all_total++;
    }
    if (current) print_message("%s: %zu/%zu identical\n", current, same, total);
    print_message("feature snippets: %zu/%zu identical\n", feature_same, feature_total);
    print_message("all: %zu/%zu identical to jinja2 %s\n", all_same, all_total,
                  json_string_value(json_object_get(doc, "jinja2_version")));
    if (failures) fail_msg("first difference: %s", failures);
    assert_int_equal(all_same, all_total);
    json_decref(doc);
}

static void test_builtins(void **state) {
    (void)state;
    const char *names = tg_chat_builtin_names();
    assert_non_null(strstr(names, "chatml"));
    assert_null(tg_chat_builtin("no-such-template"));
    assert_null(tg_chat_builtin(NULL));
    char buf[256];
    snprintf(buf, sizeof buf, "%s", names);
    size_t count = 0;
    for (char *tok = strtok(buf, ", "); tok; tok = strtok(NULL, ", ")) {
        const char *src = tg_chat_builtin(tok);
        if (!src) fail_msg("built-in '%s' is listed but has no source", tok);
        tg_error err = {0};
        tg_chat_template *t = tg_chat_template_compile(src, strlen(src), NULL, &err);
        if (!t) fail_msg("built-in %s: %s", tok, err.msg);
        tg_chat_template_free(t);
        count++;
    }
    assert_int_equal(count, 10);
}

static void test_hostile_nesting(void **state) {
    (void)state;
    tg_chat_limits lim = tg_chat_default_limits();
    /* 200 nested ifs, 1000 and 100 nested parentheses, 500 nots, a 100,000-deep list literal */
    size_t n = 200;
    char *src = malloc(n * 40 + 1);
    src[0] = '\0';
    for (size_t k = 0; k < n; k++) strcat(src, "{% if true %}");
    for (size_t k = 0; k < n; k++) strcat(src, "{% endif %}");
    expect_error(src, NULL, &lim, "nested more than 64 levels deep (the limit)");
    free(src);
    src = malloc(2 * 1000 + 16);
    strcpy(src, "{{ ");
    for (int k = 0; k < 1000; k++) strcat(src, "(");
    strcat(src, "1");
    for (int k = 0; k < 1000; k++) strcat(src, ")");
    strcat(src, " }}");
    expect_error(src, NULL, &lim, "brackets nested more than 256 levels deep (the limit)");
    strcpy(src, "{{ "); /* 100 parentheses: within the lexer's bound, beyond the parser's */
    for (int k = 0; k < 100; k++) strcat(src, "(");
    strcat(src, "1");
    for (int k = 0; k < 100; k++) strcat(src, ")");
    strcat(src, " }}");
    expect_error(src, NULL, &lim, "nested more than 64 levels deep (the limit)");
    free(src);
    src = malloc(4 * 500 + 16);
    strcpy(src, "{{ ");
    for (int k = 0; k < 500; k++) strcat(src, "not ");
    strcat(src, "1 }}");
    expect_error(src, NULL, &lim, "nested more than 64 levels deep");
    free(src);
    src = malloc(100000 + 16);
    strcpy(src, "{{ ");
    memset(src + 3, '[', 100000);
    src[100003] = '\0';
    expect_error(src, NULL, &lim, "brackets nested more than 256 levels deep (the limit)");
    free(src);
    /* long flat chains: no nesting in the source, but a tall tree (500,000 terms would overflow the stack) */
    size_t terms = 200000;
    src = malloc(terms * 3 + 16);
    strcpy(src, "{{ 1");
    for (size_t k = 0; k < terms; k++) strcat(src + 4 + 2 * k, "+1");
    strcat(src, " }}");
    expect_error(src, NULL, &lim, "expression nested more than 256 levels deep (the limit)");
    strcpy(src, "{{ x");
    for (size_t k = 0; k < terms / 2; k++) memcpy(src + 4 + 5 * k, "|trim", 5);
    strcpy(src + 4 + 5 * (terms / 2), " }}");
    expect_error(src, NULL, &lim, "expression nested more than 256 levels deep (the limit)");
    free(src);
    expect_output("{{ 1+1+1+1+1+1+1+1+1+1 }}", NULL, "10");
    /* a value nested deeper than repr/tojson/== allow, built at run time */
    expect_error("{% set ns = namespace(v=[], w=[]) %}{% for i in range(400) %}{% set ns.v = [ns.v] %}"
                 "{% set ns.w = [ns.w] %}{% endfor %}{{ ns.v == ns.w }}",
                 NULL, NULL, "a value nested more than 256 levels deep (the limit)");
    expect_error("{% set ns = namespace(v=[]) %}{% for i in range(400) %}{% set ns.v = [ns.v] %}{% endfor %}"
                 "{{ ns.v | tojson }}",
                 NULL, NULL, "a value nested more than 256 levels deep (the limit)");
    /* within the limit: fine */
    expect_output("{% for a in [1] %}{% for b in [2] %}{% if a < b %}{{ ((a + b)) }}{% endif %}{% endfor %}"
                  "{% endfor %}",
                  NULL, "3");
}

static void test_hostile_loops_and_sizes(void **state) {
    (void)state;
    /* 100,000 x 100,000 iterations */
    expect_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", NULL, NULL,
                 "more than 1000000 loop iterations (the limit)");
    expect_error("{{ range(1000000) | list }}", NULL, NULL, "range too big");
    /* output doubling until the limit */
    tg_chat_limits lim = tg_chat_default_limits();
    lim.max_output_bytes = 1000;
    expect_error("{% for i in range(2000) %}x{% endfor %}", NULL, &lim, "output longer than 1000 bytes (the limit)");
    /* memory: a string doubled in a namespace */
    lim = tg_chat_default_limits();
    lim.max_memory_bytes = (size_t)8 << 20;
    expect_error("{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                 NULL, &lim, "needs more than 8 MiB of memory (the limit)");
    expect_error("{{ 'x' * 100000000000 }}", NULL, NULL, "string repetition longer than the memory limit");
    /* work: quadratic membership scans */
    lim = tg_chat_default_limits();
    lim.max_work = 100000;
    expect_error("{% set l = range(10000) | list %}{% for i in l %}{% if i in l %}{% endif %}{% endfor %}", NULL, &lim,
                 "units of work (the limit)");
    /* a template over the size limit */
    lim = tg_chat_default_limits();
    lim.max_template_bytes = 10;
    tg_error err = {0};
    assert_null(tg_chat_template_compile("0123456789ab", 12, &lim, &err));
    assert_non_null(strstr(err.msg, "more than the limit of 10"));
}

/* Work that scans bytes or compares keys is charged by what it scans: each of these renders at once under an
 * uncharged interpreter and fails here, at a work limit of 100,000 units (one per 64 bytes or per key). */
/* A cancel that says stop on its `after`-th question (counting the questions). */
typedef struct {
    int asked, after;
} cancel_count;
static bool stop_after(void *data) {
    cancel_count *cc = data;
    return ++cc->asked >= cc->after;
}

/* A render abandoned by its cancel (the server's client gone, or SIGTERM): a template that no other limit stops
 * (no deadline, no work or iteration cap reached) ends with one line as soon as the cancel says stop, counted in
 * questions asked, not in time; a cancel that never says stop changes nothing. */
static void test_render_cancel(void **state) {
    (void)state;
    tg_chat_limits lim = tg_chat_default_limits();
    lim.max_seconds = 0;
    lim.max_iterations = UINT64_MAX;
    lim.max_work = UINT64_MAX;
    static const char src[] = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}";
    tg_error err = {0};
    tg_chat_template *t = tg_chat_template_compile(src, strlen(src), &lim, &err);
    assert_non_null(t);
    cancel_count cc = {0, 3};
    const tg_chat_cancel cancel = {stop_after, &cc};
    size_t len;
    assert_null(tg_chat_template_render_cancel(t, NULL, NULL, &cancel, &len, &err));
    assert_int_equal(cc.asked, 3);
    assert_non_null(strstr(err.msg, "chat template: rendering abandoned"));
    assert_null(strchr(err.msg, '\n'));
    tg_chat_template_free(t);
    /* asked every 256 steps: 3000 iterations ask it 11 times and render */
    static const char small[] = "{% for i in range(3000) %}{% endfor %}ok";
    t = tg_chat_template_compile(small, strlen(small), &lim, &err);
    assert_non_null(t);
    cc = (cancel_count){0, 1000};
    char *out = tg_chat_template_render_cancel(t, NULL, NULL, &cancel, &len, &err);
    assert_non_null(out);
    assert_string_equal(out, "ok");
    assert_true(cc.asked > 0 && cc.asked < 1000);
    free(out);
    tg_chat_template_free(t);
}

static void test_hostile_work_charged(void **state) {
    (void)state;
    tg_chat_limits lim = tg_chat_default_limits();
    lim.max_work = 100000;
    /* strip with a set: a code point outside ASCII looked up searches the set's bytes (2000 x 6402 bytes / 64) */
    expect_error("{{ ('\u00e9' * 2000).strip('x' * 6400 ~ '\u00e9') | length }}", NULL, &lim,
                 "units of work (the limit)");
    expect_error("{{ ('\u00e9' * 2000).rstrip('x' * 6400 ~ '\u00e9') }}", NULL, &lim, "units of work (the limit)");
    expect_error("{{ ('\u00e9' * 2000) | trim('x' * 6400 ~ '\u00e9') }}", NULL, &lim, "units of work (the limit)");
    /* an ASCII code point is one bit of the set read once: the same strip on 'a' costs about 3,600 units */
    tg_chat_limits lim_ascii = lim;
    lim_ascii.max_work = 4000;
    static const char ascii_strip[] = "{{ ('a' * 2000).strip('x' * 6400 ~ 'a') | length }}";
    tg_error err = {0};
    char *out = render_with(ascii_strip, NULL, &lim_ascii, &err);
    if (!out) fail_msg("ASCII strip with a set: %s", err.msg);
    assert_string_equal(out, "0");
    free(out);
    /* per-byte string work on a 100,000-byte string, 100 times */
    static const char *const per_byte[] = {
        "{% set s = 'x' * 100000 %}{% for i in range(100) %}{{ s[5] }}{% endfor %}",
        "{% set s = 'x' * 100000 %}{% for i in range(100) %}{{ s[1:2] }}{% endfor %}",
        "{% set s = 'x' * 100000 %}{% for i in range(100) %}{{ s | length }}{% endfor %}",
        "{% set s = 'x' * 100000 %}{% set t = 'x' * 100000 %}{% for i in range(100) %}{{ s == t }}{% endfor %}",
        "{% set s = 'x' * 100000 %}{% for i in range(100) %}{{ s.startswith(s) }}{% endfor %}",
    };
    for (size_t i = 0; i < sizeof per_byte / sizeof *per_byte; i++)
        expect_error(per_byte[i], NULL, &lim, "units of work (the limit)");
    /* dict lookups: a linear scan of 5000 keys, 100 times, by item and by attribute */
    char *vars = malloc(5000 * 16 + 16);
    assert_non_null(vars);
    size_t at = (size_t)sprintf(vars, "{\"d\": {");
    for (int k = 0; k < 5000; k++) at += (size_t)sprintf(vars + at, "%s\"k%d\": %d", k ? ", " : "", k, k);
    strcpy(vars + at, "}}");
    expect_error("{% for i in range(100) %}{{ d['k4999'] }}{% endfor %}", vars, &lim, "units of work (the limit)");
    expect_error("{% for i in range(100) %}{{ d.k4999 }}{% endfor %}", vars, &lim, "units of work (the limit)");
    free(vars);
    /* the wall clock: ten billion empty iterations cannot end within 50 ms */
    lim = tg_chat_default_limits();
    lim.max_iterations = UINT64_MAX;
    lim.max_seconds = 0.05;
    expect_error("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", NULL, &lim,
                 "took longer than 0.05 s to render (the limit)");
    assert_true(tg_chat_default_limits().max_seconds > 0);
    /* a non-string strip set is an error, not a read of the wrong union member */
    expect_error("{{ 'abc'.strip(5) }}", NULL, NULL, "strip arg must be None or str, not int");
    /* range() whose k * step leaves int64 though every element fits (a UBSan abort before) */
    expect_output("{{ range(-9223372036854775807, 9223372036854775807, 4611686018427387904) | list }}", NULL,
                  "[-9223372036854775807, -4611686018427387903, 1, 4611686018427387905]");
    expect_output("{{ range(9223372036854775807, -9223372036854775807, -4611686018427387904) | list }}", NULL,
                  "[9223372036854775807, 4611686018427387903, -1, -4611686018427387905]");
}

static void test_syntax_errors(void **state) {
    (void)state;
    expect_error("{% if x %}yes", NULL, NULL, "'if' block is never closed (expected 'endif') at line 1:4");
    expect_error("{% for m in messages %}\n{{ m }}", NULL, NULL, "'for' block is never closed (expected 'endfor')");
    expect_error("abc\n  {{ x ", NULL, NULL,
                 "unclosed '{{' (expected '}}' before the end of the template) at line 2:3");
    expect_error("{% if x", NULL, NULL, "unclosed '{%'");
    expect_error("{# comment", NULL, NULL, "missing end of comment tag '#}' at line 1:1");
    expect_error("{% endfor %}", NULL, NULL, "unexpected 'endfor' (no open block it could close) at line 1:4");
    expect_error("{{ 'abc }}", NULL, NULL, "unterminated string literal");
    expect_error("{{ (1 }}", NULL, NULL, "unexpected '}', expected ')'");
    expect_error("{{ 1 + }}", NULL, NULL, "unexpected end of print statement '}}'");
    expect_error("{{ x | nofilter }}", NULL, NULL, "unsupported Jinja filter 'nofilter' at line 1:8");
    expect_error("{{ x is notatest }}", NULL, NULL, "unsupported Jinja test 'notatest'");
    expect_error("line one\n{% macro m(a) %}{{ a }}{% endmacro %}", NULL, NULL,
                 "unsupported Jinja feature 'macro' at line 2:4");
    expect_error("{% raw %}x{% endraw %}", NULL, NULL, "unsupported Jinja feature 'raw'");
    expect_error("{% include 'x' %}", NULL, NULL, "unsupported Jinja feature 'include'");
    expect_error("{% for x in y recursive %}{% endfor %}", NULL, NULL, "unsupported Jinja feature 'recursive loop'");
    expect_error("{{ '%s' % 1 }}", NULL, NULL, "unsupported Jinja feature '% string formatting'");
    expect_error("{% frobnicate %}", NULL, NULL, "unknown tag 'frobnicate'");
    expect_error("{% break %}", NULL, NULL, "'break' outside a loop");
    expect_error("{{ 99999999999999999999 }}", NULL, NULL, "integer literal too large");
    expect_error("{{ '\\x4' }}", NULL, NULL, "truncated \\xXX escape");
    expect_error("{{ x ! y }}", NULL, NULL, "unexpected character '!' inside a tag");
    tg_error err = {0};
    assert_null(tg_chat_template_compile("ok \xff", 4, NULL, &err));
    assert_non_null(strstr(err.msg, "not valid UTF-8 (byte 3)"));
}

static void test_runtime_errors(void **state) {
    (void)state;
    expect_error("{{ raise_exception('Only user and assistant roles are supported!') }}", NULL, NULL,
                 "the template raised an error: Only user and assistant roles are supported! at line 1:4");
    expect_error("{{ raise_exception('two\\nlines') }}", NULL, NULL, "the template raised an error: two?lines");
    expect_error("\n\n   {{ x.y }}", NULL, NULL, "'x' is undefined (looking up attribute 'y' of it) at line 3:9");
    expect_error("{{ messages[0]['role'] }}", "{\"messages\": []}", NULL, "looking up item 'role'");
    expect_error("{{ 1 + 'a' }}", NULL, NULL, "unsupported operand type(s) for +: 'int' and 'str'");
    expect_error("{{ 1 < 'a' }}", NULL, NULL, "'<' not supported between instances of 'int' and 'str'");
    expect_error("{{ 1 // 0 }}", NULL, NULL, "integer division or modulo by zero");
    expect_error("{{ 9223372036854775807 + 1 }}", NULL, NULL, "integer overflow");
    expect_error("{% for x in 5 %}{% endfor %}", NULL, NULL, "'int' object is not iterable");
    expect_error("{% set a, b = [1] %}", NULL, NULL, "not enough values to unpack (expected 2, got 1)");
    expect_error("{% set x = 1 %}{% set x.y = 2 %}", NULL, NULL, "cannot assign attribute on non-namespace object");
    expect_error("{{ [1].append(2) }}", NULL, NULL, "the immutable sandbox does not allow methods that modify");
    expect_error("{{ [1] | map('upper') }}", NULL, NULL, "cannot print a generator value");
    expect_error("{{ 5 | length }}", NULL, NULL, "object of type 'int' has no len()");
    expect_error("{{ undefined_thing() }}", NULL, NULL, "'undefined_thing' is undefined");
    expect_error("{{ {'a': 1} | tojson(indent=100) }}", NULL, NULL, "tojson: indent must be 0..64");
    expect_error("{{ x | tojson }}", NULL, NULL, "tojson: object of type Undefined is not JSON serializable");
    tg_error err = {0};
    tg_chat_template *t = tg_chat_template_compile("x", 1, NULL, &err);
    json_t *arr = json_array();
    size_t len;
    assert_null(tg_chat_template_render(t, arr, NULL, &len, &err));
    assert_non_null(strstr(err.msg, "must be a JSON object"));
    json_decref(arr);
    /* the template is reusable after a failed render, and renders are independent */
    json_t *vars = json_pack("{s:s}", "name", "you");
    char *out = tg_chat_template_render(t, vars, NULL, &len, &err);
    assert_non_null(out);
    assert_string_equal(out, "x");
    free(out);
    json_decref(vars);
    tg_chat_template_free(t);
    tg_chat_template_free(NULL);
}

static void test_semantics(void **state) {
    (void)state;
    expect_output("{{ messages[0].content }}|{{ add_generation_prompt }}",
                  "{\"messages\": [{\"role\": \"user\", \"content\": \"h\\u00e9\"}], \"add_generation_prompt\": true}",
                  "h\xc3\xa9|True");
    expect_output("{{ big }} {{ f }} {{ n }}", "{\"big\": 9007199254740993, \"f\": 0.5, \"n\": null}",
                  "9007199254740993 0.5 None");
    expect_output("{{ strftime_now('%A %d %B %Y, %H:%M') }}", NULL, "Tuesday 01 December 2026, 10:00");
    expect_output("{{ strftime_now('') }}|", NULL, "|");
    /* strftime_now on the local clock: just well-formed */
    tg_error err = {0};
    tg_chat_template *t = tg_chat_template_compile("{{ strftime_now('%Y') }}", 24, NULL, &err);
    size_t len;
    char *out = tg_chat_template_render(t, NULL, NULL, &len, &err);
    assert_non_null(out);
    assert_int_equal(len, 4);
    free(out);
    tg_chat_template_free(t);
    /* one trailing newline is dropped, \r\n normalised, as jinja2 does */
    expect_output("a\r\nb\n", NULL, "a\nb");
    expect_output("a\n\n", NULL, "a\n");
}

static void write_file(const char *dir, const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_template_source_realmeta(void **state) {
    (void)state;
    tg_chat_source s;
    tg_error err = {0};
    struct stat st;
    if (stat(realmeta(""), &st) != 0) {
        print_message("skipping: %s not found (set TG_SHARED_DIR)\n", realmeta(""));
        skip();
    }
    if (!tg_chat_source_find(realmeta("Llama-2-7b-chat-hf"), &s, &err)) fail_msg("%s", err.msg);
    assert_non_null(s.text);
    assert_string_equal(s.text, tg_chat_builtin("llama2"));
    assert_string_equal(s.bos_token, "<s>");
    assert_string_equal(s.eos_token, "</s>");
    assert_non_null(strstr(s.origin, "Llama-2-7b-chat-hf/tokenizer_config.json"));
    assert_true(strncmp(s.origin, "chat_template in ", 17) == 0);
    tg_chat_source_free(&s);
    if (!tg_chat_source_find(realmeta("TinyLlama-1.1B-Chat-v1.0"), &s, &err)) fail_msg("%s", err.msg);
    assert_string_equal(s.text, tg_chat_builtin("zephyr"));
    tg_chat_source_free(&s);
    if (!tg_chat_source_find(realmeta("Llama-3.2-1B__resaved-tf4.48"), &s, &err)) fail_msg("%s", err.msg);
    assert_null(s.text); /* a base model: no template, not an error */
    assert_string_equal(s.bos_token, "<|begin_of_text|>");
    assert_string_equal(s.eos_token, "<|end_of_text|>");
    tg_chat_source_free(&s);
    if (!tg_chat_source_find(realmeta("Qwen2.5-0.5B"), &s, &err)) fail_msg("%s", err.msg);
    assert_non_null(strstr(s.text, "<|im_start|>"));
    assert_null(s.bos_token);
    assert_string_equal(s.eos_token, "<|endoftext|>");
    tg_chat_source_free(&s);
}

static void test_template_source_files(void **state) {
    (void)state;
    tg_chat_source s;
    tg_error err = {0};
    char *dir = gguf_builder_tmpdir();
    /* a named list: "default" is used; chat_template.jinja wins over tokenizer_config.json */
    write_file(dir, "tokenizer_config.json",
               "{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"}, {\"name\": \"default\", "
               "\"template\": \"D{{ bos_token }}\"}], \"bos_token\": {\"content\": \"<b>\"}}");
    write_file(dir, "special_tokens_map.json", "{\"eos_token\": \"<e>\"}");
    if (!tg_chat_source_find(dir, &s, &err)) fail_msg("%s", err.msg);
    assert_string_equal(s.text, "D{{ bos_token }}");
    assert_string_equal(s.bos_token, "<b>");
    assert_string_equal(s.eos_token, "<e>");
    tg_chat_source_free(&s);
    write_file(dir, "chat_template.jinja", "J\n");
    if (!tg_chat_source_find(dir, &s, &err)) fail_msg("%s", err.msg);
    assert_string_equal(s.text, "J\n");
    assert_non_null(strstr(s.origin, "chat_template.jinja"));
    tg_chat_source_free(&s);
    char path[512];
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    remove(path);
    /* a list without "default"; malformed JSON; wrong types */
    write_file(dir, "tokenizer_config.json", "{\"chat_template\": [{\"name\": \"a\", \"template\": \"x\"}]}");
    assert_false(tg_chat_source_find(dir, &s, &err));
    assert_non_null(strstr(err.msg, "several templates (a) but none named \"default\""));
    write_file(dir, "tokenizer_config.json", "{\"chat_template\": ");
    assert_false(tg_chat_source_find(dir, &s, &err));
    assert_non_null(strstr(err.msg, "tokenizer_config.json: invalid JSON"));
    write_file(dir, "tokenizer_config.json", "{\"chat_template\": 5}");
    assert_false(tg_chat_source_find(dir, &s, &err));
    assert_non_null(strstr(err.msg, "neither a string nor a list"));
    assert_false(tg_chat_source_find("/no/such/model", &s, &err));
    assert_non_null(strstr(err.msg, "/no/such/model: no such file or folder"));

    /* a GGUF with tokenizer.chat_template and tokens */
    gguf_builder *b = gguf_builder_new();
    gguf_builder_add_str(b, "general.architecture", "llama");
    gguf_builder_add_str(b, "tokenizer.chat_template", "{{ bos_token }}G");
    const char *tokens[] = {"<unk>", "<s>", "</s>", "a"};
    gguf_builder_add_arr_str(b, "tokenizer.ggml.tokens", 4, tokens);
    gguf_builder_add_u32(b, "tokenizer.ggml.bos_token_id", 1);
    gguf_builder_add_u32(b, "tokenizer.ggml.eos_token_id", 2);
    char *gguf = gguf_builder_path(dir, "m.gguf");
    assert_true(gguf_builder_write(b, gguf));
    gguf_builder_free(b);
    if (!tg_chat_source_find(gguf, &s, &err)) fail_msg("%s", err.msg);
    assert_string_equal(s.text, "{{ bos_token }}G");
    assert_string_equal(s.bos_token, "<s>");
    assert_string_equal(s.eos_token, "</s>");
    assert_non_null(strstr(s.origin, "tokenizer.chat_template in "));
    tg_chat_source_free(&s);
    /* a GGUF without one; a GGUF whose key has the wrong type */
    b = gguf_builder_new();
    gguf_builder_add_u32(b, "tokenizer.chat_template", 7);
    assert_true(gguf_builder_write(b, gguf));
    gguf_builder_free(b);
    assert_false(tg_chat_source_find(gguf, &s, &err));
    assert_non_null(strstr(err.msg, "tokenizer.chat_template is not a string"));
    assert_true(tg_chat_source_find("models/tinygpt-flagship.gguf", &s, &err));
    tg_chat_source_free(&s);
    tg_chat_source_free(NULL);
    free(gguf);
    gguf_builder_rmdir(dir);
    free(dir);
}

/* The fuzz seeds through the harness's own checks (any broken contract aborts). */
static void test_fuzz_seeds(void **state) {
    (void)state;
    DIR *d = opendir("fuzz/seeds/chat_template");
    assert_non_null(d);
    size_t count = 0;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "fuzz/seeds/chat_template/%s", e->d_name);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        uint8_t buf[65536];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        assert_int_equal(regress_chat_template_one(buf, n), 0);
        count++;
    }
    closedir(d);
    print_message("chat_template: %zu seeds\n", count);
    assert_true(count >= 10);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jinja2_references), cmocka_unit_test(test_builtins),
        cmocka_unit_test(test_hostile_nesting),   cmocka_unit_test(test_hostile_loops_and_sizes),
        cmocka_unit_test(test_hostile_work_charged),
        cmocka_unit_test(test_render_cancel),
        cmocka_unit_test(test_syntax_errors),     cmocka_unit_test(test_runtime_errors),
        cmocka_unit_test(test_semantics),         cmocka_unit_test(test_template_source_realmeta),
        cmocka_unit_test(test_template_source_files),
        cmocka_unit_test(test_fuzz_seeds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
