/* gguf_dequant.c — every tensor of a GGUF file decoded by tinygpt's own row decoders (the weight-type table's
 * reference decoder, tg_dequantize_row), one raw file of little-endian f32 per tensor, so that the values can be
 * compared with another implementation's (tools/llamacpp_kquant_refs.py: gguf-py's numpy dequantiser;
 * tests/cli/test_kquant_llamacpp.sh: sha256 sums of those). Not part of the library: a tool built by `make tools`
 * (and under the sanitizers by `make unit-tests`).
 *
 *   gguf_dequant FILE OUT_DIR
 *
 * Writes OUT_DIR/NAME.f32 (NAME: the tensor's name, which must be made of [A-Za-z0-9._-] and not start with '.')
 * and prints one line per tensor on stdout: NAME TYPE ELEMENTS. A tensor of a type tinygpt does not read, or whose
 * rows are not whole blocks, is an error (exit 1, one line on stderr). */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/gguf.h"
#include "kernels/types.h"
#include "util/checked.h"

static int fail(const char *path, const char *msg, const char *name) {
    fprintf(stderr, "gguf_dequant: %s: %s%s%s\n", path, name ? "tensor '" : "", name ? name : "", msg);
    return 1;
}

static int safe_name(const tg_gguf_str *s) {
    if (s->len == 0 || s->len > 200 || s->ptr[0] == '.') return 0;
    for (uint64_t i = 0; i < s->len; i++) {
        char c = s->ptr[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-'))
            return 0;
    }
    return 1;
}

/* Decodes tensor t (rows of ne0 elements) into OUT_DIR/NAME.f32. */
static int dump_tensor(const char *path, const char *out_dir, const tg_gguf_tensor *t) {
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
    if (!safe_name(&t->name)) return fail(path, "': a name that is not a plain file name", name);
    tg_dtype dt;
    if (!tg_dtype_from_ggml(t->ggml_type, &dt)) return fail(path, "': a type tinygpt does not read", name);
    const tg_weight_type *wt = tg_weight_type_of(dt);
    int64_t cols = t->ne[0], rows = 1;
    for (int d = 1; d < 4; d++) {
        if (!tg_mul_i64(rows, t->ne[d], &rows)) return fail(path, "': element count overflows", name);
    }
    if (cols <= 0 || cols % wt->block_elems != 0) return fail(path, "': rows are not whole blocks", name);
    size_t row_bytes = (size_t)(cols / wt->block_elems) * wt->block_bytes;
    size_t need;
    if (!tg_mul_size(row_bytes, (size_t)rows, &need) || need > t->nbytes)
        return fail(path, "': data shorter than its shape", name);
    char file[4096];
    if (snprintf(file, sizeof file, "%s/%s.f32", out_dir, name) >= (int)sizeof file)
        return fail(path, "': output path too long", name);
    FILE *f = fopen(file, "wb");
    if (!f) return fail(file, ": cannot create", NULL);
    float *row = malloc((size_t)cols * sizeof *row);
    if (!row) {
        fclose(f);
        return fail(path, "': out of memory", name);
    }
    int rc = 0;
    for (int64_t r = 0; r < rows && rc == 0; r++) {
        tg_dequantize_row(dt, t->data + (size_t)r * row_bytes, row, cols);
        if (fwrite(row, sizeof *row, (size_t)cols, f) != (size_t)cols) rc = fail(file, ": write failed", NULL);
    }
    free(row);
    if (fclose(f) != 0 && rc == 0) rc = fail(file, ": write failed", NULL);
    if (rc == 0) printf("%s %s %" PRId64 "\n", name, wt->name, rows * cols);
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fputs("usage: gguf_dequant FILE OUT_DIR\n", stderr);
        return 2;
    }
    tg_error err = {0};
    tg_gguf *g = tg_gguf_open(argv[1], &err);
    if (!g) {
        fprintf(stderr, "gguf_dequant: %s\n", err.msg);
        return 1;
    }
    int rc = 0;
    for (uint64_t i = 0; i < tg_gguf_n_tensors(g) && rc == 0; i++)
        rc = dump_tensor(argv[1], argv[2], tg_gguf_tensor_at(g, i));
    tg_gguf_close(g);
    return rc;
}
