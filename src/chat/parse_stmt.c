/* parse_stmt.c — Jinja statements: the template body as a list of data, {{ output }} and {% blocks %} (if/elif/
 * else, for/else with an optional filter, set, block set, break/continue, generation, print). Tags this engine
 * does not implement fail with "unsupported Jinja feature 'X'", so the CLI can point at --chat-template NAME. */
#include <string.h>

#include "chat/jinja.h"

static const tj_token *cur(tj_parser *p) { return &p->t[p->i]; }
static const tj_token *next(tj_parser *p) {
    const tj_token *t = &p->t[p->i];
    if (t->kind != TK_EOF) p->i++;
    return t;
}
static void expect_kind(tj_parser *p, tj_tok_kind kind, const char *what) {
    if (cur(p)->kind != kind) tj_fail(p->c, cur(p)->pos, "expected %s, got %s", what, tj_tok_describe(p, cur(p)));
    next(p);
}
static void expect_block_end(tj_parser *p) { expect_kind(p, TK_BLOCK_END, "end of statement block '%}'"); }

static const char *const UNSUPPORTED_TAGS[] = {"macro", "call", "filter", "block", "extends", "include", "import",
                                               "from", "with", "autoescape", "raw", "do", "trans", "pluralize"};

/* Parses statements until a block tag whose name is in ends (NULL-terminated; the name token is left current),
 * or the end of the template when ends is NULL. opener/opener_pos name the block for the "missing end" message. */
static tj_node *parse_body(tj_parser *p, const char *const *ends, const char *opener, size_t opener_pos);

static tj_node *body_of(tj_parser *p, const char *const *ends, const char *opener, size_t pos) {
    tj_parse_enter(p, pos);
    tj_node *b = parse_body(p, ends, opener, pos);
    p->depth--;
    return b;
}

/* A name, for for-loop and set targets. */
static tj_node *target_name(tj_parser *p) {
    const tj_token *t = cur(p);
    if (t->kind != TK_NAME) tj_fail(p->c, t->pos, "expected a name to assign to, got %s", tj_tok_describe(p, t));
    next(p);
    tj_node *n = tj_node_new(p, N_NAME, t->pos);
    n->name = tj_strdup(p->c, t->s, t->n);
    n->name_n = t->n;
    if (tj_tok_name(t, "true") || tj_tok_name(t, "false") || tj_tok_name(t, "none") || tj_tok_name(t, "True") ||
        tj_tok_name(t, "False") || tj_tok_name(t, "None") || tj_tok_name(t, "loop"))
        tj_fail(p->c, t->pos, "cannot assign to '%s'", n->name);
    return n;
}

/* name | name, name, ... | (name, name) — for-loop targets into node->kids. */
static void parse_targets(tj_parser *p, tj_node *node) {
    size_t cap = 0;
    bool paren = tj_tok_op(cur(p), "(");
    if (paren) next(p);
    do {
        tj_node_push(p, node, target_name(p), &cap);
    } while (tj_tok_op(cur(p), ",") && next(p));
    if (paren) {
        if (!tj_tok_op(cur(p), ")")) tj_fail(p->c, cur(p)->pos, "expected ')', got %s", tj_tok_describe(p, cur(p)));
        next(p);
    }
}

static tj_node *parse_for(tj_parser *p, size_t pos) {
    tj_node *n = tj_node_new(p, N_FOR, pos);
    parse_targets(p, n);
    if (!tj_tok_name(cur(p), "in")) tj_fail(p->c, cur(p)->pos, "expected 'in', got %s", tj_tok_describe(p, cur(p)));
    next(p);
    n->a = tj_parse_tuple(p, false, false);
    if (tj_tok_name(cur(p), "if")) {
        next(p);
        n->d = tj_parse_expression(p, true);
    }
    if (tj_tok_name(cur(p), "recursive")) tj_fail(p->c, cur(p)->pos, "unsupported Jinja feature 'recursive loop'");
    expect_block_end(p);
    static const char *const ends[] = {"endfor", "else", NULL};
    static const char *const end_only[] = {"endfor", NULL};
    p->loop_depth++;
    n->b = body_of(p, ends, "for", pos);
    p->loop_depth--;
    if (tj_tok_name(cur(p), "else")) {
        next(p);
        expect_block_end(p);
        n->c = body_of(p, end_only, "for", pos); /* break/continue in the else body belong to an outer loop */
    }
    next(p); /* endfor */
    expect_block_end(p);
    return n;
}

static tj_node *parse_if(tj_parser *p, size_t pos) {
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    static const char *const end_only[] = {"endif", NULL};
    tj_node *root = tj_node_new(p, N_IF, pos), *n = root;
    for (;;) {
        n->a = tj_parse_tuple(p, false, false);
        expect_block_end(p);
        n->b = body_of(p, ends, "if", pos);
        if (tj_tok_name(cur(p), "elif")) {
            size_t epos = next(p)->pos;
            n->c = tj_node_new(p, N_IF, epos);
            n = n->c;
            continue;
        }
        if (tj_tok_name(cur(p), "else")) {
            next(p);
            expect_block_end(p);
            n->c = body_of(p, end_only, "if", pos);
        }
        next(p); /* endif */
        expect_block_end(p);
        return root;
    }
}

static tj_node *parse_set(tj_parser *p, size_t pos) {
    tj_node *n = tj_node_new(p, N_SET, pos);
    tj_node *first = target_name(p);
    if (tj_tok_op(cur(p), ".")) { /* ns.attr */
        next(p);
        const tj_token *a = cur(p);
        if (a->kind != TK_NAME) tj_fail(p->c, a->pos, "expected an attribute name, got %s", tj_tok_describe(p, a));
        next(p);
        tj_node *g = tj_node_new(p, N_GETATTR, a->pos);
        g->a = first;
        g->name = tj_strdup(p->c, a->s, a->n);
        g->name_n = a->n;
        n->a = g;
    } else if (tj_tok_op(cur(p), ",")) {
        tj_node *tup = tj_node_new(p, N_TUPLE, first->pos);
        size_t cap = 0;
        tj_node_push(p, tup, first, &cap);
        while (tj_tok_op(cur(p), ",")) {
            next(p);
            tj_node_push(p, tup, target_name(p), &cap);
        }
        n->a = tup;
    } else {
        n->a = first;
    }
    if (tj_tok_op(cur(p), "=")) {
        next(p);
        n->b = tj_parse_tuple(p, true, false);
        expect_block_end(p);
        return n;
    }
    if (cur(p)->kind == TK_BLOCK_END && n->a->kind == N_NAME) {
        static const char *const ends[] = {"endset", NULL};
        next(p);
        n->kind = N_SET_BLOCK;
        n->b = body_of(p, ends, "set", pos);
        next(p); /* endset */
        expect_block_end(p);
        return n;
    }
    if (tj_tok_op(cur(p), "|")) tj_fail(p->c, cur(p)->pos, "unsupported Jinja feature 'filtered block set'");
    tj_fail(p->c, cur(p)->pos, "expected '=', got %s", tj_tok_describe(p, cur(p)));
}

/* One {% ... %} statement; the name token is current. */
static tj_node *parse_statement(tj_parser *p) {
    const tj_token *t = cur(p);
    size_t pos = t->pos;
    if (t->kind != TK_NAME) tj_fail(p->c, pos, "expected a tag name, got %s", tj_tok_describe(p, t));
    next(p);
    if (tj_tok_name(t, "for")) return parse_for(p, pos);
    if (tj_tok_name(t, "if")) return parse_if(p, pos);
    if (tj_tok_name(t, "set")) return parse_set(p, pos);
    if (tj_tok_name(t, "break") || tj_tok_name(t, "continue")) {
        if (p->loop_depth == 0)
            tj_fail(p->c, pos, "'%s' outside a loop", tj_tok_name(t, "break") ? "break" : "continue");
        expect_block_end(p);
        return tj_node_new(p, tj_tok_name(t, "break") ? N_BREAK : N_CONTINUE, pos);
    }
    if (tj_tok_name(t, "print")) {
        tj_node *n = tj_node_new(p, N_OUTPUT, pos);
        n->a = tj_parse_tuple(p, true, false);
        expect_block_end(p);
        return n;
    }
    if (tj_tok_name(t, "generation")) { /* transformers' AssistantTracker: renders its body unchanged */
        static const char *const ends[] = {"endgeneration", NULL};
        expect_block_end(p);
        tj_node *b = body_of(p, ends, "generation", pos);
        next(p);
        expect_block_end(p);
        return b;
    }
    char name[48];
    size_t n = t->n < sizeof name - 1 ? t->n : sizeof name - 1;
    memcpy(name, t->s, n);
    name[n] = '\0';
    for (size_t k = 0; k < sizeof UNSUPPORTED_TAGS / sizeof *UNSUPPORTED_TAGS; k++)
        if (strcmp(name, UNSUPPORTED_TAGS[k]) == 0) tj_fail(p->c, pos, "unsupported Jinja feature '%s'", name);
    if (strncmp(name, "end", 3) == 0 || strcmp(name, "else") == 0 || strcmp(name, "elif") == 0)
        tj_fail(p->c, pos, "unexpected '%s' (no open block it could close)", name);
    tj_fail(p->c, pos, "unknown tag '%s'", name);
}

static tj_node *parse_body(tj_parser *p, const char *const *ends, const char *opener, size_t opener_pos) {
    tj_node *body = tj_node_new(p, N_BODY, cur(p)->pos);
    size_t cap = 0;
    for (;;) {
        const tj_token *t = cur(p);
        if (t->kind == TK_EOF) {
            if (ends) {
                const char *const *e = ends;
                while (e[1] && strncmp(*e, "end", 3) != 0) e++;
                tj_fail(p->c, opener_pos, "'%s' block is never closed (expected '%s')", opener, *e);
            }
            return body;
        }
        if (t->kind == TK_DATA) {
            tj_node *d = tj_node_new(p, N_DATA, t->pos);
            d->val = tj_str(t->s, t->n);
            tj_node_push(p, body, d, &cap);
            next(p);
        } else if (t->kind == TK_VAR_BEGIN) {
            next(p);
            tj_node *o = tj_node_new(p, N_OUTPUT, t->pos);
            o->a = tj_parse_tuple(p, true, false);
            expect_kind(p, TK_VAR_END, "end of print statement '}}'");
            tj_node_push(p, body, o, &cap);
        } else if (t->kind == TK_BLOCK_BEGIN) {
            next(p);
            for (const char *const *e = ends; e && *e; e++)
                if (tj_tok_name(cur(p), *e)) return body;
            tj_node_push(p, body, parse_statement(p), &cap);
        } else {
            tj_fail(p->c, t->pos, "unexpected %s", tj_tok_describe(p, t));
        }
    }
}

tj_node *tj_parse(tj_ctx *c, const tj_token *toks, size_t n_toks, int max_depth) {
    tj_parser p = {.c = c, .t = toks, .n = n_toks, .max_depth = max_depth};
    return parse_body(&p, NULL, NULL, 0);
}
