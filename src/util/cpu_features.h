/* cpu_features.h — the one answer to "may this build use the AVX2 kernels?", for every file with SIMD code
 * (src/kernels, src/kvcache). Decided at compile time from the target (-march=native on the build machine; the
 * fuzz build and `make check-generic` compile without it, so the scalar paths stay built and warning-free).
 *
 * TG_HAVE_AVX2: AVX2 + FMA + F16C, the set every x86 CPU with AVX2 has (Haswell and later, Zen), which the
 * kernels use together: 256-bit integer and float arithmetic, fused multiply-add, fp16 <-> fp32 conversion. */
#ifndef TG_UTIL_CPU_FEATURES_H
#define TG_UTIL_CPU_FEATURES_H

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define TG_HAVE_AVX2 1
#else
#define TG_HAVE_AVX2 0
#endif

#endif
