/* render.c — the engine's entry points: compiling a template (normalising newlines as jinja2 does, lexing,
 * parsing) and rendering it (the scope stack with Jinja's rules — every for-loop iteration is a fresh scope whose
 * assignments vanish at its end, if-blocks share their enclosing scope — and the statements). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/jinja.h"
#include "util/clock.h"
#include "util/error.h"

struct tg_chat_template {
    tj_ctx ctx; /* owns the normalised source and the tree */
    tj_node *root;
    tg_chat_limits lim;
};

tg_chat_limits tg_chat_default_limits(void) {
    tg_chat_limits l = {
        .max_template_bytes = (size_t)1 << 20,
        .max_output_bytes = (size_t)16 << 20,
        .max_memory_bytes = (size_t)256 << 20,
        .max_iterations = 1000000,
        .max_work = 50000000,
        .max_depth = 64,
        .max_seconds = 0.5,
    };
    return l;
}

tg_chat_template *tg_chat_template_compile(const char *src, size_t len, const tg_chat_limits *limits, tg_error *err) {
    tg_chat_limits lim = limits ? *limits : tg_chat_default_limits();
    if (len > lim.max_template_bytes) {
        tg_fail(err, "chat template: %zu bytes, more than the limit of %zu", len, lim.max_template_bytes);
        return NULL;
    }
    size_t bad;
    if (!tj_utf8_valid(src, len, &bad)) {
        tg_fail(err, "chat template: not valid UTF-8 (byte %zu)", bad);
        return NULL;
    }
    tg_chat_template *t = tj_zalloc_or_fail(sizeof *t, err);
    if (!t) return NULL;
    t->lim = lim;
    tj_ctx *c = &t->ctx;
    c->err = err;
    c->cap = lim.max_memory_bytes;
    if (setjmp(c->jmp)) {
        tj_arena_free(c);
        free(t);
        return NULL;
    }
    /* \r\n and \r become \n; one trailing newline goes (keep_trailing_newline=False) */
    char *s = tj_alloc(c, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            s[n++] = src[i];
        }
    }
    if (n > 0 && s[n - 1] == '\n') n--;
    c->src = s;
    c->src_len = n;
    size_t n_tok;
    tj_token *toks = tj_lex(c, &n_tok);
    t->root = tj_parse(c, toks, n_tok, lim.max_depth);
    c->err = NULL;
    return t;
}

void tg_chat_template_free(tg_chat_template *t) {
    if (!t) return;
    tj_arena_free(&t->ctx);
    free(t);
}

/* ---- scopes -------------------------------------------------------------------------------------------------- */

static void push_scope(tj_state *st) {
    if (st->n_scopes == st->cap_scopes) {
        size_t cap = st->cap_scopes ? st->cap_scopes * 2 : 8;
        tj_dict **s = tj_alloc_array(st->rt.c, cap, sizeof *s);
        if (st->n_scopes) memcpy(s, st->scopes, st->n_scopes * sizeof *s);
        st->scopes = s;
        st->cap_scopes = cap;
    }
    st->scopes[st->n_scopes++] = tj_dict_new(st->rt.c, 4);
}

tj_value tj_lookup(tj_state *st, const char *name, size_t n) {
    for (size_t k = st->n_scopes; k-- > 0;) {
        tj_value *v = tj_dict_get_str(st->scopes[k], name, n);
        if (v) return *v;
    }
    tj_value *v = tj_dict_get_str(st->vars, name, n);
    if (v) return *v;
    tj_value g;
    if (tj_global_lookup(name, n, &g)) return g;
    tj_buf b = {0};
    tj_buf_putc(st->rt.c, &b, '\'');
    tj_buf_put(st->rt.c, &b, name, n);
    tj_buf_put(st->rt.c, &b, "' is undefined", 15); /* with the NUL */
    return tj_undef(b.p);
}

static void assign(tj_state *st, const tj_node *name, tj_value v) {
    tj_dict_set(&st->rt, st->scopes[st->n_scopes - 1], tj_str(name->name, name->name_n), v);
}

/* Unpacks v into the target names (one name takes v whole). */
static void assign_targets(tj_state *st, size_t pos, tj_node *const *names, size_t n, tj_value v) {
    if (n == 1) {
        assign(st, names[0], v);
        return;
    }
    tj_list *items = tj_iterate(&st->rt, pos, v);
    if (items->n != n)
        tj_fail(st->rt.c, pos, "%s values to unpack (expected %zu, got %zu)",
                items->n > n ? "too many" : "not enough", n, items->n);
    for (size_t k = 0; k < n; k++) assign(st, names[k], items->v[k]);
}

/* ---- statements ---------------------------------------------------------------------------------------------- */

static void exec_body(tj_state *st, const tj_node *body);

static void exec_for(tj_state *st, const tj_node *n) {
    tj_rt *r = &st->rt;
    tj_list *items = tj_iterate(r, n->a->pos, tj_eval(st, n->a));
    if (n->d) { /* `for x in xs if cond`: loop.length counts only the items that pass */
        tj_list *kept = tj_list_new(r->c, items->n);
        kept->n = 0;
        for (size_t k = 0; k < items->n; k++) {
            tj_iteration(r, n->pos);
            push_scope(st);
            assign_targets(st, n->pos, n->kids, n->n_kids, items->v[k]);
            bool keep = tj_truthy(tj_eval(st, n->d));
            st->n_scopes--;
            if (keep) kept->v[kept->n++] = items->v[k];
        }
        items = kept;
    }
    tj_loop *loop = tj_alloc(r->c, sizeof *loop);
    loop->length = items->n;
    loop->items = items->v;
    tj_value loop_value = {.kind = TV_LOOP};
    loop_value.u.loop = loop;
    for (size_t k = 0; k < items->n; k++) {
        tj_iteration(r, n->pos);
        loop->index0 = k;
        push_scope(st);
        tj_dict_set(r, st->scopes[st->n_scopes - 1], tj_cstr("loop"), loop_value);
        assign_targets(st, n->pos, n->kids, n->n_kids, items->v[k]);
        exec_body(st, n->b);
        st->n_scopes--;
        int jump = st->jump;
        st->jump = 0;
        if (jump == N_BREAK) break;
    }
    if (items->n == 0 && n->c) {
        push_scope(st);
        exec_body(st, n->c);
        st->n_scopes--;
    }
}

static void exec_set(tj_state *st, const tj_node *n) {
    tj_rt *r = &st->rt;
    tj_value v;
    if (n->kind == N_SET_BLOCK) {
        tj_buf captured = {0}, *saved = st->out;
        captured.limit = saved->limit;
        st->out = &captured;
        exec_body(st, n->b);
        st->out = saved;
        v = tj_str(captured.p ? captured.p : "", captured.n);
    } else {
        v = tj_eval(st, n->b);
    }
    const tj_node *t = n->a;
    if (t->kind == N_NAME) {
        assign(st, t, v);
    } else if (t->kind == N_TUPLE) {
        assign_targets(st, n->pos, t->kids, t->n_kids, v);
    } else { /* ns.attr */
        tj_value ns = tj_lookup(st, t->a->name, t->a->name_n);
        if (ns.kind != TV_NS)
            tj_fail(r->c, t->pos, "cannot assign attribute on non-namespace object '%s' (%s)", t->a->name,
                    tj_type_name(ns));
        tj_dict_set(r, ns.u.dict, tj_str(t->name, t->name_n), v);
    }
}

static void exec_node(tj_state *st, const tj_node *n) {
    tj_rt *r = &st->rt;
    switch (n->kind) {
    case N_DATA: tj_buf_put(r->c, st->out, n->val.u.s.p, n->val.u.s.n); return;
    case N_OUTPUT: tj_to_str(r, n->pos, st->out, tj_eval(st, n->a)); return;
    case N_IF:
        for (const tj_node *b = n; b; b = b->c) {
            if (b->kind != N_IF) {
                exec_body(st, b);
                return;
            }
            if (tj_truthy(tj_eval(st, b->a))) {
                exec_body(st, b->b);
                return;
            }
        }
        return;
    case N_FOR: exec_for(st, n); return;
    case N_SET:
    case N_SET_BLOCK: exec_set(st, n); return;
    case N_BREAK:
    case N_CONTINUE: st->jump = n->kind; return;
    case N_BODY: exec_body(st, n); return;
    default: tj_fail(r->c, n->pos, "internal error: an expression where a statement was expected");
    }
}

static void exec_body(tj_state *st, const tj_node *body) {
    for (size_t k = 0; k < body->n_kids && !st->jump; k++) exec_node(st, body->kids[k]);
}

char *tg_chat_template_render(const tg_chat_template *t, const json_t *vars, const tg_chat_clock *clock, size_t *len,
                              tg_error *err) {
    return tg_chat_template_render_cancel(t, vars, clock, NULL, len, err);
}

char *tg_chat_template_render_cancel(const tg_chat_template *t, const json_t *vars, const tg_chat_clock *clock,
                                     const tg_chat_cancel *cancel, size_t *len, tg_error *err) {
    if (vars && !json_is_object(vars)) {
        tg_fail(err, "chat template: the render variables must be a JSON object");
        return NULL;
    }
    /* on the heap: the jump back must find the arena's chunk list as the callee left it */
    tj_ctx *c = tj_zalloc_or_fail(sizeof *c, err);
    if (!c) return NULL;
    c->err = err;
    c->src = t->ctx.src;
    c->src_len = t->ctx.src_len;
    c->cap = t->lim.max_memory_bytes;
    tj_state st = {.rt = {.c = c, .lim = t->lim}};
    st.rt.deadline = t->lim.max_seconds > 0 ? tg_monotonic_s() + t->lim.max_seconds : 0;
    st.rt.cancel = cancel && cancel->stop ? cancel : NULL;
    st.rt.now = clock ? clock->now : (int64_t)time(NULL);
    st.rt.now_utc = clock ? clock->utc : false;
    tj_buf out = {.limit = t->lim.max_output_bytes};
    st.out = &out;
    if (setjmp(c->jmp)) {
        tj_arena_free(c);
        free(c);
        return NULL;
    }
    if (vars) {
        tj_value v = tj_from_json(&st.rt, vars);
        st.vars = v.u.dict;
    } else {
        st.vars = tj_dict_new(c, 1);
    }
    push_scope(&st);
    exec_body(&st, t->root);
    char *text = malloc(out.n + 1);
    if (!text) tj_fail(c, TJ_NOPOS, "out of memory");
    if (out.n) memcpy(text, out.p, out.n);
    text[out.n] = '\0';
    *len = out.n;
    tj_arena_free(c);
    free(c);
    return text;
}
