// The options module: every flag of every app is declared and parsed here (cli_options.cpp) and
// its text turned into the library's typed settings (flag_values.cpp). Values are checked as
// they are parsed, the same way in every app: numbers in a range said plainly ("an integer in
// [1, 2^30]", never a 309-digit bound), whole seeds that do not wrap, paths that are not empty,
// and the forms of the texts (byte sizes, layer sizes, lists). Each refusal names the flag, the
// range and the text; below runtime the library takes typed settings and its errors name those.
#pragma once

#include "tessera/comm/communicator.hpp"
#include "tessera/comm/halo_exchange.hpp"
#include "tessera/core/error.hpp"
#include "tessera/datasets/dataset.hpp"
#include "tessera/ops/backends.hpp"
#include "tessera/runtime/train_job.hpp"

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

namespace CLI {
class App;
class Option;
} // namespace CLI

namespace tessera::runtime {

/// The groups --help lists flags in, and the flag reference (docs/reference) follows: what most
/// runs set, what tunes speed, memory and communication, and what exists to test and measure.
inline constexpr const char* kEverydayFlags = "Everyday";
inline constexpr const char* kTuningFlags = "Tuning";
inline constexpr const char* kTestingFlags = "Testing";

/// Makes every flag `app` gets from now on, and --help, Everyday flags; group_flags moves the
/// others.
void start_everyday_flags(CLI::App& app);

/// Puts the flags `names` of `app` in `group`; throws CLI::OptionNotFound for one it lacks.
void group_flags(CLI::App& app, const char* group, std::initializer_list<const char*> names);

/// "2^30", "10^8" or "1000": a bound as a person reads it.
std::string bound_text(double value);

/// Adds `name` (e.g. "--hidden") holding an integer in [low, high]; anything else is refused
/// with "--hidden: expects an integer in [1, 2^30], got '0'". Returns the option for chaining
/// (->capture_default_str(), ->group(...)).
CLI::Option* add_integer_option(CLI::App& app, const std::string& name, int& value,
                                std::int64_t low, std::int64_t high,
                                const std::string& description);
CLI::Option* add_integer_option(CLI::App& app, const std::string& name, std::int64_t& value,
                                std::int64_t low, std::int64_t high,
                                const std::string& description);

/// Adds `name` holding a number in [low, high], or (low, high] when `low_open`; "--lr: expects a
/// number in (0, 10^30], got '1e308'". NaN and infinities are refused.
CLI::Option* add_number_option(CLI::App& app, const std::string& name, double& value, double low,
                               bool low_open, double high, const std::string& description);
CLI::Option* add_number_option(CLI::App& app, const std::string& name, float& value, double low,
                               bool low_open, double high, const std::string& description);
CLI::Option* add_number_option(CLI::App& app, const std::string& name, std::optional<double>& value,
                               double low, bool low_open, double high,
                               const std::string& description);

/// Adds `name` holding a seed: a whole number in [0, 2^64 - 1], written in decimal digits. "-1"
/// and numbers beyond 2^64 - 1 are refused (a parser that wrapped them would run another seed
/// than the one the report records).
CLI::Option* add_seed_option(CLI::App& app, const std::string& name, std::uint64_t& value,
                             const std::string& description);
CLI::Option* add_seed_option(CLI::App& app, const std::string& name,
                             std::optional<std::uint64_t>& value, const std::string& description);

/// Adds `name` holding a path, refusing an empty one ("--report: expects a path, got an empty
/// string"): an empty path would otherwise read as the flag not given at all.
CLI::Option* add_path_option(CLI::App& app, const std::string& name, std::string& value,
                             const std::string& description);

// ---- Flag values: text → typed settings, each refusal naming the flag and the text ----

/// A byte size: "512MiB", "2GiB", "64M", "1G", "4096" (K/M/G/T, binary units). Throws
/// InvalidArgument naming `flag` and the text for anything else.
std::size_t parse_byte_size(const std::string& text, const std::string& flag);
/// --layers "1433-16-7" → {1433, 16, 7}: positive widths up to gnn::kMaxLayerWidth, at least two.
std::vector<std::int64_t> parse_layer_sizes(const std::string& text);
/// --device: "cpu", "cuda" or "auto".
DeviceChoice parse_device_choice(const std::string& text);
/// --simulate-link: "10" (10 Gb/s, no latency) or "10:5" (and 5 µs per message); a bandwidth
/// above 0 and a latency not negative.
comm::LinkModel parse_link_model(const std::string& text);
/// "0.05,0.1" → {0.05, 0.1} for `flag`: finite numbers, positive (or >= 0 when `zero_allowed`);
/// InvalidArgument naming the flag, the text, the item and `example` otherwise.
std::vector<double> parse_number_list(const std::string& text, const std::string& flag,
                                      bool zero_allowed, const std::string& example);
/// "2,1,1,1" → {2, 1, 1, 1} for `flag` (--part-weights, --rank-speeds): positive numbers, which
/// partition::check_part_weights then checks (led by the flag and the text).
std::vector<double> parse_part_weights(const std::string& text, const std::string& flag);
/// --simulate-rank-speed "R:FACTOR" → {R, FACTOR} (ranges are checked by Simulation::check).
std::pair<int, double> parse_rank_speed(const std::string& text);
/// --inject-failure "RANK:EPOCH" → {RANK, EPOCH}.
std::pair<int, int> parse_failure(const std::string& text);
/// --schedule: "fixed" or "auto".
Schedule parse_schedule(const std::string& text);
/// --allow-inexact "stale,bf16": the modes and precisions it names (stale, skip, bf16, int8).
void parse_allowed_inexact(const std::string& text, std::vector<comm::HaloMode>& modes,
                           std::vector<comm::HaloPrecision>& precisions);

/// Runs `check`, a library check of settings that `flags` set, and throws an InvalidArgument it
/// throws again led by the flags: "--rank-speeds: rank speeds '1,0.5' name 2 speed(s) for 1
/// part(s): expects one per rank". So a program refuses flags before it loads anything, in the
/// library's words, and the library stays free of flag names.
template <typename Check> void check_flags(const std::string& flags, Check&& check) {
  try {
    check();
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(flags + ": " + e.what());
  }
}

/// What a program prints for an error `e` (after "error: "): the library's message, and for the
/// kinds of error a flag answers, the flag: an OutputExists gets "; pass --force to replace it",
/// a PeerTimeout "; --peer-timeout sets it".
std::string error_text(const std::exception& e);

/// The flags of per-node outputs (tessera-train and tessera-predict): their text, then the
/// NodeOutputs they ask for (outputs()).
struct NodeOutputFlags {
  std::string predictions, embeddings, weights;
  int embedding_layer = 0;
  std::string nodes = "all";
  /// Throws InvalidArgument naming the flag for a node set it does not know.
  NodeOutputs outputs() const;
};
/// Adds --predictions, --embeddings, --embedding-layer, --predict-nodes and --export-weights.
void add_node_output_flags(CLI::App& app, NodeOutputFlags& flags);

/// Refuses --split, --split-seed and --partition-method given with a partition store (it was
/// made with its own split and cut), naming the flag.
void refuse_flags_ignored_with_store(const CLI::App& app, const std::string& partition_dir);

/// Adds --allow-split-overlap: accept a stored split whose parts share nodes.
void add_split_overlap_flag(CLI::App& app, bool& value);

/// The flags every training program has (tessera-train, tessera-mlp, programs on train_main):
/// the data, the model's size, the optimizer, the run, where it runs and what it writes. The
/// program sets its defaults before add_training_flags shows them.
struct TrainingFlags {
  /// The flags' defaults, with `default_dataset` the program's; --data-dir defaults to
  /// datasets::default_data_dir().
  explicit TrainingFlags(std::string default_dataset);

  /// How the flags ask for the data to be loaded.
  datasets::LoadOptions load_options() const;
  /// --normalize-features: true or false, or nullopt for auto (the dataset's recipe).
  std::optional<bool> normalize_choice() const;

  std::string dataset;
  std::string data_dir;
  std::string layers;
  std::int64_t hidden = 16;
  int num_layers = 2;
  float dropout = 0.5f;
  float lr = 0.01f;
  float weight_decay = 5e-4f;
  std::string optimizer = "adam";
  int epochs = 200;
  int eval_every = 1;
  std::uint64_t seed = 0;
  std::optional<std::uint64_t> split_seed; ///< not given: seed
  std::string normalize_features = "auto";
  int threads = 0;
  std::string device = "cpu";
  int split_index = 0;
  bool allow_split_overlap = false;
  std::string metric = "accuracy";
  int log_every = 10;
  std::string report;
  std::optional<double> peer_timeout;
};

/// What the shared flags' help says that depends on the program.
struct TrainingFlagsHelp {
  std::string dataset; ///< --dataset: what it accepts
  std::string layers;  ///< --layers (empty: the program has no --layers)
  std::string layer;   ///< what a layer is: "graph layer", "Linear layer"
};

/// Adds the TrainingFlags to `app` (Everyday, but --allow-split-overlap and --peer-timeout:
/// Tuning), each checked as it is parsed.
void add_training_flags(CLI::App& app, TrainingFlags& flags, const TrainingFlagsHelp& help);

} // namespace tessera::runtime
