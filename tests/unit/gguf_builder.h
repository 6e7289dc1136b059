/* gguf_builder.h — test support: writes GGUF files (metadata of every type, tensors of any type and shape) from C.
 *
 * Typical use:
 *     gguf_builder *b = gguf_builder_new();
 *     gguf_builder_add_str(b, "general.architecture", "llama");
 *     gguf_builder_add_u32(b, "llama.block_count", 2);
 *     int64_t ne[2] = {64, 32};                         // ne0 = cols (fastest), ne1 = rows
 *     gguf_builder_add_tensor(b, "token_embd.weight", GGUF_BUILDER_F32, 2, ne, floats);  // floats: [32][64]
 *     char *dir = gguf_builder_tmpdir();
 *     char *path = gguf_builder_path(dir, "model.gguf");
 *     gguf_builder_write(b, path);
 *     ...
 *     gguf_builder_free(b); gguf_builder_rmdir(dir); free(path); free(dir);
 *
 * Values are written little-endian as the file format requires (the host is assumed little-endian for tensor data,
 * which is copied verbatim). The builder aborts on out-of-memory: it is test code. Entries are written in the order
 * added; nothing is validated, so tests can also write malformed files (see _add_raw, _add_tensor_raw,
 * _set_tensor_offset, _set_version).
 */
#ifndef TG_TESTS_GGUF_BUILDER_H
#define TG_TESTS_GGUF_BUILDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ggml tensor type numbers (as in the GGUF spec). */
enum {
    GGUF_BUILDER_F32 = 0,
    GGUF_BUILDER_F16 = 1,
    GGUF_BUILDER_Q4_0 = 2,
    GGUF_BUILDER_Q4_1 = 3,
    GGUF_BUILDER_Q8_0 = 8,
    GGUF_BUILDER_Q4_K = 12,
    GGUF_BUILDER_Q6_K = 14,
    GGUF_BUILDER_IQ2_XXS = 16, /* known to GGUF, not read by tinygpt */
    GGUF_BUILDER_BF16 = 30,
};

/* Metadata value type numbers (as in the GGUF spec; same values as tg_gguf_type). */
enum {
    GGUF_BUILDER_T_U8 = 0, GGUF_BUILDER_T_I8 = 1, GGUF_BUILDER_T_U16 = 2, GGUF_BUILDER_T_I16 = 3,
    GGUF_BUILDER_T_U32 = 4, GGUF_BUILDER_T_I32 = 5, GGUF_BUILDER_T_F32 = 6, GGUF_BUILDER_T_BOOL = 7,
    GGUF_BUILDER_T_STRING = 8, GGUF_BUILDER_T_ARRAY = 9, GGUF_BUILDER_T_U64 = 10, GGUF_BUILDER_T_I64 = 11,
    GGUF_BUILDER_T_F64 = 12,
};

typedef struct gguf_builder gguf_builder;

/* A new, empty file description: GGUF version 3, data alignment 32 (no general.alignment key). */
gguf_builder *gguf_builder_new(void);
/* Frees b; NULL is a no-op. */
void gguf_builder_free(gguf_builder *b);

/* The version number written in the header (the v2/v3 layout is always used). */
void gguf_builder_set_version(gguf_builder *b, uint32_t version);
/* Adds the key general.alignment = a (u32) and, when a is a power of two, lays the data section out with it (other
 * values are written as given while the layout keeps the previous alignment, for testing rejection). */
void gguf_builder_set_alignment(gguf_builder *b, uint32_t a);

/* Scalar metadata. */
void gguf_builder_add_u8(gguf_builder *b, const char *key, uint8_t v);
void gguf_builder_add_i8(gguf_builder *b, const char *key, int8_t v);
void gguf_builder_add_u16(gguf_builder *b, const char *key, uint16_t v);
void gguf_builder_add_i16(gguf_builder *b, const char *key, int16_t v);
void gguf_builder_add_u32(gguf_builder *b, const char *key, uint32_t v);
void gguf_builder_add_i32(gguf_builder *b, const char *key, int32_t v);
void gguf_builder_add_u64(gguf_builder *b, const char *key, uint64_t v);
void gguf_builder_add_i64(gguf_builder *b, const char *key, int64_t v);
void gguf_builder_add_f32(gguf_builder *b, const char *key, float v);
void gguf_builder_add_f64(gguf_builder *b, const char *key, double v);
void gguf_builder_add_bool(gguf_builder *b, const char *key, bool v);
void gguf_builder_add_str(gguf_builder *b, const char *key, const char *v);
/* A string value of n bytes (may hold NULs). */
void gguf_builder_add_strn(gguf_builder *b, const char *key, const char *v, size_t n);

/* An array of `count` fixed-size elements of value type elem_type (not STRING/ARRAY), given as host values:
 * uint8_t/int8_t/uint16_t/.../float/double, and uint8_t 0/1 for BOOL. */
void gguf_builder_add_arr(gguf_builder *b, const char *key, int elem_type, size_t count, const void *elems);
void gguf_builder_add_arr_str(gguf_builder *b, const char *key, size_t count, const char *const *strs);
void gguf_builder_add_arr_f32(gguf_builder *b, const char *key, size_t count, const float *v);
void gguf_builder_add_arr_i32(gguf_builder *b, const char *key, size_t count, const int32_t *v);
/* A value of type `type` whose encoding is the n bytes given, verbatim (nested arrays, malformed values). */
void gguf_builder_add_raw(gguf_builder *b, const char *key, uint32_t type, const void *bytes, size_t n);

/* Adds a tensor with n_dims (1..4) sizes ne[] (ne[0] fastest). Its byte size comes from the builder's own table
 * (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K, IQ2_XXS); data (that many bytes) is copied, NULL writes zeros. Returns the
 * tensor's index, or -1 (nothing added) when the type is not in the table or ne0 is not a whole number of blocks. */
int gguf_builder_add_tensor(gguf_builder *b, const char *name, uint32_t ggml_type, int n_dims, const int64_t *ne,
                            const void *data);
/* Adds a tensor info written exactly as given (n_dims 0..8 sizes, any type number) with nbytes of data (copied
 * from data, or zeros when NULL). Returns its index. */
int gguf_builder_add_tensor_raw(gguf_builder *b, const char *name, uint32_t ggml_type, uint32_t n_dims,
                                const uint64_t *ne, const void *data, size_t nbytes);
/* Writes `offset` as tensor i's data offset instead of the computed one (the data is still laid out normally). */
void gguf_builder_set_tensor_offset(gguf_builder *b, int i, uint64_t offset);

/* The whole file as a malloc'd buffer of *size bytes (caller frees). */
uint8_t *gguf_builder_bytes(const gguf_builder *b, size_t *size);
/* Writes the file; false if it cannot be written. */
bool gguf_builder_write(const gguf_builder *b, const char *path);

/* File helpers for tests. */
/* A new empty directory under $TMPDIR (or /tmp), malloc'd path; NULL on failure. */
char *gguf_builder_tmpdir(void);
/* dir + "/" + name, malloc'd. */
char *gguf_builder_path(const char *dir, const char *name);
/* Writes n bytes to path; false on failure. */
bool gguf_builder_write_bytes(const char *path, const void *bytes, size_t n);
/* Removes the plain files inside dir and then dir itself (not recursive); NULL is a no-op. */
void gguf_builder_rmdir(const char *dir);

#endif
