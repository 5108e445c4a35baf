// Step 1 of a training job: load or receive this rank's tile, order it, plan its halo and
// fetch the ghost input rows once.
#include "job_graph.hpp"

#include "feature_range.hpp"
#include "model_memory.hpp"
#include "tessera/comm/halo_exchange.hpp"
#include "tessera/comm/tags.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/datasets/row_block.hpp"
#include "tessera/ops/ops.hpp"
#include "tessera/partition/distributed.hpp"
#include "tessera/partition/store.hpp"

#include <exception>
#include <fmt/core.h>
#include <string>
#include <vector>

namespace tessera::runtime {

namespace {

/// Refuses data that cannot be trained on, naming the dataset and what it holds: whole (in
/// memory) or a store's part (every part of a store has the dataset's node count, feature width
/// and class count).
void check_trainable(const std::string& dataset, std::int64_t num_nodes,
                     const graph::Features& features, bool labelled, std::int32_t num_classes) {
  if (features.cols() == 0) {
    throw InvalidArgument("dataset '" + dataset +
                          "' has no node features; it can be partitioned but not trained on");
  }
  if (!labelled) {
    throw InvalidArgument("dataset '" + dataset + "' has no class labels to train on");
  }
  if (num_nodes < 2) {
    throw InvalidArgument(fmt::format("dataset '{}' has {} node{}: at least 2 are needed to train",
                                      dataset, num_nodes, num_nodes == 1 ? "" : "s"));
  }
  if (num_classes < 2) {
    throw InvalidArgument(
        fmt::format("dataset '{}' has {} class{}: at least 2 are needed to train a classifier",
                    dataset, num_classes, num_classes == 1 ? "" : "es"));
  }
}

std::string describe(const datasets::Dataset& d, double seconds) {
  return fmt::format("dataset {}: {} nodes, {} edges, {} features ({}), {} classes, split "
                     "{}/{}/{} ({:.2f} s)",
                     d.name, d.num_nodes, d.adjacency.nnz() / 2, d.features.cols(),
                     d.features.is_sparse() ? "sparse" : "dense", d.num_classes, d.train_idx.size(),
                     d.val_idx.size(), d.test_idx.size(), seconds);
}

/// The bytes of `text` and back, for broadcasts.
std::vector<std::byte> to_bytes(const std::string& text) {
  const auto* p = reinterpret_cast<const std::byte*>(text.data());
  return {p, p + text.size()};
}
std::string to_text(const std::vector<std::byte>& bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

/// `root`'s `texts` on every rank (any bytes in them: each goes with its length). Collective.
void broadcast_texts(comm::Communicator& comm, std::vector<std::string>& texts, int root) {
  std::string packed;
  for (const std::string& text : texts)
    packed += std::to_string(text.size()) + ":" + text;
  std::vector<std::byte> bytes = to_bytes(packed);
  comm.broadcast(bytes, root);
  packed = to_text(bytes);
  texts.clear();
  for (std::size_t at = 0; at < packed.size();) {
    const std::size_t colon = packed.find(':', at);
    const std::size_t length = std::stoul(packed.substr(at, colon - at));
    texts.push_back(packed.substr(colon + 1, length));
    at = colon + 1 + length;
  }
}

/// The options rank 0 cuts the graph with for the job's ranks: the job's, balanced for
/// `targets` when set.
partition::Options cut_options(const TrainJob& job, int ranks, std::int64_t feature_width,
                               const BalanceTargets* targets) {
  partition::Options options = job.partition;
  options.num_parts = ranks;
  options.feature_width = feature_width;
  if (targets != nullptr) {
    options.part_weights = targets->speeds;
    options.vertex_weight = partition::VertexWeight::Cost;
    options.row_cost = targets->row_cost;
    options.balance = job.balance;
  }
  return options;
}

/// Rank 0 sends every other rank its tile of `parts` and returns its own; `bytes` receives what
/// it sent.
partition::LocalGraph hand_out_tiles(comm::Communicator& comm, const datasets::Dataset& data,
                                     const partition::Partition& parts, std::int64_t& bytes) {
  bytes = 0;
  ProgressStage progress("sending tiles", comm.size() - 1, "tiles");
  for (int q = 1; q < comm.size(); ++q) {
    std::vector<std::byte> tile =
        partition::tile_to_bytes(partition::build_local_graph(data, parts, q));
    bytes += static_cast<std::int64_t>(tile.size());
    comm.send(std::move(tile), q, comm::tags::kTiles);
    progress.advance(q);
  }
  return partition::build_local_graph(data, parts, 0);
}

/// Every rank measures its speed for the model's widths (`widths`: the data's feature width and
/// class count, the same on every rank) and the ranks agree on what to balance the parts for.
/// Collective.
BalanceTargets balance_targets(const TrainJob& job, comm::Communicator& comm,
                               const std::vector<std::int64_t>& widths, const Balancing& balancing,
                               const Log& say) {
  const std::vector<std::int64_t> sizes = job.shape.resolve(widths[0], widths[1]);
  const Stopwatch clock;
  BalanceTargets targets = measure_balance_targets(comm, balancing.backend, sizes, job.model.order,
                                                   job.rank_speeds, balancing.slowdown);
  const std::string speeds = speeds_text(targets.speeds);
  say(job.balance == partition::Balance::Given
          ? fmt::format("balance given: rank speeds {}; a row costs {:.1f} nonzeros (cost model, "
                        "measured in {:.2f} s)",
                        speeds, targets.row_cost, clock.seconds())
          : fmt::format("balance measured: rank speeds {} (cost model on a probe graph, {:.2f} s; "
                        "--balance given --rank-speeds {} skips measuring); a row costs {:.1f} "
                        "nonzeros",
                        speeds, clock.seconds(), speeds, targets.row_cost));
  return targets;
}

/// "partitioned NAME into P tiles with METHOD in S s: halo volume ...".
std::string cut_summary(const std::string& name, int ranks, const std::string& method,
                        double seconds, const partition::Quality& quality) {
  return fmt::format("partitioned {} into {} tiles with {} in {:.2f} s: halo volume {} rows per "
                     "exchange ({:.3f} of a 1D broadcast)",
                     name, ranks, method, seconds, quality.total_volume,
                     quality.broadcast_volume == 0
                         ? 0.0
                         : static_cast<double>(quality.total_volume) /
                               static_cast<double>(quality.broadcast_volume));
}

/// Rank 0 cuts `data` for the job's ranks (balanced for `targets` when set) and says how well.
partition::Partition cut(const TrainJob& job, int ranks, const datasets::Dataset& data,
                         const BalanceTargets* targets, const Log& say) {
  const partition::Options options = cut_options(job, ranks, data.features.cols(), targets);
  const Stopwatch clock;
  partition::Partition parts = partition::partition_graph(data.adjacency, options);
  say(cut_summary(data.name, ranks, partition::to_string(options.method), clock.seconds(),
                  partition::measure(data.adjacency, parts)));
  return parts;
}

/// Whether the job records or checks the data's checksum: checkpoints name the data they hold a
/// model of, and a resumed run must train the same data.
bool needs_checksum(const TrainJob& job) {
  return !job.checkpoint_dir.empty() || !job.resume_dir.empty();
}

/// A split seed for data that has its own split would be ignored: refused, naming the split.
[[noreturn]] void refuse_split_seed(const datasets::Dataset& data) {
  throw InvalidArgument(fmt::format(
      "a split seed (--split-seed) draws a random split, but dataset '{}' has its own ({} / {} / "
      "{} train / val / test nodes): drop the split seed",
      data.name, data.train_idx.size(), data.val_idx.size(), data.test_idx.size()));
}

/// Rank 0 loads the whole graph and, for several ranks, partitions it (balanced for the ranks'
/// speeds with job.balance) and sends every other rank its tile; the others receive theirs.
/// Only rank 0 ever holds the whole graph, and keeps it when balancing.keep_graph. A dataset
/// rank 0 cannot load, train on or cut fails on every rank.
partition::LocalGraph tile_in_memory(const TrainJob& job, comm::Communicator& comm,
                                     const BackendPtr& host, JobGraph& g, const Log& say,
                                     Balancing& balancing) {
  datasets::Dataset data;
  std::exception_ptr failure;
  std::int64_t drawn = 0;
  std::string checksum;
  if (comm.rank() == 0) {
    try {
      const Stopwatch clock;
      data = datasets::load_dataset(host, job.dataset, job.load);
      check_trainable(data.name, data.num_nodes, data.features, data.has_labels(),
                      data.num_classes);
      const std::uint64_t split_seed = job.split_seed.value_or(job.train.seed);
      if (datasets::use_default_split_when_missing(data, split_seed)) {
        drawn = 1;
        say(fmt::format("no published split: using a random 60/20/20 split (split seed {})",
                        split_seed));
      } else if (job.split_seed) {
        refuse_split_seed(data);
      }
      say(describe(data, clock.seconds()));
      if (needs_checksum(job)) checksum = partition::dataset_checksum(data);
    } catch (const std::exception&) {
      failure = std::current_exception();
    }
  }
  share_failure(comm, 0, failure, "could not prepare the dataset");
  std::vector<std::string> facts{data.name, checksum, data.origin.features,
                                 data.row_normalize ? "1" : "0"};
  broadcast_texts(comm, facts, 0);
  g.dataset = facts[0];
  g.dataset_checksum = facts[1];
  g.feature_source = facts[2];
  g.recipe_row_normalize = facts[3] == "1";
  comm.allreduce_sum(std::span<std::int64_t>(&drawn, 1));
  g.split_drawn = drawn != 0;
  if (comm.size() == 1) return partition::whole_graph_tile(std::move(data));

  if (job.balance != partition::Balance::None) {
    std::vector<std::int64_t> widths{0, 0}; // rank 0's feature width and class count
    if (comm.rank() == 0) widths = {data.features.cols(), data.num_classes};
    comm.allreduce_sum(std::span<std::int64_t>(widths));
    balancing.targets = balance_targets(job, comm, widths, balancing, say);
  }
  partition::Partition parts;
  if (comm.rank() == 0) {
    try {
      parts = cut(job, comm.size(), data, balancing.targets ? &*balancing.targets : nullptr, say);
    } catch (const std::exception&) {
      failure = std::current_exception();
    }
  }
  share_failure(comm, 0, failure, "could not partition the dataset");
  if (comm.rank() != 0)
    return partition::tile_from_bytes(host, comm.receive(0, comm::tags::kTiles));
  std::int64_t bytes = 0;
  partition::LocalGraph tile = hand_out_tiles(comm, data, parts, bytes);
  if (balancing.keep_graph) {
    balancing.whole = std::move(data);
    balancing.parts = std::move(parts);
  }
  return tile;
}

/// Every rank reads only its share of the rows (datasets::load_dataset_share), the ranks cut the
/// graph together (partition::partition_rows: ParMETIS from PT-Scotch) and each assembles its own
/// tile from the rows the others send it: no rank ever holds the whole graph. The data must carry
/// its split (drawing the default one needs every labelled node in one place). A rank that cannot
/// read its rows fails every rank.
partition::LocalGraph tile_from_rows(const TrainJob& job, comm::Communicator& comm,
                                     const BackendPtr& host, JobGraph& g, const Log& say,
                                     Balancing& balancing) {
  datasets::RowBlock block;
  std::exception_ptr failure;
  const Stopwatch clock;
  try {
    block = datasets::load_dataset_share(host, job.dataset, job.load, comm.rank(), comm.size());
    check_trainable(block.name, block.num_nodes, block.features, !block.labels.empty(),
                    block.num_classes);
  } catch (const std::exception&) {
    failure = std::current_exception();
  }
  share_first_failure(comm, failure, "could not read its rows of the dataset");
  g.dataset = block.name;
  g.feature_source = "dataset '" + block.name + "' (its feature width)";
  g.recipe_row_normalize = block.row_normalize;
  std::vector<std::int64_t> split{static_cast<std::int64_t>(block.train_idx.size()),
                                  static_cast<std::int64_t>(block.val_idx.size()),
                                  static_cast<std::int64_t>(block.test_idx.size()),
                                  block.row_ptr.back()};
  const auto symmetry = datasets::symmetry_sums(block);
  split.insert(split.end(), symmetry.begin(), symmetry.end());
  comm.allreduce_sum(std::span<std::int64_t>(split));
  datasets::check_symmetry_sums(std::span(split).last(2), block.name);
  if (split[0] == 0) {
    throw InvalidArgument(fmt::format(
        "dataset '{}' has no split, and --partition-method {} reads the rows on every rank: "
        "drawing the default random split needs every labelled node in one place; save the data "
        "with its split (tessera-convert --add-split) or use another --partition-method",
        block.name, partition::to_string(job.partition.method)));
  }
  if (job.split_seed) {
    throw InvalidArgument(fmt::format(
        "a split seed (--split-seed) draws a random split, but with --partition-method {} "
        "every rank reads dataset '{}' with its own split: drop the split seed (tessera-convert "
        "--add-split --split-seed S stores a drawn one)",
        partition::to_string(job.partition.method), block.name));
  }
  say(fmt::format("dataset {}: {} nodes, {} edges, {} features ({}), {} classes, split {}/{}/{}; "
                  "each rank read its {} rows ({:.2f} s)",
                  block.name, block.num_nodes, split[3] / 2, block.features.cols(),
                  block.features.is_sparse() ? "sparse" : "dense", block.num_classes, split[0],
                  split[1], split[2], block.rows.size(), clock.seconds()));
  if (job.balance != partition::Balance::None) {
    balancing.targets =
        balance_targets(job, comm, {block.features.cols(), block.num_classes}, balancing, say);
  }
  const partition::Options options = cut_options(job, comm.size(), block.features.cols(),
                                                 balancing.targets ? &*balancing.targets : nullptr);
  if (needs_checksum(job)) g.dataset_checksum = partition::dataset_checksum(block, comm);
  const Stopwatch cut_clock;
  const std::vector<std::int32_t> owner = partition::partition_rows(block, options, comm);
  partition::LocalGraph tile = partition::build_tile_from_rows(host, std::move(block), owner, comm);
  say(cut_summary(g.dataset, comm.size(),
                  partition::to_string(job.partition.method) + " (every rank its rows)",
                  cut_clock.seconds(), partition::measure_tiles(tile, comm)));
  return tile;
}

/// Where a rank's tile came from, for messages, and the dataset checksum it was cut from (0 for
/// tiles cut in memory: rank 0 cut them all from one graph).
struct TileSource {
  std::string file;
  std::uint32_t dataset_crc = 0;
};

/// A 64-bit hash of a vertex id (the splitmix64 finalizer).
std::uint64_t id_hash(std::int64_t id) noexcept {
  auto x = static_cast<std::uint64_t>(id) + 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// The tiles of a store own every vertex once: each rank sums a hash of its owned ids and
/// subtracts that of its share of [0, N), and the sums over all ranks vanish exactly when the
/// owned ids are [0, N) once each (up to a 2^-64 chance; 32 bits per sum, so none overflows).
/// A part whose owned_ids.bin was edited and re-sealed (a vertex owned twice, another by no
/// one) is refused on every rank. Collective.
void check_owned_cover(comm::Communicator& comm, const partition::LocalGraph& tile,
                       const std::string& store) {
  std::int64_t sums[2] = {0, 0};
  const auto add = [&](std::int64_t id, std::int64_t sign) {
    const std::uint64_t h = id_hash(id);
    sums[0] += sign * static_cast<std::int64_t>(h >> 32);
    sums[1] += sign * static_cast<std::int64_t>(h & 0xFFFFFFFFull);
  };
  for (const GlobalId id : tile.owned_ids)
    add(id, 1);
  const datasets::RowRange share =
      datasets::row_share(tile.num_global_nodes, comm.rank(), comm.size());
  for (std::int64_t id = share.first; id < share.last; ++id)
    add(id, -1);
  comm.allreduce_sum(std::span<std::int64_t>(sums));
  if (sums[0] != 0 || sums[1] != 0) {
    throw FormatError(fmt::format(
        "partition store '{}': its parts' owned ids do not cover the graph's {} vertices once "
        "each (a vertex owned by two parts, or by none): its owned_ids.bin files were edited or "
        "come from different stores",
        store, tile.num_global_nodes));
  }
}

/// Refuses a store that was not cut from the job's --dataset: rank 0 loads the dataset and
/// hashes it as write_store did, every rank compares the result with the manifest. A store is
/// otherwise matched by name only, and another graph saved under the same name would train.
/// Collective over `comm` (one broadcast from rank 0, also when rank 0 fails to load).
void check_store_matches_dataset(const TrainJob& job, comm::Communicator& comm,
                                 const partition::Manifest& manifest, const BackendPtr& host) {
  std::string checksum;
  std::exception_ptr failure;
  if (comm.rank() == 0) {
    try {
      checksum = partition::dataset_checksum(datasets::load_dataset(host, job.dataset, job.load));
    } catch (const std::exception&) {
      failure = std::current_exception();
    }
  }
  share_failure(comm, 0, failure,
                "could not load --dataset " + job.dataset + " to check partition store '" +
                    job.partition_dir + "' against it");
  std::vector<std::byte> bytes = to_bytes(checksum);
  comm.broadcast(bytes, 0);
  checksum = to_text(bytes);
  if (checksum != manifest.dataset_checksum) {
    const std::string data_dir =
        job.load.data_dir.empty() ? datasets::default_data_dir() : job.load.data_dir;
    throw InvalidArgument(fmt::format(
        "partition store '{}' was cut from a graph with checksum {} (dataset '{}' in its "
        "manifest); --dataset {} (data dir '{}') has checksum {}: they are different graphs. "
        "Re-create the store from this data, or omit --dataset to train on the store's",
        job.partition_dir, manifest.dataset_checksum, manifest.dataset, job.dataset, data_dir,
        checksum));
  }
}

/// This rank's part of the job's partition store (refused when made for another rank count) and
/// its manifest. A --dataset given with the store is matched by what identifies the data, its
/// checksum (check_store_matches_dataset), not by its display name: a store cut from npz:FILE
/// records the file's stem, and the same spec must still match it. Not collective: a failure
/// here is reported on every rank by check_job_facts.
partition::LocalGraph tile_from_store(const TrainJob& job, const comm::Communicator& comm,
                                      partition::Manifest& manifest, TileSource& source,
                                      const Log& say) {
  manifest = partition::read_manifest(job.partition_dir);
  source.file = partition::part_description_path(job.partition_dir, comm.rank());
  source.dataset_crc =
      static_cast<std::uint32_t>(std::stoul(manifest.dataset_checksum, nullptr, 16));
  const Stopwatch clock;
  partition::LocalGraph tile = partition::load_part(job.partition_dir, comm.rank(), comm.size());
  say(fmt::format("partition store {}: dataset {} ({} nodes) in {} parts by {}; rank 0 read its "
                  "part in {:.2f} s",
                  job.partition_dir, manifest.dataset, manifest.num_nodes, manifest.num_parts,
                  manifest.method, clock.seconds()));
  if (manifest.balance != "none") {
    say(fmt::format("partition store {} was cut for rank speeds {} (balance {}); this job's ranks "
                    "may run at other speeds: the parts' sizes change how fast it trains, not "
                    "what it computes",
                    job.partition_dir, speeds_text(manifest.rank_speeds), manifest.balance));
  }
  return tile;
}

/// The facts of a tile that must be the same on every rank of a job (and its part, which must be
/// the rank), in the order they are compared.
enum Fact : std::size_t {
  kLoaded,
  kPart,
  kNumParts,
  kNumGlobalNodes,
  kDatasetChecksum,
  kNumClasses,
  kLabelled,
  kFeatureKind,
  kFeatureWidth,
  kNumFacts
};
constexpr const char* kFactNames[kNumFacts] = {
    "loaded",      "part",   "num_parts",    "num_global_nodes", "dataset_checksum",
    "num_classes", "labels", "feature_kind", "feature_width"};

/// The value held by most ranks (the lowest rank's on a tie): what the odd ranks are named
/// against.
std::int64_t majority(const std::vector<std::int64_t>& facts, int ranks, std::size_t fact) {
  std::int64_t best = facts[fact];
  int best_count = 0;
  for (int r = 0; r < ranks; ++r) {
    const std::int64_t v = facts[r * kNumFacts + fact];
    int count = 0;
    for (int q = 0; q < ranks; ++q)
      count += facts[q * kNumFacts + fact] == v;
    if (count > best_count) best = v, best_count = count;
  }
  return best;
}

std::string fact_text(std::size_t fact, std::int64_t value) {
  if (fact == kDatasetChecksum) return fmt::format("{:08x}", value);
  if (fact == kFeatureKind) return value == 1 ? "dense" : value == 2 ? "sparse" : "none";
  if (fact == kLabelled) return value != 0 ? "present" : "absent";
  return std::to_string(value);
}

/// Every rank's tile belongs to one job: loaded, part = rank, and the same part count, graph
/// size, dataset, classes, labels and features on every rank. Checked with one collective before
/// any exchange, so a rank whose part could not be loaded or came from another store makes every
/// rank throw the same error (naming that rank and its file) instead of one rank failing while
/// the others wait, or mismatched messages (MPI_ERR_TRUNCATE). `failure` is this rank's load
/// error, if any (rethrown here). Collective over `comm`.
void check_job_facts(comm::Communicator& comm, const partition::LocalGraph* tile,
                     const TileSource& source, const std::exception_ptr& failure) {
  const int ranks = comm.size(), me = comm.rank();
  std::vector<std::int64_t> facts(static_cast<std::size_t>(ranks) * kNumFacts, 0);
  std::int64_t* mine = facts.data() + static_cast<std::size_t>(me) * kNumFacts;
  if (!failure) {
    mine[kLoaded] = 1;
    mine[kPart] = tile->part;
    mine[kNumParts] = tile->num_parts;
    mine[kNumGlobalNodes] = tile->num_global_nodes;
    mine[kDatasetChecksum] = source.dataset_crc;
    mine[kNumClasses] = tile->num_classes;
    mine[kLabelled] = tile->labels.empty() ? 0 : 1;
    mine[kFeatureKind] = tile->features.dense ? 1 : tile->features.sparse ? 2 : 0;
    mine[kFeatureWidth] = tile->features.cols();
  }
  comm.allreduce_sum(facts); // an allgather: each rank filled only its own row
  const auto fact = [&](int rank, std::size_t f) { return facts[rank * kNumFacts + f]; };
  // Only on a failure: every rank knows the same failing rank, so these broadcasts match.
  const auto file_of = [&](int rank) {
    std::vector<std::byte> bytes = to_bytes(source.file);
    comm.broadcast(bytes, rank);
    return to_text(bytes);
  };

  for (int r = 0; r < ranks; ++r) {
    if (fact(r, kLoaded) == 0) {
      share_failure(comm, r, r == me ? failure : nullptr,
                    "could not load its part, so no rank trains");
    }
  }
  for (int r = 0; r < ranks; ++r) {
    if (fact(r, kPart) != r || fact(r, kNumParts) != ranks) {
      const std::string file = file_of(r);
      throw FormatError(fmt::format("rank {} ({}) holds part {} of {}, but this job has {} ranks",
                                    r, file, fact(r, kPart), fact(r, kNumParts), ranks));
    }
  }
  for (std::size_t f = kNumGlobalNodes; f < kNumFacts; ++f) {
    const std::int64_t agreed = majority(facts, ranks, f);
    int odd = -1, holder = -1;
    for (int r = ranks - 1; r >= 0; --r) {
      if (fact(r, f) != agreed) odd = r;
      if (fact(r, f) == agreed) holder = r;
    }
    if (odd < 0) continue;
    const std::string odd_file = file_of(odd), holder_file = file_of(holder);
    throw FormatError(fmt::format(
        "the ranks' tiles disagree on {}: rank {} ({}) has {}, rank {} ({}) has {}; every part "
        "of a job must come from the same store",
        kFactNames[f], odd, odd_file, fact_text(f, fact(odd, f)), holder, holder_file,
        fact_text(f, agreed)));
  }
}

/// The layer-0 input: owned rows followed (with the cache) by the ghost rows, fetched once here
/// and reused by every epoch: [n_owned (+ n_ghost), F]. Sparse features stay sparse when
/// cached (or on one rank); otherwise they are made dense, as layer 0 then gathers rows every
/// epoch. Features that need no ghost rows are taken over, not copied.
graph::Features input_features(partition::LocalGraph& tile,
                               const std::shared_ptr<comm::Communicator>& comm,
                               const std::shared_ptr<const comm::HaloPlan>& plan,
                               const BackendPtr& host, bool cache, comm::HaloStats& fetch) {
  graph::Features out;
  // Point-to-point only: a rank with no ghost and no reader of its rows may skip the fetch.
  const bool exchanges = plan->n_ghost() > 0 || plan->num_send_rows() > 0;
  if (tile.features.sparse && (cache || comm->size() == 1)) {
    out.sparse = exchanges ? comm::gather_sparse_rows(*comm, *plan, *tile.features.sparse, &fetch)
                           : std::move(*tile.features.sparse);
    return out;
  }
  const std::int64_t n_owned = tile.n_owned(), f = tile.features.cols();
  const std::int64_t rows = cache ? plan->n_local() : n_owned;
  Dense x;
  if (tile.features.dense && rows == n_owned) {
    x = std::move(*tile.features.dense);
  } else {
    x = Dense::zeros(host, rows, f);
    if (tile.features.dense) {
      ops::copy(*host, tile.features.dense->cview(), x.view().slice_rows(0, n_owned));
    } else {
      const Csr& s = *tile.features.sparse;
      for (std::int64_t r = 0; r < n_owned; ++r) {
        for (Offset k = s.row_ptr()[r]; k < s.row_ptr()[r + 1]; ++k)
          x(r, s.col()[k]) = s.val()[k];
      }
    }
  }
  if (cache && exchanges) {
    comm::HaloExchange<float> once(comm, plan, host, comm::tags::kFeatures);
    once.gather(x.view());
    fetch = once.stats();
  }
  out.dense = std::move(x);
  return out;
}

} // namespace

namespace {

/// check_model_memory for the job's model on this tile: its rows, its widths, and its input
/// features when they are or will be dense. Skipped with a disk tier (--offload-dir), which can
/// hold more than memory.
/// A ghost row's degree (what normalises its column) is its owner's degree of that vertex. A tile
/// records both; one exchange of the owned degrees checks them, so a tile whose degree.bin was
/// edited (and its store re-sealed), or came from another store, is refused on every rank
/// instead of training on another graph's normalisation. Collective.
void check_ghost_degrees(const std::shared_ptr<comm::Communicator>& comm,
                         const std::shared_ptr<const comm::HaloPlan>& plan, const BackendPtr& host,
                         const partition::LocalGraph& tile) {
  DenseT<double> degree(host, plan->n_local(), 1);
  for (std::int64_t r = 0; r < tile.n_owned(); ++r)
    degree.data()[r] = static_cast<double>(tile.degree[static_cast<std::size_t>(r)]);
  comm::HaloExchange<double>(comm, plan, host, comm::tags::kGhostDegrees).gather(degree.view());
  std::exception_ptr failure;
  for (std::int64_t g = 0; g < tile.n_ghost() && !failure; ++g) {
    const std::int64_t row = tile.n_owned() + g;
    const auto stored = tile.degree[static_cast<std::size_t>(row)];
    if (static_cast<double>(stored) != degree.data()[row]) {
      failure = std::make_exception_ptr(FormatError(fmt::format(
          "part {}: ghost row {} (global id {}) has degree {} in its degree.bin, but rank {}, "
          "which owns the vertex, gives it degree {}: the tiles are not of one graph (a part "
          "edited, or from another store)",
          tile.part, row, tile.ghost_ids[static_cast<std::size_t>(g)], stored,
          tile.ghost_owner[static_cast<std::size_t>(g)], degree.data()[row])));
    }
  }
  share_first_failure(*comm, failure, "holds a ghost degree its owner does not");
}

void check_tile_memory(const TrainJob& job, const JobGraph& g) {
  if (!job.offload.offload_dir.empty()) return;
  const partition::LocalGraph& tile = g.tile;
  const std::vector<std::int64_t>& asked = job.shape.layer_sizes;
  if (!asked.empty() && (asked.front() != tile.features.cols() || asked.back() != tile.num_classes))
    return; // refused where the model is built, in the words of the job (a checkpoint's, say)
  const std::vector<std::int64_t> sizes = job.shape.resolve(tile.features.cols(), tile.num_classes);
  const double rows = static_cast<double>(tile.n_owned() + tile.n_ghost());
  const bool dense = tile.features.dense || job.feature_layout == graph::FeatureLayout::Dense;
  const double input_bytes =
      dense ? rows * static_cast<double>(tile.features.cols()) * sizeof(float) : 0.0;
  check_model_memory(sizes, tile.n_owned() + tile.n_ghost(), input_bytes,
                     {g.feature_source, job.shape.layer_sizes.empty() ? "--hidden" : "--layers",
                      "dataset '" + g.dataset + "'"});
}

/// Stores the tile's features as `layout` asks, dense or sparse the same on every rank: by the
/// density of the whole matrix (every rank's owned rows; collective), so P ranks train what one
/// process trains. Records the density and the layout in `g`.
void choose_feature_layout(graph::FeatureLayout layout, comm::Communicator& comm, JobGraph& g) {
  graph::Features& f = g.tile.features;
  std::int64_t counts[] = {f.sparse ? f.sparse->nnz() : 0, f.rows() * f.cols(), 0};
  if (f.dense) {
    for (std::int64_t i = 0; i < f.dense->size(); ++i)
      counts[2] += f.dense->data()[i] != 0.0f ? 1 : 0;
  }
  comm.allreduce_sum(std::span<std::int64_t>(counts));
  const std::int64_t nonzeros = counts[0] + counts[2];
  g.feature_density =
      counts[1] > 0 ? static_cast<double>(nonzeros) / static_cast<double>(counts[1]) : 0.0;
  if (f.rows() == 0 && f.cols() == 0) return;
  const bool dense = graph::stores_dense(layout, f.is_sparse(), g.feature_density);
  if (dense != f.is_sparse()) return; // already stored that way
  f = graph::with_layout(f, dense);
  g.features_converted = true;
}

/// The rest of a rank's graph once its tile is checked: normalized features in the layout
/// job.feature_layout chooses, interior rows first, the halo plan and the layer-0 input.
/// Collective (the layout's density, the plan and the ghost rows).
void prepare_tile(const TrainJob& job, const std::shared_ptr<comm::Communicator>& comm,
                  const BackendPtr& host, JobGraph& g) {
  check_trainable(g.dataset, g.tile.num_global_nodes, g.tile.features, !g.tile.labels.empty(),
                  g.tile.num_classes);
  // Before the layout below densifies the features or a model is built: a width from a file
  // or a flag that no memory holds is refused naming it. Each rank checks its tile; one that
  // cannot hold it fails every rank.
  std::exception_ptr failure;
  try {
    check_tile_memory(job, g);
  } catch (...) {
    failure = std::current_exception();
  }
  share_first_failure(*comm, failure, "cannot hold the model");
  g.row_normalized = job.normalize_features.value_or(g.recipe_row_normalize);
  if (g.row_normalized) datasets::row_normalize_features(g.tile.features);
  double largest[] = {max_abs_feature(g.tile.features)};
  comm->allreduce_max(std::span<double>(largest));
  g.feature_max_abs = largest[0];
  choose_feature_layout(job.feature_layout, *comm, g);
  const Stopwatch clock;
  g.n_interior = partition::order_interior_first(g.tile);
  g.plan = std::make_shared<const comm::HaloPlan>(
      comm::HaloPlan::build(*comm, g.tile.owned_ids, g.tile.ghost_ids, g.tile.ghost_owner));
  check_ghost_degrees(comm, g.plan, host, g.tile);
  g.features =
      input_features(g.tile, comm, g.plan, host, job.cache_input_features, g.feature_fetch);
  g.tile.features = {};
  g.setup_s = clock.seconds();
}

} // namespace

bool cut_from_rows(const TrainJob& job, int ranks) {
  return job.partition.method == partition::Method::PtScotch ||
         (job.partition.method == partition::Method::Hypergraph && ranks > 1);
}

JobGraph get_job_graph(const TrainJob& job, const std::shared_ptr<comm::Communicator>& comm,
                       const BackendPtr& host, const Log& say, Balancing& balancing) {
  JobGraph g;
  const Stopwatch clock;
  TileSource source;
  std::exception_ptr failure;
  partition::Manifest manifest;
  if (job.partition_dir.empty() && cut_from_rows(job, comm->size())) {
    g.tile = tile_from_rows(job, *comm, host, g, say, balancing);
    source.file = "the tile rank " + std::to_string(comm->rank()) + " assembled";
  } else if (job.partition_dir.empty()) {
    g.tile = tile_in_memory(job, *comm, host, g, say, balancing);
    source.file = "the tile rank 0 cut from dataset '" + g.dataset + "'";
  } else {
    // A part that fails to load is reported by every rank (check_job_facts), not by one while
    // the others wait in the first exchange.
    try {
      g.tile = tile_from_store(job, *comm, manifest, source, say);
      g.dataset = manifest.dataset;
      g.dataset_checksum = manifest.dataset_checksum;
      g.recipe_row_normalize = manifest.row_normalize;
      g.feature_source = source.file + " (feature_width)";
    } catch (const std::exception&) {
      failure = std::current_exception();
    }
  }
  check_job_facts(*comm, &g.tile, source, failure);
  if (!job.partition_dir.empty()) check_owned_cover(*comm, g.tile, job.partition_dir);
  // Every rank now holds the same manifest (its dataset checksum is one of the facts).
  if (!job.partition_dir.empty() && !job.dataset.empty()) {
    check_store_matches_dataset(job, *comm, manifest, host);
  }
  g.load_s = clock.seconds();
  prepare_tile(job, comm, host, g);
  if (g.features_converted) {
    const bool automatic = job.feature_layout == graph::FeatureLayout::Auto;
    say(fmt::format(
        "features {:.1f} % nonzero: stored {} ({})", 100.0 * g.feature_density,
        g.features.is_sparse() ? "sparse" : "dense",
        automatic
            ? fmt::format("dense trains faster from {:.0f} %", 100.0 * graph::kDenseFeatureDensity)
            : fmt::format("--feature-layout {}", graph::to_string(job.feature_layout))));
  }
  return g;
}

JobGraph recut_job_graph(const TrainJob& job, const std::shared_ptr<comm::Communicator>& comm,
                         const BackendPtr& host, Balancing& balancing,
                         const std::vector<double>& shares, RebalanceStep& step) {
  JobGraph g;
  const Stopwatch clock;
  std::exception_ptr failure;
  partition::Partition parts;
  // Rows whose owner changed, tile bytes sent, and the data's normalization recipe.
  std::vector<std::int64_t> moved{0, 0, 0};
  if (comm->rank() == 0) {
    try {
      if (!balancing.whole || !balancing.targets) {
        throw Error("recut_job_graph: rank 0 did not keep the graph to cut again");
      }
      BalanceTargets targets = *balancing.targets;
      targets.speeds = shares;
      parts = cut(job, comm->size(), *balancing.whole, &targets, [](const std::string&) {});
      for (std::size_t v = 0; v < parts.owner.size(); ++v)
        moved[0] += parts.owner[v] != balancing.parts.owner[v];
      moved[2] = balancing.whole->row_normalize ? 1 : 0;
    } catch (const std::exception&) {
      failure = std::current_exception();
    }
  }
  share_failure(*comm, 0, failure, "could not cut the graph again");
  if (comm->rank() == 0) {
    g.tile = hand_out_tiles(*comm, *balancing.whole, parts, moved[1]);
    g.dataset = balancing.whole->name;
    balancing.parts = std::move(parts);
  } else {
    g.tile = partition::tile_from_bytes(host, comm->receive(0, comm::tags::kTiles));
  }
  comm->allreduce_sum(std::span<std::int64_t>(moved)); // rank 0's counts, to every rank
  std::vector<std::byte> name = to_bytes(g.dataset);
  comm->broadcast(name, 0);
  g.dataset = to_text(name);
  step.rows_moved = moved[0];
  step.bytes_moved = moved[1];
  g.recipe_row_normalize = moved[2] != 0;
  TileSource source;
  source.file = "the tile rank 0 cut again from dataset '" + g.dataset + "'";
  check_job_facts(*comm, &g.tile, source, nullptr);
  g.load_s = clock.seconds();
  prepare_tile(job, comm, host, g);
  return g;
}

} // namespace tessera::runtime
