// Graph construction: symmetric de-duplicated CSR from edge lists, self-loops, GCN normalization.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tessera/core/tensor.hpp"
#include "tessera/core/types.hpp"

namespace tessera::graph {

/// A list of (src, dst) pairs over vertices [0, num_nodes).
struct EdgeList {
  std::int64_t num_nodes = 0;
  std::vector<GlobalId> src;
  std::vector<GlobalId> dst;

  std::int64_t size() const noexcept { return static_cast<std::int64_t>(src.size()); }
  void add(GlobalId u, GlobalId v) {
    src.push_back(u);
    dst.push_back(v);
  }
};

/// The symmetric adjacency of `edges`: each pair stored both ways once, columns sorted, values 1,
/// self-loops dropped unless keep_self_loops. Throws InvalidArgument naming the first edge whose
/// endpoint is outside [0, num_nodes). Parallel, linear in the edge count plus row sorts.
Csr build_symmetric_csr(const BackendPtr& backend, const EdgeList& edges,
                        bool keep_self_loops = false);

/// Aᵀ with sorted columns (parallel counting sort).
template <typename T>
CsrT<T> transpose(const CsrT<T>& a);

/// Â = D^-1/2 (A + I) D^-1/2 for a square A: a unit self-loop is added to rows that lack one,
/// and D is the row sum of A + I. Values of A are used as edge weights.
Csr gcn_normalize(const Csr& a);

/// M = D⁻¹A, the mean over each row's neighbours (GraphSAGE's mean aggregator): values 1/degree,
/// self-loops dropped, a row without neighbours left empty (it aggregates zero). A: [n, m] with
/// n <= m: a square adjacency, or a tile's owned rows (whose degrees are their global degrees).
Csr mean_aggregation(const Csr& a);

/// A with unit weights and no self-loops (GIN's sum over the neighbours). A: as for
/// mean_aggregation.
Csr sum_aggregation(const Csr& a);

/// Â for one rank's tile: a: [n_owned, n_local] unweighted rows of the owned vertices, whose
/// local ids are 0..n_owned-1 (self-loop at (r, r)); degree: [n_local] global degrees without
/// self-loops. Gives the same values as gcn_normalize of the whole graph on those rows.
Csr gcn_normalize_tile(const Csr& a, std::span<const std::int64_t> degree);

/// True when A equals Aᵀ in structure and values.
bool is_symmetric(const Csr& a);

/// Row-degree summary of a CSR.
struct DegreeStats {
  std::int64_t min = 0;
  std::int64_t max = 0;
  double mean = 0.0;
  std::int64_t median = 0;
  std::int64_t isolated = 0;  ///< rows without nonzeros
};

DegreeStats degree_stats(const Csr& a);

}  // namespace tessera::graph
