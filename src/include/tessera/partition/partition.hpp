// Cutting a graph into P parts: METIS k-way or recursive bisection, or the block and random
// baselines, with vertex weights and target part weights; and how good a cut is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/core/tensor.hpp"

namespace tessera::partition {

enum class Method {
  MetisKway,       ///< METIS_PartGraphKway (default)
  MetisRecursive,  ///< METIS_PartGraphRecursive
  Block,           ///< contiguous id ranges of equal weight (CAGNET's 1D layout)
  Random           ///< each vertex to a uniformly random part (seeded)
};

enum class VertexWeight {
  Uniform,  ///< every vertex 1
  Degree,   ///< degree + 1
  Compute   ///< degree + feature width: the per-vertex cost of one GCN layer
};

/// What METIS k-way minimizes. Recursive bisection always minimizes the edge cut.
enum class Objective {
  EdgeCut,  ///< edges between parts (METIS's default; fastest)
  Volume    ///< total communication volume, the rows a halo exchange moves (about 2x slower)
};

struct Options {
  int num_parts = 2;
  Method method = Method::MetisKway;
  Objective objective = Objective::EdgeCut;
  VertexWeight vertex_weight = VertexWeight::Uniform;
  /// Feature width used by VertexWeight::Compute.
  std::int64_t feature_width = 0;
  /// Target share of each part (METIS tpwgts), normalized to sum 1; empty means equal shares.
  std::vector<double> part_weights;
  /// Fixed by default so the same inputs give the same partition every run.
  std::uint64_t seed = 0;
};

/// Which part owns each vertex.
struct Partition {
  int num_parts = 0;
  std::vector<std::int32_t> owner;  ///< [num_nodes], each in [0, num_parts)
};

/// Partitions the symmetric adjacency `a` (no self-loops needed). Throws MetisError when the
/// graph does not fit METIS's index type (checked before METIS is called) or METIS fails,
/// InvalidArgument for bad options (part count < 1 or > nodes, wrong part_weights length, the
/// volume objective with a method other than METIS k-way).
/// Deterministic: the same graph, options and seed give the same owners. Every part owns at least
/// one vertex: a part METIS or the random draw leaves empty (possible on tiny or disconnected
/// graphs) receives the highest-id vertex of the then-largest part; block ranges are non-empty by
/// construction. The random method ignores vertex weights (each vertex is one draw).
Partition partition_graph(const Csr& a, const Options& options);

/// Quality of a partition. Volume counts (vertex, remote part) pairs: vertex v must be sent to
/// part q != owner(v) when some neighbour of v is owned by q — exactly the rows one halo
/// exchange moves per layer.
struct Quality {
  std::int64_t edge_cut = 0;             ///< undirected edges whose endpoints differ in part
  std::int64_t total_volume = 0;         ///< sum over parts of rows sent
  std::int64_t max_send = 0, max_recv = 0;
  double mean_send = 0.0, mean_recv = 0.0;
  double vertex_balance = 0.0;           ///< max part size / mean part size
  double edge_balance = 0.0;             ///< max part nonzeros / mean
  std::vector<std::int64_t> part_nodes;  ///< [P] owned vertices
  std::vector<std::int64_t> ghosts;      ///< [P] distinct remote vertices each part reads
  std::vector<std::int64_t> send, recv;  ///< [P] rows each part sends / receives per exchange
  /// Rows moved when every part receives every other part's rows (CAGNET 1D broadcast):
  /// (P - 1) · num_nodes.
  std::int64_t broadcast_volume = 0;
};

/// Linear in the nonzeros. For the symmetric `a`, ghosts[q] == recv[q]. Throws InvalidArgument
/// for owners outside [0, num_parts) and DimensionMismatch when owner.size() != rows.
Quality measure(const Csr& a, const Partition& partition);

/// Connected components of the symmetric `a` (Boost.Graph): the number and the size of the
/// largest. An isolated vertex is a component of its own.
struct Components {
  std::int64_t count = 0;
  std::int64_t largest = 0;
};
Components connected_components(const Csr& a);

std::string to_string(Method method);
std::string to_string(VertexWeight weight);
std::string to_string(Objective objective);
Method parse_method(const std::string& text);  ///< metis, metis-recursive, block, random
VertexWeight parse_vertex_weight(const std::string& text);  ///< uniform, degree, compute
Objective parse_objective(const std::string& text);          ///< cut, volume
/// "2,1,1,1" → {2, 1, 1, 1}; throws InvalidArgument on malformed text.
std::vector<double> parse_part_weights(const std::string& text);

}  // namespace tessera::partition
