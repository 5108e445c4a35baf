// tessera-convert: load a dataset (name, FORMAT:PATH or generator spec) and write it as a native
// folder or an .npz.
#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fmt/core.h>
#include <optional>
#include <string>
#include <tessera/core/device.hpp>
#include <tessera/core/error.hpp>
#include <tessera/core/timer.hpp>
#include <tessera/datasets/dataset.hpp>
#include <tessera/runtime/cli_options.hpp>
#include <tessera/runtime/job_paths.hpp>
#include <tessera/runtime/progress_display.hpp>

namespace {

struct Options {
  std::string dataset;
  std::string data_dir = tessera::datasets::default_data_dir();
  std::uint64_t seed = 0;
  std::optional<std::uint64_t> split_seed; // not given: seed
  int split_index = 0;
  bool one_split = false; // --split given: keep that split alone
  bool allow_split_overlap = false;
  std::string out;
  bool force = false;
  bool add_split = false;
};

void add_flags(CLI::App& app, Options& o) {
  tessera::runtime::start_everyday_flags(app);
  tessera::runtime::add_path_option(
      app, "--dataset", o.dataset,
      "name under --data-dir (cora, cora-linqs, minesweeper, facebook, email-eu-core, "
      "slashdot, 4elt, ...), a native folder, FORMAT:PATH (npz:, linqs:, snap:, metis:, "
      "musae:, mtx:, native:) "
      "or a generator (rmat:scale=S,..., sbm:nodes=N,...)")
      ->required();
  tessera::runtime::add_path_option(app, "--data-dir", o.data_dir,
                                    "folder of named datasets ($TESSERA_DATA_DIR)")
      ->capture_default_str();
  tessera::runtime::add_seed_option(app, "--seed", o.seed, "seed of generated graphs and features")
      ->capture_default_str();
  tessera::runtime::add_integer_option(app, "--split", o.split_index, 0, 1000000,
                                       "keep only this stored split (minesweeper has 10; default: "
                                       "every split the data stores)");
  tessera::runtime::add_split_overlap_flag(app, o.allow_split_overlap);
  tessera::runtime::add_path_option(
      app, "--out", o.out,
      "output: FILE.npz (numpy-readable, Planetoid-style keys) or a folder in the native "
      "format, which --dataset DIR loads at disk speed: a new file or an empty folder, or an "
      "existing one with --force")
      ->required();
  app.add_flag("--force", o.force, "replace the .npz file or native dataset already in --out");
  app.add_flag("--add-split", o.add_split,
               "store the default random 60/20/20 split (seed --split-seed) when the data has "
               "none: the split tessera-train --split-seed (or --seed) draws in memory, which "
               "--partition-method ptscotch (every rank reading only its rows) cannot draw");
  tessera::runtime::add_seed_option(app, "--split-seed", o.split_seed,
                                    "seed of the split --add-split draws (default: --seed)")
      ->needs("--add-split");
  tessera::runtime::group_flags(app, tessera::runtime::kTuningFlags, {"--allow-split-overlap"});
}

std::string describe_features(const tessera::graph::Features& features) {
  if (features.rows() == 0) return "none";
  return fmt::format("{} ({})", features.cols(), features.is_sparse() ? "sparse" : "dense");
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Load a dataset once and write it as a native folder (fast to load) or an .npz"};
  Options o;
  add_flags(app, o);
  CLI11_PARSE(app, argc, argv);
  o.one_split = app.count("--split") > 0;

  try {
    // A bad --out fails now, not after the dataset is loaded; nor may it write over an input.
    const tessera::datasets::LoadOptions load{o.data_dir, o.split_index, o.seed,
                                              o.allow_split_overlap};
    tessera::datasets::check_save_target(o.out, o.force);
    tessera::runtime::refuse_outputs_over_inputs(
        {{"--out", o.out, !tessera::datasets::is_npz_path(o.out)}},
        tessera::datasets::dataset_inputs(o.dataset, load));
    const tessera::runtime::StdoutProgress progress(true);
    const tessera::Stopwatch load_time;
    const auto backend = tessera::make_cpu_backend();
    auto dataset = tessera::datasets::load_dataset(backend, o.dataset, load);
    if (o.one_split) dataset.all_splits.clear(); // --split K keeps that one alone
    const bool split_added = o.add_split && tessera::datasets::use_default_split_when_missing(
                                                dataset, o.split_seed.value_or(o.seed));
    fmt::print("{}: {} nodes, {} undirected edges, features {}, {} classes, split {}/{}/{} "
               "(loaded in {:.2f} s)\n",
               dataset.name, dataset.num_nodes, dataset.adjacency.nnz() / 2,
               describe_features(dataset.features), dataset.num_classes, dataset.train_idx.size(),
               dataset.val_idx.size(), dataset.test_idx.size(), load_time.seconds());
    if (split_added) {
      fmt::print("added the default random split with seed {}\n", o.split_seed.value_or(o.seed));
    } else if (o.split_seed) {
      throw tessera::InvalidArgument(fmt::format(
          "--split-seed draws a random split, but dataset '{}' has its own: drop --split-seed",
          dataset.name));
    }

    const tessera::Stopwatch save_time;
    if (tessera::datasets::is_npz_path(o.out)) {
      tessera::datasets::save_npz(dataset, o.out);
    } else {
      tessera::datasets::save_native(dataset, o.out, o.force);
    }
    fmt::print("wrote {} in {:.2f} s\n", o.out, save_time.seconds());
  } catch (const std::exception& e) {
    // tessera::Error and anything else (out of memory, a library's own): one line, status 1.
    fmt::print(stderr, "error: {}\n", tessera::runtime::error_text(e));
    return 1;
  }
  return 0;
}
