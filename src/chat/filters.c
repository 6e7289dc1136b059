/* filters.c — the Jinja filters and tests chat templates use, each with jinja2's semantics (filters.py, tests.py)
 * and transformers' tojson. Filters that produce a generator in Python (map, select, reject, selectattr,
 * rejectattr, items, reverse on lists) return a list marked as a generator, so printing it, len() and indexing
 * fail the way they do in Python. */
#define _DEFAULT_SOURCE /* strncasecmp */
#define _DARWIN_C_SOURCE /* the same on macOS, whose headers hide them once _POSIX_C_SOURCE is set */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "chat/jinja.h"

enum {
    F_TRIM, F_LENGTH, F_TOJSON, F_UPPER, F_LOWER, F_TITLE, F_CAPITALIZE, F_DEFAULT, F_JOIN, F_REPLACE, F_STRING,
    F_INT, F_FLOAT, F_LIST, F_FIRST, F_LAST, F_ITEMS, F_SELECTATTR, F_REJECTATTR, F_SELECT, F_REJECT, F_MAP,
    F_SAFE, F_ESCAPE, F_ABS, F_REVERSE, F_INDENT, F_COUNT_
};
static const char *const FILTERS[] = {
    "trim", "length", "tojson", "upper", "lower", "title", "capitalize", "default", "join", "replace", "string",
    "int", "float", "list", "first", "last", "items", "selectattr", "rejectattr", "select", "reject", "map",
    "safe", "escape", "abs", "reverse", "indent"};

enum {
    T_DEFINED, T_UNDEFINED, T_NONE, T_STRING, T_MAPPING, T_ITERABLE, T_SEQUENCE, T_NUMBER, T_INTEGER, T_FLOAT,
    T_BOOLEAN, T_TRUE, T_FALSE, T_ODD, T_EVEN, T_DIVISIBLEBY, T_EQ, T_NE, T_LT, T_LE, T_GT, T_GE, T_IN, T_CALLABLE,
    T_SAMEAS, T_LOWER, T_UPPER, T_COUNT_
};
typedef struct {
    const char *name;
    int id;
} test_name;
static const test_name TESTS[] = {
    {"defined", T_DEFINED}, {"undefined", T_UNDEFINED}, {"none", T_NONE}, {"string", T_STRING},
    {"mapping", T_MAPPING}, {"iterable", T_ITERABLE}, {"sequence", T_SEQUENCE}, {"number", T_NUMBER},
    {"integer", T_INTEGER}, {"float", T_FLOAT}, {"boolean", T_BOOLEAN}, {"true", T_TRUE}, {"false", T_FALSE},
    {"odd", T_ODD}, {"even", T_EVEN}, {"divisibleby", T_DIVISIBLEBY}, {"equalto", T_EQ}, {"eq", T_EQ},
    {"==", T_EQ}, {"ne", T_NE}, {"!=", T_NE}, {"lt", T_LT}, {"lessthan", T_LT}, {"<", T_LT}, {"le", T_LE},
    {"<=", T_LE}, {"gt", T_GT}, {"greaterthan", T_GT}, {">", T_GT}, {"ge", T_GE}, {">=", T_GE}, {"in", T_IN},
    {"callable", T_CALLABLE}, {"sameas", T_SAMEAS}, {"lower", T_LOWER}, {"upper", T_UPPER}, {NULL, 0}};

int tj_filter_id(const char *name, size_t n) {
    if (n == 1 && name[0] == 'd') return F_DEFAULT;
    if (n == 1 && name[0] == 'e') return F_ESCAPE;
    if (n == 5 && memcmp(name, "count", 5) == 0) return F_LENGTH;
    for (int k = 0; k < F_COUNT_; k++)
        if (strlen(FILTERS[k]) == n && memcmp(FILTERS[k], name, n) == 0) return k;
    return -1;
}

int tj_test_id(const char *name, size_t n) {
    for (const test_name *t = TESTS; t->name; t++)
        if (strlen(t->name) == n && memcmp(t->name, name, n) == 0) return t->id;
    return -1;
}

static const tj_value *arg(const tj_args *a, size_t i, const char *name) {
    if (i < a->n_pos) return &a->pos[i];
    return name ? tj_kwarg_get(a, name) : NULL;
}

static tj_value gen(tj_list *l) {
    l->generator = true;
    return tj_list_value(l);
}

static tj_value html_escape(tj_rt *r, size_t pos, tj_value v) {
    if (v.kind == TV_UNDEF) return tj_cstr("");
    tj_value s = tj_str_of(r, pos, v);
    tj_buf b = {0};
    for (size_t i = 0; i < s.u.s.n; i++) {
        char ch = s.u.s.p[i];
        switch (ch) {
        case '&': tj_buf_put(r->c, &b, "&amp;", 5); break;
        case '<': tj_buf_put(r->c, &b, "&lt;", 4); break;
        case '>': tj_buf_put(r->c, &b, "&gt;", 4); break;
        case '"': tj_buf_put(r->c, &b, "&#34;", 5); break;
        case '\'': tj_buf_put(r->c, &b, "&#39;", 5); break;
        default: tj_buf_putc(r->c, &b, ch);
        }
    }
    return tj_str(b.p ? b.p : "", b.n);
}

/* jinja's make_attrgetter: "a.b.0" looked up part by part with getitem. */
static tj_value attr_path(tj_rt *r, size_t pos, tj_value item, tj_value path) {
    if (path.kind == TV_INT) return tj_getitem(r, pos, item, path);
    if (path.kind != TV_STR) tj_fail(r->c, pos, "attribute must be a string or an integer");
    const char *p = path.u.s.p, *end = p + path.u.s.n;
    while (p <= end) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t n = dot ? (size_t)(dot - p) : (size_t)(end - p);
        bool digits = n > 0;
        int64_t idx = 0;
        for (size_t k = 0; k < n; k++) {
            if (p[k] < '0' || p[k] > '9' || idx > INT64_MAX / 10 - 10) digits = false;
            else idx = idx * 10 + (p[k] - '0');
        }
        item = tj_getitem(r, pos, item, digits ? tj_int(idx) : tj_str(p, n));
        if (!dot) break;
        p = dot + 1;
    }
    return item;
}

/* select/reject/selectattr/rejectattr: which items pass test `tid` (or truthiness without a test). */
static tj_value filter_items(tj_rt *r, size_t pos, tj_value v, const tj_args *a, bool by_attr, bool keep) {
    tj_list *items = tj_iterate(r, pos, v);
    size_t first = by_attr ? 1 : 0;
    if (by_attr && a->n_pos < 1) tj_fail(r->c, pos, "selectattr/rejectattr need an attribute name");
    int tid = -1;
    if (a->n_pos > first) {
        if (a->pos[first].kind != TV_STR) tj_fail(r->c, pos, "the test name must be a string");
        tid = tj_test_id(a->pos[first].u.s.p, a->pos[first].u.s.n);
        if (tid < 0)
            tj_fail(r->c, pos, "unsupported Jinja test '%.*s'",
                    (int)(a->pos[first].u.s.n > 40 ? 40 : a->pos[first].u.s.n), a->pos[first].u.s.p);
    }
    tj_args targs = {.pos = a->n_pos > first + 1 ? a->pos + first + 1 : NULL,
                     .n_pos = a->n_pos > first + 1 ? a->n_pos - first - 1 : 0};
    tj_list *out = tj_list_new(r->c, items->n);
    out->n = 0;
    tj_charge(r, pos, items->n);
    for (size_t k = 0; k < items->n; k++) {
        tj_value x = by_attr ? attr_path(r, pos, items->v[k], a->pos[0]) : items->v[k];
        bool pass = tid < 0 ? tj_truthy(x) : tj_apply_test(r, pos, tid, x, &targs);
        if (pass == keep) out->v[out->n++] = items->v[k];
    }
    return gen(out);
}

static tj_value do_map(tj_rt *r, size_t pos, tj_value v, const tj_args *a) {
    tj_list *items = tj_iterate(r, pos, v);
    tj_list *out = tj_list_new(r->c, items->n);
    tj_charge(r, pos, items->n);
    const tj_value *attr = tj_kwarg_get(a, "attribute");
    if (attr) {
        tj_args_check(r, pos, a, "map()", 0, "attribute,default");
        const tj_value *dflt = tj_kwarg_get(a, "default");
        for (size_t k = 0; k < items->n; k++) {
            out->v[k] = attr_path(r, pos, items->v[k], *attr);
            if (dflt && out->v[k].kind == TV_UNDEF) out->v[k] = *dflt;
        }
        return gen(out);
    }
    if (a->n_pos < 1 || a->pos[0].kind != TV_STR) tj_fail(r->c, pos, "map() needs a filter name or attribute=");
    int fid = tj_filter_id(a->pos[0].u.s.p, a->pos[0].u.s.n);
    if (fid < 0)
        tj_fail(r->c, pos, "unsupported Jinja filter '%.*s'", (int)(a->pos[0].u.s.n > 40 ? 40 : a->pos[0].u.s.n),
                a->pos[0].u.s.p);
    tj_args fargs = {.pos = a->pos + 1, .n_pos = a->n_pos - 1, .kw_nodes = a->kw_nodes, .kw = a->kw, .n_kw = a->n_kw};
    for (size_t k = 0; k < items->n; k++) out->v[k] = tj_apply_filter(r, pos, fid, items->v[k], &fargs);
    return gen(out);
}

/* Python's digitpart, digit (_? digit)*, copied without the underscores; returns the number of digits. */
static size_t digitpart(const char **pp, const char *end, char *out, size_t *n) {
    const char *p = *pp;
    size_t digits = 0;
    while (p < end && *p >= '0' && *p <= '9') {
        out[(*n)++] = *p++;
        digits++;
        if (p + 1 < end && *p == '_' && p[1] >= '0' && p[1] <= '9') p++;
    }
    *pp = p;
    return digits;
}

/* Whether the string v (surrounding whitespace aside) is what Python's int() (as_int) or float() accepts: digits
 * with single underscores between them, a sign, for floats a fraction, an exponent, inf/infinity/nan. On success
 * out holds it without whitespace and underscores, for strtoll/strtod (which alone would also take "0x1f", "1e",
 * embedded NULs...). */
static bool py_number_text(tj_value v, bool as_int, char *out, size_t cap) {
    const size_t lead = tj_ws_prefix(v.u.s.p, v.u.s.n);
    const tj_value s = tj_str(v.u.s.p + lead, v.u.s.n - lead - tj_ws_suffix(v.u.s.p + lead, v.u.s.n - lead));
    const char *p = s.u.s.p, *end = p + s.u.s.n;
    size_t n = 0;
    if (s.u.s.n == 0 || s.u.s.n >= cap) return false;
    if (*p == '+' || *p == '-') out[n++] = *p++;
    if (!as_int) {
        static const char *const words[] = {"inf", "infinity", "nan"};
        for (size_t k = 0; k < 3; k++) {
            size_t wl = strlen(words[k]);
            if ((size_t)(end - p) == wl && strncasecmp(p, words[k], wl) == 0) {
                memcpy(out + n, p, wl);
                out[n + wl] = '\0';
                return true;
            }
        }
    }
    size_t int_digits = digitpart(&p, end, out, &n), frac_digits = 0;
    if (!as_int && p < end && *p == '.') {
        out[n++] = *p++;
        frac_digits = digitpart(&p, end, out, &n);
    }
    if (int_digits + frac_digits == 0) return false;
    if (!as_int && p < end && (*p == 'e' || *p == 'E')) {
        out[n++] = *p++;
        if (p < end && (*p == '+' || *p == '-')) out[n++] = *p++;
        if (digitpart(&p, end, out, &n) == 0) return false;
    }
    out[n] = '\0';
    return p == end && (!as_int || frac_digits == 0);
}

static tj_value do_int(tj_rt *r, size_t pos, tj_value v, const tj_args *a) {
    const tj_value *dflt = arg(a, 0, "default"), *base = arg(a, 1, "base");
    if (base && !(base->kind == TV_INT && base->u.i == 10))
        tj_fail(r->c, pos, "unsupported Jinja feature 'int(base=...)'");
    tj_value d = dflt ? *dflt : tj_int(0);
    tj_require_defined(r, pos, v);
    switch (v.kind) {
    case TV_INT: return v;
    case TV_BOOL: return tj_int(v.u.b);
    case TV_FLOAT:
        if (isnan(v.u.f) || isinf(v.u.f))
            tj_fail(r->c, pos, "cannot convert float %s to integer", isnan(v.u.f) ? "NaN" : "infinity");
        if (fabs(v.u.f) >= 9.2e18) tj_fail(r->c, pos, "integer overflow (integers are 64-bit)");
        return tj_int((int64_t)v.u.f);
    case TV_STR: {
        char tmp[80];
        if (py_number_text(v, true, tmp, sizeof tmp)) {
            errno = 0;
            long long x = strtoll(tmp, NULL, 10);
            if (errno == ERANGE) tj_fail(r->c, pos, "integer overflow (integers are 64-bit)");
            return tj_int(x);
        }
        if (!py_number_text(v, false, tmp, sizeof tmp)) return d;
        double f = strtod(tmp, NULL);
        if (isnan(f)) return d;
        if (isinf(f)) tj_fail(r->c, pos, "cannot convert float infinity to integer");
        if (fabs(f) >= 9.2e18) tj_fail(r->c, pos, "integer overflow (integers are 64-bit)");
        return tj_int((int64_t)f);
    }
    default: return d;
    }
}

static tj_value do_indent(tj_rt *r, size_t pos, tj_value v, const tj_args *a) {
    tj_args_check(r, pos, a, "indent()", 3, "width,first,blank");
    const tj_value *w = arg(a, 0, "width"), *first = arg(a, 1, "first"), *blank = arg(a, 2, "blank");
    tj_value ind = w && w->kind == TV_STR ? *w : tj_cstr("    ");
    if (w && w->kind == TV_INT) {
        if (w->u.i < 0 || w->u.i > 256) tj_fail(r->c, pos, "indent(): width must be 0..256");
        char *sp = tj_alloc(r->c, (size_t)w->u.i + 1);
        memset(sp, ' ', (size_t)w->u.i);
        ind = tj_str(sp, (size_t)w->u.i);
    }
    tj_value s = tj_str_of(r, pos, v);
    tj_buf b = {0};
    size_t i = 0, line = 0;
    tj_charge(r, pos, s.u.s.n / 64 + 1);
    while (i <= s.u.s.n) {
        const char *nl = memchr(s.u.s.p + i, '\n', s.u.s.n - i);
        size_t end = nl ? (size_t)(nl - s.u.s.p) : s.u.s.n;
        bool is_blank = tj_ws_prefix(s.u.s.p + i, end - i) == end - i;
        if ((line > 0 || (first && tj_truthy(*first))) && (!is_blank || (blank && tj_truthy(*blank))))
            tj_buf_put(r->c, &b, ind.u.s.p, ind.u.s.n);
        tj_buf_put(r->c, &b, s.u.s.p + i, end - i);
        if (!nl) break;
        tj_buf_putc(r->c, &b, '\n');
        i = end + 1;
        line++;
    }
    return tj_str(b.p ? b.p : "", b.n);
}

tj_value tj_apply_filter(tj_rt *r, size_t pos, int fid, tj_value v, const tj_args *a) {
    static const int no_args[] = {F_LENGTH, F_UPPER, F_LOWER, F_TITLE, F_CAPITALIZE, F_STRING, F_SAFE, F_ESCAPE,
                                  F_LIST, F_FIRST, F_LAST, F_ITEMS, F_ABS, F_REVERSE};
    for (size_t k = 0; k < sizeof no_args / sizeof *no_args; k++)
        if (fid == no_args[k]) tj_args_check(r, pos, a, FILTERS[fid], 0, "");
    if (fid == F_INT || fid == F_FLOAT) tj_args_check(r, pos, a, FILTERS[fid], fid == F_INT ? 2 : 1, "default,base");
    switch (fid) {
    case F_TRIM:
        tj_args_check(r, pos, a, "trim", 1, "chars");
        return tj_strip(r, pos, tj_str_of(r, pos, v), arg(a, 0, "chars"));
    case F_LENGTH:
        switch (v.kind) {
        case TV_UNDEF: return tj_int(0);
        case TV_STR: tj_charge(r, pos, TJ_DECODE_UNITS(v.u.s.n)); return tj_int((int64_t)tj_utf8_len(v.u.s.p, v.u.s.n));
        case TV_LIST:
            if (!v.u.list->generator) return tj_int((int64_t)v.u.list->n);
            break;
        case TV_DICT: return tj_int((int64_t)v.u.dict->n);
        default: break;
        }
        tj_fail(r->c, pos, "object of type '%s' has no len()", tj_type_name(v));
    case F_TOJSON: {
        tj_args_check(r, pos, a, "tojson", 5, "ensure_ascii,indent,separators,sort_keys");
        const tj_value *ea = arg(a, 0, "ensure_ascii"), *ind = arg(a, 1, "indent"), *sep = arg(a, 2, "separators"),
                       *sk = arg(a, 3, "sort_keys");
        if (ea && tj_truthy(*ea)) tj_fail(r->c, pos, "unsupported Jinja feature 'tojson(ensure_ascii=True)'");
        int indent = -1;
        if (ind && ind->kind == TV_INT) {
            if (ind->u.i < 0 || ind->u.i > 64) tj_fail(r->c, pos, "tojson: indent must be 0..64");
            indent = (int)ind->u.i;
        } else if (ind && ind->kind != TV_NONE) {
            tj_fail(r->c, pos, "unsupported Jinja feature 'tojson indent that is not an integer'");
        }
        const char *item_sep = NULL, *key_sep = NULL;
        if (sep && sep->kind != TV_NONE) {
            if (sep->kind != TV_LIST || sep->u.list->n != 2 || sep->u.list->v[0].kind != TV_STR ||
                sep->u.list->v[1].kind != TV_STR)
                tj_fail(r->c, pos, "tojson: separators must be a pair of strings");
            item_sep = tj_strdup(r->c, sep->u.list->v[0].u.s.p, sep->u.list->v[0].u.s.n);
            key_sep = tj_strdup(r->c, sep->u.list->v[1].u.s.p, sep->u.list->v[1].u.s.n);
        }
        tj_buf b = {0};
        tj_tojson(r, pos, &b, v, indent, item_sep, key_sep, sk && tj_truthy(*sk));
        return tj_str(b.p ? b.p : "", b.n);
    }
    case F_UPPER: return tj_case(r, tj_str_of(r, pos, v), 0);
    case F_LOWER: return tj_case(r, tj_str_of(r, pos, v), 1);
    case F_CAPITALIZE: return tj_case(r, tj_str_of(r, pos, v), 3);
    case F_TITLE: return tj_title_words(r, tj_str_of(r, pos, v));
    case F_DEFAULT: {
        tj_args_check(r, pos, a, "default", 2, "default_value,boolean");
        const tj_value *d = arg(a, 0, "default_value"), *boolean = arg(a, 1, "boolean");
        if (v.kind == TV_UNDEF || (boolean && tj_truthy(*boolean) && !tj_truthy(v))) return d ? *d : tj_cstr("");
        return v;
    }
    case F_JOIN: {
        tj_args_check(r, pos, a, "join", 2, "d,attribute");
        const tj_value *d = arg(a, 0, "d"), *attr = arg(a, 1, "attribute");
        tj_value sep = d ? tj_str_of(r, pos, *d) : tj_cstr("");
        tj_list *items = tj_iterate(r, pos, v);
        tj_buf b = {0};
        tj_charge(r, pos, items->n);
        for (size_t k = 0; k < items->n; k++) {
            if (k) tj_buf_put(r->c, &b, sep.u.s.p, sep.u.s.n);
            tj_to_str(r, pos, &b, attr ? attr_path(r, pos, items->v[k], *attr) : items->v[k]);
        }
        return tj_str(b.p ? b.p : "", b.n);
    }
    case F_REPLACE: {
        tj_args_check(r, pos, a, "replace", 3, "old,new,count");
        const tj_value *o = arg(a, 0, "old"), *n = arg(a, 1, "new"), *c = arg(a, 2, "count");
        if (!o || !n) tj_fail(r->c, pos, "replace needs the old and the new string");
        if (c && c->kind != TV_INT && c->kind != TV_NONE && c->kind != TV_BOOL)
            tj_fail(r->c, pos, "'%s' object cannot be interpreted as an integer", tj_type_name(*c));
        int64_t count = c && c->kind == TV_INT ? c->u.i : c && c->kind == TV_BOOL ? c->u.b : -1;
        return tj_replace(r, pos, tj_str_of(r, pos, v), tj_str_of(r, pos, *o), tj_str_of(r, pos, *n), count);
    }
    case F_STRING:
    case F_SAFE:
        if (fid == F_SAFE && v.kind != TV_UNDEF && v.kind != TV_STR) return v;
        return tj_str_of(r, pos, v);
    case F_ESCAPE: return html_escape(r, pos, v);
    case F_INT: return do_int(r, pos, v, a);
    case F_FLOAT: {
        const tj_value *d = arg(a, 0, "default");
        if (v.kind == TV_FLOAT) return v;
        if (v.kind == TV_INT || v.kind == TV_BOOL) return tj_float(v.kind == TV_INT ? (double)v.u.i : v.u.b);
        char tmp[80];
        if (v.kind == TV_STR && py_number_text(v, false, tmp, sizeof tmp)) return tj_float(strtod(tmp, NULL));
        tj_require_defined(r, pos, v);
        return d ? *d : tj_float(0.0);
    }
    case F_LIST: {
        tj_list *items = tj_iterate(r, pos, v);
        tj_list *l = tj_list_new(r->c, items->n);
        memcpy(l->v, items->v, items->n * sizeof *l->v);
        tj_charge(r, pos, items->n);
        return tj_list_value(l);
    }
    case F_FIRST: {
        tj_list *items = tj_iterate(r, pos, v);
        return items->n ? items->v[0] : tj_undef("No first item, sequence was empty.");
    }
    case F_LAST: {
        if (v.kind == TV_LIST && v.u.list->generator) tj_fail(r->c, pos, "'generator' object is not reversible");
        tj_list *items = tj_iterate(r, pos, v);
        return items->n ? items->v[items->n - 1] : tj_undef("No last item, sequence was empty.");
    }
    case F_ITEMS: {
        if (v.kind == TV_UNDEF) return gen(tj_list_new(r->c, 0));
        if (v.kind != TV_DICT) tj_fail(r->c, pos, "can only get item pairs from a mapping");
        tj_list *l = tj_list_new(r->c, v.u.dict->n);
        for (size_t k = 0; k < v.u.dict->n; k++) {
            tj_list *pair = tj_list_new(r->c, 2);
            pair->tuple = true;
            pair->v[0] = v.u.dict->k[k];
            pair->v[1] = v.u.dict->v[k];
            l->v[k] = tj_list_value(pair);
        }
        return gen(l);
    }
    case F_SELECTATTR: return filter_items(r, pos, v, a, true, true);
    case F_REJECTATTR: return filter_items(r, pos, v, a, true, false);
    case F_SELECT: return filter_items(r, pos, v, a, false, true);
    case F_REJECT: return filter_items(r, pos, v, a, false, false);
    case F_MAP: return do_map(r, pos, v, a);
    case F_ABS:
        if (v.kind == TV_INT) {
            if (v.u.i == INT64_MIN) tj_fail(r->c, pos, "integer overflow (integers are 64-bit)");
            return tj_int(v.u.i < 0 ? -v.u.i : v.u.i);
        }
        if (v.kind == TV_BOOL) return tj_int(v.u.b);
        if (v.kind == TV_FLOAT) return tj_float(fabs(v.u.f));
        tj_fail(r->c, pos, "bad operand type for abs(): '%s'", tj_type_name(v));
    case F_REVERSE: {
        if (v.kind == TV_STR) {
            tj_value none = tj_none(), step = tj_int(-1);
            return tj_slice(r, pos, v, &none, &none, &step);
        }
        tj_list *items = tj_iterate(r, pos, v);
        tj_list *l = tj_list_new(r->c, items->n);
        for (size_t k = 0; k < items->n; k++) l->v[k] = items->v[items->n - 1 - k];
        tj_charge(r, pos, items->n);
        return gen(l);
    }
    case F_INDENT: return do_indent(r, pos, v, a);
    }
    tj_fail(r->c, pos, "internal error: unknown filter");
}

static bool need_int(tj_rt *r, size_t pos, tj_value v, int64_t *i, const char *test) {
    if (v.kind == TV_INT) *i = v.u.i;
    else if (v.kind == TV_BOOL) *i = v.u.b;
    else if (v.kind == TV_FLOAT) return false;
    else {
        tj_require_defined(r, pos, v);
        tj_fail(r->c, pos, "test '%s' needs a number, not %s", test, tj_type_name(v));
    }
    return true;
}

/* Tests that take one argument (the rest take none). */
static bool test_takes_arg(int tid) {
    return tid == T_DIVISIBLEBY || tid == T_EQ || tid == T_NE || tid == T_LT || tid == T_LE || tid == T_GT ||
           tid == T_GE || tid == T_IN || tid == T_SAMEAS;
}

bool tj_apply_test(tj_rt *r, size_t pos, int tid, tj_value v, const tj_args *a) {
    const size_t want = test_takes_arg(tid) ? 1 : 0;
    if (a->n_pos != want || a->n_kw)
        tj_fail(r->c, pos, "this test takes %zu argument%s (%zu given)", want, want == 1 ? "" : "s",
                a->n_pos + a->n_kw);
    const tj_value *x = a->n_pos ? &a->pos[0] : NULL;
    int64_t i, j;
    switch (tid) {
    case T_DEFINED: return v.kind != TV_UNDEF;
    case T_UNDEFINED: return v.kind == TV_UNDEF;
    case T_NONE: return v.kind == TV_NONE;
    case T_STRING: return v.kind == TV_STR;
    case T_MAPPING: return v.kind == TV_DICT;
    case T_ITERABLE: return v.kind == TV_STR || v.kind == TV_LIST || v.kind == TV_DICT || v.kind == TV_UNDEF;
    case T_SEQUENCE:
        return v.kind == TV_STR || (v.kind == TV_LIST && !v.u.list->generator) || v.kind == TV_DICT ||
               v.kind == TV_UNDEF;
    case T_NUMBER: return v.kind == TV_INT || v.kind == TV_FLOAT || v.kind == TV_BOOL;
    case T_INTEGER: return v.kind == TV_INT;
    case T_FLOAT: return v.kind == TV_FLOAT;
    case T_BOOLEAN: return v.kind == TV_BOOL;
    case T_TRUE: return v.kind == TV_BOOL && v.u.b;
    case T_FALSE: return v.kind == TV_BOOL && !v.u.b;
    case T_ODD:
    case T_EVEN:
        if (!need_int(r, pos, v, &i, tid == T_ODD ? "odd" : "even")) {
            double m = fmod(v.u.f, 2.0);
            if (m < 0) m += 2.0;
            return tid == T_ODD ? m == 1.0 : m == 0.0;
        }
        return tid == T_ODD ? (i % 2 != 0) : (i % 2 == 0);
    case T_DIVISIBLEBY:
        if (!x) tj_fail(r->c, pos, "test 'divisibleby' needs an argument");
        if (!need_int(r, pos, v, &i, "divisibleby") || !need_int(r, pos, *x, &j, "divisibleby"))
            tj_fail(r->c, pos, "unsupported Jinja feature 'divisibleby on floats'");
        if (j == 0) tj_fail(r->c, pos, "integer division or modulo by zero");
        return j == -1 || i % j == 0;
    case T_EQ: return x && tj_equal(r, v, *x);
    case T_NE: return !(x && tj_equal(r, v, *x));
    case T_LT:
    case T_LE:
    case T_GT:
    case T_GE:
        if (!x) tj_fail(r->c, pos, "comparison tests need an argument");
        tj_require_defined(r, pos, v);
        tj_require_defined(r, pos, *x);
        return tj_less(r, pos, tid == T_LT ? "<" : tid == T_LE ? "<=" : tid == T_GT ? ">" : ">=", v, *x);
    case T_IN:
        if (!x) tj_fail(r->c, pos, "test 'in' needs an argument");
        return tj_contains(r, pos, v, *x);
    case T_CALLABLE: return v.kind == TV_FUNC || v.kind == TV_METHOD;
    case T_SAMEAS:
        if (!x) tj_fail(r->c, pos, "test 'sameas' needs an argument");
        if (v.kind != x->kind) return false;
        if (v.kind == TV_NONE || v.kind == TV_UNDEF) return v.kind == TV_NONE || v.u.s.p == x->u.s.p;
        if (v.kind == TV_BOOL) return v.u.b == x->u.b;
        if (v.kind == TV_LIST) return v.u.list == x->u.list;
        if (v.kind == TV_DICT || v.kind == TV_NS) return v.u.dict == x->u.dict;
        return false;
    case T_LOWER: return tj_is_case(r, tj_str_of(r, pos, v), false);
    case T_UPPER: return tj_is_case(r, tj_str_of(r, pos, v), true);
    }
    tj_fail(r->c, pos, "internal error: unknown test");
}
