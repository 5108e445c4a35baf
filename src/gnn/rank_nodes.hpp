// Where the nodes of a distributed graph are, and the neighbours of a rank's rows by global id:
// what link prediction and sampling over ranks look nodes up in. Internal to the gnn layer.
#pragma once

#include "tessera/comm/communicator.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/tensor.hpp"
#include "tessera/core/types.hpp"

#include <algorithm>
#include <cstdint>
#include <fmt/core.h>
#include <span>
#include <vector>

namespace tessera::gnn {

/// Where every node of a distributed graph is: the rank that owns it and, for this rank's nodes,
/// its row. Default-constructed: one process, where both are the identity.
class NodeIndex {
public:
  NodeIndex() = default;
  /// From every rank's owned ids. Collective (an allreduce of [num_nodes]); InvalidArgument for
  /// an id outside the graph and for ids that do not cover it once.
  NodeIndex(comm::Communicator& comm, std::span<const GlobalId> owned, std::int64_t num_nodes)
      : rank_(comm.rank()) {
    std::vector<std::int64_t> owner(static_cast<std::size_t>(num_nodes), 0);
    std::int64_t owned_total = static_cast<std::int64_t>(owned.size());
    std::int64_t bad = -1;
    for (const GlobalId id : owned) {
      if (id < 0 || id >= num_nodes)
        bad = id;
      else
        owner[static_cast<std::size_t>(id)] += rank_ + 1;
    }
    if (bad >= 0 || owned.size() > static_cast<std::size_t>(num_nodes)) {
      throw InvalidArgument(fmt::format("rank {} owns node {}, outside the "
                                        "graph's {} nodes",
                                        rank_, bad, num_nodes));
    }
    comm.allreduce_sum(std::span<std::int64_t>(owner));
    comm.allreduce_sum(std::span<std::int64_t>(&owned_total, 1));
    entries_.assign(owner.size(), Entry{0, -1});
    for (std::size_t v = 0; v < owner.size(); ++v) {
      if (owner[v] < 1 || owner[v] > comm.size() || owned_total != num_nodes) {
        throw InvalidArgument(fmt::format("the ranks own {} rows of a graph of "
                                          "{} nodes, node {} {} times: the tiles are not one "
                                          "partition of it",
                                          owned_total, num_nodes, v, owner[v] < 1 ? "no" : "more"));
      }
      entries_[v].owner = static_cast<std::int32_t>(owner[v] - 1);
    }
    for (std::size_t r = 0; r < owned.size(); ++r)
      entries_[static_cast<std::size_t>(owned[r])].row = static_cast<std::int32_t>(r);
  }

  bool distributed() const noexcept { return !entries_.empty(); }
  bool mine(GlobalId v) const noexcept { return owner(v) == rank_; }
  int owner(GlobalId v) const noexcept {
    return entries_.empty() ? 0 : entries_[static_cast<std::size_t>(v)].owner;
  }
  /// The row of a node this rank owns (for a remote one -1, or what set_row gave it: the row
  /// of a table its user plans, such as a cache).
  std::int64_t row(GlobalId v) const noexcept {
    return entries_.empty() ? v : entries_[static_cast<std::size_t>(v)].row;
  }
  void set_row(GlobalId v, std::int64_t row) noexcept {
    entries_[static_cast<std::size_t>(v)].row = static_cast<std::int32_t>(row);
  }
  /// Asks for v's entry ahead of a lookup (nothing for a node outside the graph).
  void prefetch(GlobalId v) const noexcept {
    if (v >= 0 && static_cast<std::size_t>(v) < entries_.size())
      __builtin_prefetch(entries_.data() + v);
  }

private:
  /// A node's owner and row side by side: a lookup of both touches one cache line.
  struct Entry {
    std::int32_t owner;
    std::int32_t row;
  };
  int rank_ = 0;
  std::vector<Entry> entries_;
};

/// The neighbours of a rank's owned rows by global id, each row's sorted: what a negative draw is
/// checked against. In one process (`ids` empty) the adjacency's own columns.
class Neighbours {
public:
  Neighbours(const Csr& a, std::span<const GlobalId> ids) : a_(&a), global_(!ids.empty()) {
    if (!global_) return;
    col_.resize(static_cast<std::size_t>(a.nnz()));
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < a.rows(); ++r) {
      const Offset begin = a.row_ptr()[r], end = a.row_ptr()[r + 1];
      for (Offset k = begin; k < end; ++k)
        col_[static_cast<std::size_t>(k)] = ids[static_cast<std::size_t>(a.col()[k])];
      std::sort(col_.begin() + begin, col_.begin() + end);
    }
  }
  /// Row `row`'s neighbours are k in [begin(row), end(row)): neighbour(k), ascending.
  Offset begin(std::int64_t row) const {
    return a_->row_ptr()[row];
  }
  Offset end(std::int64_t row) const {
    return a_->row_ptr()[row + 1];
  }
  GlobalId neighbour(Offset k) const {
    return global_ ? col_[static_cast<std::size_t>(k)] : static_cast<GlobalId>(a_->col()[k]);
  }
  /// Asks for the lines of row `row`'s offsets ahead of a read.
  void prefetch_offsets(std::int64_t row) const {
    __builtin_prefetch(a_->row_ptr() + row);
  }
  /// Asks for the first lines of row `row`'s neighbours ahead of a read (its offsets are read).
  void prefetch_neighbours(std::int64_t row) const {
    const Offset begin = a_->row_ptr()[row];
    const char* at = global_ ? reinterpret_cast<const char*>(col_.data() + begin)
                             : reinterpret_cast<const char*>(a_->col() + begin);
    __builtin_prefetch(at);
    __builtin_prefetch(at + 64);
  }
  /// Whether v is a neighbour of owned row `row`.
  bool has(std::int64_t row, GlobalId v) const {
    const Offset begin = a_->row_ptr()[row], end = a_->row_ptr()[row + 1];
    if (global_) return std::binary_search(col_.begin() + begin, col_.begin() + end, v);
    return std::binary_search(a_->col() + begin, a_->col() + end, static_cast<LocalId>(v));
  }

private:
  const Csr* a_;
  bool global_;
  std::vector<GlobalId> col_;
};

} // namespace tessera::gnn
