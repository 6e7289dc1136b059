/* test_model_util.h — small helpers the model-level unit tests share (include after <cmocka.h> and "tinygpt.h"). */
#ifndef TG_TESTS_TEST_MODEL_UTIL_H
#define TG_TESTS_TEST_MODEL_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* The model at path; the test fails (naming the path and the error) when it does not load. */
static inline tg_model *load_model(const char *path) {
    tg_error err = {0};
    tg_model *m = tg_model_load(path, &err);
    if (!m) fail_msg("%s: %s", path, err.msg);
    return m;
}

/* ids[n] spread over the vocabulary, from seed (a linear congruential sequence: the same ids on every machine). */
static inline void some_ids(int32_t *ids, size_t n, int32_t vocab, uint32_t seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        ids[i] = (int32_t)((seed >> 8) % (uint32_t)vocab);
    }
}

#endif
