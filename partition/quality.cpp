// How good a partition is (edge cut, halo volumes, balance) and the connected components of a
// graph, both in time linear in the nonzeros.
#include "quality_counts.hpp"
#include "tessera/core/error.hpp"
#include "tessera/partition/partition.hpp"

#include <algorithm>
#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/graph/connected_components.hpp>
#include <cstdint>
#include <fmt/core.h>
#include <numeric>
#include <utility>
#include <vector>

namespace tessera::partition {

namespace {

void validate(const Csr& a, const Partition& partition) {
  if (a.rows() != a.cols())
    throw InvalidArgument("measure needs a square adjacency, got " + a.shape());
  if (partition.num_parts < 1) {
    throw InvalidArgument(fmt::format("partition has {} parts", partition.num_parts));
  }
  if (static_cast<std::int64_t>(partition.owner.size()) != a.rows()) {
    throw DimensionMismatch(fmt::format("partition has {} owners for a graph of {} nodes",
                                        partition.owner.size(), a.rows()));
  }
  for (std::size_t v = 0; v < partition.owner.size(); ++v) {
    if (partition.owner[v] < 0 || partition.owner[v] >= partition.num_parts) {
      throw InvalidArgument(fmt::format("owner of vertex {} is {}, outside [0, {})", v,
                                        partition.owner[v], partition.num_parts));
    }
  }
}

/// Per-part sums one thread collects before they are added together.
struct Tally {
  explicit Tally(int parts)
      : nodes(static_cast<std::size_t>(parts)), nonzeros(nodes.size()), send(nodes.size()),
        recv(nodes.size()) {}
  std::int64_t cut_entries = 0; // nonzeros (u, v), u < v, with owner(u) != owner(v)
  std::vector<std::int64_t> nodes, nonzeros, send, recv;

  void add(const Tally& other) {
    cut_entries += other.cut_entries;
    for (std::size_t p = 0; p < nodes.size(); ++p) {
      nodes[p] += other.nodes[p];
      nonzeros[p] += other.nonzeros[p];
      send[p] += other.send[p];
      recv[p] += other.recv[p];
    }
  }
};

double max_over_mean(const std::vector<std::int64_t>& values) {
  const std::int64_t total = std::accumulate(values.begin(), values.end(), std::int64_t{0});
  if (total == 0) return 1.0;
  const double mean = static_cast<double>(total) / static_cast<double>(values.size());
  return static_cast<double>(*std::max_element(values.begin(), values.end())) / mean;
}

} // namespace

Quality measure(const Csr& a, const Partition& partition) {
  validate(a, partition);
  const std::int64_t n = a.rows();
  const int parts = partition.num_parts;
  const std::int32_t* owner = partition.owner.data();
  const Offset* row_ptr = a.row_ptr();
  const LocalId* col = a.col();

  Tally total(parts);
#pragma omp parallel
  {
    Tally mine(parts);
    // last_seen[q] == v marks part q as already counted for vertex v.
    std::vector<std::int64_t> last_seen(static_cast<std::size_t>(parts), -1);
#pragma omp for schedule(static) nowait
    for (std::int64_t v = 0; v < n; ++v) {
      const std::int32_t p = owner[v];
      ++mine.nodes[p];
      mine.nonzeros[p] += row_ptr[v + 1] - row_ptr[v];
      last_seen[p] = v; // v is never sent to its own part
      for (Offset k = row_ptr[v]; k < row_ptr[v + 1]; ++k) {
        const std::int32_t q = owner[col[k]];
        if (q != p && col[k] > v) ++mine.cut_entries;
        if (last_seen[q] == v) continue;
        last_seen[q] = v; // (v, q) is one row of p's send to q
        ++mine.send[p];
        ++mine.recv[q];
      }
    }
#pragma omp critical(tessera_partition_measure)
    total.add(mine);
  }

  return detail::summarize_quality(parts, n, total.cut_entries, std::move(total.nodes),
                                   std::move(total.nonzeros), std::move(total.send),
                                   std::move(total.recv));
}

namespace detail {

Quality summarize_quality(int parts, std::int64_t nodes, std::int64_t cut_entries,
                          std::vector<std::int64_t> part_nodes,
                          std::vector<std::int64_t> part_nonzeros, std::vector<std::int64_t> send,
                          std::vector<std::int64_t> recv) {
  Quality quality;
  quality.edge_cut = cut_entries;
  quality.send = std::move(send);
  quality.recv = std::move(recv);
  quality.total_volume = std::accumulate(quality.send.begin(), quality.send.end(), std::int64_t{0});
  quality.max_send = *std::max_element(quality.send.begin(), quality.send.end());
  quality.max_recv = *std::max_element(quality.recv.begin(), quality.recv.end());
  quality.mean_send = static_cast<double>(quality.total_volume) / parts;
  quality.mean_recv = quality.mean_send;
  quality.vertex_balance = max_over_mean(part_nodes);
  quality.edge_balance = max_over_mean(part_nonzeros);
  quality.part_nodes = std::move(part_nodes);
  // In a symmetric adjacency, part q reads remote vertex v exactly when v is sent to q.
  quality.ghosts = quality.recv;
  quality.broadcast_volume = static_cast<std::int64_t>(parts - 1) * nodes;
  return quality;
}

} // namespace detail

Components connected_components(const Csr& a) {
  if (a.rows() != a.cols()) {
    throw InvalidArgument("connected_components needs a square adjacency, got " + a.shape());
  }
  const std::int64_t n = a.rows();
  if (n == 0) return {};
  using Graph =
      boost::compressed_sparse_row_graph<boost::directedS, boost::no_property, boost::no_property,
                                         boost::no_property, std::uint32_t, std::uint64_t>;
  // The stored (row, col) pairs are already sorted by row; a symmetric adjacency makes a
  // depth-first search over out-edges reach exactly each vertex's component.
  std::vector<std::pair<std::uint32_t, std::uint32_t>> edges(static_cast<std::size_t>(a.nnz()));
#pragma omp parallel for schedule(static)
  for (std::int64_t v = 0; v < n; ++v) {
    for (Offset k = a.row_ptr()[v]; k < a.row_ptr()[v + 1]; ++k) {
      edges[k] = {static_cast<std::uint32_t>(v), static_cast<std::uint32_t>(a.col()[k])};
    }
  }
  const Graph graph(boost::edges_are_sorted, edges.begin(), edges.end(),
                    static_cast<std::uint32_t>(n));
  edges = {};

  std::vector<std::uint32_t> component(static_cast<std::size_t>(n));
  const auto count = boost::connected_components(
      graph, boost::make_iterator_property_map(component.begin(), get(boost::vertex_index, graph)));
  std::vector<std::int64_t> size(count, 0);
  for (const std::uint32_t c : component)
    ++size[c];

  Components result;
  result.count = count;
  result.largest = *std::max_element(size.begin(), size.end());
  return result;
}

} // namespace tessera::partition
