// Link prediction: the edge split, negative pairs, the dot-product decoder and its loss, the
// metrics, and the epochs of an encoder trained on them.
#include "tessera/gnn/link_prediction.hpp"

#include "tessera/core/error.hpp"
#include "tessera/core/rng.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/engine/optimizer.hpp"
#include "tessera/gnn/metrics.hpp"
#include "tessera/graph/graph.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/core.h>
#include <numeric>

namespace tessera::gnn {

namespace {

/// Whether v is a neighbour of u in `a` (columns sorted).
bool is_edge(const Csr& a, GlobalId u, GlobalId v) {
  const LocalId* begin = a.col() + a.row_ptr()[u];
  const LocalId* end = a.col() + a.row_ptr()[u + 1];
  return std::binary_search(begin, end, static_cast<LocalId>(v));
}

/// `count` uniform pairs u ≠ v that are no edge of `a`, from the field of `key`.
NodePairs draw_non_edges(const Csr& a, std::int64_t count, const RngKey& key,
                         const std::string& what) {
  const auto n = static_cast<std::uint32_t>(a.rows());
  NodePairs out;
  const std::int64_t limit = 100 * count + 1000;
  for (std::int64_t draw = 0; out.size() < count; ++draw) {
    if (draw == limit) {
      throw InvalidArgument(fmt::format("could not draw {} {} negative pairs (non-edges) in {} "
                                        "tries: the graph of {} nodes is too dense",
                                        count, what, limit, n));
    }
    const auto bits = random_bits4(key, draw, 0);
    const auto u = static_cast<GlobalId>((static_cast<std::uint64_t>(bits[0]) * n) >> 32);
    const auto v = static_cast<GlobalId>((static_cast<std::uint64_t>(bits[1]) * n) >> 32);
    if (u != v && !is_edge(a, u, v)) out.add(u, v);
  }
  return out;
}

double softplus(double x) {
  return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

double sigmoid(double x) {
  return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
}

/// The mean loss of the pairs' scores (label 1 when `positive`), adding its gradient to dz (when
/// given): dz[u] += g·z[v], dz[v] += g·z[u], each pair's score computed in the same pass.
double add_side(ConstDenseView<float> z, const NodePairs& pairs, bool positive,
                DenseView<float> dz) {
  if (pairs.size() == 0) return 0.0;
  const double scale = 1.0 / static_cast<double>(pairs.size());
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

} // namespace

EdgeSplit split_edges(const Csr& adjacency, double val_fraction, double test_fraction,
                      std::uint64_t seed) {
  if (!(val_fraction >= 0 && test_fraction >= 0 && val_fraction + test_fraction < 1)) {
    throw InvalidArgument(fmt::format("link split: validation {} and test {} must be fractions in "
                                      "[0, 1) that leave edges to train on",
                                      val_fraction, test_fraction));
  }
  if (adjacency.rows() != adjacency.cols()) {
    throw DimensionMismatch("link split: the adjacency is not square: " + adjacency.shape());
  }
  struct Edge {
    std::uint64_t key;
    GlobalId u, v;
  };
  std::vector<Edge> edges;
  const RngKey order_key = RngKey::make(seed, RngPurpose::LinkSplit, 0);
  for (std::int64_t u = 0; u < adjacency.rows(); ++u) {
    for (Offset k = adjacency.row_ptr()[u]; k < adjacency.row_ptr()[u + 1]; ++k) {
      const GlobalId v = adjacency.col()[k];
      if (v <= u) continue;
      const auto bits = random_bits4(order_key, u, static_cast<std::uint32_t>(v));
      edges.push_back({(static_cast<std::uint64_t>(bits[0]) << 32) | bits[1], u, v});
    }
  }
  if (edges.empty()) {
    throw InvalidArgument(fmt::format("the graph has no edges ({} nodes): link prediction holds "
                                      "edges out to predict, and needs some",
                                      adjacency.rows()));
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) {
    return a.key != b.key ? a.key < b.key : (a.u != b.u ? a.u < b.u : a.v < b.v);
  });
  const auto total = static_cast<double>(edges.size());
  const auto test = static_cast<std::size_t>(std::llround(test_fraction * total));
  const auto val = static_cast<std::size_t>(std::llround(val_fraction * total));
  if (test + val >= edges.size()) {
    throw InvalidArgument(fmt::format("link split: {} edges leave none to train on after {} test "
                                      "and {} validation edges",
                                      edges.size(), test, val));
  }
  // Each part in (u, v) order: the loss then reads and writes the sources' rows in order.
  const auto by_pair = [](const Edge& a, const Edge& b) {
    return a.u != b.u ? a.u < b.u : a.v < b.v;
  };
  std::sort(edges.begin(), edges.begin() + static_cast<std::ptrdiff_t>(test), by_pair);
  std::sort(edges.begin() + static_cast<std::ptrdiff_t>(test),
            edges.begin() + static_cast<std::ptrdiff_t>(test + val), by_pair);
  std::sort(edges.begin() + static_cast<std::ptrdiff_t>(test + val), edges.end(), by_pair);
  EdgeSplit split;
  for (std::size_t i = 0; i < edges.size(); ++i) {
    NodePairs& to = i < test ? split.test : i < test + val ? split.val : split.train;
    to.add(edges[i].u, edges[i].v);
  }
  split.val_negative = draw_non_edges(adjacency, split.val.size(),
                                      RngKey::make(seed, RngPurpose::LinkSplit, 1), "validation");
  split.test_negative = draw_non_edges(adjacency, split.test.size(),
                                       RngKey::make(seed, RngPurpose::LinkSplit, 2), "test");
  return split;
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
  out.src = positives.src; // copied into the storage `out` already has
  out.dst.resize(positives.src.size());
  const auto n = static_cast<std::uint64_t>(num_nodes);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < positives.size(); ++i) {
    const GlobalId u = positives.src[static_cast<std::size_t>(i)];
    const auto v = static_cast<std::uint32_t>(positives.dst[static_cast<std::size_t>(i)]);
    GlobalId w = u;
    for (std::uint32_t attempt = 0; attempt < 16; ++attempt) {
      // Keyed by the pair itself: the same draw on any rank that holds it.
      const RngKey key = RngKey::make(seed, RngPurpose::NegativeSampling, attempt >> 2, epoch);
      const std::uint32_t bits = random_bits4(key, u, v)[attempt & 3u];
      w = static_cast<GlobalId>((static_cast<std::uint64_t>(bits) * n) >> 32);
      if (w != u && !is_edge(adjacency, u, w)) break;
    }
    out.dst[static_cast<std::size_t>(i)] = w;
  }
}

std::vector<double> dot_scores(ConstDenseView<float> z, const NodePairs& pairs) {
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

double link_loss(ConstDenseView<float> z, const NodePairs& positives, const NodePairs& negatives,
                 DenseView<float> dz) {
  return add_side(z, positives, true, dz) + add_side(z, negatives, false, dz);
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

TrainResult train_link_predictor(const BackendPtr& backend, Sequential<float>& model,
                                 Input<float> features, const LinkTask& task,
                                 const TrainConfig& config,
                                 const std::function<void(const EpochStats&)>& on_epoch,
                                 const TrainControl& control) {
  if (task.split == nullptr || task.adjacency == nullptr) {
    throw InvalidArgument("train_link_predictor: the task needs its split and training graph");
  }
  const EdgeSplit& split = *task.split;
  if (split.train.size() == 0) throw InvalidArgument("the link split has no training edges");
  if (model.memory() != nullptr) {
    throw InvalidArgument("link prediction does not run under a memory budget yet: drop "
                          "--device-memory, --host-memory and --offload-dir");
  }
  Adam<float> optimizer(backend, model.parameters(), config.adam);
  std::vector<float> host_z, host_dz;
  Dense dz;
  NodePairs train_negative, negatives; // negatives: each epoch's, in storage reused
  sample_negatives(split.train, *task.adjacency, task.num_nodes, config.seed, 0, train_negative);

  EpochWork work;
  work.epochs = config.epochs;
  work.eval_every = config.eval_every;
  work.metric = Metric::RocAuc;
  work.train_rows = split.train.size();
  work.val_rows = split.val.size();
  work.test_rows = split.test.size();
  work.lr = config.adam.lr;
  work.train = [&](int epoch, EpochStats& stats, PhaseTimes& phases) {
    const Step step{config.seed, static_cast<std::uint32_t>(epoch), true, {}};
    Stopwatch step_clock, phase;
    const ConstDenseView<float> z = model.forward(step, features);
    if (z.rows != task.num_nodes) {
      throw DimensionMismatch(
          fmt::format("the encoder gives {} rows for a graph of {} nodes", z.rows, task.num_nodes));
    }
    phases.forward += phase.seconds();
    phase.restart();
    const ConstDenseView<float> zh = logits_on_host(*backend, z, host_z);
    host_dz.assign(static_cast<std::size_t>(z.rows * z.cols), 0.0f);
    sample_negatives(split.train, *task.adjacency, task.num_nodes, config.seed,
                     static_cast<std::uint32_t>(epoch), negatives);
    stats.train_loss =
        link_loss(zh, split.train, negatives, DenseView<float>(host_dz.data(), z.rows, z.cols));
    if (dz.rows() != z.rows || dz.cols() != z.cols) dz = Dense(backend, z.rows, z.cols);
    backend->copy_from_host(dz.data(), host_dz.data(), host_dz.size() * sizeof(float));
    phases.loss += phase.seconds();
    phase.restart();
    model.backward(dz.cview());
    phases.backward += phase.seconds();
    check_finite(stats.train_loss, "training loss", epoch, config.adam.lr);
    phase.restart();
    optimizer.step();
    phases.optimizer += phase.seconds();
    stats.step_ms = step_clock.seconds() * 1e3;
    stats.epoch_ms = stats.step_ms;
  };
  work.evaluate = [&](int epoch, SplitMetrics(&shares)[3], BinaryScores* scores) {
    const Step eval{config.seed, static_cast<std::uint32_t>(epoch), false, {}};
    const ConstDenseView<float> zh =
        logits_on_host(*backend, model.forward(eval, features), host_z);
    const std::pair<const NodePairs*, const NodePairs*> sides[3] = {
        {&split.train, &train_negative},
        {&split.val, &split.val_negative},
        {&split.test, &split.test_negative}};
    for (int i = 0; i < 3; ++i) {
      const auto& [positive, negative] = sides[i];
      const std::vector<double> pos = dot_scores(zh, *positive), neg = dot_scores(zh, *negative);
      SplitMetrics& m = shares[i];
      m.loss = link_loss(zh, *positive, *negative, {});
      const auto right = std::count_if(pos.begin(), pos.end(), [](double s) { return s > 0; }) +
                         std::count_if(neg.begin(), neg.end(), [](double s) { return s <= 0; });
      const std::size_t pairs = pos.size() + neg.size();
      m.accuracy = pairs > 0 ? static_cast<double>(right) / static_cast<double>(pairs) : 0.0;
      m.link = measure_links(pos, neg, task.hits_k);
      if (scores != nullptr) {
        BinaryScores& s = scores[i];
        s.scores.insert(s.scores.end(), pos.begin(), pos.end());
        s.scores.insert(s.scores.end(), neg.begin(), neg.end());
        s.positive.insert(s.positive.end(), pos.size(), 1);
        s.positive.insert(s.positive.end(), neg.size(), 0);
      }
    }
  };
  return run_epochs(work, model, optimizer, nullptr, on_epoch, control);
}

} // namespace tessera::gnn
