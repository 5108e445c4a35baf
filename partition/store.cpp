// The partition store: writing every part's tile plus manifest.json, and loading one part back.
//
// Layout of a store directory `dir`:
//   dir/manifest.json        Manifest (format version, dataset name and checksum, method, seed,
//                            part count, per-part sizes and checksums, quality), pretty-printed
//   dir/part-00000/ ...      one folder per part:
//     part.json              n_owned, n_ghost, nnz, num_classes, feature kind/width/nnz, part,
//                            num_parts, num_global_nodes
//     owned_ids.bin          int64 [n_owned]             global id of each owned row
//     ghost_ids.bin          int64 [n_ghost]             global id of each ghost row
//     ghost_owner.bin        int32 [n_ghost]             owning part of each ghost
//     degree.bin             int64 [n_owned + n_ghost]   global degree of each local vertex
//     adj_row_ptr.bin        int64 [n_owned + 1]         local CSR [n_owned, n_owned + n_ghost]
//     adj_col.bin            int32 [nnz]
//     adj_val.bin            float32 [nnz]
//     features.bin           float32 [n_owned, F]        dense features, or for sparse ones:
//     feat_row_ptr.bin       int64 [n_owned + 1]
//     feat_col.bin           int32 [feature nnz]
//     feat_val.bin           float32 [feature nnz]
//     labels.bin             int32 [n_owned] (or [0] when unlabelled)
//     train_idx.bin, val_idx.bin, test_idx.bin   int32, local owned row ids, ascending
// Each .bin file is a 64-byte header plus payload (format in src/io/array_file.cpp).
//
// Checksums: dataset_checksum is the CRC-32 over the whole dataset's adjacency row_ptr, col and
// val, its features (dense data, or sparse row_ptr, col, val) and labels, in that order;
// part_checksums[p] is the CRC-32 over the payload CRCs (u32 little-endian) of part p's .bin
// files in the order above. Both are written as 8 hex digits.
//
// Crash safety: every file is written to "<name>.tmp" and renamed. Writing into an existing
// store first removes its manifest.json, so during the rewrite the directory reads as
// incomplete (read_manifest throws IoError) and it becomes a store again only when the new
// manifest is renamed into place, last. Part folders beyond the new part count are removed.
#include "tessera/partition/store.hpp"

#include "tessera/io/array_file.hpp"
#include "tessera/io/files.hpp"
#include "tessera/io/graph_files.hpp"
#include "tessera/io/text_input.hpp"
#include "tessera/core/error.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace tessera::partition {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
/// Written objects keep their keys in the order given, so manifests read top-down.
using nlohmann::ordered_json;

std::string part_folder(const std::string& dir, int part) {
  char name[32];
  std::snprintf(name, sizeof name, "part-%05d", part);
  return (fs::path(dir) / name).string();
}

std::string manifest_path(const std::string& dir) {
  return (fs::path(dir) / "manifest.json").string();
}


template <typename T> std::uint32_t crc_of(std::uint32_t crc, const T* data, std::int64_t count) {
  return io::crc32_update(crc, data, static_cast<std::size_t>(count) * sizeof(T));
}

std::uint32_t crc_of_csr(std::uint32_t crc, const Csr& m) {
  if (m.row_ptr() == nullptr) return crc; // a default-constructed, empty matrix
  crc = crc_of(crc, m.row_ptr(), m.rows() + 1);
  crc = crc_of(crc, m.col(), m.nnz());
  return crc_of(crc, m.val(), m.nnz());
}

std::string dataset_checksum(const datasets::Dataset& dataset) {
  std::uint32_t crc = crc_of_csr(0, dataset.adjacency);
  if (dataset.features.dense) {
    crc = crc_of(crc, dataset.features.dense->data(), dataset.features.dense->size());
  } else if (dataset.features.sparse) {
    crc = crc_of_csr(crc, *dataset.features.sparse);
  }
  crc = crc_of(crc, dataset.labels.data(), static_cast<std::int64_t>(dataset.labels.size()));
  return io::crc_hex(crc);
}

/// The CRC over a part's payload CRCs, each as 4 little-endian bytes.
std::string part_checksum(const std::vector<std::uint32_t>& crcs) {
  std::uint32_t crc = 0;
  for (const std::uint32_t c : crcs) {
    const unsigned char bytes[4] = {
        static_cast<unsigned char>(c), static_cast<unsigned char>(c >> 8),
        static_cast<unsigned char>(c >> 16), static_cast<unsigned char>(c >> 24)};
    crc = io::crc32_update(crc, bytes, sizeof bytes);
  }
  return io::crc_hex(crc);
}

template <typename T> std::span<const T> span_of(const T* data, std::int64_t count) {
  return {data, static_cast<std::size_t>(count)};
}
template <typename T> std::span<const T> span_of(const std::vector<T>& v) {
  return {v.data(), v.size()};
}

/// Writes one tile's files into `folder`; returns the payload CRCs in file order.
std::vector<std::uint32_t> write_tile(const std::string& folder, const LocalGraph& tile) {
  io::create_folder(folder);
  const auto file = [&](const char* name) { return (fs::path(folder) / name).string(); };
  std::vector<std::uint32_t> crcs;
  crcs.push_back(io::write_array(file("owned_ids.bin"), span_of(tile.owned_ids), tile.n_owned()));
  crcs.push_back(io::write_array(file("ghost_ids.bin"), span_of(tile.ghost_ids), tile.n_ghost()));
  crcs.push_back(io::write_array(file("ghost_owner.bin"), span_of(tile.ghost_owner), tile.n_ghost()));
  crcs.push_back(io::write_array(file("degree.bin"), span_of(tile.degree),
                             static_cast<std::int64_t>(tile.degree.size())));
  io::write_graph_files(folder, tile.adjacency, tile.features, tile.labels, tile.train_idx,
                    tile.val_idx, tile.test_idx, crcs);

  ordered_json info = {{"part", tile.part},
                       {"num_parts", tile.num_parts},
                       {"num_global_nodes", tile.num_global_nodes},
                       {"n_owned", tile.n_owned()},
                       {"n_ghost", tile.n_ghost()},
                       {"num_classes", tile.num_classes}};
  io::add_shape(info, io::graph_files_shape(tile.adjacency, tile.features));
  io::write_text_file(file("part.json"), info.dump(2) + "\n");
  return crcs;
}

ordered_json quality_to_json(const Quality& q) {
  return {{"edge_cut", q.edge_cut},
          {"total_volume", q.total_volume},
          {"max_send", q.max_send},
          {"max_recv", q.max_recv},
          {"mean_send", q.mean_send},
          {"mean_recv", q.mean_recv},
          {"vertex_balance", q.vertex_balance},
          {"edge_balance", q.edge_balance},
          {"part_nodes", q.part_nodes},
          {"ghosts", q.ghosts},
          {"send", q.send},
          {"recv", q.recv},
          {"broadcast_volume", q.broadcast_volume}};
}

Quality quality_from_json(const json& j) {
  Quality q;
  j.at("edge_cut").get_to(q.edge_cut);
  j.at("total_volume").get_to(q.total_volume);
  j.at("max_send").get_to(q.max_send);
  j.at("max_recv").get_to(q.max_recv);
  j.at("mean_send").get_to(q.mean_send);
  j.at("mean_recv").get_to(q.mean_recv);
  j.at("vertex_balance").get_to(q.vertex_balance);
  j.at("edge_balance").get_to(q.edge_balance);
  j.at("part_nodes").get_to(q.part_nodes);
  j.at("ghosts").get_to(q.ghosts);
  j.at("send").get_to(q.send);
  j.at("recv").get_to(q.recv);
  j.at("broadcast_volume").get_to(q.broadcast_volume);
  return q;
}

ordered_json manifest_to_json(const Manifest& m) {
  return {{"format_version", m.format_version},
          {"dataset", m.dataset},
          {"dataset_checksum", m.dataset_checksum},
          {"method", m.method},
          {"vertex_weight", m.vertex_weight},
          {"objective", m.objective},
          {"part_weights", m.part_weights},
          {"reorder", m.reorder},
          {"seed", m.seed},
          {"num_parts", m.num_parts},
          {"num_nodes", m.num_nodes},
          {"part_nodes", m.part_nodes},
          {"part_checksums", m.part_checksums},
          {"quality", quality_to_json(m.quality)}};
}

/// Parses `path` as JSON; FormatError naming the file when it is not.
json parse_json_file(const std::string& path) {
  const std::string text = io::read_text_file(path);
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw FormatError("partition store file '" + path + "': not valid JSON: " + e.what());
  }
}

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw FormatError("partition store file '" + path + "': " + problem);
}




} // namespace

void write_store(const std::string& dir, const datasets::Dataset& dataset,
                 const Partition& partition, const Options& options, Reorder reorder,
                 const Quality& quality) {
  if (partition.num_parts < 1) {
    throw InvalidArgument("write_store: the partition has " + std::to_string(partition.num_parts) +
                          " parts");
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IoError("cannot create partition store '" + dir + "': " + ec.message());
  // An existing store stops looking complete before any of its parts changes.
  fs::remove(manifest_path(dir), ec);
  if (ec) throw IoError("cannot replace '" + manifest_path(dir) + "': " + ec.message());

  Manifest manifest;
  manifest.dataset = dataset.name;
  manifest.dataset_checksum = dataset_checksum(dataset);
  manifest.method = to_string(options.method);
  manifest.vertex_weight = to_string(options.vertex_weight);
  manifest.objective = to_string(options.objective);
  manifest.part_weights = options.part_weights;
  manifest.reorder = reorder == Reorder::Rcm ? "rcm" : "none";
  manifest.seed = options.seed;
  manifest.num_parts = partition.num_parts;
  manifest.num_nodes = dataset.num_nodes;
  manifest.quality = quality;
  for (int p = 0; p < partition.num_parts; ++p) {
    const LocalGraph tile = build_local_graph(dataset, partition, p, reorder);
    manifest.part_nodes.push_back(tile.n_owned());
    manifest.part_checksums.push_back(part_checksum(write_tile(part_folder(dir, p), tile)));
  }
  // Folders of a previous store with more parts.
  for (int p = partition.num_parts; fs::exists(part_folder(dir, p)); ++p) {
    fs::remove_all(part_folder(dir, p), ec);
    if (ec) throw IoError("cannot remove '" + part_folder(dir, p) + "': " + ec.message());
  }
  io::write_text_file(manifest_path(dir), manifest_to_json(manifest).dump(2) + "\n");
}

Manifest read_manifest(const std::string& dir) {
  const std::string path = manifest_path(dir);
  if (!fs::exists(path)) {
    throw IoError("'" + dir + "' is not a complete partition store: '" + path +
                  "' is missing (no store there, or its write was interrupted)");
  }
  const json j = parse_json_file(path);
  Manifest m;
  try {
    j.at("format_version").get_to(m.format_version);
    if (m.format_version != kStoreFormatVersion) {
      fail(path, "format version " + std::to_string(m.format_version) +
                     ", this build reads version " + std::to_string(kStoreFormatVersion));
    }
    j.at("dataset").get_to(m.dataset);
    j.at("dataset_checksum").get_to(m.dataset_checksum);
    j.at("method").get_to(m.method);
    j.at("vertex_weight").get_to(m.vertex_weight);
    j.at("objective").get_to(m.objective);
    j.at("part_weights").get_to(m.part_weights);
    j.at("reorder").get_to(m.reorder);
    j.at("seed").get_to(m.seed);
    j.at("num_parts").get_to(m.num_parts);
    j.at("num_nodes").get_to(m.num_nodes);
    j.at("part_nodes").get_to(m.part_nodes);
    j.at("part_checksums").get_to(m.part_checksums);
    m.quality = quality_from_json(j.at("quality"));
  } catch (const json::exception& e) {
    fail(path, std::string("malformed manifest: ") + e.what());
  }
  if (m.num_parts < 1 || static_cast<int>(m.part_nodes.size()) != m.num_parts ||
      static_cast<int>(m.part_checksums.size()) != m.num_parts) {
    fail(path, "num_parts " + std::to_string(m.num_parts) + " but " +
                   std::to_string(m.part_nodes.size()) + " part sizes and " +
                   std::to_string(m.part_checksums.size()) + " part checksums");
  }
  return m;
}

LocalGraph load_part(const std::string& dir, int part, int expected_parts,
                     const std::string& expected_dataset) {
  const Manifest manifest = read_manifest(dir);
  const std::string mpath = manifest_path(dir);
  if (expected_parts > 0 && manifest.num_parts != expected_parts) {
    fail(mpath, "store has " + std::to_string(manifest.num_parts) + " parts, this job has " +
                    std::to_string(expected_parts) + " ranks");
  }
  if (!expected_dataset.empty() && manifest.dataset != expected_dataset) {
    fail(mpath, "store was made for dataset '" + manifest.dataset + "', this job uses '" +
                    expected_dataset + "'");
  }
  if (part < 0 || part >= manifest.num_parts) {
    fail(mpath, "part " + std::to_string(part) + " is outside the store's parts [0, " +
                    std::to_string(manifest.num_parts) + ")");
  }

  const std::string folder = part_folder(dir, part);
  const auto file = [&](const char* name) { return (fs::path(folder) / name).string(); };
  const std::string info_path = file("part.json");
  const json info = parse_json_file(info_path);
  std::int64_t n_owned = 0, n_ghost = 0;
  io::GraphFilesShape shape;
  LocalGraph tile;
  try {
    info.at("part").get_to(tile.part);
    info.at("num_parts").get_to(tile.num_parts);
    info.at("num_global_nodes").get_to(tile.num_global_nodes);
    info.at("n_owned").get_to(n_owned);
    info.at("n_ghost").get_to(n_ghost);
    info.at("num_classes").get_to(tile.num_classes);
    shape = io::read_shape(info, n_owned, n_owned + n_ghost, info_path);
  } catch (const json::exception& e) {
    fail(info_path, std::string("malformed part description: ") + e.what());
  }
  if (tile.part != part || tile.num_parts != manifest.num_parts ||
      n_owned != manifest.part_nodes[part] || tile.num_global_nodes != manifest.num_nodes) {
    fail(info_path, "describes part " + std::to_string(tile.part) + " of " +
                        std::to_string(tile.num_parts) + " with " + std::to_string(n_owned) +
                        " owned rows; the manifest expects part " + std::to_string(part) + " of " +
                        std::to_string(manifest.num_parts) + " with " +
                        std::to_string(manifest.part_nodes[part]));
  }
  if (n_ghost < 0) fail(info_path, "negative ghost count " + std::to_string(n_ghost));
  const std::int64_t n_local = n_owned + n_ghost;

  std::vector<std::uint32_t> crcs;
  auto take = [&crcs](auto array) {
    crcs.push_back(array.crc);
    return std::move(array.data);
  };
  tile.owned_ids = take(io::read_array<GlobalId>(file("owned_ids.bin"), false, n_owned));
  tile.ghost_ids = take(io::read_array<GlobalId>(file("ghost_ids.bin"), false, n_ghost));
  tile.ghost_owner = take(io::read_array<std::int32_t>(file("ghost_owner.bin"), false, n_ghost));
  tile.degree = take(io::read_array<std::int64_t>(file("degree.bin"), false, n_local));
  for (std::size_t i = 0; i < tile.ghost_owner.size(); ++i) {
    const std::int32_t q = tile.ghost_owner[i];
    if (q < 0 || q >= manifest.num_parts || q == part || (i > 0 && q < tile.ghost_owner[i - 1])) {
      fail(file("ghost_owner.bin"), "ghost " + std::to_string(i) + " has owner " +
                                        std::to_string(q) +
                                        " (owners must be other parts, non-decreasing)");
    }
  }

  io::move_graph_files(io::read_graph_files(folder, shape, crcs), tile);

  const std::string checksum = part_checksum(crcs);
  if (checksum != manifest.part_checksums[part]) {
    fail(folder, "part checksum " + checksum + " differs from the manifest's " +
                     manifest.part_checksums[part] + " (files from another store?)");
  }
  return tile;
}

} // namespace tessera::partition
