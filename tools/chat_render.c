/* chat_render.c — renders a chat template with the library's engine, for checking it against jinja2 by hand or
 * with tools/chat_template_diff.py. Not part of the library or the CLI: a tool built by `make tools`.
 *
 *   build/release/tools/chat_render TEMPLATE_FILE [VARS.json]
 *
 * VARS.json is the object of render variables (messages, add_generation_prompt, bos_token, ...). strftime_now()
 * reads the fixed clock of tests/data/chat/refs.json (2026-12-01 10:00:00). Prints the text on stdout and exits 0,
 * or prints "ERR <message>" on stdout and exits 1. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "chat/chat_template.h"

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: chat_render TEMPLATE_FILE [VARS.json]\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        fprintf(stderr, "chat_render: cannot open %s\n", argv[1]);
        return 2;
    }
    size_t cap = 1 << 16, n = 0;
    char *src = malloc(cap);
    for (size_t got; src && (got = fread(src + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) src = realloc(src, cap *= 2);
    }
    fclose(f);
    if (!src) return 2;
    json_error_t je;
    json_t *vars = argc == 3 ? json_load_file(argv[2], 0, &je) : json_object();
    if (!vars) {
        fprintf(stderr, "chat_render: %s: %s\n", argv[2], je.text);
        free(src);
        return 2;
    }
    tg_error err = {0};
    const tg_chat_clock clock = {.now = 1796119200, .utc = true};
    tg_chat_template *t = tg_chat_template_compile(src, n, NULL, &err);
    size_t len = 0;
    char *out = t ? tg_chat_template_render(t, vars, &clock, &len, &err) : NULL;
    int rc = 0;
    if (out) {
        fwrite(out, 1, len, stdout);
    } else {
        printf("ERR %s\n", err.msg);
        rc = 1;
    }
    free(out);
    tg_chat_template_free(t);
    json_decref(vars);
    free(src);
    return rc;
}
