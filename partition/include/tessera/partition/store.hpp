// The partition store: a directory with manifest.json and one folder per part, in a documented
// little-endian binary format, so each rank loads its own tile without the whole graph.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/datasets/dataset.hpp"
#include "tessera/partition/local_graph.hpp"
#include "tessera/partition/partition.hpp"

namespace tessera::partition {

/// Version of the store layout; a store of another version is refused.
inline constexpr int kStoreFormatVersion = 1;

/// What manifest.json records.
struct Manifest {
  int format_version = kStoreFormatVersion;  ///< the store layout's version
  std::string dataset;           ///< dataset name or spec
  std::string dataset_checksum;  ///< of the whole graph's structure, features and labels
  std::string method;            ///< metis, metis-recursive, block, random
  std::string vertex_weight;     ///< uniform, degree, compute
  std::string objective;         ///< cut or volume (METIS k-way)
  std::vector<double> part_weights;  ///< as given (empty: equal shares)
  std::string reorder;           ///< none or rcm
  std::uint64_t seed = 0;        ///< the partitioner's seed
  int num_parts = 0;             ///< P, the rank count that can load it
  std::int64_t num_nodes = 0;    ///< of the whole graph
  std::vector<std::int64_t> part_nodes;         ///< [P]
  std::vector<std::string> part_checksums;      ///< [P] over the part's files
  Quality quality;                              ///< as measured when the store was written
};

/// Writes the store for `dataset` cut by `partition` into `dir` (created; files written to a
/// temporary name and renamed, the manifest last, so an interrupted write never looks complete).
/// `options` and `quality` are recorded in the manifest, not used to cut. Throws IoError when a
/// file cannot be written, InvalidArgument for a partition without parts or one that does not
/// fit the dataset.
void write_store(const std::string& dir, const datasets::Dataset& dataset,
                 const Partition& partition, const Options& options, Reorder reorder,
                 const Quality& quality);

/// Reads and validates dir/manifest.json. Throws IoError naming the file when it is missing (no
/// store, or an interrupted write), FormatError for another version or malformed content.
Manifest read_manifest(const std::string& dir);

/// Loads part `part` reading only that part's files. Refuses (FormatError naming the file and the
/// problem): another format version, a checksum mismatch, a truncated file, a store made for
/// another part count (`expected_parts` > 0) or dataset (`expected_dataset` non-empty), a `part`
/// outside the store's. IoError when a file is missing. The tile is in host memory.
LocalGraph load_part(const std::string& dir, int part, int expected_parts = 0,
                     const std::string& expected_dataset = "");

}  // namespace tessera::partition
