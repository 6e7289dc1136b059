/* test_golden.h — reading reference outputs for the unit tests that compare a model with goldens (test_families,
 * test_fixtures, test_yoco): a raw float32 file, a JSON list of token ids, the argmax of a logits row. One copy, so
 * the three compare in the same way. */
#ifndef TG_TESTS_TEST_GOLDEN_H
#define TG_TESTS_TEST_GOLDEN_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The n little-endian floats of the file at path (malloc'ed), NULL when it cannot be read or holds another count. */
static inline float *golden_read_f32(const char *path, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    float *buf = malloc(n * sizeof *buf);
    size_t got = buf ? fread(buf, sizeof *buf, n, f) : 0;
    int extra = fgetc(f);
    fclose(f);
    if (got != n || extra != EOF) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* The ids of a JSON array of integers (malloc'ed, *n of them; never NULL for an empty list unless out of memory). */
static inline int32_t *golden_json_ids(const json_t *a, size_t *n) {
    *n = json_array_size(a);
    int32_t *ids = malloc((*n ? *n : 1) * sizeof *ids);
    for (size_t i = 0; ids && i < *n; i++) ids[i] = (int32_t)json_integer_value(json_array_get(a, i));
    return ids;
}

/* The first index of the largest of x[0 .. n). */
static inline int32_t golden_argmax(const float *x, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return (int32_t)best;
}

#endif
