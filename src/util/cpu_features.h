/* cpu_features.h — which instruction sets this CPU has, detected once at run time (cpu_features.c), and which one
 * the kernels use; plus, for the instruction-set files alone, which set the translation unit is compiled for.
 *
 * Run time: tg_cpu_features() answers once per process (pthread_once; the answer is const afterwards): on x86 from
 * cpuid and xgetbv (a set counts only where the operating system saves its registers), on aarch64 Linux from
 * getauxval(AT_HWCAP / AT_HWCAP2), on aarch64 macOS from sysctlbyname("hw.optional.arm.FEAT_*"). The kernel tables
 * (kernels/kernels.h, kvcache/attend_kernels.h) are chosen from its `isa`: the best set the CPU has, capped by the
 * environment variable TG_ISA=scalar|avx2|avx512 (x86) or TG_ISA=scalar|neon|dotprod|i8mm (aarch64) where set (tests
 * pit the tables against each other with it; valgrind, which cannot run AVX-512, runs with TG_ISA=avx2). A TG_ISA
 * above what the CPU has is capped at the CPU's best; an unknown value, or one of the other architecture, is
 * ignored.
 *
 * Compile time, for the files that hold one instruction set's kernels (*_avx2.c, *_avx512.c, their tables and inline
 * headers, and the tests that call those kernels directly): TG_HAVE_AVX2 says the translation unit is compiled with
 * AVX2 + FMA + F16C (the set every x86 CPU with AVX2 has: Haswell and later, Zen), TG_HAVE_AVX512 with AVX-512
 * F, BW, DQ, VL and VNNI. The Makefile compiles those files with their sets' flags whatever ARCH is; every other
 * file is generic and must not test these macros or hold intrinsics. */
#ifndef TG_UTIL_CPU_FEATURES_H
#define TG_UTIL_CPU_FEATURES_H

#include <stdbool.h>

/* Kernel instruction sets; within one architecture each a superset of the one before (a table of a set may use every
 * set of its architecture below it, and the scalar one). The numbers of the two architectures interleave nothing:
 * the x86 sets sort below the aarch64 ones, and a lookup by number skips the other architecture's (tg_isa_arch). */
typedef enum {
    TG_ISA_SCALAR = 0, /* portable C: the reference */
    TG_ISA_AVX2,       /* x86-64 AVX2 + FMA + F16C */
    TG_ISA_AVX512,     /* x86-64 AVX-512 F, BW, DQ, VL, VNNI (with the AVX2 set) */
    TG_ISA_NEON,       /* aarch64 Advanced SIMD (every aarch64 CPU) */
    TG_ISA_DOTPROD,    /* aarch64 ARMv8.2 dotprod (sdot / udot), with NEON */
    TG_ISA_I8MM,       /* aarch64 i8mm (smmla), with dotprod */
    TG_ISA_COUNT
} tg_isa;

typedef struct {
    bool avx2;    /* AVX2, FMA and F16C, with the YMM state enabled by the OS */
    bool avx512;  /* AVX-512 F, BW, DQ, VL and VNNI, with the ZMM and mask state enabled by the OS */
    bool neon;    /* aarch64 Advanced SIMD (HWCAP_ASIMD) */
    bool dotprod; /* ARMv8.2 dotprod (HWCAP_ASIMDDP, FEAT_DotProd) */
    bool i8mm;    /* int8 matrix multiply (HWCAP2_I8MM, FEAT_I8MM) */
    tg_isa best;  /* the highest tg_isa the CPU has */
    tg_isa isa;   /* the one the kernels use: best, or TG_ISA's choice capped at best */
} tg_cpu_features;

/* This CPU's features, detected on the first call (thread-safe); never NULL, const for the process's life. */
const tg_cpu_features *tg_cpu_features_get(void);
/* "scalar", "avx2", "avx512", "neon", "dotprod", "i8mm"; "?" for a value out of range. */
const char *tg_isa_name(tg_isa isa);
/* 0 for scalar (every architecture), 1 for the x86 sets, 2 for the aarch64 ones; -1 out of range. */
int tg_isa_arch(tg_isa isa);
/* The tg_isa named s (as tg_isa_name spells it); false when s names none. */
bool tg_isa_parse(const char *s, tg_isa *out);

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define TG_HAVE_AVX2 1
#else
#define TG_HAVE_AVX2 0
#endif

#if TG_HAVE_AVX2 && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) &&                       \
    defined(__AVX512VL__) && defined(__AVX512VNNI__)
#define TG_HAVE_AVX512 1
#else
#define TG_HAVE_AVX512 0
#endif

/* The aarch64 instruction-set files (*_neon.c, *_dotprod.c, *_i8mm.c; the Makefile gives them their flags):
 * TG_HAVE_NEON on every aarch64 build, TG_HAVE_DOTPROD with ARMv8.2 dotprod, TG_HAVE_I8MM with i8mm too. */
#if defined(__aarch64__) && defined(__ARM_NEON)
#define TG_HAVE_NEON 1
#else
#define TG_HAVE_NEON 0
#endif

#if TG_HAVE_NEON && defined(__ARM_FEATURE_DOTPROD)
#define TG_HAVE_DOTPROD 1
#else
#define TG_HAVE_DOTPROD 0
#endif

#if TG_HAVE_DOTPROD && defined(__ARM_FEATURE_MATMUL_INT8)
#define TG_HAVE_I8MM 1
#else
#define TG_HAVE_I8MM 0
#endif

#endif
