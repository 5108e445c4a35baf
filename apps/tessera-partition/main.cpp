// tessera-partition: load a dataset, cut it into P parts (METIS, ParMETIS, Zoltan or a baseline),
// print the partition's quality (optionally for every method side by side) and write a partition
// store. Under mpirun (--method ptscotch, hypergraph, block or random) every rank reads only its
// share of the rows, the ranks cut the graph together and each writes its own part of the store.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fmt/core.h>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tessera/tessera.hpp>
#include <utility>
#include <vector>

namespace {

namespace tp = tessera::partition;

struct Flags {
  std::string dataset;
  std::string data_dir = tessera::datasets::default_data_dir();
  int parts = 2;
  std::string method; // empty: metis in one process, hypergraph under mpirun
  std::string vertex_weights = "uniform";
  std::string objective = "cut";
  std::string part_weights;
  std::string balance = "none";
  std::string rank_speeds;
  double row_cost = 0.0;
  std::uint64_t seed = 0;
  std::optional<std::uint64_t> split_seed; // not given: seed
  std::string reorder = "none";
  bool compare = false;
  std::string out;
  bool force = false;
  bool allow_split_overlap = false;
  std::vector<std::string> zoltan_params;
  std::string scotch_strategy;
};

void add_flags(CLI::App& app, Flags& f) {
  tessera::runtime::start_everyday_flags(app);
  tessera::runtime::add_path_option(
      app, "--dataset", f.dataset,
      "name under --data-dir (cora, slashdot, 4elt, ...), FORMAT:PATH (npz:, snap:, "
      "metis:, ...) or a generator (rmat:scale=S,..., sbm:nodes=N,...)")
      ->required();
  tessera::runtime::add_path_option(app, "--data-dir", f.data_dir,
                                    "folder of named datasets ($TESSERA_DATA_DIR)")
      ->capture_default_str();
  tessera::runtime::add_integer_option(app, "--parts", f.parts, 1, 1 << 20, "number of parts P")
      ->required();
  app.add_option("--method", f.method,
                 "metis, metis-recursive, block, random, hypergraph (Zoltan PHG: minimizes the "
                 "rows a halo exchange moves) or ptscotch (PT-Scotch's distributed k-way; parmetis "
                 "is its old name). Under "
                 "mpirun -np P with --parts P (all but metis) every rank reads only its "
                 "rows and writes its own part of --out. Default: metis in one process, "
                 "hypergraph under mpirun");
  app.add_option("--vertex-weights", f.vertex_weights,
                 "uniform, degree (degree + 1), compute (degree + feature width) or cost "
                 "(degree + 1 + --row-cost)")
      ->capture_default_str();
  app.add_option("--objective", f.objective,
                 "what METIS k-way minimizes: cut (edges between parts) or volume (rows a halo "
                 "exchange moves; about 2x slower)")
      ->capture_default_str();
  app.add_option("--part-weights", f.part_weights,
                 "target share of each part, e.g. 2,1,1,1 (default: equal)");
  tessera::runtime::add_number_option(
      app, "--row-cost", f.row_cost, 0, false, 1e9,
      "with --vertex-weights cost: what a row costs beyond its nonzeros, in nonzeros "
      "(tessera-train --balance prints the cost model's)")
      ->capture_default_str();
  app.add_option("--balance", f.balance,
                 "none, or given: part p's share follows the speed of the rank that will load "
                 "it (--rank-speeds), recorded in the store (measured speeds come from a "
                 "tessera-train --balance measured run, which prints them)")
      ->capture_default_str();
  app.add_option("--rank-speeds", f.rank_speeds,
                 "with --balance given: each rank's speed, e.g. 1,1,0.5,0.25 (one per part)");
  tessera::runtime::add_seed_option(
      app, "--split-seed", f.split_seed,
      "seed of the random 60/20/20 split drawn for data without one (default: --seed)");
  tessera::runtime::add_seed_option(app, "--seed", f.seed,
                                    "seed of METIS, Zoltan, the random baseline and the split")
      ->capture_default_str();
  tessera::runtime::add_split_overlap_flag(app, f.allow_split_overlap);
  app.add_option("--reorder", f.reorder, "reordering of each tile's owned rows in the store")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "rcm"}));
  app.add_flag("--compare", f.compare, "partition with every method and print one row each");
  tessera::runtime::add_path_option(
      app, "--out", f.out,
      "write the partition store (of --method) to this folder: a new or empty one, "
      "or an existing store with --force");
  app.add_flag("--force", f.force, "replace the partition store already in --out");
  app.add_option("--zoltan-param", f.zoltan_params,
                 "with --method hypergraph: a Zoltan parameter NAME=VALUE set after Tessera's own "
                 "(repeatable), e.g. LB_METHOD=GRAPH for PHG's graph model, with "
                 "GRAPH_PACKAGE=SCOTCH for Zoltan's PT-Scotch");
  app.add_option("--scotch-strategy", f.scotch_strategy,
                 "with --method ptscotch: strategy flags joined by '+' (speed, quality, balance, "
                 "safety, scalability; default speed) or a strategy string in Scotch's grammar");
  tessera::runtime::group_flags(app, tessera::runtime::kTuningFlags,
                                {"--vertex-weights", "--objective", "--part-weights", "--row-cost",
                                 "--balance", "--rank-speeds", "--reorder", "--allow-split-overlap",
                                 "--zoltan-param", "--scotch-strategy"});
  tessera::runtime::group_flags(app, tessera::runtime::kTestingFlags, {"--compare"});
}

/// The partitioning options of the flags; bad text throws before the dataset is loaded. The
/// feature width (for --vertex-weights compute) is set once the dataset is known.
tp::Options make_options(const Flags& f) {
  tp::Options options;
  options.num_parts = f.parts;
  options.method = tp::parse_method(f.method);
  options.vertex_weight = tp::parse_vertex_weight(f.vertex_weights);
  options.objective = tp::parse_objective(f.objective);
  if (!f.part_weights.empty())
    options.part_weights = tessera::runtime::parse_part_weights(f.part_weights, "--part-weights");
  options.row_cost = f.row_cost;
  if (f.row_cost != 0.0 && options.vertex_weight != tp::VertexWeight::Cost) {
    throw tessera::InvalidArgument(fmt::format(
        "--row-cost {:g} is used only with --vertex-weights cost (given: --vertex-weights {})",
        f.row_cost, f.vertex_weights));
  }
  options.balance = tp::parse_balance(f.balance);
  if (options.balance == tp::Balance::Measured) {
    throw tessera::InvalidArgument(
        "--balance measured: tessera-partition runs on one machine and cannot measure the ranks "
        "that will load the store; run tessera-train --balance measured (it prints the speeds "
        "it measured) and cut for them with --balance given --rank-speeds S0,S1,...");
  }
  std::vector<double> speeds;
  if (!f.rank_speeds.empty())
    speeds = tessera::runtime::parse_part_weights(f.rank_speeds, "--rank-speeds");
  tessera::runtime::check_flags("--rank-speeds",
                                [&] { tp::check_rank_speeds(options.balance, speeds, f.parts); });
  if (options.balance == tp::Balance::Given) {
    if (!f.part_weights.empty()) {
      throw tessera::InvalidArgument("--part-weights and --balance given both set the parts' "
                                     "shares: give one");
    }
    options.part_weights = std::move(speeds);
  }
  options.seed = f.seed;
  for (const std::string& param : f.zoltan_params) {
    const std::size_t equals = param.find('=');
    if (equals == std::string::npos || equals == 0 || equals + 1 == param.size()) {
      throw tessera::InvalidArgument(
          fmt::format("--zoltan-param '{}': give NAME=VALUE, e.g. LB_METHOD=GRAPH", param));
    }
    options.zoltan_params.emplace_back(param.substr(0, equals), param.substr(equals + 1));
  }
  options.scotch_strategy = f.scotch_strategy;
  return options;
}

tessera::datasets::LoadOptions load_options(const Flags& f) {
  tessera::datasets::LoadOptions load;
  load.data_dir = f.data_dir;
  load.seed = f.seed;
  load.allow_split_overlap = f.allow_split_overlap;
  return load;
}

struct Row {
  tp::Method method;
  double ms = 0.0;
  tp::Partition partition;
  tp::Quality quality;
};

Row partition_and_measure(const tessera::Csr& adjacency, const tp::Options& options) {
  const tessera::Stopwatch watch;
  tp::Partition partition = tp::partition_graph(adjacency, options);
  const double ms = 1e3 * watch.seconds();
  tp::Quality quality = tp::measure(adjacency, partition);
  return {options.method, ms, std::move(partition), std::move(quality)};
}

double mean(const std::vector<std::int64_t>& values) {
  double sum = 0.0;
  for (const auto v : values)
    sum += static_cast<double>(v);
  return values.empty() ? 0.0 : sum / static_cast<double>(values.size());
}

void print_table(const std::vector<Row>& rows) {
  fmt::print("{:<16} {:>9} {:>10} {:>12} {:>10} {:>10} {:>8} {:>8} {:>11} {:>9}\n", "method",
             "time ms", "edge cut", "total vol", "max send", "max recv", "v-bal", "e-bal",
             "mean ghost", "vol/1D");
  for (const Row& r : rows) {
    const auto& q = r.quality;
    const double ratio = q.broadcast_volume == 0 ? 0.0
                                                 : static_cast<double>(q.total_volume) /
                                                       static_cast<double>(q.broadcast_volume);
    fmt::print("{:<16} {:>9.1f} {:>10} {:>12} {:>10} {:>10} {:>8.3f} {:>8.3f} {:>11.1f} {:>9.4f}\n",
               tp::to_string(r.method), r.ms, q.edge_cut, q.total_volume, q.max_send, q.max_recv,
               q.vertex_balance, q.edge_balance, mean(q.ghosts), ratio);
  }
}

int run(const Flags& f) {
  tp::Options options = make_options(f);
  // A bad --out fails now, not after loading and partitioning; nor may it hold an input.
  if (!f.out.empty()) tp::check_store_folder(f.out, f.force);
  tessera::runtime::refuse_outputs_over_inputs(
      {{"--out", f.out, true}}, tessera::datasets::dataset_inputs(f.dataset, load_options(f)));
  const tessera::runtime::StdoutProgress progress(true);
  const tessera::Stopwatch load_time;
  const auto backend = tessera::make_cpu_backend();
  auto dataset = tessera::datasets::load_dataset(backend, f.dataset, load_options(f));
  // tessera-train's --split-seed (or --seed) picks the same split for this data in memory.
  const std::uint64_t split_seed = f.split_seed.value_or(f.seed);
  const bool split_added = tessera::datasets::use_default_split_when_missing(dataset, split_seed);
  if (!split_added && f.split_seed) {
    throw tessera::InvalidArgument(fmt::format(
        "--split-seed draws a random split, but dataset '{}' has its own: drop --split-seed",
        dataset.name));
  }
  options.feature_width = dataset.features.cols();
  fmt::print("{}: {} nodes, {} undirected edges (loaded in {:.2f} s)\n", dataset.name,
             dataset.num_nodes, dataset.adjacency.nnz() / 2, load_time.seconds());
  if (split_added) {
    fmt::print("no published split: a random 60/20/20 split with seed {} ({}/{}/{}), as "
               "tessera-train makes in memory\n",
               split_seed, dataset.train_idx.size(), dataset.val_idx.size(),
               dataset.test_idx.size());
  }

  const tessera::Stopwatch components_time;
  const tp::Components components = tp::connected_components(dataset.adjacency);
  fmt::print("connected components: {}, largest {} nodes ({:.1f} %) ({:.0f} ms)\n",
             components.count, components.largest,
             100.0 * static_cast<double>(components.largest) /
                 static_cast<double>(std::max<std::int64_t>(dataset.num_nodes, 1)),
             1e3 * components_time.seconds());

  std::vector<Row> rows{partition_and_measure(dataset.adjacency, options)};
  if (f.compare) {
    // Not ptscotch: PT-Scotch in one process is ~50x slower than METIS on large graphs (ask for
    // it with --method ptscotch).
    for (const tp::Method other : {tp::Method::MetisKway, tp::Method::MetisRecursive,
                                   tp::Method::Block, tp::Method::Random, tp::Method::Hypergraph}) {
      if (other == options.method) continue;
      tp::Options other_options = options;
      other_options.method = other;
      if (other != tp::Method::MetisKway) other_options.objective = tp::Objective::EdgeCut;
      if (other != tp::Method::Hypergraph) other_options.zoltan_params.clear();
      other_options.scotch_strategy.clear();
      rows.push_back(partition_and_measure(dataset.adjacency, other_options));
    }
  }
  fmt::print("P = {}, vertex weights {}, objective {}, 1D broadcast volume (P - 1) * n = {}\n",
             f.parts, f.vertex_weights, f.objective, rows.front().quality.broadcast_volume);
  print_table(rows);

  if (!f.out.empty()) {
    const tessera::Stopwatch write_time;
    const auto reorder = f.reorder == "rcm" ? tp::Reorder::Rcm : tp::Reorder::None;
    tp::write_store(f.out, dataset, rows.front().partition, options, reorder, rows.front().quality,
                    f.force);
    fmt::print("wrote {} ({} parts, {}) in {:.2f} s\n", f.out, f.parts, f.method,
               write_time.seconds());
  }
  return 0;
}

/// Under mpirun (ptscotch, hypergraph, block, random): every rank reads its share of the rows, the
/// ranks cut them together, each assembles its tile and writes its part of --out. Collective; a
/// failure on one rank throws on every rank.
int run_distributed(const Flags& f, tp::Options options, tessera::comm::Communicator& comm) {
  const bool root = comm.rank() == 0;
  const tessera::runtime::StdoutProgress progress(root);
  if (f.parts != comm.size()) {
    throw tessera::InvalidArgument(fmt::format("--parts {} under mpirun -np {}: the distributed "
                                               "path cuts one part per rank",
                                               f.parts, comm.size()));
  }
  if (f.compare) {
    throw tessera::InvalidArgument("--compare runs every method in one process: run it without "
                                   "mpirun");
  }
  if (f.split_seed) {
    throw tessera::InvalidArgument("--split-seed draws a split, which needs every labelled node in "
                                   "one place: under mpirun every rank reads the data's own split "
                                   "(tessera-convert --add-split --split-seed S stores one)");
  }
  std::exception_ptr failure;
  tessera::datasets::RowBlock block;
  const tessera::Stopwatch load_time;
  try {
    if (root && !f.out.empty()) tp::check_store_folder(f.out, f.force);
    tessera::runtime::refuse_outputs_over_inputs(
        {{"--out", f.out, true}}, tessera::datasets::dataset_inputs(f.dataset, load_options(f)));
    block = tessera::datasets::load_dataset_share(tessera::make_cpu_backend(), f.dataset,
                                                  load_options(f), comm.rank(), comm.size());
  } catch (const std::exception&) {
    failure = std::current_exception();
  }
  tessera::comm::share_first_failure(comm, failure, "could not read its rows");
  const auto symmetry = tessera::datasets::symmetry_sums(block);
  std::vector<std::int64_t> totals{block.row_ptr.back(),
                                   static_cast<std::int64_t>(block.train_idx.size()), symmetry[0],
                                   symmetry[1]};
  comm.allreduce_sum(std::span<std::int64_t>(totals));
  tessera::datasets::check_symmetry_sums(std::span(totals).last(2), block.name);
  if (!f.out.empty() && totals[1] == 0) {
    throw tessera::InvalidArgument(fmt::format(
        "dataset '{}' has no split: a store needs one, and the default random split needs every "
        "labelled node in one place; save the data with its split (tessera-convert --add-split) "
        "or partition it without mpirun",
        block.name));
  }
  if (root) {
    fmt::print("{}: {} nodes, {} undirected edges; each of {} ranks read its {} rows ({:.2f} "
               "s)\n",
               block.name, block.num_nodes, totals[0] / 2, comm.size(), block.rows.size(),
               load_time.seconds());
  }
  options.feature_width = block.features.cols();
  const tp::DatasetRecord record{block.name, tp::dataset_checksum(block, comm),
                                 block.row_normalize};
  const tessera::Stopwatch cut_time;
  const std::vector<std::int32_t> owner = tp::partition_rows(block, options, comm);
  const double cut_ms = 1e3 * cut_time.seconds();
  const auto reorder = f.reorder == "rcm" ? tp::Reorder::Rcm : tp::Reorder::None;
  const tessera::Stopwatch build_time;
  const tp::LocalGraph tile =
      tp::build_tile_from_rows(tessera::make_cpu_backend(), std::move(block), owner, comm, reorder);
  const tp::Quality quality = tp::measure_tiles(tile, comm);
  if (root) {
    fmt::print("P = {}, vertex weights {}, 1D broadcast volume (P - 1) * n = {}; tiles built in "
               "{:.2f} s\n",
               f.parts, f.vertex_weights, quality.broadcast_volume, build_time.seconds());
    print_table({Row{options.method, cut_ms, {}, quality}});
  }
  if (!f.out.empty()) {
    const tessera::Stopwatch write_time;
    tp::write_store_from_tiles(f.out, tile, record, options, reorder, quality, comm, f.force);
    if (root) {
      fmt::print("wrote {} ({} parts, each by its rank, {}) in {:.2f} s\n", f.out, f.parts,
                 f.method, write_time.seconds());
    }
  }
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Partition a graph with METIS, PT-Scotch, Zoltan or a baseline and report the "
               "partition's quality"};
  Flags flags;
  add_flags(app, flags);
  CLI11_PARSE(app, argc, argv);
  tessera::runtime::keep_running_without_stdout();

  // PT-Scotch needs MPI; under mpirun with several ranks the cut is distributed.
  std::optional<tessera::comm::MpiEnvironment> mpi;
  std::shared_ptr<tessera::comm::Communicator> comm;
  try {
    if (flags.method == "ptscotch" || flags.method == "parmetis" ||
        tessera::comm::launched_by_mpi()) {
      mpi.emplace(&argc, &argv);
      comm = tessera::comm::make_mpi_communicator();
    }
    // The default under mpirun is chosen by measurement: docs/guide/partitioning.md.
    if (flags.method.empty()) flags.method = comm && comm->size() > 1 ? "hypergraph" : "metis";
    if (comm && comm->size() > 1) {
      tessera::runtime::check_same_command(*comm, argc, argv);
      if (flags.method == "metis" || flags.method == "metis-recursive") {
        throw tessera::InvalidArgument(fmt::format(
            "--method {} cuts the whole graph in one process: run it without mpirun, or cut "
            "under mpirun with ptscotch, hypergraph, block or random",
            flags.method));
      }
      return run_distributed(flags, make_options(flags), *comm);
    }
    return run(flags);
  } catch (const std::exception& e) {
    if (comm && comm->size() > 1) {
      fmt::print(stderr, "[rank {}] error: {}\n", comm->rank(), tessera::runtime::error_text(e));
      comm->abort(1);
    }
    fmt::print(stderr, "error: {}\n", tessera::runtime::error_text(e));
    return 1;
  }
}
