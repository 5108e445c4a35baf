// The partition store: every part loads back equal to build_local_graph, the same inputs give
// byte-identical files, and corrupt, truncated, foreign or incomplete stores are refused.
#include "tessera/core/error.hpp"
#include "tessera/graph/graph.hpp"
#include "tessera/partition/store.hpp"
#include "unit/datasets/dataset_test_util.hpp"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <map>
#include <string>
#include <vector>

namespace tessera::partition {
namespace {

namespace fs = std::filesystem;
using datasets::Dataset;
using datasets::tests::cpu;
using datasets::tests::expect_same_graph_fields;
using datasets::tests::read_bytes;
using datasets::tests::TempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;

/// A ring of 12 vertices with chords, labels v % 4, a split, and dense [12, 3] features or
/// sparse [12, 6] ones (two nonzeros a row, one row empty).
Dataset ring_dataset(bool sparse_features) {
  graph::EdgeList edges;
  edges.num_nodes = 12;
  for (GlobalId v = 0; v < 12; ++v)
    edges.add(v, (v + 1) % 12);
  edges.add(0, 6);
  edges.add(3, 9);
  edges.add(2, 7);
  Dataset ds;
  ds.name = sparse_features ? "ring-sparse" : "ring-dense";
  ds.num_nodes = 12;
  ds.adjacency = graph::build_symmetric_csr(cpu(), edges);
  if (sparse_features) {
    Csr x(cpu(), 12, 6, 22);
    Offset at = 0;
    for (std::int64_t v = 0; v < 12; ++v) {
      if (v != 5) {
        x.col()[at] = static_cast<LocalId>(v % 3);
        x.val()[at++] = 0.5f * static_cast<float>(v);
        x.col()[at] = static_cast<LocalId>(3 + v % 3);
        x.val()[at++] = 1.0f;
      }
      x.row_ptr()[v + 1] = at;
    }
    ds.features.sparse = std::move(x);
  } else {
    Dense x(cpu(), 12, 3);
    for (std::int64_t i = 0; i < x.size(); ++i)
      x.data()[i] = 0.25f * static_cast<float>(i);
    ds.features.dense = std::move(x);
  }
  for (std::int32_t v = 0; v < 12; ++v)
    ds.labels.push_back(v % 4);
  ds.num_classes = 4;
  ds.train_idx = {0, 1, 4, 8};
  ds.val_idx = {2, 9};
  ds.test_idx = {3, 5, 6, 7, 10, 11};
  return ds;
}

const Partition kPartition{3, {0, 0, 1, 1, 2, 2, 0, 1, 2, 0, 1, 2}};

Options block_options() {
  Options options;
  options.num_parts = 3;
  options.method = Method::Block;
  options.vertex_weight = VertexWeight::Degree;
  options.part_weights = {0.5, 0.25, 0.25};
  options.seed = 7;
  return options;
}

Quality some_quality() {
  Quality q;
  q.edge_cut = 9;
  q.total_volume = 14;
  q.max_send = 6;
  q.max_recv = 5;
  q.mean_send = 14.0 / 3.0;
  q.mean_recv = 14.0 / 3.0;
  q.vertex_balance = 1.0;
  q.edge_balance = 1.125;
  q.part_nodes = {4, 4, 4};
  q.ghosts = {5, 4, 5};
  q.send = {4, 6, 4};
  q.recv = {5, 4, 5};
  q.broadcast_volume = 24;
  return q;
}

/// A store of ring_dataset(sparse) written into a fresh folder.
struct StoreFixture {
  explicit StoreFixture(bool sparse = false, Reorder reorder = Reorder::None)
      : dataset(ring_dataset(sparse)), dir(temp.file("store")) {
    write_store(dir, dataset, kPartition, block_options(), reorder, some_quality());
  }
  std::string part_file(int part, const std::string& name) const {
    char folder[32];
    std::snprintf(folder, sizeof folder, "part-%05d", part);
    return (fs::path(dir) / folder / name).string();
  }

  TempDir temp;
  Dataset dataset;
  std::string dir;
};

void expect_same_tile(const LocalGraph& a, const LocalGraph& b) {
  EXPECT_EQ(a.part, b.part);
  EXPECT_EQ(a.num_parts, b.num_parts);
  EXPECT_EQ(a.num_global_nodes, b.num_global_nodes);
  EXPECT_EQ(a.owned_ids, b.owned_ids);
  EXPECT_EQ(a.ghost_ids, b.ghost_ids);
  EXPECT_EQ(a.ghost_owner, b.ghost_owner);
  EXPECT_EQ(a.degree, b.degree);
  expect_same_graph_fields(a, b);
}

/// Every file under `dir` by relative path, with its bytes.
std::map<std::string, std::string> snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) {
      files[fs::relative(entry.path(), dir).string()] = read_bytes(entry.path().string());
    }
  }
  return files;
}

/// Overwrites the byte at `offset` of `path` with `value`.
void poke(const std::string& path, std::size_t offset, char value) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(static_cast<std::streamoff>(offset));
  file.put(value);
}

/// Replaces the first `from` in the text file `path` with `to`.
void edit_text(const std::string& path, const std::string& from, const std::string& to) {
  std::string text = read_bytes(path);
  const auto at = text.find(from);
  ASSERT_NE(at, std::string::npos) << from << " not in " << path;
  text.replace(at, from.size(), to);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

/// Runs `load` and expects E with a message containing each of `parts`.
template <typename E, typename F>
void expect_refused(F load, const std::vector<std::string>& parts) {
  try {
    load();
    ADD_FAILURE() << "expected a refusal";
  } catch (const E& e) {
    for (const auto& part : parts)
      EXPECT_THAT(e.what(), HasSubstr(part));
  }
}

TEST(PartitionStore, EveryPartLoadsBackEqualToBuildLocalGraphWithDenseFeatures) {
  const StoreFixture store(false);

  for (int p = 0; p < 3; ++p) {
    const LocalGraph loaded = load_part(store.dir, p, 3, "ring-dense");

    expect_same_tile(loaded, build_local_graph(store.dataset, kPartition, p));
  }
}

TEST(PartitionStore, EveryPartLoadsBackEqualToBuildLocalGraphWithSparseFeaturesAndRcm) {
  const StoreFixture store(true, Reorder::Rcm);

  for (int p = 0; p < 3; ++p) {
    const LocalGraph loaded = load_part(store.dir, p);

    expect_same_tile(loaded, build_local_graph(store.dataset, kPartition, p, Reorder::Rcm));
  }
}

TEST(PartitionStore, ManifestRecordsTheRunAndTheQuality) {
  const StoreFixture store;

  const Manifest m = read_manifest(store.dir);

  EXPECT_EQ(m.format_version, kStoreFormatVersion);
  EXPECT_EQ(m.dataset, "ring-dense");
  EXPECT_EQ(m.dataset_checksum.size(), 8u);
  EXPECT_EQ(m.method, to_string(Method::Block));
  EXPECT_EQ(m.vertex_weight, "degree");
  EXPECT_EQ(m.part_weights, (std::vector<double>{0.5, 0.25, 0.25}));
  EXPECT_EQ(m.reorder, "none");
  EXPECT_EQ(m.seed, 7u);
  EXPECT_EQ(m.num_parts, 3);
  EXPECT_EQ(m.num_nodes, 12);
  EXPECT_EQ(m.part_nodes, (std::vector<std::int64_t>{4, 4, 4}));
  EXPECT_EQ(m.part_checksums.size(), 3u);
  const Quality q = some_quality();
  EXPECT_EQ(m.quality.edge_cut, q.edge_cut);
  EXPECT_EQ(m.quality.mean_send, q.mean_send);
  EXPECT_EQ(m.quality.edge_balance, q.edge_balance);
  EXPECT_EQ(m.quality.ghosts, q.ghosts);
  EXPECT_EQ(m.quality.recv, q.recv);
  EXPECT_EQ(m.quality.broadcast_volume, q.broadcast_volume);
}

TEST(PartitionStore, DatasetChecksumFollowsTheData) {
  const StoreFixture dense(false);
  const StoreFixture sparse(true);

  EXPECT_NE(read_manifest(dense.dir).dataset_checksum, read_manifest(sparse.dir).dataset_checksum);
}

TEST(PartitionStore, DatasetChecksumOfAnUnlabelledDatasetStillCoversTheGraph) {
  TempDir temp;
  Dataset ring = ring_dataset(false);
  ring.labels.clear();
  Dataset other = ring_dataset(false);
  other.labels.clear();
  other.adjacency.val()[0] = 2.0f;

  write_store(temp.file("a"), ring, kPartition, block_options(), Reorder::None, some_quality());
  write_store(temp.file("b"), other, kPartition, block_options(), Reorder::None, some_quality());

  EXPECT_NE(read_manifest(temp.file("a")).dataset_checksum, "00000000");
  EXPECT_NE(read_manifest(temp.file("a")).dataset_checksum,
            read_manifest(temp.file("b")).dataset_checksum);
}

TEST(PartitionStore, SameInputsWriteByteIdenticalStores) {
  const StoreFixture first(true, Reorder::Rcm);
  const StoreFixture second(true, Reorder::Rcm);

  const auto a = snapshot(first.dir);
  const auto b = snapshot(second.dir);

  EXPECT_EQ(a.size(), 3u * 15u + 1u); // 14 arrays + part.json per part, and the manifest
  EXPECT_TRUE(a == b);
}

TEST(PartitionStore, RewritingWithFewerPartsReplacesTheStore) {
  StoreFixture store;
  const Partition two{2, {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1}};

  write_store(store.dir, store.dataset, two, block_options(), Reorder::None, some_quality());

  EXPECT_EQ(read_manifest(store.dir).num_parts, 2);
  EXPECT_FALSE(fs::exists(fs::path(store.dir) / "part-00002"));
  expect_same_tile(load_part(store.dir, 1, 2), build_local_graph(store.dataset, two, 1));
}

TEST(PartitionStore, RefusesAFlippedPayloadByteNamingTheFile) {
  const StoreFixture store;
  const std::string file = store.part_file(1, "adj_col.bin");
  poke(file, 64, static_cast<char>(read_bytes(file)[64] ^ 0x5a));

  expect_refused<FormatError>([&] { load_part(store.dir, 1); }, {file, "CRC-32 mismatch"});
}

TEST(PartitionStore, RefusesATruncatedFile) {
  const StoreFixture store;
  const std::string file = store.part_file(0, "features.bin");
  fs::resize_file(file, fs::file_size(file) - 4);

  expect_refused<FormatError>([&] { load_part(store.dir, 0); }, {file, "truncated"});
}

TEST(PartitionStore, RefusesATruncatedHeader) {
  const StoreFixture store;
  const std::string file = store.part_file(0, "labels.bin");
  fs::resize_file(file, 10);

  expect_refused<FormatError>([&] { load_part(store.dir, 0); }, {file, "truncated header"});
}

TEST(PartitionStore, RefusesAnotherFileFormatVersion) {
  const StoreFixture store;
  const std::string file = store.part_file(2, "labels.bin");
  poke(file, 4, 2);

  expect_refused<FormatError>([&] { load_part(store.dir, 2); }, {file, "format version 2"});
}

TEST(PartitionStore, RefusesAnotherManifestFormatVersion) {
  const StoreFixture store;
  const std::string manifest = (fs::path(store.dir) / "manifest.json").string();
  edit_text(manifest, "\"format_version\": 1", "\"format_version\": 2");

  expect_refused<FormatError>([&] { load_part(store.dir, 0); }, {manifest, "format version 2"});
}

TEST(PartitionStore, RefusesBadMagic) {
  const StoreFixture store;
  const std::string file = store.part_file(0, "owned_ids.bin");
  poke(file, 0, 'X');

  expect_refused<FormatError>([&] { load_part(store.dir, 0); }, {file, "bad magic"});
}

TEST(PartitionStore, RefusesAnUnexpectedDtype) {
  const StoreFixture store;
  const std::string file = store.part_file(0, "owned_ids.bin");
  poke(file, 8, 1); // int64 → int32

  expect_refused<FormatError>([&] { load_part(store.dir, 0); }, {file, "dtype int32"});
}

TEST(PartitionStore, RefusesAnUnexpectedShape) {
  const StoreFixture store;
  const std::string file = store.part_file(0, "ghost_ids.bin");
  poke(file, 16, 1); // shape[0]

  expect_refused<FormatError>([&] { load_part(store.dir, 0); }, {file, "shape [1]"});
}

TEST(PartitionStore, RefusesAStoreForAnotherPartCount) {
  const StoreFixture store;

  expect_refused<FormatError>([&] { load_part(store.dir, 0, 2); },
                              {"store has 3 parts, this job has 2 ranks"});
}

TEST(PartitionStore, RefusesAStoreForAnotherDataset) {
  const StoreFixture store;

  expect_refused<FormatError>([&] { load_part(store.dir, 0, 3, "cora"); }, {"ring-dense", "cora"});
}

TEST(PartitionStore, RefusesAPartOutOfRange) {
  const StoreFixture store;

  expect_refused<FormatError>([&] { load_part(store.dir, 3); }, {"part 3"});
  expect_refused<FormatError>([&] { load_part(store.dir, -1); }, {"part -1"});
}

TEST(PartitionStore, RefusesFilesFromAnotherStore) {
  const StoreFixture store;
  const StoreFixture other(false, Reorder::Rcm);
  fs::copy_file(other.part_file(0, "owned_ids.bin"), store.part_file(0, "owned_ids.bin"),
                fs::copy_options::overwrite_existing);

  expect_refused<FormatError>([&] { load_part(store.dir, 0); }, {"part checksum"});
}

TEST(PartitionStore, AMissingFileIsAnIoErrorNamingIt) {
  const StoreFixture store;
  const std::string file = store.part_file(1, "ghost_ids.bin");
  fs::remove(file);

  expect_refused<IoError>([&] { load_part(store.dir, 1); }, {file});
}

TEST(PartitionStore, AStoreWithoutManifestIsIncomplete) {
  const StoreFixture store;
  const std::string manifest = (fs::path(store.dir) / "manifest.json").string();
  fs::remove(manifest);

  expect_refused<IoError>([&] { load_part(store.dir, 0); }, {manifest});
}

TEST(PartitionStore, RefusesAMalformedManifest) {
  const StoreFixture store;
  const std::string manifest = (fs::path(store.dir) / "manifest.json").string();
  edit_text(manifest, "\"num_nodes\"", "\"num_nodez\"");

  expect_refused<FormatError>([&] { read_manifest(store.dir); }, {manifest, "num_nodes"});
}

TEST(PartitionStore, LeavesNoTemporaryFiles) {
  const StoreFixture store;

  for (const auto& entry : fs::recursive_directory_iterator(store.dir)) {
    EXPECT_NE(entry.path().extension(), ".tmp") << entry.path();
  }
}

} // namespace
} // namespace tessera::partition
