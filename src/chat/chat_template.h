/* chat_template.h — rendering a model's chat template (a Jinja2 subset) the way Hugging Face transformers does:
 * jinja2's ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the loopcontrols extension,
 * the globals raise_exception() and strftime_now(), and transformers' tojson filter (json.dumps with
 * ensure_ascii=False, insertion order kept). Templates come from model files, so everything is bounded
 * (tg_chat_limits) and every failure is one line naming the problem and its line:column in the template.
 *
 * Supported: {{ }}, {% if/elif/else %}, {% for %} (loop.index/index0/revindex/revindex0/first/last/length/
 * previtem/nextitem, `for ... if`, for-else, break/continue), {% set %} (names, tuples, ns.attr, block set),
 * {% generation %}, comments, whitespace control (- and +), the usual operators, literals, filters, tests,
 * string/dict methods and Python slicing. Not supported (a clear "unsupported Jinja feature 'X'" error): macros,
 * call blocks, include/import/extends/block, raw, filter blocks, recursive loops, `%` string formatting.
 * Known differences from CPython: integers are 64-bit (overflow is an error), case mapping covers ASCII, Latin-1,
 * Latin Extended-A and -B's regular pairs, Greek and Cyrillic (other scripts stay as they are), and names are
 * ASCII identifiers. */
#ifndef TG_CHAT_TEMPLATE_H
#define TG_CHAT_TEMPLATE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tinygpt.h"

/* The bounds a template runs under. */
typedef struct {
    size_t max_template_bytes; /* source size accepted by compile */
    size_t max_output_bytes;   /* rendered text */
    size_t max_memory_bytes;   /* the arena of one compile or one render (values, temporaries, the output) */
    uint64_t max_iterations;   /* loop iterations of one render, all loops together */
    uint64_t max_work;         /* elements touched + string bytes / 64, one render */
    int max_depth;             /* nesting of blocks and expressions in the source */
    double max_seconds;        /* wall clock of one render, a backstop beside max_work (0: none) */
} tg_chat_limits;

/* 1 MiB source, 16 MiB output, 256 MiB memory, 1,000,000 iterations, 50,000,000 work units, depth 64, 0.5 s. */
tg_chat_limits tg_chat_default_limits(void);

typedef struct tg_chat_template tg_chat_template;

/* Compiles len bytes of template source (UTF-8; \r\n and \r count as \n; one trailing newline is dropped, as
 * jinja2 does). limits may be NULL (the defaults); the template keeps a copy. Returns NULL with a one-line message
 * in err ("chat template: unexpected 'endif' at line 3:14", "chat template: unsupported Jinja feature 'macro' at
 * line 1:4") on any problem. */
tg_chat_template *tg_chat_template_compile(const char *src, size_t len, const tg_chat_limits *limits, tg_error *err);
void tg_chat_template_free(tg_chat_template *t);

/* The clock strftime_now() reads: seconds since the epoch, shown in UTC or in local time. */
typedef struct {
    int64_t now;
    bool utc;
} tg_chat_clock;

/* Renders the template with the variables of the JSON object vars (typically messages, add_generation_prompt,
 * tools, bos_token, eos_token; JSON null is Python's None, absent keys are undefined). clock may be NULL (the
 * current local time). Returns the malloc'ed text (NUL-terminated, caller frees) and its length in *len; NULL with
 * a one-line message on any problem, e.g. "chat template raised an error: Conversation roles must alternate
 * user/assistant/user/assistant/... at line 1:512" or "chat template: more than 1000000 loop iterations ...".
 * Threads may render one template at once: a render reads t and writes only its own state. */
char *tg_chat_template_render(const tg_chat_template *t, const json_t *vars, const tg_chat_clock *clock, size_t *len,
                              tg_error *err);

/* Asked while a render runs (with the wall clock: every 256 charged steps or loop iterations): stop(data) true
 * abandons the render ("chat template: rendering abandoned ..."). For a server: the client has gone, or the server is
 * stopping. */
typedef struct {
    bool (*stop)(void *data);
    void *data;
} tg_chat_cancel;

/* tg_chat_template_render that also stops when cancel says so (cancel may be NULL: the same as
 * tg_chat_template_render). */
char *tg_chat_template_render_cancel(const tg_chat_template *t, const json_t *vars, const tg_chat_clock *clock,
                                     const tg_chat_cancel *cancel, size_t *len, tg_error *err);

/* The built-in templates, for --chat-template NAME: the source for name, or NULL when there is none. */
const char *tg_chat_builtin(const char *name);
/* The built-in names, comma-separated ("chatml, llama2, ..."), for messages and --help. */
const char *tg_chat_builtin_names(void);

#endif
