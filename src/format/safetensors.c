/* safetensors.c — a validating reader of .safetensors files (one, or the shards named by an index.json): the JSON
 * header is parsed with jansson and every dtype, shape and data range is checked against the file; data stays mmapped. */
#include "format/safetensors.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/types.h"
#include "util/checked.h"
#include "util/error.h"
#include "util/json_file.h"
#include "util/model_file.h"
#include "util/mapped_file.h"
#include "util/name_map.h"

#define ST_MAX_HEADER 100000000u /* the format's own limit on the JSON header (100 MB) */
#define ST_MAX_DIMS 4
#define ST_INDEX_NAME "model.safetensors.index.json"
#define ST_SINGLE_NAME "model.safetensors"

typedef struct {
    char *path;
    tg_mapped_file map;
} st_file;

struct tg_safetensors {
    char *label;             /* the folder or file given to open, for messages */
    st_file *files;          /* [n_files] */
    size_t n_files, cap_files;
    tg_st_tensor *tensors;   /* [n_tensors]; name and dtype are owned strings */
    size_t *tensor_file;     /* [n_tensors] index into files */
    size_t n_tensors, cap_tensors;
    tg_name_map index;       /* name -> index into tensors */
};

/* ---- dtypes --------------------------------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    size_t size;
} st_dtype;

static const st_dtype k_dtypes[] = {
    {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},     {"I32", 4},     {"I16", 2},
    {"I8", 1},  {"U64", 8}, {"U32", 4}, {"U16", 2},  {"U8", 1},      {"BOOL", 1},    {"F8_E4M3", 1},
    {"F8_E5M2", 1},
};

static const st_dtype *find_dtype(const char *name) {
    for (size_t i = 0; i < sizeof k_dtypes / sizeof k_dtypes[0]; i++)
        if (strcmp(k_dtypes[i].name, name) == 0) return &k_dtypes[i];
    return NULL;
}

/* ---- small helpers -------------------------------------------------------------------------------------------- */

static char *copy_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

/* The name of tensor i (util/name_map.h). */
static tg_name_ref tensor_name_at(const void *tensors, size_t i) {
    const char *name = ((const tg_st_tensor *)tensors)[i].name;
    return (tg_name_ref){name, strlen(name)};
}

static size_t find_index(const tg_safetensors *st, const char *name) {
    return tg_name_map_find(&st->index, tensor_name_at, st->tensors, name, strlen(name));
}

/* Builds the name index; false (message) on OOM or a name present twice (in two shards). */
static bool build_index(tg_safetensors *st, tg_error *err) {
    if (!tg_name_map_init(&st->index, st->n_tensors)) return tg_fail(err, "%s: out of memory", st->label);
    for (size_t i = 0; i < st->n_tensors; i++) {
        const size_t j = tg_name_map_put(&st->index, tensor_name_at, st->tensors, i, false);
        if (j != SIZE_MAX)
            return tg_fail(err, "%s: duplicate tensor '%s' (in %s and %s)", st->label, st->tensors[i].name,
                           st->files[st->tensor_file[j]].path, st->files[st->tensor_file[i]].path);
    }
    return true;
}

/* ---- one file ------------------------------------------------------------------------------------------------- */

/* Reads a non-negative JSON integer into *out; false when v is not one. */
static bool json_u64(const json_t *v, uint64_t *out) {
    if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

/* Validates and appends tensor `name` described by `desc` from file fi whose data section is [data, data + dsize). */
static bool add_tensor(tg_safetensors *st, size_t fi, const char *name, const json_t *desc, const uint8_t *data,
                       size_t dsize, tg_error *err) {
    const char *path = st->files[fi].path;
    if (!json_is_object(desc)) return tg_fail(err, "%s: tensor '%s': header entry is not a JSON object", path, name);
    const json_t *jd = json_object_get(desc, "dtype"), *js = json_object_get(desc, "shape"),
                 *jo = json_object_get(desc, "data_offsets");
    if (!json_is_string(jd)) return tg_fail(err, "%s: tensor '%s': missing or non-string \"dtype\"", path, name);
    const st_dtype *dt = find_dtype(json_string_value(jd));
    if (!dt) return tg_fail(err, "%s: tensor '%s': unknown dtype '%s'", path, name, json_string_value(jd));
    if (!json_is_array(js)) return tg_fail(err, "%s: tensor '%s': missing or non-array \"shape\"", path, name);
    size_t n_dims = json_array_size(js);
    if (n_dims > ST_MAX_DIMS)
        return tg_fail(err, "%s: tensor '%s' has %zu dimensions (at most %d supported)", path, name, n_dims,
                       ST_MAX_DIMS);
    tg_st_tensor t = {.n_dims = (int)n_dims};
    size_t nelem = 1;
    for (size_t d = 0; d < ST_MAX_DIMS; d++) t.shape[d] = 1;
    for (size_t d = 0; d < n_dims; d++) {
        uint64_t v;
        if (!json_u64(json_array_get(js, d), &v))
            return tg_fail(err, "%s: tensor '%s': shape[%zu] is not a non-negative integer", path, name, d);
        t.shape[d] = (int64_t)v;
        if (v > SIZE_MAX || !tg_mul_size(nelem, (size_t)v, &nelem))
            return tg_fail(err, "%s: tensor '%s': element count overflows", path, name);
    }
    size_t need;
    if (!tg_mul_size(nelem, dt->size, &need))
        return tg_fail(err, "%s: tensor '%s': byte size overflows (%zu elements of %s)", path, name, nelem, dt->name);
    uint64_t begin, end;
    if (!json_is_array(jo) || json_array_size(jo) != 2 || !json_u64(json_array_get(jo, 0), &begin) ||
        !json_u64(json_array_get(jo, 1), &end))
        return tg_fail(err, "%s: tensor '%s': \"data_offsets\" must be [begin, end] with non-negative integers", path,
                       name);
    if (end < begin)
        return tg_fail(err, "%s: tensor '%s': data_offsets [%llu, %llu) end before they begin", path, name,
                       (unsigned long long)begin, (unsigned long long)end);
    if (end > dsize)
        return tg_fail(err, "%s: truncated: tensor '%s' data_offsets [%llu, %llu) extend past the end of the data section (%zu bytes)",
                       path, name, (unsigned long long)begin, (unsigned long long)end, dsize);
    if (end - begin != need)
        return tg_fail(err, "%s: tensor '%s': data_offsets [%llu, %llu) hold %llu bytes, but its shape and dtype %s need %zu",
                       path, name, (unsigned long long)begin, (unsigned long long)end,
                       (unsigned long long)(end - begin), dt->name, need);
    t.data = data + begin;
    t.nbytes = need;
    t.dtype = dt->name; /* static string */
    if (st->n_tensors == st->cap_tensors) {
        size_t cap = st->cap_tensors ? st->cap_tensors * 2 : 64;
        tg_st_tensor *nt = realloc(st->tensors, cap * sizeof *nt);
        if (nt) st->tensors = nt;
        size_t *nf = nt ? realloc(st->tensor_file, cap * sizeof *nf) : NULL;
        if (nf) st->tensor_file = nf;
        if (!nt || !nf) return tg_fail(err, "%s: out of memory", path);
        st->cap_tensors = cap;
    }
    t.name = copy_str(name);
    if (!t.name) return tg_fail(err, "%s: out of memory", path);
    st->tensor_file[st->n_tensors] = fi;
    st->tensors[st->n_tensors++] = t;
    return true;
}

/* Maps `path` as a new file of st and appends all its tensors. */
/* Sort order of tensors by data range: begin, then end, then position (so that the order is total). */
typedef struct {
    size_t begin, end, index;
} st_range;

static int range_cmp(const void *a, const void *b) {
    const st_range *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* The format requires the data section to be entirely indexed without holes (no polyglot files) and, as every
 * reader assumes, without overlaps: sorted by offset, the tensors [first, n_tensors) of file fi must tile
 * [0, dsize) exactly. False with a message naming the tensors on either side of the problem. */
static bool check_tiling(const tg_safetensors *st, size_t fi, size_t first, const uint8_t *data, size_t dsize,
                         tg_error *err) {
    const char *path = st->files[fi].path;
    size_t n = st->n_tensors - first;
    if (n == 0) {
        if (dsize != 0)
            return tg_fail(err, "%s: %zu bytes of data after a header that lists no tensors", path, dsize);
        return true;
    }
    st_range *r = malloc(n * sizeof *r); /* n <= the header's size / a few bytes, bounded by the file */
    if (!r) return tg_fail(err, "%s: out of memory", path);
    for (size_t i = 0; i < n; i++) {
        const tg_st_tensor *t = &st->tensors[first + i];
        r[i].begin = (size_t)((const uint8_t *)t->data - data);
        r[i].end = r[i].begin + t->nbytes;
        r[i].index = first + i;
    }
    qsort(r, n, sizeof *r, range_cmp);
    bool ok = true;
    size_t at = 0;
    const char *prev = NULL;
    for (size_t i = 0; i < n && ok; i++) {
        const char *name = st->tensors[r[i].index].name;
        if (r[i].begin < at)
            ok = tg_fail(err, "%s: tensors '%s' and '%s' overlap: '%s' data_offsets [%zu, %zu) begin before '%s' "
                              "ends at %zu", path, prev, name, name, r[i].begin, r[i].end, prev, at);
        else if (r[i].begin > at)
            ok = tg_fail(err, "%s: a hole in the data: bytes [%zu, %zu) between %s%s%s and '%s' belong to no tensor "
                              "(the format forbids holes)", path, at, r[i].begin, prev ? "'" : "",
                         prev ? prev : "the start", prev ? "'" : "", name);
        at = r[i].end;
        prev = name;
    }
    if (ok && at != dsize)
        ok = tg_fail(err, "%s: %zu bytes of data after the last tensor '%s' belong to no tensor (the format forbids "
                          "holes)", path, dsize - at, prev);
    free(r);
    return ok;
}

static bool load_file(tg_safetensors *st, const char *path, tg_error *err) {
    if (st->n_files == st->cap_files) {
        size_t cap = st->cap_files ? st->cap_files * 2 : 4;
        st_file *nf = realloc(st->files, cap * sizeof *nf);
        if (!nf) return tg_fail(err, "%s: out of memory", path);
        st->files = nf;
        st->cap_files = cap;
    }
    size_t fi = st->n_files;
    st_file *f = &st->files[fi];
    f->path = copy_str(path);
    f->map.data = NULL;
    f->map.size = 0;
    if (!f->path) return tg_fail(err, "%s: out of memory", path);
    st->n_files++;
    if (!tg_mapped_file_open(&f->map, path, err)) return false;
    const uint8_t *p = f->map.data;
    size_t size = f->map.size;
    if (size < 8)
        return tg_fail(err, "%s: truncated: not a safetensors file (%zu bytes, the 8-byte header length is missing)",
                       path, size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | p[i];
    /* The length is checked against the format's limit first: a larger value is most likely not a length at all
     * (text, another format), and printing it would echo the file's first bytes. */
    if (n > ST_MAX_HEADER)
        return tg_fail(err, "%s: bad header length: the first 8 bytes give more than the format's limit of %u bytes; "
                            "not a safetensors file?", path, ST_MAX_HEADER);
    if (n > size - 8)
        return tg_fail(err, "%s: bad header length %llu: exceeds the file size (%zu bytes); truncated?", path,
                       (unsigned long long)n, size);
    if (n < 2) return tg_fail(err, "%s: bad header length %llu: too short for a JSON object", path, (unsigned long long)n);
    json_error_t jerr;
    json_t *root = json_loadb((const char *)p + 8, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return tg_fail(err, "%s: bad JSON header: %s (line %d, column %d)", path, jerr.text, jerr.line, jerr.column);
    bool ok = true;
    if (!json_is_object(root)) ok = tg_fail(err, "%s: bad JSON header: not an object", path);
    const char *key;
    json_t *val;
    const uint8_t *data = p + 8 + n;
    size_t dsize = size - 8 - (size_t)n;
    size_t first = st->n_tensors;
    if (ok) {
        json_object_foreach(root, key, val) {
            if (strcmp(key, "__metadata__") == 0) {
                if (!json_is_object(val)) {
                    ok = tg_fail(err, "%s: \"__metadata__\" is not a JSON object", path);
                    break;
                }
                continue;
            }
            if (!add_tensor(st, fi, key, val, data, dsize, err)) {
                ok = false;
                break;
            }
        }
    }
    if (ok) ok = check_tiling(st, fi, first, data, dsize, err);
    json_decref(root);
    return ok;
}

/* ---- opening -------------------------------------------------------------------------------------------------- */

static tg_safetensors *new_handle(const char *label, tg_error *err) {
    tg_safetensors *st = calloc(1, sizeof *st);
    if (st) st->label = copy_str(label);
    if (!st || !st->label) {
        free(st);
        tg_fail(err, "%s: out of memory", label);
        return NULL;
    }
    return st;
}

tg_safetensors *tg_safetensors_open_file(const char *path, tg_error *err) {
    tg_safetensors *st = new_handle(path, err);
    if (!st) return NULL;
    if (!load_file(st, path, err) || !build_index(st, err)) {
        tg_safetensors_close(st);
        return NULL;
    }
    return st;
}

/* The shards of a sharded checkpoint: opens each distinct file named in weight_map once, then checks that every
 * listed tensor is in the shard the index names. */
/* The shards of a sharded checkpoint: opens each distinct file named in weight_map once (each a plain file name of
 * the folder: model_file.h), then checks that every listed tensor is in the shard the index names. */
static bool load_sharded(tg_safetensors *st, const char *dir, const char *index_path, tg_error *err) {
    json_t *root = tg_json_load_path(index_path, JSON_REJECT_DUPLICATES, NULL, err);
    if (!root) return false;
    bool ok = true;
    json_t *map = json_object_get(root, "weight_map");
    if (!json_is_object(map)) ok = tg_fail(err, "%s: missing or non-object \"weight_map\"", index_path);
    const char *key;
    json_t *val;
    if (ok) {
        json_object_foreach(map, key, val) {
            const char *shard = json_is_string(val) ? json_string_value(val) : NULL;
            if (!shard) {
                ok = tg_fail(err, "%s: weight_map entry '%s' is not a file name", index_path, key);
                break;
            }
            char path[4096], what[512];
            snprintf(what, sizeof what, "%.300s: weight_map entry '%.100s'", index_path, key);
            bool missing;
            if (!tg_folder_file(dir, shard, what, path, sizeof path, &missing, err)) {
                if (missing) tg_fail(err, "%s: shard '%s' (holding tensor '%s') is missing", index_path, shard, key);
                ok = false;
                break;
            }
            bool seen = false;
            for (size_t i = 0; i < st->n_files && !seen; i++) seen = strcmp(st->files[i].path, path) == 0;
            if (!seen && !load_file(st, path, err)) {
                ok = false;
                break;
            }
        }
    }
    if (ok) ok = build_index(st, err);
    if (ok) {
        json_object_foreach(map, key, val) {
            size_t i = find_index(st, key);
            const char *want = json_string_value(val);
            const char *have = i == SIZE_MAX ? NULL : strrchr(st->files[st->tensor_file[i]].path, '/');
            if (!have || strcmp(have + 1, want) != 0) {
                ok = tg_fail(err, "%s: tensor '%s' is listed in shard '%s' but is not in it", index_path, key, want);
                break;
            }
        }
    }
    json_decref(root);
    return ok;
}

tg_safetensors *tg_safetensors_open_dir(const char *dir, tg_error *err) {
    char index_path[4096], single_path[4096];
    bool no_index, no_single;
    tg_error why = {0};
    tg_safetensors *st = NULL;
    if (tg_folder_file(dir, ST_INDEX_NAME, NULL, index_path, sizeof index_path, &no_index, err)) {
        st = new_handle(dir, err);
        if (st && !load_sharded(st, dir, index_path, err)) {
            tg_safetensors_close(st);
            st = NULL;
        }
    } else if (!no_index) {
        /* the index is there but not usable (a symlink out of the folder, a bad name): err says why */
    } else if (tg_folder_file(dir, ST_SINGLE_NAME, NULL, single_path, sizeof single_path, &no_single, &why)) {
        st = tg_safetensors_open_file(single_path, err);
    } else if (!no_single) {
        if (err) *err = why;
    } else {
        tg_fail(err, "%s: no weights: neither %s nor %s in this folder", dir, ST_SINGLE_NAME, ST_INDEX_NAME);
    }
    return st;
}

void tg_safetensors_close(tg_safetensors *st) {
    if (!st) return;
    for (size_t i = 0; i < st->n_tensors; i++) free((char *)st->tensors[i].name);
    for (size_t i = 0; i < st->n_files; i++) {
        tg_mapped_file_close(&st->files[i].map);
        free(st->files[i].path);
    }
    free(st->files);
    free(st->tensors);
    free(st->tensor_file);
    tg_name_map_free(&st->index);
    free(st->label);
    free(st);
}

/* ---- lookups -------------------------------------------------------------------------------------------------- */

size_t tg_safetensors_count(const tg_safetensors *st) { return st->n_tensors; }

const tg_st_tensor *tg_safetensors_at(const tg_safetensors *st, size_t i) {
    return i < st->n_tensors ? &st->tensors[i] : NULL;
}

const tg_st_tensor *tg_safetensors_find(const tg_safetensors *st, const char *name) {
    size_t i = find_index(st, name);
    return i == SIZE_MAX ? NULL : &st->tensors[i];
}

bool tg_safetensors_view(const tg_safetensors *st, const char *name, int64_t expect_rows, int64_t expect_cols,
                         tg_tensor *out, tg_error *err) {
    size_t i = find_index(st, name);
    if (i == SIZE_MAX) return tg_fail(err, "%s: tensor '%s' not found", st->label, name);
    const tg_st_tensor *t = &st->tensors[i];
    const char *path = st->files[st->tensor_file[i]].path;
    tg_dtype dt;
    if (!tg_dtype_from_safetensors(t->dtype, &dt)) {
        char supported[128];
        tg_weight_type_names(true, supported, sizeof supported);
        return tg_fail(err, "%s: tensor '%s' has dtype %s, which is not supported (supported: %s)", path, name,
                       t->dtype, supported);
    }
    const size_t align = tg_weight_type_of(dt)->align;
    if (t->n_dims > 2)
        return tg_fail(err, "%s: tensor '%s' has %d dimensions, expected a matrix or vector", path, name, t->n_dims);
    int64_t rows = t->n_dims == 2 ? t->shape[0] : 1;
    int64_t cols = t->n_dims == 2 ? t->shape[1] : t->n_dims == 1 ? t->shape[0] : 1;
    if (!tg_tensor_check_shape(path, name, rows, cols, expect_rows, expect_cols, err)) return false;
    if ((uintptr_t)t->data % align != 0)
        return tg_fail(err, "%s: tensor '%s' data is not aligned to %zu bytes", path, name, align);
    *out = (tg_tensor){dt, rows, cols, t->data, 0}; /* the file's layout */
    return true;
}
