#!/usr/bin/env bash
# Builds the CUDA binaries for a lent GPU machine (which has the CUDA 13 toolkit but none of our
# Debian packages) and packs them with the non-CUDA shared libraries they need into one small
# folder to carry there: <pack>/bin (tessera-train, tessera_cuda_tests, tessera-bench-cuda,
# stripped) and <pack>/lib. scripts/gpu_check.sh runs from it.
#
# Usage: scripts/gpu_package.sh [--arch SM] [--out DIR]
#   --arch SM   CUDA architecture to compile for (default 90: H100/H200)
#   --out DIR   the pack folder (default <repo>/gpu-pack; ignored by git)
# Environment: TESSERA_GPU_BUILD_DIR (default <repo>/build-gpu).
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

arch=90
out="${TESSERA_ROOT}/gpu-pack"
while (($# > 0)); do
  case "$1" in
    -h | --help)
      tessera_usage "$0"
      exit 0
      ;;
    --arch | --out)
      (($# >= 2)) || tessera_die "$1 needs a value"
      [[ "$1" == --arch ]] && arch="$2" || out="$2"
      shift 2
      ;;
    *) tessera_die "unknown argument '$1' (see --help)" ;;
  esac
done
build="${TESSERA_GPU_BUILD_DIR:-${TESSERA_ROOT}/build-gpu}"

tessera_install_deps
generator=()
[[ -f "${build}/CMakeCache.txt" ]] || generator=(-G Ninja)
# x86-64-v3 rather than -march=native: the GPU machine's CPU is not this one.
cmake -S "${TESSERA_ROOT}" -B "${build}" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DTESSERA_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${arch}" -DTESSERA_NATIVE_ARCH=OFF \
  -DCMAKE_CXX_FLAGS="-march=x86-64-v3"
cmake --build "${build}" --parallel "$(nproc)" \
  --target tessera-train tessera_cuda_tests tessera-bench-cuda

rm -rf "${out}"
mkdir -p "${out}/bin" "${out}/lib"
binaries=("${build}/apps/tessera-train/tessera-train" "${build}/tests/cuda/tessera_cuda_tests"
  "${build}/bench/tessera-bench-cuda")
for binary in "${binaries[@]}"; do
  strip -o "${out}/bin/$(basename "${binary}")" "${binary}"
done
# Every shared library the binaries load, except the C runtime (newer there) and CUDA's own
# libraries (the machine's CUDA toolkit provides them; NCCL, 200 MB, comes from there or from
# PyTorch's NCCL wheel, which gpu_check.sh looks for).
ldd "${binaries[@]}" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u | while read -r lib; do
  case "$(basename "${lib}")" in
    libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | ld-linux* | libstdc++.so* | \
      libgcc_s.so* | libcuda.so* | libcudart.so* | libcublas*.so* | libcusparse.so* | \
      libnvJitLink.so* | libnccl.so*) ;;
    *) cp -L "${lib}" "${out}/lib/" ;;
  esac
done
du -sh "${out}"
echo "carry '${out#"${TESSERA_ROOT}"/}' and run: scripts/gpu_check.sh --pack ${out#"${TESSERA_ROOT}"/}"
