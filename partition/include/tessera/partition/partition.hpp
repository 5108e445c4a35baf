// Cutting a graph into P parts: METIS k-way or recursive bisection, Zoltan's hypergraph
// partitioner, or the block and random baselines, with vertex weights and target part weights;
// and how good a cut is.
#pragma once

#include "tessera/core/tensor.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace tessera::partition {

/// How partition_graph assigns vertices to parts.
enum class Method {
  MetisKway,      ///< METIS_PartGraphKway (default)
  MetisRecursive, ///< METIS_PartGraphRecursive
  Block,          ///< contiguous id ranges of equal weight or part_weights (CAGNET's 1D layout)
  Random,         ///< each vertex to a random part, drawn by the target shares (seeded)
  /// Zoltan PHG on the hypergraph with one net per vertex (the vertex and its neighbours): its
  /// connectivity − 1 cut is exactly Quality::total_volume, which PHG minimizes; in one process
  /// (partition_graph) or by all ranks together on their own rows (partition_rows)
  Hypergraph,
  /// PT-Scotch's k-way (SCOTCH_dgraphMap, 64-bit ids), "ptscotch": run by all ranks together on
  /// their own rows (partition_rows), or in one process by partition_graph. "parmetis" is
  /// accepted for it (the name it had: it fills ParMETIS's role), and stores made then say so
  PtScotch
};

/// What each vertex weighs when parts are balanced (METIS vwgt; the block method's ranges).
enum class VertexWeight {
  Uniform, ///< every vertex 1
  Degree,  ///< degree (without self-loop) + 1
  Compute, ///< degree + feature width (at least 1): the per-vertex cost of one GCN layer
  Cost     ///< degree + 1 + Options::row_cost, rounded: the cost model's time of the vertex's row
};

/// What the target part weights stand for (recorded in a store's manifest).
enum class Balance {
  None,    ///< equal shares, or part_weights as given
  Given,   ///< part_weights are the speeds of the ranks, given by the user
  Measured ///< part_weights are the speeds of the ranks, measured by the job (tessera-train)
};

/// What METIS k-way minimizes. Recursive bisection always minimizes the edge cut.
enum class Objective {
  EdgeCut, ///< edges between parts (METIS's default; fastest)
  Volume   ///< total communication volume, the rows a halo exchange moves (about 2x slower)
};

/// Options of partition_graph.
struct Options {
  int num_parts = 2;                                  ///< in [1, nodes]
  Method method = Method::MetisKway;                  ///< see Method
  Objective objective = Objective::EdgeCut;           ///< Volume needs Method::MetisKway
  VertexWeight vertex_weight = VertexWeight::Uniform; ///< ignored by Method::Random
  /// Feature width used by VertexWeight::Compute (>= 0).
  std::int64_t feature_width = 0;
  /// VertexWeight::Cost: what one row costs beyond its nonzeros, in units of one nonzero's
  /// aggregation (>= 0; the cost model's GEMM and elementwise time per row over its SpMM time
  /// per nonzero).
  double row_cost = 0.0;
  /// What part_weights stand for; recorded, not used to cut.
  Balance balance = Balance::None;
  /// Target share of each part (METIS tpwgts), positive, normalized to sum 1; empty means equal
  /// shares. Otherwise one per part.
  std::vector<double> part_weights;
  /// Fixed by default so the same inputs give the same partition every run.
  std::uint64_t seed = 0;
  /// Method::Hypergraph: Zoltan parameters (name, value) set after Tessera's own, as Zoltan's
  /// user guide names them; e.g. {"LB_METHOD", "GRAPH"} cuts PHG's graph model instead, and
  /// {"GRAPH_PACKAGE", "SCOTCH"} with it Zoltan's PT-Scotch. Empty for any other method.
  std::vector<std::pair<std::string, std::string>> zoltan_params;
  /// Method::PtScotch: the mapping strategy. Empty: SCOTCH_STRATSPEED; names of strategy flags
  /// joined by '+' (speed, quality, balance, safety, scalability: SCOTCH_STRAT...); or a strategy
  /// string in Scotch's grammar (it holds a '{'). Empty for any other method.
  std::string scotch_strategy;
};

/// The Zoltan parameters the hypergraph method sets on top of its own when it cuts over several
/// processes (partition_rows): local inner-product matching that ignores nets of more than 50
/// pins, chosen by measurement on RMAT and Slashdot (docs/guide/partitioning.md). A cut in one
/// process given them as Options::zoltan_params shows what the ranks' cut would be.
std::vector<std::pair<std::string, std::string>> hypergraph_over_ranks_params();

/// Which part owns each vertex.
struct Partition {
  int num_parts = 0;               ///< P
  std::vector<std::int32_t> owner; ///< [num_nodes], each in [0, num_parts)
};

/// Partitions the symmetric adjacency `a`: [n, n] in host memory (self-loops are ignored).
/// Throws MetisError when the graph or its total vertex weight does not fit METIS's index type
/// (checked before METIS is called) or METIS fails, PartitionerError when the graph does not fit
/// Zoltan's ids and counts (nodes + nonzeros at most 2^31 - 1, checked before Zoltan is called)
/// or a Zoltan or PT-Scotch call fails, InvalidArgument for a non-square `a` or bad
/// options (part count < 1 or > nodes, wrong part_weights length or a non-positive weight, a
/// negative feature_width, the volume objective with a method other than METIS k-way).
/// Deterministic: the same graph, options and seed give the same owners. Every part owns at least
/// one vertex: a part METIS, Zoltan or the random draw leaves empty (possible on tiny or
/// disconnected graphs) receives the highest-id vertex of the then-largest part; block ranges are
/// non-empty by construction. The random method ignores vertex weights (each vertex is one draw).
/// The hypergraph and ptscotch methods run Zoltan and PT-Scotch on MPI_COMM_SELF, initializing
/// MPI (and finalizing it at exit) when the process has not; they balance each part within 5 % of
/// its target weight.
Partition partition_graph(const Csr& a, const Options& options);

/// Quality of a partition. Volume counts (vertex, remote part) pairs: vertex v must be sent to
/// part q != owner(v) when some neighbour of v is owned by q — exactly the rows one halo
/// exchange moves per layer.
struct Quality {
  std::int64_t edge_cut = 0;     ///< undirected edges whose endpoints differ in part
  std::int64_t total_volume = 0; ///< sum over parts of rows sent
  /// Most rows one part sends / receives per exchange.
  std::int64_t max_send = 0, max_recv = 0;
  /// Rows per part sent / received, on average (equal: every row sent is received).
  double mean_send = 0.0, mean_recv = 0.0;
  double vertex_balance = 0.0;          ///< max part size / mean part size
  double edge_balance = 0.0;            ///< max part nonzeros / mean
  std::vector<std::int64_t> part_nodes; ///< [P] owned vertices
  std::vector<std::int64_t> ghosts;     ///< [P] distinct remote vertices each part reads
  std::vector<std::int64_t> send, recv; ///< [P] rows each part sends / receives per exchange
  /// Rows moved when every part receives every other part's rows (CAGNET 1D broadcast):
  /// (P - 1) · num_nodes.
  std::int64_t broadcast_volume = 0;
};

/// The Quality of `partition` on the symmetric `a` ([n, n], host memory); linear in the
/// nonzeros. ghosts[q] == recv[q]. Throws InvalidArgument for a non-square `a`, num_parts < 1 or
/// owners outside [0, num_parts), and DimensionMismatch when owner.size() != n.
Quality measure(const Csr& a, const Partition& partition);

/// Connected components of the symmetric `a` (Boost.Graph): the number and the size of the
/// largest. An isolated vertex is a component of its own.
struct Components {
  std::int64_t count = 0;   ///< number of components (0 for an empty graph)
  std::int64_t largest = 0; ///< vertices in the largest
};
/// a: [n, n] in host memory. Throws InvalidArgument when it is not square.
Components connected_components(const Csr& a);

/// The text forms the parse_* functions read back (and the manifest records). Each parse_*
/// throws InvalidArgument naming the valid forms for any other text.
std::string to_string(Method method);
std::string to_string(VertexWeight weight);
std::string to_string(Objective objective);
std::string to_string(Balance balance);
/// metis, metis-recursive, block, random, hypergraph, ptscotch (or its old name parmetis)
Method parse_method(const std::string& text);
VertexWeight parse_vertex_weight(const std::string& text); ///< uniform, degree, compute, cost
Objective parse_objective(const std::string& text);        ///< cut, volume
Balance parse_balance(const std::string& text);            ///< none, given, measured
/// Refuses rank speeds that cannot cut `parts` parts under `balance`: Given needs one positive,
/// finite speed per part (one per rank), the other balances none. Throws InvalidArgument naming
/// the speeds.
void check_rank_speeds(Balance balance, std::span<const double> speeds, int parts);
/// The smallest a part's weight may be next to the largest: METIS reads shares as 32-bit floats.
inline constexpr double kMinPartWeightRatio = 1e-6;
/// Refuses part weights (or rank speeds) a cut cannot use: one that is not positive and finite,
/// a sum beyond a double, one below kMinPartWeightRatio of the largest. Throws InvalidArgument
/// naming the weight. Empty weights pass (equal shares).
void check_part_weights(std::span<const double> weights);

} // namespace tessera::partition
