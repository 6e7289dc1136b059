/* gguf_builder.c — test support: serialises GGUF files (metadata and tensors) built up from C calls. */
#define _XOPEN_SOURCE 700
#include "gguf_builder.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    uint8_t *p;
    size_t len, cap;
} gb_buf;

typedef struct {
    char *name;
    uint32_t type;
    uint32_t n_dims;
    uint64_t ne[8];
    uint8_t *data; /* [nbytes] */
    size_t nbytes;
    bool offset_set;
    uint64_t offset;
} gb_tensor;

struct gguf_builder {
    uint32_t version;
    size_t alignment;
    gb_buf kv;         /* serialised metadata entries */
    uint64_t n_kv;
    gb_tensor *tensors; /* [n_tensors] */
    size_t n_tensors, cap_tensors;
};

static void *gb_alloc(size_t n) {
    void *p = calloc(1, n ? n : 1);
    if (!p) abort();
    return p;
}

static void buf_put(gb_buf *b, const void *src, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) abort();
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void buf_zeros(gb_buf *b, size_t n) {
    static const uint8_t z[64];
    while (n) {
        size_t k = n < sizeof z ? n : sizeof z;
        buf_put(b, z, k);
        n -= k;
    }
}

static void buf_u32(gb_buf *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    buf_put(b, x, 4);
}

static void buf_u64(gb_buf *b, uint64_t v) {
    buf_u32(b, (uint32_t)v);
    buf_u32(b, (uint32_t)(v >> 32));
}

static void buf_str(gb_buf *b, const char *s, size_t n) {
    buf_u64(b, n);
    buf_put(b, s, n);
}

/* Little-endian encoding of one fixed-size host value of value type t. */
static void buf_scalar(gb_buf *b, int t, const void *v) {
    switch (t) {
    case GGUF_BUILDER_T_U8:
    case GGUF_BUILDER_T_I8:
    case GGUF_BUILDER_T_BOOL: buf_put(b, v, 1); break;
    case GGUF_BUILDER_T_U16:
    case GGUF_BUILDER_T_I16: {
        uint16_t x;
        memcpy(&x, v, 2);
        uint8_t e[2] = {(uint8_t)x, (uint8_t)(x >> 8)};
        buf_put(b, e, 2);
        break;
    }
    case GGUF_BUILDER_T_U32:
    case GGUF_BUILDER_T_I32:
    case GGUF_BUILDER_T_F32: {
        uint32_t x;
        memcpy(&x, v, 4);
        buf_u32(b, x);
        break;
    }
    default: { /* U64, I64, F64 */
        uint64_t x;
        memcpy(&x, v, 8);
        buf_u64(b, x);
        break;
    }
    }
}

static size_t scalar_size(int t) {
    static const size_t sizes[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return t >= 0 && t < 13 ? sizes[t] : 0;
}

gguf_builder *gguf_builder_new(void) {
    gguf_builder *b = gb_alloc(sizeof *b);
    b->version = 3;
    b->alignment = 32;
    return b;
}

void gguf_builder_free(gguf_builder *b) {
    if (!b) return;
    for (size_t i = 0; i < b->n_tensors; i++) {
        free(b->tensors[i].name);
        free(b->tensors[i].data);
    }
    free(b->tensors);
    free(b->kv.p);
    free(b);
}

void gguf_builder_set_version(gguf_builder *b, uint32_t version) { b->version = version; }

static void add_key(gguf_builder *b, const char *key, uint32_t type) {
    buf_str(&b->kv, key, strlen(key));
    buf_u32(&b->kv, type);
    b->n_kv++;
}

static void add_scalar(gguf_builder *b, const char *key, int type, const void *v) {
    add_key(b, key, (uint32_t)type);
    buf_scalar(&b->kv, type, v);
}

void gguf_builder_set_alignment(gguf_builder *b, uint32_t a) {
    add_scalar(b, "general.alignment", GGUF_BUILDER_T_U32, &a);
    if (a != 0 && (a & (a - 1)) == 0) b->alignment = a;
}

void gguf_builder_add_u8(gguf_builder *b, const char *key, uint8_t v) { add_scalar(b, key, GGUF_BUILDER_T_U8, &v); }
void gguf_builder_add_i8(gguf_builder *b, const char *key, int8_t v) { add_scalar(b, key, GGUF_BUILDER_T_I8, &v); }
void gguf_builder_add_u16(gguf_builder *b, const char *key, uint16_t v) { add_scalar(b, key, GGUF_BUILDER_T_U16, &v); }
void gguf_builder_add_i16(gguf_builder *b, const char *key, int16_t v) { add_scalar(b, key, GGUF_BUILDER_T_I16, &v); }
void gguf_builder_add_u32(gguf_builder *b, const char *key, uint32_t v) { add_scalar(b, key, GGUF_BUILDER_T_U32, &v); }
void gguf_builder_add_i32(gguf_builder *b, const char *key, int32_t v) { add_scalar(b, key, GGUF_BUILDER_T_I32, &v); }
void gguf_builder_add_u64(gguf_builder *b, const char *key, uint64_t v) { add_scalar(b, key, GGUF_BUILDER_T_U64, &v); }
void gguf_builder_add_i64(gguf_builder *b, const char *key, int64_t v) { add_scalar(b, key, GGUF_BUILDER_T_I64, &v); }
void gguf_builder_add_f32(gguf_builder *b, const char *key, float v) { add_scalar(b, key, GGUF_BUILDER_T_F32, &v); }
void gguf_builder_add_f64(gguf_builder *b, const char *key, double v) { add_scalar(b, key, GGUF_BUILDER_T_F64, &v); }

void gguf_builder_add_bool(gguf_builder *b, const char *key, bool v) {
    uint8_t x = v ? 1 : 0;
    add_scalar(b, key, GGUF_BUILDER_T_BOOL, &x);
}

void gguf_builder_add_strn(gguf_builder *b, const char *key, const char *v, size_t n) {
    add_key(b, key, GGUF_BUILDER_T_STRING);
    buf_str(&b->kv, v, n);
}

void gguf_builder_add_str(gguf_builder *b, const char *key, const char *v) { gguf_builder_add_strn(b, key, v, strlen(v)); }

void gguf_builder_add_arr(gguf_builder *b, const char *key, int elem_type, size_t count, const void *elems) {
    add_key(b, key, GGUF_BUILDER_T_ARRAY);
    buf_u32(&b->kv, (uint32_t)elem_type);
    buf_u64(&b->kv, count);
    size_t sz = scalar_size(elem_type);
    for (size_t i = 0; i < count && sz; i++) buf_scalar(&b->kv, elem_type, (const uint8_t *)elems + i * sz);
}

void gguf_builder_add_arr_str(gguf_builder *b, const char *key, size_t count, const char *const *strs) {
    add_key(b, key, GGUF_BUILDER_T_ARRAY);
    buf_u32(&b->kv, GGUF_BUILDER_T_STRING);
    buf_u64(&b->kv, count);
    for (size_t i = 0; i < count; i++) buf_str(&b->kv, strs[i], strlen(strs[i]));
}

void gguf_builder_add_arr_f32(gguf_builder *b, const char *key, size_t count, const float *v) {
    gguf_builder_add_arr(b, key, GGUF_BUILDER_T_F32, count, v);
}

void gguf_builder_add_arr_i32(gguf_builder *b, const char *key, size_t count, const int32_t *v) {
    gguf_builder_add_arr(b, key, GGUF_BUILDER_T_I32, count, v);
}

void gguf_builder_add_raw(gguf_builder *b, const char *key, uint32_t type, const void *bytes, size_t n) {
    add_key(b, key, type);
    buf_put(&b->kv, bytes, n);
}

int gguf_builder_add_tensor_raw(gguf_builder *b, const char *name, uint32_t ggml_type, uint32_t n_dims,
                                const uint64_t *ne, const void *data, size_t nbytes) {
    if (b->n_tensors == b->cap_tensors) {
        size_t cap = b->cap_tensors ? b->cap_tensors * 2 : 8;
        gb_tensor *p = realloc(b->tensors, cap * sizeof *p);
        if (!p) abort();
        b->tensors = p;
        b->cap_tensors = cap;
    }
    gb_tensor *t = &b->tensors[b->n_tensors];
    memset(t, 0, sizeof *t);
    size_t nl = strlen(name);
    t->name = gb_alloc(nl + 1);
    memcpy(t->name, name, nl + 1);
    t->type = ggml_type;
    t->n_dims = n_dims > 8 ? 8 : n_dims;
    for (uint32_t d = 0; d < t->n_dims; d++) t->ne[d] = ne[d];
    t->data = gb_alloc(nbytes);
    if (data && nbytes) memcpy(t->data, data, nbytes);
    t->nbytes = nbytes;
    return (int)b->n_tensors++;
}

int gguf_builder_add_tensor(gguf_builder *b, const char *name, uint32_t ggml_type, int n_dims, const int64_t *ne,
                            const void *data) {
    size_t block, bytes;
    switch (ggml_type) {
    case GGUF_BUILDER_F32: block = 1, bytes = 4; break;
    case GGUF_BUILDER_F16:
    case GGUF_BUILDER_BF16: block = 1, bytes = 2; break;
    case GGUF_BUILDER_Q8_0: block = 32, bytes = 34; break;
    case GGUF_BUILDER_Q4_0: block = 32, bytes = 18; break;
    case GGUF_BUILDER_Q4_1: block = 32, bytes = 20; break;
    case GGUF_BUILDER_Q4_K: block = 256, bytes = 144; break;
    case GGUF_BUILDER_Q6_K: block = 256, bytes = 210; break;
    case GGUF_BUILDER_IQ2_XXS: block = 256, bytes = 66; break;
    default: return -1;
    }
    if (n_dims < 1 || n_dims > 4 || ne[0] < 0 || ne[0] % (int64_t)block != 0) return -1;
    uint64_t une[4];
    size_t nelem = 1;
    for (int d = 0; d < n_dims; d++) {
        if (ne[d] < 0) return -1;
        une[d] = (uint64_t)ne[d];
        nelem *= (size_t)ne[d];
    }
    return gguf_builder_add_tensor_raw(b, name, ggml_type, (uint32_t)n_dims, une, data, nelem / block * bytes);
}

void gguf_builder_set_tensor_offset(gguf_builder *b, int i, uint64_t offset) {
    if (i < 0 || (size_t)i >= b->n_tensors) return;
    b->tensors[i].offset_set = true;
    b->tensors[i].offset = offset;
}

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

uint8_t *gguf_builder_bytes(const gguf_builder *b, size_t *size) {
    gb_buf out = {0};
    buf_put(&out, "GGUF", 4);
    buf_u32(&out, b->version);
    buf_u64(&out, b->n_tensors);
    buf_u64(&out, b->n_kv);
    buf_put(&out, b->kv.p, b->kv.len);
    size_t off = 0;
    for (size_t i = 0; i < b->n_tensors; i++) {
        const gb_tensor *t = &b->tensors[i];
        buf_str(&out, t->name, strlen(t->name));
        buf_u32(&out, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++) buf_u64(&out, t->ne[d]);
        buf_u32(&out, t->type);
        buf_u64(&out, t->offset_set ? t->offset : off);
        off = align_up(off + t->nbytes, b->alignment);
    }
    if (b->n_tensors) {
        buf_zeros(&out, align_up(out.len, b->alignment) - out.len);
        for (size_t i = 0; i < b->n_tensors; i++) {
            const gb_tensor *t = &b->tensors[i];
            buf_put(&out, t->data, t->nbytes);
            buf_zeros(&out, align_up(t->nbytes, b->alignment) - t->nbytes);
        }
    }
    *size = out.len;
    return out.p;
}

bool gguf_builder_write_bytes(const char *path, const void *bytes, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(bytes, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

bool gguf_builder_write(const gguf_builder *b, const char *path) {
    size_t n;
    uint8_t *p = gguf_builder_bytes(b, &n);
    bool ok = gguf_builder_write_bytes(path, p, n);
    free(p);
    return ok;
}

char *gguf_builder_tmpdir(void) {
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    char *dir = gguf_builder_path(base, "tinygpt-test-XXXXXX");
    if (!mkdtemp(dir)) {
        free(dir);
        return NULL;
    }
    return dir;
}

char *gguf_builder_path(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = gb_alloc(n);
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

void gguf_builder_rmdir(const char *dir) {
    if (!dir) return;
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            char *p = gguf_builder_path(dir, e->d_name);
            struct stat st;
            if (lstat(p, &st) == 0 && !S_ISDIR(st.st_mode)) unlink(p);
            free(p);
        }
        closedir(d);
    }
    rmdir(dir);
}
