// Neighbour sampling: seed batches and per-hop blocks.
#include "tessera/gnn/sampling.hpp"

#include "rank_nodes.hpp"
#include "tessera/comm/tags.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/rng.hpp"
#include "tessera/core/timer.hpp"

#include <algorithm>
#include <fmt/core.h>
#include <numeric>

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

/// The neighbours of node u (owned row `row` of `graph`) drawn at one hop, as global ids
/// appended to `out`: all of them when fanout is -1 or (without replacement) u has no more;
/// else `fanout` of them by index ascending — distinct, or with replacement. A self-loop is
/// never drawn.
void draw_neighbours(const Neighbours& graph, std::int64_t row, GlobalId u, const RngKey& key,
                     int fanout, bool replace, std::vector<std::int64_t>& picked,
                     std::vector<GlobalId>& out) {
  const Offset begin = graph.begin(row), end = graph.end(row);
  Offset self = begin, last = end; // u's place among its neighbours (binary search)
  while (self < last) {
    const Offset mid = self + (last - self) / 2;
    if (graph.neighbour(mid) < u) {
      self = mid + 1;
    } else {
      last = mid;
    }
  }
  const bool has_self = self < end && graph.neighbour(self) == u;
  const std::int64_t degree = (end - begin) - (has_self ? 1 : 0);
  const auto neighbour = [&](std::int64_t k) {
    const Offset at = begin + k;
    return graph.neighbour(has_self && at >= self ? at + 1 : at);
  };
  if (degree == 0) return;
  if (fanout == -1 || (!replace && degree <= fanout)) {
    for (std::int64_t k = 0; k < degree; ++k)
      out.push_back(neighbour(k));
    return;
  }
  if (replace) {
    picked.clear();
    for (int j = 0; j < fanout; ++j)
      picked.push_back(uniform_index(key, u, j, static_cast<std::uint32_t>(degree)));
    std::sort(picked.begin(), picked.end());
  } else {
    distinct_indices(key, u, degree, fanout, picked);
  }
  for (const std::int64_t k : picked)
    out.push_back(neighbour(k));
}

/// How far ahead of a draw its node's lines are asked for (in nodes): the index entry, then the
/// row's offsets, then its first neighbours. The nodes are random: one at a time, each draw
/// would wait for memory three times.
constexpr std::size_t kEntryAhead = 16, kOffsetsAhead = 8, kNeighboursAhead = 4;
/// How far ahead of its copy a feature row's lines are asked for (in rows).
constexpr std::size_t kRowAhead = 8;

/// Draws the neighbours of every node of `nodes` in order (as draw_neighbours), appending each
/// one's to `out` and then out's size to `ends`: a node this rank owns from `graph`, another by
/// remote(u, out). The nodes must be in the graph.
template <typename Remote>
void draw_rows(const Neighbours& graph, const NodeIndex& index, std::span<const GlobalId> nodes,
               const RngKey& key, int fanout, bool replace, std::vector<std::int64_t>& picked,
               std::vector<GlobalId>& out, std::vector<Offset>& ends, Remote&& remote) {
  const std::size_t n = nodes.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (i + kEntryAhead < n) index.prefetch(nodes[i + kEntryAhead]);
    if (i + kOffsetsAhead < n && index.mine(nodes[i + kOffsetsAhead]))
      graph.prefetch_offsets(index.row(nodes[i + kOffsetsAhead]));
    if (i + kNeighboursAhead < n && index.mine(nodes[i + kNeighboursAhead]))
      graph.prefetch_neighbours(index.row(nodes[i + kNeighboursAhead]));
    const GlobalId u = nodes[i];
    if (index.mine(u)) {
      draw_neighbours(graph, index.row(u), u, key, fanout, replace, picked, out);
    } else {
      remote(u, out);
    }
    ends.push_back(static_cast<Offset>(out.size()));
  }
}

/// Sends send[p] to every rank p and returns what each rank sent here, in `received` (reused).
/// Collective: one alltoall of the counts, then the lists point to point. Adds the bytes
/// received to `bytes`.
template <typename T>
void exchange_lists(comm::Communicator& comm, const std::vector<std::vector<T>>& send, int tag,
                    std::vector<std::vector<T>>& received, std::int64_t& bytes, double& seconds) {
  const Stopwatch clock;
  const int ranks = comm.size();
  std::vector<std::int64_t> counts(static_cast<std::size_t>(ranks));
  for (int p = 0; p < ranks; ++p)
    counts[static_cast<std::size_t>(p)] =
        static_cast<std::int64_t>(send[static_cast<std::size_t>(p)].size());
  const std::vector<std::int64_t> incoming = comm.alltoall(counts);
  received.resize(static_cast<std::size_t>(ranks));
  std::vector<comm::SendMessage> sends;
  std::vector<comm::RecvMessage> recvs;
  for (int p = 0; p < ranks; ++p) {
    const auto at = static_cast<std::size_t>(p);
    if (p == comm.rank()) {
      received[at] = send[at];
      continue;
    }
    received[at].resize(static_cast<std::size_t>(incoming[at]));
    if (!send[at].empty()) sends.push_back({p, std::as_bytes(std::span<const T>(send[at]))});
    if (!received[at].empty()) {
      recvs.push_back({p, std::as_writable_bytes(std::span<T>(received[at]))});
      bytes += static_cast<std::int64_t>(received[at].size() * sizeof(T));
    }
  }
  comm.start_exchange(sends, recvs, tag)->wait();
  seconds += clock.seconds();
}

/// Checks the nodes a peer asked this rank about are in the graph (whether this rank owns them
/// is checked where each is looked up: not_asked_here).
void check_asked(std::span<const GlobalId> nodes, std::int64_t num_nodes, int peer,
                 const char* what) {
  for (const GlobalId v : nodes) {
    if (v < 0 || v >= num_nodes) {
      throw FormatError(fmt::format("rank {} asked this rank for the {} of node {}, which is not "
                                    "a node of the graph's {}",
                                    peer, what, v, num_nodes));
    }
  }
}

[[noreturn]] void not_asked_here(GlobalId v, int peer, const char* what) {
  throw FormatError(fmt::format("rank {} asked this rank for the {} of node {}, which it does "
                                "not own (the ranks disagree on the partition)",
                                peer, what, v));
}

/// Node v drawn as a neighbour in block rows [0, row_ptr.size() - 1) must be in the graph.
void check_drawn(GlobalId v, std::int64_t k, std::span<const Offset> row_ptr,
                 std::span<const GlobalId> dst, std::int64_t num_nodes) {
  if (v >= 0 && v < num_nodes) return;
  const auto row = std::upper_bound(row_ptr.begin(), row_ptr.end(), static_cast<Offset>(k)) -
                   row_ptr.begin() - 1;
  throw FormatError(fmt::format("node {} drawn as a neighbour of node {} is not a node of the "
                                "graph's {}",
                                v, dst[static_cast<std::size_t>(row)], num_nodes));
}

/// The blocks of `seeds` (owned here) hop by hop: nodes this rank owns are drawn from `graph`,
/// the others by their owners. One process when `comm` is null or of one rank. `place`:
/// [num_nodes] all -1, where each node sits among the current hop's sources while a hop is
/// built; all -1 again on return (also when it throws).
SampledBatch sample_hops(const Neighbours& graph, const NodeIndex& index, comm::Communicator* comm,
                         std::int64_t num_nodes, std::span<const GlobalId> seeds,
                         const SamplerOptions& options, std::uint32_t epoch, SamplingStats& stats,
                         std::vector<LocalId>& place) {
  const bool ranks = comm != nullptr && comm->size() > 1;
  std::vector<GlobalId> frontier(seeds.begin(), seeds.end());
  for (const GlobalId s : frontier) {
    if (s < 0 || s >= num_nodes) {
      throw InvalidArgument(fmt::format("seed {} is not a node of the graph's {}", s, num_nodes));
    }
    if (!index.mine(s)) {
      throw InvalidArgument(fmt::format("seed {} is owned by rank {}: a rank draws batches from "
                                        "the nodes it owns",
                                        s, index.owner(s)));
    }
  }
  const int hops = static_cast<int>(options.fanouts.size());
  std::vector<Block> blocks(static_cast<std::size_t>(hops));
  // Declared after what `marked` points into (the frontier, a block's sources), so it runs first.
  std::span<const GlobalId> marked; // the nodes whose place is set
  struct Unmark {                   // every place back to -1, however the call ends
    std::vector<LocalId>& place;
    std::span<const GlobalId>& nodes;
    ~Unmark() {
      for (const GlobalId v : nodes)
        place[static_cast<std::size_t>(v)] = -1;
    }
  } unmark{place, marked};
  for (std::size_t i = 0; i < frontier.size(); ++i) {
    const GlobalId s = frontier[i];
    if (place[static_cast<std::size_t>(s)] != -1) {
      marked = std::span<const GlobalId>(frontier).first(i);
      throw InvalidArgument(fmt::format("seed {} appears twice in one batch", s));
    }
    place[static_cast<std::size_t>(s)] = static_cast<LocalId>(i);
  }
  marked = frontier;
  const auto peers = static_cast<std::size_t>(ranks ? comm->size() : 1);
  std::vector<std::vector<GlobalId>> requests(peers), asked, answers(peers), received;
  std::vector<std::size_t> count_at(peers), list_at(peers);
  std::vector<std::int64_t> picked;
  std::vector<GlobalId> drawn; // a hop's neighbours, row after row
  std::vector<Offset> ends;
  for (int h = 0; h < hops; ++h) {
    const int fanout = options.fanouts[static_cast<std::size_t>(h)];
    const RngKey key = RngKey::make(options.seed, RngPurpose::NeighbourSampling,
                                    static_cast<std::uint32_t>(h), epoch);
    Block& b = blocks[static_cast<std::size_t>(hops - 1 - h)]; // the input layer's first
    b.dst = static_cast<std::int64_t>(frontier.size());
    b.src = frontier;
    b.row_ptr.assign(1, 0);
    marked = b.src; // the frontier's places are set (its own order: the previous hop's sources)
    if (ranks) { // the owners draw for the frontier nodes they own
      for (auto& r : requests)
        r.clear();
      for (const GlobalId u : frontier) {
        if (!index.mine(u)) requests[static_cast<std::size_t>(index.owner(u))].push_back(u);
      }
      exchange_lists(*comm, requests, comm::tags::kSampleRequests, asked, stats.sample_bytes,
                     stats.sample_exchange_seconds);
      // answers[p]: how many neighbours each node p asked about has, in its order, then theirs.
      for (std::size_t p = 0; p < peers; ++p) {
        const auto peer = static_cast<int>(p);
        const std::size_t n = asked[p].size();
        check_asked(asked[p], num_nodes, peer, "neighbours");
        answers[p].assign(n, 0);
        ends.clear();
        draw_rows(
            graph, index, asked[p], key, fanout, options.replace, picked, answers[p], ends,
            [&](GlobalId u, std::vector<GlobalId>&) { not_asked_here(u, peer, "neighbours"); });
        for (std::size_t i = 0; i < n; ++i)
          answers[p][i] = ends[i] - (i == 0 ? static_cast<Offset>(n) : ends[i - 1]);
        stats.sampled_for_others += static_cast<std::int64_t>(n);
      }
      exchange_lists(*comm, answers, comm::tags::kSampleAnswers, received, stats.sample_bytes,
                     stats.sample_exchange_seconds);
      for (std::size_t p = 0; p < peers; ++p) {
        count_at[p] = 0;
        list_at[p] = requests[p].size();
        if (received[p].size() < list_at[p]) {
          throw FormatError(fmt::format("rank {} sent a sampling answer of {} values for {} nodes",
                                        p, received[p].size(), list_at[p]));
        }
      }
    }
    // The frontier's neighbours, row after row; the owners' answers come in the order of the
    // requests.
    drawn.clear();
    draw_rows(graph, index, frontier, key, fanout, options.replace, picked, drawn, b.row_ptr,
              [&](GlobalId u, std::vector<GlobalId>& out) {
                const auto p = static_cast<std::size_t>(index.owner(u));
                const std::vector<GlobalId>& list = received[p];
                const GlobalId count = list[count_at[p]++];
                if (count < 0 || static_cast<std::size_t>(count) > list.size() - list_at[p]) {
                  throw FormatError(
                      fmt::format("rank {} sent a malformed sampling answer for node {}", p, u));
                }
                const auto at = list.begin() + static_cast<std::ptrdiff_t>(list_at[p]);
                out.insert(out.end(), at, at + static_cast<std::ptrdiff_t>(count));
                list_at[p] += static_cast<std::size_t>(count);
                ++stats.remote_sampled;
              });
    for (std::size_t p = 0; ranks && p < peers; ++p) {
      if (list_at[p] != received[p].size()) {
        throw FormatError(fmt::format("rank {} sent {} values of sampling answers, {} more than "
                                      "the neighbours it counted",
                                      p, received[p].size(), received[p].size() - list_at[p]));
      }
    }
    // Each drawn node's place among the sources (a new one is appended): its line is asked for
    // ahead, as the nodes are random.
    constexpr std::size_t kPlaceAhead = 16;
    b.col.resize(drawn.size());
    for (std::size_t k = 0; k < drawn.size(); ++k) {
      if (k + kPlaceAhead < drawn.size()) {
        const GlobalId next = drawn[k + kPlaceAhead];
        if (next >= 0 && next < num_nodes) __builtin_prefetch(place.data() + next);
      }
      const GlobalId v = drawn[k];
      check_drawn(v, static_cast<std::int64_t>(k), b.row_ptr, frontier, num_nodes);
      LocalId& at = place[static_cast<std::size_t>(v)];
      if (at == -1) {
        at = static_cast<LocalId>(b.src.size());
        b.src.push_back(v);
        marked = b.src; // b.src may have moved
      }
      b.col[k] = at;
    }
    stats.sampled_edges += b.edges();
    frontier = b.src;
    marked = frontier; // the same places: the next hop's frontier is this hop's sources
  }
  ++stats.batches;
  SampledBatch batch;
  batch.blocks = std::move(blocks);
  return batch;
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
  if (graph.rows() != graph.cols()) {
    throw DimensionMismatch("sample_blocks: the graph's adjacency must be square, got " +
                            graph.shape());
  }
  const Neighbours neighbours(graph, {});
  const NodeIndex index;
  SamplingStats stats;
  std::vector<LocalId> place(static_cast<std::size_t>(graph.rows()), -1);
  return sample_hops(neighbours, index, nullptr, graph.rows(), seeds, options, epoch, stats, place);
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

struct RankSampler::State {
  State(const RankGraph& g, const graph::Features& f, SamplerOptions o)
      : graph(g), features(&f), options(std::move(o)), neighbours(*g.adjacency, g.ids) {}

  RankGraph graph;
  const graph::Features* features;
  SamplerOptions options;
  Neighbours neighbours;
  NodeIndex index;
  std::int64_t n_owned = 0, width = 0;
  std::int64_t cached = 0;    // rows of `cache`; a cached node's index.row is its row there
  std::vector<LocalId> place; // [num_nodes] for sample_hops
  std::vector<float> cache;   // [cached rows, F]
  SamplingStats stats;
  // Reused by every call.
  std::vector<std::vector<GlobalId>> requests, asked;
  std::vector<std::vector<float>> rows_out, rows_in;
  std::vector<std::vector<std::size_t>> places;
  std::vector<std::int64_t> gather_rows; // gather_features: where each node's row comes from

  bool ranks() const { return graph.comm != nullptr && graph.comm->size() > 1; }

  /// Owned row r's features into `out` (F floats).
  void copy_owned(std::int64_t r, float* out) const {
    if (features->dense) {
      const float* from = features->dense->data() + r * width;
      std::copy(from, from + width, out);
      return;
    }
    std::fill(out, out + width, 0.0f);
    const Csr& s = *features->sparse;
    for (Offset k = s.row_ptr()[r]; k < s.row_ptr()[r + 1]; ++k)
      out[s.col()[k]] = s.val()[k];
  }

  /// Asks for the lines of owned row r's features ahead of copy_owned (dense features).
  void prefetch_owned(std::int64_t r) const {
    if (!features->dense) return;
    const char* line = reinterpret_cast<const char*>(features->dense->data() + r * width);
    for (std::int64_t b = 0; b < width * static_cast<std::int64_t>(sizeof(float)); b += 64)
      __builtin_prefetch(line + b);
  }

  /// The rows of `nodes` (owned by other ranks) from their owners into out[place[i]·F...], where
  /// place[i] is node i's row in `out`. Collective; every rank answers what it is asked.
  void fetch(std::span<const GlobalId> nodes, std::span<const std::size_t> place, float* out,
             std::int64_t* bytes, double* seconds) {
    const auto peers = static_cast<std::size_t>(graph.comm->size());
    requests.resize(peers);
    places.resize(peers);
    rows_out.resize(peers);
    for (std::size_t p = 0; p < peers; ++p) {
      requests[p].clear();
      places[p].clear();
    }
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const auto p = static_cast<std::size_t>(index.owner(nodes[i]));
      requests[p].push_back(nodes[i]);
      places[p].push_back(place[i]);
    }
    std::int64_t ignored = 0;
    double unclocked = 0.0;
    double& clock = seconds != nullptr ? *seconds : unclocked;
    exchange_lists(*graph.comm, requests, comm::tags::kFeatureRequests, asked, ignored, clock);
    for (std::size_t p = 0; p < peers; ++p) {
      const auto peer = static_cast<int>(p);
      const std::vector<GlobalId>& nodes_asked = asked[p];
      check_asked(nodes_asked, graph.num_nodes, peer, "features");
      rows_out[p].resize(nodes_asked.size() * static_cast<std::size_t>(width));
      for (std::size_t i = 0; i < nodes_asked.size(); ++i) {
        // The rows are random: the index entry and the row are asked for ahead.
        if (i + kEntryAhead < nodes_asked.size()) index.prefetch(nodes_asked[i + kEntryAhead]);
        if (i + kRowAhead < nodes_asked.size() && index.mine(nodes_asked[i + kRowAhead]))
          prefetch_owned(index.row(nodes_asked[i + kRowAhead]));
        if (!index.mine(nodes_asked[i])) not_asked_here(nodes_asked[i], peer, "features");
        copy_owned(index.row(nodes_asked[i]),
                   rows_out[p].data() + i * static_cast<std::size_t>(width));
      }
    }
    exchange_lists(*graph.comm, rows_out, comm::tags::kFeatureRows, rows_in,
                   bytes != nullptr ? *bytes : ignored, clock);
    for (std::size_t p = 0; p < peers; ++p) {
      if (rows_in[p].size() != places[p].size() * static_cast<std::size_t>(width)) {
        throw FormatError(fmt::format("rank {} sent {} feature values for {} rows of {}", p,
                                      rows_in[p].size(), places[p].size(), width));
      }
      for (std::size_t i = 0; i < places[p].size(); ++i) {
        std::copy_n(rows_in[p].data() + i * static_cast<std::size_t>(width), width,
                    out + places[p][i] * static_cast<std::size_t>(width));
      }
    }
  }
};

RankSampler::RankSampler(const RankGraph& graph, const graph::Features& features,
                         SamplerOptions options, std::size_t cache_bytes) {
  check_fanouts(options.fanouts);
  if (graph.adjacency == nullptr) throw InvalidArgument("RankSampler: no adjacency given");
  const Csr& a = *graph.adjacency;
  const bool one_process = graph.comm == nullptr;
  if (one_process && (!graph.ids.empty() || a.rows() != a.cols() || a.rows() != graph.num_nodes)) {
    throw InvalidArgument(fmt::format("RankSampler in one process: a [{0}, {0}] graph without "
                                      "ids, got {1} with {2} ids",
                                      graph.num_nodes, a.shape(), graph.ids.size()));
  }
  if (!one_process && static_cast<std::int64_t>(graph.ids.size()) != a.cols()) {
    throw DimensionMismatch(
        fmt::format("RankSampler: {} ids for a tile of {}", graph.ids.size(), a.shape()));
  }
  if (features.rows() < a.rows()) {
    throw DimensionMismatch(fmt::format("RankSampler: features of {} rows for {} owned nodes",
                                        features.rows(), a.rows()));
  }
  state_ = std::make_unique<State>(graph, features, std::move(options));
  State& s = *state_;
  s.n_owned = a.rows();
  s.width = features.cols();
  if (!one_process) {
    s.index = NodeIndex(*graph.comm, graph.ids.first(static_cast<std::size_t>(a.rows())),
                        graph.num_nodes);
  }
  if (!s.ranks()) return;
  // The hot-feature cache: the remote columns of this rank's rows by how many of its edges reach
  // them, as many as fit, fetched now (every rank takes part, with or without a cache).
  const auto row_bytes = static_cast<std::size_t>(s.width) * sizeof(float);
  std::vector<std::pair<std::int64_t, GlobalId>> hot; // (-edges, node)
  if (cache_bytes >= row_bytes && row_bytes > 0) {
    std::vector<std::int64_t> edges(static_cast<std::size_t>(a.cols() - a.rows()), 0);
    for (Offset k = 0; k < a.nnz(); ++k) {
      if (a.col()[k] >= a.rows()) ++edges[static_cast<std::size_t>(a.col()[k] - a.rows())];
    }
    for (std::size_t g = 0; g < edges.size(); ++g) {
      if (edges[g] > 0)
        hot.emplace_back(-edges[g], graph.ids[static_cast<std::size_t>(a.rows()) + g]);
    }
    const std::size_t keep = std::min(hot.size(), cache_bytes / row_bytes);
    std::partial_sort(hot.begin(), hot.begin() + static_cast<std::ptrdiff_t>(keep), hot.end());
    hot.resize(keep);
  }
  std::vector<GlobalId> nodes;
  std::vector<std::size_t> place;
  for (const auto& [minus_edges, v] : hot) {
    s.index.set_row(v, static_cast<std::int64_t>(nodes.size()));
    place.push_back(nodes.size());
    nodes.push_back(v);
  }
  s.cached = static_cast<std::int64_t>(nodes.size());
  s.cache.assign(nodes.size() * static_cast<std::size_t>(s.width), 0.0f);
  s.fetch(nodes, place, s.cache.data(), nullptr, nullptr);
}

RankSampler::~RankSampler() = default;

SampledBatch RankSampler::sample(std::span<const GlobalId> seeds, std::uint32_t epoch) {
  State& s = *state_;
  if (s.place.empty()) s.place.assign(static_cast<std::size_t>(s.graph.num_nodes), -1);
  return sample_hops(s.neighbours, s.index, s.ranks() ? s.graph.comm : nullptr, s.graph.num_nodes,
                     seeds, s.options, epoch, s.stats, s.place);
}

void RankSampler::gather_features(std::span<const GlobalId> nodes, std::vector<float>& out) {
  out.resize(nodes.size() * static_cast<std::size_t>(state_->width));
  gather_features(nodes, std::span<float>(out));
}

void RankSampler::gather_features(std::span<const GlobalId> nodes, std::span<float> out) {
  State& s = *state_;
  const auto width = static_cast<std::size_t>(s.width);
  if (out.size() != nodes.size() * width) {
    throw DimensionMismatch(fmt::format("gather_features: {} values for {} rows of {}", out.size(),
                                        nodes.size(), width));
  }
  std::vector<GlobalId> remote;
  std::vector<std::size_t> place;
  // Owned rows first, each row's lines fetched kRowAhead rows before it is copied: the rows lie
  // anywhere in the feature matrix, and one at a time each waits for memory.
  // rows[i]: node i's owned row (>= 0), its cache row c as -2 - c, or -1 (fetched).
  std::vector<std::int64_t>& rows = s.gather_rows;
  rows.resize(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (i + kEntryAhead < nodes.size()) s.index.prefetch(nodes[i + kEntryAhead]);
    const GlobalId v = nodes[i];
    if (v < 0 || v >= s.graph.num_nodes) {
      throw InvalidArgument(
          fmt::format("input node {} is not a node of the graph's {}", v, s.graph.num_nodes));
    }
    const std::int64_t row = s.index.row(v);
    rows[i] = s.index.mine(v) ? row : (row >= 0 ? -2 - row : -1);
  }
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (i + kRowAhead < nodes.size() && rows[i + kRowAhead] >= 0)
      s.prefetch_owned(rows[i + kRowAhead]);
    if (rows[i] >= 0) {
      s.copy_owned(rows[i], out.data() + i * width);
    } else if (rows[i] <= -2) {
      std::copy_n(s.cache.data() + static_cast<std::size_t>(-2 - rows[i]) * width, width,
                  out.data() + i * width);
      ++s.stats.cache_hits;
    } else {
      remote.push_back(nodes[i]);
      place.push_back(i);
    }
  }
  s.stats.input_rows += static_cast<std::int64_t>(nodes.size());
  s.stats.fetched_rows += static_cast<std::int64_t>(remote.size());
  if (s.ranks()) {
    s.fetch(remote, place, out.data(), &s.stats.feature_bytes, &s.stats.feature_exchange_seconds);
  }
}

std::int64_t RankSampler::owned_row(GlobalId v) const {
  const State& s = *state_;
  if (v < 0 || v >= s.graph.num_nodes || !s.index.mine(v)) return -1;
  return s.index.row(v);
}

GlobalId RankSampler::global_id(std::int64_t r) const {
  const State& s = *state_;
  return s.graph.ids.empty() ? static_cast<GlobalId>(r) : s.graph.ids[static_cast<std::size_t>(r)];
}

std::int64_t RankSampler::num_owned() const noexcept {
  return state_->n_owned;
}
comm::Communicator* RankSampler::comm() const noexcept {
  return state_->graph.comm;
}
void RankSampler::use_communicator(comm::Communicator* comm) {
  State& s = *state_;
  if (!comm) throw InvalidArgument("the sampler was given no communicator");
  const int size = s.graph.comm != nullptr ? s.graph.comm->size() : 1;
  const int rank = s.graph.comm != nullptr ? s.graph.comm->rank() : 0;
  if (comm->size() != size || comm->rank() != rank) {
    throw InvalidArgument(fmt::format("the sampler's communicator is rank {} of {}, the one "
                                      "given rank {} of {}: give one over the same ranks",
                                      rank, size, comm->rank(), comm->size()));
  }
  s.graph.comm = comm;
}
std::int64_t RankSampler::feature_width() const noexcept {
  return state_->width;
}
std::int64_t RankSampler::cached_rows() const noexcept {
  return state_->cached;
}
std::size_t RankSampler::cache_bytes() const noexcept {
  return state_->cache.size() * sizeof(float);
}
const SamplingStats& RankSampler::stats() const noexcept {
  return state_->stats;
}

} // namespace tessera::gnn
