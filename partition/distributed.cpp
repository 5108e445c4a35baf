// Partitioning where no rank holds the whole graph: PT-Scotch's distributed k-way (64-bit ids) and
// the baselines over row blocks, rows moved to their owners in one all-to-all, tiles assembled
// where they are trained, and their quality measured from the tiles.
#include "tessera/partition/distributed.hpp"

#include "byte_stream.hpp"
#include "collectives.hpp"
#include "hypergraph.hpp"
#include "methods.hpp"
#include "mpi_scope.hpp"
#include "owned_rows.hpp"
#include "quality_counts.hpp"
#include "tessera/comm/failure.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/progress.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio> // scotch.h names FILE
#include <cstdlib>
#include <exception>
#include <fmt/core.h>
#include <fmt/format.h>
#include <numeric>
#include <optional>
#include <scotch-int64/ptscotch.h>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace tessera::partition {

namespace {

static_assert(std::is_same_v<SCOTCH_Num, std::int64_t>,
              "PT-Scotch must be the 64-bit build (scotch-int64)");

// Tags of the exchanges below, apart from the training's.
constexpr int kRowsTag = 7101;
constexpr int kAskTag = 7102;
constexpr int kAnswerTag = 7103;
/// The heaviest part may weigh 5 % above its target (ParMETIS's advice; METIS cuts to 3 %).
constexpr float kImbalance = 1.05f;

/// Sends send[p] to every rank p and returns what each rank sent here, in rank order. Collective.
std::vector<std::vector<std::byte>> exchange(std::vector<std::vector<std::byte>>&& send,
                                             comm::Communicator& comm, int tag) {
  const int ranks = comm.size();
  const int me = comm.rank();
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(ranks));
  for (int p = 0; p < ranks; ++p)
    sizes[p] = static_cast<std::int64_t>(send[p].size());
  const std::vector<std::int64_t> incoming = comm.alltoall(sizes);
  std::vector<std::vector<std::byte>> received(static_cast<std::size_t>(ranks));
  std::vector<comm::SendMessage> sends;
  std::vector<comm::RecvMessage> recvs;
  for (int p = 0; p < ranks; ++p) {
    if (p == me) {
      received[p] = std::move(send[p]);
      continue;
    }
    received[p].resize(static_cast<std::size_t>(incoming[p]));
    if (!send[p].empty()) sends.push_back({p, send[p]});
    if (!received[p].empty()) recvs.push_back({p, received[p]});
  }
  comm.start_exchange(sends, recvs, tag)->wait();
  return received;
}

std::int64_t row_degree(const datasets::RowBlock& block, std::int64_t i) {
  std::int64_t degree = 0;
  for (Offset k = block.row_ptr[i]; k < block.row_ptr[i + 1]; ++k)
    degree += block.col[k] != block.rows.first + i;
  return degree;
}

void check_block(const datasets::RowBlock& block, const Options& options,
                 comm::Communicator& comm) {
  if (options.num_parts != comm.size()) {
    throw InvalidArgument(fmt::format("distributed partitioning cuts one part per rank: {} parts "
                                      "asked of {} ranks",
                                      options.num_parts, comm.size()));
  }
  const std::int64_t n = block.rows.size();
  if (static_cast<std::int64_t>(block.row_ptr.size()) != n + 1 || block.row_ptr.front() != 0 ||
      block.row_ptr.back() != static_cast<std::int64_t>(block.col.size())) {
    throw InvalidArgument(fmt::format("rank {}: a block of {} rows needs {} row pointers from 0 "
                                      "to its {} columns",
                                      comm.rank(), n, n + 1, block.col.size()));
  }
  // PT-Scotch reads neighbour ids unchecked: one out of range crashes it.
  for (std::int64_t i = 0; i < n; ++i) {
    if (block.row_ptr[i + 1] < block.row_ptr[i]) {
      throw InvalidArgument(
          fmt::format("rank {}: row {} ends before it starts", comm.rank(), block.rows.first + i));
    }
    for (Offset k = block.row_ptr[i]; k < block.row_ptr[i + 1]; ++k) {
      if (block.col[k] < 0 || block.col[k] >= block.num_nodes) {
        throw InvalidArgument(fmt::format("rank {}: row {} names neighbour {}, outside [0, {})",
                                          comm.rank(), block.rows.first + i, block.col[k],
                                          block.num_nodes));
      }
    }
  }
  const datasets::RowRange share = datasets::row_share(block.num_nodes, comm.rank(), comm.size());
  if (block.rows.first != share.first || block.rows.last != share.last) {
    throw InvalidArgument(fmt::format("rank {} holds rows [{}, {}), not its share [{}, {}) of {}",
                                      comm.rank(), block.rows.first, block.rows.last, share.first,
                                      share.last, block.num_nodes));
  }
}

/// [n] weight of each row of the block (detail::vertex_weight).
std::vector<std::int64_t> row_weights(const datasets::RowBlock& block, const Options& options) {
  std::vector<std::int64_t> weights(static_cast<std::size_t>(block.rows.size()));
  for (std::int64_t i = 0; i < block.rows.size(); ++i)
    weights[i] = detail::vertex_weight(row_degree(block, i), options);
  return weights;
}

/// Initializes MPI if nothing has; throws InvalidArgument unless `comm` spans MPI_COMM_WORLD, on
/// which `library` runs.
void require_world(comm::Communicator& comm, const char* library) {
  detail::ensure_mpi();
  if (detail::mpi_size(MPI_COMM_WORLD) != comm.size()) {
    throw InvalidArgument(fmt::format("{} runs on MPI_COMM_WORLD ({} ranks), the job's "
                                      "communicator has {}",
                                      library, detail::mpi_size(MPI_COMM_WORLD), comm.size()));
  }
}

std::vector<std::int32_t> ptscotch_owner(const datasets::RowBlock& block, const Options& options,
                                         comm::Communicator& comm) {
  require_world(comm, "PT-Scotch");
  detail::DistGraph g;
  g.vtxdist.push_back(0);
  for (int r = 0; r < comm.size(); ++r)
    g.vtxdist.push_back(datasets::row_share(block.num_nodes, r, comm.size()).last);
  g.adjncy.reserve(block.col.size());
  for (std::int64_t i = 0; i < block.rows.size(); ++i) {
    for (Offset k = block.row_ptr[i]; k < block.row_ptr[i + 1]; ++k) {
      if (block.col[k] != block.rows.first + i) g.adjncy.push_back(block.col[k]);
    }
    g.xadj.push_back(static_cast<std::int64_t>(g.adjncy.size()));
  }
  if (options.vertex_weight != VertexWeight::Uniform) g.vwgt = row_weights(block, options);
  std::vector<std::int32_t> owner;
  const auto status = detail::scotch_part(g, options, MPI_COMM_WORLD, owner);
  const std::vector<std::int64_t> statuses =
      detail::allgather(static_cast<std::int64_t>(status), comm);
  std::vector<std::string> failed;
  for (int r = 0; r < comm.size(); ++r) {
    const auto failure = static_cast<detail::ScotchStatus>(statuses[r]);
    if (failure != detail::ScotchStatus::Ok)
      failed.push_back(fmt::format("{} on rank {}", detail::scotch_call(failure), r));
  }
  if (!failed.empty()) {
    throw PartitionerError(fmt::format("PT-Scotch (nodes={}, parts={}) failed: {} (Scotch printed "
                                       "the reason above)",
                                       block.num_nodes, options.num_parts,
                                       fmt::join(failed, ", ")));
  }
  return owner;
}

/// Zoltan PHG over the ranks' rows; a failure on any rank fails every rank naming it.
std::vector<std::int32_t> hypergraph_owner(const datasets::RowBlock& block, const Options& options,
                                           comm::Communicator& comm) {
  require_world(comm, "Zoltan");
  std::vector<std::int64_t> nonzeros{block.row_ptr.back()};
  comm.allreduce_sum(nonzeros);
  std::vector<std::int32_t> owner;
  std::exception_ptr failure;
  try {
    owner = detail::hypergraph_owner_rows(block, options, row_weights(block, options),
                                          MPI_COMM_WORLD, nonzeros[0]);
  } catch (const std::exception&) {
    failure = std::current_exception();
  }
  comm::share_first_failure(comm, failure, "could not cut its rows with Zoltan PHG");
  return owner;
}

/// The block method's ranges (detail::block_begins) from the ranks' rows: the cumulative weight
/// at each row comes from every rank's weight total, and begins[p] counts the rows whose
/// midpoint lies below part p's target, summed over the ranks.
std::vector<std::int32_t> block_owner(const datasets::RowBlock& block, const Options& options,
                                      comm::Communicator& comm) {
  const auto weights = row_weights(block, options);
  const std::int64_t mine = std::accumulate(weights.begin(), weights.end(), std::int64_t{0});
  const std::vector<std::int64_t> totals = detail::allgather(mine, comm);
  const std::int64_t before =
      std::accumulate(totals.begin(), totals.begin() + comm.rank(), std::int64_t{0});
  const double total =
      static_cast<double>(std::accumulate(totals.begin(), totals.end(), std::int64_t{0}));
  std::vector<double> midpoint(weights.size());
  std::int64_t prefix = before;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    midpoint[i] = 0.5 * static_cast<double>(prefix + prefix + weights[i]);
    prefix += weights[i];
  }
  const std::vector<double> targets = detail::block_targets(options, total);
  std::vector<std::int64_t> below(targets.size());
  for (std::size_t p = 0; p < targets.size(); ++p) {
    below[p] = std::lower_bound(midpoint.begin(), midpoint.end(), targets[p]) - midpoint.begin();
  }
  comm.allreduce_sum(below);
  const std::vector<std::int64_t> begin =
      detail::block_begins(below, block.num_nodes, options.num_parts);
  std::vector<std::int32_t> owner(weights.size());
  for (std::size_t i = 0; i < owner.size(); ++i) {
    const GlobalId v = block.rows.first + static_cast<GlobalId>(i);
    owner[i] = static_cast<std::int32_t>(std::upper_bound(begin.begin(), begin.end(), v) -
                                         begin.begin() - 1);
  }
  return owner;
}

/// partition_graph's fill_empty_parts over the ranks: each empty part takes the highest-id row
/// of the then-largest part, wherever it is.
void fill_empty_parts(std::vector<std::int32_t>& owner, const datasets::RowBlock& block, int parts,
                      comm::Communicator& comm) {
  std::vector<std::int64_t> count(static_cast<std::size_t>(parts), 0);
  for (const std::int32_t p : owner)
    ++count[p];
  comm.allreduce_sum(count);
  for (int empty = 0; empty < parts; ++empty) {
    if (count[empty] != 0) continue;
    const auto largest =
        static_cast<std::int32_t>(std::max_element(count.begin(), count.end()) - count.begin());
    std::int64_t highest = -1;
    for (std::int64_t i = static_cast<std::int64_t>(owner.size()) - 1; i >= 0; --i) {
      if (owner[i] == largest) {
        highest = block.rows.first + i;
        break;
      }
    }
    const std::vector<std::int64_t> all = detail::allgather(highest, comm);
    const std::int64_t v = *std::max_element(all.begin(), all.end());
    if (v >= block.rows.first && v < block.rows.last) owner[v - block.rows.first] = empty;
    --count[largest];
    ++count[empty];
  }
}

// ---- rows to their owners -------------------------------------------------------------------

/// The rows `which` of `block` as bytes: ids, row lengths, neighbours, degrees, labels, split
/// flags, features. Written straight into one buffer of the exact size: the block's share of a
/// large graph is copied once.
std::vector<std::byte> rows_to_bytes(const datasets::RowBlock& block,
                                     const std::vector<std::int64_t>& which,
                                     const std::vector<std::uint8_t>& split) {
  const auto rows = static_cast<std::int64_t>(which.size());
  const Dense* dense = block.features.dense ? &*block.features.dense : nullptr;
  const Csr* sparse = block.features.sparse ? &*block.features.sparse : nullptr;
  std::int64_t nonzeros = 0, feature_nonzeros = 0;
  for (const std::int64_t i : which) {
    nonzeros += block.row_ptr[i + 1] - block.row_ptr[i];
    if (sparse) feature_nonzeros += sparse->row_ptr()[i + 1] - sparse->row_ptr()[i];
  }
  const std::int64_t labels = block.labels.empty() ? 0 : rows;
  const std::int64_t dense_values = dense ? rows * dense->cols() : 0;
  const std::int64_t sparse_rows = sparse ? rows : 0;
  detail::Writer w;
  w.reserve(static_cast<std::size_t>(10 * 8 + rows * (3 * 8 + 1) + nonzeros * 8 + labels * 4 +
                                     dense_values * 4 + sparse_rows * 8 + feature_nonzeros * 8));
  w.value(rows); // ids
  for (const std::int64_t i : which)
    w.value<GlobalId>(block.rows.first + i);
  w.value(rows); // row lengths
  for (const std::int64_t i : which)
    w.value<std::int64_t>(block.row_ptr[i + 1] - block.row_ptr[i]);
  w.value(nonzeros); // neighbours
  for (const std::int64_t i : which)
    w.items(block.col.data() + block.row_ptr[i], block.row_ptr[i + 1] - block.row_ptr[i]);
  w.value(rows); // degrees
  for (const std::int64_t i : which)
    w.value(row_degree(block, i));
  w.value(labels);
  for (std::int64_t j = 0; j < labels; ++j)
    w.value(block.labels[which[j]]);
  w.value(rows); // split flags
  for (const std::int64_t i : which)
    w.value(split[i]);
  w.value(dense_values);
  if (dense) {
    for (const std::int64_t i : which)
      w.items(dense->data() + i * dense->cols(), dense->cols());
  }
  w.value(sparse_rows); // sparse features: row lengths, columns, values
  for (std::int64_t j = 0; j < sparse_rows; ++j)
    w.value<std::int64_t>(sparse->row_ptr()[which[j] + 1] - sparse->row_ptr()[which[j]]);
  for (const bool values : {false, true}) {
    w.value(feature_nonzeros);
    for (std::int64_t j = 0; j < sparse_rows; ++j) {
      const Offset begin = sparse->row_ptr()[which[j]];
      const Offset length = sparse->row_ptr()[which[j] + 1] - begin;
      if (values) {
        w.items(sparse->val() + begin, length);
      } else {
        w.items(sparse->col() + begin, length);
      }
    }
  }
  return w.take();
}

/// The rows every rank sent this one, in rank order: ascending global ids, since each rank sends
/// its rows in order and ranks hold ascending ranges. Each part is freed once read, and the rows
/// are read into buffers sized beforehand: this rank holds its rows about twice at most.
detail::OwnedRows rows_from_bytes(const BackendPtr& backend,
                                  std::vector<std::vector<std::byte>>&& received,
                                  const datasets::RowBlock& block) {
  // Sizes first: rows and neighbours of every part (the first and third arrays).
  std::int64_t n = 0, nonzeros = 0;
  for (std::size_t p = 0; p < received.size(); ++p) {
    detail::Reader r(backend, received[p], fmt::format("rows from rank {}", p));
    n += r.skip<GlobalId>();
    r.skip<std::int64_t>();
    nonzeros += r.skip<GlobalId>();
  }
  detail::OwnedRows rows;
  rows.ids.reserve(static_cast<std::size_t>(n));
  rows.row_ptr.reserve(static_cast<std::size_t>(n) + 1);
  rows.col.reserve(static_cast<std::size_t>(nonzeros));
  rows.degree.reserve(static_cast<std::size_t>(n));
  rows.split.reserve(static_cast<std::size_t>(n));
  const Dense* dense = block.features.dense ? &*block.features.dense : nullptr;
  std::optional<Dense> x;
  if (dense) x.emplace(backend, n, dense->cols());
  std::vector<float> feature_val;
  std::vector<std::int64_t> feature_lengths;
  std::vector<std::int32_t> feature_col;
  std::int64_t row = 0;
  for (std::size_t p = 0; p < received.size(); ++p) {
    detail::Reader r(backend, received[p], fmt::format("rows from rank {}", p));
    r.append_to(rows.ids);
    for (const std::int64_t length : r.vector<std::int64_t>())
      rows.row_ptr.push_back(rows.row_ptr.back() + length);
    r.append_to(rows.col);
    r.append_to(rows.degree);
    r.append_to(rows.labels);
    r.append_to(rows.split);
    const auto part_rows = static_cast<std::int64_t>(rows.ids.size()) - row;
    if (x) {
      r.array(x->data() + row * x->cols(), part_rows * x->cols());
    } else {
      r.skip<float>(); // no dense features: an empty array
    }
    r.append_to(feature_lengths);
    r.append_to(feature_col);
    r.append_to(feature_val);
    r.expect_end();
    row += part_rows;
    std::vector<std::byte>().swap(received[p]);
  }
  rows.val.assign(rows.col.size(), 1.0f); // the adjacency's values are 1
  if (x) {
    rows.features.dense = std::move(*x);
  } else if (block.features.sparse) {
    Csr features(backend, n, block.features.sparse->cols(),
                 static_cast<std::int64_t>(feature_col.size()));
    std::partial_sum(feature_lengths.begin(), feature_lengths.end(), features.row_ptr() + 1);
    std::copy(feature_col.begin(), feature_col.end(), features.col());
    std::copy(feature_val.begin(), feature_val.end(), features.val());
    rows.features.sparse = std::move(features);
  }
  return rows;
}

/// Frees the block's neighbours, labels and feature values once they are serialized, before the
/// exchange doubles what this rank holds; keeps the row range and the feature layout.
void release_payload(const BackendPtr& backend, datasets::RowBlock& block) {
  std::vector<GlobalId>().swap(block.col);
  std::vector<std::int32_t>().swap(block.labels);
  if (block.features.dense) {
    block.features.dense = Dense(backend, 0, block.features.dense->cols());
  } else if (block.features.sparse) {
    block.features.sparse = Csr(backend, 0, block.features.sparse->cols(), 0);
  }
}

/// SplitBit flags of the block's rows.
std::vector<std::uint8_t> split_flags(const datasets::RowBlock& block) {
  std::vector<std::uint8_t> flags(static_cast<std::size_t>(block.rows.size()), 0);
  for (const auto& [split, bit] :
       {std::pair{&block.train_idx, detail::kTrain}, std::pair{&block.val_idx, detail::kVal},
        std::pair{&block.test_idx, detail::kTest}}) {
    for (const GlobalId v : *split)
      flags[v - block.rows.first] |= bit;
  }
  return flags;
}

/// Owners and degrees of `ids` (ascending), asked of the ranks that hold their rows; `owner` and
/// `degrees` are those of this rank's rows of `block`. Collective.
void look_up_ghosts(std::span<const GlobalId> ids, const datasets::RowBlock& block,
                    std::span<const std::int32_t> owner, std::span<const std::int64_t> degrees,
                    comm::Communicator& comm, std::vector<std::int32_t>& ghost_owner,
                    std::vector<std::int64_t>& degree) {
  const int ranks = comm.size();
  std::vector<std::vector<GlobalId>> asked(static_cast<std::size_t>(ranks));
  for (const GlobalId v : ids)
    asked[datasets::row_share_rank(v, block.num_nodes, ranks)].push_back(v);
  std::vector<std::vector<std::byte>> questions(static_cast<std::size_t>(ranks));
  for (int p = 0; p < ranks; ++p) {
    detail::Writer w;
    w.vector(asked[p]);
    questions[p] = w.take();
  }
  const auto received = exchange(std::move(questions), comm, kAskTag);
  std::vector<std::vector<std::byte>> answers(static_cast<std::size_t>(ranks));
  for (int p = 0; p < ranks; ++p) {
    detail::Reader r(nullptr, received[p], fmt::format("ghost questions from rank {}", p));
    std::vector<std::int32_t> owners;
    std::vector<std::int64_t> answer_degrees;
    for (const GlobalId v : r.vector<GlobalId>()) {
      if (v < block.rows.first || v >= block.rows.last) {
        throw InvalidArgument(fmt::format("rank {} asked rank {} about row {}, outside its rows "
                                          "[{}, {})",
                                          p, comm.rank(), v, block.rows.first, block.rows.last));
      }
      owners.push_back(owner[v - block.rows.first]);
      answer_degrees.push_back(degrees[v - block.rows.first]);
    }
    r.expect_end();
    detail::Writer w;
    w.vector(owners);
    w.vector(answer_degrees);
    answers[p] = w.take();
  }
  const auto replies = exchange(std::move(answers), comm, kAnswerTag);
  // ids are ascending and home ranks ascend with them: the answers come back in order.
  for (int p = 0; p < ranks; ++p) {
    detail::Reader r(nullptr, replies[p], fmt::format("ghost answers from rank {}", p));
    r.append_to(ghost_owner);
    r.append_to(degree);
    r.expect_end();
  }
}

} // namespace

namespace detail {

bool is_strategy_string(const std::string& strategy) {
  return strategy.find('{') != std::string::npos;
}

std::int64_t scotch_strategy_flags(const std::string& strategy) {
  if (strategy.empty()) return SCOTCH_STRATSPEED;
  constexpr std::pair<std::string_view, SCOTCH_Num> kFlags[] = {
      {"speed", SCOTCH_STRATSPEED},
      {"quality", SCOTCH_STRATQUALITY},
      {"balance", SCOTCH_STRATBALANCE},
      {"safety", SCOTCH_STRATSAFETY},
      {"scalability", SCOTCH_STRATSCALABILITY}};
  SCOTCH_Num flags = 0;
  std::string_view rest = strategy;
  while (true) {
    const std::size_t plus = rest.find('+');
    const std::string_view name = rest.substr(0, plus);
    const auto* flag = std::find_if(std::begin(kFlags), std::end(kFlags),
                                    [&](const auto& entry) { return entry.first == name; });
    if (flag == std::end(kFlags)) {
      throw InvalidArgument(fmt::format("PT-Scotch strategy '{}': '{}' is no strategy flag (speed, "
                                        "quality, balance, safety, scalability, joined by '+'), "
                                        "and a strategy string holds a '{{'",
                                        strategy, name));
    }
    flags |= flag->second;
    if (plus == std::string_view::npos) return flags;
    rest.remove_prefix(plus + 1);
  }
}

const char* scotch_call(ScotchStatus status) {
  switch (status) {
  case ScotchStatus::Ok:
    return "";
  case ScotchStatus::GraphBuild:
    return "SCOTCH_dgraphBuild";
  case ScotchStatus::Strategy:
    return "SCOTCH_stratDgraphMap (the strategy)";
  case ScotchStatus::Architecture:
    return "SCOTCH_archCmpltw";
  case ScotchStatus::Map:
    return "SCOTCH_dgraphMap";
  case ScotchStatus::PartUnset:
    return "SCOTCH_dgraphMap (a vertex left without a part)";
  }
  return "SCOTCH";
}

ScotchStatus scotch_part(DistGraph& graph, const Options& options, MPI_Comm comm,
                         std::vector<std::int32_t>& owner) {
  const auto n = static_cast<SCOTCH_Num>(graph.xadj.size() - 1);
  const auto edges = static_cast<SCOTCH_Num>(graph.adjncy.size());
  const SCOTCH_Num parts = options.num_parts;
  // Part weights: the target shares as small integers. Large ones (shares * 10^6 as they are)
  // make Scotch's mapping onto the weighted architecture twice as slow.
  std::vector<SCOTCH_Num> weights;
  SCOTCH_Num divisor = 0;
  for (const double share : target_shares(options)) {
    weights.push_back(std::max<SCOTCH_Num>(1, std::llround(share * 1e6)));
    divisor = std::gcd(divisor, weights.back());
  }
  for (SCOTCH_Num& w : weights)
    w /= divisor;
  int processes = 1;
  MPI_Comm_size(comm, &processes);
  // The same graph and options give the same parts every call only with one thread per process
  // (Scotch's threaded coarsening races) and the random state started over from the seed. The
  // thread count is read from the environment, unless the user set it.
  ::setenv("SCOTCH_PTHREAD_NUMBER", "1", /*overwrite=*/0);
  SCOTCH_randomSeed(static_cast<SCOTCH_Num>(options.seed & 0x7FFFFFFF));
  SCOTCH_randomReset();
  // -1: no part yet; a vertex Scotch leaves without one is a failure, whatever it returned.
  std::vector<SCOTCH_Num> part(static_cast<std::size_t>(std::max<SCOTCH_Num>(n, 1)), -1);
  ScotchStatus status = ScotchStatus::GraphBuild;
  SCOTCH_Dgraph dgraph;
  if (SCOTCH_dgraphInit(&dgraph, comm) != 0) return status;
  SCOTCH_Strat strategy;
  SCOTCH_stratInit(&strategy);
  SCOTCH_Arch arch;
  SCOTCH_archInit(&arch);
  if (SCOTCH_dgraphBuild(&dgraph, /*baseval=*/0, n, n, graph.xadj.data(), /*vendloctab=*/nullptr,
                         graph.vwgt.empty() ? nullptr : graph.vwgt.data(), /*vlblloctab=*/nullptr,
                         edges, edges, graph.adjncy.data(), /*edgegsttab=*/nullptr,
                         /*edloloctab=*/nullptr) != 0) {
    status = ScotchStatus::GraphBuild;
  } else if (is_strategy_string(options.scotch_strategy)
                 ? SCOTCH_stratDgraphMap(&strategy, options.scotch_strategy.c_str()) != 0
                 : SCOTCH_stratDgraphMapBuild(&strategy,
                                              scotch_strategy_flags(options.scotch_strategy),
                                              processes, parts, kImbalance - 1.0) != 0) {
    status = ScotchStatus::Strategy;
  } else if (SCOTCH_archCmpltw(&arch, parts, weights.data()) != 0) {
    status = ScotchStatus::Architecture;
  } else if (SCOTCH_dgraphMap(&dgraph, &arch, &strategy, part.data()) != 0) {
    status = ScotchStatus::Map;
  } else {
    status = ScotchStatus::Ok;
  }
  SCOTCH_archExit(&arch);
  SCOTCH_stratExit(&strategy);
  SCOTCH_dgraphExit(&dgraph);
  if (status != ScotchStatus::Ok) return status;
  owner.resize(static_cast<std::size_t>(n));
  for (SCOTCH_Num i = 0; i < n; ++i) {
    if (part[i] < 0 || part[i] >= parts) return ScotchStatus::PartUnset;
    owner[i] = static_cast<std::int32_t>(part[i]);
  }
  return ScotchStatus::Ok;
}

} // namespace detail

std::vector<std::int32_t> partition_rows(const datasets::RowBlock& block, const Options& options,
                                         comm::Communicator& comm) {
  detail::validate_options(block.num_nodes, options);
  std::exception_ptr failure;
  try {
    check_block(block, options, comm);
  } catch (const std::exception&) {
    failure = std::current_exception();
  }
  comm::share_first_failure(comm, failure, "holds rows that cannot be cut");
  if (options.num_parts == 1) return std::vector<std::int32_t>(block.row_ptr.size() - 1, 0);
  const ProgressStage progress("partitioning " + std::to_string(block.num_nodes) + " nodes into " +
                               std::to_string(options.num_parts) + " parts (" +
                               to_string(options.method) + ", distributed)");
  std::vector<std::int32_t> owner;
  switch (options.method) {
  case Method::PtScotch:
    owner = ptscotch_owner(block, options, comm);
    break;
  case Method::Block:
    owner = block_owner(block, options, comm);
    break;
  case Method::Random:
    owner = detail::random_owner(block.rows.first, block.rows.last, options);
    break;
  case Method::Hypergraph:
    owner = hypergraph_owner(block, options, comm);
    break;
  default:
    throw InvalidArgument(fmt::format("{} has no distributed form; use ptscotch, hypergraph, "
                                      "block or random (or partition on one rank)",
                                      to_string(options.method)));
  }
  fill_empty_parts(owner, block, options.num_parts, comm);
  return owner;
}

LocalGraph build_tile_from_rows(const BackendPtr& backend, datasets::RowBlock&& block,
                                std::span<const std::int32_t> owner, comm::Communicator& comm,
                                Reorder reorder) {
  const int ranks = comm.size();
  if (static_cast<std::int64_t>(owner.size()) != block.rows.size()) {
    throw InvalidArgument(fmt::format("build_tile_from_rows: {} owners for {} rows", owner.size(),
                                      block.rows.size()));
  }
  std::vector<std::vector<std::int64_t>> which(static_cast<std::size_t>(ranks));
  for (std::int64_t i = 0; i < block.rows.size(); ++i) {
    if (owner[i] < 0 || owner[i] >= ranks) {
      throw InvalidArgument(fmt::format("build_tile_from_rows: row {} has owner {}, outside [0, "
                                        "{})",
                                        block.rows.first + i, owner[i], ranks));
    }
    which[owner[i]].push_back(i);
  }
  std::vector<std::int64_t> degrees(static_cast<std::size_t>(block.rows.size()));
  for (std::int64_t i = 0; i < block.rows.size(); ++i)
    degrees[i] = row_degree(block, i);
  std::vector<std::vector<std::byte>> outgoing(static_cast<std::size_t>(ranks));
  {
    const std::vector<std::uint8_t> split = split_flags(block);
    for (int p = 0; p < ranks; ++p)
      outgoing[p] = rows_to_bytes(block, which[p], split);
  }
  release_payload(backend, block);
  detail::OwnedRows rows =
      rows_from_bytes(backend, exchange(std::move(outgoing), comm, kRowsTag), block);
  const auto lookup = [&](std::span<const GlobalId> ids, std::vector<std::int32_t>& ghost_owner,
                          std::vector<std::int64_t>& degree) {
    look_up_ghosts(ids, block, owner, degrees, comm, ghost_owner, degree);
  };
  return detail::assemble_tile(backend, std::move(rows), comm.rank(), ranks, block.num_nodes,
                               block.num_classes, lookup, reorder);
}

Quality measure_tiles(const LocalGraph& tile, comm::Communicator& comm) {
  const auto parts = static_cast<std::size_t>(comm.size());
  const auto me = static_cast<std::size_t>(comm.rank());
  std::vector<std::int64_t> nodes(parts, 0), nonzeros(parts, 0), send(parts, 0), recv(parts, 0);
  nodes[me] = tile.n_owned();
  nonzeros[me] = tile.adjacency.nnz();
  recv[me] = tile.n_ghost();
  for (const std::int32_t q : tile.ghost_owner)
    ++send[q]; // q sends that ghost row here
  std::vector<std::int64_t> cut{0};
  const Csr& a = tile.adjacency;
  for (Offset k = 0; k < a.nnz(); ++k)
    cut[0] += a.col()[k] >= tile.n_owned();
  for (auto* counts : {&nodes, &nonzeros, &send, &recv, &cut})
    comm.allreduce_sum(*counts);
  // Every cut edge is stored twice, once in each endpoint's part.
  return detail::summarize_quality(comm.size(), tile.num_global_nodes, cut[0] / 2, std::move(nodes),
                                   std::move(nonzeros), std::move(send), std::move(recv));
}

} // namespace tessera::partition
