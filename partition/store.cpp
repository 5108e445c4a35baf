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
// Checksums (format version 2), each CRC-32 written as 8 hex digits, so that every byte of a
// store is covered and an edit anywhere is refused:
//   dataset_checksum        over the whole dataset's adjacency row_ptr, col and val, its features
//                           (dense data, or sparse row_ptr, col, val) and labels, in that order;
//   part_checksums[p]       over the payload CRCs (u32 little-endian, i.e. bytes 40..43 of each
//                           header) of part p's .bin files in the order above;
//   part_json_checksums[p]  over the bytes of part p's part.json;
//   manifest_checksum       (the manifest's last key) over the manifest without that key, as
//                           compact JSON (nlohmann's dump(), invalid UTF-8 replaced by U+FFFD).
//
// Crash safety: every file is written to a temporary file and renamed (io/files.hpp). Writing
// into an existing store first removes its manifest.json, so during the rewrite the directory
// reads as incomplete (read_manifest throws IoError) and it becomes a store again only when the
// new manifest is renamed into place, last. Part folders beyond the new part count are removed.
// The folder is held as an io::OutputFolder for the whole write: a second writer fails.
#include "tessera/partition/store.hpp"

#include "collectives.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/io/array_file.hpp"
#include "tessera/io/files.hpp"
#include "tessera/io/graph_files.hpp"
#include "tessera/io/json_fields.hpp"
#include "tessera/io/text_input.hpp"
#include "tessera/partition/distributed.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fmt/core.h>
#include <fmt/format.h>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <utility>
#include <zlib.h>

namespace tessera::partition {
namespace {

namespace fs = std::filesystem;
/// Objects keep their keys in the order given (written) or found (read), so manifests read
/// top-down and the manifest's checksum is taken over its keys in file order.
using nlohmann::ordered_json;

/// The output-folder kind io::OutputFolder records for a store.
constexpr const char* kStoreKind = "partition store";

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

std::string text_checksum(const std::string& text) {
  return io::crc_hex(io::crc32_update(0, text.data(), text.size()));
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

/// The manifest's seal: over the compact text of every key but manifest_checksum, in order.
/// Invalid UTF-8 (a dataset name from a file name) is replaced, as io::json_text writes it.
std::string manifest_checksum(const ordered_json& unsealed) {
  return text_checksum(unsealed.dump(-1, ' ', false, ordered_json::error_handler_t::replace));
}

template <typename T> std::span<const T> span_of(const T* data, std::int64_t count) {
  return {data, static_cast<std::size_t>(count)};
}
template <typename T> std::span<const T> span_of(const std::vector<T>& v) {
  return {v.data(), v.size()};
}

/// Checksums of one written part.
struct PartChecksums {
  std::string arrays; ///< over the .bin payload CRCs
  std::string json;   ///< over part.json's bytes
};

/// Writes one tile's files into `folder`.
PartChecksums write_tile(const std::string& folder, const LocalGraph& tile) {
  io::create_folder(folder);
  const auto file = [&](const char* name) { return (fs::path(folder) / name).string(); };
  std::vector<std::uint32_t> crcs;
  crcs.push_back(io::write_array(file("owned_ids.bin"), span_of(tile.owned_ids), tile.n_owned()));
  crcs.push_back(io::write_array(file("ghost_ids.bin"), span_of(tile.ghost_ids), tile.n_ghost()));
  crcs.push_back(
      io::write_array(file("ghost_owner.bin"), span_of(tile.ghost_owner), tile.n_ghost()));
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
  const std::string text = io::json_text(info);
  io::write_text_file(file("part.json"), text);
  return {part_checksum(crcs), text_checksum(text)};
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

Quality quality_from_json(const ordered_json& j) {
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
          {"row_normalize_features", m.row_normalize},
          {"method", m.method},
          {"vertex_weight", m.vertex_weight},
          {"objective", m.objective},
          {"part_weights", m.part_weights},
          {"balance", m.balance},
          {"rank_speeds", m.rank_speeds},
          {"row_cost", m.row_cost},
          {"reorder", m.reorder},
          {"seed", m.seed},
          {"num_parts", m.num_parts},
          {"num_nodes", m.num_nodes},
          {"part_nodes", m.part_nodes},
          {"part_checksums", m.part_checksums},
          {"part_json_checksums", m.part_json_checksums},
          {"quality", quality_to_json(m.quality)}};
}

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw FormatError("partition store file '" + path + "': " + problem);
}

/// Parses `text`, read from `path`, as JSON; FormatError naming the file when it is not.
ordered_json parse_json(const std::string& text, const std::string& path) {
  try {
    return ordered_json::parse(text);
  } catch (const ordered_json::exception& e) {
    fail(path, std::string("not valid JSON: ") + e.what());
  }
}

/// Refuses a manifest whose content differs from what its checksum sealed (an edit by hand).
void check_manifest_seal(ordered_json j, const std::string& path) {
  const auto at = j.find("manifest_checksum");
  if (at == j.end() || !at->is_string()) {
    fail(path, "no manifest_checksum: not written by tessera-partition (re-create the store)");
  }
  const std::string recorded = at->get<std::string>();
  j.erase("manifest_checksum");
  const std::string actual = manifest_checksum(j);
  if (actual != recorded) {
    fail(path, "its content has checksum " + actual + " but its manifest_checksum says " +
                   recorded +
                   ": the manifest was edited after it was written (re-create the "
                   "store with tessera-partition)");
  }
}

/// The manifest's record of how the store was cut; the rest is the caller's.
Manifest manifest_of(const Options& options, Reorder reorder, const Quality& quality) {
  Manifest manifest;
  manifest.method = to_string(options.method);
  manifest.vertex_weight = to_string(options.vertex_weight);
  manifest.objective = to_string(options.objective);
  manifest.part_weights = options.part_weights;
  manifest.balance = to_string(options.balance);
  if (options.balance != Balance::None) manifest.rank_speeds = options.part_weights;
  if (options.vertex_weight == VertexWeight::Cost) manifest.row_cost = options.row_cost;
  manifest.reorder = reorder == Reorder::Rcm ? "rcm" : "none";
  manifest.seed = options.seed;
  manifest.quality = quality;
  return manifest;
}

/// Removes the part folders from `parts` on: those of a previous store with more parts.
void remove_parts_from(const std::string& dir, int parts) {
  std::error_code ec;
  for (int p = parts; fs::exists(part_folder(dir, p)); ++p) {
    fs::remove_all(part_folder(dir, p), ec);
    if (ec) throw IoError("cannot remove '" + part_folder(dir, p) + "': " + ec.message());
  }
}

} // namespace

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

namespace {

/// CRC-32 and length of one rank's piece of an array.
struct Piece {
  std::uint32_t crc = 0;
  std::int64_t bytes = 0;
};

template <typename T> Piece piece_of(const std::vector<T>& values) {
  return {crc_of(0, values.data(), static_cast<std::int64_t>(values.size())),
          static_cast<std::int64_t>(values.size() * sizeof(T))};
}

/// A CSR's row pointers for rows whose nonzeros start at `offset` of the whole matrix; the last
/// rank adds the whole matrix's end.
std::vector<Offset> global_row_ptr(const Offset* row_ptr, std::int64_t rows, Offset offset,
                                   bool last) {
  std::vector<Offset> out(static_cast<std::size_t>(rows + (last ? 1 : 0)));
  for (std::size_t i = 0; i < out.size(); ++i)
    out[i] = offset + row_ptr[i];
  return out;
}

/// The first nonzero of this rank's rows in the whole matrix. Collective.
Offset nonzeros_before(Offset mine, comm::Communicator& comm) {
  const std::vector<std::int64_t> all = detail::allgather(mine, comm);
  return std::accumulate(all.begin(), all.begin() + comm.rank(), Offset{0});
}

} // namespace

std::string dataset_checksum(const datasets::RowBlock& block, comm::Communicator& comm) {
  const bool last = comm.rank() == comm.size() - 1;
  const auto n = block.rows.size();
  std::vector<Piece> pieces;
  pieces.push_back(piece_of(
      global_row_ptr(block.row_ptr.data(), n, nonzeros_before(block.row_ptr.back(), comm), last)));
  // The whole adjacency's columns are LocalIds; a graph beyond them has no whole load to match.
  if (block.num_nodes <= std::numeric_limits<LocalId>::max()) {
    pieces.push_back(piece_of(std::vector<LocalId>(block.col.begin(), block.col.end())));
  } else {
    pieces.push_back(piece_of(block.col));
  }
  pieces.push_back(piece_of(std::vector<float>(block.col.size(), 1.0f)));
  if (block.features.dense) {
    const Dense& x = *block.features.dense;
    pieces.push_back(
        {crc_of(0, x.data(), x.size()), x.size() * static_cast<std::int64_t>(sizeof(float))});
  } else if (block.features.sparse) {
    const Csr& x = *block.features.sparse;
    pieces.push_back(
        piece_of(global_row_ptr(x.row_ptr(), n, nonzeros_before(x.row_ptr()[n], comm), last)));
    pieces.push_back(
        {crc_of(0, x.col(), x.nnz()), x.nnz() * static_cast<std::int64_t>(sizeof(LocalId))});
    pieces.push_back(
        {crc_of(0, x.val(), x.nnz()), x.nnz() * static_cast<std::int64_t>(sizeof(float))});
  }
  pieces.push_back(piece_of(block.labels));
  // Each array's pieces, in rank order, joined onto the CRC of everything before it.
  std::uint32_t crc = 0;
  for (const Piece& piece : pieces) {
    const auto ranks = static_cast<std::size_t>(comm.size());
    const auto crcs = detail::allgather(piece.crc, comm);
    const auto bytes = detail::allgather(piece.bytes, comm);
    for (std::size_t r = 0; r < ranks; ++r) {
      crc = static_cast<std::uint32_t>(
          crc32_combine(crc, static_cast<uLong>(crcs[r]), static_cast<z_off_t>(bytes[r])));
    }
  }
  return io::crc_hex(crc);
}

std::string part_description_path(const std::string& dir, int part) {
  return (fs::path(part_folder(dir, part)) / "part.json").string();
}

void check_store_folder(const std::string& dir, bool replace) {
  io::check_output_folder(dir, kStoreKind, replace);
}

void write_store(const std::string& dir, const datasets::Dataset& dataset,
                 const Partition& partition, const Options& options, Reorder reorder,
                 const Quality& quality, bool replace) {
  if (partition.num_parts < 1) {
    throw InvalidArgument("write_store: the partition has " + std::to_string(partition.num_parts) +
                          " parts");
  }
  // Refuses "/", other folders with content and a store without `replace`; the lock makes a
  // second concurrent writer fail instead of both reporting success.
  const io::OutputFolder out(dir, kStoreKind, replace);
  // An existing store stops looking complete before any of its parts changes.
  io::remove_file(manifest_path(dir));

  Manifest manifest = manifest_of(options, reorder, quality);
  manifest.dataset = dataset.name;
  manifest.dataset_checksum = dataset_checksum(dataset);
  manifest.row_normalize = dataset.row_normalize;
  manifest.num_parts = partition.num_parts;
  manifest.num_nodes = dataset.num_nodes;
  ProgressStage progress("writing " + dir, partition.num_parts, "tiles");
  for (int p = 0; p < partition.num_parts; ++p) {
    const LocalGraph tile = build_local_graph(dataset, partition, p, reorder);
    manifest.part_nodes.push_back(tile.n_owned());
    const PartChecksums sums = write_tile(part_folder(dir, p), tile);
    manifest.part_checksums.push_back(sums.arrays);
    manifest.part_json_checksums.push_back(sums.json);
    progress.advance(p + 1);
  }
  remove_parts_from(dir, partition.num_parts);
  write_manifest(dir, manifest);
}

namespace {

/// One rank's account of its part, for rank 0's manifest.
ordered_json part_report(const LocalGraph& tile, const std::string& dataset,
                         const std::string& checksum, const PartChecksums& sums,
                         const std::string& problem) {
  return {{"problem", problem},
          {"part", tile.part},
          {"num_parts", tile.num_parts},
          {"num_nodes", tile.num_global_nodes},
          {"dataset", dataset},
          {"dataset_checksum", checksum},
          {"n_owned", tile.n_owned()},
          {"arrays", sums.arrays},
          {"json", sums.json}};
}

/// What is wrong with rank `rank`'s report next to rank 0's ("" when nothing).
std::string disagreement(const ordered_json& report, const ordered_json& first, int rank,
                         int ranks) {
  if (!report.at("problem").get<std::string>().empty()) return report.at("problem");
  if (report.at("part") != rank || report.at("num_parts") != ranks) {
    return fmt::format("holds part {} of {}, not part {} of {}", report.at("part").dump(),
                       report.at("num_parts").dump(), rank, ranks);
  }
  for (const char* key : {"num_nodes", "dataset", "dataset_checksum"}) {
    if (report.at(key) != first.at(key)) {
      return fmt::format("its {} is {}, rank 0's is {}", key, report.at(key).dump(),
                         first.at(key).dump());
    }
  }
  return "";
}

/// Rank 0's text on every rank. Collective.
std::string from_rank_0(const std::string& text, comm::Communicator& comm) {
  std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(text.data()),
                               reinterpret_cast<const std::byte*>(text.data()) + text.size());
  comm.broadcast(bytes, 0);
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

} // namespace

void write_store_from_tiles(const std::string& dir, const LocalGraph& tile,
                            const DatasetRecord& dataset, const Options& options, Reorder reorder,
                            const Quality& quality, comm::Communicator& comm, bool replace) {
  const std::string& dataset_name = dataset.name;
  const std::string& checksum = dataset.checksum;
  constexpr int kReportTag = 7111;
  const int me = comm.rank();
  const int ranks = comm.size();
  const ProgressStage progress("writing " + dir);
  // Rank 0 holds the folder for the whole write, and the old manifest goes before any part.
  std::optional<io::OutputFolder> out;
  std::string problem;
  if (me == 0) {
    try {
      out.emplace(dir, kStoreKind, replace);
      io::remove_file(manifest_path(dir));
    } catch (const Error& e) {
      problem = e.what();
    }
  }
  problem = from_rank_0(problem, comm);
  if (!problem.empty()) throw IoError("rank 0: " + problem);

  PartChecksums sums;
  try {
    sums = write_tile(part_folder(dir, me), tile);
  } catch (const Error& e) {
    problem = e.what();
  }
  const ordered_json mine = part_report(tile, dataset_name, checksum, sums, problem);
  if (me != 0) {
    const std::string text = mine.dump();
    comm.send(std::as_bytes(std::span(text.data(), text.size())), 0, kReportTag);
  } else {
    Manifest manifest = manifest_of(options, reorder, quality);
    manifest.dataset = dataset_name;
    manifest.dataset_checksum = checksum;
    manifest.row_normalize = dataset.row_normalize;
    manifest.num_parts = ranks;
    manifest.num_nodes = tile.num_global_nodes;
    std::vector<std::string> problems;
    for (int r = 0; r < ranks; ++r) {
      ordered_json report = mine;
      if (r != 0) {
        const std::vector<std::byte> bytes = comm.receive(r, kReportTag);
        report = ordered_json::parse(
            std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
      }
      const std::string wrong = disagreement(report, mine, r, ranks);
      if (!wrong.empty()) problems.push_back(fmt::format("rank {}: {}", r, wrong));
      manifest.part_nodes.push_back(report.at("n_owned"));
      manifest.part_checksums.push_back(report.at("arrays"));
      manifest.part_json_checksums.push_back(report.at("json"));
    }
    problem = fmt::format("{}", fmt::join(problems, "; "));
    if (problem.empty()) {
      try {
        remove_parts_from(dir, ranks);
        write_manifest(dir, manifest);
      } catch (const Error& e) {
        problem = fmt::format("rank 0: {}", e.what());
      }
    }
  }
  problem = from_rank_0(problem, comm);
  if (!problem.empty()) {
    throw IoError(fmt::format("partition store '{}' not written (no manifest): {}", dir, problem));
  }
}

void write_manifest(const std::string& dir, const Manifest& manifest) {
  ordered_json j = manifest_to_json(manifest);
  const std::string seal = manifest_checksum(j);
  j["manifest_checksum"] = seal;
  io::write_text_file(manifest_path(dir), io::json_text(j));
}

Manifest read_manifest(const std::string& dir) {
  const std::string path = manifest_path(dir);
  if (!fs::exists(path)) {
    throw IoError("'" + dir + "' is not a complete partition store: '" + path +
                  "' is missing (no store there, or its write was interrupted)");
  }
  const ordered_json j = parse_json(io::read_text_file(path), path);
  Manifest m;
  try {
    io::get_integer(j, "format_version", m.format_version, path);
    if (m.format_version != kStoreFormatVersion) {
      fail(path, "format version " + std::to_string(m.format_version) +
                     ", this build reads version " + std::to_string(kStoreFormatVersion) +
                     ": re-create it with tessera-partition");
    }
    j.at("dataset").get_to(m.dataset);
    j.at("dataset_checksum").get_to(m.dataset_checksum);
    // Optional: stores written before it was recorded go by the dataset's name.
    m.row_normalize = j.contains("row_normalize_features")
                          ? j.at("row_normalize_features").get<bool>()
                          : datasets::recipe_row_normalizes(m.dataset);
    j.at("method").get_to(m.method);
    j.at("vertex_weight").get_to(m.vertex_weight);
    j.at("objective").get_to(m.objective);
    j.at("part_weights").get_to(m.part_weights);
    // Optional: stores written before speed-aware balancing were cut for equal ranks.
    m.balance = j.value("balance", std::string("none"));
    m.rank_speeds = j.value("rank_speeds", std::vector<double>{});
    m.row_cost = j.value("row_cost", 0.0);
    j.at("reorder").get_to(m.reorder);
    io::get_integer(j, "seed", m.seed, path);
    io::get_integer(j, "num_parts", m.num_parts, path);
    io::get_integer(j, "num_nodes", m.num_nodes, path);
    j.at("part_nodes").get_to(m.part_nodes);
    j.at("part_checksums").get_to(m.part_checksums);
    j.at("part_json_checksums").get_to(m.part_json_checksums);
    m.quality = quality_from_json(j.at("quality"));
  } catch (const ordered_json::exception& e) {
    fail(path, std::string("malformed manifest: ") + e.what());
  }
  check_manifest_seal(j, path);
  if (m.num_parts < 1 || static_cast<int>(m.part_nodes.size()) != m.num_parts ||
      static_cast<int>(m.part_checksums.size()) != m.num_parts ||
      static_cast<int>(m.part_json_checksums.size()) != m.num_parts) {
    fail(path, "num_parts " + std::to_string(m.num_parts) + " but " +
                   std::to_string(m.part_nodes.size()) + " part sizes, " +
                   std::to_string(m.part_checksums.size()) + " part checksums and " +
                   std::to_string(m.part_json_checksums.size()) + " part.json checksums");
  }
  try {
    parse_balance(m.balance);
  } catch (const InvalidArgument& e) {
    fail(path, e.what());
  }
  if (!m.rank_speeds.empty() && static_cast<int>(m.rank_speeds.size()) != m.num_parts) {
    fail(path, "num_parts " + std::to_string(m.num_parts) + " but " +
                   std::to_string(m.rank_speeds.size()) + " rank speeds");
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
  // part.json is checked before it is believed: its counts size every read below.
  const std::string info_text = io::read_text_file(info_path);
  if (const std::string sum = text_checksum(info_text); sum != manifest.part_json_checksums[part]) {
    fail(info_path, "checksum " + sum + " differs from the manifest's " +
                        manifest.part_json_checksums[part] + " (edited, or from another store)");
  }
  const ordered_json info = parse_json(info_text, info_path);
  std::int64_t n_owned = 0, n_ghost = 0;
  io::GraphFilesShape shape;
  LocalGraph tile;
  try {
    io::get_integer(info, "part", tile.part, info_path);
    io::get_integer(info, "num_parts", tile.num_parts, info_path);
    io::get_integer(info, "num_global_nodes", tile.num_global_nodes, info_path);
    io::get_integer(info, "n_owned", n_owned, info_path);
    io::get_integer(info, "n_ghost", n_ghost, info_path);
    io::get_integer(info, "num_classes", tile.num_classes, info_path);
    shape = io::read_shape(info, n_owned, n_owned + n_ghost, info_path);
  } catch (const ordered_json::exception& e) {
    fail(info_path, std::string("malformed part description: ") + e.what());
  }
  if (tile.part != part || tile.num_parts != manifest.num_parts ||
      n_owned != manifest.part_nodes[part] || tile.num_global_nodes != manifest.num_nodes) {
    fail(info_path,
         fmt::format("describes part {} of {} with {} owned rows of {} nodes; '{}' says part {} of "
                     "{} with {} owned rows of {} nodes",
                     tile.part, tile.num_parts, n_owned, tile.num_global_nodes, mpath, part,
                     manifest.num_parts, manifest.part_nodes[part], manifest.num_nodes));
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
  io::move_graph_files(io::read_graph_files(folder, shape, crcs), tile);

  const std::string checksum = part_checksum(crcs);
  if (checksum != manifest.part_checksums[part]) {
    fail(folder, "part checksum " + checksum + " differs from the manifest's " +
                     manifest.part_checksums[part] + " (files from another store?)");
  }
  // Bytes as written are not yet a tile: a store sealed by hand may hold any values.
  check_tile(tile, folder, manifest.reorder != "none");
  return tile;
}

namespace {

/// Each id of `ids` (rows of `path`) in [0, n): FormatError naming the file and the row.
void check_ids_in_range(const std::vector<GlobalId>& ids, std::int64_t n, const std::string& path,
                        const char* what) {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= n) {
      fail(path, fmt::format("{} id {} at row {} is outside the graph's nodes [0, {})", what,
                             ids[i], i, n));
    }
  }
}

/// Every global id once among the owned and ghost rows.
void check_ids_unique(const LocalGraph& tile, const std::string& owned_path,
                      const std::string& ghost_path) {
  const std::int64_t n_owned = tile.n_owned();
  std::vector<std::pair<GlobalId, std::int64_t>> ids; // (global id, local row)
  ids.reserve(static_cast<std::size_t>(n_owned + tile.n_ghost()));
  for (std::int64_t r = 0; r < n_owned; ++r)
    ids.emplace_back(tile.owned_ids[r], r);
  for (std::int64_t g = 0; g < tile.n_ghost(); ++g)
    ids.emplace_back(tile.ghost_ids[g], n_owned + g);
  std::sort(ids.begin(), ids.end());
  for (std::size_t i = 1; i < ids.size(); ++i) {
    if (ids[i].first != ids[i - 1].first) continue;
    const std::int64_t a = ids[i - 1].second, b = ids[i].second;
    if (b < n_owned) {
      fail(owned_path, fmt::format("owned id {} at rows {} and {}: owned ids must be unique",
                                   ids[i].first, a, b));
    }
    if (a < n_owned) {
      fail(ghost_path, fmt::format("ghost id {} at row {} is also owned (owned row {})",
                                   ids[i].first, b - n_owned, a));
    }
    fail(ghost_path, fmt::format("ghost id {} at rows {} and {}: ghost ids must be unique",
                                 ids[i].first, a - n_owned, b - n_owned));
  }
}

/// Ghost rows grouped by owner (another part, ascending), ascending global id within a group.
void check_ghost_order(const LocalGraph& tile, const std::string& ghost_path,
                       const std::string& owner_path) {
  for (std::int64_t g = 0; g < tile.n_ghost(); ++g) {
    const std::int32_t q = tile.ghost_owner[g];
    if (q < 0 || q >= tile.num_parts || q == tile.part) {
      fail(owner_path, fmt::format("ghost {} has owner {}; owners are the other parts of [0, {}) "
                                   "than this part {}",
                                   g, q, tile.num_parts, tile.part));
    }
    if (g == 0) continue;
    const std::int32_t before = tile.ghost_owner[g - 1];
    if (q < before) {
      fail(owner_path, fmt::format("ghost {} has owner {} after owner {}: ghosts must be "
                                   "grouped by owner, ascending",
                                   g, q, before));
    }
    if (q == before && tile.ghost_ids[g] <= tile.ghost_ids[g - 1]) {
      fail(ghost_path, fmt::format("ghost id {} at row {} follows {} of the same owner {}: "
                                   "ascending within an owner's group",
                                   tile.ghost_ids[g], g, tile.ghost_ids[g - 1], q));
    }
  }
}

/// An owned row's degree is its neighbour count (self-loop aside); a ghost neighbours an owned row.
void check_degrees(const LocalGraph& tile, const std::string& path) {
  const Csr& a = tile.adjacency;
  for (std::int64_t r = 0; r < tile.n_owned(); ++r) {
    std::int64_t neighbours = 0;
    for (Offset k = a.row_ptr()[r]; k < a.row_ptr()[r + 1]; ++k)
      neighbours += a.col()[k] != r;
    if (tile.degree[r] != neighbours) {
      fail(path, fmt::format("owned row {} (global id {}) has degree {} but {} neighbours in its "
                             "adjacency row",
                             r, tile.owned_ids[r], tile.degree[r], neighbours));
    }
  }
  for (std::int64_t g = 0; g < tile.n_ghost(); ++g) {
    const std::int64_t d = tile.degree[tile.n_owned() + g];
    if (d < 1 || d >= tile.num_global_nodes) {
      fail(path, fmt::format("ghost row {} (global id {}) has degree {}; a ghost neighbours an "
                             "owned row, so at least 1, and at most the graph's {} other nodes",
                             tile.n_owned() + g, tile.ghost_ids[g], d, tile.num_global_nodes - 1));
    }
  }
}

/// Split rows: owned rows, ascending, each once.
void check_split(const std::vector<std::int32_t>& rows, std::int64_t n_owned,
                 const std::string& path) {
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0 || rows[i] >= n_owned) {
      fail(path, fmt::format("row {} at position {} is outside the owned rows [0, {})", rows[i], i,
                             n_owned));
    }
    if (i > 0 && rows[i] <= rows[i - 1]) {
      fail(path, fmt::format("row {} at position {} follows {}: split rows must be ascending and "
                             "unique",
                             rows[i], i, rows[i - 1]));
    }
  }
}

/// The first non-finite value of `values` (the entries of `path`), naming its row.
void check_finite(const float* values, std::int64_t count, const std::string& path,
                  const auto& row_of) {
  for (std::int64_t k = 0; k < count; ++k) {
    if (!std::isfinite(values[k])) {
      fail(path,
           fmt::format("entry {} (row {}) is {}: values must be finite", k, row_of(k), values[k]));
    }
  }
}

/// The row of CSR entry k.
auto csr_row_of(const Csr& m) {
  return [&m](std::int64_t k) {
    return std::upper_bound(m.row_ptr(), m.row_ptr() + m.rows() + 1, k) - m.row_ptr() - 1;
  };
}

/// Every edge of a tile weighs 1, as in the dataset it was cut from (layers normalise by degree).
void check_unit_weights(const Csr& adjacency, const std::string& path) {
  for (std::int64_t k = 0; k < adjacency.nnz(); ++k) {
    if (adjacency.val()[k] != 1.0f) {
      fail(path, fmt::format("entry {} (row {}) is {}: every edge of a tile weighs 1", k,
                             csr_row_of(adjacency)(k), adjacency.val()[k]));
    }
  }
}

} // namespace

void check_tile(const LocalGraph& tile, const std::string& folder, bool owned_reordered) {
  const auto file = [&](const char* name) { return (fs::path(folder) / name).string(); };
  const std::int64_t n = tile.num_global_nodes;
  check_ids_in_range(tile.owned_ids, n, file("owned_ids.bin"), "owned");
  if (!owned_reordered) {
    for (std::int64_t r = 1; r < tile.n_owned(); ++r) {
      if (tile.owned_ids[r] <= tile.owned_ids[r - 1]) {
        fail(file("owned_ids.bin"),
             fmt::format("owned id {} at row {} follows {}: a store written without reordering "
                         "holds owned ids ascending and unique",
                         tile.owned_ids[r], r, tile.owned_ids[r - 1]));
      }
    }
  }
  check_ids_in_range(tile.ghost_ids, n, file("ghost_ids.bin"), "ghost");
  check_ghost_order(tile, file("ghost_ids.bin"), file("ghost_owner.bin"));
  check_ids_unique(tile, file("owned_ids.bin"), file("ghost_ids.bin"));
  check_degrees(tile, file("degree.bin"));
  check_unit_weights(tile.adjacency, file("adj_val.bin"));

  if (tile.num_classes < 0 || tile.num_classes > std::max<std::int64_t>(n, 2)) {
    fail(file("part.json"),
         fmt::format("num_classes {} for a graph of {} nodes", tile.num_classes, n));
  }
  for (std::size_t r = 0; r < tile.labels.size(); ++r) {
    const std::int32_t label = tile.labels[r];
    if (label != -1 && (label < 0 || label >= tile.num_classes)) {
      fail(file("labels.bin"), fmt::format("label {} at row {} is outside the classes [0, {}) of "
                                           "part.json's num_classes (or -1: unlabelled)",
                                           label, r, tile.num_classes));
    }
  }
  check_split(tile.train_idx, tile.n_owned(), file("train_idx.bin"));
  check_split(tile.val_idx, tile.n_owned(), file("val_idx.bin"));
  check_split(tile.test_idx, tile.n_owned(), file("test_idx.bin"));

  if (tile.features.dense) {
    const Dense& x = *tile.features.dense;
    const std::int64_t width = std::max<std::int64_t>(x.cols(), 1);
    check_finite(x.data(), x.size(), file("features.bin"),
                 [width](std::int64_t k) { return k / width; });
  } else if (tile.features.sparse) {
    check_finite(tile.features.sparse->val(), tile.features.sparse->nnz(), file("feat_val.bin"),
                 csr_row_of(*tile.features.sparse));
  }
}

} // namespace tessera::partition
