/* methods.c — what templates call: the globals (namespace, range, dict, raise_exception, strftime_now) and the
 * Python methods real chat templates use on strings (strip, split, startswith, ...), dicts (items, keys, values,
 * get) and the loop (cycle). Methods that would change a value fail, as in the immutable sandbox. */
#define _GNU_SOURCE /* memmem, gmtime_r, localtime_r */
#define _DARWIN_C_SOURCE /* the same on macOS, whose headers hide them once _POSIX_C_SOURCE is set */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "chat/jinja.h"

enum {
    G_NAMESPACE = 1, G_RANGE, G_DICT, G_RAISE, G_STRFTIME, G_UNSUPPORTED,
    M_STRIP = 100, M_LSTRIP, M_RSTRIP, M_STARTSWITH, M_ENDSWITH, M_SPLIT, M_UPPER, M_LOWER, M_TITLE, M_CAPITALIZE,
    M_REPLACE, M_FIND, M_COUNT, M_JOIN, M_SPLITLINES, M_ITEMS, M_KEYS, M_VALUES, M_GET, M_COPY, M_CYCLE,
    M_FORBIDDEN
};

typedef struct {
    const char *name;
    int id;
} named;

static int find_id(const named *t, const char *name, size_t n) {
    for (; t->name; t++)
        if (strlen(t->name) == n && memcmp(t->name, name, n) == 0) return t->id;
    return 0;
}

static const named GLOBALS[] = {{"namespace", G_NAMESPACE}, {"range", G_RANGE}, {"dict", G_DICT},
                                {"raise_exception", G_RAISE}, {"strftime_now", G_STRFTIME},
                                {"cycler", G_UNSUPPORTED}, {"joiner", G_UNSUPPORTED}, {"lipsum", G_UNSUPPORTED},
                                {NULL, 0}};
static const named STR_METHODS[] = {
    {"strip", M_STRIP}, {"lstrip", M_LSTRIP}, {"rstrip", M_RSTRIP}, {"startswith", M_STARTSWITH},
    {"endswith", M_ENDSWITH}, {"split", M_SPLIT}, {"upper", M_UPPER}, {"lower", M_LOWER}, {"title", M_TITLE},
    {"capitalize", M_CAPITALIZE}, {"replace", M_REPLACE}, {"find", M_FIND}, {"count", M_COUNT},
    {"join", M_JOIN}, {"splitlines", M_SPLITLINES}, {NULL, 0}};
static const named DICT_METHODS[] = {
    {"items", M_ITEMS}, {"keys", M_KEYS}, {"values", M_VALUES}, {"get", M_GET}, {"copy", M_COPY},
    {"pop", M_FORBIDDEN}, {"popitem", M_FORBIDDEN}, {"setdefault", M_FORBIDDEN}, {"update", M_FORBIDDEN},
    {"clear", M_FORBIDDEN}, {NULL, 0}};
static const named LIST_METHODS[] = {
    {"count", M_COUNT}, {"copy", M_COPY}, {"append", M_FORBIDDEN}, {"extend", M_FORBIDDEN},
    {"insert", M_FORBIDDEN}, {"pop", M_FORBIDDEN}, {"remove", M_FORBIDDEN}, {"reverse", M_FORBIDDEN},
    {"sort", M_FORBIDDEN}, {"clear", M_FORBIDDEN}, {NULL, 0}};

bool tj_global_lookup(const char *name, size_t n, tj_value *out) {
    int id = find_id(GLOBALS, name, n);
    if (!id) return false;
    *out = (tj_value){.kind = TV_FUNC};
    out->u.fn.id = id;
    return true;
}

bool tj_method_lookup(tj_rt *r, tj_value self, const char *name, size_t n, tj_value *out) {
    int id = 0;
    if (self.kind == TV_STR) id = find_id(STR_METHODS, name, n);
    else if (self.kind == TV_DICT) id = find_id(DICT_METHODS, name, n);
    else if (self.kind == TV_LIST && !self.u.list->generator) id = find_id(LIST_METHODS, name, n);
    else if (self.kind == TV_LOOP && n == 5 && memcmp(name, "cycle", 5) == 0) id = M_CYCLE;
    if (!id) return false;
    tj_value *copy = tj_alloc(r->c, sizeof *copy);
    *copy = self;
    *out = (tj_value){.kind = TV_METHOD};
    out->u.fn.id = id;
    out->u.fn.self = copy;
    return true;
}

const tj_value *tj_kwarg_get(const tj_args *args, const char *name) {
    for (size_t k = 0; k < args->n_kw; k++)
        if (strlen(name) == args->kw_nodes[k].n && memcmp(args->kw_nodes[k].name, name, args->kw_nodes[k].n) == 0)
            return &args->kw[k];
    return NULL;
}

void tj_args_check(tj_rt *r, size_t pos, const tj_args *args, const char *what, size_t max_pos, const char *kws) {
    if (args->n_pos > max_pos)
        tj_fail(r->c, pos, "%s takes at most %zu positional argument%s (%zu given)", what, max_pos,
                max_pos == 1 ? "" : "s", args->n_pos);
    for (size_t k = 0; k < args->n_kw; k++) {
        const tj_kwarg *kw = &args->kw_nodes[k];
        bool ok = false;
        for (const char *p = kws; p && *p;) {
            const char *e = strchr(p, ',');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            if (len == kw->n && memcmp(p, kw->name, len) == 0) ok = true;
            p = e ? e + 1 : p + len;
        }
        if (!ok) tj_fail(r->c, pos, "%s got an unexpected keyword argument '%s'", what, kw->name);
    }
}

/* Positional argument i, else keyword `name`, else NULL. */
static const tj_value *arg(const tj_args *a, size_t i, const char *name) {
    if (i < a->n_pos) return &a->pos[i];
    return name ? tj_kwarg_get(a, name) : NULL;
}

static tj_value need_str(tj_rt *r, size_t pos, const tj_value *v, const char *what) {
    if (!v || v->kind != TV_STR)
        tj_fail(r->c, pos, "%s needs a string argument, not %s", what, v ? tj_type_name(*v) : "nothing");
    return *v;
}

/* Whether cp is one of the code points of set, decoding the whole set (tj_utf8_next's reading of its bytes). */
static bool in_set(uint32_t cp, tj_value set) {
    size_t i = 0;
    while (i < set.u.s.n)
        if (tj_utf8_next(set.u.s.p, set.u.s.n, &i) == cp) return true;
    return false;
}

/* cp's shortest UTF-8 (cp < 0x110000 or any value tj_utf8_next gives); returns its length. */
static size_t utf8_put(uint32_t cp, char *t) {
    if (cp < 0x80) return t[0] = (char)cp, 1;
    if (cp < 0x800) return t[0] = (char)(0xC0 | cp >> 6), t[1] = (char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000)
        return t[0] = (char)(0xE0 | cp >> 12), t[1] = (char)(0x80 | (cp >> 6 & 0x3F)), t[2] = (char)(0x80 | (cp & 0x3F)),
               3;
    t[0] = (char)(0xF0 | (cp >> 18 & 0x07));
    t[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    t[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    t[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A strip set read once: its ASCII members as a bitmap; whether it has others, and whether its bytes are the
 * shortest UTF-8 of its code points (then a code point is in it exactly when its UTF-8 is found in its bytes: such
 * text resynchronises at every lead byte). */
typedef struct {
    tj_value set;
    uint64_t ascii[2];
    bool other, canonical;
} strip_set;

static strip_set read_set(tj_rt *r, size_t pos, tj_value set) {
    strip_set ss = {set, {0, 0}, false, true};
    tj_charge(r, pos, set.u.s.n / 4 + 1); /* decoded once, a few bytes a unit */
    for (size_t i = 0; i < set.u.s.n;) {
        const unsigned char b = (unsigned char)set.u.s.p[i];
        if (b < 0x80) { /* ASCII, the usual set: one bit */
            ss.ascii[b >> 6] |= (uint64_t)1 << (b & 63);
            i++;
            continue;
        }
        const size_t at = i;
        const uint32_t cp = tj_utf8_next(set.u.s.p, set.u.s.n, &i);
        char t[4];
        if (utf8_put(cp, t) != i - at || memcmp(t, set.u.s.p + at, i - at) != 0) ss.canonical = false;
        if (cp < 0x80) ss.ascii[cp >> 6] |= (uint64_t)1 << (cp & 63);
        else ss.other = true;
    }
    return ss;
}

/* Whether cp is in the set, charged by what the look takes: one unit for ASCII, a search of the set's bytes (bytes / 64
 * + 1) for others, a decoding of the whole set (bytes / 4 + 1) when its bytes are not canonical UTF-8. */
static bool strip_member(tj_rt *r, size_t pos, const strip_set *ss, uint32_t cp) {
    if (cp < 0x80) {
        tj_charge(r, pos, 1);
        return (ss->ascii[cp >> 6] >> (cp & 63)) & 1;
    }
    if (!ss->other) {
        tj_charge(r, pos, 1);
        return false;
    }
    if (!ss->canonical) {
        tj_charge(r, pos, ss->set.u.s.n / 4 + 1);
        return in_set(cp, ss->set);
    }
    tj_charge(r, pos, ss->set.u.s.n / 64 + 1);
    char t[4];
    return memmem(ss->set.u.s.p, ss->set.u.s.n, t, utf8_put(cp, t)) != NULL;
}

/* str.strip / lstrip / rstrip: with a set, the set is read once (its bytes / 4) and each code point looked at is
 * charged by strip_member; whitespace one unit per 64 bytes stripped. */
static tj_value do_strip(tj_rt *r, size_t pos, tj_value s, const tj_value *chars, bool left, bool right) {
    const char *p = s.u.s.p;
    size_t n = s.u.s.n;
    if (chars && chars->kind != TV_NONE && chars->kind != TV_STR)
        tj_fail(r->c, pos, "strip arg must be None or str, not %s", tj_type_name(*chars));
    if (!chars || chars->kind == TV_NONE) {
        if (left) {
            size_t k = tj_ws_prefix(p, n);
            p += k;
            n -= k;
        }
        if (right) n -= tj_ws_suffix(p, n);
        tj_charge(r, pos, (s.u.s.n - n) / 64);
        return tj_str(p, n);
    }
    const strip_set ss = read_set(r, pos, *chars);
    if (left)
        while (n > 0) {
            size_t i = 0;
            uint32_t cp = tj_utf8_next(p, n, &i);
            if (!strip_member(r, pos, &ss, cp)) break;
            p += i;
            n -= i;
        }
    if (right)
        while (n > 0) {
            size_t start = n - 1;
            while (start > 0 && ((unsigned char)p[start] & 0xC0) == 0x80) start--;
            size_t i = start;
            uint32_t cp = tj_utf8_next(p, n, &i);
            if (!strip_member(r, pos, &ss, cp)) break;
            n = start;
        }
    return tj_str(p, n);
}

tj_value tj_strip(tj_rt *r, size_t pos, tj_value s, const tj_value *chars) {
    return do_strip(r, pos, s, chars, true, true);
}

static tj_value do_split(tj_rt *r, size_t pos, tj_value s, const tj_value *sep, const tj_value *maxsplit) {
    int64_t max = -1;
    if (maxsplit && maxsplit->kind != TV_INT)
        tj_fail(r->c, pos, "'%s' object cannot be interpreted as an integer", tj_type_name(*maxsplit));
    if (maxsplit) max = maxsplit->u.i;
    tj_buf parts = {0};
    size_t count = 0;
    const char *p = s.u.s.p;
    size_t n = s.u.s.n, i = 0;
    tj_charge(r, pos, n / 64 + 1);
#define PUSH(ptr, len) \
    do { \
        tj_value v_ = tj_str((ptr), (len)); \
        tj_buf_put(r->c, &parts, (const char *)&v_, sizeof v_); \
        count++; \
    } while (0)
    if (!sep || sep->kind == TV_NONE) {
        for (;;) {
            i += tj_ws_prefix(p + i, n - i);
            if (i >= n) break;
            if (max >= 0 && (int64_t)count >= max) {
                PUSH(p + i, n - i - tj_ws_suffix(p + i, n - i));
                break;
            }
            size_t j = i;
            while (j < n) {
                size_t k = j;
                if (tj_py_isspace(tj_utf8_next(p, n, &k))) break;
                j = k;
            }
            PUSH(p + i, j - i);
            i = j;
        }
    } else {
        tj_value sp = need_str(r, pos, sep, "split()");
        if (sp.u.s.n == 0) tj_fail(r->c, pos, "split(): empty separator");
        for (;;) {
            const char *hit = max >= 0 && (int64_t)count >= max ? NULL : memmem(p + i, n - i, sp.u.s.p, sp.u.s.n);
            if (!hit) {
                PUSH(p + i, n - i);
                break;
            }
            PUSH(p + i, (size_t)(hit - (p + i)));
            i = (size_t)(hit - p) + sp.u.s.n;
        }
    }
#undef PUSH
    tj_list *l = tj_list_new(r->c, count);
    if (count) memcpy(l->v, parts.p, count * sizeof *l->v);
    return tj_list_value(l);
}

tj_value tj_replace(tj_rt *r, size_t pos, tj_value s, tj_value old, tj_value new_, int64_t count) {
    tj_buf b = {0};
    const char *p = s.u.s.p;
    size_t n = s.u.s.n, i = 0;
    int64_t done = 0;
    tj_charge(r, pos, n / 64 + 1);
    if (old.u.s.n == 0) { /* Python inserts `new` before every character and at the end */
        while (i <= n) {
            if (count < 0 || done < count) {
                tj_buf_put(r->c, &b, new_.u.s.p, new_.u.s.n);
                done++;
                tj_charge(r, pos, new_.u.s.n / 64 + 1);
            }
            if (i == n) break;
            size_t j = i;
            tj_utf8_next(p, n, &j);
            tj_buf_put(r->c, &b, p + i, j - i);
            i = j;
        }
        return tj_str(b.p ? b.p : "", b.n);
    }
    for (;;) {
        const char *hit = count >= 0 && done >= count ? NULL : memmem(p + i, n - i, old.u.s.p, old.u.s.n);
        if (!hit) break;
        tj_buf_put(r->c, &b, p + i, (size_t)(hit - (p + i)));
        tj_buf_put(r->c, &b, new_.u.s.p, new_.u.s.n);
        tj_charge(r, pos, new_.u.s.n / 64 + 1);
        i = (size_t)(hit - p) + old.u.s.n;
        done++;
    }
    tj_buf_put(r->c, &b, p + i, n - i);
    return tj_str(b.p ? b.p : "", b.n);
}

/* startswith / endswith with a string or a tuple of strings. */
static bool affix(tj_rt *r, size_t pos, tj_value s, const tj_value *what, bool end) {
    if (what && what->kind == TV_LIST && what->u.list->tuple) {
        for (size_t k = 0; k < what->u.list->n; k++)
            if (affix(r, pos, s, &what->u.list->v[k], end)) return true;
        return false;
    }
    tj_value a = need_str(r, pos, what, end ? "endswith()" : "startswith()");
    if (a.u.s.n > s.u.s.n) return false;
    tj_charge(r, pos, a.u.s.n / 64);
    return memcmp(s.u.s.p + (end ? s.u.s.n - a.u.s.n : 0), a.u.s.p, a.u.s.n) == 0;
}

static tj_value call_strftime(tj_rt *r, size_t pos, const tj_args *a) {
    tj_value fmt = need_str(r, pos, arg(a, 0, "format"), "strftime_now()");
    if (fmt.u.s.n > 256) tj_fail(r->c, pos, "strftime_now(): format longer than 256 bytes");
    char f[260], out[1024];
    memcpy(f, fmt.u.s.p, fmt.u.s.n);
    f[fmt.u.s.n] = '\0';
    if (strlen(f) != fmt.u.s.n) tj_fail(r->c, pos, "strftime_now(): embedded null character");
    time_t t = (time_t)r->now;
    struct tm tm;
    if (!(r->now_utc ? gmtime_r(&t, &tm) : localtime_r(&t, &tm))) tj_fail(r->c, pos, "strftime_now(): bad time");
    /* a marker at the end tells an empty result from one that did not fit */
    f[fmt.u.s.n] = '_';
    f[fmt.u.s.n + 1] = '\0';
    size_t n = strftime(out, sizeof out, f, &tm);
    if (n == 0) tj_fail(r->c, pos, "strftime_now(): result longer than 1022 bytes");
    n--;
    return tj_str(tj_strdup(r->c, out, n), n);
}

static tj_value call_range(tj_rt *r, size_t pos, const tj_args *a) {
    int64_t v[3] = {0, 0, 1};
    if (a->n_pos < 1 || a->n_pos > 3 || a->n_kw) tj_fail(r->c, pos, "range() takes 1 to 3 integer arguments");
    for (size_t k = 0; k < a->n_pos; k++) {
        if (a->pos[k].kind == TV_INT) v[k] = a->pos[k].u.i;
        else if (a->pos[k].kind == TV_BOOL) v[k] = a->pos[k].u.b;
        else tj_fail(r->c, pos, "range(): '%s' object cannot be interpreted as an integer", tj_type_name(a->pos[k]));
    }
    int64_t start = a->n_pos == 1 ? 0 : v[0], stop = a->n_pos == 1 ? v[0] : v[1], step = a->n_pos == 3 ? v[2] : 1;
    if (step == 0) tj_fail(r->c, pos, "range() arg 3 must not be zero");
    uint64_t count = 0; /* unsigned differences cannot overflow */
    if (step > 0 && start < stop) count = ((uint64_t)stop - (uint64_t)start - 1) / (uint64_t)step + 1;
    if (step < 0 && start > stop)
        count = ((uint64_t)start - (uint64_t)stop - 1) / ((uint64_t)(-(step + 1)) + 1) + 1;
    if (count > 100000) /* the sandbox's MAX_RANGE */
        tj_fail(r->c, pos, "range too big: the sandbox blocks ranges larger than 100000");
    tj_charge(r, pos, count);
    tj_list *l = tj_list_new(r->c, (size_t)count);
    /* start + k * step lies between start and stop, but k * step alone may not fit int64: computed modulo 2^64 */
    for (size_t k = 0; k < (size_t)count; k++)
        l->v[k] = tj_int((int64_t)((uint64_t)start + (uint64_t)k * (uint64_t)step));
    return tj_list_value(l);
}

static tj_value kwargs_dict(tj_rt *r, const tj_args *a, tj_kind kind) {
    tj_dict *d = tj_dict_new(r->c, a->n_kw + 1);
    for (size_t k = 0; k < a->n_kw; k++)
        tj_dict_set(r, d, tj_str(a->kw_nodes[k].name, a->kw_nodes[k].n), a->kw[k]);
    tj_value v = {.kind = kind};
    v.u.dict = d;
    return v;
}

static tj_value call_global(tj_rt *r, size_t pos, int id, const tj_args *a) {
    switch (id) {
    case G_NAMESPACE: {
        tj_value ns = kwargs_dict(r, a, TV_NS);
        if (a->n_pos > 1) tj_fail(r->c, pos, "namespace() takes at most one positional argument");
        if (a->n_pos == 1) {
            if (a->pos[0].kind != TV_DICT) tj_fail(r->c, pos, "namespace(): the positional argument must be a dict");
            tj_dict *init = tj_dict_new(r->c, a->pos[0].u.dict->n + ns.u.dict->n + 1);
            for (size_t k = 0; k < a->pos[0].u.dict->n; k++)
                tj_dict_set(r, init, a->pos[0].u.dict->k[k], a->pos[0].u.dict->v[k]);
            for (size_t k = 0; k < ns.u.dict->n; k++) tj_dict_set(r, init, ns.u.dict->k[k], ns.u.dict->v[k]);
            ns.u.dict = init;
        }
        return ns;
    }
    case G_DICT:
        if (a->n_pos) tj_fail(r->c, pos, "unsupported Jinja feature 'dict() with positional arguments'");
        return kwargs_dict(r, a, TV_DICT);
    case G_RANGE: return call_range(r, pos, a);
    case G_RAISE: {
        tj_value msg = a->n_pos ? tj_str_of(r, pos, a->pos[0]) : tj_cstr("");
        tj_fail(r->c, pos, "the template raised an error: %.*s", (int)(msg.u.s.n > 300 ? 300 : msg.u.s.n),
                msg.u.s.p);
    }
    case G_STRFTIME: return call_strftime(r, pos, a);
    default: tj_fail(r->c, pos, "unsupported Jinja feature 'cycler/joiner/lipsum'");
    }
}

static tj_value call_method(tj_rt *r, size_t pos, int id, tj_value self, const tj_args *a) {
    switch (id) {
    case M_STRIP: return do_strip(r, pos, self, arg(a, 0, "chars"), true, true);
    case M_LSTRIP: return do_strip(r, pos, self, arg(a, 0, "chars"), true, false);
    case M_RSTRIP: return do_strip(r, pos, self, arg(a, 0, "chars"), false, true);
    case M_STARTSWITH:
    case M_ENDSWITH:
        if (a->n_pos > 1) tj_fail(r->c, pos, "unsupported Jinja feature 'startswith/endswith with start, end'");
        return tj_bool(affix(r, pos, self, arg(a, 0, NULL), id == M_ENDSWITH));
    case M_SPLIT: return do_split(r, pos, self, arg(a, 0, "sep"), arg(a, 1, "maxsplit"));
    case M_UPPER: return tj_case(r, self, 0);
    case M_LOWER: return tj_case(r, self, 1);
    case M_TITLE: return tj_case(r, self, 2);
    case M_CAPITALIZE: return tj_case(r, self, 3);
    case M_REPLACE: {
        const tj_value *cnt = arg(a, 2, "count");
        if (cnt && cnt->kind != TV_INT)
            tj_fail(r->c, pos, "'%s' object cannot be interpreted as an integer", tj_type_name(*cnt));
        return tj_replace(r, pos, self, need_str(r, pos, arg(a, 0, "old"), "replace()"),
                          need_str(r, pos, arg(a, 1, "new"), "replace()"), cnt && cnt->kind == TV_INT ? cnt->u.i : -1);
    }
    case M_FIND:
    case M_COUNT:
        if (self.kind == TV_LIST) {
            size_t hits = 0;
            tj_charge(r, pos, self.u.list->n);
            tj_value item = a->n_pos ? a->pos[0] : tj_none();
            for (size_t k = 0; k < self.u.list->n; k++) hits += tj_equal(r, self.u.list->v[k], item);
            return tj_int((int64_t)hits);
        } else {
            if (a->n_pos > 1) tj_fail(r->c, pos, "unsupported Jinja feature 'find/count with start, end'");
            tj_value sub = need_str(r, pos, arg(a, 0, NULL), id == M_FIND ? "find()" : "count()");
            tj_charge(r, pos, self.u.s.n / 64 + 1);
            if (id == M_FIND) {
                const char *hit = sub.u.s.n ? memmem(self.u.s.p, self.u.s.n, sub.u.s.p, sub.u.s.n) : self.u.s.p;
                return tj_int(hit ? (int64_t)tj_utf8_len(self.u.s.p, (size_t)(hit - self.u.s.p)) : -1);
            }
            if (sub.u.s.n == 0) return tj_int((int64_t)tj_utf8_len(self.u.s.p, self.u.s.n) + 1);
            int64_t hits = 0;
            for (size_t i = 0;;) {
                const char *hit = memmem(self.u.s.p + i, self.u.s.n - i, sub.u.s.p, sub.u.s.n);
                if (!hit) break;
                hits++;
                i = (size_t)(hit - self.u.s.p) + sub.u.s.n;
            }
            return tj_int(hits);
        }
    case M_JOIN: {
        tj_list *items = tj_iterate(r, pos, a->n_pos ? a->pos[0] : tj_undef(NULL));
        tj_buf b = {0};
        for (size_t k = 0; k < items->n; k++) {
            if (items->v[k].kind != TV_STR)
                tj_fail(r->c, pos, "join(): sequence item %zu: expected str instance, %s found", k,
                        tj_type_name(items->v[k]));
            if (k) tj_buf_put(r->c, &b, self.u.s.p, self.u.s.n);
            tj_buf_put(r->c, &b, items->v[k].u.s.p, items->v[k].u.s.n);
        }
        tj_charge(r, pos, b.n / 64 + items->n);
        return tj_str(b.p ? b.p : "", b.n);
    }
    case M_SPLITLINES: {
        tj_value nl = tj_cstr("\n");
        tj_value parts = do_split(r, pos, tj_replace(r, pos, tj_replace(r, pos, self, tj_cstr("\r\n"), nl, -1),
                                                     tj_cstr("\r"), nl, -1),
                                  &nl, NULL);
        if (parts.u.list->n && parts.u.list->v[parts.u.list->n - 1].u.s.n == 0) parts.u.list->n--;
        return parts;
    }
    case M_ITEMS:
    case M_KEYS:
    case M_VALUES: {
        const tj_dict *d = self.u.dict;
        tj_list *l = tj_list_new(r->c, d->n);
        tj_charge(r, pos, d->n);
        for (size_t k = 0; k < d->n; k++) {
            if (id == M_KEYS) l->v[k] = d->k[k];
            else if (id == M_VALUES) l->v[k] = d->v[k];
            else {
                tj_list *pair = tj_list_new(r->c, 2);
                pair->tuple = true;
                pair->v[0] = d->k[k];
                pair->v[1] = d->v[k];
                l->v[k] = tj_list_value(pair);
            }
        }
        return tj_list_value(l);
    }
    case M_GET: {
        if (a->n_pos < 1) tj_fail(r->c, pos, "get() expected at least 1 argument");
        tj_value *v = tj_dict_get(r, self.u.dict, a->pos[0]);
        return v ? *v : a->n_pos > 1 ? a->pos[1] : tj_none();
    }
    case M_COPY:
        if (self.kind == TV_DICT) {
            tj_dict *d = tj_dict_new(r->c, self.u.dict->n + 1);
            for (size_t k = 0; k < self.u.dict->n; k++) tj_dict_set(r, d, self.u.dict->k[k], self.u.dict->v[k]);
            tj_value v = {.kind = TV_DICT};
            v.u.dict = d;
            return v;
        } else {
            tj_list *l = tj_list_new(r->c, self.u.list->n);
            memcpy(l->v, self.u.list->v, self.u.list->n * sizeof *l->v);
            return tj_list_value(l);
        }
    case M_CYCLE:
        if (a->n_pos == 0) tj_fail(r->c, pos, "loop.cycle() needs at least one argument");
        return a->pos[self.u.loop->index0 % a->n_pos];
    default:
        tj_fail(r->c, pos, "the immutable sandbox does not allow methods that modify a %s", tj_type_name(self));
    }
}

tj_value tj_call(tj_rt *r, size_t pos, tj_value fn, const tj_args *args) {
    if (fn.kind == TV_FUNC) return call_global(r, pos, fn.u.fn.id, args);
    if (fn.kind == TV_METHOD) return call_method(r, pos, fn.u.fn.id, *fn.u.fn.self, args);
    tj_fail(r->c, pos, "'%s' object is not callable", tj_type_name(fn));
}
