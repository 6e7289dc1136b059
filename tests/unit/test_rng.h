/* test_rng.h — a tiny deterministic RNG for the unit tests (splitmix64; the state on the caller's stack), so that
 * every test's random inputs are the same on every run and machine. */
#ifndef TG_TESTS_TEST_RNG_H
#define TG_TESTS_TEST_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t s;
} rng_t;

static inline uint64_t rng_next(rng_t *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform in [-1, 1) */
static inline float rng_unit(rng_t *r) { return (float)((double)(rng_next(r) >> 11) * 0x1.0p-53 * 2.0 - 1.0); }

#endif
