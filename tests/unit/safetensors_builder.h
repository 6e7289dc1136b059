/* safetensors_builder.h — test support: writes .safetensors files (and sharded folders with their index.json) from C.
 *
 * Typical use (a Hugging Face folder for a loader test; the folder helpers are in gguf_builder.h):
 *     safetensors_builder *b = safetensors_builder_new();
 *     safetensors_builder_add(b, "model.norm.weight", "F32", 1, (int64_t[]){64}, norm);  // norm: float[64]
 *     safetensors_builder_add(b, "lm_head.weight", "F16", 2, (int64_t[]){100, 64}, w);  // [rows, cols], row-major
 *     char *path = gguf_builder_path(dir, "model.safetensors");
 *     safetensors_builder_write(b, path);                 // or safetensors_builder_write_sharded(b, dir, 2)
 *     safetensors_builder_free(b);
 *
 * Tensor data is copied verbatim (host byte order, assumed little-endian). The header is written by jansson and
 * padded with spaces so the data section starts 8-byte aligned. Aborts on out-of-memory (test code).
 */
#ifndef TG_TESTS_SAFETENSORS_BUILDER_H
#define TG_TESTS_SAFETENSORS_BUILDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct safetensors_builder safetensors_builder;

safetensors_builder *safetensors_builder_new(void);
/* Frees b; NULL is a no-op. */
void safetensors_builder_free(safetensors_builder *b);

/* Adds a tensor of dtype ("F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL", ...) and shape
 * [n_dims] (0..8 dims, outermost first); data holds product(shape) * dtype-size bytes (copied; NULL writes zeros).
 * False (nothing added) for a dtype the builder does not know or a negative size. */
bool safetensors_builder_add(safetensors_builder *b, const char *name, const char *dtype, int n_dims,
                             const int64_t *shape, const void *data);
/* Adds a "__metadata__" string entry. */
void safetensors_builder_add_metadata(safetensors_builder *b, const char *key, const char *value);

/* Writes every tensor into one file. False if it cannot be written. */
bool safetensors_builder_write(const safetensors_builder *b, const char *path);
/* Writes the tensors round-robin into n_shards files dir/model-0000k-of-0000n.safetensors (k from 1) and
 * dir/model.safetensors.index.json mapping each tensor to its shard. */
bool safetensors_builder_write_sharded(const safetensors_builder *b, const char *dir, int n_shards);
/* Writes a file by hand: the 8-byte little-endian length of `header` (as given, no padding), header, then n data
 * bytes — for malformed-header tests. */
bool safetensors_builder_write_raw(const char *path, const char *header, const void *data, size_t n);

#endif
