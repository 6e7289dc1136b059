/* gguf.c — a validating reader of GGUF v2/v3 files: header, metadata and tensor infos are parsed from an mmap with
 * every count, length, offset and size checked against the file length; weights stay in the mapping. */
#include "format/gguf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/types.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/mapped_file.h"
#include "util/name_map.h"

#define GGUF_MAX_DIMS 4
#define GGUF_MAX_NESTING 8         /* arrays of arrays deeper than this are rejected */
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_SHOWN 160             /* at most this many bytes of a file-supplied name are quoted in a message */
#define GGUF_KV_MIN_BYTES 13       /* key length (8) + type (4) + the smallest value (1) */
#define GGUF_TENSOR_MIN_BYTES 32   /* name length (8) + n_dims (4) + one ne (8) + type (4) + offset (8) */

/* ---- ggml tensor types ---------------------------------------------------------------------------------------- */

typedef struct {
    const char *name; /* NULL: not a known type number */
    uint16_t block;   /* elements per block */
    uint16_t bytes;   /* bytes per block */
} ggml_type_info;

/* Indexed by ggml type number; holes are numbers removed from ggml or unknown here. */
static const ggml_type_info k_ggml_types[] = {
    [0] = {"F32", 1, 4},         [1] = {"F16", 1, 2},         [2] = {"Q4_0", 32, 18},      [3] = {"Q4_1", 32, 20},
    [6] = {"Q5_0", 32, 22},      [7] = {"Q5_1", 32, 24},      [8] = {"Q8_0", 32, 34},      [9] = {"Q8_1", 32, 36},
    [10] = {"Q2_K", 256, 84},    [11] = {"Q3_K", 256, 110},   [12] = {"Q4_K", 256, 144},   [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210},   [15] = {"Q8_K", 256, 292},   [16] = {"IQ2_XXS", 256, 66}, [17] = {"IQ2_XS", 256, 74},
    [18] = {"IQ3_XXS", 256, 98}, [19] = {"IQ1_S", 256, 50},   [20] = {"IQ4_NL", 32, 18},   [21] = {"IQ3_S", 256, 110},
    [22] = {"IQ2_S", 256, 82},   [23] = {"IQ4_XS", 256, 136}, [24] = {"I8", 1, 1},         [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},        [27] = {"I64", 1, 8},        [28] = {"F64", 1, 8},        [29] = {"IQ1_M", 256, 56},
    [30] = {"BF16", 1, 2},       [34] = {"TQ1_0", 256, 54},   [35] = {"TQ2_0", 256, 66},   [39] = {"MXFP4", 32, 17},
};
#define N_GGML_TYPES (sizeof k_ggml_types / sizeof k_ggml_types[0])

static const ggml_type_info *ggml_type(uint32_t t) {
    return t < N_GGML_TYPES && k_ggml_types[t].name ? &k_ggml_types[t] : NULL;
}

const char *tg_gguf_type_name(uint32_t ggml_type_number) {
    const ggml_type_info *ti = ggml_type(ggml_type_number);
    return ti ? ti->name : "unknown";
}

bool tg_gguf_type_layout(uint32_t ggml_type_number, size_t *block_elems, size_t *block_bytes) {
    const ggml_type_info *ti = ggml_type(ggml_type_number);
    if (!ti) return false;
    if (block_elems) *block_elems = ti->block;
    if (block_bytes) *block_bytes = ti->bytes;
    return true;
}

/* ---- metadata value types ------------------------------------------------------------------------------------- */

#define N_VALUE_TYPES 13

/* Fixed size of a scalar value type; 0 for STRING and ARRAY (variable). */
static size_t value_size(tg_gguf_type t) {
    static const uint8_t sizes[N_VALUE_TYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return (unsigned)t < N_VALUE_TYPES ? sizes[t] : 0;
}

/* Smallest possible encoding of one value of type t (strings: the 8-byte length; arrays: type + count). */
static size_t value_min_size(tg_gguf_type t) {
    if (t == TG_GGUF_STRING) return 8;
    if (t == TG_GGUF_ARRAY) return 12;
    return value_size(t);
}

const char *tg_gguf_value_type_name(tg_gguf_type t) {
    static const char *const names[N_VALUE_TYPES] = {"u8",  "i8",     "u16",   "i16", "u32", "i32", "f32",
                                                     "bool", "string", "array", "u64", "i64", "f64"};
    return (unsigned)t < N_VALUE_TYPES ? names[t] : "?";
}

static bool is_integer_type(tg_gguf_type t) {
    return t == TG_GGUF_U8 || t == TG_GGUF_I8 || t == TG_GGUF_U16 || t == TG_GGUF_I16 || t == TG_GGUF_U32 ||
           t == TG_GGUF_I32 || t == TG_GGUF_U64 || t == TG_GGUF_I64;
}

/* ---- little-endian loads -------------------------------------------------------------------------------------- */

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static uint64_t le64(const uint8_t *p) { return (uint64_t)le32(p) | ((uint64_t)le32(p + 4) << 32); }

/* Integer value of type t at p; false for U64 values above INT64_MAX and for non-integer types. */
static bool load_int(tg_gguf_type t, const uint8_t *p, int64_t *out) {
    switch (t) {
    case TG_GGUF_U8: *out = p[0]; return true;
    case TG_GGUF_I8: *out = (int8_t)p[0]; return true;
    case TG_GGUF_U16: *out = le16(p); return true;
    case TG_GGUF_I16: *out = (int16_t)le16(p); return true;
    case TG_GGUF_U32: *out = le32(p); return true;
    case TG_GGUF_I32: *out = (int32_t)le32(p); return true;
    case TG_GGUF_I64: *out = (int64_t)le64(p); return true;
    case TG_GGUF_U64: {
        uint64_t v = le64(p);
        if (v > (uint64_t)INT64_MAX) return false;
        *out = (int64_t)v;
        return true;
    }
    default: return false;
    }
}

static float load_f32(const uint8_t *p) {
    uint32_t u = le32(p);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static double load_f64(const uint8_t *p) {
    uint64_t u = le64(p);
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* ---- the handle ----------------------------------------------------------------------------------------------- */

typedef struct {
    tg_gguf_str key;          /* must stay the first member (the name index reads it through the struct pointer) */
    tg_gguf_type type;
    const uint8_t *val;       /* the value; arrays: their first element */
    tg_gguf_type elem_type;   /* arrays only */
    uint64_t count;           /* arrays only */
    const uint8_t **strs;     /* top-level STRING arrays: [count] start of each element's length prefix */
} gguf_kv;

struct tg_gguf {
    char *path;
    tg_mapped_file map;
    uint32_t version;
    size_t alignment;
    size_t data_offset;
    gguf_kv *kvs;            /* [n_kv] */
    size_t n_kv;
    tg_name_map kv_index;     /* key -> index into kvs */
    tg_gguf_tensor *tensors; /* [n_tensors] */
    size_t n_tensors;
    tg_name_map tensor_index; /* name -> index into tensors */
};

/* ---- name index ----------------------------------------------------------------------------------------------- */

/* The name of entry i of an array of gguf_kv / tg_gguf_tensor (util/name_map.h); lengths fit the mapping. */
static tg_name_ref kv_key_at(const void *kvs, size_t i) {
    const tg_gguf_str *k = &((const gguf_kv *)kvs)[i].key;
    return (tg_name_ref){k->ptr, (size_t)k->len};
}

static tg_name_ref tensor_name_at(const void *tensors, size_t i) {
    const tg_gguf_str *k = &((const tg_gguf_tensor *)tensors)[i].name;
    return (tg_name_ref){k->ptr, (size_t)k->len};
}

/* Builds the index over n entries. Returns SIZE_MAX on success, the index of the first name seen before
 * otherwise; *oom is set when allocation failed. */
static size_t index_build(tg_name_map *ix, tg_name_at_fn at, const void *entries, size_t n, bool *oom) {
    *oom = !tg_name_map_init(ix, n);
    if (*oom) return SIZE_MAX;
    for (size_t i = 0; i < n; i++)
        if (tg_name_map_put(ix, at, entries, i, false) != SIZE_MAX) return i;
    return SIZE_MAX;
}

/* ---- the parser ----------------------------------------------------------------------------------------------- */

typedef struct {
    const char *path;
    const uint8_t *p; /* [size] the mapping */
    size_t size;
    size_t pos;
    tg_error *err;
} parser;

static size_t left(const parser *ps) { return ps->size - ps->pos; }

/* A printable length for quoting a file-supplied name (%.*s). */
static int shown(uint64_t len) { return len > GGUF_SHOWN ? GGUF_SHOWN : (int)len; }

static bool take_u32(parser *ps, uint32_t *v) {
    if (!tg_range_ok(ps->pos, 4, ps->size)) return false;
    *v = le32(ps->p + ps->pos);
    ps->pos += 4;
    return true;
}

static bool take_u64(parser *ps, uint64_t *v) {
    if (!tg_range_ok(ps->pos, 8, ps->size)) return false;
    *v = le64(ps->p + ps->pos);
    ps->pos += 8;
    return true;
}

/* Reads a length-prefixed string; on failure fills the error describing the string as `what` ("key of metadata
 * entry 3", ...). */
static bool take_str(parser *ps, tg_gguf_str *s, const char *what) {
    size_t at = ps->pos;
    uint64_t len;
    if (!take_u64(ps, &len))
        return tg_fail(ps->err, "%s: truncated: the length of the %s at offset %zu runs past the end of the file (%zu bytes)",
                       ps->path, what, at, ps->size);
    if (len > left(ps))
        return tg_fail(ps->err, "%s: truncated or corrupt: the %s at offset %zu has string length %llu, but only %zu bytes are left in the file",
                       ps->path, what, at, (unsigned long long)len, left(ps));
    s->ptr = (const char *)ps->p + ps->pos;
    s->len = len;
    ps->pos += (size_t)len;
    return true;
}

/* Validates one value of type t for metadata `key` at the cursor and moves past it. depth counts array nesting. */
static bool skip_value(parser *ps, tg_gguf_type t, tg_gguf_str key, int depth) {
    size_t at = ps->pos;
    if ((unsigned)t >= N_VALUE_TYPES)
        return tg_fail(ps->err, "%s: metadata '%.*s' has unknown value type %u (offset %zu)", ps->path, shown(key.len),
                       key.ptr, (unsigned)t, at);
    if (t == TG_GGUF_STRING) {
        uint64_t len;
        if (!take_u64(ps, &len))
            return tg_fail(ps->err, "%s: truncated: metadata '%.*s': a string length at offset %zu runs past the end of the file (%zu bytes)",
                           ps->path, shown(key.len), key.ptr, at, ps->size);
        if (len > left(ps))
            return tg_fail(ps->err, "%s: truncated or corrupt: metadata '%.*s': string length %llu at offset %zu exceeds the %zu bytes left in the file",
                           ps->path, shown(key.len), key.ptr, (unsigned long long)len, at, left(ps));
        ps->pos += (size_t)len;
        return true;
    }
    if (t == TG_GGUF_ARRAY) {
        if (depth >= GGUF_MAX_NESTING)
            return tg_fail(ps->err, "%s: metadata '%.*s': arrays nested more than %d deep (offset %zu)", ps->path,
                           shown(key.len), key.ptr, GGUF_MAX_NESTING, at);
        uint32_t et;
        uint64_t count;
        if (!take_u32(ps, &et) || !take_u64(ps, &count))
            return tg_fail(ps->err, "%s: truncated: metadata '%.*s': an array header at offset %zu runs past the end of the file (%zu bytes)",
                           ps->path, shown(key.len), key.ptr, at, ps->size);
        if (et >= N_VALUE_TYPES)
            return tg_fail(ps->err, "%s: metadata '%.*s' is an array of unknown value type %u (offset %zu)", ps->path,
                           shown(key.len), key.ptr, et, at);
        size_t min = value_min_size((tg_gguf_type)et);
        if (count > left(ps) / min)
            return tg_fail(ps->err, "%s: truncated or corrupt: metadata '%.*s': array count %llu of %s elements at offset %zu needs more than the %zu bytes left in the file",
                           ps->path, shown(key.len), key.ptr, (unsigned long long)count,
                           tg_gguf_value_type_name((tg_gguf_type)et), at, left(ps));
        if (et == TG_GGUF_STRING || et == TG_GGUF_ARRAY || et == TG_GGUF_BOOL) {
            for (uint64_t i = 0; i < count; i++)
                if (!skip_value(ps, (tg_gguf_type)et, key, depth + 1)) return false;
        } else {
            ps->pos += (size_t)count * min; /* fits: count <= left / min */
        }
        return true;
    }
    size_t n = value_size(t);
    if (!tg_range_ok(ps->pos, n, ps->size))
        return tg_fail(ps->err, "%s: truncated: metadata '%.*s': the %s value at offset %zu runs past the end of the file (%zu bytes)",
                       ps->path, shown(key.len), key.ptr, tg_gguf_value_type_name(t), at, ps->size);
    if (t == TG_GGUF_BOOL && ps->p[ps->pos] > 1)
        return tg_fail(ps->err, "%s: metadata '%.*s': invalid bool value %u at offset %zu (must be 0 or 1)", ps->path,
                       shown(key.len), key.ptr, ps->p[ps->pos], at);
    ps->pos += n;
    return true;
}

static bool oom(const parser *ps) { return tg_fail(ps->err, "%s: out of memory while reading the file", ps->path); }

/* Grows *arr (elements of `elem` bytes) so that index n fits. */
static bool grow(void **arr, size_t *cap, size_t n, size_t elem) {
    if (n < *cap) return true;
    size_t ncap = *cap ? *cap * 2 : 16;
    size_t bytes;
    if (ncap <= n || !tg_mul_size(ncap, elem, &bytes)) return false;
    void *p = realloc(*arr, bytes);
    if (!p) return false;
    *arr = p;
    *cap = ncap;
    return true;
}

/* Builds the element index of a validated top-level STRING array. */
static bool index_strings(parser *ps, gguf_kv *kv) {
    if (kv->count == 0) return true;
    kv->strs = malloc((size_t)kv->count * sizeof *kv->strs); /* count <= file bytes / 8 */
    if (!kv->strs) return oom(ps);
    const uint8_t *q = kv->val;
    for (uint64_t i = 0; i < kv->count; i++) {
        kv->strs[i] = q;
        q += 8 + (size_t)le64(q); /* lengths were validated by skip_value */
    }
    return true;
}

static bool parse_kvs(parser *ps, tg_gguf *g, uint64_t n_kv) {
    size_t cap = 0;
    for (uint64_t i = 0; i < n_kv; i++) {
        char what[64];
        snprintf(what, sizeof what, "key of metadata entry %llu", (unsigned long long)i);
        gguf_kv kv = {0};
        if (!take_str(ps, &kv.key, what)) return false;
        size_t at = ps->pos;
        uint32_t t;
        if (!take_u32(ps, &t))
            return tg_fail(ps->err, "%s: truncated: the type of metadata '%.*s' at offset %zu runs past the end of the file (%zu bytes)",
                           ps->path, shown(kv.key.len), kv.key.ptr, at, ps->size);
        kv.type = (tg_gguf_type)t;
        size_t val_pos = ps->pos;
        if (!skip_value(ps, kv.type, kv.key, 0)) return false;
        kv.val = ps->p + val_pos;
        if (kv.type == TG_GGUF_ARRAY) { /* validated: the 12-byte array header is inside the file */
            kv.elem_type = (tg_gguf_type)le32(kv.val);
            kv.count = le64(kv.val + 4);
            kv.val += 12;
        }
        if (kv.type == TG_GGUF_ARRAY && kv.elem_type == TG_GGUF_STRING && !index_strings(ps, &kv)) return false;
        if (!grow((void **)&g->kvs, &cap, g->n_kv, sizeof *g->kvs)) {
            free(kv.strs);
            return oom(ps);
        }
        g->kvs[g->n_kv++] = kv;
    }
    bool no_mem;
    size_t dup = index_build(&g->kv_index, kv_key_at, g->kvs, g->n_kv, &no_mem);
    if (no_mem) return oom(ps);
    if (dup != SIZE_MAX)
        return tg_fail(ps->err, "%s: duplicate metadata key '%.*s' (entry %zu)", ps->path, shown(g->kvs[dup].key.len),
                       g->kvs[dup].key.ptr, dup);
    return true;
}

static bool read_alignment(parser *ps, tg_gguf *g) {
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    size_t i = tg_name_map_find(&g->kv_index, kv_key_at, g->kvs, "general.alignment", 17);
    if (i == SIZE_MAX) return true;
    int64_t a;
    if (!load_int(g->kvs[i].type, g->kvs[i].val, &a))
        return tg_fail(ps->err, "%s: general.alignment has type %s, expected an unsigned integer", ps->path,
                       tg_gguf_value_type_name(g->kvs[i].type));
    if (a <= 0 || (a & (a - 1)) != 0 || (uint64_t)a > SIZE_MAX / 2)
        return tg_fail(ps->err, "%s: general.alignment = %lld is not a power of two", ps->path, (long long)a);
    g->alignment = (size_t)a;
    return true;
}

/* Tensor info i: name, dims, type, offset; the element count and byte size are checked here, the offset later. */
static bool parse_tensor_info(parser *ps, uint64_t i, tg_gguf_tensor *t, uint64_t *offset) {
    char what[64];
    snprintf(what, sizeof what, "name of tensor info %llu", (unsigned long long)i);
    if (!take_str(ps, &t->name, what)) return false;
    int nl = shown(t->name.len);
    const char *nm = t->name.ptr;
    size_t at = ps->pos;
    if (!take_u32(ps, &t->n_dims))
        return tg_fail(ps->err, "%s: truncated: the info of tensor '%.*s' at offset %zu runs past the end of the file (%zu bytes)",
                       ps->path, nl, nm, at, ps->size);
    if (t->n_dims == 0 || t->n_dims > GGUF_MAX_DIMS)
        return tg_fail(ps->err, "%s: tensor '%.*s' has n_dims %u (1 to %d supported)", ps->path, nl, nm, t->n_dims,
                       GGUF_MAX_DIMS);
    int64_t nelem = 1;
    for (uint32_t d = 0; d < GGUF_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        uint64_t ne;
        if (!take_u64(ps, &ne))
            return tg_fail(ps->err, "%s: truncated: the info of tensor '%.*s' at offset %zu runs past the end of the file (%zu bytes)",
                           ps->path, nl, nm, at, ps->size);
        if (ne > (uint64_t)INT64_MAX)
            return tg_fail(ps->err, "%s: tensor '%.*s': dimension %u has size %llu, which is out of range", ps->path,
                           nl, nm, d, (unsigned long long)ne);
        t->ne[d] = (int64_t)ne;
        if (!tg_mul_i64(nelem, t->ne[d], &nelem))
            return tg_fail(ps->err, "%s: tensor '%.*s': element count overflows (ne = [%lld, %lld, %lld, %lld])",
                           ps->path, nl, nm, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                           (long long)t->ne[3]);
    }
    if (!take_u32(ps, &t->ggml_type) || !take_u64(ps, offset))
        return tg_fail(ps->err, "%s: truncated: the info of tensor '%.*s' at offset %zu runs past the end of the file (%zu bytes)",
                       ps->path, nl, nm, at, ps->size);
    const ggml_type_info *ti = ggml_type(t->ggml_type);
    if (!ti)
        return tg_fail(ps->err, "%s: tensor '%.*s' has unknown ggml type %u", ps->path, nl, nm, t->ggml_type);
    if (t->ne[0] % ti->block != 0)
        return tg_fail(ps->err, "%s: tensor '%.*s': ne0 = %lld is not a multiple of the %s block size %u", ps->path,
                       nl, nm, (long long)t->ne[0], ti->name, (unsigned)ti->block);
    if ((uint64_t)nelem > SIZE_MAX || !tg_mul_size((size_t)nelem / ti->block, ti->bytes, &t->nbytes))
        return tg_fail(ps->err, "%s: tensor '%.*s': byte size overflows (%lld elements of %s)", ps->path, nl, nm,
                       (long long)nelem, ti->name);
    return true;
}

static bool parse_tensors(parser *ps, tg_gguf *g, uint64_t n_tensors) {
    size_t cap = 0;
    uint64_t *offsets = NULL; /* [n_tensors] offsets relative to the data section */
    size_t ocap = 0;
    bool ok = false;
    for (uint64_t i = 0; i < n_tensors; i++) {
        tg_gguf_tensor t = {0};
        uint64_t off = 0;
        if (!parse_tensor_info(ps, i, &t, &off)) goto done;
        if (!grow((void **)&g->tensors, &cap, g->n_tensors, sizeof *g->tensors) ||
            !grow((void **)&offsets, &ocap, g->n_tensors, sizeof *offsets)) {
            oom(ps);
            goto done;
        }
        offsets[g->n_tensors] = off;
        g->tensors[g->n_tensors++] = t;
    }
    bool no_mem;
    size_t dup = index_build(&g->tensor_index, tensor_name_at, g->tensors, g->n_tensors, &no_mem);
    if (no_mem) {
        oom(ps);
        goto done;
    }
    if (dup != SIZE_MAX) {
        tg_fail(ps->err, "%s: duplicate tensor name '%.*s' (tensor %zu)", ps->path, shown(g->tensors[dup].name.len),
                g->tensors[dup].name.ptr, dup);
        goto done;
    }
    /* The data section starts at the first multiple of the alignment after the tensor infos. */
    size_t pad = (g->alignment - ps->pos % g->alignment) % g->alignment;
    if (!tg_add_size(ps->pos, pad, &g->data_offset)) {
        tg_fail(ps->err, "%s: corrupt: data section offset overflows", ps->path);
        goto done;
    }
    for (size_t i = 0; i < g->n_tensors; i++) {
        tg_gguf_tensor *t = &g->tensors[i];
        int nl = shown(t->name.len);
        if (offsets[i] % g->alignment != 0) {
            tg_fail(ps->err, "%s: tensor '%.*s': data offset %llu is not a multiple of the alignment %zu", ps->path, nl,
                    t->name.ptr, (unsigned long long)offsets[i], g->alignment);
            goto done;
        }
        size_t abs;
        if (offsets[i] > SIZE_MAX || !tg_add_size(g->data_offset, (size_t)offsets[i], &abs)) {
            tg_fail(ps->err, "%s: corrupt: tensor '%.*s' data offset %llu extends past the end of the file (%zu bytes)",
                    ps->path, nl, t->name.ptr, (unsigned long long)offsets[i], ps->size);
            goto done;
        }
        if (!tg_range_ok(abs, t->nbytes, ps->size)) {
            tg_fail(ps->err, "%s: truncated: tensor '%.*s' data [offset %llu, %zu bytes) extends past the end of the file (%zu bytes)",
                    ps->path, nl, t->name.ptr, (unsigned long long)offsets[i] + g->data_offset, t->nbytes, ps->size);
            goto done;
        }
        t->data = ps->p + abs;
        /* Like llama.cpp, the data of the tensors must follow their order in the header without overlapping (the
         * ends cannot overflow: both ranges were checked against the file above). */
        if (i > 0 && offsets[i] < offsets[i - 1] + g->tensors[i - 1].nbytes) {
            const tg_gguf_tensor *p = &g->tensors[i - 1];
            if (offsets[i] < offsets[i - 1])
                tg_fail(ps->err, "%s: tensor data out of order: tensor '%.*s' (data offset %llu) is listed after "
                                 "tensor '%.*s' (data offset %llu) but stored before it", ps->path, nl, t->name.ptr,
                        (unsigned long long)offsets[i], shown(p->name.len), p->name.ptr,
                        (unsigned long long)offsets[i - 1]);
            else
                tg_fail(ps->err, "%s: tensors '%.*s' and '%.*s' overlap: '%.*s' data [%llu, %llu) begins before '%.*s' "
                                 "data [%llu, %llu) ends", ps->path, shown(p->name.len), p->name.ptr, nl, t->name.ptr,
                        nl, t->name.ptr, (unsigned long long)offsets[i], (unsigned long long)offsets[i] + t->nbytes,
                        shown(p->name.len), p->name.ptr, (unsigned long long)offsets[i - 1],
                        (unsigned long long)offsets[i - 1] + p->nbytes);
            goto done;
        }
    }
    ok = true;
done:
    free(offsets);
    return ok;
}

static bool parse_header(parser *ps, tg_gguf *g, uint64_t *n_tensors, uint64_t *n_kv) {
    if (ps->size < 4)
        return tg_fail(ps->err, "%s: not a GGUF file (bad magic: the file is only %zu bytes)", ps->path, ps->size);
    if (memcmp(ps->p, "GGUF", 4) != 0) return tg_fail(ps->err, "%s: not a GGUF file (bad magic)", ps->path);
    ps->pos = 4;
    if (!take_u32(ps, &g->version))
        return tg_fail(ps->err, "%s: truncated: the GGUF header ends at %zu bytes", ps->path, ps->size);
    if (g->version != 2 && g->version != 3) {
        if (g->version > 0xffff && (g->version & 0xffff) == 0)
            return tg_fail(ps->err, "%s: unsupported GGUF version %u (a big-endian file? only little-endian versions 2 and 3 are supported)",
                           ps->path, g->version);
        return tg_fail(ps->err, "%s: unsupported GGUF version %u (only versions 2 and 3 are supported)", ps->path,
                       g->version);
    }
    if (!take_u64(ps, n_tensors) || !take_u64(ps, n_kv))
        return tg_fail(ps->err, "%s: truncated: the GGUF header ends at %zu bytes", ps->path, ps->size);
    if (*n_kv > left(ps) / GGUF_KV_MIN_BYTES)
        return tg_fail(ps->err, "%s: truncated or corrupt: %llu metadata entries cannot fit in the %zu bytes left in the file",
                       ps->path, (unsigned long long)*n_kv, left(ps));
    if (*n_tensors > left(ps) / GGUF_TENSOR_MIN_BYTES)
        return tg_fail(ps->err, "%s: truncated or corrupt: %llu tensor infos cannot fit in the %zu bytes left in the file",
                       ps->path, (unsigned long long)*n_tensors, left(ps));
    return true;
}

tg_gguf *tg_gguf_open(const char *path, tg_error *err) {
    tg_gguf *g = calloc(1, sizeof *g);
    size_t plen = strlen(path);
    if (g) g->path = malloc(plen + 1);
    if (!g || !g->path) {
        free(g);
        tg_fail(err, "%s: out of memory", path);
        return NULL;
    }
    memcpy(g->path, path, plen + 1);
    if (!tg_mapped_file_open(&g->map, path, err)) {
        tg_gguf_close(g);
        return NULL;
    }
    parser ps = {.path = path, .p = g->map.data, .size = g->map.size, .pos = 0, .err = err};
    uint64_t n_tensors = 0, n_kv = 0;
    if (!parse_header(&ps, g, &n_tensors, &n_kv) || !parse_kvs(&ps, g, n_kv) || !read_alignment(&ps, g) ||
        !parse_tensors(&ps, g, n_tensors)) {
        tg_gguf_close(g);
        return NULL;
    }
    return g;
}

void tg_gguf_close(tg_gguf *g) {
    if (!g) return;
    for (size_t i = 0; i < g->n_kv; i++) free(g->kvs[i].strs);
    free(g->kvs);
    tg_name_map_free(&g->kv_index);
    free(g->tensors);
    tg_name_map_free(&g->tensor_index);
    tg_mapped_file_close(&g->map);
    free(g->path);
    free(g);
}

uint32_t tg_gguf_version(const tg_gguf *g) { return g->version; }
const char *tg_gguf_path(const tg_gguf *g) { return g->path; }
size_t tg_gguf_alignment(const tg_gguf *g) { return g->alignment; }
size_t tg_gguf_data_offset(const tg_gguf *g) { return g->data_offset; }

/* ---- metadata getters ----------------------------------------------------------------------------------------- */

static const gguf_kv *find_kv(const tg_gguf *g, const char *key) {
    size_t i = tg_name_map_find(&g->kv_index, kv_key_at, g->kvs, key, strlen(key));
    return i == SIZE_MAX ? NULL : &g->kvs[i];
}

bool tg_gguf_has(const tg_gguf *g, const char *key) { return find_kv(g, key) != NULL; }

bool tg_gguf_get_i64(const tg_gguf *g, const char *key, int64_t *out) {
    const gguf_kv *kv = find_kv(g, key);
    return kv && load_int(kv->type, kv->val, out);
}

bool tg_gguf_get_f32(const tg_gguf *g, const char *key, float *out) {
    const gguf_kv *kv = find_kv(g, key);
    if (!kv) return false;
    if (kv->type == TG_GGUF_F32) *out = load_f32(kv->val);
    else if (kv->type == TG_GGUF_F64) *out = (float)load_f64(kv->val);
    else return false;
    return true;
}

bool tg_gguf_get_bool(const tg_gguf *g, const char *key, bool *out) {
    const gguf_kv *kv = find_kv(g, key);
    if (!kv || kv->type != TG_GGUF_BOOL) return false;
    *out = kv->val[0] != 0;
    return true;
}

bool tg_gguf_get_str(const tg_gguf *g, const char *key, tg_gguf_str *out) {
    const gguf_kv *kv = find_kv(g, key);
    if (!kv || kv->type != TG_GGUF_STRING) return false;
    out->len = le64(kv->val);
    out->ptr = (const char *)kv->val + 8;
    return true;
}

bool tg_gguf_get_array(const tg_gguf *g, const char *key, tg_gguf_array *out) {
    const gguf_kv *kv = find_kv(g, key);
    if (!kv || kv->type != TG_GGUF_ARRAY) return false;
    out->elem_type = kv->elem_type;
    out->count = kv->count;
    out->data = kv->val;
    out->owner = g;
    out->index = kv->strs;
    return true;
}

tg_gguf_str tg_gguf_array_str(const tg_gguf_array *a, uint64_t i) {
    tg_gguf_str s = {NULL, 0};
    if (a->elem_type != TG_GGUF_STRING || !a->index || i >= a->count) return s;
    const uint8_t *q = ((const uint8_t *const *)a->index)[i];
    s.len = le64(q);
    s.ptr = (const char *)q + 8;
    return s;
}

float tg_gguf_array_f32(const tg_gguf_array *a, uint64_t i) {
    if (i >= a->count) return 0.0f;
    if (a->elem_type == TG_GGUF_F32) return load_f32(a->data + (size_t)i * 4);
    if (a->elem_type == TG_GGUF_F64) return (float)load_f64(a->data + (size_t)i * 8);
    return 0.0f;
}

int64_t tg_gguf_array_i64(const tg_gguf_array *a, uint64_t i) {
    if (i >= a->count) return 0;
    if (a->elem_type == TG_GGUF_BOOL) return a->data[i] != 0;
    if (!is_integer_type(a->elem_type)) return 0;
    int64_t v;
    if (!load_int(a->elem_type, a->data + (size_t)i * value_size(a->elem_type), &v)) return INT64_MAX;
    return v;
}

uint64_t tg_gguf_n_kv(const tg_gguf *g) { return g->n_kv; }

tg_gguf_str tg_gguf_kv_key(const tg_gguf *g, uint64_t i) {
    tg_gguf_str none = {NULL, 0};
    return i < g->n_kv ? g->kvs[i].key : none;
}

tg_gguf_type tg_gguf_kv_type(const tg_gguf *g, uint64_t i) { return i < g->n_kv ? g->kvs[i].type : TG_GGUF_U8; }

/* ---- tensors -------------------------------------------------------------------------------------------------- */

uint64_t tg_gguf_n_tensors(const tg_gguf *g) { return g->n_tensors; }

const tg_gguf_tensor *tg_gguf_tensor_at(const tg_gguf *g, uint64_t i) {
    return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const tg_gguf_tensor *tg_gguf_find_tensor(const tg_gguf *g, const char *name) {
    size_t i = tg_name_map_find(&g->tensor_index, tensor_name_at, g->tensors, name, strlen(name));
    return i == SIZE_MAX ? NULL : &g->tensors[i];
}

bool tg_gguf_tensor_view(const tg_gguf *g, const char *name, int64_t expect_rows, int64_t expect_cols,
                         tg_tensor *out, tg_error *err) {
    const tg_gguf_tensor *t = tg_gguf_find_tensor(g, name);
    if (!t) return tg_fail(err, "%s: tensor '%s' not found", g->path, name);
    tg_dtype dt;
    if (!tg_dtype_from_ggml(t->ggml_type, &dt)) {
        char supported[128];
        tg_weight_type_names(false, supported, sizeof supported);
        return tg_fail(err, "%s: tensor '%s' has type %s (ggml type %u), which is not supported (supported: %s)",
                       g->path, name, tg_gguf_type_name(t->ggml_type), t->ggml_type, supported);
    }
    const size_t align = tg_weight_type_of(dt)->align;
    if (t->ne[2] != 1 || t->ne[3] != 1)
        return tg_fail(err, "%s: tensor '%s' has shape [%lld, %lld, %lld, %lld] (ne0..ne3), expected a matrix or vector",
                       g->path, name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                       (long long)t->ne[3]);
    int64_t rows = t->ne[1], cols = t->ne[0];
    if (!tg_tensor_check_shape(g->path, name, rows, cols, expect_rows, expect_cols, err)) return false;
    if ((uintptr_t)t->data % align != 0)
        return tg_fail(err, "%s: tensor '%s' data is not aligned to %zu bytes (general.alignment = %zu)", g->path, name,
                       align, g->alignment);
    *out = (tg_tensor){dt, rows, cols, t->data, 0}; /* the file's layout */
    return true;
}
