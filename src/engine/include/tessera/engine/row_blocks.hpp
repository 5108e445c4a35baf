// Row blocks: how a module whose working set does not fit a memory budget runs in pieces that
// do, each piece's rows acquired while it computes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

#include "tessera/core/op_params.hpp"
#include "tessera/engine/chunk_manager.hpp"
#include "tessera/engine/module.hpp"

namespace tessera {

/// Rows of a row-major tensor that a row block acquires: its first row and its row stride.
struct RowTensor {
  const void* data = nullptr; ///< row 0 (nullptr: nothing to acquire)
  std::size_t row_bytes = 0;  ///< bytes from one row to the next
  Access access = Access::Read;
};

/// A dense view's rows, to acquire with `access`.
template <typename T> RowTensor rows_of(ConstDenseView<T> x, Access access) {
  return {x.data, static_cast<std::size_t>(x.cols) * sizeof(T), access};
}
template <typename T> RowTensor rows_of(DenseView<T> x, Access access) {
  return rows_of(ConstDenseView<T>(x), access);
}

/// The rows of a block each budget share holds: an eighth of the device budget over the bytes
/// a row takes in all the block's tensors (at least 1; `rows` without a budget: one block).
inline std::int64_t block_rows(const ChunkManager* memory, std::int64_t rows,
                               std::size_t row_bytes) {
  if (memory == nullptr || !memory->budgeted() || row_bytes == 0) {
    return std::max<std::int64_t>(rows, 1);
  }
  const auto fit = static_cast<std::int64_t>(memory->config().device_bytes / 8 / row_bytes);
  return std::clamp<std::int64_t>(fit, 1, std::max<std::int64_t>(rows, 1));
}

/// Calls f(begin, end) for consecutive row blocks covering [0, rows), each with rows
/// [begin, end) of every tensor acquired (per its access) for the call. Without a budget: one
/// call over all rows, nothing acquired.
template <typename F>
void for_row_blocks(ChunkManager* memory, std::int64_t rows,
                    std::initializer_list<RowTensor> tensors, F f) {
  std::size_t row_bytes = 0;
  for (const RowTensor& t : tensors)
    row_bytes += t.row_bytes;
  const std::int64_t block = block_rows(memory, rows, row_bytes);
  for (std::int64_t begin = 0; begin < rows; begin += block) {
    const std::int64_t end = std::min(rows, begin + block);
    Pins pins(memory);
    for (const RowTensor& t : tensors) {
      if (t.data == nullptr) continue;
      const auto* first = static_cast<const std::byte*>(t.data);
      pins.add(first + static_cast<std::size_t>(begin) * t.row_bytes,
               static_cast<std::size_t>(end - begin) * t.row_bytes, t.access);
    }
    f(begin, end);
  }
}

/// Whether a module's working set of `bytes` (acquired whole, as Sequential does, in chunks)
/// may exceed `memory`'s device budget: the module then runs in row blocks instead. Below it a
/// module runs whole, so a budget that holds every layer computes exactly what no budget does.
inline bool exceeds_budget(const ChunkManager& memory, std::size_t bytes) noexcept {
  // Each of a layer's (about eight) tensors may end in a chunk it shares with nothing it uses.
  const OffloadConfig& config = memory.config();
  return memory.budgeted() && bytes + 8 * config.chunk_bytes > config.device_bytes;
}

/// The manager `module` (on `backend`) acquires its own memory under when called on `x`, or
/// nullptr when Sequential acquires its working set whole (or there is no manager): what a
/// module passes to for_row_blocks.
template <typename T>
ChunkManager* own_memory(const Module<T>& module, const BackendPtr& backend, const Input<T>& x) {
  ChunkManager* memory = manager_of(backend);
  return memory != nullptr && module.acquires_own_memory(*memory, x) ? memory : nullptr;
}

/// Whether an elementwise layer on dense `x` (input, output and input gradient, all x's shape)
/// runs in row blocks; a sparse x goes whole.
template <typename T>
bool elementwise_exceeds_budget(const ChunkManager& memory, const Input<T>& x) noexcept {
  return !x.is_sparse() &&
         exceeds_budget(memory, 3 * static_cast<std::size_t>(x.dense.size()) * sizeof(T));
}

/// The mode of a parameter gradient summed over row blocks: the first block's (begin == 0) as
/// asked, the others added to it.
inline GradientMode block_mode(GradientMode mode, std::int64_t begin) noexcept {
  return begin == 0 || mode == GradientMode::Ignore ? mode : GradientMode::Accumulate;
}

/// The global ids of rows [begin, ...) of `rows`.
inline RowIds rows_from(RowIds rows, std::int64_t begin) noexcept {
  if (rows.ids != nullptr) return {rows.ids + begin, 0};
  return {nullptr, rows.offset + begin};
}

} // namespace tessera
