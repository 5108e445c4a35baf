// Writing and reading checkpoint folders (layout in checkpoint.hpp): every file through the
// safe-write path, the previous checkpoint kept until the new one is complete, and every field
// read back checked before it is trusted.
#include "tessera/runtime/checkpoint.hpp"

#include "tessera/core/error.hpp"
#include "tessera/io/array_file.hpp"
#include "tessera/io/files.hpp"
#include "tessera/io/graph_files.hpp"
#include "tessera/io/text_input.hpp"

#include <cmath>
#include <filesystem>
#include <fmt/core.h>
#include <limits>
#include <nlohmann/json.hpp>
#include <regex>

namespace tessera::runtime {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kFormat = "tessera-checkpoint";
constexpr const char* kLatest = "latest.json";
constexpr const char* kState = "checkpoint.json";
/// A checkpoint's JSON files hold a few hundred bytes per parameter: a larger one is not ours,
/// and is refused before it is read into memory.
constexpr std::uintmax_t kMaxJsonBytes = std::uintmax_t{16} << 20;
/// The epoch folders' names: nothing else in DIR is ever read as one or removed.
const std::regex kEpochFolder("epoch-[0-9]{6,9}(\\.[0-9]{1,3})?");

std::string join(const std::string& dir, const std::string& name) {
  return (fs::path(dir) / name).string();
}

// ---- writing ----

json metrics_json(const gnn::SplitMetrics& m) {
  json out = {{"loss", m.loss}, {"accuracy", m.accuracy}};
  if (m.roc_auc) out["roc_auc"] = *m.roc_auc;
  return out;
}

json run_json(const CheckpointRun& run) {
  return {
      {"dataset", run.dataset},
      {"dataset_checksum", run.dataset_checksum},
      {"num_nodes", run.num_nodes},
      {"features", run.features},
      {"classes", run.classes},
      {"model_name", run.model_name},
      {"layer_sizes", run.layer_sizes},
      {"seed", run.seed},
      {"optimizer",
       {{"lr", run.adam.lr},
        {"beta1", run.adam.beta1},
        {"beta2", run.adam.beta2},
        {"eps", run.adam.eps},
        {"weight_decay", run.adam.weight_decay},
        {"decoupled", run.adam.decoupled}}},
      {"model",
       {{"dropout", run.model.dropout},
        {"bias", run.model.bias},
        {"order", to_string(run.model.order)},
        {"decay_first_layer_only", run.model.decay_first_layer_only},
        {"activation_dtype", to_string(run.model.activation_dtype)},
        {"heads", run.model.heads},
        {"output_heads", run.model.output_heads},
        {"attention_dropout", run.model.attention_dropout},
        {"negative_slope", run.model.negative_slope},
        {"norm", gnn::to_string(run.model.norm)},
        {"feed_forward_multiplier", run.model.feed_forward_multiplier},
        {"init", gnn::to_string(run.model.init)},
        {"one_logit", run.model.one_logit}}},
      {"row_normalize_features", run.row_normalized.value_or(false)},
      {"epochs", run.epochs},
      {"ranks", run.ranks},
      {"task", run.task},
      {"decoder",
       {{"kind", run.decoder}, {"hidden", run.decoder_hidden}, {"layers", run.decoder_layers}}}};
}

/// A folder name for `epoch` that is not the one latest.json names now (a run restarted with
/// --force writes its epochs again): the complete checkpoint is never written over.
std::string new_epoch_folder(int epoch, const std::string& current) {
  const std::string base = fmt::format("epoch-{:06d}", epoch);
  for (int i = 0; i < 1000; ++i) {
    const std::string name = i == 0 ? base : fmt::format("{}.{}", base, i);
    if (name != current) return name;
  }
  return base; // unreachable: only one name can be the current one
}

/// The folder latest.json names now, or "" when there is none (or it cannot be read).
std::string current_epoch_folder(const std::string& dir) {
  try {
    // Read as an input (a regular file, never a FIFO to wait on) and bounded as read_json does.
    const json latest = json::parse(io::read_text_file(join(dir, kLatest), kMaxJsonBytes));
    return latest.at("checkpoint").get<std::string>();
  } catch (const std::exception&) {
    return {}; // a missing or malformed latest.json points at nothing worth keeping
  }
}

// ---- reading ----

[[noreturn]] void malformed(const std::string& file, const std::string& problem) {
  throw FormatError("checkpoint file '" + file + "': " + problem);
}

/// "0a1b2c3d": the CRC-32 of `text`, as latest.json records checkpoint.json's.
std::string text_crc(const std::string& text) {
  return io::crc_hex(io::crc32_update(0, text.data(), text.size()));
}

/// The JSON document in `file`: a regular file (a FIFO is refused, not waited on) of at most
/// kMaxJsonBytes, refused before it is read into memory when larger. Its text's CRC goes to
/// `crc` when given.
json read_json(const std::string& file, std::string* crc = nullptr) {
  std::error_code error;
  if (!fs::exists(fs::symlink_status(file, error))) {
    throw IoError("cannot read checkpoint file '" + file + "': it does not exist");
  }
  std::string text;
  try {
    text = io::read_text_file(file, kMaxJsonBytes);
  } catch (const IoError& e) {
    throw IoError(std::string("checkpoint: ") + e.what());
  } catch (const FormatError& e) {
    malformed(file, e.what());
  }
  if (crc != nullptr) *crc = text_crc(text);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    malformed(file, std::string("not valid JSON (") + e.what() + ")");
  }
}

/// Field `key` of object `object` as a T, or FormatError naming the file and the field.
template <typename T> T field(const json& object, const char* key, const std::string& file) {
  if (!object.is_object() || !object.contains(key)) {
    malformed(file, std::string("missing field '") + key + "'");
  }
  const json& value = object.at(key);
  const bool ok = [&] {
    if constexpr (std::is_same_v<T, bool>)
      return value.is_boolean();
    else if constexpr (std::is_same_v<T, std::string>)
      return value.is_string();
    else if constexpr (std::is_floating_point_v<T>)
      return value.is_number();
    else if constexpr (std::is_unsigned_v<T>)
      return value.is_number_unsigned();
    else
      return value.is_number_integer();
  }();
  if (!ok) malformed(file, std::string("field '") + key + "' has the wrong type: " + value.dump());
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    // JSON integers are 64-bit; narrower fields must hold them.
    if (value.is_number_unsigned()) {
      if (value.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) {
        malformed(file, std::string("field '") + key + "' is out of range: " + value.dump());
      }
    } else {
      const auto v = value.get<std::int64_t>();
      if (v < static_cast<std::int64_t>(std::numeric_limits<T>::min()) ||
          v > static_cast<std::int64_t>(std::numeric_limits<T>::max())) {
        malformed(file, std::string("field '") + key + "' is out of range: " + value.dump());
      }
    }
  }
  return value.get<T>();
}

gnn::SplitMetrics read_metrics(const json& object, const char* key, const std::string& file) {
  if (!object.contains(key)) malformed(file, std::string("missing field '") + key + "'");
  const json& m = object.at(key);
  gnn::SplitMetrics out{field<double>(m, "loss", file), field<double>(m, "accuracy", file), {}, {}};
  if (m.contains("roc_auc")) out.roc_auc = field<double>(m, "roc_auc", file);
  // What a run measured: a finite loss, accuracy and ROC-AUC fractions (a resumed run reports
  // them as its best epoch's).
  const auto refuse = [&](const char* what, double value, const char* range) {
    malformed(file, fmt::format("field '{}.{}' is {}, not {}", key, what, value, range));
  };
  if (!(std::isfinite(out.loss) && out.loss >= 0)) refuse("loss", out.loss, "a finite loss >= 0");
  if (!(out.accuracy >= 0 && out.accuracy <= 1)) refuse("accuracy", out.accuracy, "in [0, 1]");
  if (out.roc_auc && !(*out.roc_auc >= 0 && *out.roc_auc <= 1)) {
    refuse("roc_auc", *out.roc_auc, "in [0, 1]");
  }
  return out;
}

/// The settings that shape a GAT's and the residual blocks' parameters (heads, the feed-forward
/// width, one logit) and their start, each checked in the range its flag allows: a model is
/// built from them before any weight is read. A checkpoint made before they were recorded holds
/// none: the flags' defaults (attention dropout: the dropout).
void read_model_shape_settings(const json& m, const std::string& file, gnn::ModelConfig& model) {
  const auto integer = [&](const char* key, std::int64_t& value, std::int64_t high) {
    if (!m.contains(key)) return;
    value = field<std::int64_t>(m, key, file);
    if (value < 1 || value > high) {
      malformed(file, fmt::format("field '{}' is {}, outside [1, {}]", key, value, high));
    }
  };
  const auto number = [&](const char* key, float& value, double low, double high) {
    if (!m.contains(key)) return;
    value = field<float>(m, key, file);
    if (!(value >= low && value < high)) {
      malformed(file, fmt::format("field '{}' is {}, outside [{}, {})", key, value, low, high));
    }
  };
  integer("heads", model.heads, 4096);
  integer("output_heads", model.output_heads, 4096);
  integer("feed_forward_multiplier", model.feed_forward_multiplier, 64);
  model.attention_dropout = model.dropout;
  number("attention_dropout", model.attention_dropout, 0.0, 1.0);
  number("negative_slope", model.negative_slope, 0.0, 1e6);
  try {
    if (m.contains("norm")) model.norm = gnn::parse_norm_kind(field<std::string>(m, "norm", file));
    if (m.contains("init"))
      model.init = gnn::parse_weight_init(field<std::string>(m, "init", file));
  } catch (const InvalidArgument& e) {
    malformed(file, e.what());
  }
  if (m.contains("one_logit")) model.one_logit = field<bool>(m, "one_logit", file);
}

CheckpointRun read_run(const json& state, const std::string& file, int version) {
  if (!state.contains("run") || !state.at("run").is_object()) {
    malformed(file, "missing field 'run'");
  }
  const json& r = state.at("run");
  CheckpointRun run;
  run.dataset = field<std::string>(r, "dataset", file);
  if (version >= 2) {
    run.dataset_checksum = field<std::string>(r, "dataset_checksum", file);
    if (run.dataset_checksum.size() != 8 ||
        run.dataset_checksum.find_first_not_of("0123456789abcdef") != std::string::npos) {
      malformed(file,
                "field 'dataset_checksum' is '" + run.dataset_checksum + "', not 8 hex digits");
    }
  }
  run.num_nodes = field<std::int64_t>(r, "num_nodes", file);
  run.features = field<std::int64_t>(r, "features", file);
  run.classes = field<std::int64_t>(r, "classes", file);
  run.model_name = field<std::string>(r, "model_name", file);
  if (!r.contains("layer_sizes") || !r.at("layer_sizes").is_array()) {
    malformed(file, "missing field 'layer_sizes' (an array)");
  }
  for (const json& size : r.at("layer_sizes")) {
    if (!size.is_number_integer() || size.get<std::int64_t>() < 1) {
      malformed(file, "field 'layer_sizes' holds " + size.dump() + ", not a width >= 1");
    }
    run.layer_sizes.push_back(size.get<std::int64_t>());
  }
  run.seed = field<std::uint64_t>(r, "seed", file);
  if (!r.contains("optimizer")) malformed(file, "missing field 'optimizer'");
  const json& o = r.at("optimizer");
  run.adam.lr = field<float>(o, "lr", file);
  run.adam.beta1 = field<float>(o, "beta1", file);
  run.adam.beta2 = field<float>(o, "beta2", file);
  run.adam.eps = field<float>(o, "eps", file);
  run.adam.weight_decay = field<float>(o, "weight_decay", file);
  run.adam.decoupled = field<bool>(o, "decoupled", file);
  if (!r.contains("model")) malformed(file, "missing field 'model'");
  const json& m = r.at("model");
  run.model.dropout = field<float>(m, "dropout", file);
  run.model.bias = field<bool>(m, "bias", file);
  try {
    run.model.order = parse_gcn_order(field<std::string>(m, "order", file));
  } catch (const InvalidArgument& e) {
    malformed(file, std::string("field 'order': ") + e.what());
  }
  run.model.decay_first_layer_only = field<bool>(m, "decay_first_layer_only", file);
  if (m.contains("activation_dtype")) { // absent from checkpoints made before it existed: fp32
    try {
      run.model.activation_dtype =
          parse_activation_dtype(field<std::string>(m, "activation_dtype", file));
    } catch (const InvalidArgument& e) {
      malformed(file, std::string("field 'activation_dtype': ") + e.what());
    }
  }
  read_model_shape_settings(m, file, run.model);
  if (r.contains("row_normalize_features")) {
    run.row_normalized = field<bool>(r, "row_normalize_features", file);
  }
  run.epochs = field<int>(r, "epochs", file);
  run.ranks = field<int>(r, "ranks", file);
  if (r.contains("task")) { // absent from checkpoints made before link prediction: node
    run.task = field<std::string>(r, "task", file);
    if (run.task != "node" && run.task != "link") {
      malformed(file, "field 'task' is '" + run.task + "', not node or link");
    }
  }
  if (r.contains("decoder")) { // absent before the MLP decoder: the dot product
    const json& d = r.at("decoder");
    run.decoder = field<std::string>(d, "kind", file);
    run.decoder_hidden = field<std::int64_t>(d, "hidden", file);
    run.decoder_layers = field<int>(d, "layers", file);
    if (run.decoder != "dot" && run.decoder != "mlp") {
      malformed(file, "field 'decoder.kind' is '" + run.decoder + "', not dot or mlp");
    }
    if (run.decoder == "mlp" && (run.decoder_hidden < 1 || run.decoder_hidden > (1 << 20) ||
                                 run.decoder_layers < 1 || run.decoder_layers > 64)) {
      malformed(file, fmt::format("the MLP decoder's hidden width {} and layers {} are not in "
                                  "1..2^20 and 1..64",
                                  run.decoder_hidden, run.decoder_layers));
    }
  }
  return run;
}

/// One array of a parameter, checked against the shape checkpoint.json gives it and against the
/// CRC it records for the file (`key`_crc): a file copied in from another run or parameter has
/// another. The file's size is checked first, so a shape in the JSON cannot make this allocate
/// more than the file holds.
std::vector<float> read_tensor(const std::string& folder, const json& entry, const char* key,
                               std::int64_t rows, std::int64_t cols, const std::string& file) {
  const std::string name = field<std::string>(entry, key, file);
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    malformed(file,
              std::string("field '") + key + "' names '" + name + "', not a file in " + folder);
  }
  const std::string path = join(folder, name);
  std::error_code error;
  const std::uintmax_t bytes = fs::file_size(path, error);
  if (error) throw IoError("cannot read checkpoint array '" + path + "': " + error.message());
  const auto need =
      static_cast<std::uintmax_t>(rows) * static_cast<std::uintmax_t>(cols) * sizeof(float) +
      io::kArrayHeaderBytes;
  if (bytes != need) {
    malformed(path, fmt::format("{} bytes, but a [{}, {}] float array file has {}", bytes, rows,
                                cols, need));
  }
  const std::string recorded = field<std::string>(entry, (std::string(key) + "_crc").c_str(), file);
  io::StoredArray<float> array = io::read_array<float>(path, true, rows, cols);
  if (const std::size_t bad = io::first_non_finite(array.data); bad < array.data.size()) {
    malformed(path, fmt::format("value {} at index {} is not finite: a checkpoint holds the "
                                "weights of a run that had not diverged",
                                array.data[bad], bad));
  }
  if (io::crc_hex(array.crc) != recorded) {
    malformed(path, "its payload has CRC-32 " + io::crc_hex(array.crc) + ", but " + file +
                        " records " + recorded +
                        " for it: the file is not the one this "
                        "checkpoint wrote (another run's, or another parameter's)");
  }
  return std::move(array.data);
}

gnn::ParameterState read_parameter(const std::string& folder, const json& entry,
                                   const std::string& file) {
  gnn::ParameterState p;
  p.name = field<std::string>(entry, "name", file);
  p.rows = field<std::int64_t>(entry, "rows", file);
  p.cols = field<std::int64_t>(entry, "cols", file);
  // Widths of a model that fits in memory: the product cannot overflow below these bounds.
  constexpr std::int64_t kMaxSide = std::int64_t{1} << 31;
  if (p.rows < 0 || p.cols < 0 || p.rows > kMaxSide || p.cols > kMaxSide) {
    malformed(file, fmt::format("parameter '{}' has shape [{}, {}]", p.name, p.rows, p.cols));
  }
  p.value = read_tensor(folder, entry, "value", p.rows, p.cols, file);
  p.adam_m = read_tensor(folder, entry, "adam_m", p.rows, p.cols, file);
  p.adam_v = read_tensor(folder, entry, "adam_v", p.rows, p.cols, file);
  return p;
}

template <typename T> std::string text_of(const T& value) {
  if constexpr (std::is_same_v<T, std::string>)
    return "'" + value + "'";
  else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) {
    std::string text;
    for (std::size_t i = 0; i < value.size(); ++i)
      text += (i > 0 ? "-" : "") + std::to_string(value[i]);
    return text;
  } else if constexpr (std::is_same_v<T, bool>)
    return value ? "true" : "false";
  else
    return fmt::format("{}", value);
}

} // namespace

std::string run_json_text(const CheckpointRun& run) {
  return io::json_text(run_json(run));
}

void write_checkpoint(const std::string& dir, const Checkpoint& checkpoint) {
  const gnn::TrainState& state = checkpoint.state;
  const std::string current = current_epoch_folder(dir);
  const std::string name = new_epoch_folder(state.epoch, current);
  const std::string folder = join(dir, name);
  // A folder of this name that latest.json does not name is a leftover of an interrupted write.
  std::error_code ignored;
  fs::remove_all(folder, ignored);
  io::create_folder(folder);

  json parameters = json::array();
  for (std::size_t i = 0; i < state.parameters.size(); ++i) {
    const gnn::ParameterState& p = state.parameters[i];
    json entry = {{"name", p.name}, {"rows", p.rows}, {"cols", p.cols}};
    const auto write = [&](const char* key, const std::vector<float>& values) {
      const std::string file = fmt::format("param-{}.{}.bin", i, key);
      const std::uint32_t crc = io::write_array<float>(join(folder, file), values, p.rows, p.cols);
      entry[key] = file;
      entry[std::string(key) + "_crc"] = io::crc_hex(crc);
    };
    write("value", p.value);
    write("adam_m", p.adam_m);
    write("adam_v", p.adam_v);
    parameters.push_back(std::move(entry));
  }
  const json document = {{"format", kFormat},
                         {"format_version", checkpoint.format_version},
                         {"epoch", state.epoch},
                         {"run", run_json(checkpoint.run)},
                         {"adam_steps", state.adam_steps},
                         {"best_epoch", state.best_epoch},
                         {"best_val", metrics_json(state.best_val)},
                         {"test_at_best_val", metrics_json(state.test_at_best_val)},
                         {"final_test", metrics_json(state.final_test)},
                         {"parameters", std::move(parameters)}};
  // Written last: an epoch folder with checkpoint.json holds every array it names. latest.json
  // seals it by its CRC, as a store's manifest seals its parts: an edit is refused on resume.
  const std::string state_text = io::json_text(document);
  io::write_text_file(join(folder, kState), state_text);
  const json latest = {{"format", kFormat},
                       {"format_version", checkpoint.format_version},
                       {"checkpoint", name},
                       {"checkpoint_crc", text_crc(state_text)},
                       {"epoch", state.epoch}};
  io::write_text_file(join(dir, kLatest), io::json_text(latest));

  // Only now is the previous checkpoint no longer needed. A folder that cannot be removed costs
  // disk space but is never read again, so it does not fail a run that has saved its state.
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ignored)) {
    const std::string other = entry.path().filename().string();
    if (other != name && std::regex_match(other, kEpochFolder) && entry.is_directory(ignored) &&
        !entry.is_symlink(ignored)) {
      fs::remove_all(entry.path(), ignored);
    }
  }
}

Checkpoint read_checkpoint(const std::string& dir) {
  const std::string latest_file = join(dir, kLatest);
  const json latest = read_json(latest_file);
  if (field<std::string>(latest, "format", latest_file) != kFormat) {
    malformed(latest_file, std::string("field 'format' is not '") + kFormat + "'");
  }
  const int version = field<int>(latest, "format_version", latest_file);
  if (version < 1 || version > kCheckpointFormatVersion) {
    malformed(latest_file, fmt::format("field 'format_version' is {}, this build reads versions 1 "
                                       "to {}",
                                       version, kCheckpointFormatVersion));
  }
  const std::string name = field<std::string>(latest, "checkpoint", latest_file);
  if (!std::regex_match(name, kEpochFolder)) {
    malformed(latest_file, "field 'checkpoint' is '" + name + "', not an epoch folder's name");
  }
  const std::string folder = join(dir, name);
  const std::string file = join(folder, kState);
  std::string crc;
  const json state_json = read_json(file, &crc);
  if (version >= 3) {
    const std::string sealed = field<std::string>(latest, "checkpoint_crc", latest_file);
    if (sealed != crc) {
      malformed(file, "its CRC-32 is " + crc + ", but " + latest_file + " records " + sealed +
                          ": it was changed after the checkpoint was written");
    }
  }
  Checkpoint checkpoint;
  checkpoint.format_version = field<int>(state_json, "format_version", file);
  if (checkpoint.format_version != version) {
    malformed(file, fmt::format("field 'format_version' is {}, {} says {}",
                                checkpoint.format_version, latest_file, version));
  }
  checkpoint.run = read_run(state_json, file, version);
  gnn::TrainState& state = checkpoint.state;
  state.epoch = field<int>(state_json, "epoch", file);
  if (state.epoch < 1) malformed(file, fmt::format("field 'epoch' is {}", state.epoch));
  // latest.json names the epoch it points at: a folder of another epoch under that name (an
  // older checkpoint copied or renamed over it) would resume from the wrong place.
  if (latest.contains("epoch") || version >= 2) {
    const int latest_epoch = field<int>(latest, "epoch", latest_file);
    if (latest_epoch != state.epoch) {
      malformed(file, fmt::format("it holds epoch {}, but {} points at it as epoch {}: the "
                                  "folder is not the checkpoint latest.json was written for",
                                  state.epoch, latest_file, latest_epoch));
    }
  }
  state.adam_steps = field<std::int64_t>(state_json, "adam_steps", file);
  // Full-graph training takes one Adam step per epoch.
  if (state.adam_steps != state.epoch) {
    malformed(file, fmt::format("field 'adam_steps' is {}, but training takes one Adam step per "
                                "epoch and this checkpoint is of epoch {}",
                                state.adam_steps, state.epoch));
  }
  state.best_epoch = field<int>(state_json, "best_epoch", file);
  if (state.best_epoch < 0 || state.best_epoch > state.epoch) {
    malformed(file, fmt::format("field 'best_epoch' is {}, outside [0, {}]", state.best_epoch,
                                state.epoch));
  }
  state.best_val = read_metrics(state_json, "best_val", file);
  state.test_at_best_val = read_metrics(state_json, "test_at_best_val", file);
  state.final_test = read_metrics(state_json, "final_test", file);
  if (!state_json.contains("parameters") || !state_json.at("parameters").is_array()) {
    malformed(file, "missing field 'parameters' (an array)");
  }
  for (const json& entry : state_json.at("parameters")) {
    if (!entry.is_object()) malformed(file, "an entry of 'parameters' is not an object");
    state.parameters.push_back(read_parameter(folder, entry, file));
  }
  return checkpoint;
}

std::vector<std::string> check_resumable(const std::string& dir, const CheckpointRun& saved,
                                         const CheckpointRun& current) {
  const auto refuse_if = [&](const char* what, const auto& was, const auto& is) {
    if (was == is) return;
    throw InvalidArgument("checkpoint " + dir + " was made for " + what + " " + text_of(was) +
                          ", this run has " + text_of(is) + ": it cannot be resumed here");
  };
  refuse_if("task", saved.task, current.task);
  refuse_if("decoder", saved.decoder, current.decoder);
  refuse_if("decoder hidden width", saved.decoder_hidden, current.decoder_hidden);
  refuse_if("decoder layers", saved.decoder_layers, current.decoder_layers);
  refuse_if("dataset", saved.dataset, current.dataset);
  // A version 1 checkpoint records no checksum: its data is matched by name and shape alone.
  if (!saved.dataset_checksum.empty() && saved.dataset_checksum != current.dataset_checksum) {
    throw InvalidArgument("checkpoint " + dir + " was made for dataset '" + saved.dataset +
                          "' with checksum " + saved.dataset_checksum +
                          " (graph, features and "
                          "labels); this run's data has checksum " +
                          current.dataset_checksum +
                          ": the same name, other data. It cannot be resumed here (running a "
                          "trained model on other data is another act)");
  }
  refuse_if("num_nodes", saved.num_nodes, current.num_nodes);
  refuse_if("features (input width)", saved.features, current.features);
  refuse_if("classes", saved.classes, current.classes);
  refuse_if("model", saved.model_name, current.model_name);
  refuse_if("layer sizes", saved.layer_sizes, current.layer_sizes);
  refuse_if("bias", saved.model.bias, current.model.bias);
  // The features the weights were trained on: a resumed run must see them scaled the same way.
  if (saved.row_normalized && current.row_normalized &&
      *saved.row_normalized != *current.row_normalized) {
    throw InvalidArgument(fmt::format(
        "checkpoint {} was made with input features {}, this run's are {}: it cannot be resumed "
        "here (pass --normalize-features {})",
        dir, *saved.row_normalized ? "row-normalized" : "as stored",
        *current.row_normalized ? "row-normalized" : "as stored", *saved.row_normalized));
  }

  std::vector<std::string> notes;
  const auto note_if = [&](const char* what, const auto& was, const auto& is) {
    if (was == is) return;
    notes.push_back(fmt::format("resuming with {} {} (the checkpoint's run had {})", what,
                                text_of(is), text_of(was)));
  };
  note_if("--seed", saved.seed, current.seed);
  note_if("--lr", saved.adam.lr, current.adam.lr);
  note_if("--weight-decay", saved.adam.weight_decay, current.adam.weight_decay);
  note_if("adamw", saved.adam.decoupled, current.adam.decoupled);
  note_if("--dropout", saved.model.dropout, current.model.dropout);
  note_if("--activation-dtype", to_string(saved.model.activation_dtype),
          to_string(current.model.activation_dtype));
  note_if("decay on the first layer only", saved.model.decay_first_layer_only,
          current.model.decay_first_layer_only);
  return notes;
}

} // namespace tessera::runtime
