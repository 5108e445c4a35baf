// Cutting one rank's tile out of the whole dataset: owned rows, ghost rows, local CSR, features.
#include "tessera/partition/local_graph.hpp"

#include "tessera/core/error.hpp"

#include <algorithm>
#include <numeric>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/cuthill_mckee_ordering.hpp>
#include <limits>
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

/// Reverse Cuthill-McKee order of the owned rows on the owned-owned subgraph (Boost.Graph: per
/// component a BFS from a pseudo-peripheral vertex, neighbours by increasing degree, reversed).
/// `owned` is in ascending global id; returns the new order as positions into `owned`.
std::vector<LocalId> rcm_order(const Csr& a, const std::vector<std::int32_t>& owner, int part,
                               const std::vector<GlobalId>& owned,
                               const std::unordered_map<GlobalId, LocalId>& position) {
  using Graph =
      boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS,
                            boost::property<boost::vertex_color_t, boost::default_color_type>>;
  const auto n = static_cast<LocalId>(owned.size());
  Graph g(static_cast<std::size_t>(n));
  for (LocalId i = 0; i < n; ++i) {
    const GlobalId v = owned[i];
    for (Offset k = a.row_ptr()[v]; k < a.row_ptr()[v + 1]; ++k) {
      const GlobalId u = a.col()[k];
      // Each undirected edge once: from its lower position.
      if (u != v && owner[u] == part && position.at(u) > i) boost::add_edge(i, position.at(u), g);
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

/// Local ids of the split's members owned by `part`, ascending.
std::vector<std::int32_t> local_split(const std::vector<std::int32_t>& split,
                                      const std::vector<std::int32_t>& owner, int part,
                                      const std::unordered_map<GlobalId, LocalId>& local) {
  std::vector<std::int32_t> out;
  for (const std::int32_t v : split) {
    if (owner[v] == part) out.push_back(local.at(v));
  }
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace

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

  LocalGraph tile;
  tile.part = part;
  tile.num_parts = partition.num_parts;
  tile.num_global_nodes = dataset.num_nodes;

  // The one pass over the owner vector.
  for (GlobalId v = 0; v < dataset.num_nodes; ++v) {
    if (owner[v] < 0 || owner[v] >= partition.num_parts) {
      throw InvalidArgument("build_local_graph: vertex " + std::to_string(v) + " has owner " +
                            std::to_string(owner[v]) + ", outside [0, " +
                            std::to_string(partition.num_parts) + ")");
    }
    if (owner[v] == part) tile.owned_ids.push_back(v);
  }

  std::unordered_map<GlobalId, LocalId> local;
  local.reserve(tile.owned_ids.size() * 2);
  for (std::size_t i = 0; i < tile.owned_ids.size(); ++i) {
    local.emplace(tile.owned_ids[i], static_cast<LocalId>(i));
  }
  if (reorder == Reorder::Rcm) {
    const std::vector<LocalId> order = rcm_order(a, owner, part, tile.owned_ids, local);
    std::vector<GlobalId> reordered(order.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
      reordered[i] = tile.owned_ids[order[i]];
      local[reordered[i]] = static_cast<LocalId>(i);
    }
    tile.owned_ids = std::move(reordered);
  }

  // Ghosts: distinct remote neighbours, grouped by owner, ascending global id within a group.
  std::vector<std::pair<std::int32_t, GlobalId>> ghosts;
  for (const GlobalId v : tile.owned_ids) {
    for (Offset k = a.row_ptr()[v]; k < a.row_ptr()[v + 1]; ++k) {
      const GlobalId u = a.col()[k];
      if (owner[u] != part) ghosts.emplace_back(owner[u], u);
    }
  }
  std::sort(ghosts.begin(), ghosts.end());
  ghosts.erase(std::unique(ghosts.begin(), ghosts.end()), ghosts.end());
  const std::int64_t n_local = tile.n_owned() + static_cast<std::int64_t>(ghosts.size());
  if (n_local > std::numeric_limits<LocalId>::max()) {
    throw InvalidArgument("build_local_graph: part " + std::to_string(part) + " has " +
                          std::to_string(n_local) + " local vertices, more than int32 holds");
  }
  for (const auto& [ghost_owner, id] : ghosts) {
    local.emplace(id, static_cast<LocalId>(tile.n_owned() + tile.n_ghost()));
    tile.ghost_ids.push_back(id);
    tile.ghost_owner.push_back(ghost_owner);
  }

  tile.degree.reserve(static_cast<std::size_t>(n_local));
  for (const GlobalId v : tile.owned_ids)
    tile.degree.push_back(global_degree(a, v));
  for (const GlobalId v : tile.ghost_ids)
    tile.degree.push_back(global_degree(a, v));

  // Local CSR [n_owned, n_owned + n_ghost]: the owned rows remapped, columns re-sorted.
  Offset nnz = 0;
  for (const GlobalId v : tile.owned_ids)
    nnz += a.row_ptr()[v + 1] - a.row_ptr()[v];
  tile.adjacency = Csr(a.backend(), tile.n_owned(), n_local, nnz);
  std::vector<std::pair<LocalId, float>> row;
  Offset at = 0;
  for (std::int64_t i = 0; i < tile.n_owned(); ++i) {
    const GlobalId v = tile.owned_ids[i];
    row.clear();
    for (Offset k = a.row_ptr()[v]; k < a.row_ptr()[v + 1]; ++k) {
      row.emplace_back(local.at(a.col()[k]), a.val()[k]);
    }
    std::sort(row.begin(), row.end(),
              [](const auto& x, const auto& y) { return x.first < y.first; });
    for (const auto& [c, value] : row) {
      tile.adjacency.col()[at] = c;
      tile.adjacency.val()[at] = value;
      ++at;
    }
    tile.adjacency.row_ptr()[i + 1] = at;
  }

  if (dataset.features.dense) {
    const Dense& x = *dataset.features.dense;
    Dense out(x.backend(), tile.n_owned(), x.cols());
    for (std::int64_t i = 0; i < tile.n_owned(); ++i) {
      std::copy_n(x.data() + tile.owned_ids[i] * x.cols(), x.cols(), out.data() + i * x.cols());
    }
    tile.features.dense = std::move(out);
  } else if (dataset.features.sparse) {
    tile.features.sparse = gather_csr_rows(*dataset.features.sparse, tile.owned_ids);
  }

  if (dataset.has_labels()) {
    tile.labels.reserve(tile.owned_ids.size());
    for (const GlobalId v : tile.owned_ids)
      tile.labels.push_back(dataset.labels[v]);
  }
  tile.num_classes = dataset.num_classes;
  tile.train_idx = local_split(dataset.train_idx, owner, part, local);
  tile.val_idx = local_split(dataset.val_idx, owner, part, local);
  tile.test_idx = local_split(dataset.test_idx, owner, part, local);
  return tile;
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
  return n_interior;
}

}  // namespace tessera::partition
