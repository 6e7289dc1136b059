/* access.c — reaching into values with the sandboxed environment's rules: obj.name (a method or attribute first,
 * then the item), obj[key] (the item first, then the attribute; a missing one is undefined, not an error), Python
 * slicing, iteration, and the conversion of the JSON variables (messages, tools, ...) into values. */
#include <jansson.h>
#include <string.h>

#include "chat/jinja.h"

static _Noreturn void undefined_use(tj_rt *r, size_t pos, tj_value obj, const char *what, const char *name,
                                    size_t n) {
    if (obj.u.s.p)
        tj_fail(r->c, pos, "%.*s (looking up %s '%.*s' of it)", (int)(obj.u.s.n > 120 ? 120 : obj.u.s.n), obj.u.s.p,
                what, (int)(n > 80 ? 80 : n), name);
    tj_fail(r->c, pos, "undefined value has no %s '%.*s'", what, (int)(n > 80 ? 80 : n), name);
}

/* An undefined value named after the missing attribute, for later messages. */
static tj_value missing(tj_rt *r, tj_value obj, const char *name, size_t n) {
    tj_buf b = {0};
    tj_buf_printf(r->c, &b, "'%s object' has no attribute '", tj_type_name(obj));
    tj_buf_put(r->c, &b, name, n > 80 ? 80 : n);
    tj_buf_put(r->c, &b, "'", 2); /* with the NUL */
    return tj_undef(b.p);
}

static tj_value loop_attr(tj_rt *r, size_t pos, const tj_loop *l, const char *name, size_t n, bool *found) {
    *found = true;
#define IS(lit) (n == sizeof lit - 1 && memcmp(name, lit, n) == 0)
    if (IS("index")) return tj_int((int64_t)l->index0 + 1);
    if (IS("index0")) return tj_int((int64_t)l->index0);
    if (IS("revindex")) return tj_int((int64_t)(l->length - l->index0));
    if (IS("revindex0")) return tj_int((int64_t)(l->length - l->index0 - 1));
    if (IS("first")) return tj_bool(l->index0 == 0);
    if (IS("last")) return tj_bool(l->index0 + 1 == l->length);
    if (IS("length")) return tj_int((int64_t)l->length);
    if (IS("depth")) return tj_int(1);
    if (IS("depth0")) return tj_int(0);
    if (IS("previtem")) return l->index0 > 0 ? l->items[l->index0 - 1] : tj_undef("there is no previous item");
    if (IS("nextitem"))
        return l->index0 + 1 < l->length ? l->items[l->index0 + 1] : tj_undef("there is no next item");
    if (IS("changed")) tj_fail(r->c, pos, "unsupported Jinja feature 'loop.changed'");
#undef IS
    *found = false;
    return tj_undef(NULL);
}

tj_value tj_getattr(tj_rt *r, size_t pos, tj_value obj, const char *name, size_t n) {
    tj_value out;
    if (obj.kind == TV_UNDEF) undefined_use(r, pos, obj, "attribute", name, n);
    if (n > 0 && name[0] == '_') return tj_undef("access to a private attribute is not allowed in the sandbox");
    if (tj_method_lookup(r, obj, name, n, &out)) return out;
    if (obj.kind == TV_DICT || obj.kind == TV_NS) {
        tj_charge(r, pos, obj.u.dict->n); /* a linear scan: one unit per key compared */
        tj_value *v = tj_dict_get_str(obj.u.dict, name, n);
        return v ? *v : missing(r, obj, name, n);
    }
    if (obj.kind == TV_LOOP) {
        bool found;
        out = loop_attr(r, pos, obj.u.loop, name, n, &found);
        if (found) return out;
    }
    return missing(r, obj, name, n);
}

static bool as_index(tj_value k, int64_t *i) {
    if (k.kind == TV_INT) *i = k.u.i;
    else if (k.kind == TV_BOOL) *i = k.u.b;
    else return false;
    return true;
}

tj_value tj_getitem(tj_rt *r, size_t pos, tj_value obj, tj_value key) {
    int64_t i;
    if (obj.kind == TV_UNDEF) {
        tj_buf b = {0};
        tj_to_str(r, pos, &b, key.kind == TV_STR || key.kind == TV_INT ? key : tj_cstr("?"));
        undefined_use(r, pos, obj, "item", b.p ? b.p : "", b.n);
    }
    if (obj.kind == TV_DICT) {
        if (key.kind == TV_LIST && !key.u.list->tuple) return tj_undef("unhashable type: 'list'");
        if (key.kind == TV_DICT) return tj_undef("unhashable type: 'dict'");
        tj_value *v = tj_dict_get(r, obj.u.dict, key);
        if (v) return *v;
    } else if (obj.kind == TV_LIST && !obj.u.list->generator && as_index(key, &i)) {
        int64_t len = (int64_t)obj.u.list->n;
        if (i < 0) i += len;
        if (i >= 0 && i < len) return obj.u.list->v[i];
        return tj_undef("list index out of range");
    } else if (obj.kind == TV_STR && as_index(key, &i)) {
        tj_charge(r, pos, TJ_DECODE_UNITS(obj.u.s.n)); /* code points are counted from the start */
        int64_t len = (int64_t)tj_utf8_len(obj.u.s.p, obj.u.s.n);
        if (i < 0) i += len;
        if (i < 0 || i >= len) return tj_undef("string index out of range");
        size_t off = tj_utf8_offset(obj.u.s.p, obj.u.s.n, (size_t)i), end = off;
        tj_utf8_next(obj.u.s.p, obj.u.s.n, &end);
        return tj_str(obj.u.s.p + off, end - off);
    }
    if (key.kind == TV_STR) return tj_getattr(r, pos, obj, key.u.s.p, key.u.s.n);
    return tj_undef("no such item");
}

/* PySlice_AdjustIndices for one bound. */
static int64_t adjust(int64_t v, int64_t len, int64_t step) {
    if (v < 0) {
        v += len;
        if (v < 0) v = step < 0 ? -1 : 0;
    } else if (v >= len) {
        v = step < 0 ? len - 1 : len;
    }
    return v;
}

tj_value tj_slice(tj_rt *r, size_t pos, tj_value obj, const tj_value *start, const tj_value *stop,
                  const tj_value *step) {
    if (obj.kind == TV_UNDEF) undefined_use(r, pos, obj, "item", "slice", 5);
    int64_t st = 1, lo, hi;
    /* slices bypass jinja's getitem (compiler.visit_Getitem), so every problem is an error, as in Python */
    if (step && step->kind != TV_NONE && !as_index(*step, &st))
        tj_fail(r->c, pos, "slice indices must be integers or None");
    if (st == 0) tj_fail(r->c, pos, "slice step cannot be zero");
    if (st == INT64_MIN) st = -INT64_MAX;
    bool is_str = obj.kind == TV_STR;
    if (!is_str && !(obj.kind == TV_LIST && !obj.u.list->generator))
        tj_fail(r->c, pos, "'%s' object is not subscriptable with a slice", tj_type_name(obj));
    const char *s = is_str ? obj.u.s.p : NULL;
    size_t sn = is_str ? obj.u.s.n : 0;
    int64_t len = is_str ? (int64_t)tj_utf8_len(s, sn) : (int64_t)obj.u.list->n;
    if (start && start->kind != TV_NONE) {
        if (!as_index(*start, &lo)) tj_fail(r->c, pos, "slice indices must be integers or None");
        lo = adjust(lo, len, st);
    } else {
        lo = st < 0 ? len - 1 : 0;
    }
    if (stop && stop->kind != TV_NONE) {
        if (!as_index(*stop, &hi)) tj_fail(r->c, pos, "slice indices must be integers or None");
        hi = adjust(hi, len, st);
    } else {
        hi = st < 0 ? -1 : len;
    }
    int64_t count = 0;
    if (st > 0 && lo < hi) count = (hi - lo - 1) / st + 1;
    else if (st < 0 && lo > hi) count = (lo - hi - 1) / (-st) + 1;
    tj_charge(r, pos, (uint64_t)count + (is_str ? TJ_DECODE_UNITS(sn) : 0)); /* the items, the bytes decoded */
    if (!is_str) {
        tj_list *l = tj_list_new(r->c, (size_t)count);
        l->tuple = obj.u.list->tuple;
        for (int64_t k = 0; k < count; k++) l->v[k] = obj.u.list->v[lo + k * st];
        return tj_list_value(l);
    }
    if (st == 1) {
        size_t a = tj_utf8_offset(s, sn, (size_t)lo);
        size_t b = a + tj_utf8_offset(s + a, sn - a, (size_t)count);
        return tj_str(s + a, b - a);
    }
    size_t *off = tj_alloc_array(r->c, (size_t)len + 1, sizeof *off);
    size_t i = 0;
    for (int64_t k = 0; k < len; k++) {
        off[k] = i;
        tj_utf8_next(s, sn, &i);
    }
    off[len] = sn;
    tj_buf b = {0};
    for (int64_t k = 0; k < count; k++) {
        int64_t idx = lo + k * st;
        tj_buf_put(r->c, &b, s + off[idx], off[idx + 1] - off[idx]);
    }
    return tj_str(b.p ? b.p : "", b.n);
}

tj_list *tj_iterate(tj_rt *r, size_t pos, tj_value v) {
    switch (v.kind) {
    case TV_LIST: return v.u.list;
    case TV_UNDEF: return tj_list_new(r->c, 0);
    case TV_DICT: {
        tj_list *l = tj_list_new(r->c, v.u.dict->n);
        memcpy(l->v, v.u.dict->k, v.u.dict->n * sizeof *l->v);
        tj_charge(r, pos, l->n);
        return l;
    }
    case TV_STR: {
        size_t n = tj_utf8_len(v.u.s.p, v.u.s.n), i = 0;
        tj_list *l = tj_list_new(r->c, n);
        tj_charge(r, pos, n);
        for (size_t k = 0; k < n; k++) {
            size_t start = i;
            tj_utf8_next(v.u.s.p, v.u.s.n, &i);
            l->v[k] = tj_str(v.u.s.p + start, i - start);
        }
        return l;
    }
    default: tj_fail(r->c, pos, "'%s' object is not iterable", tj_type_name(v));
    }
}

tj_value tj_from_json(tj_rt *r, const void *json) {
    const json_t *j = json;
    switch (json_typeof(j)) {
    case JSON_NULL: return tj_none();
    case JSON_TRUE: return tj_bool(true);
    case JSON_FALSE: return tj_bool(false);
    case JSON_INTEGER: return tj_int((int64_t)json_integer_value(j));
    case JSON_REAL: return tj_float(json_real_value(j));
    case JSON_STRING: {
        size_t n = json_string_length(j), bad;
        const char *s = json_string_value(j);
        if (!tj_utf8_valid(s, n, &bad)) tj_fail(r->c, TJ_NOPOS, "a variable's string is not valid UTF-8");
        return tj_str(tj_strdup(r->c, s, n), n);
    }
    case JSON_ARRAY: {
        if (++r->vdepth > 256) tj_fail(r->c, TJ_NOPOS, "the variables are nested more than 256 levels deep");
        size_t n = json_array_size(j);
        tj_list *l = tj_list_new(r->c, n);
        tj_charge(r, TJ_NOPOS, n);
        for (size_t k = 0; k < n; k++) l->v[k] = tj_from_json(r, json_array_get(j, k));
        r->vdepth--;
        return tj_list_value(l);
    }
    case JSON_OBJECT: {
        if (++r->vdepth > 256) tj_fail(r->c, TJ_NOPOS, "the variables are nested more than 256 levels deep");
        tj_dict *d = tj_dict_new(r->c, json_object_size(j));
        const char *key;
        json_t *val;
        tj_charge(r, TJ_NOPOS, json_object_size(j));
        json_object_foreach((json_t *)j, key, val) {
            size_t kn = strlen(key);
            /* keys are distinct in a jansson object, so append without a lookup */
            d->k[d->n] = tj_str(tj_strdup(r->c, key, kn), kn);
            d->v[d->n] = tj_from_json(r, val);
            d->n++;
        }
        r->vdepth--;
        tj_value v = {.kind = TV_DICT};
        v.u.dict = d;
        return v;
    }
    }
    return tj_none();
}
