/* value_str.c — turning values into text the way CPython does: str() (what {{ x }} prints), repr() (how lists and
 * dicts print their items), the shortest round-trip float repr, and json.dumps as transformers' tojson filter
 * calls it (ensure_ascii=False, keys in insertion order unless sort_keys). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat/jinja.h"

#define TJ_MAX_VALUE_DEPTH 256

static void enter(tj_rt *r, size_t pos) {
    if (++r->vdepth > TJ_MAX_VALUE_DEPTH)
        tj_fail(r->c, pos, "a value nested more than %d levels deep (the limit)", TJ_MAX_VALUE_DEPTH);
}

void tj_float_repr(tj_ctx *c, tj_buf *b, double f) {
    if (isnan(f)) {
        tj_buf_put(c, b, "nan", 3);
        return;
    }
    if (isinf(f)) {
        tj_buf_put(c, b, f < 0 ? "-inf" : "inf", f < 0 ? 4 : 3);
        return;
    }
    char tmp[64];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    /* tmp = [-]d[.ddd]e[+-]xx */
    const char *s = tmp;
    bool neg = *s == '-';
    if (neg) s++;
    char digits[32];
    size_t nd = 0;
    for (; *s && *s != 'e'; s++)
        if (*s != '.') digits[nd++] = *s;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    int e = atoi(s + 1);
    if (neg) tj_buf_putc(c, b, '-');
    if (e >= -5 + 1 && e < 16) { /* Python: fixed notation when -4 <= exponent < 16 */
        int decpt = e + 1;
        if (decpt <= 0) {
            tj_buf_put(c, b, "0.", 2);
            for (int k = 0; k < -decpt; k++) tj_buf_putc(c, b, '0');
            tj_buf_put(c, b, digits, nd);
        } else if ((size_t)decpt >= nd) {
            tj_buf_put(c, b, digits, nd);
            for (size_t k = nd; k < (size_t)decpt; k++) tj_buf_putc(c, b, '0');
            tj_buf_put(c, b, ".0", 2);
        } else {
            tj_buf_put(c, b, digits, (size_t)decpt);
            tj_buf_putc(c, b, '.');
            tj_buf_put(c, b, digits + decpt, nd - (size_t)decpt);
        }
        return;
    }
    tj_buf_putc(c, b, digits[0]);
    if (nd > 1) {
        tj_buf_putc(c, b, '.');
        tj_buf_put(c, b, digits + 1, nd - 1);
    }
    tj_buf_printf(c, b, "e%c%02d", e < 0 ? '-' : '+', e < 0 ? -e : e);
}

/* Whether Python's str.isprintable() holds for cp (approximated: controls, separators other than the space, and
 * the common format characters are not printable). */
static bool py_printable(uint32_t cp) {
    if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD) return false;
    if (cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) || (cp >= 0x2028 && cp <= 0x202F) ||
        (cp >= 0x205F && cp <= 0x2064) || cp == 0x3000 || cp == 0xFEFF || (cp >= 0xE000 && cp <= 0xF8FF) ||
        (cp >= 0xFFF9 && cp <= 0xFFFB))
        return false;
    return true;
}

static void repr_str(tj_rt *r, tj_buf *b, const char *s, size_t n) {
    tj_charge(r, TJ_NOPOS, TJ_DECODE_UNITS(n));
    bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    tj_buf_putc(r->c, b, q);
    size_t i = 0;
    while (i < n) {
        size_t start = i;
        uint32_t cp = tj_utf8_next(s, n, &i);
        if (cp == (uint32_t)q || cp == '\\') {
            tj_buf_putc(r->c, b, '\\');
            tj_buf_putc(r->c, b, (char)cp);
        } else if (cp == '\n') {
            tj_buf_put(r->c, b, "\\n", 2);
        } else if (cp == '\r') {
            tj_buf_put(r->c, b, "\\r", 2);
        } else if (cp == '\t') {
            tj_buf_put(r->c, b, "\\t", 2);
        } else if (!py_printable(cp)) {
            tj_buf_printf(r->c, b, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x", (unsigned)cp);
        } else {
            tj_buf_put(r->c, b, s + start, i - start);
        }
    }
    tj_buf_putc(r->c, b, q);
}

static void put_container(tj_rt *r, size_t pos, tj_buf *b, tj_value v) {
    enter(r, pos);
    if (v.kind == TV_LIST) {
        const tj_list *l = v.u.list;
        tj_charge(r, pos, l->n);
        tj_buf_putc(r->c, b, l->tuple ? '(' : '[');
        for (size_t k = 0; k < l->n; k++) {
            if (k) tj_buf_put(r->c, b, ", ", 2);
            tj_repr(r, pos, b, l->v[k]);
        }
        if (l->tuple && l->n == 1) tj_buf_putc(r->c, b, ',');
        tj_buf_putc(r->c, b, l->tuple ? ')' : ']');
    } else {
        const tj_dict *d = v.u.dict;
        tj_charge(r, pos, d->n);
        tj_buf_putc(r->c, b, '{');
        for (size_t k = 0; k < d->n; k++) {
            if (k) tj_buf_put(r->c, b, ", ", 2);
            tj_repr(r, pos, b, d->k[k]);
            tj_buf_put(r->c, b, ": ", 2);
            tj_repr(r, pos, b, d->v[k]);
        }
        tj_buf_putc(r->c, b, '}');
    }
    r->vdepth--;
}

static _Noreturn void unprintable(tj_rt *r, size_t pos, tj_value v) {
    tj_fail(r->c, pos, "cannot print a %s value (Python would print its address)", tj_type_name(v));
}

void tj_repr(tj_rt *r, size_t pos, tj_buf *b, tj_value v) {
    switch (v.kind) {
    case TV_STR: repr_str(r, b, v.u.s.p, v.u.s.n); return;
    case TV_UNDEF: tj_buf_put(r->c, b, "Undefined", 9); return;
    case TV_LIST:
        if (v.u.list->generator) unprintable(r, pos, v);
        put_container(r, pos, b, v);
        return;
    case TV_DICT: put_container(r, pos, b, v); return;
    default: tj_to_str(r, pos, b, v);
    }
}

void tj_to_str(tj_rt *r, size_t pos, tj_buf *b, tj_value v) {
    switch (v.kind) {
    case TV_UNDEF: return;
    case TV_NONE: tj_buf_put(r->c, b, "None", 4); return;
    case TV_BOOL: tj_buf_put(r->c, b, v.u.b ? "True" : "False", v.u.b ? 4 : 5); return;
    case TV_INT: tj_buf_printf(r->c, b, "%lld", (long long)v.u.i); return;
    case TV_FLOAT: tj_float_repr(r->c, b, v.u.f); return;
    case TV_STR:
        tj_charge(r, pos, v.u.s.n / 64);
        tj_buf_put(r->c, b, v.u.s.p, v.u.s.n);
        return;
    case TV_LIST:
        if (v.u.list->generator) unprintable(r, pos, v);
        put_container(r, pos, b, v);
        return;
    case TV_DICT: put_container(r, pos, b, v); return;
    default: unprintable(r, pos, v);
    }
}

tj_value tj_str_of(tj_rt *r, size_t pos, tj_value v) {
    if (v.kind == TV_STR) return v;
    tj_buf b = {0};
    tj_to_str(r, pos, &b, v);
    return tj_str(b.p ? b.p : "", b.n);
}

static void json_str(tj_rt *r, tj_buf *b, const char *s, size_t n) {
    tj_charge(r, TJ_NOPOS, TJ_DECODE_UNITS(n));
    tj_buf_putc(r->c, b, '"');
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && (unsigned char)s[j] >= 0x20 && s[j] != '"' && s[j] != '\\') j++;
        tj_buf_put(r->c, b, s + i, j - i);
        if (j == n) break;
        unsigned char ch = (unsigned char)s[j];
        switch (ch) {
        case '"': tj_buf_put(r->c, b, "\\\"", 2); break;
        case '\\': tj_buf_put(r->c, b, "\\\\", 2); break;
        case '\n': tj_buf_put(r->c, b, "\\n", 2); break;
        case '\r': tj_buf_put(r->c, b, "\\r", 2); break;
        case '\t': tj_buf_put(r->c, b, "\\t", 2); break;
        case '\b': tj_buf_put(r->c, b, "\\b", 2); break;
        case '\f': tj_buf_put(r->c, b, "\\f", 2); break;
        default: tj_buf_printf(r->c, b, "\\u%04x", ch);
        }
        i = j + 1;
    }
    tj_buf_putc(r->c, b, '"');
}

typedef struct {
    int indent;
    const char *item_sep, *key_sep;
    bool sort_keys;
} json_opts;

static void newline_indent(tj_rt *r, tj_buf *b, const json_opts *o, int level) {
    tj_buf_putc(r->c, b, '\n');
    for (int k = 0; k < o->indent * level; k++) tj_buf_putc(r->c, b, ' ');
}

static void json_value(tj_rt *r, size_t pos, tj_buf *b, tj_value v, const json_opts *o, int level);

static void json_key(tj_rt *r, size_t pos, tj_buf *b, tj_value k) {
    switch (k.kind) {
    case TV_STR: json_str(r, b, k.u.s.p, k.u.s.n); return;
    case TV_BOOL: tj_buf_put(r->c, b, k.u.b ? "\"true\"" : "\"false\"", k.u.b ? 6 : 7); return;
    case TV_NONE: tj_buf_put(r->c, b, "\"null\"", 6); return;
    case TV_INT:
    case TV_FLOAT: {
        tj_buf t = {0};
        if (k.kind == TV_INT) tj_buf_printf(r->c, &t, "%lld", (long long)k.u.i);
        else if (isnan(k.u.f)) tj_buf_put(r->c, &t, "NaN", 3);
        else if (isinf(k.u.f)) tj_buf_put(r->c, &t, k.u.f < 0 ? "-Infinity" : "Infinity", k.u.f < 0 ? 9 : 8);
        else tj_float_repr(r->c, &t, k.u.f);
        json_str(r, b, t.p, t.n);
        return;
    }
    default:
        tj_fail(r->c, pos, "tojson: keys must be str, int, float, bool or None, not %s", tj_type_name(k));
    }
}

static int cmp_str_keys(const void *a, const void *b) {
    const tj_value *x = *(const tj_value *const *)a, *y = *(const tj_value *const *)b;
    size_t n = x->u.s.n < y->u.s.n ? x->u.s.n : y->u.s.n;
    int c = n ? memcmp(x->u.s.p, y->u.s.p, n) : 0;
    if (c) return c;
    return x->u.s.n < y->u.s.n ? -1 : x->u.s.n > y->u.s.n;
}

/* Before item k of a list or dict at `level`: the separator after the previous item, then with an indent a new
 * line indented one level deeper (also before the first item). */
static void json_item_start(tj_rt *r, tj_buf *b, const json_opts *o, int level, size_t k) {
    if (k) tj_buf_put(r->c, b, o->item_sep, strlen(o->item_sep));
    if (o->indent >= 0) newline_indent(r, b, o, level + 1);
}

static void json_dict(tj_rt *r, size_t pos, tj_buf *b, const tj_dict *d, const json_opts *o, int level) {
    if (d->n == 0) {
        tj_buf_put(r->c, b, "{}", 2);
        return;
    }
    tj_charge(r, pos, d->n);
    size_t *order = tj_alloc_array(r->c, d->n, sizeof *order);
    for (size_t k = 0; k < d->n; k++) order[k] = k;
    if (o->sort_keys) {
        const tj_value **keys = tj_alloc_array(r->c, d->n, sizeof *keys);
        for (size_t k = 0; k < d->n; k++) {
            if (d->k[k].kind != TV_STR) tj_fail(r->c, pos, "tojson: sort_keys needs string keys");
            keys[k] = &d->k[k];
        }
        qsort(keys, d->n, sizeof *keys, cmp_str_keys);
        for (size_t k = 0; k < d->n; k++) order[k] = (size_t)(keys[k] - d->k);
    }
    tj_buf_putc(r->c, b, '{');
    for (size_t k = 0; k < d->n; k++) {
        json_item_start(r, b, o, level, k);
        json_key(r, pos, b, d->k[order[k]]);
        tj_buf_put(r->c, b, o->key_sep, strlen(o->key_sep));
        json_value(r, pos, b, d->v[order[k]], o, level + 1);
    }
    if (o->indent >= 0) newline_indent(r, b, o, level);
    tj_buf_putc(r->c, b, '}');
}

static void json_value(tj_rt *r, size_t pos, tj_buf *b, tj_value v, const json_opts *o, int level) {
    switch (v.kind) {
    case TV_NONE: tj_buf_put(r->c, b, "null", 4); return;
    case TV_BOOL: tj_buf_put(r->c, b, v.u.b ? "true" : "false", v.u.b ? 4 : 5); return;
    case TV_INT: tj_buf_printf(r->c, b, "%lld", (long long)v.u.i); return;
    case TV_FLOAT:
        if (isnan(v.u.f)) tj_buf_put(r->c, b, "NaN", 3);
        else if (isinf(v.u.f)) tj_buf_put(r->c, b, v.u.f < 0 ? "-Infinity" : "Infinity", v.u.f < 0 ? 9 : 8);
        else tj_float_repr(r->c, b, v.u.f);
        return;
    case TV_STR: json_str(r, b, v.u.s.p, v.u.s.n); return;
    case TV_LIST:
        if (!v.u.list->generator) {
            const tj_list *l = v.u.list;
            if (l->n == 0) {
                tj_buf_put(r->c, b, "[]", 2);
                return;
            }
            enter(r, pos);
            tj_charge(r, pos, l->n);
            tj_buf_putc(r->c, b, '[');
            for (size_t k = 0; k < l->n; k++) {
                json_item_start(r, b, o, level, k);
                json_value(r, pos, b, l->v[k], o, level + 1);
            }
            if (o->indent >= 0) newline_indent(r, b, o, level);
            tj_buf_putc(r->c, b, ']');
            r->vdepth--;
            return;
        }
        break;
    case TV_DICT:
        enter(r, pos);
        json_dict(r, pos, b, v.u.dict, o, level);
        r->vdepth--;
        return;
    default: break;
    }
    tj_fail(r->c, pos, "tojson: object of type %s is not JSON serializable", tj_type_name(v));
}

void tj_tojson(tj_rt *r, size_t pos, tj_buf *b, tj_value v, int indent, const char *item_sep, const char *key_sep,
               bool sort_keys) {
    if (indent > 64) tj_fail(r->c, pos, "tojson: indent %d is more than 64", indent);
    json_opts o = {.indent = indent,
                   .item_sep = item_sep ? item_sep : indent >= 0 ? "," : ", ",
                   .key_sep = key_sep ? key_sep : ": ",
                   .sort_keys = sort_keys};
    json_value(r, pos, b, v, &o, 0);
}
