// Cutting a graph into parts: METIS k-way and recursive bisection, Zoltan's hypergraph
// partitioner, the block and random baselines, and the text forms of the partitioning options.
#include "tessera/partition/partition.hpp"

#include "hypergraph.hpp"
#include "methods.hpp"
#include "metis_limits.hpp"
#include "mpi_scope.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/core/rng.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fmt/core.h>
#include <fmt/format.h>
#include <functional>
#include <limits>
#include <metis.h>
#include <numeric>
#include <string_view>

namespace tessera::partition {

namespace {

/// Sub-stream of RngPurpose::Split for the random baseline. Stream 0 is the permutation of
/// datasets::make_random_split; sharing it would correlate owners with the train/val/test split.
constexpr std::uint32_t kRandomPartitionStream = 1;

} // namespace

namespace detail {

void check_metis_limits(std::int64_t nodes, std::int64_t nnz) {
  constexpr std::int64_t kMax = std::numeric_limits<idx_t>::max();
  if (nodes > kMax || nnz > kMax) {
    throw MetisError(fmt::format(
        "graph has {} nodes and {} nonzeros (self-loops dropped), but METIS's idx_t is {}-bit "
        "and holds at most {}; use the block or random method, or a METIS built with "
        "IDXTYPEWIDTH=64",
        nodes, nnz, IDXTYPEWIDTH, kMax));
  }
}

void validate_options(std::int64_t nodes, const Options& options) {
  if (options.num_parts < 1 || options.num_parts > nodes) {
    throw InvalidArgument(fmt::format("part count must be in [1, {}] (the node count), got {}",
                                      nodes, options.num_parts));
  }
  if (!options.part_weights.empty() &&
      options.part_weights.size() != static_cast<std::size_t>(options.num_parts)) {
    throw InvalidArgument(fmt::format("{} part weights given for {} parts",
                                      options.part_weights.size(), options.num_parts));
  }
  check_part_weights(options.part_weights);
  if (options.objective == Objective::Volume && options.method != Method::MetisKway) {
    throw InvalidArgument("the volume objective needs the METIS k-way method (metis); " +
                          to_string(options.method) + " minimizes no volume");
  }
  if (options.feature_width < 0) {
    throw InvalidArgument(
        fmt::format("feature width must be non-negative, got {}", options.feature_width));
  }
  if (!std::isfinite(options.row_cost) || options.row_cost < 0.0 || options.row_cost > 1e9) {
    throw InvalidArgument(
        fmt::format("row cost must be a number in [0, 1e9], got {}", options.row_cost));
  }
  if (!options.zoltan_params.empty() && options.method != Method::Hypergraph) {
    throw InvalidArgument("Zoltan parameters are for the hypergraph method, not " +
                          to_string(options.method));
  }
  if (!options.scotch_strategy.empty()) {
    if (options.method != Method::PtScotch) {
      throw InvalidArgument("a PT-Scotch strategy is for the ptscotch method, not " +
                            to_string(options.method));
    }
    if (!is_strategy_string(options.scotch_strategy))
      scotch_strategy_flags(options.scotch_strategy);
  }
}

/// Each part's target share of the total vertex weight, summing to 1.
std::vector<double> target_shares(const Options& options) {
  const auto parts = static_cast<std::size_t>(options.num_parts);
  if (options.part_weights.empty()) return std::vector<double>(parts, 1.0 / options.num_parts);
  const double sum = std::accumulate(options.part_weights.begin(), options.part_weights.end(), 0.0);
  std::vector<double> shares(parts);
  for (std::size_t p = 0; p < parts; ++p)
    shares[p] = options.part_weights[p] / sum;
  return shares;
}

std::vector<double> block_targets(const Options& options, double total) {
  const auto shares = target_shares(options);
  std::vector<double> targets;
  double cumulative = 0.0;
  for (int p = 1; p < options.num_parts; ++p) {
    cumulative += shares[p - 1];
    targets.push_back(cumulative * total);
  }
  return targets;
}

std::vector<std::int64_t> block_begins(std::span<const std::int64_t> below, std::int64_t nodes,
                                       int parts) {
  std::vector<std::int64_t> begin(static_cast<std::size_t>(parts) + 1, 0); // [P + 1]
  begin[parts] = nodes;
  for (int p = 1; p < parts; ++p)
    begin[p] = std::clamp(below[p - 1], begin[p - 1] + 1, nodes - (parts - p));
  return begin;
}

std::int64_t vertex_weight(std::int64_t degree, const Options& options) {
  if (options.vertex_weight == VertexWeight::Uniform) return 1;
  // Beyond the degree: the row itself (degree; cost, as Â has the self-loop and a row costs
  // row_cost more), or the feature width (compute).
  const double extra = options.vertex_weight == VertexWeight::Degree ? 1.0
                       : options.vertex_weight == VertexWeight::Cost
                           ? 1.0 + options.row_cost
                           : static_cast<double>(options.feature_width);
  return std::max<std::int64_t>(1, std::llround(static_cast<double>(degree) + extra));
}

/// Each vertex to a part drawn from the counter-based generator: uniform_index for equal shares,
/// otherwise the part whose cumulative share interval holds a uniform draw.
std::vector<std::int32_t> random_owner(std::int64_t first, std::int64_t last,
                                       const Options& options) {
  const int parts = options.num_parts;
  const auto key = RngKey::make(options.seed, RngPurpose::Split, kRandomPartitionStream);
  const auto shares = target_shares(options);
  const bool equal =
      std::adjacent_find(shares.begin(), shares.end(), std::not_equal_to<>()) == shares.end();
  std::vector<double> upper(shares.size()); // [P] cumulative share, last one exactly 1
  std::partial_sum(shares.begin(), shares.end(), upper.begin());
  upper.back() = 1.0;

  std::vector<std::int32_t> owner(static_cast<std::size_t>(last - first));
#pragma omp parallel for schedule(static)
  for (std::int64_t v = first; v < last; ++v) {
    if (equal) {
      owner[v - first] =
          static_cast<std::int32_t>(uniform_index(key, v, 0, static_cast<std::uint32_t>(parts)));
    } else {
      const double u = uniform(key, v, 0);
      owner[v - first] = static_cast<std::int32_t>(
          std::upper_bound(upper.begin(), upper.end() - 1, u) - upper.begin());
    }
  }
  return owner;
}

} // namespace detail

namespace {

void validate(const Csr& a, const Options& options) {
  if (a.rows() != a.cols()) {
    throw InvalidArgument("partition_graph needs a square adjacency, got " + a.shape());
  }
  detail::validate_options(a.rows(), options);
}

/// Neighbours of v other than v itself.
std::int64_t degree_without_self_loop(const Csr& a, std::int64_t v) {
  std::int64_t degree = 0;
  for (Offset k = a.row_ptr()[v]; k < a.row_ptr()[v + 1]; ++k)
    degree += a.col()[k] != v;
  return degree;
}

/// [n] weight of each vertex (detail::vertex_weight).
std::vector<std::int64_t> vertex_weights(const Csr& a, const Options& options) {
  const std::int64_t n = a.rows();
  std::vector<std::int64_t> weights(static_cast<std::size_t>(n), 1);
  if (options.vertex_weight == VertexWeight::Uniform) return weights;
#pragma omp parallel for schedule(static)
  for (std::int64_t v = 0; v < n; ++v)
    weights[v] = detail::vertex_weight(degree_without_self_loop(a, v), options);
  return weights;
}

/// Moves one vertex into every empty part, taken from the then-largest part (its highest id), so
/// every part owns at least one vertex. Needs parts <= owner.size().
void fill_empty_parts(std::vector<std::int32_t>& owner, int parts) {
  std::vector<std::int64_t> count(static_cast<std::size_t>(parts), 0);
  for (const std::int32_t p : owner)
    ++count[p];
  for (int empty = 0; empty < parts; ++empty) {
    if (count[empty] != 0) continue;
    const auto largest =
        static_cast<std::int32_t>(std::max_element(count.begin(), count.end()) - count.begin());
    auto v = owner.size();
    while (owner[--v] != largest) {
    }
    owner[v] = empty;
    --count[largest];
    ++count[empty];
  }
}

// ---- METIS ----------------------------------------------------------------------------------

const char* metis_status_name(int status) {
  switch (status) {
  case METIS_ERROR_INPUT:
    return "METIS_ERROR_INPUT";
  case METIS_ERROR_MEMORY:
    return "METIS_ERROR_MEMORY";
  case METIS_ERROR:
    return "METIS_ERROR";
  default:
    return "unknown status";
  }
}

/// The adjacency in METIS's arrays, self-loops dropped.
struct MetisGraph {
  std::vector<idx_t> xadj;   // [n + 1]
  std::vector<idx_t> adjncy; // [nnz], at least one element so data() is never null
};

MetisGraph to_metis_graph(const Csr& a) {
  const std::int64_t n = a.rows();
  std::vector<std::int64_t> row_nnz(static_cast<std::size_t>(n));
#pragma omp parallel for schedule(static)
  for (std::int64_t v = 0; v < n; ++v)
    row_nnz[v] = degree_without_self_loop(a, v);
  const std::int64_t nnz = std::accumulate(row_nnz.begin(), row_nnz.end(), std::int64_t{0});
  detail::check_metis_limits(n, nnz); // before any idx_t array is sized or filled

  MetisGraph g;
  g.xadj.resize(static_cast<std::size_t>(n) + 1);
  g.adjncy.resize(static_cast<std::size_t>(std::max<std::int64_t>(nnz, 1)));
  g.xadj[0] = 0;
  for (std::int64_t v = 0; v < n; ++v)
    g.xadj[v + 1] = g.xadj[v] + static_cast<idx_t>(row_nnz[v]);
#pragma omp parallel for schedule(static)
  for (std::int64_t v = 0; v < n; ++v) {
    idx_t out = g.xadj[v];
    for (Offset k = a.row_ptr()[v]; k < a.row_ptr()[v + 1]; ++k) {
      if (a.col()[k] != v) g.adjncy[out++] = a.col()[k];
    }
  }
  return g;
}

/// METIS's seed option: non-negative (METIS treats -1 as "its default seed").
idx_t metis_seed(std::uint64_t seed) {
  return static_cast<idx_t>((seed ^ (seed >> 31) ^ (seed >> 62)) & 0x7FFFFFFFu);
}

std::vector<std::int32_t> metis_owner(const Csr& a, const Options& options) {
  MetisGraph g = to_metis_graph(a);

  std::vector<idx_t> vwgt;
  if (options.vertex_weight != VertexWeight::Uniform) {
    const auto weights = vertex_weights(a, options);
    const std::int64_t total = std::accumulate(weights.begin(), weights.end(), std::int64_t{0});
    if (total > std::numeric_limits<idx_t>::max()) {
      throw MetisError(fmt::format("total vertex weight {} exceeds METIS's idx_t (at most {}); "
                                   "use uniform or degree weights",
                                   total, std::numeric_limits<idx_t>::max()));
    }
    vwgt.assign(weights.begin(), weights.end());
  }
  const auto shares = detail::target_shares(options);
  std::vector<real_t> tpwgts(shares.begin(), shares.end());

  idx_t metis_options[METIS_NOPTIONS];
  METIS_SetDefaultOptions(metis_options);
  metis_options[METIS_OPTION_SEED] = metis_seed(options.seed);
  if (options.objective == Objective::Volume)
    metis_options[METIS_OPTION_OBJTYPE] = METIS_OBJTYPE_VOL;

  idx_t nvtxs = static_cast<idx_t>(a.rows());
  idx_t ncon = 1;
  idx_t nparts = options.num_parts;
  idx_t objval = 0;
  std::vector<idx_t> part(static_cast<std::size_t>(nvtxs));
  const bool kway = options.method == Method::MetisKway;
  const char* call = kway ? "METIS_PartGraphKway" : "METIS_PartGraphRecursive";
  const auto metis = kway ? METIS_PartGraphKway : METIS_PartGraphRecursive;
  const int status = metis(&nvtxs, &ncon, g.xadj.data(), g.adjncy.data(),
                           vwgt.empty() ? nullptr : vwgt.data(), /*vsize=*/nullptr,
                           /*adjwgt=*/nullptr, &nparts, tpwgts.data(), /*ubvec=*/nullptr,
                           metis_options, &objval, part.data());
  if (status != METIS_OK) {
    throw MetisError(fmt::format("{}(nodes={}, nnz={}, parts={}) failed with {} ({})", call, nvtxs,
                                 g.xadj.back(), nparts, metis_status_name(status), status));
  }
  return {part.begin(), part.end()};
}

/// PT-Scotch's k-way on the whole graph in this one process (MPI_COMM_SELF).
std::vector<std::int32_t> ptscotch_owner(const Csr& a, const Options& options) {
  detail::ensure_mpi();
  detail::DistGraph g;
  g.vtxdist = {0, a.rows()};
  for (std::int64_t v = 0; v < a.rows(); ++v) {
    for (Offset k = a.row_ptr()[v]; k < a.row_ptr()[v + 1]; ++k) {
      if (a.col()[k] != v) g.adjncy.push_back(a.col()[k]);
    }
    g.xadj.push_back(static_cast<std::int64_t>(g.adjncy.size()));
  }
  if (options.vertex_weight != VertexWeight::Uniform) g.vwgt = vertex_weights(a, options);
  std::vector<std::int32_t> owner;
  const auto status = detail::scotch_part(g, options, MPI_COMM_SELF, owner);
  if (status != detail::ScotchStatus::Ok) {
    throw PartitionerError(fmt::format("PT-Scotch (nodes={}, parts={}) failed: {} (Scotch printed "
                                       "the reason above)",
                                       a.rows(), options.num_parts, detail::scotch_call(status)));
  }
  return owner;
}

// ---- baselines ------------------------------------------------------------------------------

/// Contiguous id ranges: vertex v goes to the part whose share of the cumulative weight holds the
/// midpoint of v's weight; ranges are then nudged so each holds at least one vertex.
std::vector<std::int32_t> block_owner(const Csr& a, const Options& options) {
  const std::int64_t n = a.rows();
  const auto weights = vertex_weights(a, options);
  std::vector<double> midpoint(weights.size());
  std::int64_t prefix = 0;
  for (std::size_t v = 0; v < weights.size(); ++v) {
    midpoint[v] = 0.5 * static_cast<double>(prefix + prefix + weights[v]);
    prefix += weights[v];
  }
  std::vector<std::int64_t> below;
  for (const double target : detail::block_targets(options, static_cast<double>(prefix)))
    below.push_back(std::lower_bound(midpoint.begin(), midpoint.end(), target) - midpoint.begin());
  const auto begin = detail::block_begins(below, n, options.num_parts);
  std::vector<std::int32_t> owner(static_cast<std::size_t>(n));
  for (int p = 0; p < options.num_parts; ++p)
    std::fill(owner.begin() + begin[p], owner.begin() + begin[p + 1], p);
  return owner;
}

// ---- text forms -----------------------------------------------------------------------------

template <typename Enum, std::size_t N>
Enum parse_choice(const std::string& text, const std::pair<std::string_view, Enum> (&choices)[N],
                  const char* what) {
  std::string valid;
  for (const auto& [name, value] : choices) {
    if (text == name) return value;
    valid += (valid.empty() ? "" : ", ") + std::string(name);
  }
  throw InvalidArgument(fmt::format("unknown {} '{}'; valid: {}", what, text, valid));
}

template <typename Enum, std::size_t N>
std::string choice_name(Enum value, const std::pair<std::string_view, Enum> (&choices)[N],
                        const char* what) {
  for (const auto& [name, choice] : choices) {
    if (choice == value) return std::string(name);
  }
  throw InvalidArgument(fmt::format("unknown {} {}", what, static_cast<int>(value)));
}

constexpr std::pair<std::string_view, Method> kMethods[] = {
    {"metis", Method::MetisKway},       {"metis-recursive", Method::MetisRecursive},
    {"block", Method::Block},           {"random", Method::Random},
    {"hypergraph", Method::Hypergraph}, {"ptscotch", Method::PtScotch},
    {"parmetis", Method::PtScotch}}; // parmetis: ptscotch's old name; to_string gives the first

constexpr std::pair<std::string_view, VertexWeight> kVertexWeights[] = {
    {"uniform", VertexWeight::Uniform},
    {"degree", VertexWeight::Degree},
    {"compute", VertexWeight::Compute},
    {"cost", VertexWeight::Cost}};

constexpr std::pair<std::string_view, Balance> kBalances[] = {
    {"none", Balance::None}, {"given", Balance::Given}, {"measured", Balance::Measured}};

constexpr std::pair<std::string_view, Objective> kObjectives[] = {{"cut", Objective::EdgeCut},
                                                                  {"volume", Objective::Volume}};

} // namespace

/// Parts METIS or Zoltan leave empty (possible on tiny or disconnected graphs) and, for the random
/// method, parts no draw landed in each receive one vertex from the then-largest part, so every
/// part owns at least one vertex; block ranges are non-empty by construction.
Partition partition_graph(const Csr& a, const Options& options) {
  validate(a, options);
  Partition result;
  result.num_parts = options.num_parts;
  if (options.num_parts == 1) {
    result.owner.assign(static_cast<std::size_t>(a.rows()), 0);
    return result;
  }
  const ProgressStage progress("partitioning " + std::to_string(a.rows()) + " nodes into " +
                               std::to_string(options.num_parts) + " parts (" +
                               to_string(options.method) + ")");
  switch (options.method) {
  case Method::MetisKway:
  case Method::MetisRecursive:
    result.owner = metis_owner(a, options);
    break;
  case Method::Block:
    result.owner = block_owner(a, options);
    break;
  case Method::Random:
    result.owner = detail::random_owner(0, a.rows(), options);
    break;
  case Method::PtScotch:
    result.owner = ptscotch_owner(a, options);
    break;
  case Method::Hypergraph:
    result.owner = detail::hypergraph_owner(a, options, vertex_weights(a, options));
    break;
  }
  fill_empty_parts(result.owner, options.num_parts);
  return result;
}

std::string to_string(Method method) {
  return choice_name(method, kMethods, "partition method");
}

std::string to_string(VertexWeight weight) {
  return choice_name(weight, kVertexWeights, "vertex weight");
}

std::string to_string(Objective objective) {
  return choice_name(objective, kObjectives, "partition objective");
}

std::string to_string(Balance balance) {
  return choice_name(balance, kBalances, "balance");
}

Balance parse_balance(const std::string& text) {
  return parse_choice(text, kBalances, "balance");
}

Method parse_method(const std::string& text) {
  return parse_choice(text, kMethods, "partition method");
}

VertexWeight parse_vertex_weight(const std::string& text) {
  return parse_choice(text, kVertexWeights, "vertex weight");
}

Objective parse_objective(const std::string& text) {
  return parse_choice(text, kObjectives, "partition objective");
}

void check_part_weights(std::span<const double> weights) {
  for (const double w : weights) {
    if (!std::isfinite(w) || w <= 0.0) {
      throw InvalidArgument(fmt::format("part weights must be positive and finite, got {}", w));
    }
  }
  if (weights.empty()) return;
  // Shares are relative: their sum must still be a number (1e308,1e308 sums to infinity).
  if (!std::isfinite(std::accumulate(weights.begin(), weights.end(), 0.0))) {
    throw InvalidArgument("part weights sum beyond the range of a double: give relative shares "
                          "such as 2,1");
  }
  // Shares are handed to METIS as 32-bit floats of their sum: a part far smaller than the
  // largest would be a zero share there (METIS_ERROR_INPUT), and would get no rows anyway.
  const double largest = *std::max_element(weights.begin(), weights.end());
  for (const double weight : weights) {
    if (weight < kMinPartWeightRatio * largest) {
      throw InvalidArgument(fmt::format("part weight {:g} is below 10^-6 of the largest ({:g}): "
                                        "too small a share for a part to hold any row",
                                        weight, largest));
    }
  }
}

void check_rank_speeds(Balance balance, std::span<const double> speeds, int parts) {
  const std::string text = fmt::format("{:g}", fmt::join(speeds, ","));
  if (balance != Balance::Given) {
    if (speeds.empty()) return;
    throw InvalidArgument("rank speeds set the parts' shares only with the balance 'given'");
  }
  if (speeds.empty()) throw InvalidArgument("the balance 'given' needs rank speeds (one per rank)");
  if (speeds.size() != static_cast<std::size_t>(parts)) {
    throw InvalidArgument(fmt::format("rank speeds '{}' name {} speed(s) for {} part(s): "
                                      "expects one per rank",
                                      text, speeds.size(), parts));
  }
  for (const double speed : speeds) {
    if (!std::isfinite(speed) || speed <= 0) {
      throw InvalidArgument(
          fmt::format("rank speeds '{}': speed {} is not a positive number", text, speed));
    }
  }
}

} // namespace tessera::partition
