// Flags checked as they are parsed: ranges said plainly, seeds that do not wrap, paths that are
// not empty.
#include "tessera/runtime/cli_options.hpp"

#include "tessera/datasets/dataset.hpp"

#include <CLI/CLI.hpp>
#include <charconv>
#include <utility>
#include <cmath>
#include <fmt/core.h>
#include <limits>

namespace tessera::runtime {

std::string bound_text(double value) {
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  const double magnitude = std::abs(value);
  const std::string sign = value < 0 ? "-" : "";
  if (magnitude >= 1 << 20 && magnitude == std::floor(magnitude)) {
    const int two = static_cast<int>(std::lround(std::log2(magnitude)));
    if (std::ldexp(1.0, two) == magnitude) return sign + "2^" + std::to_string(two);
    const int ten = static_cast<int>(std::lround(std::log10(magnitude)));
    if (std::pow(10.0, ten) == magnitude) return sign + "10^" + std::to_string(ten);
  }
  return fmt::format("{:g}", value);
}

namespace {

/// The integer `text` is, the whole of it; nullopt for anything else (a fraction, "1e3", words).
std::optional<std::int64_t> whole_integer(const std::string& text) {
  std::int64_t value = 0;
  const char* begin = text.data();
  if (!text.empty() && text.front() == '+') ++begin;
  const char* end = text.data() + text.size();
  const auto [ptr, error] = std::from_chars(begin, end, value);
  if (error != std::errc() || ptr != end || begin == end) return std::nullopt;
  return value;
}

CLI::Validator integer_range(std::int64_t low, std::int64_t high) {
  const std::string what = "an integer in [" + bound_text(static_cast<double>(low)) + ", " +
                           bound_text(static_cast<double>(high)) + "]";
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        const std::optional<std::int64_t> value = whole_integer(text);
        if (value && *value >= low && *value <= high) return {};
        return "expects " + what + ", got '" + text + "'";
      },
      what);
}

CLI::Validator number_range(double low, bool low_open, double high) {
  const std::string what = std::string("a number in ") + (low_open ? "(" : "[") + bound_text(low) +
                           ", " + bound_text(high) + "]";
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        double value = 0.0;
        const char* end = text.data() + text.size();
        const auto [ptr, error] = std::from_chars(text.data(), end, value);
        const bool ok = error == std::errc() && ptr == end && !text.empty() &&
                        std::isfinite(value) && (low_open ? value > low : value >= low) &&
                        value <= high;
        return ok ? std::string() : "expects " + what + ", got '" + text + "'";
      },
      what);
}

CLI::Validator seed_range() {
  const std::string what = "an integer in [0, 2^64 - 1]";
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        std::uint64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [ptr, error] = std::from_chars(text.data(), end, value);
        // from_chars of an unsigned type refuses a sign and a value beyond 2^64 - 1.
        if (error == std::errc() && ptr == end && !text.empty()) return {};
        return "expects " + what + ", got '" + text + "'";
      },
      what);
}

template <typename T>
CLI::Option* add_integer(CLI::App& app, const std::string& name, T& value, std::int64_t low,
                         std::int64_t high, const std::string& description) {
  return app.add_option(name, value, description)->check(integer_range(low, high));
}

template <typename T>
CLI::Option* add_number(CLI::App& app, const std::string& name, T& value, double low, bool low_open,
                        double high, const std::string& description) {
  return app.add_option(name, value, description)->check(number_range(low, low_open, high));
}

} // namespace

CLI::Option* add_integer_option(CLI::App& app, const std::string& name, int& value,
                                std::int64_t low, std::int64_t high,
                                const std::string& description) {
  return add_integer(app, name, value, low, high, description);
}

CLI::Option* add_integer_option(CLI::App& app, const std::string& name, std::int64_t& value,
                                std::int64_t low, std::int64_t high,
                                const std::string& description) {
  return add_integer(app, name, value, low, high, description);
}

CLI::Option* add_number_option(CLI::App& app, const std::string& name, double& value, double low,
                               bool low_open, double high, const std::string& description) {
  return add_number(app, name, value, low, low_open, high, description);
}

CLI::Option* add_number_option(CLI::App& app, const std::string& name, float& value, double low,
                               bool low_open, double high, const std::string& description) {
  return add_number(app, name, value, low, low_open, high, description);
}

CLI::Option* add_number_option(CLI::App& app, const std::string& name, std::optional<double>& value,
                               double low, bool low_open, double high,
                               const std::string& description) {
  return add_number(app, name, value, low, low_open, high, description);
}

CLI::Option* add_seed_option(CLI::App& app, const std::string& name, std::uint64_t& value,
                             const std::string& description) {
  return app.add_option(name, value, description)->check(seed_range());
}

CLI::Option* add_seed_option(CLI::App& app, const std::string& name,
                             std::optional<std::uint64_t>& value, const std::string& description) {
  return app.add_option(name, value, description)->check(seed_range());
}

CLI::Option* add_path_option(CLI::App& app, const std::string& name, std::string& value,
                             const std::string& description) {
  return app.add_option(name, value, description)
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return text.empty() ? "expects a path, got an empty string" : std::string();
          },
          "PATH"));
}

void refuse_flags_ignored_with_store(const CLI::App& app, const std::string& partition_dir) {
  if (partition_dir.empty()) return;
  for (const char* flag : {"--split", "--split-seed", "--partition-method"}) {
    if (app.count(flag) > 0) {
      throw InvalidArgument(std::string(flag) +
                            " is not used with --partition-dir (the store was made with its own "
                            "split and partitioning): drop one of them");
    }
  }
}

void add_split_overlap_flag(CLI::App& app, bool& value) {
  app.add_flag("--allow-split-overlap", value,
               "accept a stored split whose train, val and test parts share nodes (refused by "
               "default: accuracy on trained nodes means nothing)");
}

NodeOutputs NodeOutputFlags::outputs() const {
  NodeOutputs o;
  o.predictions = predictions;
  o.embeddings = embeddings;
  o.embedding_layer = embedding_layer;
  o.weights = weights;
  check_flags("--predict-nodes", [&] { o.nodes = parse_node_set(nodes); });
  return o;
}

void add_node_output_flags(CLI::App& app, NodeOutputFlags& flags) {
  add_path_option(app, "--predictions", flags.predictions,
                  "write each node's class probabilities after the last epoch: FILE.npy (float32 "
                  "[nodes, classes], in node order) or FILE.npz (node_id, predicted, "
                  "probabilities, logits)");
  add_path_option(app, "--embeddings", flags.embeddings,
                  "write each node's representation after hidden layer --embedding-layer: "
                  "FILE.npy (float32 [nodes, width], in node order) or FILE.npz (node_id, "
                  "embeddings)");
  add_integer_option(app, "--embedding-layer", flags.embedding_layer, 0, 1 << 20,
                     "with --embeddings: which hidden layer (or residual block), from 1; 0: the "
                     "last, which the output layer reads")
      ->capture_default_str();
  app.add_option("--predict-nodes", flags.nodes,
                 "the rows of --predictions and --embeddings: all nodes, or those of one split "
                 "(train, val, test), in increasing node id")
      ->capture_default_str()
      ->check(CLI::IsMember({"all", "train", "val", "test"}));
  add_path_option(app, "--export-weights", flags.weights,
                  "write the model's weights to FILE.npz, one array per parameter keyed by its "
                  "name, with the model's description (scripts/export_pyg.py loads them into "
                  "PyG)");
}

void start_everyday_flags(CLI::App& app) {
  app.option_defaults()->group(kEverydayFlags);
  app.get_help_ptr()->group(kEverydayFlags);
}

void group_flags(CLI::App& app, const char* group, std::initializer_list<const char*> names) {
  for (const char* name : names)
    app.get_option(name)->group(group);
}

TrainingFlags::TrainingFlags(std::string default_dataset)
    : dataset(std::move(default_dataset)), data_dir(datasets::default_data_dir()) {}

datasets::LoadOptions TrainingFlags::load_options() const {
  datasets::LoadOptions load;
  load.data_dir = data_dir;
  load.split_index = split_index;
  load.allow_split_overlap = allow_split_overlap;
  load.seed = seed;
  return load;
}

std::optional<bool> TrainingFlags::normalize_choice() const {
  if (normalize_features == "auto") return std::nullopt;
  return normalize_features == "true";
}

void add_training_flags(CLI::App& app, TrainingFlags& f, const TrainingFlagsHelp& help) {
  add_path_option(app, "--dataset", f.dataset, help.dataset)->capture_default_str();
  add_path_option(app, "--data-dir", f.data_dir, "folder of named datasets ($TESSERA_DATA_DIR)")
      ->capture_default_str();
  if (!help.layers.empty()) app.add_option("--layers", f.layers, help.layers);
  add_integer_option(app, "--hidden", f.hidden, 1, std::int64_t{1} << 30, "hidden width")
      ->capture_default_str();
  add_integer_option(app, "--num-layers", f.num_layers, 1, 1000, "number of " + help.layer + "s")
      ->capture_default_str();
  add_number_option(app, "--dropout", f.dropout, 0, false, 0.999,
                    "dropout probability before every " + help.layer)
      ->capture_default_str();
  add_number_option(app, "--lr", f.lr, 0, true, 1e30, "learning rate")->capture_default_str();
  add_number_option(app, "--weight-decay", f.weight_decay, 0, false, 1e30,
                    "weight decay (weights, not biases)")
      ->capture_default_str();
  app.add_option("--optimizer", f.optimizer, "adam (L2 decay) or adamw (decoupled decay)")
      ->capture_default_str()
      ->check(CLI::IsMember({"adam", "adamw"}));
  add_integer_option(app, "--epochs", f.epochs, 0, 100000000, "training epochs")
      ->capture_default_str();
  add_integer_option(app, "--eval-every", f.eval_every, 1, 100000000,
                     "evaluate every k epochs (and after the last)")
      ->capture_default_str();
  add_seed_option(app, "--seed", f.seed, "seed of weights, dropout, batch order and generated data")
      ->capture_default_str();
  // Its upper bound (4 per core) is checked where threads are set (make_cpu_backend), which
  // covers OMP_NUM_THREADS too.
  add_integer_option(app, "--threads", f.threads, 0, 1000000000,
                     "CPU threads (0: OMP_NUM_THREADS or all cores; at most 4 per core)")
      ->capture_default_str();
  app.add_option("--device", f.device,
                 "where each rank trains: cpu, cuda (GPU of the rank's place on its node) or auto "
                 "(a GPU when the node has one for the rank, else the CPU)")
      ->capture_default_str()
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  add_integer_option(app, "--split", f.split_index, 0, 1000000,
                     "which stored split to use (minesweeper has 10)")
      ->capture_default_str();
  add_split_overlap_flag(app, f.allow_split_overlap);
  add_seed_option(app, "--split-seed", f.split_seed,
                  "seed of the random 60/20/20 split drawn for data without one (default: "
                  "--seed); hold the split fixed while --seed varies");
  app.add_option("--normalize-features", f.normalize_features,
                 "divide each feature row by its sum (Kipf & Welling's preprocessing, PyG's "
                 "NormalizeFeatures): true, false, or auto: as the dataset's published recipe, "
                 "on for the bag-of-words citation sets (Cora, CiteSeer, PubMed; data that "
                 "records it) and off for the rest (counts, ratings, embeddings, generated data)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "true", "false"}));
  app.add_option("--metric", f.metric,
                 "what selects the best validation epoch and leads the summary: accuracy, or "
                 "roc-auc (binary tasks, as the heterophilous benchmark and OGB report them)")
      ->capture_default_str()
      ->check(CLI::IsMember({"accuracy", "roc-auc"}));
  add_integer_option(app, "--log-every", f.log_every, 1, 100000000,
                     "print a log line every k epochs when not on a terminal")
      ->capture_default_str();
  add_path_option(app, "--report", f.report, "write a JSON run report to this path");
  add_number_option(app, "--peer-timeout", f.peer_timeout, 0, true, 1e9,
                    "seconds a rank may wait for another (a halo, a collective, a gradient sum) "
                    "before the job ends naming the rank it waits for (default: the larger of 60 "
                    "and 50 x the slowest epoch so far; 600 before the first epoch ends)");
  group_flags(app, kTuningFlags, {"--allow-split-overlap", "--peer-timeout"});
}

} // namespace tessera::runtime
