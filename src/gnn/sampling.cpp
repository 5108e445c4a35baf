// Neighbour sampling: seed batches and per-hop blocks.
#include "tessera/gnn/sampling.hpp"

#include "tessera/core/error.hpp"
#include "tessera/core/rng.hpp"

#include <algorithm>
#include <fmt/core.h>
#include <numeric>
#include <unordered_map>

namespace tessera::gnn {

namespace {

/// `count` distinct indices of [0, degree) drawn by Floyd's algorithm from the field of `key` at
/// row `node`, ascending, into `out`.
void distinct_indices(const RngKey& key, GlobalId node, std::int64_t degree, int count,
                      std::vector<std::int64_t>& out) {
  out.clear();
  for (std::int64_t j = degree - count; j < degree; ++j) {
    const auto t = static_cast<std::int64_t>(
        uniform_index(key, node, j - (degree - count), static_cast<std::uint32_t>(j + 1)));
    if (std::find(out.begin(), out.end(), t) == out.end()) {
      out.push_back(t);
    } else {
      out.push_back(j);
    }
  }
  std::sort(out.begin(), out.end());
}

} // namespace

void check_fanouts(std::span<const int> fanouts, int layers) {
  if (fanouts.empty()) throw InvalidArgument("sampling needs a fanout per layer, got none");
  if (layers > 0 && static_cast<int>(fanouts.size()) != layers) {
    throw InvalidArgument(fmt::format("{} fanouts for a model of {} graph layers: give one per "
                                      "layer (the seeds' neighbours first)",
                                      fanouts.size(), layers));
  }
  for (std::size_t h = 0; h < fanouts.size(); ++h) {
    if (fanouts[h] == 0 || fanouts[h] < -1) {
      throw InvalidArgument(fmt::format("fanout {} of hop {} is not a neighbour count: give a "
                                        "count >= 1, or -1 for all neighbours",
                                        fanouts[h], h + 1));
    }
  }
}

SampledBatch sample_blocks(const Csr& graph, std::span<const GlobalId> seeds,
                           const SamplerOptions& options, std::uint32_t epoch) {
  check_fanouts(options.fanouts);
  const std::int64_t n = graph.rows();
  // Where each node sits among the current hop's sources (-1: not yet), reset after each hop.
  std::unordered_map<GlobalId, LocalId> index;
  index.reserve(seeds.size() * 4);
  std::vector<GlobalId> frontier(seeds.begin(), seeds.end());
  for (std::size_t i = 0; i < frontier.size(); ++i) {
    const GlobalId s = frontier[i];
    if (s < 0 || s >= n) {
      throw InvalidArgument(fmt::format("seed {} is not a node of the graph's {}", s, n));
    }
    if (!index.emplace(s, static_cast<LocalId>(i)).second) {
      throw InvalidArgument(fmt::format("seed {} appears twice in one batch", s));
    }
  }
  const int hops = static_cast<int>(options.fanouts.size());
  std::vector<Block> blocks(static_cast<std::size_t>(hops));
  std::vector<std::int64_t> picked;
  for (int h = 0; h < hops; ++h) {
    const int fanout = options.fanouts[static_cast<std::size_t>(h)];
    const RngKey key = RngKey::make(options.seed, RngPurpose::NeighbourSampling,
                                    static_cast<std::uint32_t>(h), epoch);
    Block& b = blocks[static_cast<std::size_t>(hops - 1 - h)]; // the input layer's first
    b.dst = static_cast<std::int64_t>(frontier.size());
    b.src = frontier;
    b.row_ptr.assign(1, 0);
    if (h > 0) { // the frontier's index was the previous hop's sources
      index.clear();
      for (std::size_t i = 0; i < frontier.size(); ++i)
        index.emplace(frontier[i], static_cast<LocalId>(i));
    }
    for (std::int64_t r = 0; r < b.dst; ++r) {
      const GlobalId u = frontier[static_cast<std::size_t>(r)];
      const Offset begin = graph.row_ptr()[u], end = graph.row_ptr()[u + 1];
      // The neighbours without u itself.
      const LocalId* first = graph.col() + begin;
      const LocalId* last = graph.col() + end;
      const LocalId* self = std::lower_bound(first, last, static_cast<LocalId>(u));
      const bool has_self = self != last && *self == u;
      const std::int64_t degree = (end - begin) - (has_self ? 1 : 0);
      const auto neighbour = [&](std::int64_t k) -> GlobalId {
        const std::int64_t at = has_self && first + k >= self ? k + 1 : k;
        return first[at];
      };
      const auto add = [&](GlobalId v) {
        const auto [it, fresh] = index.emplace(v, static_cast<LocalId>(b.src.size()));
        if (fresh) b.src.push_back(v);
        b.col.push_back(it->second);
      };
      if (degree > 0) {
        if (fanout == -1 || (!options.replace && degree <= fanout)) {
          for (std::int64_t k = 0; k < degree; ++k)
            add(neighbour(k));
        } else if (options.replace) {
          picked.clear();
          for (int j = 0; j < fanout; ++j)
            picked.push_back(uniform_index(key, u, j, static_cast<std::uint32_t>(degree)));
          std::sort(picked.begin(), picked.end());
          for (const std::int64_t k : picked)
            add(neighbour(k));
        } else {
          distinct_indices(key, u, degree, fanout, picked);
          for (const std::int64_t k : picked)
            add(neighbour(k));
        }
      }
      b.row_ptr.push_back(static_cast<Offset>(b.col.size()));
    }
    frontier = b.src;
  }
  SampledBatch batch;
  batch.blocks = std::move(blocks);
  return batch;
}

std::vector<std::vector<GlobalId>> seed_batches(std::span<const GlobalId> train,
                                                std::int64_t batch_size, std::uint64_t seed,
                                                std::uint32_t epoch) {
  if (batch_size < 1) {
    throw InvalidArgument(fmt::format("the batch size must be >= 1, got {}", batch_size));
  }
  const RngKey key = RngKey::make(seed, RngPurpose::BatchOrder, 0, epoch);
  std::vector<std::pair<std::uint64_t, GlobalId>> order(train.size());
  for (std::size_t i = 0; i < train.size(); ++i) {
    const auto bits = random_bits4(key, train[i], 0);
    order[i] = {(static_cast<std::uint64_t>(bits[0]) << 32) | bits[1], train[i]};
  }
  std::sort(order.begin(), order.end());
  std::vector<std::vector<GlobalId>> batches;
  for (std::size_t at = 0; at < order.size(); at += static_cast<std::size_t>(batch_size)) {
    auto& batch = batches.emplace_back();
    const std::size_t end = std::min(order.size(), at + static_cast<std::size_t>(batch_size));
    for (std::size_t i = at; i < end; ++i)
      batch.push_back(order[i].second);
  }
  return batches;
}

} // namespace tessera::gnn
