// Graph construction: symmetric de-duplicated CSR from edge lists, self-loops, GCN normalization,
// column tiles.
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
  std::vector<GlobalId> src;  ///< [size()] first endpoint of each edge
  std::vector<GlobalId> dst;  ///< [size()] second endpoint of each edge

  /// The number of edges.
  std::int64_t size() const noexcept { return static_cast<std::int64_t>(src.size()); }
  /// Appends the edge (u, v); not checked until build_symmetric_csr.
  void add(GlobalId u, GlobalId v) {
    src.push_back(u);
    dst.push_back(v);
  }
};

/// The symmetric adjacency [num_nodes, num_nodes] of `edges` on `backend` (a CPU one): each pair
/// stored both ways once, columns sorted, values 1, self-loops dropped unless keep_self_loops.
/// Throws InvalidArgument naming the first edge whose endpoint is outside [0, num_nodes), and
/// when src and dst differ in length or num_nodes exceeds 2^31 - 1. Parallel radix sort, linear
/// in the edge count.
Csr build_symmetric_csr(const BackendPtr& backend, const EdgeList& edges,
                        bool keep_self_loops = false);

/// Aᵀ: [cols, rows] for A: [rows, cols] in host memory, with sorted columns (a serial counting
/// sort).
template <typename T>
CsrT<T> transpose(const CsrT<T>& a);
/// The same Aᵀ, and in `edge_of` (resized to nnz) the edge of A each of its edges is: Aᵀ's entry
/// q is A's entry edge_of[q] (what the source side of graph attention sums over).
template <typename T> CsrT<T> transpose(const CsrT<T>& a, std::vector<Offset>& edge_of);

/// Â = D^-1/2 (A + I) D^-1/2 for a square A: [n, n] in host memory, columns sorted. A unit
/// self-loop is added to rows that lack one, and D is the row sum of A + I; values of A are edge
/// weights. Returns [n, n]; throws DimensionMismatch when A is not square.
Csr gcn_normalize(const Csr& a);

/// M = D⁻¹A, the mean over each row's neighbours (GraphSAGE's mean aggregator): values 1/degree,
/// self-loops dropped, a row without neighbours left empty (it aggregates zero). A: [n, m] with
/// n <= m in host memory, columns sorted: a square adjacency, or a tile's owned rows (whose
/// degrees are their global degrees). Returns [n, m]; throws DimensionMismatch when n > m.
Csr mean_aggregation(const Csr& a);

/// A with unit weights and no self-loops (GIN's sum over the neighbours). A: as for
/// mean_aggregation; returns [n, m].
Csr sum_aggregation(const Csr& a);

/// Â for one rank's tile: a: [n_owned, n_local] unweighted rows of the owned vertices (host
/// memory, columns sorted), whose local ids are 0..n_owned-1 (self-loop at (r, r)); degree:
/// [n_local] global degrees without self-loops. Gives the same values as gcn_normalize of the
/// whole graph on those rows. Returns [n_owned, n_local]; throws DimensionMismatch when a has
/// more rows than columns or degree does not have one entry per column.
Csr gcn_normalize_tile(const Csr& a, std::span<const std::int64_t> degree);

/// Â of a mini-batch block (DGL's GraphConv, norm "both", on a block with self-loops): a:
/// [dst, src] with unit entries, destination r being source r (host memory, columns sorted);
/// a unit self-loop (r, r) is added where missing, and entry (r, c) of A + I is 1 / sqrt(in(r) ·
/// out(c)) with the degrees counted within the block: in(r) the entries of row r, out(c) the
/// destinations of source c. A block of every neighbour of every node gives gcn_normalize's Â.
/// Returns [dst, src]; throws DimensionMismatch when dst > src.
Csr gcn_normalize_block(const Csr& a);

/// True when A equals Aᵀ in structure and values (false for a non-square A). A: host memory,
/// columns sorted.
bool is_symmetric(const Csr& a);

/// Row-degree summary of a CSR.
struct DegreeStats {
  std::int64_t min = 0;       ///< fewest nonzeros in a row
  std::int64_t max = 0;       ///< most nonzeros in a row
  double mean = 0.0;          ///< nnz / rows
  std::int64_t median = 0;    ///< the upper median for an even row count
  std::int64_t isolated = 0;  ///< rows without nonzeros
};

/// Nonzeros per row of `a` (host memory; self-loops count); all zero for a matrix without rows.
DegreeStats degree_stats(const Csr& a);

/// S cut into column tiles, for a product S · X whose X is held one row block at a time:
/// tile i holds the entries of S whose column is in [bounds[i], bounds[i + 1]), in S's order
/// within each row, and keeps S's shape [rows, cols] and global column ids, so spmm of tile i
/// with the whole X reads only rows [bounds[i], bounds[i + 1]) of X, and the sum of the tiles'
/// products is S · X. s: host memory; bounds: [k + 1] with bounds[0] = 0, bounds[k] = s.cols()
/// and non-decreasing (an equal pair gives an empty tile). Returns k matrices on s's backend.
/// Throws InvalidArgument naming the first bad bound and why. For float and double.
template <typename T>
std::vector<CsrT<T>> split_columns(const CsrT<T>& s, std::span<const std::int64_t> bounds);
/// Tile `tile` of split_columns(s, bounds) alone (one at a time holds one tile in memory, not
/// all). Throws InvalidArgument as split_columns does, and naming the tile when there is no
/// tile `tile`.
template <typename T>
CsrT<T> column_tile(const CsrT<T>& s, std::span<const std::int64_t> bounds, std::size_t tile);

}  // namespace tessera::graph
