// The native dataset format: a folder of array files plus dataset.json, read at disk speed, so a
// large graph is parsed (or generated) once. tessera-convert writes it; "native:DIR" reads it.
//
// Layout of DIR:
//   dataset.json   {"format_version", "name", "num_nodes", "num_classes", "nnz",
//                   "feature_kind", "feature_width", "feature_nnz", "num_splits"}, written last
//   adj_row_ptr.bin, adj_col.bin, adj_val.bin       symmetric adjacency [N, N]
//   features.bin | feat_row_ptr.bin, feat_col.bin, feat_val.bin   (absent without features)
//   labels.bin, train_idx.bin, val_idx.bin, test_idx.bin   (split 0; all empty without a split)
//   split-K/train_idx.bin, val_idx.bin, test_idx.bin       split K = 1 .. num_splits - 1, when
//                                                          the data stores several
// num_splits is 0 or 1 for one split or none (a folder written before it existed: 1 when
// train_idx.bin holds ids).
// Each .bin file is a 64-byte header plus payload (src/io/array_file.cpp). load_dataset_rows
// reads only a block of rows of each (the split files, ascending ids, by binary search).
#include "assembly.hpp"
#include "loaders.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/datasets/numpy_files.hpp"
#include "tessera/io/array_file.hpp"
#include "tessera/io/files.hpp"
#include "tessera/io/graph_files.hpp"
#include "tessera/io/json_fields.hpp"
#include "tessera/io/text_input.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace tessera::datasets {

namespace {

namespace fs = std::filesystem;
constexpr int kNativeFormatVersion = 1;

std::string description_path(const std::string& dir) {
  return (fs::path(dir) / "dataset.json").string();
}

/// The folder of split `k` >= 1 (split 0 is the top folder's files).
std::string split_folder(const std::string& dir, std::int64_t k) {
  return (fs::path(dir) / ("split-" + std::to_string(k))).string();
}

} // namespace

namespace detail {

bool is_native_dataset(const std::string& path) {
  return fs::is_directory(path) && fs::exists(description_path(path));
}

void throw_not_native(const std::string& dir) {
  throw IoError("'" + dir +
                "' has no dataset.json (not a native dataset; tessera-convert "
                "writes one)");
}

} // namespace detail

namespace {

/// Whether `path` ends in `suffix` (lower case), in any case.
bool ends_in(std::string_view path, std::string_view suffix) noexcept {
  if (path.size() < suffix.size()) return false;
  const std::string_view end = path.substr(path.size() - suffix.size());
  return std::equal(end.begin(), end.end(), suffix.begin(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == b;
  });
}

} // namespace

bool is_npz_path(std::string_view out) noexcept {
  return ends_in(out, ".npz");
}

bool is_npy_path(std::string_view path) noexcept {
  return ends_in(path, ".npy");
}

void check_save_target(const std::string& out, bool replace) {
  if (is_npz_path(out)) {
    io::check_output_file(out);
    // An existing file is replaced only when asked, as an existing folder is.
    std::error_code error;
    if (!replace && fs::exists(fs::symlink_status(out, error))) {
      throw OutputExists("'" + out + "' already exists, and replacing it was not asked for");
    }
  } else {
    io::check_output_folder(out, "native dataset", replace);
  }
}

void save_native(const Dataset& dataset, const std::string& dir, bool replace) {
  // Held for the whole write: refuses "/", a foreign or non-empty folder, an existing dataset
  // unless `replace`, and a second writer of the same folder.
  const io::OutputFolder folder(dir, "native dataset", replace);
  const ProgressStage progress("writing " + dir);
  // The description goes last: a folder without it is never taken for a complete dataset.
  io::remove_file(description_path(dir));
  std::vector<std::uint32_t> crcs;
  // Several stored splits: split 0 in the top folder, split K in split-K/, in the data's order.
  const std::vector<Split>& splits = dataset.all_splits;
  const Split first =
      splits.empty() ? Split{dataset.train_idx, dataset.val_idx, dataset.test_idx} : splits.front();
  io::write_graph_files(dir, dataset.adjacency, dataset.features, dataset.labels, first.train,
                        first.val, first.test, crcs);
  for (std::size_t k = 1; k < splits.size(); ++k) {
    io::write_split_files(split_folder(dir, static_cast<std::int64_t>(k)), splits[k].train,
                          splits[k].val, splits[k].test);
  }
  nlohmann::ordered_json description = {{"format_version", kNativeFormatVersion},
                                        {"name", dataset.name},
                                        {"num_nodes", dataset.num_nodes},
                                        {"num_classes", dataset.num_classes}};
  io::add_shape(description, io::graph_files_shape(dataset.adjacency, dataset.features));
  description["num_splits"] = dataset.num_splits();
  description["row_normalize_features"] = dataset.row_normalize;
  // json_text: a name taken from a non-UTF-8 file name must not throw halfway through.
  io::write_text_file(description_path(dir), io::json_text(description));
}

namespace {

/// What dataset.json records.
struct Description {
  std::string name;
  std::int64_t num_nodes = 0;
  std::int32_t num_classes = 0;
  io::GraphFilesShape shape;
  std::int64_t num_splits = -1; ///< -1: not recorded (a folder written before it was)
  bool row_normalize = false;   ///< absent in folders written before it was: by name only
};

Description read_description(const std::string& dir) {
  const std::string path = description_path(dir);
  if (!fs::exists(path)) detail::throw_not_native(dir);
  Description d;
  int version = 0;
  try {
    const nlohmann::json description = nlohmann::json::parse(io::read_text_file(path));
    io::get_integer(description, "format_version", version, path);
    if (version != kNativeFormatVersion) {
      throw FormatError(path + ": native dataset format version " + std::to_string(version) +
                        ", this build reads version " + std::to_string(kNativeFormatVersion));
    }
    description.at("name").get_to(d.name);
    io::get_integer(description, "num_nodes", d.num_nodes, path);
    std::int64_t num_classes = 0; // 64 bits: get_to an int32 would wrap a huge count silently
    io::get_integer(description, "num_classes", num_classes, path);
    d.shape = io::read_shape(description, d.num_nodes, d.num_nodes, path);
    detail::check_node_count(d.num_nodes, path);
    // A first bound before anything is read; check_loaded applies the one of the labelled rows.
    if (num_classes < 0 || num_classes > detail::max_class_count(d.num_nodes)) {
      throw FormatError(path + ": num_classes is " + std::to_string(num_classes) + " for " +
                        std::to_string(d.num_nodes) + " nodes; expected 0 to nodes + " +
                        std::to_string(detail::kClassSlack));
    }
    d.num_classes = static_cast<std::int32_t>(num_classes);
    if (description.contains("num_splits")) {
      io::get_integer(description, "num_splits", d.num_splits, path);
      // Each split is a folder of three files: far more than nodes cannot be this data's.
      if (d.num_splits < 0 || d.num_splits > d.num_nodes + 1) {
        throw FormatError(path + ": num_splits is " + std::to_string(d.num_splits) + " for " +
                          std::to_string(d.num_nodes) + " nodes");
      }
    }
    if (description.contains("row_normalize_features")) {
      const nlohmann::json& flag = description.at("row_normalize_features");
      if (!flag.is_boolean()) {
        throw FormatError(path + ": row_normalize_features is " + flag.dump() +
                          ", expected true or false");
      }
      d.row_normalize = flag.get<bool>();
    }
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(path + ": malformed dataset description: " + e.what());
  }
  return d;
}

/// The files a native dataset's arrays come from, for check_loaded's messages.
detail::Sources sources_of(const std::string& dir, const Description& d) {
  const auto file = [&](const char* name) { return (fs::path(dir) / name).string(); };
  return {.features = file(d.shape.feature_kind == "dense" ? "features.bin" : "feat_val.bin"),
          .edges = file("adj_val.bin"),
          .labels = file("labels.bin"),
          .class_count = description_path(dir) + ": num_classes"};
}

} // namespace

namespace detail {

namespace {

/// How many splits the folder stores: as recorded, or (a folder written before num_splits was)
/// 1 when its top split files hold any id, else 0.
std::int64_t split_count(const std::string& dir, const Description& d) {
  if (d.num_splits >= 0) return d.num_splits;
  for (const char* name : {"train_idx.bin", "val_idx.bin", "test_idx.bin"}) {
    if (io::ArrayReader<std::int32_t>((fs::path(dir) / name).string(), false).rows() > 0) return 1;
  }
  return 0;
}

/// Where split `k` of the folder lies, for messages.
std::string split_origin(const std::string& dir, std::int64_t k) {
  const std::string folder = k == 0 ? dir : split_folder(dir, k);
  return folder + ": train_idx.bin, val_idx.bin, test_idx.bin";
}

} // namespace

Dataset load_native(const BackendPtr& backend, const std::string& dir, int split_index) {
  require_host(backend);
  const Description d = read_description(dir);
  const std::int64_t num_splits = split_count(dir, d);
  check_split_index(split_index, num_splits, dir);
  Dataset ds;
  ds.name = d.name;
  ds.row_normalize = d.row_normalize;
  ds.num_nodes = d.num_nodes;
  ds.num_classes = d.num_classes;
  std::vector<std::uint32_t> crcs;
  io::move_graph_files(io::read_graph_files(dir, d.shape, crcs), ds);
  ds.split_stored = num_splits > 0;
  if (num_splits > 1) {
    ds.all_splits.push_back({ds.train_idx, ds.val_idx, ds.test_idx});
    for (std::int64_t k = 1; k < num_splits; ++k) {
      io::GraphFiles split;
      io::read_split_files(split_folder(dir, k), ds.num_nodes, split);
      ds.all_splits.push_back(
          {std::move(split.train_idx), std::move(split.val_idx), std::move(split.test_idx)});
    }
    const Split& chosen = ds.all_splits[static_cast<std::size_t>(split_index)];
    ds.train_idx = chosen.train;
    ds.val_idx = chosen.val;
    ds.test_idx = chosen.test;
  }
  const auto file = [&](const char* name) { return (fs::path(dir) / name).string(); };
  check_adjacency(ds.adjacency, file("adj_col.bin"), file("adj_val.bin"));
  ds.origin = {description_path(dir) + ": feature_width", "",
               num_splits > 1 ? dir + ": split folders" : split_origin(dir, 0)};
  check_loaded(ds, sources_of(dir, d));
  return ds;
}

std::int64_t native_split_count(const std::string& dir) {
  return split_count(dir, read_description(dir));
}

RowBlock load_native_rows(const std::string& dir,
                          const std::function<RowRange(std::int64_t num_nodes)>& choose,
                          int split_index, bool allow_overlap) {
  const Description d = read_description(dir);
  check_split_index(split_index, split_count(dir, d), dir);
  const RowRange rows = choose(d.num_nodes);
  io::GraphFiles files = io::read_graph_file_rows(dir, d.shape, rows.first, rows.last);
  if (split_index > 0) {
    io::read_split_file_rows(split_folder(dir, split_index), d.num_nodes, rows.first, rows.last,
                             files);
  }
  const Sources sources = sources_of(dir, d);
  // The class count was bounded by the node count; its bound by the labelled rows needs them all.
  check_finite(files.adjacency, files.features, sources, rows.first);
  // Symmetry needs every row: the blocks of all ranks check it together (symmetry_sums).
  check_adjacency_rows(files.adjacency, rows.first, (fs::path(dir) / "adj_col.bin").string(),
                       sources.edges);
  check_labels(files.labels, d.num_classes, sources.labels, sources.class_count,
               [&](std::int64_t i) { return "row " + std::to_string(rows.first + i); });
  check_split_parts({files.train_idx, files.val_idx, files.test_idx}, files.labels, rows.first,
                    split_origin(dir, split_index), sources.labels, "", allow_overlap);
  RowBlock block = make_row_block(d.name, d.num_nodes, d.num_classes, rows, std::move(files));
  block.row_normalize = d.row_normalize || recipe_row_normalizes(d.name);
  return block;
}

} // namespace detail
} // namespace tessera::datasets
