// The halo exchange of a matrix too large to acquire whole: packed and unpacked a row block at
// a time under a memory budget.
#pragma once

#include "tessera/comm/layer_exchange.hpp"
#include "tessera/engine/chunk_manager.hpp"

#include <cstdint>
#include <vector>

namespace tessera {

/// Gather and scatter-add over a LayerExchange for a [n_local, w] matrix in a manager's chunks
/// that may not fit its device budget: the rows to send are packed block by block into buffers
/// outside the chunks (the exchange's backend, like its staging), the messages travel whole and
/// are waited for at once, and the received rows land in the matrix block by block, each block
/// of its rows acquired only while it is read or written. Computes what the exchange's own
/// gather and scatter-add compute, bit for bit (the same additions in the same order), and its
/// messages are theirs: ranks may mix the two.
template <typename T> class HaloInBlocks {
public:
  /// `halo` must outlive this object. Sorts the plan's send rows within each peer's block.
  explicit HaloInBlocks(comm::LayerExchange<T>& halo);

  /// Fills x's ghost rows with their owners' rows (as the exchange delivers them in `pass`).
  /// x: [n_local, w] in `memory`'s chunks.
  void gather(ChunkManager& memory, DenseView<T> x, comm::Pass pass);
  /// Adds x's ghost rows into their owners' rows on other ranks, and the other ranks' shares
  /// into x's owned rows. x: [n_local, w] in `memory`'s chunks.
  void scatter_add(ChunkManager& memory, DenseView<T> x);

  /// Bytes of the row buffers outside the chunks.
  std::size_t bytes() const noexcept;

private:
  /// Calls f(begin, end) for each peer's entries of the sorted send rows that fall in rows
  /// [row_begin, row_end), peers in the plan's order.
  template <typename F> void for_entries_in(std::int64_t row_begin, std::int64_t row_end, F f);
  /// [rows, width] views of the buffers, grown as needed.
  DenseView<T> rows_buffer(Buffer<T>& buffer, std::int64_t rows, std::int64_t width);

  comm::LayerExchange<T>* halo_;
  BackendPtr backend_;                             // the exchange's: memory outside the chunks
  std::vector<LocalId> sorted_host_;               // the send rows, sorted within each peer's block
  Buffer<LocalId> sorted_;                         // sorted_host_ in the backend's memory
  Buffer<LocalId> by_row_;                         // [j]: the plan's position of sorted entry j
  Buffer<LocalId> position_;                       // [k]: the sorted position of the plan's entry k
  Buffer<T> sorted_rows_, send_rows_, ghost_rows_; // [send rows, w], [send rows, w], [ghosts, w]
};

} // namespace tessera
