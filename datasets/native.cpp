// The native dataset format: a folder of array files plus dataset.json, read at disk speed, so a
// large graph is parsed (or generated) once. tessera-convert writes it; "native:DIR" reads it.
//
// Layout of DIR:
//   dataset.json   {"format_version", "name", "num_nodes", "num_classes", "nnz",
//                   "feature_kind", "feature_width", "feature_nnz"}, written last
//   adj_row_ptr.bin, adj_col.bin, adj_val.bin       symmetric adjacency [N, N]
//   features.bin | feat_row_ptr.bin, feat_col.bin, feat_val.bin   (absent without features)
//   labels.bin, train_idx.bin, val_idx.bin, test_idx.bin
// Each .bin file is a 64-byte header plus payload (src/io/array_file.cpp).
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tessera/io/array_file.hpp"
#include "tessera/io/files.hpp"
#include "assembly.hpp"
#include "tessera/io/graph_files.hpp"
#include "loaders.hpp"
#include "tessera/io/text_input.hpp"
#include "tessera/core/error.hpp"

namespace tessera::datasets {

namespace {

namespace fs = std::filesystem;
constexpr int kNativeFormatVersion = 1;

std::string description_path(const std::string& dir) {
  return (fs::path(dir) / "dataset.json").string();
}

}  // namespace

namespace detail {

bool is_native_dataset(const std::string& path) {
  return fs::is_directory(path) && fs::exists(description_path(path));
}

}  // namespace detail

void save_native(const Dataset& dataset, const std::string& dir) {
  // The description goes last: a folder without it is never taken for a complete dataset.
  io::create_folder(dir);
  io::remove_file(description_path(dir));
  std::vector<std::uint32_t> crcs;
  io::write_graph_files(dir, dataset.adjacency, dataset.features, dataset.labels,
                            dataset.train_idx, dataset.val_idx, dataset.test_idx, crcs);
  nlohmann::ordered_json description = {{"format_version", kNativeFormatVersion},
                                        {"name", dataset.name},
                                        {"num_nodes", dataset.num_nodes},
                                        {"num_classes", dataset.num_classes}};
  io::add_shape(description, io::graph_files_shape(dataset.adjacency, dataset.features));
  io::write_text_file(description_path(dir), description.dump(2) + "\n");
}

namespace detail {

Dataset load_native(const BackendPtr& backend, const std::string& dir) {
  detail::require_host(backend);
  const std::string path = description_path(dir);
  if (!fs::exists(path)) {
    throw IoError("'" + dir + "' is not a native dataset folder (no dataset.json; write one with "
                  "tessera-convert --out DIR)");
  }
  Dataset ds;
  io::GraphFilesShape shape;
  int version = 0;
  try {
    const nlohmann::json description = nlohmann::json::parse(io::read_text_file(path));
    description.at("format_version").get_to(version);
    if (version != kNativeFormatVersion) {
      throw FormatError(path + ": native dataset format version " + std::to_string(version) +
                        ", this build reads version " + std::to_string(kNativeFormatVersion));
    }
    description.at("name").get_to(ds.name);
    description.at("num_nodes").get_to(ds.num_nodes);
    description.at("num_classes").get_to(ds.num_classes);
    shape = io::read_shape(description, ds.num_nodes, ds.num_nodes, path);
  } catch (const nlohmann::json::exception& e) {
    throw FormatError(path + ": malformed dataset description: " + e.what());
  }
  std::vector<std::uint32_t> crcs;
  io::move_graph_files(io::read_graph_files(dir, shape, crcs), ds);
  return ds;
}

}  // namespace detail
}  // namespace tessera::datasets
