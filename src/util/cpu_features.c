/* cpu_features.c — run-time detection of the kernels' instruction sets (cpu_features.h), once per process. x86:
 * cpuid for what the CPU implements, xgetbv for what the operating system saves on a context switch (a set whose
 * registers it does not save must not be used). aarch64: what the kernel reports, getauxval's hardware capabilities
 * on Linux, sysctlbyname's hw.optional.arm.FEAT_* on macOS (Advanced SIMD is part of every aarch64 CPU). */
#if defined(__aarch64__) && defined(__APPLE__)
#define _DARWIN_C_SOURCE /* sysctlbyname */
#endif
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
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>

/* The kernel's HWCAP bits (asm/hwcap.h), spelled here so that an older libc's headers suffice. */
enum { HWCAP_ASIMD_BIT = 1 << 1, HWCAP_ASIMDDP_BIT = 1 << 20 };
enum { HWCAP2_I8MM_BIT = 1 << 13 };

static void detect(tg_cpu_features *f) {
    const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    f->neon = hw & HWCAP_ASIMD_BIT;
    f->dotprod = f->neon && (hw & HWCAP_ASIMDDP_BIT);
    f->i8mm = f->dotprod && (hw2 & HWCAP2_I8MM_BIT);
}
#elif defined(__aarch64__) && defined(__APPLE__)
#include <sys/sysctl.h>
#include <sys/types.h>

/* Whether the sysctl `name` (an int that says whether the feature is there) exists and is non-zero. */
static bool sysctl_flag(const char *name) {
    int v = 0;
    size_t n = sizeof v;
    return sysctlbyname(name, &v, &n, NULL, 0) == 0 && v != 0;
}

static void detect(tg_cpu_features *f) {
    f->neon = true; /* every Apple arm64 CPU */
    f->dotprod = sysctl_flag("hw.optional.arm.FEAT_DotProd");
    f->i8mm = f->dotprod && sysctl_flag("hw.optional.arm.FEAT_I8MM");
}
#elif defined(__aarch64__)
/* Another operating system: Advanced SIMD only (part of every aarch64 CPU), no way asked of the OS for more. */
static void detect(tg_cpu_features *f) { f->neon = true; }
#else
static void detect(tg_cpu_features *f) { (void)f; }
#endif

static tg_cpu_features features;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init(void) {
    detect(&features);
    features.best = features.avx512    ? TG_ISA_AVX512
                    : features.avx2    ? TG_ISA_AVX2
                    : features.i8mm    ? TG_ISA_I8MM
                    : features.dotprod ? TG_ISA_DOTPROD
                    : features.neon    ? TG_ISA_NEON
                                       : TG_ISA_SCALAR;
    features.isa = features.best;
    tg_isa want;
    const char *env = getenv("TG_ISA");
    if (env && tg_isa_parse(env, &want) && want < features.best &&
        (want == TG_ISA_SCALAR || tg_isa_arch(want) == tg_isa_arch(features.best)))
        features.isa = want;
}

const tg_cpu_features *tg_cpu_features_get(void) {
    pthread_once(&once, init);
    return &features;
}

static const char *const names[TG_ISA_COUNT] = {"scalar", "avx2", "avx512", "neon", "dotprod", "i8mm"};

const char *tg_isa_name(tg_isa isa) { return (unsigned)isa < TG_ISA_COUNT ? names[isa] : "?"; }

int tg_isa_arch(tg_isa isa) {
    if ((unsigned)isa >= TG_ISA_COUNT) return -1;
    return isa == TG_ISA_SCALAR ? 0 : isa <= TG_ISA_AVX512 ? 1 : 2;
}

bool tg_isa_parse(const char *s, tg_isa *out) {
    for (int i = 0; s && i < TG_ISA_COUNT; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = (tg_isa)i;
            return true;
        }
    }
    return false;
}
