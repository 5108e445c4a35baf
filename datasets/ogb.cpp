// OGB node-property datasets in the folder layout the ogb package leaves after download:
// DIR/raw/{num-node-list,node-label,node-feat,edge}.csv.gz and DIR/split/<scheme>/{train,valid,
// test}.csv.gz. Every count comes from the rows read; num-node-list is checked against them.
#include "assembly.hpp"
#include "loaders.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/text_input.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

namespace tessera::datasets::detail {

namespace {

namespace fs = std::filesystem;

/// DIR/raw/NAME.csv.gz, or the plain NAME.csv beside it when only that exists.
std::string raw_file(const std::string& dir, const std::string& name) {
  const fs::path raw = fs::path(dir) / "raw";
  return io::first_existing(
      {(raw / (name + ".csv.gz")).string(), (raw / (name + ".csv")).string()});
}

/// The one number of num-node-list (a node-property dataset holds one graph).
std::int64_t read_node_count(const std::string& path) {
  io::LineReader in(path);
  std::string_view line;
  std::int64_t count = -1;
  while (in.next(line)) {
    if (io::is_blank(line)) continue;
    if (count >= 0) {
      in.fail("a second graph: a node-property dataset has one graph, so num-node-list holds one "
              "number");
    }
    count = io::parse_int(in, line, "the node count");
    if (count < 1) in.fail("node count " + std::to_string(count) + " (expected at least 1)");
  }
  if (count < 0) throw FormatError(path + ": empty (expected the node count)");
  return count;
}

/// One label per line: a class id, or "nan" for a node without one (-1).
std::vector<std::int32_t> read_labels(const std::string& path) {
  std::vector<std::int32_t> labels;
  std::vector<std::string_view> fields;
  io::LineReader in(path);
  std::string_view line;
  while (in.next(line)) {
    io::split_on(line, ',', fields);
    if (fields.size() != 1) {
      in.fail(std::to_string(fields.size()) +
              " columns: multi-label tasks are not supported (one class id per line)");
    }
    if (fields[0] == "nan" || fields[0] == "NaN") {
      labels.push_back(-1);
      continue;
    }
    // Class ids are often written as floats ("3.0") when a column held NaNs.
    const double value = io::parse_double(in, fields[0], "a class id or nan");
    if (value != std::floor(value) || value < 0 ||
        value > static_cast<double>(std::numeric_limits<std::int32_t>::max())) {
      in.fail("label " + io::quote(fields[0]) + " is not a class id (an integer >= 0) or nan");
    }
    labels.push_back(static_cast<std::int32_t>(value));
  }
  return labels;
}

/// [num_nodes, F] dense features, F from the first row; every row must have F values and there
/// must be exactly num_nodes rows.
Dense read_features(const BackendPtr& backend, const std::string& path, std::int64_t num_nodes) {
  io::LineReader in(path);
  std::vector<std::string_view> fields;
  std::string_view line;
  Dense x;
  std::int64_t row = 0;
  while (in.next(line)) {
    io::split_on(line, ',', fields);
    if (row == 0) x = Dense(backend, num_nodes, static_cast<std::int64_t>(fields.size()));
    if (row >= num_nodes) {
      in.fail("more feature rows than the " + std::to_string(num_nodes) +
              " nodes of node-label (row " + std::to_string(row) + ")");
    }
    if (static_cast<std::int64_t>(fields.size()) != x.cols()) {
      in.fail(std::to_string(fields.size()) + " values, the first row has " +
              std::to_string(x.cols()));
    }
    float* out = x.data() + row * x.cols();
    for (std::size_t c = 0; c < fields.size(); ++c) {
      const double value = io::parse_double(in, fields[c], "a feature value");
      if (!std::isfinite(static_cast<float>(value))) {
        in.fail("feature value " + io::quote(fields[c]) + " in column " + std::to_string(c + 1) +
                " " + io::not_finite_reason(value));
      }
      out[c] = static_cast<float>(value);
    }
    ++row;
  }
  if (row != num_nodes) {
    throw FormatError(path + ": " + std::to_string(row) + " feature rows for the " +
                      std::to_string(num_nodes) + " nodes of node-label");
  }
  return x;
}

/// Node ids of one split file, ascending; `owner` marks which split took each node (0: none)
/// so a node in two splits is refused.
std::vector<std::int32_t> read_split(const std::string& path, std::int64_t num_nodes,
                                     std::vector<std::uint8_t>& owner, std::uint8_t me,
                                     const char* const* names) {
  std::vector<std::int32_t> ids;
  io::LineReader in(path);
  std::string_view line;
  while (in.next(line)) {
    if (io::is_blank(line)) continue;
    const std::int64_t id = io::parse_int(in, line, "a node id");
    if (id < 0 || id >= num_nodes) {
      in.fail("node id " + std::to_string(id) + " is outside [0, " + std::to_string(num_nodes) +
              ")");
    }
    if (owner[id] != 0) {
      in.fail("node " + std::to_string(id) +
              (owner[id] == me ? " is listed twice"
                               : " is also in " + std::string(names[owner[id] - 1])));
    }
    owner[id] = me;
    ids.push_back(static_cast<std::int32_t>(id));
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

/// DIR/split/<scheme>: the one scheme the folder holds.
std::string split_folder(const std::string& dir) {
  const fs::path root = fs::path(dir) / "split";
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return {};
  std::vector<std::string> schemes;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (entry.is_directory(ec)) schemes.push_back(entry.path().filename().string());
  }
  std::sort(schemes.begin(), schemes.end());
  if (schemes.size() != 1) {
    std::string listed;
    for (const auto& s : schemes)
      listed += (listed.empty() ? "" : ", ") + s;
    throw FormatError(root.string() + ": expected one split scheme folder, found " +
                      std::to_string(schemes.size()) +
                      (schemes.empty() ? "" : " (" + listed + ")"));
  }
  return (root / schemes.front()).string();
}

} // namespace

Dataset load_ogb(const BackendPtr& backend, const std::string& dir) {
  require_host(backend);
  std::error_code ec;
  if (!fs::is_directory(fs::path(dir) / "raw", ec)) {
    throw IoError("ogb: '" + dir +
                  "' has no raw/ folder: expected an OGB node-property dataset "
                  "folder as the ogb package leaves it (raw/edge.csv.gz, raw/node-label.csv.gz, "
                  "raw/num-node-list.csv.gz, split/<scheme>/...)");
  }
  Dataset ds;
  ds.name = fs::path(dir).lexically_normal().filename().string();
  if (ds.name.empty()) ds.name = fs::path(dir).lexically_normal().parent_path().filename().string();

  const std::string labels_path = raw_file(dir, "node-label");
  ds.labels = read_labels(labels_path);
  ds.num_nodes = static_cast<std::int64_t>(ds.labels.size());
  check_node_count(ds.num_nodes, labels_path);
  const std::string count_path = raw_file(dir, "num-node-list");
  if (const std::int64_t stated = read_node_count(count_path); stated != ds.num_nodes) {
    throw FormatError(count_path + ": says " + std::to_string(stated) + " nodes, but " +
                      labels_path + " has " + std::to_string(ds.num_nodes) + " rows");
  }
  ds.num_classes = count_classes(
      ds.labels, labels_path, [](std::int64_t row) { return "line " + std::to_string(row + 1); });

  const std::string features_path = raw_file(dir, "node-feat");
  std::string feature_source = features_path;
  if (fs::exists(features_path, ec)) {
    ds.features.dense = read_features(backend, features_path, ds.num_nodes);
  } else {
    ds.features.sparse = identity_features(backend, ds.num_nodes); // e.g. ogbn-proteins
    feature_source.clear();
  }
  const std::string edges_path = raw_file(dir, "edge");
  ds.adjacency = graph::build_symmetric_csr(
      backend, read_edge_csv(edges_path, ds.num_nodes, false, labels_path));

  if (const std::string split = split_folder(dir); !split.empty()) {
    static const char* const kNames[] = {"train", "valid", "test"};
    std::vector<std::uint8_t> owner(static_cast<std::size_t>(ds.num_nodes), 0);
    std::vector<std::int32_t>* out[] = {&ds.train_idx, &ds.val_idx, &ds.test_idx};
    for (std::uint8_t k = 0; k < 3; ++k) {
      const std::string base = (fs::path(split) / kNames[k]).string();
      *out[k] = read_split(io::first_existing({base + ".csv.gz", base + ".csv"}), ds.num_nodes,
                           owner, static_cast<std::uint8_t>(k + 1), kNames);
    }
    // Checked as stored (check_stored_splits): an empty train file is refused, not replaced by
    // a random split, and a node of the split without a label is named with its file.
    ds.split_stored = true;
    ds.origin.split = split + ": train, valid, test";
  }
  check_loaded(ds, {.features = feature_source, .edges = edges_path, .labels = labels_path});
  return ds;
}

} // namespace tessera::datasets::detail
