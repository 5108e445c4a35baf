// Row blocks: how a module whose working set does not fit a memory budget runs in pieces that
// do, each piece's rows acquired while it computes.
#pragma once

#include "tessera/core/op_params.hpp"
#include "tessera/engine/chunk_manager.hpp"
#include "tessera/engine/module.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessera {

/// Rows of a tensor that a row block acquires: a row-major tensor's rows (a fixed stride), or
/// a sparse matrix's entries (rows of varying length, found in host row offsets).
struct RowTensor {
  const void* data = nullptr; ///< row 0 (nullptr: nothing to acquire)
  std::size_t row_bytes = 0;  ///< bytes from one row to the next, or of one entry (`entries`)
  Access access = Access::Read;
  /// Host row offsets [rows + 1] when rows are entries: row r is entries [entries[r],
  /// entries[r + 1]) of row_bytes each; nullptr for a fixed stride.
  const Offset* entries = nullptr;
  /// Rows acquired past each block's end: 1 for a row_ptr, whose block [b, e) reads offset e.
  std::int64_t extra_rows = 0;

  /// Where row `row` starts, in bytes from `data`.
  std::size_t offset(std::int64_t row) const noexcept {
    return static_cast<std::size_t>(entries != nullptr ? entries[row] : row) * row_bytes;
  }
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
void for_row_blocks(ChunkManager* memory, std::int64_t rows, const std::vector<RowTensor>& tensors,
                    F f) {
  std::size_t row_bytes = 0; // a sparse tensor's rows count at their mean length, rounded up
  for (const RowTensor& t : tensors) {
    row_bytes += t.entries == nullptr || rows == 0
                     ? t.row_bytes
                     : (t.offset(rows) - t.offset(0) + static_cast<std::size_t>(rows) - 1) /
                           static_cast<std::size_t>(rows);
  }
  const std::int64_t block = block_rows(memory, rows, row_bytes);
  for (std::int64_t begin = 0; begin < rows; begin += block) {
    const std::int64_t end = std::min(rows, begin + block);
    Pins pins(memory);
    for (const RowTensor& t : tensors) {
      if (t.data == nullptr) continue;
      const std::size_t first = t.offset(begin), last = t.offset(end + t.extra_rows);
      if (last > first)
        pins.add(static_cast<const std::byte*>(t.data) + first, last - first, t.access);
    }
    f(begin, end);
  }
}

/// A sparse matrix's row_ptr, col and val (val per its own access) as row tensors, for a matrix
/// in a manager's chunks: its row offsets are copied to the host at the first call and kept
/// while the matrix's row_ptr, shape and entry count stay the same (each call reads its first
/// and last offsets through `backend` to check).
class SparseRows {
public:
  template <typename T>
  std::vector<RowTensor> of(const Backend& backend, CsrView<T> x, Access values) {
    Offset first = 0, last = 0;
    if (x.rows > 0) {
      backend.copy_to_host(&first, x.row_ptr, sizeof(Offset));
      backend.copy_to_host(&last, x.row_ptr + x.rows, sizeof(Offset));
    }
    if (x.row_ptr != row_ptr_ || x.rows != rows_ || first != first_ || last != last_) {
      host_.resize(static_cast<std::size_t>(x.rows) + 1);
      backend.copy_to_host(host_.data(), x.row_ptr, host_.size() * sizeof(Offset));
      row_ptr_ = x.row_ptr;
      rows_ = x.rows;
      first_ = first;
      last_ = last;
    }
    return {{x.row_ptr, sizeof(Offset), Access::Read, nullptr, 1},
            {x.col, sizeof(LocalId), Access::Read, host_.data()},
            {x.val, sizeof(T), values, host_.data()}};
  }
  /// The host row offsets of the matrix last given to of() ([rows + 1]).
  const Offset* offsets() const noexcept { return host_.data(); }

private:
  const Offset* row_ptr_ = nullptr; // the matrix host_ was read from: its row_ptr, rows and
  std::int64_t rows_ = -1;          // first and last offsets
  Offset first_ = 0, last_ = 0;
  std::vector<Offset> host_;
};

/// Bytes of output a fused pass finds still in cache right after the product that wrote them:
/// what for_cache_blocks gives each block (2 MiB, a core's L2 on the machines we measure).
inline constexpr std::size_t kCacheBlockBytes = std::size_t{2} << 20;

/// Calls f(begin, end) for consecutive blocks of rows covering [0, rows), each about
/// kCacheBlockBytes of `row_bytes`-byte rows: a product per block followed at once by a pass
/// over the rows it wrote (a bias, an activation) reads them from cache, not memory.
template <typename F> void for_cache_blocks(std::int64_t rows, std::size_t row_bytes, F f) {
  const std::int64_t block = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(kCacheBlockBytes / std::max<std::size_t>(row_bytes, 1)));
  for (std::int64_t begin = 0; begin < rows; begin += block)
    f(begin, std::min(rows, begin + block));
}

/// x's rows for for_row_blocks under `memory`: a dense x's rows, a sparse x's row offsets and
/// entries (through `sparse`); nothing without a manager (one block, nothing acquired).
template <typename T>
std::vector<RowTensor> input_rows(SparseRows& sparse, const Backend& backend, const Input<T>& x,
                                  const ChunkManager* memory) {
  if (memory == nullptr) return {};
  if (!x.is_sparse()) return {rows_of(x.dense, Access::Read)};
  return sparse.of(backend, x.sparse, Access::Read);
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

/// Whether an elementwise layer on `x` runs in row blocks: on a dense x its input, output and
/// input gradient (all x's shape), on a sparse x its row offsets, columns, values and output
/// values (x must be in `memory`'s chunks).
template <typename T>
bool elementwise_exceeds_budget(const ChunkManager& memory, const Input<T>& x) {
  if (!x.is_sparse()) {
    return exceeds_budget(memory, 3 * static_cast<std::size_t>(x.dense.size()) * sizeof(T));
  }
  return exceeds_budget(memory, memory.tensor_size(x.sparse.row_ptr) +
                                    memory.tensor_size(x.sparse.col) +
                                    2 * memory.tensor_size(x.sparse.val));
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
