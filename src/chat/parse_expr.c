/* parse_expr.c — Jinja expressions, with jinja2's grammar and precedence (parser.py), lowest first:
 *   condexpr:  or ('if' or ('else' condexpr)?)*
 *   or / and / not, then comparisons (== != < <= > >= in, not in; chained like Python),
 *   + -, then ~, then * / // %, then ** (left-associative, as in Jinja), then unary - +,
 *   then primary (names, literals, ( ), [ ], { }) with postfix .name [ ] ( ) and filters | / tests `is`.
 * Filters and tests are resolved to ids here, so an unknown one fails at compile time as in jinja2. */
#include <string.h>

#include "chat/jinja.h"

bool tj_tok_op(const tj_token *t, const char *op) {
    return t->kind == TK_OP && t->n == strlen(op) && memcmp(t->s, op, t->n) == 0;
}

bool tj_tok_name(const tj_token *t, const char *name) {
    return t->kind == TK_NAME && t->n == strlen(name) && memcmp(t->s, name, t->n) == 0;
}

const char *tj_tok_describe(tj_parser *p, const tj_token *t) {
    switch (t->kind) {
    case TK_DATA: return "template data";
    case TK_VAR_BEGIN: return "'{{'";
    case TK_VAR_END: return "end of print statement '}}'";
    case TK_BLOCK_BEGIN: return "'{%'";
    case TK_BLOCK_END: return "end of statement block '%}'";
    case TK_STRING: return "string literal";
    case TK_INT: return "integer";
    case TK_FLOAT: return "float";
    case TK_EOF: return "end of template";
    case TK_NAME:
    case TK_OP: {
        size_t n = t->n > 40 ? 40 : t->n;
        char *s = tj_alloc(p->c, n + 3);
        s[0] = '\'';
        memcpy(s + 1, t->s, n);
        s[n + 1] = '\'';
        return s;
    }
    }
    return "token";
}

tj_node *tj_node_new(tj_parser *p, tj_node_kind kind, size_t pos) {
    tj_node *n = tj_alloc(p->c, sizeof *n);
    n->kind = kind;
    n->pos = pos;
    return n;
}

static int height_of(const tj_node *n) { return n ? (n->height > 0 ? n->height : 1) : 0; }

tj_node *tj_seal(tj_parser *p, tj_node *n) {
    int h = height_of(n->a);
    if (height_of(n->b) > h) h = height_of(n->b);
    if (height_of(n->c) > h) h = height_of(n->c);
    if (height_of(n->d) > h) h = height_of(n->d);
    for (size_t k = 0; k < n->n_kids; k++)
        if (height_of(n->kids[k]) > h) h = height_of(n->kids[k]);
    for (size_t k = 0; k < n->n_kw; k++)
        if (height_of(n->kw[k].val) > h) h = height_of(n->kw[k].val);
    n->height = h + 1;
    if (n->height > TJ_MAX_EXPR_HEIGHT)
        tj_fail(p->c, n->pos, "expression nested more than %d levels deep (the limit)", TJ_MAX_EXPR_HEIGHT);
    return n;
}

void tj_node_push(tj_parser *p, tj_node *parent, tj_node *kid, size_t *cap) {
    if (parent->n_kids == *cap) {
        size_t nc = *cap ? *cap * 2 : 4;
        tj_node **k = tj_alloc_array(p->c, nc, sizeof *k);
        if (parent->n_kids) memcpy(k, parent->kids, parent->n_kids * sizeof *k);
        parent->kids = k;
        *cap = nc;
    }
    parent->kids[parent->n_kids++] = kid;
}

void tj_parse_enter(tj_parser *p, size_t pos) {
    if (++p->depth > p->max_depth)
        tj_fail(p->c, pos, "nested more than %d levels deep (the limit)", p->max_depth);
}

static const tj_token *cur(tj_parser *p) { return &p->t[p->i]; }
static const tj_token *next(tj_parser *p) {
    const tj_token *t = &p->t[p->i];
    if (t->kind != TK_EOF) p->i++;
    return t;
}
static bool skip_op(tj_parser *p, const char *op) {
    if (!tj_tok_op(cur(p), op)) return false;
    p->i++;
    return true;
}
static bool skip_name(tj_parser *p, const char *name) {
    if (!tj_tok_name(cur(p), name)) return false;
    p->i++;
    return true;
}
static void expect_op(tj_parser *p, const char *op) {
    if (!skip_op(p, op)) tj_fail(p->c, cur(p)->pos, "expected '%s', got %s", op, tj_tok_describe(p, cur(p)));
}
static const tj_token *expect_name(tj_parser *p) {
    if (cur(p)->kind != TK_NAME) tj_fail(p->c, cur(p)->pos, "expected a name, got %s", tj_tok_describe(p, cur(p)));
    return next(p);
}

static tj_node *parse_or(tj_parser *p);
static tj_node *parse_unary(tj_parser *p, bool with_filter);
static tj_node *parse_primary(tj_parser *p);
static tj_node *parse_postfix(tj_parser *p, tj_node *node);
static tj_node *parse_filter_expr(tj_parser *p, tj_node *node);

static tj_node *binary(tj_parser *p, tj_node_kind kind, int op, tj_node *a, tj_node *b, size_t pos) {
    tj_node *n = tj_node_new(p, kind, pos);
    n->op = op;
    n->a = a;
    n->b = b;
    return tj_seal(p, n);
}

tj_node *tj_parse_expression(tj_parser *p, bool with_condexpr) {
    tj_parse_enter(p, cur(p)->pos);
    tj_node *e = parse_or(p);
    while (with_condexpr && tj_tok_name(cur(p), "if")) {
        size_t pos = next(p)->pos;
        tj_node *cond = tj_node_new(p, N_COND, pos);
        cond->b = e;
        cond->a = parse_or(p);
        if (skip_name(p, "else")) cond->c = tj_parse_expression(p, true);
        e = tj_seal(p, cond);
    }
    p->depth--;
    return e;
}

static bool tuple_end(tj_parser *p) {
    const tj_token *t = cur(p);
    return t->kind == TK_VAR_END || t->kind == TK_BLOCK_END || t->kind == TK_EOF || tj_tok_op(t, ")") ||
           tj_tok_name(t, "recursive");
}

tj_node *tj_parse_tuple(tj_parser *p, bool with_condexpr, bool explicit_parens) {
    size_t pos = cur(p)->pos;
    tj_node *tup = tj_node_new(p, N_TUPLE, pos);
    size_t cap = 0;
    bool comma = false;
    for (;;) {
        if (tup->n_kids) expect_op(p, ",");
        if (tuple_end(p)) break;
        tj_node_push(p, tup, tj_parse_expression(p, with_condexpr), &cap);
        if (tj_tok_op(cur(p), ",")) comma = true;
        else break;
    }
    if (!comma) {
        if (tup->n_kids == 1) return tup->kids[0];
        if (!explicit_parens) tj_fail(p->c, cur(p)->pos, "expected an expression, got %s", tj_tok_describe(p, cur(p)));
    }
    return tj_seal(p, tup);
}

static tj_node *parse_not(tj_parser *p);

/* operand (word operand)*, left-associative: `or` over `and`, `and` over `not`. */
static tj_node *parse_logical(tj_parser *p, const char *word, tj_node_kind kind, tj_node *(*operand)(tj_parser *)) {
    tj_node *e = operand(p);
    while (tj_tok_name(cur(p), word)) {
        size_t pos = next(p)->pos;
        e = binary(p, kind, 0, e, operand(p), pos);
    }
    return e;
}

static tj_node *parse_and(tj_parser *p) { return parse_logical(p, "and", N_AND, parse_not); }

static tj_node *parse_or(tj_parser *p) { return parse_logical(p, "or", N_OR, parse_and); }

static tj_node *parse_math1(tj_parser *p);

static tj_node *parse_compare(tj_parser *p) {
    size_t pos = cur(p)->pos;
    tj_node *first = parse_math1(p);
    tj_node *cmp = NULL;
    size_t cap = 0, ops_cap = 0;
    for (;;) {
        const tj_token *t = cur(p);
        int op = 0;
        if (tj_tok_op(t, "==")) op = OP_EQ;
        else if (tj_tok_op(t, "!=")) op = OP_NE;
        else if (tj_tok_op(t, "<")) op = OP_LT;
        else if (tj_tok_op(t, "<=")) op = OP_LE;
        else if (tj_tok_op(t, ">")) op = OP_GT;
        else if (tj_tok_op(t, ">=")) op = OP_GE;
        else if (tj_tok_name(t, "in")) op = OP_IN;
        else if (tj_tok_name(t, "not") && tj_tok_name(&p->t[p->i + 1 < p->n ? p->i + 1 : p->i], "in")) {
            p->i++;
            op = OP_NOTIN;
        }
        if (!op) break;
        p->i++;
        if (!cmp) {
            cmp = tj_node_new(p, N_COMPARE, pos);
            cmp->a = first;
        }
        cmp->ops = tj_grow_array(p->c, cmp->ops, cmp->n_kids, &ops_cap, sizeof *cmp->ops);
        cmp->ops[cmp->n_kids] = op;
        tj_node_push(p, cmp, parse_math1(p), &cap);
    }
    return cmp ? tj_seal(p, cmp) : first;
}

static tj_node *parse_not(tj_parser *p) {
    if (tj_tok_name(cur(p), "not")) {
        size_t pos = next(p)->pos;
        tj_parse_enter(p, pos);
        tj_node *n = tj_node_new(p, N_NOT, pos);
        n->a = parse_not(p);
        p->depth--;
        return tj_seal(p, n);
    }
    return parse_compare(p);
}

static tj_node *parse_concat(tj_parser *p);

static tj_node *parse_math1(tj_parser *p) {
    tj_node *e = parse_concat(p);
    for (;;) {
        int op = tj_tok_op(cur(p), "+") ? OP_ADD : tj_tok_op(cur(p), "-") ? OP_SUB : 0;
        if (!op) return e;
        size_t pos = next(p)->pos;
        e = binary(p, N_BINOP, op, e, parse_concat(p), pos);
    }
}

static tj_node *parse_math2(tj_parser *p);

static tj_node *parse_concat(tj_parser *p) {
    tj_node *e = parse_math2(p);
    while (tj_tok_op(cur(p), "~")) {
        size_t pos = next(p)->pos;
        e = binary(p, N_BINOP, OP_CONCAT, e, parse_math2(p), pos);
    }
    return e;
}

static tj_node *parse_pow(tj_parser *p);

static tj_node *parse_math2(tj_parser *p) {
    tj_node *e = parse_pow(p);
    for (;;) {
        const tj_token *t = cur(p);
        int op = tj_tok_op(t, "*") ? OP_MUL : tj_tok_op(t, "/") ? OP_DIV : tj_tok_op(t, "//") ? OP_FLOORDIV
                 : tj_tok_op(t, "%") ? OP_MOD : 0;
        if (!op) return e;
        size_t pos = next(p)->pos;
        e = binary(p, N_BINOP, op, e, parse_pow(p), pos);
    }
}

static tj_node *parse_pow(tj_parser *p) {
    tj_node *e = parse_unary(p, true);
    while (tj_tok_op(cur(p), "**")) {
        size_t pos = next(p)->pos;
        e = binary(p, N_BINOP, OP_POW, e, parse_unary(p, true), pos);
    }
    return e;
}

static tj_node *parse_unary(tj_parser *p, bool with_filter) {
    const tj_token *t = cur(p);
    tj_node *node;
    if (tj_tok_op(t, "-") || tj_tok_op(t, "+")) {
        size_t pos = next(p)->pos;
        tj_parse_enter(p, pos);
        node = tj_node_new(p, tj_tok_op(t, "-") ? N_NEG : N_POS, pos);
        node->a = parse_unary(p, false);
        tj_seal(p, node);
        p->depth--;
    } else {
        node = parse_postfix(p, parse_primary(p));
    }
    if (with_filter) node = parse_filter_expr(p, node);
    return node;
}

static tj_node *parse_primary(tj_parser *p) {
    const tj_token *t = cur(p);
    size_t pos = t->pos;
    if (t->kind == TK_NAME) {
        next(p);
        tj_node *n = tj_node_new(p, N_CONST, pos);
        if (tj_tok_name(t, "true") || tj_tok_name(t, "True")) n->val = tj_bool(true);
        else if (tj_tok_name(t, "false") || tj_tok_name(t, "False")) n->val = tj_bool(false);
        else if (tj_tok_name(t, "none") || tj_tok_name(t, "None")) n->val = tj_none();
        else {
            n->kind = N_NAME;
            n->name = tj_strdup(p->c, t->s, t->n);
            n->name_n = t->n;
        }
        return n;
    }
    if (t->kind == TK_STRING) {
        tj_buf b = {0};
        while (cur(p)->kind == TK_STRING) { /* adjacent literals concatenate */
            tj_buf_put(p->c, &b, cur(p)->s, cur(p)->n);
            next(p);
        }
        tj_node *n = tj_node_new(p, N_CONST, pos);
        n->val = tj_str(b.p ? b.p : "", b.n);
        return n;
    }
    if (t->kind == TK_INT || t->kind == TK_FLOAT) {
        next(p);
        tj_node *n = tj_node_new(p, N_CONST, pos);
        n->val = t->kind == TK_INT ? tj_int(t->i) : tj_float(t->f);
        return n;
    }
    if (tj_tok_op(t, "(")) {
        next(p);
        tj_parse_enter(p, pos);
        tj_node *n = tj_parse_tuple(p, true, true);
        expect_op(p, ")");
        p->depth--;
        return n;
    }
    if (tj_tok_op(t, "[") || tj_tok_op(t, "{")) {
        bool dict = tj_tok_op(t, "{");
        next(p);
        tj_parse_enter(p, pos);
        tj_node *n = tj_node_new(p, dict ? N_DICT : N_LIST, pos);
        size_t cap = 0;
        const char *close = dict ? "}" : "]";
        while (!tj_tok_op(cur(p), close)) {
            if (n->n_kids) expect_op(p, ",");
            if (tj_tok_op(cur(p), close)) break;
            tj_node_push(p, n, tj_parse_expression(p, true), &cap);
            if (dict) {
                expect_op(p, ":");
                tj_node_push(p, n, tj_parse_expression(p, true), &cap);
            }
        }
        expect_op(p, close);
        p->depth--;
        return tj_seal(p, n);
    }
    tj_fail(p->c, pos, "unexpected %s", tj_tok_describe(p, t));
}

/* (args, name=value, ...) after the '(' — positional arguments may not follow keywords. */
static void parse_call_args(tj_parser *p, tj_node *n) {
    expect_op(p, "(");
    size_t cap = 0, kw_cap = 0;
    while (!tj_tok_op(cur(p), ")")) {
        if (n->n_kids || n->n_kw) expect_op(p, ",");
        if (tj_tok_op(cur(p), ")")) break;
        if (tj_tok_op(cur(p), "*") || tj_tok_op(cur(p), "**"))
            tj_fail(p->c, cur(p)->pos, "unsupported Jinja feature '*args / **kwargs in a call'");
        if (cur(p)->kind == TK_NAME && p->i + 1 < p->n && tj_tok_op(&p->t[p->i + 1], "=")) {
            const tj_token *name = next(p);
            next(p);
            n->kw = tj_grow_array(p->c, n->kw, n->n_kw, &kw_cap, sizeof *n->kw);
            tj_kwarg *k = &n->kw[n->n_kw++];
            k->name = tj_strdup(p->c, name->s, name->n);
            k->n = name->n;
            k->val = tj_parse_expression(p, true);
        } else {
            if (n->n_kw) tj_fail(p->c, cur(p)->pos, "positional argument after a keyword argument");
            tj_node_push(p, n, tj_parse_expression(p, true), &cap);
        }
    }
    expect_op(p, ")");
}

static tj_node *parse_subscript(tj_parser *p, tj_node *node) {
    const tj_token *t = next(p);
    if (tj_tok_op(t, ".")) {
        const tj_token *a = cur(p);
        if (a->kind == TK_NAME) {
            next(p);
            tj_node *n = tj_node_new(p, N_GETATTR, a->pos);
            n->a = node;
            n->name = tj_strdup(p->c, a->s, a->n);
            n->name_n = a->n;
            return tj_seal(p, n);
        }
        if (a->kind == TK_INT) {
            next(p);
            tj_node *n = tj_node_new(p, N_GETITEM, a->pos);
            n->a = node;
            n->b = tj_node_new(p, N_CONST, a->pos);
            n->b->val = tj_int(a->i);
            return tj_seal(p, n);
        }
        tj_fail(p->c, a->pos, "expected a name after '.', got %s", tj_tok_describe(p, a));
    }
    /* '[': an index or a slice (a tuple of them is not supported) */
    tj_parse_enter(p, t->pos);
    tj_node *part[3] = {NULL, NULL, NULL};
    int colons = 0;
    for (;;) {
        if (tj_tok_op(cur(p), "]")) break;
        if (tj_tok_op(cur(p), ":")) {
            if (++colons > 2) tj_fail(p->c, cur(p)->pos, "unexpected ':'");
            next(p);
            continue;
        }
        if (tj_tok_op(cur(p), ","))
            tj_fail(p->c, cur(p)->pos, "unsupported Jinja feature 'tuple subscript'");
        if (part[colons]) tj_fail(p->c, cur(p)->pos, "expected ']' or ':', got %s", tj_tok_describe(p, cur(p)));
        part[colons] = tj_parse_expression(p, true);
    }
    expect_op(p, "]");
    p->depth--;
    tj_node *n;
    if (colons == 0) {
        if (!part[0]) tj_fail(p->c, t->pos, "empty subscript '[]'");
        n = tj_node_new(p, N_GETITEM, t->pos);
        n->b = part[0];
    } else {
        n = tj_node_new(p, N_SLICE, t->pos);
        n->kids = tj_alloc_array(p->c, 3, sizeof *n->kids);
        n->n_kids = 3;
        for (int k = 0; k < 3; k++) n->kids[k] = part[k];
    }
    n->a = node;
    return tj_seal(p, n);
}

static tj_node *parse_call(tj_parser *p, tj_node *node) {
    tj_node *n = tj_node_new(p, N_CALL, node->pos); /* errors point at the callee */
    n->a = node;
    parse_call_args(p, n);
    return tj_seal(p, n);
}

static tj_node *parse_postfix(tj_parser *p, tj_node *node) {
    for (;;) {
        const tj_token *t = cur(p);
        if (tj_tok_op(t, ".") || tj_tok_op(t, "[")) node = parse_subscript(p, node);
        else if (tj_tok_op(t, "(")) node = parse_call(p, node);
        else return node;
    }
}

static tj_node *parse_filter_expr(tj_parser *p, tj_node *node) {
    for (;;) {
        const tj_token *t = cur(p);
        if (tj_tok_op(t, "|")) {
            next(p);
            const tj_token *name = expect_name(p);
            if (tj_tok_op(cur(p), ".")) tj_fail(p->c, name->pos, "unsupported Jinja feature 'dotted filter name'");
            tj_node *n = tj_node_new(p, N_FILTER, name->pos);
            n->a = node;
            n->name = tj_strdup(p->c, name->s, name->n);
            n->name_n = name->n;
            n->fid = tj_filter_id(name->s, name->n);
            if (n->fid < 0) tj_fail(p->c, name->pos, "unsupported Jinja filter '%s'", n->name);
            if (tj_tok_op(cur(p), "(")) parse_call_args(p, n);
            node = tj_seal(p, n);
        } else if (tj_tok_name(t, "is")) {
            next(p);
            bool negated = skip_name(p, "not");
            const tj_token *name = expect_name(p);
            tj_node *n = tj_node_new(p, N_TEST, name->pos);
            n->a = node;
            n->op = negated;
            n->name = tj_strdup(p->c, name->s, name->n);
            n->name_n = name->n;
            n->fid = tj_test_id(name->s, name->n);
            if (n->fid < 0) tj_fail(p->c, name->pos, "unsupported Jinja test '%s'", n->name);
            const tj_token *a = cur(p);
            if (tj_tok_op(a, "(")) {
                parse_call_args(p, n);
            } else if ((a->kind == TK_NAME || a->kind == TK_STRING || a->kind == TK_INT || a->kind == TK_FLOAT ||
                        tj_tok_op(a, "[") || tj_tok_op(a, "{")) &&
                       !tj_tok_name(a, "else") && !tj_tok_name(a, "or") && !tj_tok_name(a, "and")) {
                if (tj_tok_name(a, "is")) tj_fail(p->c, a->pos, "you cannot chain multiple tests with 'is'");
                n->kids = tj_alloc_array(p->c, 1, sizeof *n->kids);
                n->kids[0] = parse_postfix(p, parse_primary(p));
                n->n_kids = 1;
            }
            node = tj_seal(p, n);
        } else if (tj_tok_op(t, "(")) {
            node = parse_call(p, node);
        } else {
            return node;
        }
    }
}
