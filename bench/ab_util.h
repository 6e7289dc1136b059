/* bench/ab_util.h — what the A/B kernel harnesses (kquant_ab.c, kquant512_ab.c, kquant_dram_ab.c, quant32_ab.c)
 * share: a monotonic clock and the random stream that fills their weights and activations. Include after defining
 * _POSIX_C_SOURCE (clock_gettime). */
#ifndef TG_BENCH_AB_UTIL_H
#define TG_BENCH_AB_UTIL_H

#include <stdint.h>
#include <time.h>

/* Seconds on the monotonic clock. */
static inline double ab_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The next 32 random bits of the stream in *state (a 64-bit LCG; its high bits). */
static inline uint32_t ab_rand(uint64_t *state) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*state >> 33);
}

#endif
