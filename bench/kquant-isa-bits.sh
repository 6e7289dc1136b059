#!/usr/bin/env bash
# kquant-isa-bits.sh — bench/kquant_isa_bits.c built for each instruction-set path of gemv_kquant_avx2.c, gemv_avx2.c
# and gemv_q32_avx2.c with the Q8_0 activation quantiser (AVX2 only;
# AVX2 + GFNI; AVX2 + AVX-512F/BW/VL; -march=native, which on an AVX-512 VNNI CPU adds vpdpwssd) and its output
# compared: prints one line per build and "same bits on every path" or exits 1. Builds in build/kquant-isa.
set -eu
cd "$(dirname "$0")/.."
out=build/kquant-isa
mkdir -p "$out"
ref=
status=0
for flags in "-march=x86-64-v3" "-march=x86-64-v3 -mgfni" "-march=x86-64-v3 -mavx512f -mavx512bw -mavx512vl" "-march=native"; do
    # shellcheck disable=SC2086
    cc -std=c11 -O2 $flags -Iinclude -Isrc bench/kquant_isa_bits.c src/kernels/gemv_kquant_avx2.c src/kernels/quant.c \
        src/kernels/gemv_avx2.c src/kernels/gemv_q32_avx2.c src/kernels/matmul_avx2.c src/kernels/ggml_blocks.c src/util/error.c -o "$out/bits" -lm
    sum=$("$out/bits" | md5sum | cut -d' ' -f1)
    echo "$flags: $sum"
    "$out/bits" | grep -q "mismatches [1-9]" && { echo "  prefill differs from decode"; status=1; }
    if [ -z "$ref" ]; then ref=$sum; elif [ "$sum" != "$ref" ]; then status=1; fi
done
if [ $status = 0 ]; then echo "same bits on every path"; else echo "DIFFERENT bits"; fi
exit $status
