/* cpu_features.c — run-time detection of the kernels' instruction sets (cpu_features.h): cpuid for what the CPU
 * implements, xgetbv for what the operating system saves on a context switch (a set whose registers it does not save
 * must not be used), once per process. */
#include "util/cpu_features.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* XCR0: the register states the OS saves. */
static uint64_t xcr0(void) {
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static void detect(tg_cpu_features *f) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28), f16c = c & (1u << 29);
    if (!osxsave || !avx) return;
    const uint64_t x = xcr0();
    const bool ymm = (x & 0x6) == 0x6, zmm = (x & 0xe6) == 0xe6; /* SSE + AVX; + opmask, ZMM_Hi256, Hi16_ZMM */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return;
    const bool avx2 = b & (1u << 5), f512 = b & (1u << 16), dq = b & (1u << 17), bw = b & (1u << 30),
               vl = b & (1u << 31), vnni = c & (1u << 11);
    f->avx2 = ymm && avx2 && fma && f16c;
    f->avx512 = f->avx2 && zmm && f512 && dq && bw && vl && vnni;
}
#else
static void detect(tg_cpu_features *f) { (void)f; }
#endif

static tg_cpu_features features;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init(void) {
    detect(&features);
    features.best = features.avx512 ? TG_ISA_AVX512 : features.avx2 ? TG_ISA_AVX2 : TG_ISA_SCALAR;
    features.isa = features.best;
    tg_isa want;
    const char *env = getenv("TG_ISA");
    if (env && tg_isa_parse(env, &want) && want < features.best) features.isa = want;
}

const tg_cpu_features *tg_cpu_features_get(void) {
    pthread_once(&once, init);
    return &features;
}

static const char *const names[TG_ISA_COUNT] = {"scalar", "avx2", "avx512"};

const char *tg_isa_name(tg_isa isa) { return (unsigned)isa < TG_ISA_COUNT ? names[isa] : "?"; }

bool tg_isa_parse(const char *s, tg_isa *out) {
    for (int i = 0; s && i < TG_ISA_COUNT; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = (tg_isa)i;
            return true;
        }
    }
    return false;
}
