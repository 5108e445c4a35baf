// Which rows a halo exchange moves (PetscSF vocabulary): built once, collectively, from each
// rank's ghost list; immutable afterwards.
#pragma once

#include "tessera/comm/communicator.hpp"
#include "tessera/core/types.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace tessera::comm {

/// Local numbering of a tile: owned rows [0, n_owned), then ghost rows [n_owned, n_owned +
/// n_ghost) grouped by owner rank (ascending), sorted by global id within a group.
///
/// gather (owner → ghost): every ghost row receives its owner's row; scatter-add (ghost →
/// owner): every ghost row is added into its owner's row.
class HaloPlan {
public:
  /// A block of rows exchanged with one peer rank.
  struct Block {
    int peer = 0;           ///< the other rank
    std::int64_t begin = 0; ///< into send_rows (send blocks) or into the ghost rows (recv blocks)
    std::int64_t count = 0; ///< rows in the block
  };

  /// Builds the plan. owned_ids: [n_owned] global ids of this rank's rows; ghost_ids:
  /// [n_ghost] global ids of the ghost rows; ghost_owner: [n_ghost] owning rank, non-decreasing.
  /// Throws InvalidArgument when ghost_owner has another length than ghost_ids, is out of order
  /// or names this rank or no rank, and when an owner does not own a ghost asked of it (a tile
  /// from another partition). Collective.
  static HaloPlan build(Communicator& comm, std::span<const GlobalId> owned_ids,
                        std::span<const GlobalId> ghost_ids,
                        std::span<const std::int32_t> ghost_owner);

  /// Owned rows, ghost rows, and both: the row count of the matrices an exchange takes.
  std::int64_t n_owned() const noexcept { return n_owned_; }
  std::int64_t n_ghost() const noexcept { return n_ghost_; }
  std::int64_t n_local() const noexcept { return n_owned_ + n_ghost_; }

  /// Rows received per gather: one block per owner of ghosts, ascending peer.
  const std::vector<Block>& recv_blocks() const noexcept { return recv_; }
  /// Rows sent per gather: one block per rank that reads our rows, ascending peer.
  const std::vector<Block>& send_blocks() const noexcept { return send_; }
  /// [sum of send counts] local owned row of each sent row, block after block, in the order the
  /// peer stores them as ghosts.
  const std::vector<LocalId>& send_rows() const noexcept { return send_rows_; }

  /// Rows this rank sends per gather (receives per scatter-add; it receives n_ghost() per gather).
  std::int64_t num_send_rows() const noexcept {
    return static_cast<std::int64_t>(send_rows_.size());
  }

private:
  std::int64_t n_owned_ = 0;
  std::int64_t n_ghost_ = 0;
  std::vector<Block> recv_;
  std::vector<Block> send_;
  std::vector<LocalId> send_rows_;
};

} // namespace tessera::comm
