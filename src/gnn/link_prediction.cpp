// Link prediction: the edge split, negative pairs, the dot-product decoder and its loss, the
// metrics, and the epochs of an encoder trained on them, in one process or over ranks.
#include "tessera/gnn/link_prediction.hpp"

#include "rank_nodes.hpp"
#include "tessera/comm/halo_exchange.hpp"
#include "tessera/comm/halo_plan.hpp"
#include "tessera/comm/tags.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/rng.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/engine/data_parallel.hpp"
#include "tessera/engine/layers.hpp"
#include "tessera/engine/optimizer.hpp"
#include "tessera/gnn/metrics.hpp"
#include "tessera/graph/graph.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fmt/core.h>
#include <numeric>
#include <optional>
#include <tuple>

namespace tessera::gnn {

namespace {

/// The global id of local row r (`ids` empty: the identity).
GlobalId id_of(std::span<const GlobalId> ids, std::int64_t r) {
  return ids.empty() ? static_cast<GlobalId>(r) : ids[static_cast<std::size_t>(r)];
}

/// An undirected edge (u < v) and its place in the split's order: the key, then (u, v).
struct KeyedEdge {
  std::uint64_t key = 0;
  GlobalId u = 0, v = 0;
  friend bool operator<(const KeyedEdge& a, const KeyedEdge& b) {
    return std::tie(a.key, a.u, a.v) < std::tie(b.key, b.u, b.v);
  }
};

/// The edge {a, b} with its key: a Philox draw of the pair alone, the same from either end.
KeyedEdge keyed_edge(const RngKey& order, GlobalId a, GlobalId b) {
  const GlobalId u = std::min(a, b), v = std::max(a, b);
  const auto bits = random_bits4(order, u, static_cast<std::uint32_t>(v));
  return {(static_cast<std::uint64_t>(bits[0]) << 32) | bits[1], u, v};
}

/// The edge at place k of all ranks' `edges` (each rank's sorted) in their order — exactly k
/// edges over the ranks are below it —, nullopt when k is the total. Over ranks: a radix
/// selection of the key, 16 bits per allreduce, then the ranks' edges of that key by (u, v).
std::optional<KeyedEdge> select_edge(std::span<const KeyedEdge> edges, std::int64_t k,
                                     std::int64_t total, comm::Communicator* comm) {
  if (k >= total) return std::nullopt;
  if (comm == nullptr || comm->size() == 1) return edges[static_cast<std::size_t>(k)];
  std::uint64_t prefix = 0;                      // the key's bits selected so far
  auto begin = edges.begin(), end = edges.end(); // this rank's edges with that prefix
  std::vector<std::int64_t> counts(1 << 16);
  for (int shift = 48; shift >= 0; shift -= 16) {
    std::fill(counts.begin(), counts.end(), 0);
    for (auto it = begin; it != end; ++it)
      ++counts[(it->key >> shift) & 0xffffu];
    comm->allreduce_sum(std::span<std::int64_t>(counts));
    std::size_t digit = 0;
    while (k >= counts[digit]) // k < the count of the prefix's edges: a digit holds it
      k -= counts[digit++];
    prefix = (prefix << 16) | digit;
    const std::uint64_t low = prefix << shift;
    const std::uint64_t high = low | ((std::uint64_t{1} << shift) - 1);
    begin = std::lower_bound(begin, end, low,
                             [](const KeyedEdge& e, std::uint64_t key) { return e.key < key; });
    end = std::upper_bound(begin, end, high,
                           [](std::uint64_t key, const KeyedEdge& e) { return key < e.key; });
  }
  std::vector<KeyedEdge> tied =
      comm::all_gather<KeyedEdge>(*comm, std::span<const KeyedEdge>(begin, end));
  std::sort(tied.begin(), tied.end());
  return tied.at(static_cast<std::size_t>(k));
}

/// The pair of draw `draw` of a negative field: (u, v) uniform in [0, n)².
std::pair<GlobalId, GlobalId> drawn_pair(const RngKey& key, std::int64_t draw, std::uint32_t n) {
  const auto bits = random_bits4(key, draw, 0);
  return {static_cast<GlobalId>((static_cast<std::uint64_t>(bits[0]) * n) >> 32),
          static_cast<GlobalId>((static_cast<std::uint64_t>(bits[1]) * n) >> 32)};
}

/// `count` negatives of a split: the draws of `key`'s field in order, the first `count` with
/// u ≠ v and no edge (u, v) of the graph — of which this rank keeps those whose u it owns (its
/// row of the graph answers). Collective over `comm` (nullptr: one process).
NodePairs draw_non_edges(const Neighbours& graph, const NodeIndex& index, std::int64_t num_nodes,
                         std::int64_t count, const RngKey& key, const std::string& what,
                         comm::Communicator* comm) {
  const auto n = static_cast<std::uint32_t>(num_nodes);
  NodePairs out;
  const std::int64_t limit = 100 * count + 1000;
  std::int64_t taken = 0, draw = 0;
  while (taken < count) {
    if (draw == limit) {
      throw InvalidArgument(fmt::format("could not draw {} {} negative pairs (non-edges) in {} "
                                        "tries: the graph of {} nodes is too dense",
                                        count, what, limit, n));
    }
    const std::int64_t need = count - taken;
    const std::int64_t batch = std::min(limit - draw, need + need / 4 + 64);
    std::vector<std::int64_t> mine; // this rank's accepted draws of the batch
    for (std::int64_t d = draw; d < draw + batch; ++d) {
      const auto [u, v] = drawn_pair(key, d, n);
      if (u != v && index.mine(u) && !graph.has(index.row(u), v)) mine.push_back(d);
    }
    std::int64_t accepted = static_cast<std::int64_t>(mine.size());
    if (comm != nullptr) comm->allreduce_sum(std::span<std::int64_t>(&accepted, 1));
    std::int64_t last = draw + batch - 1; // the last draw the split takes
    if (accepted > need) {
      std::vector<std::int64_t> all =
          comm != nullptr ? comm::all_gather<std::int64_t>(*comm, mine) : mine;
      std::sort(all.begin(), all.end());
      last = all[static_cast<std::size_t>(need - 1)];
      accepted = need;
    }
    for (const std::int64_t d : mine) {
      if (d > last) break;
      const auto [u, v] = drawn_pair(key, d, n);
      out.add(u, v);
    }
    taken += accepted;
    draw += batch;
  }
  return out;
}

/// One negative per positive, as sample_negatives describes; `rows` the owned row of each
/// positive's source (empty: its id).
void draw_negatives(const NodePairs& positives, std::span<const std::int64_t> rows,
                    const Neighbours& graph, std::int64_t num_nodes, std::uint64_t seed,
                    std::uint32_t epoch, NodePairs& out) {
  out.src = positives.src; // copied into the storage `out` already has
  out.dst.resize(positives.src.size());
  const auto n = static_cast<std::uint64_t>(num_nodes);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < positives.size(); ++i) {
    const GlobalId u = positives.src[static_cast<std::size_t>(i)];
    const auto v = static_cast<std::uint32_t>(positives.dst[static_cast<std::size_t>(i)]);
    const std::int64_t row = rows.empty() ? u : rows[static_cast<std::size_t>(i)];
    GlobalId w = u;
    for (std::uint32_t attempt = 0; attempt < 16; ++attempt) {
      // Keyed by the pair itself: the same draw on any rank that holds it.
      const RngKey key = RngKey::make(seed, RngPurpose::NegativeSampling, attempt >> 2, epoch);
      const std::uint32_t bits = random_bits4(key, u, v)[attempt & 3u];
      w = static_cast<GlobalId>((static_cast<std::uint64_t>(bits) * n) >> 32);
      if (w != u && !graph.has(row, w)) break;
    }
    out.dst[static_cast<std::size_t>(i)] = w;
  }
}

double softplus(double x) {
  return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

double sigmoid(double x) {
  return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
}

/// Pairs as rows of an embedding table (in one process the pairs' ids themselves).
struct PairRows {
  std::span<const GlobalId> src, dst;
  std::int64_t size() const noexcept { return static_cast<std::int64_t>(src.size()); }
};

/// `scale` × the summed loss of the pairs' scores (label 1 when `positive`), adding its gradient
/// to dz (when given): dz[u] += g·z[v], dz[v] += g·z[u], each pair's score computed in the same
/// pass.
double add_side(ConstDenseView<float> z, PairRows pairs, double scale, bool positive,
                DenseView<float> dz) {
  const std::int64_t d = z.cols;
  double loss = 0.0;
  constexpr std::int64_t kAhead = 16; // pairs whose destination rows are fetched ahead
  for (std::int64_t i = 0; i < pairs.size(); ++i) {
    if (i + kAhead < pairs.size()) {
      const GlobalId ahead = pairs.dst[static_cast<std::size_t>(i + kAhead)];
      __builtin_prefetch(z.data + ahead * d);
      if (dz.data != nullptr) __builtin_prefetch(dz.data + ahead * d, 1);
    }
    const GlobalId u = pairs.src[static_cast<std::size_t>(i)];
    const GlobalId v = pairs.dst[static_cast<std::size_t>(i)];
    const float* zu = z.data + u * d;
    const float* zv = z.data + v * d;
    double s = 0.0;
    for (std::int64_t c = 0; c < d; ++c)
      s += static_cast<double>(zu[c]) * zv[c];
    loss += positive ? softplus(-s) : softplus(s);
    if (dz.data == nullptr) continue;
    const auto g = static_cast<float>(scale * (positive ? -sigmoid(-s) : sigmoid(s)));
    float* du = dz.data + u * d;
    float* dv = dz.data + v * d;
    for (std::int64_t c = 0; c < d; ++c) {
      du[c] += g * zv[c];
      dv[c] += g * zu[c];
    }
  }
  return loss * scale;
}

/// The dot-product scores of pairs given as rows of z.
std::vector<double> scores_of(ConstDenseView<float> z, PairRows pairs) {
  std::vector<double> scores(static_cast<std::size_t>(pairs.size()));
  const std::int64_t d = z.cols;
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < pairs.size(); ++i) {
    const float* zu = z.data + pairs.src[static_cast<std::size_t>(i)] * d;
    const float* zv = z.data + pairs.dst[static_cast<std::size_t>(i)] * d;
    double sum = 0.0;
    for (std::int64_t c = 0; c < d; ++c)
      sum += static_cast<double>(zu[c]) * zv[c];
    scores[static_cast<std::size_t>(i)] = sum;
  }
  return scores;
}

PairRows rows_of(const NodePairs& pairs) {
  return {pairs.src, pairs.dst};
}

/// `training` = the rows of `a` with the entries (u, v), u ≠ v in global ids, that `keep`
/// accepts: the same columns, values 1, on a's backend.
template <typename Keep>
void keep_edges(const Csr& a, std::span<const GlobalId> ids, Csr& training, Keep keep) {
  std::vector<Offset> row_ptr(static_cast<std::size_t>(a.rows()) + 1, 0);
  std::vector<LocalId> col;
  col.reserve(static_cast<std::size_t>(a.nnz()));
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    const GlobalId u = id_of(ids, r);
    for (Offset k = a.row_ptr()[r]; k < a.row_ptr()[r + 1]; ++k) {
      const GlobalId v = id_of(ids, a.col()[k]);
      if (v != u && keep(u, v)) col.push_back(a.col()[k]);
    }
    row_ptr[static_cast<std::size_t>(r) + 1] = static_cast<Offset>(col.size());
  }
  training = Csr(a.backend(), a.rows(), a.cols(), static_cast<std::int64_t>(col.size()));
  std::copy(row_ptr.begin(), row_ptr.end(), training.row_ptr());
  std::copy(col.begin(), col.end(), training.col());
  std::fill(training.val(), training.val() + col.size(), 1.0f);
}

} // namespace

EdgeSplit split_edges(const RankGraph& graph, double val_fraction, double test_fraction,
                      std::uint64_t seed, Csr& training) {
  if (!(val_fraction >= 0 && test_fraction >= 0 && val_fraction + test_fraction < 1)) {
    throw InvalidArgument(fmt::format("link split: validation {} and test {} must be fractions in "
                                      "[0, 1) that leave edges to train on",
                                      val_fraction, test_fraction));
  }
  if (graph.adjacency == nullptr) throw InvalidArgument("link split: no adjacency given");
  const Csr& a = *graph.adjacency;
  comm::Communicator* comm = graph.comm != nullptr && graph.comm->size() > 1 ? graph.comm : nullptr;
  if (graph.ids.empty()
          ? a.rows() != a.cols()
          : static_cast<std::int64_t>(graph.ids.size()) != a.cols() || a.rows() > a.cols()) {
    throw DimensionMismatch(fmt::format("link split: an adjacency of {} for {} global ids",
                                        a.shape(), graph.ids.size()));
  }
  const NodeIndex index =
      comm != nullptr
          ? NodeIndex(*comm, graph.ids.first(static_cast<std::size_t>(a.rows())), graph.num_nodes)
          : NodeIndex();
  // This rank's edges {u, v}, u < v, whose u it owns (the other end's owner skips them).
  const RngKey order = RngKey::make(seed, RngPurpose::LinkSplit, 0);
  std::vector<KeyedEdge> edges;
  for (std::int64_t r = 0; r < a.rows(); ++r) {
    const GlobalId u = id_of(graph.ids, r);
    for (Offset k = a.row_ptr()[r]; k < a.row_ptr()[r + 1]; ++k) {
      const GlobalId v = id_of(graph.ids, a.col()[k]);
      if (v > u) edges.push_back(keyed_edge(order, u, v));
    }
  }
  std::sort(edges.begin(), edges.end());
  std::int64_t total = static_cast<std::int64_t>(edges.size());
  if (comm != nullptr) comm->allreduce_sum(std::span<std::int64_t>(&total, 1));
  if (total == 0) {
    throw InvalidArgument(fmt::format("the graph has no edges ({} nodes): link prediction holds "
                                      "edges out to predict, and needs some",
                                      graph.num_nodes));
  }
  const auto test =
      static_cast<std::int64_t>(std::llround(test_fraction * static_cast<double>(total)));
  const auto val =
      static_cast<std::int64_t>(std::llround(val_fraction * static_cast<double>(total)));
  if (test + val >= total) {
    throw InvalidArgument(fmt::format("link split: {} edges leave none to train on after {} test "
                                      "and {} validation edges",
                                      total, test, val));
  }
  // Below the first cut: test; below the second: validation; the rest: training.
  const std::optional<KeyedEdge> test_end = select_edge(edges, test, total, comm);
  const std::optional<KeyedEdge> val_end = select_edge(edges, test + val, total, comm);
  const auto below = [](const KeyedEdge& e, const std::optional<KeyedEdge>& end) {
    return !end || e < *end;
  };
  EdgeSplit split;
  for (const KeyedEdge& e : edges) {
    NodePairs& to = below(e, test_end) ? split.test : below(e, val_end) ? split.val : split.train;
    to.add(e.u, e.v);
  }
  // Each part in (u, v) order: the loss then reads and writes the sources' rows in order.
  for (NodePairs* part : {&split.train, &split.val, &split.test}) {
    std::vector<std::size_t> order_of(part->src.size());
    std::iota(order_of.begin(), order_of.end(), std::size_t{0});
    std::sort(order_of.begin(), order_of.end(), [&](std::size_t i, std::size_t j) {
      return std::tie(part->src[i], part->dst[i]) < std::tie(part->src[j], part->dst[j]);
    });
    NodePairs sorted;
    for (const std::size_t i : order_of)
      sorted.add(part->src[i], part->dst[i]);
    *part = std::move(sorted);
  }
  std::int64_t counts[2] = {split.val.size(), split.test.size()};
  if (comm != nullptr) comm->allreduce_sum(std::span<std::int64_t>(counts));
  const Neighbours neighbours(a, graph.ids);
  split.val_negative =
      draw_non_edges(neighbours, index, graph.num_nodes, counts[0],
                     RngKey::make(seed, RngPurpose::LinkSplit, 1), "validation", comm);
  split.test_negative = draw_non_edges(neighbours, index, graph.num_nodes, counts[1],
                                       RngKey::make(seed, RngPurpose::LinkSplit, 2), "test", comm);

  // The training graph: each row without its held-out edges, from whichever end it is seen.
  keep_edges(a, graph.ids, training,
             [&](GlobalId u, GlobalId v) { return !below(keyed_edge(order, u, v), val_end); });
  return split;
}

EdgeSplit share_split(const EdgeSplit& whole, const RankGraph& graph, Csr& training) {
  if (graph.adjacency == nullptr) throw InvalidArgument("link split: no adjacency given");
  const Csr& a = *graph.adjacency;
  comm::Communicator* comm = graph.comm != nullptr && graph.comm->size() > 1 ? graph.comm : nullptr;
  const NodeIndex index =
      comm != nullptr
          ? NodeIndex(*comm, graph.ids.first(static_cast<std::size_t>(a.rows())), graph.num_nodes)
          : NodeIndex();
  EdgeSplit share;
  std::vector<std::int64_t> train_place; // each of this rank's training pairs' place in whole
  const struct {
    const char* name;
    const NodePairs* from;
    NodePairs* to;
    bool positive;
  } parts[] = {{"train_pos", &whole.train, &share.train, true},
               {"val_pos", &whole.val, &share.val, true},
               {"val_neg", &whole.val_negative, &share.val_negative, false},
               {"test_pos", &whole.test, &share.test, true},
               {"test_neg", &whole.test_negative, &share.test_negative, false}};
  for (const auto& part : parts) {
    if (part.from->src.size() != part.from->dst.size()) {
      throw DimensionMismatch(fmt::format("link split: {} has {} sources and {} destinations",
                                          part.name, part.from->src.size(), part.from->dst.size()));
    }
    for (std::int64_t i = 0; i < part.from->size(); ++i) {
      GlobalId u = part.from->src[static_cast<std::size_t>(i)];
      GlobalId v = part.from->dst[static_cast<std::size_t>(i)];
      if (u < 0 || u >= graph.num_nodes || v < 0 || v >= graph.num_nodes) {
        throw InvalidArgument(fmt::format("link split: {} pair {} ({}, {}) names a node outside "
                                          "the graph's {} nodes (ids 0..{}): the split is of "
                                          "another graph",
                                          part.name, i, u, v, graph.num_nodes,
                                          graph.num_nodes - 1));
      }
      if (u == v) {
        throw InvalidArgument(
            fmt::format("link split: {} pair {} pairs node {} with itself", part.name, i, u));
      }
      if (part.positive && u > v) std::swap(u, v);
      if (!index.mine(u)) continue;
      part.to->add(u, v);
      if (part.from == &whole.train) train_place.push_back(i);
    }
  }
  // Every training pair an edge of the graph: its first end's owner checks its row.
  const Neighbours neighbours(a, graph.ids);
  // −(the place of the first training pair that is no edge) over the ranks: the largest.
  double first = -1e300;
  for (std::size_t i = 0; i < train_place.size(); ++i) {
    if (!neighbours.has(index.row(share.train.src[i]), share.train.dst[i])) {
      first = -static_cast<double>(train_place[i]);
      break;
    }
  }
  if (comm != nullptr) comm->allreduce_max(std::span<double>(&first, 1));
  if (first > -1e300) {
    const auto i = static_cast<std::size_t>(-first);
    throw InvalidArgument(fmt::format("link split: train_pos pair {} ({}, {}) is no edge of the "
                                      "graph: the split is of another graph",
                                      i, whole.train.src[i], whole.train.dst[i]));
  }
  // Positives in (u, v) order: the loss then reads and writes the sources' rows in order.
  for (NodePairs* part : {&share.train, &share.val, &share.test}) {
    std::vector<std::pair<GlobalId, GlobalId>> pairs(part->src.size());
    for (std::size_t i = 0; i < pairs.size(); ++i)
      pairs[i] = {part->src[i], part->dst[i]};
    std::sort(pairs.begin(), pairs.end());
    for (std::size_t i = 0; i < pairs.size(); ++i)
      std::tie(part->src[i], part->dst[i]) = pairs[i];
  }
  // The training graph: the graph's edges that are training pairs, in both ends' rows.
  std::vector<std::pair<GlobalId, GlobalId>> train_pairs(whole.train.src.size());
  for (std::size_t i = 0; i < train_pairs.size(); ++i) {
    const auto [low, high] = std::minmax(whole.train.src[i], whole.train.dst[i]);
    train_pairs[i] = {low, high};
  }
  std::sort(train_pairs.begin(), train_pairs.end());
  keep_edges(a, graph.ids, training, [&](GlobalId u, GlobalId v) {
    const auto [low, high] = std::minmax(u, v);
    return std::binary_search(train_pairs.begin(), train_pairs.end(), std::pair(low, high));
  });
  return share;
}

EdgeSplit split_edges(const Csr& adjacency, double val_fraction, double test_fraction,
                      std::uint64_t seed) {
  if (adjacency.rows() != adjacency.cols()) {
    throw DimensionMismatch("link split: the adjacency is not square: " + adjacency.shape());
  }
  Csr training;
  return split_edges(RankGraph{&adjacency, {}, adjacency.rows(), nullptr}, val_fraction,
                     test_fraction, seed, training);
}

Csr training_graph(const BackendPtr& backend, const EdgeSplit& split, std::int64_t num_nodes) {
  graph::EdgeList edges;
  edges.num_nodes = num_nodes;
  edges.src = split.train.src;
  edges.dst = split.train.dst;
  return graph::build_symmetric_csr(backend, edges);
}

void sample_negatives(const NodePairs& positives, const Csr& adjacency, std::int64_t num_nodes,
                      std::uint64_t seed, std::uint32_t epoch, NodePairs& out) {
  draw_negatives(positives, {}, Neighbours(adjacency, {}), num_nodes, seed, epoch, out);
}

std::vector<double> dot_scores(ConstDenseView<float> z, const NodePairs& pairs) {
  return scores_of(z, rows_of(pairs));
}

double link_loss(ConstDenseView<float> z, const NodePairs& positives, const NodePairs& negatives,
                 DenseView<float> dz) {
  return add_side(z, rows_of(positives), 1.0 / std::max<double>(positives.size(), 1), true, dz) +
         add_side(z, rows_of(negatives), 1.0 / std::max<double>(negatives.size(), 1), false, dz);
}

LinkMetrics measure_links(std::span<const double> positive, std::span<const double> negative,
                          std::span<const int> ks) {
  std::vector<double> scores(positive.begin(), positive.end());
  scores.insert(scores.end(), negative.begin(), negative.end());
  std::vector<std::uint8_t> labels(positive.size(), 1);
  labels.resize(scores.size(), 0);
  LinkMetrics m;
  m.average_precision = average_precision(scores, labels).value_or(0.0);
  m.mrr = mean_reciprocal_rank(positive, negative);
  for (const int k : ks)
    m.hits.emplace_back(k, hits_at_k(positive, negative, k));
  return m;
}

namespace {

/// Pair lists as rows of a table of embeddings: this rank's rows of z (its owned rows), then the
/// pair ends other ranks own, which `exchange` brings (and takes the gradients of back). In one
/// process the pairs' ids are the rows and nothing is exchanged.
class PairTable {
public:
  /// Plans `lists` (this rank's pairs, sources owned here): the remote ends, grouped by owner,
  /// and every pair's rows. Collective over `comm` when the index is distributed.
  void plan(std::span<const NodePairs* const> lists, NodeIndex& index,
            std::span<const GlobalId> owned, comm::Communicator* comm, const BackendPtr& host) {
    lists_.assign(lists.begin(), lists.end());
    if (!index.distributed()) return;
    remote_.clear();
    for (const NodePairs* list : lists) {
      for (const GlobalId v : list->dst) {
        if (!index.mine(v) && index.row(v) == -1) {
          index.set_row(v, -2); // seen
          remote_.push_back(v);
        }
      }
    }
    std::sort(remote_.begin(), remote_.end(), [&](GlobalId a, GlobalId b) {
      return std::pair(index.owner(a), a) < std::pair(index.owner(b), b);
    });
    std::vector<std::int32_t> owners(remote_.size());
    const auto n_owned = static_cast<std::int64_t>(owned.size());
    for (std::size_t i = 0; i < remote_.size(); ++i) {
      owners[i] = index.owner(remote_[i]);
      index.set_row(remote_[i], n_owned + static_cast<std::int64_t>(i));
    }
    rows_ = n_owned + static_cast<std::int64_t>(remote_.size());
    src_.resize(lists.size());
    dst_.resize(lists.size());
    for (std::size_t l = 0; l < lists.size(); ++l) {
      const NodePairs& list = *lists[l];
      src_[l].resize(list.src.size());
      dst_[l].resize(list.dst.size());
      for (std::size_t i = 0; i < list.src.size(); ++i) {
        src_[l][i] = index.row(list.src[i]);
        dst_[l][i] = index.row(list.dst[i]);
      }
    }
    for (const GlobalId v : remote_)
      index.set_row(v, -1);
    auto plan = std::make_shared<const comm::HaloPlan>(
        comm::HaloPlan::build(*comm, owned, remote_, owners));
    // The job holds the communicator for the whole run: a non-owning pointer.
    const std::shared_ptr<comm::Communicator> ranks(std::shared_ptr<comm::Communicator>{}, comm);
    exchange_.reset(); // its staging buffers go before the next ones come
    exchange_ =
        std::make_unique<comm::HaloExchange<float>>(ranks, plan, host, comm::tags::kPairEnds);
  }

  /// List l's pairs as rows of the table.
  PairRows rows(std::size_t l) const {
    if (!exchange_) return rows_of(*lists_[l]);
    return {src_[l], dst_[l]};
  }

  /// The table of `z` (this rank's rows, host): z itself in one process, else its rows and the
  /// remote ends'. Collective.
  ConstDenseView<float> fill(ConstDenseView<float> z) {
    if (!exchange_) return z;
    z_.resize(static_cast<std::size_t>(rows_ * z.cols));
    std::copy(z.data, z.data + z.rows * z.cols, z_.data());
    const DenseView<float> table(z_.data(), rows_, z.cols);
    auto request = exchange_->start_gather(table);
    exchange_->wait(request);
    return table;
  }

  /// A zeroed gradient of the table ([rows, width], reused), for the loss to add into.
  DenseView<float> gradient(std::int64_t owned_rows, std::int64_t width) {
    const std::int64_t rows = exchange_ ? rows_ : owned_rows;
    dz_.assign(static_cast<std::size_t>(rows * width), 0.0f);
    return {dz_.data(), rows, width};
  }
  /// The remote rows of `dz` added into their owners' rows: this rank's rows then hold the
  /// gradient of z. Collective.
  void return_gradient(DenseView<float> dz) {
    if (!exchange_) return;
    auto request = exchange_->start_scatter_add(dz);
    exchange_->wait(request);
  }

private:
  std::vector<const NodePairs*> lists_;
  std::vector<GlobalId> remote_;
  std::int64_t rows_ = 0;
  std::vector<std::vector<GlobalId>> src_, dst_;
  std::unique_ptr<comm::HaloExchange<float>> exchange_;
  std::vector<float> z_, dz_;
};

/// The features of pairs for an MLP decoder: h[i] = z[src[i]] ⊙ z[dst[i]], the lists one after
/// another, in `out` (reused).
DenseView<float> pair_features(ConstDenseView<float> z, std::span<const PairRows> lists,
                               std::vector<float>& out) {
  std::int64_t rows = 0;
  for (const PairRows& l : lists)
    rows += l.size();
  const std::int64_t d = z.cols;
  out.resize(static_cast<std::size_t>(rows * d));
  std::int64_t at = 0;
  for (const PairRows& l : lists) {
    float* h = out.data() + at * d;
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < l.size(); ++i) {
      const float* zu = z.data + l.src[static_cast<std::size_t>(i)] * d;
      const float* zv = z.data + l.dst[static_cast<std::size_t>(i)] * d;
      for (std::int64_t c = 0; c < d; ++c)
        h[i * d + c] = zu[c] * zv[c];
    }
    at += l.size();
  }
  return {out.data(), rows, d};
}

/// The features' gradient dh (rows as pair_features lays them out) added to the ends' rows:
/// dz[u] += dh[i] ⊙ z[v], dz[v] += dh[i] ⊙ z[u].
void add_feature_gradient(ConstDenseView<float> z, std::span<const PairRows> lists,
                          ConstDenseView<float> dh, DenseView<float> dz) {
  const std::int64_t d = z.cols;
  std::int64_t at = 0;
  for (const PairRows& l : lists) {
    for (std::int64_t i = 0; i < l.size(); ++i, ++at) {
      const GlobalId u = l.src[static_cast<std::size_t>(i)];
      const GlobalId v = l.dst[static_cast<std::size_t>(i)];
      const float* g = dh.data + at * d;
      for (std::int64_t c = 0; c < d; ++c) {
        const float zu = z.data[u * d + c], zv = z.data[v * d + c];
        dz.data[u * d + c] += g[c] * zv;
        dz.data[v * d + c] += g[c] * zu;
      }
    }
  }
}

/// `scale` × the summed loss of `scores`, the first `positives` labelled 1 and the rest 0, with
/// each score's gradient in `ds`.
double score_loss(std::span<const double> scores, std::int64_t positives, double scale,
                  std::span<float> ds) {
  double loss = 0.0;
  for (std::size_t i = 0; i < scores.size(); ++i) {
    const bool positive = static_cast<std::int64_t>(i) < positives;
    const double s = scores[i];
    loss += positive ? softplus(-s) : softplus(s);
    ds[i] = static_cast<float>(scale * (positive ? -sigmoid(-s) : sigmoid(s)));
  }
  return loss * scale;
}

/// The scores of one list of pairs (rows of z): by the decoder, or the dot product.
std::vector<double> list_scores(ConstDenseView<float> z, PairRows pairs, MlpDecoder* decoder,
                                const Step& step, std::vector<float>& features) {
  if (decoder == nullptr) return scores_of(z, pairs);
  return decoder->forward(step, pair_features(z, std::span(&pairs, 1), features));
}

/// The loss and accuracy shares of one split's scores (`pairs` positives over all ranks, as
/// many negatives).
void score_shares(std::span<const double> positive, std::span<const double> negative,
                  std::int64_t pairs, SplitMetrics& m) {
  const double scale = 1.0 / static_cast<double>(std::max<std::int64_t>(pairs, 1));
  double loss = 0.0;
  std::int64_t right = 0;
  for (const double s : positive) {
    loss += softplus(-s);
    right += s > 0;
  }
  for (const double s : negative) {
    loss += softplus(s);
    right += s <= 0;
  }
  m.loss = loss * scale;
  m.accuracy = static_cast<double>(right) * scale / 2.0;
}

} // namespace

TrainResult train_link_predictor(const BackendPtr& backend, Sequential<float>& model,
                                 Input<float> features, const LinkTask& task,
                                 const TrainConfig& config,
                                 const std::function<void(const EpochStats&)>& on_epoch,
                                 const Distribution* distribution, const TrainControl& control) {
  if (task.split == nullptr || task.adjacency == nullptr) {
    throw InvalidArgument("train_link_predictor: the task needs its split and training graph");
  }
  comm::Communicator* comm = distribution != nullptr ? distribution->comm : nullptr;
  const bool ranks = comm != nullptr && comm->size() > 1;
  const EdgeSplit& split = *task.split;
  const std::int64_t n_owned = task.adjacency->rows();
  const std::span<const GlobalId> owned = task.ids.empty()
                                              ? std::span<const GlobalId>{}
                                              : task.ids.first(static_cast<std::size_t>(n_owned));
  // Pairs over all ranks: every split's positives (its negatives are as many).
  std::int64_t pairs[3] = {split.train.size(), split.val.size(), split.test.size()};
  if (ranks) comm->allreduce_sum(std::span<std::int64_t>(pairs));
  if (pairs[0] == 0) throw InvalidArgument("the link split has no training edges");
  const BackendPtr host = make_cpu_backend();
  NodeIndex index = ranks ? NodeIndex(*comm, owned, task.num_nodes) : NodeIndex();
  const Neighbours neighbours(*task.adjacency, ranks ? task.ids : std::span<const GlobalId>{});
  std::vector<std::int64_t> train_rows; // each training positive's source row (distributed)
  if (ranks) {
    train_rows.resize(split.train.src.size());
    for (std::size_t i = 0; i < train_rows.size(); ++i) {
      if (!index.mine(split.train.src[i])) {
        throw InvalidArgument(fmt::format("link prediction: rank {} holds training pair ({}, {}), "
                                          "whose source rank {} owns",
                                          comm->rank(), split.train.src[i], split.train.dst[i],
                                          index.owner(split.train.src[i])));
      }
      train_rows[i] = index.row(split.train.src[i]);
    }
  }
  const RowIds row_ids = distribution != nullptr ? distribution->rows : RowIds{};
  const auto halo_totals = [&]() -> comm::HaloStats {
    if (distribution == nullptr || !distribution->halo_totals) return {};
    return distribution->halo_totals();
  };
  MlpDecoder* decoder = task.decoder;
  if (decoder != nullptr && model.memory() != nullptr) {
    throw InvalidArgument("the MLP decoder does not run under a memory budget yet: drop "
                          "--device-memory, --host-memory and --offload-dir, or use --decoder dot");
  }
  // The encoder's parameters, then the decoder's: what the optimizer steps and checkpoints hold.
  std::vector<Parameter<float>*> parameters = model.parameters();
  if (decoder != nullptr) {
    for (Parameter<float>* p : decoder->parameters())
      parameters.push_back(p);
  }
  Adam<float> optimizer(backend, parameters, config.adam);
  std::optional<DataParallel> gradient_sum;
  std::function<void(Parameter<float>&)> on_gradient;
  if (ranks) {
    gradient_sum.emplace(*comm, backend, parameters);
    on_gradient = [&gradient_sum](Parameter<float>& p) { gradient_sum->gradient_ready(p); };
  }
  std::vector<float> host_z;
  Dense dz;
  NodePairs train_negative, negatives; // negatives: each epoch's, in storage reused
  draw_negatives(split.train, train_rows, neighbours, task.num_nodes, config.seed, 0,
                 train_negative);
  PairTable step_table, eval_table;
  bool eval_planned = false;
  std::vector<float> pair_h, d_pair_h, d_scores; // the MLP decoder's, on the host

  EpochWork work;
  work.epochs = config.epochs;
  work.eval_every = config.eval_every;
  work.metric = Metric::RocAuc;
  work.gathers_scores = false;
  work.train_rows = pairs[0];
  work.val_rows = pairs[1];
  work.test_rows = pairs[2];
  work.lr = config.adam.lr;
  work.train = [&](int epoch, EpochStats& stats, PhaseTimes& phases) {
    const Step step{config.seed, static_cast<std::uint32_t>(epoch), true, row_ids};
    const comm::HaloStats halo_before = halo_totals();
    Stopwatch step_clock, phase;
    double exchange_s = 0.0;
    const ConstDenseView<float> z = model.forward(step, features);
    if (z.rows != n_owned) {
      throw DimensionMismatch(
          fmt::format("the encoder gives {} rows for a graph of {} nodes", z.rows, n_owned));
    }
    phases.forward += phase.seconds();
    phase.restart();
    draw_negatives(split.train, train_rows, neighbours, task.num_nodes, config.seed,
                   static_cast<std::uint32_t>(epoch), negatives);
    const NodePairs* lists[] = {&split.train, &negatives};
    Stopwatch exchange_clock;
    step_table.plan(lists, index, owned, comm, host);
    const ConstDenseView<float> table = step_table.fill(logits_on_host(*backend, z, host_z));
    exchange_s += exchange_clock.seconds();
    const DenseView<float> d_table = step_table.gradient(n_owned, z.cols);
    const double scale = 1.0 / static_cast<double>(pairs[0]);
    if (decoder == nullptr) {
      stats.train_loss = add_side(table, step_table.rows(0), scale, true, d_table) +
                         add_side(table, step_table.rows(1), scale, false, d_table);
    } else {
      const PairRows lists[] = {step_table.rows(0), step_table.rows(1)};
      const std::vector<double> scores =
          decoder->forward(step, pair_features(table, lists, pair_h));
      d_scores.resize(scores.size());
      stats.train_loss = score_loss(scores, lists[0].size(), scale, d_scores);
      d_pair_h.resize(pair_h.size());
      const DenseView<float> dh(d_pair_h.data(), static_cast<std::int64_t>(scores.size()),
                                table.cols);
      decoder->backward(d_scores, dh, on_gradient);
      add_feature_gradient(table, lists, dh, d_table);
    }
    exchange_clock.restart();
    step_table.return_gradient(d_table);
    exchange_s += exchange_clock.seconds();
    if (dz.rows() != z.rows || dz.cols() != z.cols) dz = Dense(backend, z.rows, z.cols);
    {
      Pins pins(model.memory()); // under a budget, dz is a tensor of the chunks
      pins.add_dense(dz.cview(), Access::Write);
      backend->copy_from_host(dz.data(), d_table.data,
                              static_cast<std::size_t>(z.rows * z.cols) * sizeof(float));
    }
    phases.loss += phase.seconds();
    phase.restart();
    model.backward(dz.cview(), GradientMode::Overwrite, on_gradient);
    phases.backward += phase.seconds();
    phase.restart();
    if (gradient_sum) {
      exchange_clock.restart();
      gradient_sum->finish();
      comm->allreduce_sum(std::span<double>(&stats.train_loss, 1));
      exchange_s += exchange_clock.seconds();
    }
    check_finite(stats.train_loss, "training loss", epoch, config.adam.lr);
    optimizer.step();
    phases.optimizer += phase.seconds();
    stats.step_ms = step_clock.seconds() * 1e3;
    stats.epoch_ms = stats.step_ms;
    if (ranks) {
      const comm::HaloStats halo_after = halo_totals();
      stats.comm_ms = 1e3 * (exchange_s + halo_after.start_seconds - halo_before.start_seconds);
      stats.wait_ms = 1e3 * (halo_after.wait_seconds - halo_before.wait_seconds);
      stats.halo_bytes_sent = halo_after.bytes_sent - halo_before.bytes_sent;
      stats.halo_bytes_received = halo_after.bytes_received - halo_before.bytes_received;
    }
  };
  work.evaluate = [&](int epoch, SplitMetrics(&shares)[3], BinaryScores*) {
    const Step eval{config.seed, static_cast<std::uint32_t>(epoch), false, row_ids};
    const ConstDenseView<float> z = model.forward(eval, features);
    if (!eval_planned) { // the evaluation's pairs are fixed for the run
      const NodePairs* lists[] = {&split.train,        &train_negative, &split.val,
                                  &split.val_negative, &split.test,     &split.test_negative};
      eval_table.plan(lists, index, owned, comm, host);
      eval_planned = true;
    }
    const ConstDenseView<float> table = eval_table.fill(logits_on_host(*backend, z, host_z));
    for (std::size_t i = 0; i < 3; ++i) {
      const std::vector<double> pos =
          list_scores(table, eval_table.rows(2 * i), decoder, eval, pair_h);
      const std::vector<double> neg =
          list_scores(table, eval_table.rows(2 * i + 1), decoder, eval, pair_h);
      SplitMetrics& m = shares[i];
      score_shares(pos, neg, pairs[i], m);
      if (i == 0) continue; // the training pairs' ranking is not measured (millions of pairs)
      const std::vector<double> all_pos = ranks ? comm::all_gather<double>(*comm, pos) : pos;
      const std::vector<double> all_neg = ranks ? comm::all_gather<double>(*comm, neg) : neg;
      std::vector<double> both = all_pos;
      both.insert(both.end(), all_neg.begin(), all_neg.end());
      std::vector<std::uint8_t> labels(all_pos.size(), 1);
      labels.resize(both.size(), 0);
      m.roc_auc = roc_auc(both, labels);
      m.link = measure_links(all_pos, all_neg, task.hits_k);
    }
  };
  return run_epochs(work, model, optimizer, comm, on_epoch, control);
}

std::vector<double> score_pairs(ConstDenseView<float> z, const NodePairs& pairs,
                                std::span<const GlobalId> owned, std::int64_t num_nodes,
                                comm::Communicator* comm, MlpDecoder* decoder) {
  const Step eval{0, 0, false, {}};
  std::vector<float> features;
  for (std::int64_t i = 0; i < pairs.size(); ++i) {
    const GlobalId u = pairs.src[static_cast<std::size_t>(i)];
    const GlobalId v = pairs.dst[static_cast<std::size_t>(i)];
    if (u < 0 || u >= num_nodes || v < 0 || v >= num_nodes) {
      throw InvalidArgument(fmt::format("pair {} ({}, {}) names a node outside the graph's {} "
                                        "nodes (ids 0..{})",
                                        i, u, v, num_nodes, num_nodes - 1));
    }
  }
  if (comm == nullptr || comm->size() == 1) {
    if (z.rows != num_nodes) {
      throw DimensionMismatch(
          fmt::format("score_pairs: {} embeddings for a graph of {} nodes", z.rows, num_nodes));
    }
    return list_scores(z, rows_of(pairs), decoder, eval, features);
  }
  NodeIndex index(*comm, owned, num_nodes);
  NodePairs mine;
  std::vector<std::size_t> place;
  for (std::size_t i = 0; i < pairs.src.size(); ++i) {
    if (!index.mine(pairs.src[i])) continue;
    mine.add(pairs.src[i], pairs.dst[i]);
    place.push_back(i);
  }
  PairTable table;
  const NodePairs* lists[] = {&mine};
  table.plan(lists, index, owned, comm, make_cpu_backend());
  const std::vector<double> scores =
      list_scores(table.fill(z), table.rows(0), decoder, eval, features);
  std::vector<double> all(pairs.src.size(), 0.0);
  for (std::size_t k = 0; k < place.size(); ++k)
    all[place[k]] = scores[k];
  comm->allreduce_sum(std::span<double>(all)); // each pair scored on one rank
  return all;
}

MlpDecoder::MlpDecoder(BackendPtr backend, std::int64_t width, std::int64_t hidden, int layers,
                       std::uint64_t seed)
    : backend_(std::move(backend)), width_(width), h_(backend_), d_score_(backend_) {
  if (width < 1 || hidden < 1 || layers < 1) {
    throw InvalidArgument(fmt::format("the MLP decoder needs a width and a hidden width >= 1 and "
                                      "at least 1 layer, got {}, {} and {}",
                                      width, hidden, layers));
  }
  constexpr std::uint32_t kFirstField = 1u << 12; // weight fields apart from the encoder's
  std::int64_t in = width;
  for (int k = 0; k < layers; ++k) {
    const std::int64_t out = k + 1 == layers ? 1 : hidden;
    auto linear = std::make_unique<Linear<float>>(backend_, in, out, true, seed,
                                                  kFirstField + static_cast<std::uint32_t>(k));
    for (Parameter<float>* p : linear->parameters()) {
      const std::string kind = p->name.substr(p->name.rfind('.') + 1); // weight or bias
      p->name = fmt::format("decoder.linear{}.{}", k, kind);
    }
    layers_.push_back(std::move(linear));
    if (k + 1 < layers) layers_.push_back(std::make_unique<Relu<float>>(backend_));
    in = out;
  }
  contexts_.resize(layers_.size());
}

std::vector<Parameter<float>*> MlpDecoder::parameters() {
  std::vector<Parameter<float>*> all;
  for (const auto& layer : layers_) {
    for (Parameter<float>* p : layer->parameters())
      all.push_back(p);
  }
  return all;
}

std::vector<double> MlpDecoder::forward(const Step& step, ConstDenseView<float> h) {
  if (h.cols != width_) {
    throw DimensionMismatch(
        fmt::format("the MLP decoder reads pair features of width {}, got {}", width_, h.cols));
  }
  if (h.rows == 0) return {};
  const DenseView<float> on_backend = h_.get(h.rows, width_);
  backend_->copy_from_host(on_backend.data, h.data,
                           static_cast<std::size_t>(h.rows * h.cols) * sizeof(float));
  Input<float> x = ConstDenseView<float>(on_backend);
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    contexts_[i] = layers_[i]->forward(step, x);
    x = contexts_[i].output;
  }
  host_scores_.resize(static_cast<std::size_t>(h.rows));
  backend_->copy_to_host(host_scores_.data(), x.dense.data, host_scores_.size() * sizeof(float));
  return {host_scores_.begin(), host_scores_.end()};
}

void MlpDecoder::backward(std::span<const float> d_score, DenseView<float> dh,
                          const std::function<void(Parameter<float>&)>& on_gradient) {
  const auto n = static_cast<std::int64_t>(d_score.size());
  if (dh.rows != n || dh.cols != width_) {
    throw DimensionMismatch(fmt::format("the MLP decoder's feature gradient is [{}, {}], "
                                        "expected [{}, {}]",
                                        dh.rows, dh.cols, n, width_));
  }
  if (n == 0) return;
  const DenseView<float> ds = d_score_.get(n, 1);
  backend_->copy_from_host(ds.data, d_score.data(), d_score.size() * sizeof(float));
  ConstDenseView<float> d = ds;
  for (std::size_t i = layers_.size(); i-- > 0;) {
    d = layers_[i]->backward(contexts_[i], d, GradientMode::Overwrite, GradientMode::Overwrite);
    if (on_gradient) {
      for (Parameter<float>* p : layers_[i]->parameters())
        on_gradient(*p);
    }
  }
  backend_->copy_to_host(dh.data, d.data, static_cast<std::size_t>(n * width_) * sizeof(float));
}

} // namespace tessera::gnn
