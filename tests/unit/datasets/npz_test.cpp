// The npz reader and writer: round trips, numpy's layout, and malformed archives.
#include "assembly.hpp"
#include "dataset_test_util.hpp"
#include "npz.hpp"
#include "npz_bytes.hpp"
#include "tessera/core/error.hpp"
#include "tessera/graph/graph.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <vector>

namespace tessera::datasets::tests {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

/// A small labelled, split dataset with dense features, saved to `path`.
std::string save_small_sbm(const TempDir& dir, const std::string& name = "small.npz") {
  const Dataset ds = load("sbm:nodes=300,classes=3,avg-degree=6,features=5", 7);
  const std::string path = dir.file(name);
  save_npz(ds, path);
  return path;
}

/// `bytes` with the first occurrence of `from` at or after `start` replaced by `to`.
std::string patch(std::string bytes, const std::string& from, const std::string& to,
                  std::size_t start = 0) {
  const std::size_t at = bytes.find(from, start);
  EXPECT_NE(at, std::string::npos) << "pattern '" << from << "' not found";
  if (at != std::string::npos) bytes.replace(at, from.size(), to);
  return bytes;
}

TEST(DatasetsNpz, SaveThenLoadRoundTripsDenseFeaturesLabelsAndSplit) {
  const TempDir dir;
  const Dataset original = load("sbm:nodes=300,classes=3,avg-degree=6,features=5", 7);
  const std::string path = dir.file("sbm.npz");

  save_npz(original, path);
  const Dataset loaded = load("npz:" + path);

  expect_same_dataset(original, loaded);
  EXPECT_EQ(loaded.name, "sbm");
}

TEST(DatasetsNpz, SaveThenLoadRoundTripsSparseFeatures) {
  const TempDir dir;
  Dataset original;
  original.num_nodes = 5;
  graph::EdgeList edges;
  edges.num_nodes = 5;
  edges.add(0, 1);
  edges.add(3, 4);
  original.adjacency = graph::build_symmetric_csr(cpu(), edges);
  original.features.sparse = detail::identity_features(cpu(), 5);
  original.labels = {0, 1, -1, 1, 0};
  original.num_classes = 3; // a class without members must survive
  const std::string path = dir.file("sparse.npz");

  save_npz(original, path);
  const Dataset loaded = load("npz:" + path);

  expect_same_dataset(original, loaded);
}

TEST(DatasetsNpz, DirectedCsrArraysAreSymmetrizedWithoutSelfLoops) {
  const TempDir dir;
  const std::string path = dir.file("directed.npz");
  {
    detail::NpzWriter out(path);
    const std::vector<std::int32_t> indptr = {0, 2, 2, 3};
    const std::vector<std::int32_t> indices = {0, 1, 1}; // 0->0, 0->1, 2->1
    out.add<std::int32_t>("adj_indptr", {4}, std::span<const std::int32_t>(indptr));
    out.add<std::int32_t>("adj_indices", {3}, std::span<const std::int32_t>(indices));
    out.commit();
  }

  const Dataset ds = load("npz:" + path);

  EXPECT_EQ(ds.adjacency.nnz(), 4);
  expect_canonical_adjacency(ds);
}

TEST(DatasetsNpz, WriterProducesNumpyLayout) {
  const TempDir dir;
  const std::string path = dir.file("layout.npz");
  {
    detail::NpzWriter out(path);
    const std::vector<std::int32_t> values = {1, 2, 3, 4, 5, 6};
    out.add<std::int64_t>("m", {2, 3}, std::span<const std::int32_t>(values));
    out.commit();
  }

  const detail::NpzReader reader(path);
  const detail::NpyInfo info = reader.info("m");
  const auto m = reader.read<std::int64_t>("m");

  EXPECT_THAT(reader.keys(), ElementsAre("m"));
  EXPECT_EQ(info.descr, "<i8");
  EXPECT_EQ(info.header_bytes % 64, 0u);
  EXPECT_THAT(m.shape, ElementsAre(2, 3));
  EXPECT_THAT(m.data, ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_THAT(read_bytes(path),
              HasSubstr("{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3), }"));
}

TEST(DatasetsNpz, ReadsDeflatedMembersOfPlanetoidFile) {
  TESSERA_REQUIRE_DATA("cora_planetoid/cora_planetoid.npz");
  const detail::NpzReader reader(
      tessera::testing::shared_data_path("cora_planetoid/cora_planetoid.npz"));

  const auto shape = reader.read<std::int64_t>("attr_shape");
  const auto indptr = reader.read<std::int32_t>("adj_indptr");

  EXPECT_THAT(shape.data, ElementsAre(2708, 1433));
  EXPECT_EQ(indptr.data.back(), 10556);
}

TEST(DatasetsNpz, RequestedStringArrayThrowsFormatErrorNamingKey) {
  TESSERA_REQUIRE_DATA("gnn_benchmark/cora.npz");
  const detail::NpzReader reader(tessera::testing::shared_data_path("gnn_benchmark/cora.npz"));

  EXPECT_THAT([&] { reader.read<std::int64_t>("node_names"); },
              ThrowsMessage<FormatError>(
                  AllOf(HasSubstr("cora.npz"), HasSubstr("'node_names'"), HasSubstr("strings"))));
}

TEST(DatasetsNpz, TruncatedNpzThrowsFormatErrorNamingFile) {
  const TempDir dir;
  const std::string bytes = read_bytes(save_small_sbm(dir));
  const std::string path = dir.write("cut.npz", bytes.substr(0, bytes.size() / 2));

  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("cut.npz"), HasSubstr("truncated"))));
}

TEST(DatasetsNpz, BadNpyMagicThrowsFormatErrorNamingArray) {
  const TempDir dir;
  const std::string bytes = read_bytes(save_small_sbm(dir));
  const std::string path = dir.write("magic.npz", patch(bytes, "\x93NUMPY", "\x93NUMPX"));

  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("magic.npz"), HasSubstr("'adj_indptr'"),
                                               HasSubstr("bad magic"))));
}

TEST(DatasetsNpz, BadNpyHeaderDictThrowsFormatErrorQuotingHeader) {
  const TempDir dir;
  const std::string bytes = read_bytes(save_small_sbm(dir));
  const std::string path = dir.write("header.npz", patch(bytes, "'shape': (", "'shape': x"));

  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("header.npz"), HasSubstr("'adj_indptr'"),
                                               HasSubstr("bad .npy header"))));
}

TEST(DatasetsNpz, UnknownDtypeThrowsFormatErrorNamingDtype) {
  const TempDir dir;
  const std::string bytes = read_bytes(save_small_sbm(dir));
  const std::string path = dir.write("dtype.npz", patch(bytes, "'<i8'", "'<c8'"));

  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("dtype.npz"), HasSubstr("'adj_indptr'"),
                                               HasSubstr("unsupported dtype '<c8'"))));
}

TEST(DatasetsNpz, FortranOrderArraysAreReadInCOrderAsNumpyReadsThem) {
  const TempDir dir;
  // a[i][j] = 10 i + j, shape (2, 3), stored first index fastest.
  const std::vector<std::int64_t> matrix = {0, 10, 1, 11, 2, 12};
  // b[i][j][k] = 100 i + 10 j + k, shape (2, 3, 2), stored as float32 first index fastest.
  std::vector<float> cube;
  for (int k = 0; k < 2; ++k)
    for (int j = 0; j < 3; ++j)
      for (int i = 0; i < 2; ++i)
        cube.push_back(static_cast<float>(100 * i + 10 * j + k));
  const std::string path =
      dir.write("fortran.npz", npz_bytes({{"matrix", "<i8", "(2, 3)", bytes_of(matrix), true},
                                          {"cube", "<f4", "(2, 3, 2)", bytes_of(cube), true}}));
  const detail::NpzReader npz(path);

  const auto a = npz.read<std::int64_t>("matrix");
  EXPECT_THAT(a.shape, ElementsAre(2, 3));
  EXPECT_THAT(a.data, ElementsAre(0, 1, 2, 10, 11, 12));
  const auto b = npz.read<double>("cube"); // through the converting path
  EXPECT_THAT(b.shape, ElementsAre(2, 3, 2));
  EXPECT_THAT(b.data, ElementsAre(0, 1, 10, 11, 20, 21, 100, 101, 110, 111, 120, 121));
}

TEST(DatasetsNpz, HeterophilousMasksInFortranOrderGiveTheSplitsOfCOrder) {
  // actor, squirrel_filtered and chameleon_filtered of the heterophilous benchmark store their
  // [splits, N] masks in Fortran order.
  const TempDir dir;
  const std::vector<std::vector<std::uint8_t>> train = {{1, 1, 0, 0}, {0, 0, 1, 1}},
                                               val = {{0, 0, 1, 0}, {1, 0, 0, 0}},
                                               test = {{0, 0, 0, 1}, {0, 1, 0, 0}};
  const auto masks = [](const std::vector<std::vector<std::uint8_t>>& m, bool fortran) {
    std::string out;
    for (std::size_t a = 0; a < (fortran ? 4u : 2u); ++a)
      for (std::size_t b = 0; b < (fortran ? 2u : 4u); ++b)
        out.push_back(static_cast<char>(fortran ? m[b][a] : m[a][b]));
    return out;
  };
  const auto write = [&](const std::string& name, bool fortran) {
    const std::vector<float> features = {0, 1, 2, 3, 4, 5, 6, 7};
    const std::vector<std::int64_t> labels = {0, 1, 0, 1}, edges = {0, 1, 1, 2, 2, 3};
    return dir.write(name,
                     npz_bytes({{"node_features", "<f4", "(4, 2)", bytes_of(features)},
                                {"node_labels", "<i8", "(4,)", bytes_of(labels)},
                                {"edges", "<i8", "(3, 2)", bytes_of(edges)},
                                {"train_masks", "|b1", "(2, 4)", masks(train, fortran), fortran},
                                {"val_masks", "|b1", "(2, 4)", masks(val, fortran), fortran},
                                {"test_masks", "|b1", "(2, 4)", masks(test, fortran), fortran}}));
  };
  const std::string c_order = write("c.npz", false), fortran = write("f.npz", true);

  for (int split = 0; split < 2; ++split) {
    SCOPED_TRACE("split " + std::to_string(split));
    LoadOptions options;
    options.split_index = split;
    const Dataset expected = load_dataset(cpu(), "heterophilous:" + c_order, options);
    const Dataset got = load_dataset(cpu(), "heterophilous:" + fortran, options);
    EXPECT_EQ(got.train_idx, expected.train_idx);
    EXPECT_EQ(got.val_idx, expected.val_idx);
    EXPECT_EQ(got.test_idx, expected.test_idx);
    EXPECT_EQ(got.train_idx,
              (split == 0 ? std::vector<std::int32_t>{0, 1} : std::vector<std::int32_t>{2, 3}));
  }
}

TEST(DatasetsNpz, CorruptMemberDataThrowsCrcMismatch) {
  const TempDir dir;
  std::string bytes = read_bytes(save_small_sbm(dir));
  const std::size_t central_directory = bytes.find("PK\x01\x02");
  bytes[central_directory - 1] ^= 0x40; // last data byte of the last member, test_idx
  const std::string path = dir.write("crc.npz", bytes);

  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("'test_idx'"), HasSubstr("CRC"))));
}

TEST(DatasetsNpz, NonZipFileThrowsFormatError) {
  const TempDir dir;
  const std::string path = dir.write("text.npz", "this is a text file, not a zip archive\n");

  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("text.npz"), HasSubstr("not a zip"))));
}

TEST(DatasetsNpz, ArchiveWithoutGraphKeysThrowsFormatErrorListingKeys) {
  const TempDir dir;
  const std::string path = dir.file("other.npz");
  {
    detail::NpzWriter out(path);
    const std::vector<float> values = {1.0f};
    out.add<float>("weights", {1}, std::span<const float>(values));
    out.commit();
  }

  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("adj_indptr"), HasSubstr("weights"))));
}

TEST(DatasetsNpz, MissingFileThrowsIoErrorNamingPath) {
  EXPECT_THAT([] { load("npz:/nonexistent/graph.npz"); },
              ThrowsMessage<IoError>(HasSubstr("/nonexistent/graph.npz")));
}

TEST(DatasetsNpz, UncommittedWriterLeavesNoFile) {
  const TempDir dir;
  const std::string path = dir.file("never.npz");

  {
    detail::NpzWriter out(path);
    const std::vector<float> values = {1.0f};
    out.add<float>("x", {1}, std::span<const float>(values));
  }

  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_TRUE(std::filesystem::is_empty(std::filesystem::path(path).parent_path()));
}

} // namespace
} // namespace tessera::datasets::tests
