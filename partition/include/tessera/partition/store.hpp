// The partition store: a directory with manifest.json and one folder per part, in a documented
// little-endian binary format, so each rank loads its own tile without the whole graph.
#pragma once

#include "tessera/datasets/dataset.hpp"
#include "tessera/partition/local_graph.hpp"
#include "tessera/partition/partition.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::partition {

/// Version of the store layout; a store of another version is refused. Version 2 seals the
/// manifest by a checksum and covers every part.json by one.
inline constexpr int kStoreFormatVersion = 2;

/// What manifest.json records.
struct Manifest {
  int format_version = kStoreFormatVersion; ///< the store layout's version
  std::string dataset;                      ///< dataset name or spec
  std::string dataset_checksum;             ///< of the whole graph's structure, features and labels
  /// datasets::Dataset::row_normalize of the data (stores written before it was recorded: by
  /// the dataset's name, datasets::recipe_row_normalizes).
  bool row_normalize = false;
  std::string method;        ///< partition::to_string(Method): metis, ..., ptscotch (or parmetis)
  std::string vertex_weight; ///< partition::to_string(VertexWeight): uniform, ..., cost
  std::string objective;     ///< cut or volume (METIS k-way)
  std::vector<double> part_weights; ///< as given (empty: equal shares)
  /// none, given or measured: whether part_weights are the speeds of the ranks it was cut for
  /// (stores written before these keys read as none). A performance choice: any store trains.
  std::string balance = "none";
  std::vector<double> rank_speeds; ///< [P] the speeds it was cut for (empty: none)
  double row_cost = 0.0;      ///< VertexWeight::Cost's row cost (0 for the other vertex weights)
  std::string reorder;        ///< none or rcm
  std::uint64_t seed = 0;     ///< the partitioner's seed
  int num_parts = 0;          ///< P, the rank count that can load it
  std::int64_t num_nodes = 0; ///< of the whole graph
  std::vector<std::int64_t> part_nodes;         ///< [P]
  std::vector<std::string> part_checksums;      ///< [P] over the part's array files
  std::vector<std::string> part_json_checksums; ///< [P] over the bytes of each part.json
  Quality quality;                              ///< as measured when the store was written
};

/// What a store records of the dataset it was cut from.
struct DatasetRecord {
  std::string name;           ///< Manifest::dataset
  std::string checksum;       ///< Manifest::dataset_checksum
  bool row_normalize = false; ///< Manifest::row_normalize
};

/// Writes the store for `dataset` cut by `partition` into `dir` (files written to a temporary
/// name and renamed, the manifest last, so an interrupted write never looks complete). `dir` is
/// claimed as an io::OutputFolder of kind "partition store" for the whole write: it must be new,
/// empty, or a store (replaced only when `replace`), and a concurrent writer of the same folder
/// fails. `options` and `quality` are recorded in the manifest, not used to cut. Throws IoError
/// when the folder is refused or a file cannot be written, InvalidArgument for a partition
/// without parts or one that does not fit the dataset.
void write_store(const std::string& dir, const datasets::Dataset& dataset,
                 const Partition& partition, const Options& options, Reorder reorder,
                 const Quality& quality, bool replace = false);

/// Throws IoError, as write_store(dir, ..., replace) would, when `dir` cannot take a store ("/",
/// a file, a folder with other content, a store when not `replace`, an unwritable parent);
/// creates and locks nothing. A preflight, so a bad output folder fails before a long load.
void check_store_folder(const std::string& dir, bool replace);

/// Writes dir/manifest.json for `manifest`, sealed by a checksum over all its other fields (the
/// last step of write_store). Throws IoError naming the file.
void write_manifest(const std::string& dir, const Manifest& manifest);

/// Reads and validates dir/manifest.json. Throws IoError naming the file when it is missing (no
/// store, or an interrupted write), FormatError for another version (a store to re-create with
/// tessera-partition), malformed content or content that does not match its checksum (edited).
Manifest read_manifest(const std::string& dir);

/// The checksum write_store records for `dataset` (8 hex digits): CRC-32 over its adjacency,
/// features and labels — what a store's manifest is compared with to tell whether the store was
/// cut from that data.
std::string dataset_checksum(const datasets::Dataset& dataset);

/// dir/part-NNNNN/part.json: the file that describes part `part` of the store in `dir`.
std::string part_description_path(const std::string& dir, int part);

/// Loads part `part` reading only that part's files. Refuses (FormatError naming the file and the
/// problem): another format version, a checksum mismatch, a truncated file, a store made for
/// another part count (`expected_parts` > 0) or dataset (`expected_dataset` non-empty), a `part`
/// outside the store's, and contents that cannot be a tile (check_tile). IoError when a file is
/// missing. The tile is in host memory.
LocalGraph load_part(const std::string& dir, int part, int expected_parts = 0,
                     const std::string& expected_dataset = "");

/// Checks that `tile`, read from the store folder `folder`, can be a tile and not only a set of
/// well-formed arrays: owned ids in [0, num_global_nodes), unique, ascending unless
/// `owned_reordered`; ghost ids in range, unique, not owned, grouped by owner (other parts, in
/// [0, num_parts), ascending) and ascending within a group; the degree of an owned row equals
/// its neighbour count, a ghost's is at least 1; labels in [0, num_classes) or -1; split rows
/// ascending and unique; features finite. The CSR structure (row pointers, column range) is
/// checked when it is read. Throws FormatError naming the file under `folder` and the record.
void check_tile(const LocalGraph& tile, const std::string& folder, bool owned_reordered);

} // namespace tessera::partition
