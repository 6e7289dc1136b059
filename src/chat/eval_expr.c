/* eval_expr.c — evaluating expressions with Python's operator semantics (bool is an int, / is true division,
 * // and % floor, `and`/`or` return an operand, chained comparisons) and Jinja's undefined rules (printing and
 * iterating an undefined value is fine, doing arithmetic or reaching into it is an error). */
#define _GNU_SOURCE /* memmem, gmtime_r, localtime_r */
#define _DARWIN_C_SOURCE /* the same on macOS, whose headers hide them once _POSIX_C_SOURCE is set */
#include <math.h>
#include <string.h>

#include "chat/jinja.h"

void tj_require_defined(tj_rt *r, size_t pos, tj_value v) {
    if (v.kind != TV_UNDEF) return;
    if (v.u.s.p) tj_fail(r->c, pos, "%.*s", (int)(v.u.s.n > 200 ? 200 : v.u.s.n), v.u.s.p);
    tj_fail(r->c, pos, "undefined value used in an expression");
}

static bool int_like(tj_value v, int64_t *i) {
    if (v.kind == TV_INT) *i = v.u.i;
    else if (v.kind == TV_BOOL) *i = v.u.b;
    else return false;
    return true;
}

static bool num(tj_value v, double *f) {
    int64_t i = 0;
    if (int_like(v, &i)) *f = (double)i;
    else if (v.kind == TV_FLOAT) *f = v.u.f;
    else return false;
    return true;
}

static const char *op_name(int op) {
    static const char *const names[] = {"?", "+", "-", "*", "/", "//", "%", "**", "~"};
    return op >= OP_ADD && op <= OP_CONCAT ? names[op] : "?";
}

static _Noreturn void bad_operands(tj_rt *r, size_t pos, int op, tj_value a, tj_value b) {
    tj_fail(r->c, pos, "unsupported operand type(s) for %s: '%s' and '%s'", op_name(op), tj_type_name(a),
            tj_type_name(b));
}

static tj_value repeat(tj_rt *r, size_t pos, tj_value seq, int64_t times) {
    if (times < 0) times = 0;
    if (seq.kind == TV_STR) {
        size_t total;
        if (__builtin_mul_overflow(seq.u.s.n, (uint64_t)times, &total) || total > r->lim.max_memory_bytes)
            tj_fail(r->c, pos, "string repetition longer than the memory limit");
        tj_charge(r, pos, total / 64);
        tj_buf b = {0};
        for (int64_t k = 0; k < times; k++) tj_buf_put(r->c, &b, seq.u.s.p, seq.u.s.n);
        return tj_str(b.p ? b.p : "", b.n);
    }
    const tj_list *l = seq.u.list;
    size_t total;
    if (__builtin_mul_overflow(l->n, (uint64_t)times, &total)) tj_fail(r->c, pos, "list repetition too long");
    tj_charge(r, pos, total);
    tj_list *out = tj_list_new(r->c, total);
    out->tuple = l->tuple;
    for (size_t k = 0; k < total; k++) out->v[k] = l->v[k % l->n];
    return tj_list_value(out);
}

static double py_fmod(double a, double b) {
    double m = fmod(a, b);
    if (m != 0.0 && ((m < 0) != (b < 0))) m += b;
    return m;
}

tj_value tj_binop(tj_rt *r, size_t pos, int op, tj_value a, tj_value b) {
    if (op == OP_CONCAT) {
        tj_buf buf = {0};
        tj_to_str(r, pos, &buf, a);
        tj_to_str(r, pos, &buf, b);
        return tj_str(buf.p ? buf.p : "", buf.n);
    }
    tj_require_defined(r, pos, a);
    tj_require_defined(r, pos, b);
    int64_t ia = 0, ib = 0, ir;
    double fa = 0, fb = 0;
    bool ints = int_like(a, &ia) && int_like(b, &ib);
    bool nums = num(a, &fa) && num(b, &fb);
    switch (op) {
    case OP_ADD:
        if (ints) {
            if (__builtin_add_overflow(ia, ib, &ir)) tj_fail(r->c, pos, "integer overflow (integers are 64-bit)");
            return tj_int(ir);
        }
        if (nums) return tj_float(fa + fb);
        if (a.kind == TV_STR && b.kind == TV_STR) {
            tj_charge(r, pos, (a.u.s.n + b.u.s.n) / 64);
            tj_buf buf = {0};
            tj_buf_put(r->c, &buf, a.u.s.p, a.u.s.n);
            tj_buf_put(r->c, &buf, b.u.s.p, b.u.s.n);
            return tj_str(buf.p ? buf.p : "", buf.n);
        }
        if (a.kind == TV_LIST && b.kind == TV_LIST && !a.u.list->generator && !b.u.list->generator &&
            a.u.list->tuple == b.u.list->tuple) {
            size_t n = a.u.list->n + b.u.list->n;
            tj_charge(r, pos, n);
            tj_list *l = tj_list_new(r->c, n);
            l->tuple = a.u.list->tuple;
            memcpy(l->v, a.u.list->v, a.u.list->n * sizeof *l->v);
            memcpy(l->v + a.u.list->n, b.u.list->v, b.u.list->n * sizeof *l->v);
            return tj_list_value(l);
        }
        break;
    case OP_SUB:
        if (ints) {
            if (__builtin_sub_overflow(ia, ib, &ir)) tj_fail(r->c, pos, "integer overflow (integers are 64-bit)");
            return tj_int(ir);
        }
        if (nums) return tj_float(fa - fb);
        break;
    case OP_MUL:
        if (ints) {
            if (__builtin_mul_overflow(ia, ib, &ir)) tj_fail(r->c, pos, "integer overflow (integers are 64-bit)");
            return tj_int(ir);
        }
        if (nums) return tj_float(fa * fb);
        if ((a.kind == TV_STR || (a.kind == TV_LIST && !a.u.list->generator)) && int_like(b, &ib))
            return repeat(r, pos, a, ib);
        if ((b.kind == TV_STR || (b.kind == TV_LIST && !b.u.list->generator)) && int_like(a, &ia))
            return repeat(r, pos, b, ia);
        break;
    case OP_DIV:
        if (nums) {
            if (fb == 0.0) tj_fail(r->c, pos, "division by zero");
            return tj_float(ints ? (double)ia / (double)ib : fa / fb);
        }
        break;
    case OP_FLOORDIV:
    case OP_MOD:
        if (ints) {
            if (ib == 0) tj_fail(r->c, pos, "integer division or modulo by zero");
            if (ia == INT64_MIN && ib == -1) tj_fail(r->c, pos, "integer overflow (integers are 64-bit)");
            int64_t q = ia / ib, m = ia % ib;
            if (m != 0 && ((m < 0) != (ib < 0))) {
                q--;
                m += ib;
            }
            return tj_int(op == OP_MOD ? m : q);
        }
        if (nums) {
            if (fb == 0.0) tj_fail(r->c, pos, "float division by zero");
            return tj_float(op == OP_MOD ? py_fmod(fa, fb) : floor(fa / fb));
        }
        if (op == OP_MOD && a.kind == TV_STR) tj_fail(r->c, pos, "unsupported Jinja feature '%% string formatting'");
        break;
    case OP_POW:
        if (ints && ib >= 0) {
            int64_t acc = 1, base = ia, e = ib;
            while (e > 0) {
                if (e & 1 && __builtin_mul_overflow(acc, base, &acc))
                    tj_fail(r->c, pos, "integer overflow (integers are 64-bit)");
                e >>= 1;
                if (e && __builtin_mul_overflow(base, base, &base))
                    tj_fail(r->c, pos, "integer overflow (integers are 64-bit)");
            }
            return tj_int(acc);
        }
        if (nums) {
            if (fa == 0.0 && fb < 0) tj_fail(r->c, pos, "0.0 cannot be raised to a negative power");
            return tj_float(pow(fa, fb));
        }
        break;
    }
    bad_operands(r, pos, op, a, b);
}

bool tj_contains(tj_rt *r, size_t pos, tj_value item, tj_value container) {
    switch (container.kind) {
    case TV_STR:
        if (item.kind != TV_STR)
            tj_fail(r->c, pos, "'in <string>' requires string as left operand, not %s", tj_type_name(item));
        tj_charge(r, pos, container.u.s.n / 64);
        if (item.u.s.n == 0) return true;
        return memmem(container.u.s.p, container.u.s.n, item.u.s.p, item.u.s.n) != NULL;
    case TV_LIST:
        tj_charge(r, pos, container.u.list->n);
        for (size_t k = 0; k < container.u.list->n; k++)
            if (tj_equal(r, container.u.list->v[k], item)) return true;
        return false;
    case TV_DICT: return tj_dict_get(r, container.u.dict, item) != NULL;
    case TV_UNDEF: return false;
    default: tj_fail(r->c, pos, "argument of type '%s' is not iterable", tj_type_name(container));
    }
}

static bool compare(tj_rt *r, size_t pos, int op, tj_value a, tj_value b) {
    switch (op) {
    case OP_EQ: return tj_equal(r, a, b);
    case OP_NE: return !tj_equal(r, a, b);
    case OP_LT: tj_require_defined(r, pos, a); tj_require_defined(r, pos, b); return tj_less(r, pos, "<", a, b);
    case OP_LE: tj_require_defined(r, pos, a); tj_require_defined(r, pos, b); return tj_less(r, pos, "<=", a, b);
    case OP_GT: tj_require_defined(r, pos, a); tj_require_defined(r, pos, b); return tj_less(r, pos, ">", a, b);
    case OP_GE: tj_require_defined(r, pos, a); tj_require_defined(r, pos, b); return tj_less(r, pos, ">=", a, b);
    case OP_IN: return tj_contains(r, pos, a, b);
    case OP_NOTIN: return !tj_contains(r, pos, a, b);
    }
    return false;
}

/* Evaluates the positional and keyword arguments of a call, filter or test node. */
static void eval_args(tj_state *st, const tj_node *n, tj_args *args, size_t skip) {
    args->n_pos = n->n_kids > skip ? n->n_kids - skip : 0;
    args->pos = tj_alloc_array(st->rt.c, args->n_pos + 1, sizeof *args->pos);
    for (size_t k = 0; k < args->n_pos; k++) args->pos[k] = tj_eval(st, n->kids[skip + k]);
    args->n_kw = n->n_kw;
    args->kw_nodes = n->kw;
    args->kw = tj_alloc_array(st->rt.c, n->n_kw + 1, sizeof *args->kw);
    for (size_t k = 0; k < n->n_kw; k++) args->kw[k] = tj_eval(st, n->kw[k].val);
}

tj_value tj_eval(tj_state *st, const tj_node *n) {
    tj_rt *r = &st->rt;
    switch (n->kind) {
    case N_CONST: return n->val;
    case N_NAME: return tj_lookup(st, n->name, n->name_n);
    case N_GETATTR: return tj_getattr(r, n->pos, tj_eval(st, n->a), n->name, n->name_n);
    case N_GETITEM: {
        tj_value obj = tj_eval(st, n->a);
        return tj_getitem(r, n->pos, obj, tj_eval(st, n->b));
    }
    case N_SLICE: {
        tj_value obj = tj_eval(st, n->a), part[3];
        for (int k = 0; k < 3; k++)
            if (n->kids[k]) part[k] = tj_eval(st, n->kids[k]);
        return tj_slice(r, n->pos, obj, n->kids[0] ? &part[0] : NULL, n->kids[1] ? &part[1] : NULL,
                        n->kids[2] ? &part[2] : NULL);
    }
    case N_CALL: {
        tj_value fn = tj_eval(st, n->a);
        tj_require_defined(r, n->pos, fn);
        tj_args args;
        eval_args(st, n, &args, 0);
        return tj_call(r, n->pos, fn, &args);
    }
    case N_FILTER: {
        tj_value v = tj_eval(st, n->a);
        tj_args args;
        eval_args(st, n, &args, 0);
        return tj_apply_filter(r, n->pos, n->fid, v, &args);
    }
    case N_TEST: {
        tj_value v = tj_eval(st, n->a);
        tj_args args;
        eval_args(st, n, &args, 0);
        bool res = tj_apply_test(r, n->pos, n->fid, v, &args);
        return tj_bool(n->op ? !res : res);
    }
    case N_NEG:
    case N_POS: {
        tj_value v = tj_eval(st, n->a);
        tj_require_defined(r, n->pos, v);
        int64_t i;
        if (int_like(v, &i)) {
            if (n->kind == N_POS) return tj_int(i);
            if (i == INT64_MIN) tj_fail(r->c, n->pos, "integer overflow (integers are 64-bit)");
            return tj_int(-i);
        }
        if (v.kind == TV_FLOAT) return tj_float(n->kind == N_NEG ? -v.u.f : v.u.f);
        tj_fail(r->c, n->pos, "bad operand type for unary %s: '%s'", n->kind == N_NEG ? "-" : "+", tj_type_name(v));
    }
    case N_NOT: return tj_bool(!tj_truthy(tj_eval(st, n->a)));
    case N_AND: {
        tj_value a = tj_eval(st, n->a);
        return tj_truthy(a) ? tj_eval(st, n->b) : a;
    }
    case N_OR: {
        tj_value a = tj_eval(st, n->a);
        return tj_truthy(a) ? a : tj_eval(st, n->b);
    }
    case N_BINOP: {
        tj_value a = tj_eval(st, n->a);
        return tj_binop(r, n->pos, n->op, a, tj_eval(st, n->b));
    }
    case N_COMPARE: {
        tj_value left = tj_eval(st, n->a);
        for (size_t k = 0; k < n->n_kids; k++) {
            tj_value right = tj_eval(st, n->kids[k]);
            if (!compare(r, n->pos, n->ops[k], left, right)) return tj_bool(false);
            left = right;
        }
        return tj_bool(true);
    }
    case N_COND:
        if (tj_truthy(tj_eval(st, n->a))) return tj_eval(st, n->b);
        return n->c ? tj_eval(st, n->c) : tj_undef("the inline if expression had no else branch");
    case N_LIST:
    case N_TUPLE: {
        tj_list *l = tj_list_new(r->c, n->n_kids);
        l->tuple = n->kind == N_TUPLE;
        for (size_t k = 0; k < n->n_kids; k++) l->v[k] = tj_eval(st, n->kids[k]);
        return tj_list_value(l);
    }
    case N_DICT: {
        tj_dict *d = tj_dict_new(r->c, n->n_kids / 2);
        for (size_t k = 0; k + 1 < n->n_kids; k += 2) {
            tj_value key = tj_eval(st, n->kids[k]);
            if (key.kind == TV_DICT || (key.kind == TV_LIST && !key.u.list->tuple) || key.kind == TV_UNDEF)
                tj_fail(r->c, n->kids[k]->pos, "unhashable type: '%s'", tj_type_name(key));
            tj_dict_set(r, d, key, tj_eval(st, n->kids[k + 1]));
        }
        tj_value v = {.kind = TV_DICT};
        v.u.dict = d;
        return v;
    }
    default: tj_fail(r->c, n->pos, "internal error: a statement where an expression was expected");
    }
}
