#!/usr/bin/env bash
# llamacpp_dump.sh — builds tools/llamacpp_dump.cpp against a llama.cpp build's shared libraries (TG_LLAMACPP_DIR,
# as bench/build-llamacpp.sh leaves it; nothing of that build is rebuilt) into build/llamacpp-dump/llamacpp_dump,
# then runs it with the arguments given (see tools/llamacpp_dump.cpp).
set -u
root=$(cd "$(dirname "$0")/.." && pwd) || exit 2
P=${TG_LLAMACPP_DIR:?set TG_LLAMACPP_DIR to a llama.cpp checkout built by bench/build-llamacpp.sh}
P=$(cd "$P" && pwd)
bin=$root/build/llamacpp-dump/llamacpp_dump
mkdir -p "$root/build/llamacpp-dump"
if ! [ -x "$bin" ] || [ "$root/tools/llamacpp_dump.cpp" -nt "$bin" ]; then
    g++ -O2 -std=c++17 -I"$P/include" -I"$P/ggml/include" "$root/tools/llamacpp_dump.cpp" -o "$bin" \
        -L"$P/build/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$P/build/bin" || exit 1
fi
exec "$bin" "$@"
