#!/usr/bin/env bash
# kquant-ab.sh [--dram | --avx512 | --q32] REV_A [REV_B] [CFLAGS...] — the K-quant decode kernels of two git revisions (REV_B default: the
# working tree) against each other in one process, and whether both give the same bits. Extra arguments are compiler
# flags for both builds (say -march=x86-64-v3 for the AVX2-only path). Builds in build/kquant-ab.
#   default: bench/kquant_ab.c, ns per super-block for Q4_K, Q5_K and Q6_K, in cache, the speed ratio B/A;
#   --dram:  bench/kquant_dram_ab.c, W streamed from DRAM on KQ_THREADS threads (default 2) against a plain
#            streaming read, KQ_ROUNDS interleaved rounds (default 21): each build's fraction of the read bandwidth;
#            KQ_PAGES=huge puts W in 2 MiB pages, KQ_PAGES=both runs every variant on both page sizes in each round.
#   --avx512: bench/kquant512_ab.c, gemv_kquant_avx512.c's decode and prefill kernels in cache (AVX-512 VNNI hosts);
#   --q32:    bench/quant32_ab.c, gemv_avx2.c's Q8_0 and Q4_0 decode kernels in cache.
set -eu
cd "$(dirname "$0")/.."
dram=false src=gemv_kquant_avx2.c
if [ "${1:-}" = --dram ]; then dram=true; shift; fi
if [ "${1:-}" = --avx512 ]; then src=gemv_kquant_avx512.c; shift; fi
if [ "${1:-}" = --q32 ]; then src=gemv_avx2.c; shift; fi
a=$1; b=${2:-}; shift $(($# < 2 ? $# : 2))
flags=(-std=c11 -O3 -march=native -Iinclude -Isrc "$@")
out=build/kquant-ab
mkdir -p "$out"
obj() { # REV OUT PREFIX: $src of REV (or of the working tree) compiled, its symbols prefixed
    local rev=$1 o=$2
    if [ -n "$rev" ]; then git show "$rev:src/kernels/$src" >"$out/kq_src.c"; else cp "src/kernels/$src" "$out/kq_src.c"; fi
    cc "${flags[@]}" -Isrc/kernels -c "$out/kq_src.c" -o "$out/kq.o"
    objcopy --prefix-symbols="$3" "$out/kq.o" "$o"
}
obj "$a" "$out/A.o" A_
obj "$b" "$out/B.o" B_
cp src/kernels/gemv_kquant_avx2.c "$out/kq_now.c"
cc "${flags[@]}" -c "$out/kq_now.c" -o "$out/now.o" # the quantiser of the activation
if [ "$src" = gemv_avx2.c ]; then
    cc "${flags[@]}" bench/quant32_ab.c "$out/A.o" "$out/B.o" "$out/now.o" src/kernels/quant.c \
        src/kernels/matmul_avx2.c src/util/error.c -o "$out/quant32_ab" -lm
    "$out/quant32_ab"
elif [ "$src" = gemv_kquant_avx512.c ]; then
    cc "${flags[@]}" bench/kquant512_ab.c "$out/A.o" "$out/B.o" "$out/now.o" src/kernels/quant.c \
        src/kernels/matmul_avx2.c src/util/error.c -o "$out/kquant512_ab" -lm
    "$out/kquant512_ab"
elif $dram; then
    cc "${flags[@]}" -pthread bench/kquant_dram_ab.c "$out/A.o" "$out/B.o" "$out/now.o" src/kernels/quant.c \
        src/kernels/matmul_avx2.c src/util/error.c -o "$out/kquant_dram_ab" -lm
    "$out/kquant_dram_ab" "${KQ_THREADS:-2}" "${KQ_ROUNDS:-21}" "${KQ_UNIT_ROWS:-256}"
else
    cc "${flags[@]}" bench/kquant_ab.c "$out/A.o" "$out/B.o" "$out/now.o" src/kernels/quant.c src/kernels/matmul_avx2.c \
        src/util/error.c -o "$out/kquant_ab" -lm
    "$out/kquant_ab"
fi
