#!/usr/bin/env bash
# bench/decode-ab.sh REV_A REV_B MODEL [KV [DEPTH [TOKENS [THREADS]]]] — the whole engine of two git revisions ("."
# = the working tree; REV@ARCH = that revision built with `make ARCH=ARCH`, e.g. ". .@x86-64" compares the
# working tree's native build with its portable one) decoding the same model side by side in one process, token by
# token (bench/decode_ab.c):
# the median over pairs of turns of time(B) / time(A). KV is one cache precision, or A's and B's as "int8/int4"
# (then REV_A = REV_B compares the caches). Defaults: KV fp16, DEPTH 0, TOKENS 512, THREADS 2.
# A revision's library is built from `git archive` in build/decode-ab/REV (kept for the next run); "." builds the
# working tree's build/release/libtinygpt.a. Each side is linked with its library into one object whose every
# symbol but ab_<side>_open / _step / _close is then made local, so both builds' tg_* functions coexist.
# bench/decode-ab.sh --build-only REV_A REV_B: builds build/decode-ab/decode_ab and stops (`make bench-programs`).
set -euo pipefail
cd "$(dirname "$0")/.."
build_only=false
if [ "${1:-}" = --build-only ]; then build_only=true; shift; fi
[ $# -ge 3 ] || { $build_only && [ $# -eq 2 ]; } || { sed -n '2,11p' "$0" >&2; exit 2; }
rev_a=$1 rev_b=$2 model=${3:-} kv=${4:-fp16} depth=${5:-0} tokens=${6:-512} threads=${7:-2}
out=build/decode-ab
mkdir -p "$out"
flags=(-std=c11 -O2 -march=native -Wall -Wextra -Werror)

library() { # REV[@ARCH] -> echoes "LIB INCLUDE_DIR" of that revision's release library, building it if needed
    local rev=${1%@*} arch= hash dir
    [ "$rev" != "$1" ] && arch=${1##*@}
    if [ "$rev" = . ] && [ -z "$arch" ]; then
        make -s build/release/libtinygpt.a >&2
        echo "build/release/libtinygpt.a include"
        return
    fi
    if [ "$rev" = . ]; then # the working tree's files (tracked and untracked, not ignored), built apart for ARCH
        dir=$out/worktree-$arch
        mkdir -p "$dir"
        git ls-files -co --exclude-standard -z | tar --null -cf - -T - | tar -xf - -C "$dir"
        make -C "$dir" -s -j2 ARCH="$arch" build/release/libtinygpt.a >&2
    else
        hash=$(git rev-parse --verify "$rev^{commit}")
        dir=$out/$hash${arch:+-$arch}
        if [ ! -f "$dir/build/release/libtinygpt.a" ]; then
            rm -rf "$dir"
            mkdir -p "$dir"
            git archive "$hash" | tar -x -C "$dir"
            make -C "$dir" -s -j2 ${arch:+ARCH="$arch"} build/release/libtinygpt.a >&2
        fi
    fi
    echo "$dir/build/release/libtinygpt.a $dir/include"
}

side() { # SIDE REV: build/decode-ab/side_SIDE.o, the side and its library with only its three entry points global
    local lib inc
    read -r lib inc < <(library "$2")
    cc "${flags[@]}" -I"$inc" -DAB_SIDE="$1" -c bench/decode_ab_side.c -o "$out/side_$1.o"
    ld -r -d -o "$out/whole_$1.o" "$out/side_$1.o" --whole-archive "$lib" --no-whole-archive
    objcopy --keep-global-symbol="ab_$1_open" --keep-global-symbol="ab_$1_step" --keep-global-symbol="ab_$1_close" \
        "$out/whole_$1.o" "$out/side_$1_local.o"
}

side a "$rev_a"
side b "$rev_b"
cc "${flags[@]}" bench/decode_ab.c "$out/side_a_local.o" "$out/side_b_local.o" -o "$out/decode_ab" -pthread \
    $(pkg-config --libs $(sed -n 's/^LIB_PKGS *:= *\([^#]*\).*/\1/p' Makefile)) -lm
$build_only && exit 0
echo "A = $rev_a, B = $rev_b"
"$out/decode_ab" "$model" "$kv" "$depth" "$tokens" "$threads"
