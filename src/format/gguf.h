/* gguf.h — a validating reader of GGUF v2/v3 files (metadata and tensor infos), weights mmapped in place. */
#ifndef TG_FORMAT_GGUF_H
#define TG_FORMAT_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/tensor.h"
#include "tinygpt.h"

/* GGUF metadata value types, numbered as in the spec. */
typedef enum {
    TG_GGUF_U8 = 0, TG_GGUF_I8 = 1, TG_GGUF_U16 = 2, TG_GGUF_I16 = 3, TG_GGUF_U32 = 4, TG_GGUF_I32 = 5,
    TG_GGUF_F32 = 6, TG_GGUF_BOOL = 7, TG_GGUF_STRING = 8, TG_GGUF_ARRAY = 9, TG_GGUF_U64 = 10, TG_GGUF_I64 = 11,
    TG_GGUF_F64 = 12,
} tg_gguf_type;

/* A string inside the mapping (not NUL-terminated). */
typedef struct {
    const char *ptr;
    uint64_t len;
} tg_gguf_str;

typedef struct tg_gguf tg_gguf;

/* Opens and validates path: magic, version 2 or 3, every count, string length, array size, tensor dims, type,
 * alignment and offset + size against the file length (all with checked arithmetic). Returns NULL with a message
 * naming the file and the problem. Tensor types other than F32/F16/BF16/Q8_0/Q4_0 are accepted while parsing
 * (the message comes when a loader asks for such a tensor via tg_gguf_tensor_view). */
tg_gguf *tg_gguf_open(const char *path, tg_error *err);
void tg_gguf_close(tg_gguf *g);

uint32_t tg_gguf_version(const tg_gguf *g);
const char *tg_gguf_path(const tg_gguf *g);
/* general.alignment (32 when absent) and the absolute file offset of the (aligned) tensor data section. */
size_t tg_gguf_alignment(const tg_gguf *g);
size_t tg_gguf_data_offset(const tg_gguf *g);

/* Metadata lookups by exact key. Integer getters accept any integer type whose value fits; false when the key is
 * absent or of an incompatible type. */
bool tg_gguf_has(const tg_gguf *g, const char *key);
bool tg_gguf_get_i64(const tg_gguf *g, const char *key, int64_t *out);
bool tg_gguf_get_f32(const tg_gguf *g, const char *key, float *out); /* accepts F32, F64 */
bool tg_gguf_get_bool(const tg_gguf *g, const char *key, bool *out);
bool tg_gguf_get_str(const tg_gguf *g, const char *key, tg_gguf_str *out);

/* An array value: its element type and count. Elements are read with the accessors below (index < count). */
typedef struct {
    tg_gguf_type elem_type;
    uint64_t count;
    const uint8_t *data; /* first element inside the mapping (strings are stored length-prefixed) */
    const tg_gguf *owner;
    const void *index;   /* private: the O(1) element index of a top-level STRING array (NULL otherwise) */
} tg_gguf_array;
bool tg_gguf_get_array(const tg_gguf *g, const char *key, tg_gguf_array *out);
/* Element i of a STRING array. Uses an index built at open time, so O(1). An empty string ({NULL, 0}) when i is out
 * of range or the array is not a top-level STRING array. */
tg_gguf_str tg_gguf_array_str(const tg_gguf_array *a, uint64_t i);
/* F32 (or F64, rounded) arrays; 0 when i is out of range or the type differs. */
float tg_gguf_array_f32(const tg_gguf_array *a, uint64_t i);
/* Any integer array (and BOOL as 0/1); U64 values above INT64_MAX saturate; 0 when out of range or not integer. */
int64_t tg_gguf_array_i64(const tg_gguf_array *a, uint64_t i);
/* Arrays of arrays are valid GGUF and are parsed and validated (nesting at most 8 deep); their elements have no
 * accessor (elem_type is TG_GGUF_ARRAY, the accessors above return 0/empty). */

/* Enumerating metadata (for `info` and tests). */
uint64_t tg_gguf_n_kv(const tg_gguf *g);
tg_gguf_str tg_gguf_kv_key(const tg_gguf *g, uint64_t i);
tg_gguf_type tg_gguf_kv_type(const tg_gguf *g, uint64_t i);

/* Tensors. */
typedef struct {
    tg_gguf_str name;
    uint32_t ggml_type;   /* raw ggml type number */
    uint32_t n_dims;
    int64_t ne[4];        /* ne[0] fastest; unused dims are 1 */
    const uint8_t *data;  /* inside the mapping, validated in range */
    size_t nbytes;
} tg_gguf_tensor;

uint64_t tg_gguf_n_tensors(const tg_gguf *g);
const tg_gguf_tensor *tg_gguf_tensor_at(const tg_gguf *g, uint64_t i);
const tg_gguf_tensor *tg_gguf_find_tensor(const tg_gguf *g, const char *name);
/* ggml type name ("F32", "Q4_K", ...) as a static string, or "unknown" for numbers this reader does not know
 * (messages print the number themselves). */
const char *tg_gguf_type_name(uint32_t ggml_type);
/* Block layout of a known ggml type: elements per block and bytes per block. False for unknown type numbers. */
bool tg_gguf_type_layout(uint32_t ggml_type, size_t *block_elems, size_t *block_bytes);
/* Name of a metadata value type ("u32", "string", "array", ...), "?" when out of range. */
const char *tg_gguf_value_type_name(tg_gguf_type t);
/* A 2-D (or 1-D) view of tensor `name` with shape [rows, cols] = [ne1, ne0]. False with a message naming the file,
 * the tensor and the problem when it is absent, of an unsupported type, or not of the expected shape
 * (expect_rows/expect_cols; pass rows = 1 for 1-D tensors; a negative expectation is not checked). Tensors with
 * ne2 or ne3 > 1 and data not aligned for the element type are rejected. */
bool tg_gguf_tensor_view(const tg_gguf *g, const char *name, int64_t expect_rows, int64_t expect_cols,
                         tg_tensor *out, tg_error *err);

#endif
