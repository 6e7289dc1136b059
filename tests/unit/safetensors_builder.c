/* safetensors_builder.c — test support: serialises tensors into .safetensors files and sharded folders. */
#include "safetensors_builder.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *name;
    char dtype[16];
    int n_dims;
    int64_t shape[8];
    uint8_t *data; /* [nbytes] */
    size_t nbytes;
} sb_tensor;

struct safetensors_builder {
    sb_tensor *tensors; /* [n] */
    size_t n, cap;
    json_t *metadata;   /* object of strings, or NULL */
};

static size_t sb_dtype_size(const char *dtype) {
    static const struct {
        const char *name;
        size_t size;
    } k[] = {{"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},  {"I32", 4},     {"I16", 2},
             {"I8", 1},  {"U64", 8}, {"U32", 4}, {"U16", 2},  {"U8", 1},   {"BOOL", 1},    {"F8_E4M3", 1},
             {"F8_E5M2", 1}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (strcmp(k[i].name, dtype) == 0) return k[i].size;
    return 0;
}

static void *sb_alloc(size_t n) {
    void *p = calloc(1, n ? n : 1);
    if (!p) abort();
    return p;
}

safetensors_builder *safetensors_builder_new(void) { return sb_alloc(sizeof(safetensors_builder)); }

void safetensors_builder_free(safetensors_builder *b) {
    if (!b) return;
    for (size_t i = 0; i < b->n; i++) {
        free(b->tensors[i].name);
        free(b->tensors[i].data);
    }
    free(b->tensors);
    json_decref(b->metadata);
    free(b);
}

bool safetensors_builder_add(safetensors_builder *b, const char *name, const char *dtype, int n_dims,
                             const int64_t *shape, const void *data) {
    size_t esize = sb_dtype_size(dtype);
    if (!esize || n_dims < 0 || n_dims > 8) return false;
    size_t nelem = 1;
    for (int d = 0; d < n_dims; d++) {
        if (shape[d] < 0) return false;
        nelem *= (size_t)shape[d];
    }
    if (b->n == b->cap) {
        b->cap = b->cap ? b->cap * 2 : 16;
        sb_tensor *p = realloc(b->tensors, b->cap * sizeof *p);
        if (!p) abort();
        b->tensors = p;
    }
    sb_tensor *t = &b->tensors[b->n++];
    memset(t, 0, sizeof *t);
    size_t nl = strlen(name);
    t->name = sb_alloc(nl + 1);
    memcpy(t->name, name, nl + 1);
    snprintf(t->dtype, sizeof t->dtype, "%s", dtype);
    t->n_dims = n_dims;
    for (int d = 0; d < n_dims; d++) t->shape[d] = shape[d];
    t->nbytes = nelem * esize;
    t->data = sb_alloc(t->nbytes);
    if (data && t->nbytes) memcpy(t->data, data, t->nbytes);
    return true;
}

void safetensors_builder_add_metadata(safetensors_builder *b, const char *key, const char *value) {
    if (!b->metadata) b->metadata = json_object();
    json_object_set_new(b->metadata, key, json_string(value));
}

static bool put_u64(FILE *f, uint64_t v) {
    uint8_t x[8];
    for (int i = 0; i < 8; i++) x[i] = (uint8_t)(v >> (8 * i));
    return fwrite(x, 1, 8, f) == 8;
}

bool safetensors_builder_write_raw(const char *path, const char *header, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    size_t hl = strlen(header);
    bool ok = put_u64(f, hl) && fwrite(header, 1, hl, f) == hl && (n == 0 || fwrite(data, 1, n, f) == n);
    return fclose(f) == 0 && ok;
}

/* Writes the tensors i with i % stride == first into path. Like the safetensors library, the data is laid out by
 * decreasing dtype size (stable), so every tensor is aligned to its element size when the data section is. */
static bool write_subset(const safetensors_builder *b, const char *path, size_t first, size_t stride) {
    json_t *root = json_object();
    if (b->metadata) json_object_set(root, "__metadata__", b->metadata);
    size_t *order = sb_alloc(b->n * sizeof *order), n_order = 0;
    static const size_t sizes[] = {8, 4, 2, 1};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
        for (size_t i = first; i < b->n; i += stride)
            if (sb_dtype_size(b->tensors[i].dtype) == sizes[s]) order[n_order++] = i;
    size_t off = 0;
    for (size_t k = 0; k < n_order; k++) {
        const sb_tensor *t = &b->tensors[order[k]];
        json_t *shape = json_array();
        for (int d = 0; d < t->n_dims; d++) json_array_append_new(shape, json_integer(t->shape[d]));
        json_t *desc = json_pack("{s:s, s:o, s:[I, I]}", "dtype", t->dtype, "shape", shape, "data_offsets",
                                 (json_int_t)off, (json_int_t)(off + t->nbytes));
        if (!desc) abort();
        json_object_set_new(root, t->name, desc);
        off += t->nbytes;
    }
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!text) abort();
    size_t hl = strlen(text), padded = (hl + 7) / 8 * 8;
    char *header = sb_alloc(padded + 1);
    memcpy(header, text, hl);
    memset(header + hl, ' ', padded - hl);
    free(text);
    FILE *f = fopen(path, "wb");
    bool ok = f != NULL;
    if (ok) ok = put_u64(f, padded) && fwrite(header, 1, padded, f) == padded;
    for (size_t k = 0; ok && k < n_order; k++) {
        const sb_tensor *t = &b->tensors[order[k]];
        ok = t->nbytes == 0 || fwrite(t->data, 1, t->nbytes, f) == t->nbytes;
    }
    if (f && fclose(f) != 0) ok = false;
    free(header);
    free(order);
    return ok;
}

bool safetensors_builder_write(const safetensors_builder *b, const char *path) { return write_subset(b, path, 0, 1); }

bool safetensors_builder_write_sharded(const safetensors_builder *b, const char *dir, int n_shards) {
    if (n_shards < 1) return false;
    json_t *map = json_object();
    bool ok = true;
    char name[64], path[4096];
    for (int s = 0; s < n_shards && ok; s++) {
        snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, n_shards);
        snprintf(path, sizeof path, "%s/%s", dir, name);
        ok = write_subset(b, path, (size_t)s, (size_t)n_shards);
        for (size_t i = (size_t)s; i < b->n; i += (size_t)n_shards)
            json_object_set_new(map, b->tensors[i].name, json_string(name));
    }
    json_t *root = json_pack("{s:{s:I}, s:o}", "metadata", "total_size", (json_int_t)0, "weight_map", map);
    if (!root) abort();
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (ok) ok = json_dump_file(root, path, JSON_INDENT(2)) == 0;
    json_decref(root);
    return ok;
}
