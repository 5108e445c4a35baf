// Launch geometry shared by the .cu files: grid-stride loops over 64-bit sizes.
#pragma once

#include "launch.hpp"

#include <algorithm>
#include <cstdint>

namespace tessera::kernels::cuda::launch {

constexpr int kBlock = 256;

/// Blocks for `work` items with a grid-stride loop (capped; the loop covers the rest).
inline unsigned blocks_for(std::int64_t work) {
  return static_cast<unsigned>(
      std::clamp<std::int64_t>((work + kBlock - 1) / kBlock, 1, 65535 * 8));
}

/// Index of this thread in a grid-stride loop, and the stride.
__device__ inline std::int64_t thread_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::int64_t grid_stride() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

/// Global id of local row r.
__device__ inline std::int64_t row_id(RowIds ids, std::int64_t r) {
  return ids.ids != nullptr ? ids.ids[r] : ids.offset + r;
}

} // namespace tessera::kernels::cuda::launch
