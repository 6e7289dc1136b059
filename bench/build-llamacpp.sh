#!/usr/bin/env bash
# bench/build-llamacpp.sh — builds the peer, llama.cpp, from the complete upstream source that the npm package
# node-llama-cpp@3.21.1 ships as a git bundle, into bench/.peer/ (git-ignored), once; later calls reuse the build.
# Prints the directory holding llama-bench, llama-completion, llama-perplexity, llama-tokenize, llama-quantize and
# llama-server on stdout (progress goes to stderr). Only benchmarks and tools/ scripts use it; no test does.
#
#   TG_LLAMACPP_DIR=/path/to/llama.cpp   reuse an existing checkout whose build/bin has these tools
#   TG_LLAMACPP_JOBS=N                   parallel compile jobs (default 2; the build takes about 20 minutes)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
peer=$here/.peer
tools=(llama-bench llama-completion llama-perplexity llama-tokenize llama-quantize llama-server)
version=3.21.1

has_tools() {
    local t
    for t in "${tools[@]}"; do [ -x "$1/$t" ] || return 1; done
}

if [ -n "${TG_LLAMACPP_DIR:-}" ]; then
    if has_tools "$TG_LLAMACPP_DIR/build/bin"; then
        echo "$TG_LLAMACPP_DIR/build/bin"
        exit 0
    fi
    echo "build-llamacpp: TG_LLAMACPP_DIR=$TG_LLAMACPP_DIR has no build/bin with ${tools[*]}; building in $peer" >&2
fi
if has_tools "$peer/llama.cpp/build/bin"; then
    echo "$peer/llama.cpp/build/bin"
    exit 0
fi

for cmd in npm git cmake tar; do
    command -v "$cmd" >/dev/null || { echo "build-llamacpp: $cmd is needed" >&2; exit 1; }
done
mkdir -p "$peer"
cd "$peer"
tgz=node-llama-cpp-$version.tgz
if [ ! -f "$tgz" ]; then
    echo "build-llamacpp: npm pack node-llama-cpp@$version" >&2
    npm pack "node-llama-cpp@$version" >&2
fi
if [ ! -f package/llama/gitRelease.bundle ]; then
    tar -xzf "$tgz" package/llama/gitRelease.bundle
fi
if [ ! -d llama.cpp/.git ]; then
    rm -rf llama.cpp
    echo "build-llamacpp: cloning the bundled llama.cpp source" >&2
    git clone --quiet package/llama/gitRelease.bundle llama.cpp 2>&1 | sed 's/^/  /' >&2 || true
    if ! git -C llama.cpp rev-parse --verify -q HEAD >/dev/null; then
        ref=$(git bundle list-heads package/llama/gitRelease.bundle | head -n 1 | cut -d' ' -f1)
        git -C llama.cpp checkout --quiet "$ref"
    fi
fi
echo "build-llamacpp: configuring (CPU, Release, -march=native)" >&2
cmake -S llama.cpp -B llama.cpp/build -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_OPENSSL=OFF >&2
echo "build-llamacpp: building ${tools[*]} (about 20 minutes with 2 jobs)" >&2
cmake --build llama.cpp/build --config Release -j "${TG_LLAMACPP_JOBS:-2}" --target "${tools[@]}" >&2
has_tools llama.cpp/build/bin || { echo "build-llamacpp: the build did not produce ${tools[*]}" >&2; exit 1; }
echo "$peer/llama.cpp/build/bin"
