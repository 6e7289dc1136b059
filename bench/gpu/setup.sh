# bench/gpu/setup.sh — what bench/gpu/run.sh and serve.sh do first on the GPU machine, sourced with the log's name:
# everything after it printed also to $OUT/LOG; the Vulkan loader, validation layer and GL dispatch libraries of
# .gl/ unpacked (the NVIDIA driver's Vulkan ICD links them); the NVIDIA ICD and .devcarry/lib/ in the environment;
# T (tinygpt), G (gen_random_gguf), D (.devcarry), t0 (the start); the device and CPU printed. build_llamacpp
# TARGET...: llama.cpp from .devcarry/lcpp.txz built with CUDA (sm_90) in /tmp/lcpp in the background, its exit
# status in /tmp/lbuild.rc when it ends.
out=${OUT:?}
exec > >(tee "$out/${1:?log name}") 2>&1
D=$PWD/.devcarry
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json LD_LIBRARY_PATH=$D/lib
T=$D/tinygpt G=$D/gen_random_gguf
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
nproc; grep -m1 "model name" /proc/cpuinfo
t0=$(date +%s)
build_llamacpp() {
    mkdir -p /tmp/lcpp && tar -xJf "$D/lcpp.txz" -C /tmp/lcpp
    (cd /tmp/lcpp && cmake -S . -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF -DCMAKE_BUILD_TYPE=Release \
        >/tmp/lcfg.log 2>&1 && nice cmake --build build -j 14 --target "$@" >/tmp/lbuild.log 2>&1
     echo "$?" >/tmp/lbuild.rc) &
}
