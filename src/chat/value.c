/* value.c — the values a chat template computes with, in Python's semantics: constructors, insertion-ordered
 * dicts, truthiness, == and ordering, type names, and the work counter that bounds a render. */
#include <math.h>
#include <string.h>

#include "chat/jinja.h"
#include "util/clock.h"

/* The wall clock and the cancel, read every 256 calls (a read costs more than most charged steps). */
static void check_clock(tj_rt *r, size_t pos) {
    if ((r->deadline <= 0 && !r->cancel) || (++r->ticks & 255) != 0) return;
    if (r->deadline > 0 && tg_monotonic_s() > r->deadline)
        tj_fail(r->c, pos, "took longer than %g s to render (the limit)", r->lim.max_seconds);
    if (r->cancel && r->cancel->stop(r->cancel->data))
        tj_fail(r->c, pos, "rendering abandoned (the client has gone or the server is stopping)");
}

void tj_charge(tj_rt *r, size_t pos, uint64_t n) {
    /* compared before adding: a charge near UINT64_MAX cannot wrap the counter */
    if (n > r->lim.max_work - r->work)
        tj_fail(r->c, pos, "needs more than %llu units of work (the limit)", (unsigned long long)r->lim.max_work);
    r->work += n;
    check_clock(r, pos);
}

void tj_iteration(tj_rt *r, size_t pos) {
    if (++r->iterations > r->lim.max_iterations)
        tj_fail(r->c, pos, "more than %llu loop iterations (the limit)", (unsigned long long)r->lim.max_iterations);
    check_clock(r, pos);
}

tj_value tj_undef(const char *name) {
    tj_value v = {.kind = TV_UNDEF};
    v.u.s.p = name;
    v.u.s.n = name ? strlen(name) : 0;
    return v;
}
tj_value tj_none(void) { return (tj_value){.kind = TV_NONE}; }
tj_value tj_bool(bool b) {
    tj_value v = {.kind = TV_BOOL};
    v.u.b = b;
    return v;
}
tj_value tj_int(int64_t i) {
    tj_value v = {.kind = TV_INT};
    v.u.i = i;
    return v;
}
tj_value tj_float(double f) {
    tj_value v = {.kind = TV_FLOAT};
    v.u.f = f;
    return v;
}
tj_value tj_str(const char *p, size_t n) {
    tj_value v = {.kind = TV_STR};
    v.u.s.p = p;
    v.u.s.n = n;
    return v;
}
tj_value tj_cstr(const char *p) { return tj_str(p, strlen(p)); }
tj_value tj_list_value(tj_list *l) {
    tj_value v = {.kind = TV_LIST};
    v.u.list = l;
    return v;
}

tj_list *tj_list_new(tj_ctx *c, size_t n) {
    tj_list *l = tj_alloc(c, sizeof *l);
    l->n = n;
    l->v = tj_alloc_array(c, n, sizeof *l->v);
    return l;
}

tj_dict *tj_dict_new(tj_ctx *c, size_t cap) {
    tj_dict *d = tj_alloc(c, sizeof *d);
    d->cap = cap ? cap : 4;
    d->k = tj_alloc_array(c, d->cap, sizeof *d->k);
    d->v = tj_alloc_array(c, d->cap, sizeof *d->v);
    return d;
}

tj_value *tj_dict_get_str(const tj_dict *d, const char *s, size_t n) {
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].kind == TV_STR && d->k[i].u.s.n == n && memcmp(d->k[i].u.s.p, s, n) == 0) return &d->v[i];
    return NULL;
}

tj_value *tj_dict_get(tj_rt *r, const tj_dict *d, tj_value key) {
    tj_charge(r, TJ_NOPOS, d->n); /* a linear scan: one unit per key compared */
    if (key.kind == TV_STR) return tj_dict_get_str(d, key.u.s.p, key.u.s.n);
    for (size_t i = 0; i < d->n; i++)
        if (tj_equal(r, d->k[i], key)) return &d->v[i];
    return NULL;
}

void tj_dict_set(tj_rt *r, tj_dict *d, tj_value key, tj_value val) {
    tj_value *slot = tj_dict_get(r, d, key);
    if (slot) {
        *slot = val;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap * 2;
        tj_value *k = tj_alloc_array(r->c, cap, sizeof *k), *v = tj_alloc_array(r->c, cap, sizeof *v);
        memcpy(k, d->k, d->n * sizeof *k);
        memcpy(v, d->v, d->n * sizeof *v);
        d->k = k;
        d->v = v;
        d->cap = cap;
    }
    d->k[d->n] = key;
    d->v[d->n] = val;
    d->n++;
}

const char *tj_type_name(tj_value v) {
    switch (v.kind) {
    case TV_UNDEF: return "Undefined";
    case TV_NONE: return "NoneType";
    case TV_BOOL: return "bool";
    case TV_INT: return "int";
    case TV_FLOAT: return "float";
    case TV_STR: return "str";
    case TV_LIST: return v.u.list->generator ? "generator" : v.u.list->tuple ? "tuple" : "list";
    case TV_DICT: return "dict";
    case TV_NS: return "Namespace";
    case TV_LOOP: return "LoopContext";
    case TV_FUNC: return "function";
    case TV_METHOD: return "builtin_function_or_method";
    }
    return "object";
}

bool tj_truthy(tj_value v) {
    switch (v.kind) {
    case TV_UNDEF:
    case TV_NONE: return false;
    case TV_BOOL: return v.u.b;
    case TV_INT: return v.u.i != 0;
    case TV_FLOAT: return v.u.f != 0.0;
    case TV_STR: return v.u.s.n != 0;
    case TV_LIST: return v.u.list->generator || v.u.list->n != 0;
    case TV_DICT: return v.u.dict->n != 0;
    default: return true;
    }
}

bool tj_is_str(tj_value v, const char *s) {
    size_t n = strlen(s);
    return v.kind == TV_STR && v.u.s.n == n && memcmp(v.u.s.p, s, n) == 0;
}

/* Numbers (bool counts as int, as in Python): true and *f (and *i, *is_int) when v is one. */
static bool as_number(tj_value v, double *f, int64_t *i, bool *is_int) {
    if (v.kind == TV_BOOL || v.kind == TV_INT) {
        *i = v.kind == TV_BOOL ? v.u.b : v.u.i;
        *f = (double)*i;
        *is_int = true;
        return true;
    }
    if (v.kind == TV_FLOAT) {
        *f = v.u.f;
        *is_int = false;
        return true;
    }
    return false;
}

/* int vs float compared exactly (Python compares the mathematical values). */
static int cmp_int_float(int64_t i, double f) {
    if (isnan(f)) return 2;
    if (f >= 9223372036854775808.0) return -1;
    if (f < -9223372036854775808.0) return 1;
    double fl = floor(f);
    int64_t fi = (int64_t)fl;
    if (i < fi) return -1;
    if (i > fi) return 1;
    return fl < f ? -1 : 0;
}

/* -1 / 0 / 1, or 2 when unordered (NaN). */
static int cmp_numbers(tj_value a, tj_value b) {
    double fa = 0, fb = 0;
    int64_t ia = 0, ib = 0;
    bool inta = false, intb = false;
    as_number(a, &fa, &ia, &inta);
    as_number(b, &fb, &ib, &intb);
    if (inta && intb) return ia < ib ? -1 : ia > ib;
    if (inta) return cmp_int_float(ia, fb);
    if (intb) {
        int c = cmp_int_float(ib, fa);
        return c == 2 ? 2 : -c;
    }
    if (isnan(fa) || isnan(fb)) return 2;
    return fa < fb ? -1 : fa > fb;
}

/* The recursion depth guard of == and ordering on nested lists and dicts (as in value_str.c). */
static void enter(tj_rt *r, size_t pos) {
    if (++r->vdepth > 256) tj_fail(r->c, pos, "a value nested more than 256 levels deep (the limit)");
}

bool tj_equal(tj_rt *r, tj_value a, tj_value b) {
    double f = 0;
    int64_t i = 0;
    bool is_int = false;
    if (as_number(a, &f, &i, &is_int) && as_number(b, &f, &i, &is_int)) return cmp_numbers(a, b) == 0;
    if (a.kind != b.kind) return false;
    switch (a.kind) {
    case TV_UNDEF:
    case TV_NONE: return true;
    case TV_STR:
        if (a.u.s.n != b.u.s.n) return false;
        tj_charge(r, TJ_NOPOS, a.u.s.n / 64);
        return memcmp(a.u.s.p, b.u.s.p, a.u.s.n) == 0;
    case TV_LIST: {
        const tj_list *x = a.u.list, *y = b.u.list;
        if (x == y) return true;
        if (x->generator || y->generator || x->tuple != y->tuple || x->n != y->n) return false;
        tj_charge(r, TJ_NOPOS, x->n);
        enter(r, TJ_NOPOS);
        bool same = true;
        for (size_t k = 0; k < x->n && same; k++) same = tj_equal(r, x->v[k], y->v[k]);
        r->vdepth--;
        return same;
    }
    case TV_DICT: {
        const tj_dict *x = a.u.dict, *y = b.u.dict;
        if (x == y) return true;
        if (x->n != y->n) return false;
        tj_charge(r, TJ_NOPOS, x->n);
        enter(r, TJ_NOPOS);
        bool same = true;
        for (size_t k = 0; k < x->n && same; k++) {
            tj_value *o = tj_dict_get(r, y, x->k[k]);
            same = o && tj_equal(r, x->v[k], *o);
        }
        r->vdepth--;
        return same;
    }
    case TV_NS: return a.u.dict == b.u.dict;
    case TV_LOOP: return a.u.loop == b.u.loop;
    case TV_FUNC: return a.u.fn.id == b.u.fn.id;
    case TV_METHOD: return false;
    default: return false;
    }
}

static int cmp_values(tj_rt *r, size_t pos, const char *op, tj_value a, tj_value b) {
    double f = 0;
    int64_t i = 0;
    bool is_int = false;
    if (as_number(a, &f, &i, &is_int) && as_number(b, &f, &i, &is_int)) return cmp_numbers(a, b);
    if (a.kind == TV_STR && b.kind == TV_STR) {
        size_t n = a.u.s.n < b.u.s.n ? a.u.s.n : b.u.s.n;
        tj_charge(r, pos, n / 64);
        int c = n ? memcmp(a.u.s.p, b.u.s.p, n) : 0; /* UTF-8 byte order is code point order */
        if (c) return c < 0 ? -1 : 1;
        return a.u.s.n < b.u.s.n ? -1 : a.u.s.n > b.u.s.n;
    }
    if (a.kind == TV_LIST && b.kind == TV_LIST && !a.u.list->generator && !b.u.list->generator &&
        a.u.list->tuple == b.u.list->tuple) {
        const tj_list *x = a.u.list, *y = b.u.list;
        size_t n = x->n < y->n ? x->n : y->n;
        tj_charge(r, pos, n);
        enter(r, pos);
        int c = x->n < y->n ? -1 : x->n > y->n;
        for (size_t k = 0; k < n; k++)
            if (!tj_equal(r, x->v[k], y->v[k])) {
                c = cmp_values(r, pos, op, x->v[k], y->v[k]);
                break;
            }
        r->vdepth--;
        return c;
    }
    tj_fail(r->c, pos, "'%s' not supported between instances of '%s' and '%s'", op, tj_type_name(a),
            tj_type_name(b));
}

bool tj_less(tj_rt *r, size_t pos, const char *op, tj_value a, tj_value b) {
    int c = cmp_values(r, pos, op, a, b);
    if (c == 2) return false;
    if (strcmp(op, "<") == 0) return c < 0;
    if (strcmp(op, "<=") == 0) return c <= 0;
    if (strcmp(op, ">") == 0) return c > 0;
    return c >= 0;
}
