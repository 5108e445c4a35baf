// Cutting one rank's tile out of the whole dataset: owned rows, ghost rows, local CSR, features.
#include "tessera/partition/local_graph.hpp"

#include "owned_rows.hpp"
#include "tessera/core/error.hpp"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/cuthill_mckee_ordering.hpp>
#include <limits>
#include <numeric>
#include <unordered_map>
#include <utility>

namespace tessera::partition {
namespace {

/// Neighbours of global vertex v in the whole graph, skipping a self-loop.
std::int64_t global_degree(const Csr& a, GlobalId v) {
  std::int64_t degree = 0;
  for (Offset k = a.row_ptr()[v]; k < a.row_ptr()[v + 1]; ++k)
    degree += a.col()[k] != v;
  return degree;
}

/// Reverse Cuthill-McKee order of the tile's owned rows on its owned-owned subgraph (Boost.Graph:
/// per component a BFS from a pseudo-peripheral vertex, neighbours by increasing degree,
/// reversed), as old_of_new.
std::vector<LocalId> rcm_order(const LocalGraph& tile) {
  using Graph =
      boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS,
                            boost::property<boost::vertex_color_t, boost::default_color_type>>;
  const Csr& a = tile.adjacency;
  const std::int64_t n = tile.n_owned();
  Graph g(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    for (Offset k = a.row_ptr()[i]; k < a.row_ptr()[i + 1]; ++k) {
      // Each undirected owned-owned edge once, from its lower row.
      if (a.col()[k] > i && a.col()[k] < n) boost::add_edge(i, a.col()[k], g);
    }
  }
  std::vector<Graph::vertex_descriptor> order(static_cast<std::size_t>(n));
  // Writing Cuthill-McKee through a reverse iterator leaves the reverse order in `order`.
  boost::cuthill_mckee_ordering(g, order.rbegin(), boost::get(boost::vertex_color, g),
                                boost::make_degree_map(g));
  return {order.begin(), order.end()};
}

/// Rows `rows` of a CSR, columns unchanged.
Csr gather_csr_rows(const Csr& m, const std::vector<GlobalId>& rows) {
  Offset nnz = 0;
  for (const GlobalId r : rows)
    nnz += m.row_ptr()[r + 1] - m.row_ptr()[r];
  Csr out(m.backend(), static_cast<std::int64_t>(rows.size()), m.cols(), nnz);
  Offset at = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    for (Offset k = m.row_ptr()[rows[i]]; k < m.row_ptr()[rows[i] + 1]; ++k, ++at) {
      out.col()[at] = m.col()[k];
      out.val()[at] = m.val()[k];
    }
    out.row_ptr()[i + 1] = at;
  }
  return out;
}

/// The rows of `dataset` that `part` owns under `owner`, in ascending global id.
detail::OwnedRows gather_owned_rows(const datasets::Dataset& dataset,
                                    const std::vector<std::int32_t>& owner, int part) {
  const Csr& a = dataset.adjacency;
  detail::OwnedRows rows;
  for (GlobalId v = 0; v < dataset.num_nodes; ++v) {
    if (owner[v] != part) continue;
    rows.ids.push_back(v);
    for (Offset k = a.row_ptr()[v]; k < a.row_ptr()[v + 1]; ++k) {
      rows.col.push_back(a.col()[k]);
      rows.val.push_back(a.val()[k]);
    }
    rows.row_ptr.push_back(static_cast<Offset>(rows.col.size()));
    rows.degree.push_back(global_degree(a, v));
    if (dataset.has_labels()) rows.labels.push_back(dataset.labels[v]);
  }
  if (dataset.features.dense) {
    const Dense& x = *dataset.features.dense;
    Dense out(x.backend(), static_cast<std::int64_t>(rows.ids.size()), x.cols());
    for (std::size_t i = 0; i < rows.ids.size(); ++i) {
      std::copy_n(x.data() + rows.ids[i] * x.cols(), x.cols(), out.data() + i * x.cols());
    }
    rows.features.dense = std::move(out);
  } else if (dataset.features.sparse) {
    rows.features.sparse = gather_csr_rows(*dataset.features.sparse, rows.ids);
  }
  rows.split.assign(rows.ids.size(), 0);
  for (const auto& [split, bit] :
       {std::pair{&dataset.train_idx, detail::kTrain}, std::pair{&dataset.val_idx, detail::kVal},
        std::pair{&dataset.test_idx, detail::kTest}}) {
    for (const std::int32_t v : *split) {
      if (owner[v] != part) continue;
      const auto at = std::lower_bound(rows.ids.begin(), rows.ids.end(), GlobalId{v});
      rows.split[static_cast<std::size_t>(at - rows.ids.begin())] |= bit;
    }
  }
  return rows;
}

void permute_owned(LocalGraph& tile, const std::vector<LocalId>& old_of_new);

} // namespace

namespace detail {

LocalGraph assemble_tile(const BackendPtr& backend, OwnedRows&& rows, int part, int num_parts,
                         std::int64_t num_global_nodes, std::int32_t num_classes,
                         const GhostLookup& lookup, Reorder reorder) {
  LocalGraph tile;
  tile.part = part;
  tile.num_parts = num_parts;
  tile.num_global_nodes = num_global_nodes;
  tile.num_classes = num_classes;
  tile.owned_ids = std::move(rows.ids);
  std::unordered_map<GlobalId, LocalId> local;
  local.reserve(tile.owned_ids.size() * 2);
  for (std::size_t i = 0; i < tile.owned_ids.size(); ++i) {
    local.emplace(tile.owned_ids[i], static_cast<LocalId>(i));
  }

  // Ghosts: distinct remote neighbours, grouped by owner, ascending global id within a group.
  std::vector<GlobalId> remote;
  for (const GlobalId u : rows.col) {
    if (!local.contains(u)) remote.push_back(u);
  }
  std::sort(remote.begin(), remote.end());
  remote.erase(std::unique(remote.begin(), remote.end()), remote.end());
  const std::int64_t n_local = tile.n_owned() + static_cast<std::int64_t>(remote.size());
  if (n_local > std::numeric_limits<LocalId>::max()) {
    throw InvalidArgument("build_local_graph: part " + std::to_string(part) + " has " +
                          std::to_string(n_local) + " local vertices, more than int32 holds");
  }
  std::vector<std::int32_t> remote_owner;
  std::vector<std::int64_t> remote_degree;
  lookup(remote, remote_owner, remote_degree);
  std::vector<std::size_t> by_owner(remote.size());
  std::iota(by_owner.begin(), by_owner.end(), std::size_t{0});
  std::stable_sort(by_owner.begin(), by_owner.end(),
                   [&](std::size_t x, std::size_t y) { return remote_owner[x] < remote_owner[y]; });

  tile.degree = std::move(rows.degree);
  for (const std::size_t g : by_owner) {
    local.emplace(remote[g], static_cast<LocalId>(tile.n_owned() + tile.n_ghost()));
    tile.ghost_ids.push_back(remote[g]);
    tile.ghost_owner.push_back(remote_owner[g]);
    tile.degree.push_back(remote_degree[g]);
  }

  // Local CSR [n_owned, n_owned + n_ghost]: the owned rows remapped, columns re-sorted.
  tile.adjacency = Csr(backend, tile.n_owned(), n_local, rows.row_ptr.back());
  std::vector<std::pair<LocalId, float>> row;
  for (std::int64_t i = 0; i < tile.n_owned(); ++i) {
    row.clear();
    for (Offset k = rows.row_ptr[i]; k < rows.row_ptr[i + 1]; ++k) {
      row.emplace_back(local.at(rows.col[k]), rows.val[k]);
    }
    std::sort(row.begin(), row.end(),
              [](const auto& x, const auto& y) { return x.first < y.first; });
    Offset at = rows.row_ptr[i];
    for (const auto& [c, value] : row) {
      tile.adjacency.col()[at] = c;
      tile.adjacency.val()[at] = value;
      ++at;
    }
    tile.adjacency.row_ptr()[i + 1] = at;
  }

  tile.features = std::move(rows.features);
  tile.labels = std::move(rows.labels);
  for (std::size_t i = 0; i < rows.split.size(); ++i) {
    const auto r = static_cast<std::int32_t>(i);
    if (rows.split[i] & kTrain) tile.train_idx.push_back(r);
    if (rows.split[i] & kVal) tile.val_idx.push_back(r);
    if (rows.split[i] & kTest) tile.test_idx.push_back(r);
  }
  if (reorder == Reorder::Rcm) permute_owned(tile, rcm_order(tile));
  return tile;
}

} // namespace detail

LocalGraph build_local_graph(const datasets::Dataset& dataset, const Partition& partition, int part,
                             Reorder reorder) {
  const Csr& a = dataset.adjacency;
  const std::vector<std::int32_t>& owner = partition.owner;
  if (static_cast<std::int64_t>(owner.size()) != dataset.num_nodes ||
      a.rows() != dataset.num_nodes) {
    throw InvalidArgument("build_local_graph: the partition covers " +
                          std::to_string(owner.size()) + " vertices, the dataset has " +
                          std::to_string(dataset.num_nodes) + " (adjacency " + a.shape() + ")");
  }
  if (part < 0 || part >= partition.num_parts) {
    throw InvalidArgument("build_local_graph: part " + std::to_string(part) + " is outside [0, " +
                          std::to_string(partition.num_parts) + ")");
  }
  for (GlobalId v = 0; v < dataset.num_nodes; ++v) {
    if (owner[v] < 0 || owner[v] >= partition.num_parts) {
      throw InvalidArgument("build_local_graph: vertex " + std::to_string(v) + " has owner " +
                            std::to_string(owner[v]) + ", outside [0, " +
                            std::to_string(partition.num_parts) + ")");
    }
  }
  const auto lookup = [&](std::span<const GlobalId> ids, std::vector<std::int32_t>& ghost_owner,
                          std::vector<std::int64_t>& degree) {
    for (const GlobalId u : ids) {
      ghost_owner.push_back(owner[u]);
      degree.push_back(global_degree(a, u));
    }
  };
  return detail::assemble_tile(a.backend(), gather_owned_rows(dataset, owner, part), part,
                               partition.num_parts, dataset.num_nodes, dataset.num_classes, lookup,
                               reorder);
}

LocalGraph whole_graph_tile(datasets::Dataset&& dataset) {
  if (dataset.adjacency.rows() != dataset.num_nodes) {
    throw InvalidArgument("whole_graph_tile: adjacency " + dataset.adjacency.shape() + " for " +
                          std::to_string(dataset.num_nodes) + " vertices");
  }
  if (dataset.num_nodes > std::numeric_limits<LocalId>::max()) {
    throw InvalidArgument("whole_graph_tile: " + std::to_string(dataset.num_nodes) +
                          " vertices, more than int32 holds");
  }
  LocalGraph tile;
  tile.part = 0;
  tile.num_parts = 1;
  tile.num_global_nodes = dataset.num_nodes;
  tile.owned_ids.resize(static_cast<std::size_t>(dataset.num_nodes));
  std::iota(tile.owned_ids.begin(), tile.owned_ids.end(), GlobalId{0});
  tile.degree.reserve(tile.owned_ids.size());
  for (const GlobalId v : tile.owned_ids)
    tile.degree.push_back(global_degree(dataset.adjacency, v));
  tile.adjacency = std::move(dataset.adjacency);
  tile.features = std::move(dataset.features);
  tile.labels = std::move(dataset.labels);
  tile.num_classes = dataset.num_classes;
  for (auto [from, to] : {std::pair{&dataset.train_idx, &tile.train_idx},
                          std::pair{&dataset.val_idx, &tile.val_idx},
                          std::pair{&dataset.test_idx, &tile.test_idx}}) {
    *to = std::move(*from);
    std::sort(to->begin(), to->end());
  }
  return tile;
}

} // namespace tessera::partition

namespace tessera::partition {

namespace {

/// new_of_old[old] for a permutation given as old_of_new.
std::vector<LocalId> inverse(const std::vector<LocalId>& old_of_new) {
  std::vector<LocalId> new_of_old(old_of_new.size());
  for (std::size_t i = 0; i < old_of_new.size(); ++i)
    new_of_old[old_of_new[i]] = static_cast<LocalId>(i);
  return new_of_old;
}

/// Rows of m in the order old_of_new, with column ids below `renumbered` mapped through
/// new_of_old and every row's columns re-sorted.
Csr permute_rows(const Csr& m, const std::vector<LocalId>& old_of_new,
                 const std::vector<LocalId>& new_of_old, std::int64_t renumbered) {
  Csr out(m.backend(), m.rows(), m.cols(), m.nnz());
  std::vector<std::pair<LocalId, float>> row;
  Offset at = 0;
  for (std::size_t i = 0; i < old_of_new.size(); ++i) {
    const LocalId r = old_of_new[i];
    row.clear();
    for (Offset k = m.row_ptr()[r]; k < m.row_ptr()[r + 1]; ++k) {
      const LocalId c = m.col()[k];
      row.emplace_back(c < renumbered ? new_of_old[c] : c, m.val()[k]);
    }
    std::sort(row.begin(), row.end(),
              [](const auto& x, const auto& y) { return x.first < y.first; });
    for (const auto& [c, value] : row) {
      out.col()[at] = c;
      out.val()[at] = value;
      ++at;
    }
    out.row_ptr()[i + 1] = at;
  }
  return out;
}

void renumber_split(std::vector<std::int32_t>& split, const std::vector<LocalId>& new_of_old) {
  for (std::int32_t& r : split) r = new_of_old[r];
  std::sort(split.begin(), split.end());
}

}  // namespace

std::int64_t order_interior_first(LocalGraph& tile) {
  const std::int64_t n_owned = tile.n_owned();
  const Csr& a = tile.adjacency;
  std::vector<LocalId> interior, boundary;
  for (std::int64_t r = 0; r < n_owned; ++r) {
    // Columns are sorted and ghosts numbered after the owned rows: the last one tells.
    const bool reads_ghost = a.row_ptr()[r + 1] > a.row_ptr()[r] && a.col()[a.row_ptr()[r + 1] - 1] >= n_owned;
    (reads_ghost ? boundary : interior).push_back(static_cast<LocalId>(r));
  }
  const auto n_interior = static_cast<std::int64_t>(interior.size());
  // Already interior first (every row interior, say, as on the one tile of a one-rank job).
  if (boundary.empty() || boundary.front() == n_interior) return n_interior;
  std::vector<LocalId> old_of_new = std::move(interior);
  old_of_new.insert(old_of_new.end(), boundary.begin(), boundary.end());
  permute_owned(tile, old_of_new);
  return n_interior;
}

namespace {

/// Renumbers the owned rows of `tile`: new row i is old row old_of_new[i]. Everything indexed by
/// owned row follows; ghosts keep their places.
void permute_owned(LocalGraph& tile, const std::vector<LocalId>& old_of_new) {
  const std::int64_t n_owned = tile.n_owned();
  const std::vector<LocalId> new_of_old = inverse(old_of_new);
  const auto permute = [&](auto& values) {
    auto copy = values;
    for (std::size_t i = 0; i < old_of_new.size(); ++i) values[i] = copy[old_of_new[i]];
  };
  permute(tile.owned_ids);
  permute(tile.degree);  // its ghost entries stay where they are
  if (!tile.labels.empty()) permute(tile.labels);
  tile.adjacency = permute_rows(tile.adjacency, old_of_new, new_of_old, n_owned);
  if (tile.features.dense) {
    const Dense& x = *tile.features.dense;
    Dense out(x.backend(), x.rows(), x.cols());
    for (std::int64_t i = 0; i < n_owned; ++i)
      std::copy_n(x.data() + old_of_new[i] * x.cols(), x.cols(), out.data() + i * x.cols());
    tile.features.dense = std::move(out);
  } else if (tile.features.sparse) {
    tile.features.sparse = permute_rows(*tile.features.sparse, old_of_new, new_of_old, 0);
  }
  renumber_split(tile.train_idx, new_of_old);
  renumber_split(tile.val_idx, new_of_old);
  renumber_split(tile.test_idx, new_of_old);
}

} // namespace

}  // namespace tessera::partition
