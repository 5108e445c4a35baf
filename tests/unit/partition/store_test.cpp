// The partition store: every part loads back equal to build_local_graph, the same inputs give
// byte-identical files, and corrupt, truncated, foreign or incomplete stores are refused.
#include "tessera/core/error.hpp"
#include "tessera/core/progress.hpp"
#include "tessera/graph/graph.hpp"
#include "tessera/io/array_file.hpp"
#include "tessera/io/files.hpp"
#include "tessera/partition/store.hpp"
#include "unit/datasets/dataset_test_util.hpp"
#include "unit/partition/tile_test_util.hpp"

#include <cmath>
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
using datasets::tests::read_bytes;
using datasets::tests::TempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;
using tests::expect_same_tile;

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

// Issue 39: a store keeps its data's feature recipe, so training from it normalizes as in memory.
TEST(PartitionStore, ManifestRecordsTheDatasFeatureRecipe) {
  TempDir temp;
  Dataset dataset = ring_dataset(false);
  dataset.row_normalize = true;
  write_store(temp.file("store"), dataset, kPartition, block_options(), Reorder::None,
              some_quality());

  EXPECT_TRUE(read_manifest(temp.file("store")).row_normalize);
}

TEST(PartitionStore, ManifestRecordsTheRunAndTheQuality) {
  const StoreFixture store;

  const Manifest m = read_manifest(store.dir);

  EXPECT_EQ(m.format_version, kStoreFormatVersion);
  EXPECT_EQ(m.dataset, "ring-dense");
  EXPECT_EQ(m.dataset_checksum.size(), 8u);
  EXPECT_FALSE(m.row_normalize);
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

TEST(PartitionStore, WritingReportsEachTileAsItLands) {
  TempDir temp;
  const std::string dir = temp.file("store");
  std::vector<std::string> events;
  const ProgressScope scope([&](const ProgressEvent& e) {
    events.push_back(std::string(e.stage) + " " + std::to_string(e.done) + "/" +
                     std::to_string(e.total));
  });

  write_store(dir, ring_dataset(false), kPartition, block_options(), Reorder::None, some_quality());

  const std::string stage = "writing " + dir;
  EXPECT_EQ(events, (std::vector<std::string>{stage + " 0/3", stage + " 1/3", stage + " 2/3",
                                              stage + " 3/3", stage + " 3/3"}));
}

TEST(PartitionStore, ManifestRecordsTheRankSpeedsItWasCutFor) {
  const StoreFixture equal;
  TempDir temp;
  const std::string dir = temp.file("store");
  Options options = block_options();
  options.balance = Balance::Given;
  options.part_weights = {1.0, 0.5, 0.25};
  options.vertex_weight = VertexWeight::Cost;
  options.row_cost = 12.5;
  write_store(dir, ring_dataset(false), kPartition, options, Reorder::None, some_quality());

  const Manifest for_speeds = read_manifest(dir);

  EXPECT_EQ(read_manifest(equal.dir).balance, "none");
  EXPECT_TRUE(read_manifest(equal.dir).rank_speeds.empty());
  EXPECT_EQ(for_speeds.balance, "given");
  EXPECT_EQ(for_speeds.rank_speeds, (std::vector<double>{1.0, 0.5, 0.25}));
  EXPECT_EQ(for_speeds.vertex_weight, "cost");
  EXPECT_EQ(for_speeds.row_cost, 12.5);
  EXPECT_EQ(read_manifest(equal.dir).row_cost, 0.0);
  expect_same_tile(load_part(dir, 1), load_part(equal.dir, 1)); // a performance choice only
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

  // 14 arrays + part.json per part, the manifest and the output folder's marker
  EXPECT_EQ(a.size(), 3u * 15u + 2u);
  EXPECT_TRUE(a == b);
}

TEST(PartitionStore, RewritingWithFewerPartsReplacesTheStore) {
  StoreFixture store;
  const Partition two{2, {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1}};

  write_store(store.dir, store.dataset, two, block_options(), Reorder::None, some_quality(), true);

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
  edit_text(manifest, "\"format_version\": 2", "\"format_version\": 3");

  expect_refused<FormatError>([&] { load_part(store.dir, 0); }, {manifest, "format version 3"});
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

// --- Output folder (issue 12 item 3): write_store claims its folder.

TEST(PartitionStore, RefusesTheRootFolder) {
  const Dataset ring = ring_dataset(false);

  expect_refused<IoError>(
      [&] { write_store("/", ring, kPartition, block_options(), Reorder::None, some_quality()); },
      {"'/'", "root"});
}

TEST(PartitionStore, RefusesAFolderWithOtherContentAndLeavesItAsItWas) {
  TempDir temp;
  const std::string dir = temp.file("notes");
  fs::create_directories(dir);
  std::ofstream(fs::path(dir) / "notes.txt") << "mine";
  const Dataset ring = ring_dataset(false);

  expect_refused<IoError>(
      [&] { write_store(dir, ring, kPartition, block_options(), Reorder::None, some_quality()); },
      {dir, "not empty"});
  EXPECT_EQ(read_bytes((fs::path(dir) / "notes.txt").string()), "mine");
  EXPECT_FALSE(fs::exists(fs::path(dir) / "manifest.json"));
  EXPECT_FALSE(fs::exists(fs::path(dir) / "part-00000"));
}

TEST(PartitionStore, RefusesADatasetFolder) {
  TempDir temp;
  const std::string dir = temp.file("native");
  const Dataset ring = ring_dataset(false);
  datasets::save_native(ring, dir);
  const auto before = snapshot(dir);

  expect_refused<IoError>(
      [&] { write_store(dir, ring, kPartition, block_options(), Reorder::None, some_quality()); },
      {dir});
  EXPECT_TRUE(snapshot(dir) == before);
}

TEST(PartitionStore, ReplacesAnExistingStoreOnlyWhenAsked) {
  const StoreFixture store;
  const Partition two{2, {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1}};

  expect_refused<OutputExists>(
      [&] {
        write_store(store.dir, store.dataset, two, block_options(), Reorder::None, some_quality());
      },
      {store.dir, "replacing it was not asked for"});
  EXPECT_EQ(read_manifest(store.dir).num_parts, 3);

  write_store(store.dir, store.dataset, two, block_options(), Reorder::None, some_quality(), true);
  EXPECT_EQ(read_manifest(store.dir).num_parts, 2);
}

TEST(PartitionStore, ASecondWriterOfTheSameFolderFails) {
  const StoreFixture store;
  const io::OutputFolder first_writer(store.dir, "partition store", true);

  expect_refused<IoError>(
      [&] {
        write_store(store.dir, store.dataset, kPartition, block_options(), Reorder::None,
                    some_quality(), true);
      },
      {"another process is writing", store.dir});
}

TEST(PartitionStore, CheckStoreFolderRefusesWhatWriteStoreRefusesAndCreatesNothing) {
  const StoreFixture store;
  TempDir temp;
  const std::string fresh = temp.file("fresh");

  expect_refused<OutputExists>([&] { check_store_folder(store.dir, false); },
                               {store.dir, "replacing it was not asked for"});
  expect_refused<IoError>([&] { check_store_folder("/", true); }, {"'/'"});
  check_store_folder(store.dir, true);
  check_store_folder(fresh, false);
  EXPECT_FALSE(fs::exists(fresh));
}

TEST(PartitionStore, ADatasetNameThatIsNotUtf8IsWrittenNotThrown) {
  TempDir temp;
  Dataset ring = ring_dataset(false);
  ring.name = "ring\xff\xfe";

  write_store(temp.file("s"), ring, kPartition, block_options(), Reorder::None, some_quality());

  EXPECT_EQ(read_manifest(temp.file("s")).dataset, "ring\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(load_part(temp.file("s"), 1).n_owned(), 4);
}

// --- Every file checksummed (items 5 and 6).

std::string manifest_of(const StoreFixture& store) {
  return (fs::path(store.dir) / "manifest.json").string();
}

TEST(PartitionStore, RefusesAnEditedDatasetChecksumNamingTheManifest) {
  const StoreFixture store;
  const std::string checksum = read_manifest(store.dir).dataset_checksum;
  edit_text(manifest_of(store), checksum, checksum == "00000000" ? "00000001" : "00000000");

  expect_refused<FormatError>([&] { read_manifest(store.dir); }, {manifest_of(store), "edited"});
}

TEST(PartitionStore, RefusesAnEditedNumNodesNamingTheManifest) {
  const StoreFixture store;
  edit_text(manifest_of(store), "\"num_nodes\": 12", "\"num_nodes\": 13");

  expect_refused<FormatError>([&] { load_part(store.dir, 0); }, {manifest_of(store), "edited"});
}

TEST(PartitionStore, RefusesAStoreOfTheOldFormatAskingToRecreateIt) {
  const StoreFixture store;
  edit_text(manifest_of(store), "\"format_version\": 2", "\"format_version\": 1");

  expect_refused<FormatError>(
      [&] { load_part(store.dir, 0); },
      {manifest_of(store), "format version 1", "re-create it with tessera-partition"});
}

TEST(PartitionStore, RefusesAnEditedPartJsonNamingIt) {
  const StoreFixture store;
  const std::string file = store.part_file(1, "part.json");
  edit_text(file, "\"num_classes\": 4", "\"num_classes\": 5");

  expect_refused<FormatError>([&] { load_part(store.dir, 1); }, {file, "checksum"});
  EXPECT_EQ(load_part(store.dir, 0).num_classes, 4); // the other parts still load
}

TEST(PartitionStore, PartDescriptionPathNamesThePartJson) {
  const StoreFixture store;

  EXPECT_EQ(part_description_path(store.dir, 2), store.part_file(2, "part.json"));
}

TEST(PartitionStore, APartThatDisagreesWithTheManifestSaysWhatEachHolds) {
  const StoreFixture store;
  Manifest m = read_manifest(store.dir);
  m.num_nodes = 13;
  write_manifest(store.dir, m); // sealed again, as a forger would

  expect_refused<FormatError>([&] { load_part(store.dir, 2); },
                              {store.part_file(2, "part.json"),
                               "part 2 of 3 with 4 owned rows of 12 nodes",
                               "says part 2 of 3 with 4 owned rows of 13 nodes"});
}

// --- Semantic validation (item 7): contents sealed by a forger are still checked.

/// The part checksum write_store records: CRC-32 over each .bin file's payload CRC (header
/// bytes 40..43) in the store's file order (dense features).
std::string recomputed_part_checksum(const StoreFixture& store, int part) {
  std::uint32_t crc = 0;
  for (const char* name : {"owned_ids.bin", "ghost_ids.bin", "ghost_owner.bin", "degree.bin",
                           "adj_row_ptr.bin", "adj_col.bin", "adj_val.bin", "features.bin",
                           "labels.bin", "train_idx.bin", "val_idx.bin", "test_idx.bin"}) {
    const std::string bytes = read_bytes(store.part_file(part, name));
    crc = io::crc32_update(crc, bytes.data() + 40, 4);
  }
  return io::crc_hex(crc);
}

/// Rewrites array `name` of `part` with `values` ([rows] or [rows, cols]) and seals the store
/// again: every checksum holds, only the contents are wrong.
template <typename T>
void forge(const StoreFixture& store, int part, const std::string& name, std::vector<T> values,
           std::int64_t cols = -1) {
  const auto rows = static_cast<std::int64_t>(values.size()) / (cols > 0 ? cols : 1);
  io::write_array(store.part_file(part, name), std::span<const T>(values), rows, cols);
  Manifest m = read_manifest(store.dir);
  m.part_checksums[part] = recomputed_part_checksum(store, part);
  write_manifest(store.dir, m);
}

/// The tile write_store wrote for `part` (no reordering).
LocalGraph written(const StoreFixture& store, int part) {
  return build_local_graph(store.dataset, kPartition, part);
}

TEST(PartitionStoreContents, ForgingKeepsAValidPartLoadable) {
  const StoreFixture store;

  forge(store, 1, "owned_ids.bin", written(store, 1).owned_ids);

  expect_same_tile(load_part(store.dir, 1), written(store, 1));
}

TEST(PartitionStoreContents, RefusesANegativeOwnedId) {
  const StoreFixture store;
  auto ids = written(store, 0).owned_ids;
  ids[0] = -1;
  forge(store, 0, "owned_ids.bin", ids);

  expect_refused<FormatError>([&] { load_part(store.dir, 0); },
                              {store.part_file(0, "owned_ids.bin"), "owned id -1 at row 0"});
}

TEST(PartitionStoreContents, RefusesAnOwnedIdOutOfRange) {
  const StoreFixture store;
  auto ids = written(store, 0).owned_ids;
  ids.back() = 12;
  forge(store, 0, "owned_ids.bin", ids);

  expect_refused<FormatError>(
      [&] { load_part(store.dir, 0); },
      {store.part_file(0, "owned_ids.bin"), "owned id 12 at row 3", "[0, 12)"});
}

TEST(PartitionStoreContents, RefusesADuplicatedOwnedId) {
  const StoreFixture store;
  auto ids = written(store, 0).owned_ids;
  ids[1] = ids[0];
  forge(store, 0, "owned_ids.bin", ids);

  expect_refused<FormatError>([&] { load_part(store.dir, 0); },
                              {store.part_file(0, "owned_ids.bin"), "at row 1", "unique"});
}

TEST(PartitionStoreContents, RefusesAGhostIdThatIsAlsoOwned) {
  const StoreFixture store;
  const LocalGraph tile = written(store, 0);
  auto ghosts = tile.ghost_ids;
  ghosts[0] = tile.owned_ids[0];
  // Keep the group's order so only the overlap is wrong.
  ASSERT_TRUE(tile.ghost_owner.size() < 2 || tile.ghost_owner[1] != tile.ghost_owner[0] ||
              ghosts[0] < ghosts[1]);
  forge(store, 0, "ghost_ids.bin", ghosts);

  expect_refused<FormatError>([&] { load_part(store.dir, 0); },
                              {store.part_file(0, "ghost_ids.bin"), "is also owned"});
}

TEST(PartitionStoreContents, RefusesADuplicatedGhostId) {
  const StoreFixture store;
  auto ghosts = written(store, 0).ghost_ids;
  ghosts[1] = ghosts[0];
  forge(store, 0, "ghost_ids.bin", ghosts);

  expect_refused<FormatError>([&] { load_part(store.dir, 0); },
                              {store.part_file(0, "ghost_ids.bin"), "ghost"});
}

TEST(PartitionStoreContents, RefusesAGhostOwnedByItsOwnPart) {
  const StoreFixture store;
  auto owners = written(store, 1).ghost_owner;
  owners[0] = 1;
  forge(store, 1, "ghost_owner.bin", owners);

  expect_refused<FormatError>([&] { load_part(store.dir, 1); },
                              {store.part_file(1, "ghost_owner.bin"), "ghost 0 has owner 1"});
}

TEST(PartitionStoreContents, RefusesAZeroOrWrongDegree) {
  const StoreFixture store;
  const LocalGraph tile = written(store, 2);
  auto owned_wrong = tile.degree;
  owned_wrong[0] = 0;
  auto ghost_negative = tile.degree;
  ghost_negative.back() = -3;

  forge(store, 2, "degree.bin", owned_wrong);
  expect_refused<FormatError>([&] { load_part(store.dir, 2); },
                              {store.part_file(2, "degree.bin"), "owned row 0", "degree 0"});
  forge(store, 2, "degree.bin", ghost_negative);
  expect_refused<FormatError>([&] { load_part(store.dir, 2); },
                              {store.part_file(2, "degree.bin"), "degree -3"});
}

TEST(PartitionStoreContents, RefusesAGhostDegreeBeyondTheGraph) {
  const StoreFixture store;
  auto huge = written(store, 2).degree;
  huge.back() = std::int64_t{1} << 40;

  forge(store, 2, "degree.bin", huge);
  expect_refused<FormatError>([&] { load_part(store.dir, 2); },
                              {store.part_file(2, "degree.bin"), "degree 1099511627776",
                               "at most the graph's 11 other nodes"});
}

TEST(PartitionStoreContents, RefusesAnEdgeThatDoesNotWeighOne) {
  const StoreFixture store;
  const Csr& a = written(store, 1).adjacency;
  for (const float weight : {-1.0f, 1e30f, 0.0f}) {
    std::vector<float> values(a.val(), a.val() + a.nnz());
    values[2] = weight;
    forge(store, 1, "adj_val.bin", values);

    expect_refused<FormatError>([&] { load_part(store.dir, 1); },
                                {store.part_file(1, "adj_val.bin"), "entry 2", "weighs 1"});
  }
}

TEST(PartitionStoreContents, RefusesALabelOutOfRangeNamingTheFile) {
  const StoreFixture store;
  auto labels = written(store, 1).labels;
  labels[2] = 4;
  forge(store, 1, "labels.bin", labels);

  expect_refused<FormatError>([&] { load_part(store.dir, 1); },
                              {store.part_file(1, "labels.bin"), "label 4 at row 2", "[0, 4)"});
}

TEST(PartitionStoreContents, RefusesASplitThatIsNotAscending) {
  const StoreFixture store;
  const LocalGraph tile = written(store, 1);
  ASSERT_GE(tile.test_idx.size(), 2u);
  std::vector<std::int32_t> test(tile.test_idx.rbegin(), tile.test_idx.rend());
  forge(store, 1, "test_idx.bin", test);

  expect_refused<FormatError>([&] { load_part(store.dir, 1); },
                              {store.part_file(1, "test_idx.bin"), "ascending"});
}

TEST(PartitionStoreContents, RefusesNonFiniteFeatures) {
  const StoreFixture store;
  const LocalGraph tile = written(store, 0);
  const Dense& x = *tile.features.dense;
  std::vector<float> values(x.data(), x.data() + x.size());
  values[4] = std::nanf("");
  forge(store, 0, "features.bin", values, x.cols());

  expect_refused<FormatError>([&] { load_part(store.dir, 0); },
                              {store.part_file(0, "features.bin"), "(row 1)", "finite"});
}

TEST(PartitionStoreContents, LabelsBeyondTheClassCountAreRefusedOnLoadNamingTheFile) {
  TempDir temp;
  Dataset ring = ring_dataset(false);
  ring.num_classes = 3; // labels are v % 4

  write_store(temp.file("s"), ring, kPartition, block_options(), Reorder::None, some_quality());

  // Part 1 owns vertices 2, 3, 7 and 10: labels 2, 3, 3, 2.
  expect_refused<FormatError>([&] { load_part(temp.file("s"), 1); },
                              {"part-00001/labels.bin", "label 3 at row 1"});
}

TEST(PartitionStoreContents, EveryCheckPassesOnEveryWrittenTile) {
  for (const bool sparse : {false, true}) {
    for (const Reorder reorder : {Reorder::None, Reorder::Rcm}) {
      const Dataset ring = ring_dataset(sparse);
      for (int p = 0; p < 3; ++p) {
        check_tile(build_local_graph(ring, kPartition, p, reorder), "tile",
                   reorder == Reorder::Rcm);
      }
    }
  }
}

// --- The split of a dataset without one (item 8).

TEST(PartitionStore, DefaultSplitIsTheInMemoryRandomSplitAndOnlyWhenMissing) {
  Dataset without = ring_dataset(false);
  without.train_idx.clear();
  without.val_idx.clear();
  without.test_idx.clear();
  Dataset expected = ring_dataset(false);
  datasets::make_random_split(expected, 0.6, 0.2, 11);
  Dataset published = ring_dataset(false);

  EXPECT_TRUE(datasets::use_default_split_when_missing(without, 11));
  EXPECT_FALSE(datasets::use_default_split_when_missing(published, 11));

  EXPECT_EQ(without.train_idx, expected.train_idx);
  EXPECT_EQ(without.val_idx, expected.val_idx);
  EXPECT_EQ(without.test_idx, expected.test_idx);
  EXPECT_EQ(published.train_idx, ring_dataset(false).train_idx);
}

} // namespace
} // namespace tessera::partition
