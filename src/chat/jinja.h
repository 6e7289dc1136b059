/* jinja.h — internals of the chat-template engine (a Jinja2 subset): the arena, the error context, tokens, the
 * syntax tree and the values the evaluator works on. Only src/chat/ includes this; the rest of the project uses
 * chat_template.h.
 *
 * Errors: the lexer, parser and evaluator stop at the first problem with tj_fail(), which fills the caller's
 * tg_error with one line ("... at line L:C") and longjmps back to the entry point (tg_chat_template_compile or
 * tg_chat_template_render). Everything a compile or a render allocates lives in one arena with a byte cap, freed
 * in one go, so a jump can never leak. No global state: every function takes the context. */
#ifndef TG_CHAT_JINJA_H
#define TG_CHAT_JINJA_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "chat/chat_template.h"

/* ---- arena + error context ----------------------------------------------------------------------------------- */

typedef struct tj_chunk tj_chunk;

typedef struct {
    jmp_buf jmp;
    tg_error *err;
    const char *src; /* the (newline-normalised) template source, for line:column in messages */
    size_t src_len;
    tj_chunk *chunks; /* the arena */
    size_t used, cap; /* bytes taken from the system / the cap (limits.max_memory_bytes) */
} tj_ctx;

#define TJ_NOPOS SIZE_MAX

/* Fills ctx->err with "<message> at line L:C" (C counts characters; no location when pos is TJ_NOPOS) and jumps
 * back to the entry point. */
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
_Noreturn void tj_fail(tj_ctx *c, size_t pos, const char *fmt, ...);

/* n bytes (8-aligned, zeroed) from the arena; fails with the memory-limit message when the cap would be passed. */
void *tj_alloc(tj_ctx *c, size_t n);
/* n elements of size sz, with the product checked. */
void *tj_alloc_array(tj_ctx *c, size_t n, size_t sz);
/* A copy of s[0..n) with a terminating NUL. */
char *tj_strdup(tj_ctx *c, const char *s, size_t n);
/* Frees every chunk (the context itself is the caller's). */
void tj_arena_free(tj_ctx *c);
/* An arena array of n elements of `elem` bytes with room for one more: `a` itself while n < *cap, else a copy in a
 * block twice as large (4 at first), *cap updated. */
void *tj_grow_array(tj_ctx *c, void *a, size_t n, size_t *cap, size_t elem);
/* calloc(1, bytes) outside any arena (a compile's or render's own context), or NULL with "chat template: out of
 * memory" in err. In its own file so that it is never inlined into a function that calls setjmp. */
void *tj_zalloc_or_fail(size_t bytes, tg_error *err);

/* A growable byte buffer in the arena (growth by doubling; the old block stays until the arena goes). */
typedef struct {
    char *p;
    size_t n, cap;
    size_t limit; /* fail beyond this many bytes (0 = only the arena's cap) */
} tj_buf;
void tj_buf_put(tj_ctx *c, tj_buf *b, const char *s, size_t n);
void tj_buf_putc(tj_ctx *c, tj_buf *b, char ch);
#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
void tj_buf_printf(tj_ctx *c, tj_buf *b, const char *fmt, ...);

/* ---- text helpers (text.c) ----------------------------------------------------------------------------------- */

/* Decodes the code point at s[*i] (advancing *i); invalid bytes decode as themselves, one at a time. */
uint32_t tj_utf8_next(const char *s, size_t n, size_t *i);
/* Appends code point cp as UTF-8. */
void tj_buf_put_cp(tj_ctx *c, tj_buf *b, uint32_t cp);
/* Number of code points in s[0..n). */
size_t tj_utf8_len(const char *s, size_t n);
/* Byte offset of code point index k (k <= length). */
size_t tj_utf8_offset(const char *s, size_t n, size_t k);
/* Python's str.isspace() for one code point (what str.strip() and the regex \s use). */
bool tj_py_isspace(uint32_t cp);
/* Whitespace-prefix/suffix lengths (in bytes) of s[0..n) in Python's sense. */
size_t tj_ws_prefix(const char *s, size_t n);
size_t tj_ws_suffix(const char *s, size_t n);
/* Whether s[0..n) is valid UTF-8 (no overlongs, no surrogates); *bad gets the offset of the first bad byte. */
bool tj_utf8_valid(const char *s, size_t n, size_t *bad);

/* ---- tokens (lexer.c) ---------------------------------------------------------------------------------------- */

typedef enum {
    TK_DATA,        /* text between tags (s, n) */
    TK_VAR_BEGIN,   /* {{ */
    TK_VAR_END,     /* }} */
    TK_BLOCK_BEGIN, /* {% */
    TK_BLOCK_END,   /* %} */
    TK_NAME,        /* s, n */
    TK_STRING,      /* decoded bytes in s, n */
    TK_INT,         /* i */
    TK_FLOAT,       /* f */
    TK_OP,          /* s, n: one of the operators below */
    TK_EOF
} tj_tok_kind;

typedef struct {
    tj_tok_kind kind;
    size_t pos; /* byte offset in the normalised source */
    const char *s;
    size_t n;
    int64_t i;
    double f;
} tj_token;

/* Tokenises the normalised source with HF's settings (trim_blocks, lstrip_blocks, no trailing newline kept). The
 * array (ending with TK_EOF) lives in the arena. */
tj_token *tj_lex(tj_ctx *c, size_t *n_tokens);

/* ---- values -------------------------------------------------------------------------------------------------- */

typedef enum {
    TV_UNDEF,  /* u.s: the name that was looked up (may be NULL), for messages */
    TV_NONE,
    TV_BOOL,
    TV_INT,
    TV_FLOAT,
    TV_STR,    /* u.s: UTF-8 bytes, not NUL-terminated, immutable and shared */
    TV_LIST,   /* also tuples and generators (flags on the list) */
    TV_DICT,
    TV_NS,     /* namespace(): a dict whose attributes `set ns.x = ...` may change */
    TV_LOOP,   /* the `loop` variable of a for */
    TV_FUNC,   /* a global function (u.fn.id) */
    TV_METHOD  /* a bound method: u.fn.id on *u.fn.self */
} tj_kind;

typedef struct tj_value tj_value;
typedef struct tj_list tj_list;
typedef struct tj_dict tj_dict;
typedef struct tj_loop tj_loop;

struct tj_value {
    tj_kind kind;
    union {
        bool b;
        int64_t i;
        double f;
        struct {
            const char *p;
            size_t n;
        } s;
        tj_list *list;
        tj_dict *dict;
        tj_loop *loop;
        struct {
            int id;
            const tj_value *self;
        } fn;
    } u;
};

struct tj_list {
    size_t n;
    tj_value *v;
    bool tuple;     /* prints as (a, b) */
    bool generator; /* from map/select/...: iterable once in Python; no len(), no indexing, prints an error */
};

struct tj_dict {
    size_t n, cap; /* insertion-ordered, lookup by a linear scan (dicts in chat templates are small) */
    tj_value *k, *v;
};

struct tj_loop {
    size_t index0, length;
    const tj_value *items; /* the (filtered) items, for previtem / nextitem */
};

/* Per-render state the value functions need: the context (arena, errors), limits and the work counter. */
typedef struct {
    tj_ctx *c;
    tg_chat_limits lim;
    uint64_t work, iterations;
    double deadline;   /* tg_monotonic_s() past which the render fails (0: none) */
    const tg_chat_cancel *cancel; /* asked with the clock; NULL: none */
    uint32_t ticks;    /* calls since the clock was last read */
    int vdepth; /* nesting of the recursive value functions (repr, ==, tojson, JSON conversion) */
    int64_t now;
    bool now_utc;
} tj_rt;

/* Charges n units of work (one per element touched or key compared, one per 64 string bytes scanned); fails past
 * limits.max_work or the render's deadline, or when the render's cancel says stop. */
void tj_charge(tj_rt *r, size_t pos, uint64_t n);
/* The work units of n string bytes read code point by code point (indexing, slicing and measuring a string, case
 * mapping, repr and tojson escaping): decoding costs many times a byte of memcmp / memchr / memcpy, which counts 64
 * bytes a unit, so these count 8 (and 1 for any call), keeping the work limit a bound on the time. */
#define TJ_DECODE_UNITS(n) ((uint64_t)(n) / 8 + 1)

/* Counts one loop iteration; fails past limits.max_iterations or the render's deadline. */
void tj_iteration(tj_rt *r, size_t pos);

tj_value tj_undef(const char *name);
tj_value tj_none(void);
tj_value tj_bool(bool b);
tj_value tj_int(int64_t i);
tj_value tj_float(double f);
tj_value tj_str(const char *p, size_t n);
tj_value tj_cstr(const char *p);
tj_value tj_list_value(tj_list *l);
tj_list *tj_list_new(tj_ctx *c, size_t n);
tj_dict *tj_dict_new(tj_ctx *c, size_t cap);
/* Sets key -> val (replacing an equal key). */
void tj_dict_set(tj_rt *r, tj_dict *d, tj_value key, tj_value val);
/* The value of key, or NULL. */
tj_value *tj_dict_get(tj_rt *r, const tj_dict *d, tj_value key);
tj_value *tj_dict_get_str(const tj_dict *d, const char *s, size_t n);

const char *tj_type_name(tj_value v); /* Python's type names: 'str', 'int', 'list', 'NoneType', ... */
bool tj_truthy(tj_value v);
bool tj_is_str(tj_value v, const char *s); /* v is the string s */
/* Python ==. */
bool tj_equal(tj_rt *r, tj_value a, tj_value b);
/* Python <, <=, >, >= on numbers, strings and lists (op is one of "<", "<=", ">", ">="); fails on other types. */
bool tj_less(tj_rt *r, size_t pos, const char *op, tj_value a, tj_value b);
/* Appends str(v) (Python's str(); undefined prints nothing). Fails for values Python prints as <object at 0x...>. */
void tj_to_str(tj_rt *r, size_t pos, tj_buf *b, tj_value v);
/* str(v) as a value (strings are returned as they are). */
tj_value tj_str_of(tj_rt *r, size_t pos, tj_value v);
/* Appends repr(v). */
void tj_repr(tj_rt *r, size_t pos, tj_buf *b, tj_value v);
/* Appends Python's repr of a float. */
void tj_float_repr(tj_ctx *c, tj_buf *b, double f);
/* json.dumps(v, ensure_ascii=False, indent=indent (<0: None), separators=(item_sep, key_sep), sort_keys). */
void tj_tojson(tj_rt *r, size_t pos, tj_buf *b, tj_value v, int indent, const char *item_sep, const char *key_sep,
               bool sort_keys);

/* The value of a JSON document (objects keep their key order; integers outside int64 become floats). */
tj_value tj_from_json(tj_rt *r, const void *json);

/* ---- syntax tree --------------------------------------------------------------------------------------------- */

typedef enum {
    /* expressions */
    N_CONST,    /* val */
    N_NAME,     /* name */
    N_GETATTR,  /* a.name */
    N_GETITEM,  /* a[b] */
    N_SLICE,    /* a[kids[0]:kids[1]:kids[2]] (NULL kids = omitted) */
    N_CALL,     /* a(args, kw) */
    N_FILTER,   /* a | name(args, kw) */
    N_TEST,     /* a is name(args)   (op = 1 for `is not`) */
    N_NEG,      /* -a */
    N_POS,      /* +a */
    N_NOT,      /* not a */
    N_AND,      /* a and b */
    N_OR,       /* a or b */
    N_BINOP,    /* a op b: op is one of + - * / // % ** ~ */
    N_COMPARE,  /* a ops[0] kids[0] ops[1] kids[1] ... (Python's chained comparison) */
    N_COND,     /* b if a else c (c may be NULL) */
    N_LIST,     /* [kids] */
    N_TUPLE,    /* (kids) */
    N_DICT,     /* {kids[0]: kids[1], ...} */
    /* statements */
    N_BODY,     /* kids */
    N_DATA,     /* val (a string) */
    N_OUTPUT,   /* {{ a }} */
    N_IF,       /* if a: b else c (c is an N_IF for elif, an N_BODY, or NULL) */
    N_FOR,      /* for kids (N_NAME targets) in a [if d]: b else c */
    N_SET,      /* set a (N_NAME / N_TUPLE of names / N_GETATTR on a name) = b */
    N_SET_BLOCK,/* set a: b (the body's output) */
    N_BREAK,
    N_CONTINUE
} tj_node_kind;

typedef struct tj_node tj_node;

typedef struct {
    const char *name;
    size_t n;
    tj_node *val;
} tj_kwarg;

struct tj_node {
    tj_node_kind kind;
    size_t pos;
    int op;      /* operator id (see tj_op_*) or a flag */
    int fid;     /* filter / test id, resolved at parse time */
    tj_value val;
    const char *name;
    size_t name_n;
    tj_node *a, *b, *c, *d;
    tj_node **kids;
    size_t n_kids;
    int *ops;    /* N_COMPARE: one per kid */
    int height;  /* expressions: 1 + the tallest operand (leaves 0 or 1); bounded, so evaluating cannot overflow
                  * the stack */
    tj_kwarg *kw;
    size_t n_kw;
};

/* Binary and comparison operator ids. */
enum {
    OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN
};

/* Parses the tokens into a statement list (N_BODY); max_depth bounds the nesting of blocks and expressions. */
tj_node *tj_parse(tj_ctx *c, const tj_token *toks, size_t n_toks, int max_depth);
/* Parse-side helpers shared by the two parser files (parse_expr.c, parse_stmt.c). */
typedef struct {
    tj_ctx *c;
    const tj_token *t;
    size_t n, i;
    int depth, max_depth;
    int loop_depth; /* for break/continue outside a loop */
} tj_parser;
tj_node *tj_parse_expression(tj_parser *p, bool with_condexpr);
/* parse_tuple of Jinja: expressions separated by commas; a tuple when there is a comma. */
tj_node *tj_parse_tuple(tj_parser *p, bool with_condexpr, bool explicit_parens);
tj_node *tj_node_new(tj_parser *p, tj_node_kind kind, size_t pos);
/* Sets n->height from its operands; fails past TJ_MAX_EXPR_HEIGHT (long chains like 1+1+1+... grow it without
 * nesting). Returns n. */
#define TJ_MAX_EXPR_HEIGHT 256
tj_node *tj_seal(tj_parser *p, tj_node *n);
void tj_node_push(tj_parser *p, tj_node *parent, tj_node *kid, size_t *cap);
void tj_parse_enter(tj_parser *p, size_t pos);
bool tj_tok_op(const tj_token *t, const char *op);
bool tj_tok_name(const tj_token *t, const char *name);
/* A token described for messages: "'endfor'", "end of print statement", ... (static or arena). */
const char *tj_tok_describe(tj_parser *p, const tj_token *t);

/* ---- filters, tests, functions (filters.c, methods.c) -------------------------------------------------------- */

/* Filter / test ids by name; -1 when unknown (the parser then fails with "unsupported"). */
int tj_filter_id(const char *name, size_t n);
int tj_test_id(const char *name, size_t n);

/* Evaluated call arguments. */
typedef struct {
    tj_value *pos;
    size_t n_pos;
    const tj_kwarg *kw_nodes; /* names */
    tj_value *kw;
    size_t n_kw;
} tj_args;

tj_value tj_apply_filter(tj_rt *r, size_t pos, int fid, tj_value v, const tj_args *args);
bool tj_apply_test(tj_rt *r, size_t pos, int tid, tj_value v, const tj_args *args);

/* Global functions: namespace, range, dict, raise_exception, strftime_now. */
bool tj_global_lookup(const char *name, size_t n, tj_value *out);
/* Attribute of an object that is a method (str.strip, dict.items, ...): true and *out = bound method. */
bool tj_method_lookup(tj_rt *r, tj_value self, const char *name, size_t n, tj_value *out);
/* Calls a global function or a bound method. */
tj_value tj_call(tj_rt *r, size_t pos, tj_value fn, const tj_args *args);
/* Keyword argument `name` of args, or NULL. */
const tj_value *tj_kwarg_get(const tj_args *args, const char *name);
/* Fails unless args has at most max_pos positional arguments and only the keywords listed (comma-separated). */
void tj_args_check(tj_rt *r, size_t pos, const tj_args *args, const char *what, size_t max_pos, const char *kws);

/* String helpers shared by methods and filters: str.strip(chars) (chars NULL or none: whitespace);
 * str.replace(old, new, count) (count < 0: all); and in casemap.c Python's case mapping (mode 0 upper, 1 lower,
 * 2 str.title, 3 capitalize), jinja's title filter (each word after [-\s({[<] upper-cased first) and
 * str.isupper / str.islower, for ASCII, Latin-1, Latin Extended-A/B, Greek and Cyrillic (others are uncased). */
tj_value tj_strip(tj_rt *r, size_t pos, tj_value s, const tj_value *chars);
tj_value tj_case(tj_rt *r, tj_value s, int mode);
tj_value tj_title_words(tj_rt *r, tj_value s);
bool tj_is_case(tj_rt *r, tj_value s, bool upper);
tj_value tj_replace(tj_rt *r, size_t pos, tj_value s, tj_value old, tj_value new_, int64_t count);

/* Iteration (for loops, list(), join, ...): the items of a list/tuple, the keys of a dict, the characters of a
 * string; undefined iterates as empty; other types fail. */
tj_list *tj_iterate(tj_rt *r, size_t pos, tj_value v);
/* Indexing and attributes with Jinja's sandboxed getattr/getitem rules (missing -> undefined). */
tj_value tj_getitem(tj_rt *r, size_t pos, tj_value obj, tj_value key);
tj_value tj_getattr(tj_rt *r, size_t pos, tj_value obj, const char *name, size_t n);
/* Python slicing obj[start:stop:step] (NULL = omitted) on strings, lists and tuples. */
tj_value tj_slice(tj_rt *r, size_t pos, tj_value obj, const tj_value *start, const tj_value *stop,
                  const tj_value *step);

/* ---- evaluation (eval_expr.c, render.c) ---------------------------------------------------------------------- */

/* One render: the runtime, the scope stack (each scope a dict of names; a for-loop iteration pushes one), the
 * render variables, the output and a pending break/continue. */
typedef struct {
    tj_rt rt;
    tj_dict **scopes;
    size_t n_scopes, cap_scopes;
    tj_dict *vars;
    tj_buf *out;
    int jump; /* 0, N_BREAK or N_CONTINUE */
} tj_state;

/* The value of expression n. */
tj_value tj_eval(tj_state *st, const tj_node *n);
/* The value a name has here: the innermost scope that has it, then the render variables, then the globals;
 * undefined when none does. */
tj_value tj_lookup(tj_state *st, const char *name, size_t n);
/* a op b for the arithmetic operators (OP_ADD ... OP_CONCAT). */
tj_value tj_binop(tj_rt *r, size_t pos, int op, tj_value a, tj_value b);
/* `item in container`. */
bool tj_contains(tj_rt *r, size_t pos, tj_value item, tj_value container);
/* Fails with the undefined value's own message when v is undefined (for operations Jinja's Undefined refuses). */
void tj_require_defined(tj_rt *r, size_t pos, tj_value v);

#endif
