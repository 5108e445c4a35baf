// Inputs that must not lie: non-finite values, sizes taken from a number in the data, class
// counts, empty npz arrays, and the messages of refused inputs. Each names the file and the place.
#include "assembly.hpp"
#include "dataset_test_util.hpp"
#include "npz.hpp"
#include "npz_bytes.hpp"
#include "tessera/core/error.hpp"
#include "tessera/graph/graph.hpp"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <limits>
#include <span>
#include <unistd.h>
#include <vector>
#include <zlib.h>

namespace tessera::datasets::tests {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

/// A small SBM dataset: 300 nodes, 3 classes, 5 dense features, a split.
Dataset small_sbm() {
  return load("sbm:nodes=300,classes=3,avg-degree=6,features=5", 7);
}

/// A path-graph dataset of `n` nodes with identity (sparse) features and labels i % 2.
Dataset small_sparse(std::int64_t n = 4) {
  Dataset ds;
  ds.name = "small";
  ds.num_nodes = n;
  graph::EdgeList edges;
  edges.num_nodes = n;
  for (std::int64_t i = 0; i + 1 < n; ++i)
    edges.add(i, i + 1);
  ds.adjacency = graph::build_symmetric_csr(cpu(), edges);
  ds.features.sparse = detail::identity_features(cpu(), n);
  for (std::int64_t i = 0; i < n; ++i)
    ds.labels.push_back(static_cast<std::int32_t>(i % 2));
  ds.num_classes = 2;
  return ds;
}

Member i64(const std::string& key, const std::vector<std::int64_t>& values) {
  return {key, "<i8", "(" + std::to_string(values.size()) + ",)", bytes_of(values)};
}

/// Replaces the value of "key": N in a native folder's dataset.json.
void edit_description(const std::string& dir, const std::string& key, const std::string& value) {
  const std::string path = dir + "/dataset.json";
  std::string text = read_bytes(path);
  const std::size_t at = text.find("\"" + key + "\": ");
  ASSERT_NE(at, std::string::npos);
  const std::size_t begin = at + key.size() + 4;
  text.replace(begin, text.find_first_of(",\n}", begin) - begin, value);
  std::ofstream(path, std::ios::binary) << text;
}

// ---- 9: non-finite values are refused at load, naming the file, the row and the column --------

TEST(DatasetsBadInputs, NanDenseNpzFeatureIsRefusedNamingFileRowAndColumn) {
  const TempDir dir;
  Dataset ds = small_sbm();
  ds.features.dense->data()[3 * 5 + 2] = kNan;
  save_npz(ds, dir.file("nan.npz"));

  EXPECT_THAT(
      [&] { load("npz:" + dir.file("nan.npz")); },
      ThrowsMessage<FormatError>(AllOf(HasSubstr("nan.npz"), HasSubstr("'features'"),
                                       HasSubstr("row 3, column 2"), HasSubstr("not finite"))));
}

TEST(DatasetsBadInputs, InfiniteSparseNpzFeatureIsRefusedNamingRowAndColumn) {
  const TempDir dir;
  Dataset ds = small_sparse();
  ds.features.sparse->val()[2] = kInf; // row 2, column 2 of the identity
  save_npz(ds, dir.file("inf.npz"));

  EXPECT_THAT([&] { load("npz:" + dir.file("inf.npz")); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("inf.npz"), HasSubstr("'attr_data'"),
                                               HasSubstr("row 2, column 2"))));
}

TEST(DatasetsBadInputs, NanNpzAdjacencyDataIsRefusedNamingIndexRowAndColumn) {
  const TempDir dir;
  const std::string path =
      dir.write("adj.npz",
                npz_bytes({i64("adj_indptr", {0, 1, 2}),
                           i64("adj_indices", {1, 0}),
                           {"adj_data", "<f4", "(2,)", bytes_of(std::vector<float>{1.0f, kNan})}}));

  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("adj.npz"), HasSubstr("'adj_data'"),
                                               HasSubstr("index 1 (row 1, column 0)"),
                                               HasSubstr("not finite"))));
}

TEST(DatasetsBadInputs, InfiniteHeterophilousNodeFeatureIsRefusedNamingRowAndColumn) {
  const TempDir dir;
  const std::vector<float> features = {0, 1, 2, 3, 4, kInf};
  const std::string masks = std::string("\x01\x00\x00", 3);
  const std::string path = dir.write(
      "het.npz",
      npz_bytes({{"node_features", "<f4", "(3, 2)", bytes_of(features)},
                 i64("node_labels", {0, 1, 0}),
                 {"edges", "<i8", "(2, 2)", bytes_of(std::vector<std::int64_t>{0, 1, 1, 2})},
                 {"train_masks", "|b1", "(1, 3)", masks},
                 {"val_masks", "|b1", "(1, 3)", masks},
                 {"test_masks", "|b1", "(1, 3)", masks}}));

  EXPECT_THAT([&] { load("heterophilous:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("het.npz"), HasSubstr("'node_features'"),
                                               HasSubstr("row 2, column 1"))));
}

TEST(DatasetsBadInputs, NanLinqsFeatureIsRefusedNamingFileAndRow) {
  const TempDir dir;
  const std::string content = dir.write("toy.content", "p1 0 1 x\np2 nan 0 y\n");
  dir.write("toy.cites", "p1 p2\n");

  EXPECT_THAT(
      [&] { load("linqs:" + content); },
      ThrowsMessage<FormatError>(
          AllOf(HasSubstr("toy.content"), HasSubstr("row 1, column 0"), HasSubstr("not finite"))));
}

TEST(DatasetsBadInputs, LinqsFeatureBeyondFloatRangeIsRefusedAsSuch) {
  const TempDir dir;
  const std::string content = dir.write("toy.content", "p1 0 1e40 x\np2 1 0 y\n");
  dir.write("toy.cites", "p1 p2\n");

  EXPECT_THAT([&] { load("linqs:" + content); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("toy.content:1:"), HasSubstr("'1e40'"),
                                               HasSubstr("row 0, column 1"),
                                               HasSubstr("beyond float32's range"))));
}

TEST(DatasetsBadInputs, NanNativeFeatureIsRefusedNamingFeaturesBin) {
  const TempDir dir;
  Dataset ds = small_sbm();
  ds.features.dense->data()[7 * 5 + 4] = kNan;
  save_native(ds, dir.file("nan"));

  EXPECT_THAT(
      [&] { load("native:" + dir.file("nan")); },
      ThrowsMessage<FormatError>(
          AllOf(HasSubstr("features.bin"), HasSubstr("row 7, column 4"), HasSubstr("not finite"))));
}

TEST(DatasetsBadInputs, InfiniteNativeEdgeValueIsRefusedNamingAdjValBin) {
  const TempDir dir;
  Dataset ds = small_sparse();
  ds.adjacency.val()[0] = kInf; // row 0, column 1
  save_native(ds, dir.file("inf"));

  EXPECT_THAT([&] { load("native:" + dir.file("inf")); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("adj_val.bin"), HasSubstr("edge value"),
                                               HasSubstr("row 0, column 1"))));
}

TEST(DatasetsBadInputs, NanMatrixMarketValueIsRefusedNamingLine) {
  const TempDir dir;
  const std::string path = dir.write(
      "w.mtx", "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 2 1.5\n2 3 nan\n");

  EXPECT_THAT([&] { load("mtx:" + path); },
              ThrowsMessage<FormatError>(
                  AllOf(HasSubstr("w.mtx:4:"), HasSubstr("'nan'"), HasSubstr("not finite"))));
}

// ---- 10: sizes come from the data, never from one number in it --------------------------------

TEST(DatasetsBadInputs, SnapLoneHugeIdIsRefusedNamingIdLineAndDistinctIds) {
  const TempDir dir;
  const std::string path = dir.write("sparse.txt", "1 2\n2 20000000\n");

  EXPECT_THAT([&] { load("snap:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("id 20000000 on line 2 of " + path),
                                               HasSubstr("3 distinct ids"))));
}

TEST(DatasetsBadInputs, SnapIdsWithSmallGapsStillKeepTheirNumbers) {
  const TempDir dir;
  const std::string path = dir.write("gaps.txt", "0 5\n5 900\n");

  const Dataset ds = load("snap:" + path);

  EXPECT_EQ(ds.num_nodes, 901);
  EXPECT_EQ(ds.adjacency.nnz(), 4);
}

TEST(DatasetsBadInputs, EmailLabelOfFarAwayNodeIsRefusedNamingLabelsLine) {
  const TempDir dir;
  std::filesystem::create_directories(dir.file("email_eu_core"));
  {
    gzFile file = gzopen(dir.file("email_eu_core/email-Eu-core.txt.gz").c_str(), "wb");
    gzputs(file, "0 1\n1 2\n");
    gzclose(file);
  }
  dir.write("email_eu_core/email-Eu-core-department-labels", "0 1\n1 0\n30000000 1\n");
  LoadOptions options;
  options.data_dir = dir.file("");

  EXPECT_THAT([&] { load_dataset(cpu(), "email-eu-core", options); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("email-Eu-core-department-labels:3:"),
                                               HasSubstr("node 30000000 is not in the graph"),
                                               HasSubstr("has 3 nodes"))));
}

TEST(DatasetsBadInputs, MatrixMarketHugeSizeLineIsRefusedBeforeAllocating) {
  const TempDir dir;
  const std::string path = dir.write(
      "big.mtx", "%%MatrixMarket matrix coordinate pattern general\n20000000 20000000 1\n1 2\n");

  EXPECT_THAT([&] { load("mtx:" + path); },
              ThrowsMessage<FormatError>(
                  AllOf(HasSubstr("big.mtx:2:"), HasSubstr("20000000 rows for 1 entries"))));
}

TEST(DatasetsBadInputs, MatrixMarketHugeEntryCountIsAFormatErrorNotBadAlloc) {
  const TempDir dir;
  const std::string path = dir.write(
      "many.mtx", "%%MatrixMarket matrix coordinate pattern general\n3 3 100000000000\n1 2\n");

  EXPECT_THAT([&] { load("mtx:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("many.mtx:2:"),
                                               HasSubstr("promises 100000000000 entries"),
                                               HasSubstr("can hold at most"))));
}

TEST(DatasetsBadInputs, MetisHugeEdgeCountIsAFormatErrorNotBadAlloc) {
  const TempDir dir;
  const std::string path = dir.write("many.graph", "3 100000000000\n2\n1\n\n");

  EXPECT_THAT([&] { load("metis:" + path); },
              ThrowsMessage<FormatError>(
                  AllOf(HasSubstr("many.graph:1:"), HasSubstr("promises 100000000000 edges"))));
}

TEST(DatasetsBadInputs, SingleHugeNpzLabelIsRefusedNamingLabelAndFile) {
  const TempDir dir;
  Dataset ds = small_sparse();
  ds.labels = {0, 1000000, -1, -1};
  ds.num_classes = 1000001;
  save_npz(ds, dir.file("label.npz"));

  EXPECT_THAT([&] { load("npz:" + dir.file("label.npz")); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("label.npz"), HasSubstr("'labels'"),
                                               HasSubstr("label 1000000 at node 1"),
                                               HasSubstr("2 labelled rows"))));
}

TEST(DatasetsBadInputs, NativeHugeNumClassesIsRefusedNamingDatasetJson) {
  const TempDir dir;
  save_native(small_sbm(), dir.file("g"));
  edit_description(dir.file("g"), "num_classes", "1000000");

  EXPECT_THAT([&] { load("native:" + dir.file("g")); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("dataset.json"), HasSubstr("num_classes"),
                                               HasSubstr("1000000"))));
}

// ---- ids beyond 64 bits, negative ones, and huge ones that fit: refused naming file and line --

/// A text file of one format that must be refused with a message holding `where` and `what`.
struct BadText {
  std::string format, name, content, where, what;
};

const std::string kBeyond64Bits = "99999999999999999999999";
const std::string kMtxBanner = "%%MatrixMarket matrix coordinate pattern general\n";

void expect_refused(const std::vector<BadText>& cases) {
  const TempDir dir;
  for (const BadText& c : cases) {
    const std::string path = dir.write(c.name, c.content);

    EXPECT_THAT([&] { load(c.format + ":" + path); },
                ThrowsMessage<FormatError>(AllOf(HasSubstr(c.where), HasSubstr(c.what))))
        << c.name;
  }
}

TEST(DatasetsBadInputs, IdBeyond64BitsIsRefusedNamingFileAndLine) {
  const std::string& huge = kBeyond64Bits;
  const std::string beyond = "beyond the 64-bit integer range";

  expect_refused(
      {{"snap", "a.txt", "0 1\n0 " + huge + "\n", "a.txt:2:", beyond},
       {"metis", "a.graph", "2 1\n2\n" + huge + "\n", "a.graph:3:", beyond},
       {"metis", "b.graph", huge + " 1\n2\n1\n", "b.graph:1:", beyond},
       {"mtx", "a.mtx", kMtxBanner + "3 3 1\n1 " + huge + "\n", "a.mtx:3:", beyond},
       {"mtx", "b.mtx", kMtxBanner + huge + " " + huge + " 1\n1 2\n", "b.mtx:2:", beyond}});
}

TEST(DatasetsBadInputs, NegativeIdIsRefusedNamingFileAndLine) {
  expect_refused(
      {{"snap", "a.txt", "-1 0\n", "a.txt:1:", "node id -1 is outside"},
       {"metis", "a.graph", "2 1\n-1\n1\n", "a.graph:2:", "neighbour -1 of vertex 1 is outside"},
       {"mtx", "a.mtx", kMtxBanner + "3 3 1\n-1 2\n", "a.mtx:3:", "index -1 is outside [1, 3]"}});
}

// Ids are row numbers: one that fits 64 bits but not a CSR is refused before anything is sized.
TEST(DatasetsBadInputs, HugeIdThatFits64BitsIsRefusedBeforeAllocating) {
  const std::string big = "9000000000000000000";

  expect_refused(
      {{"snap", "a.txt", "0 " + big + "\n", "a.txt:1:", "node id " + big + " is outside"},
       {"metis", "a.graph", "2 1\n" + big + "\n1\n", "a.graph:2:", "neighbour " + big},
       {"metis", "b.graph", big + " 1\n2\n1\n", "b.graph", "exceed the 2^31 - 1"},
       {"mtx", "a.mtx", kMtxBanner + "3 3 1\n1 " + big + "\n", "a.mtx:3:", "index " + big},
       {"mtx", "b.mtx", kMtxBanner + big + " " + big + " 1\n1 2\n", "b.mtx",
        "exceed the 2^31 - 1"}});
}

TEST(DatasetsBadInputs, MusaeIdBeyond64BitsIsRefusedNamingFileAndLine) {
  const TempDir dir;
  const std::string& huge = kBeyond64Bits;
  // No header: the first record must not be taken for one and dropped.
  const std::string edges = dir.write("toy_edges.csv", huge + ",1\n0,1\n");
  dir.write("toy_target.csv", "id,name,type\n0,a,x\n1,b,y\n");
  dir.write("toy.json", R"({"0": [0], "1": [1]})");
  dir.write("bad_target.csv", "id,name,type\n0,a,x\n" + huge + ",b,y\n");
  const std::string other_edges = dir.write("bad_edges.csv", "id_1,id_2\n0,1\n");
  dir.write("bad.json", R"({"0": [0]})");

  EXPECT_THAT([&] { load("musae:" + edges); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("toy_edges.csv:1:"), HasSubstr(huge),
                                               HasSubstr("beyond the 64-bit integer range"))));
  EXPECT_THAT([&] { load("musae:" + other_edges); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("bad_target.csv:3:"),
                                               HasSubstr("beyond the 64-bit integer range"))));
}

TEST(DatasetsBadInputs, NulByteInATextFileIsRefusedNamingLine) {
  const TempDir dir;
  const std::string path = dir.write("nul.txt", std::string("0 1\n1 \0 2\n", 10));

  EXPECT_THAT([&] { load("snap:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("nul.txt:2:"), HasSubstr("NUL byte"))));
}

// Not run against the old code, which read gigabytes of /dev/zero before failing. A device is
// refused before a byte of it is read (issue 37: inputs that are not regular files).
TEST(DatasetsBadInputs, DevZeroFailsAtOnceForEveryTextFormat) {
  for (const std::string format : {"snap", "linqs", "metis", "mtx", "npz"}) {
    EXPECT_THAT([&] { load(format + ":/dev/zero"); },
                ThrowsMessage<IoError>(AllOf(HasSubstr("/dev/zero"),
                                             HasSubstr("character device, not a regular file"))))
        << format;
  }
}

// ---- 12: a label of 2^31 - 1 does not overflow the class count --------------------------------

TEST(DatasetsBadInputs, LabelOfIntMaxIsRefusedNotOverflowed) {
  const TempDir dir;
  const std::string path = dir.write(
      "max.npz", npz_bytes({i64("adj_indptr", {0, 1, 2}), i64("adj_indices", {1, 0}),
                            i64("labels", {0, std::numeric_limits<std::int32_t>::max()})}));

  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(
                  AllOf(HasSubstr("max.npz"), HasSubstr("label 2147483647 at node 1"))));
}

// ---- 13: empty arrays are valid npz members ---------------------------------------------------

TEST(DatasetsBadInputs, NpzWithAnEmptyValIdxLoads) {
  const TempDir dir;
  const std::string path =
      dir.write("empty.npz", npz_bytes({i64("adj_indptr", {0, 1, 2}), i64("adj_indices", {1, 0}),
                                        i64("labels", {0, 1}), i64("train_idx", {0}),
                                        i64("val_idx", {}), i64("test_idx", {1})}));

  const Dataset ds = load("npz:" + path);

  EXPECT_TRUE(ds.val_idx.empty());
  EXPECT_EQ(ds.test_idx, std::vector<std::int32_t>{1});
}

TEST(DatasetsBadInputs, NpzWithZeroEdgesLoads) {
  const TempDir dir;
  const std::string path =
      dir.write("noedges.npz", npz_bytes({i64("adj_indptr", {0, 0, 0}), i64("adj_indices", {})}));

  const Dataset ds = load("npz:" + path);

  EXPECT_EQ(ds.num_nodes, 2);
  EXPECT_EQ(ds.adjacency.nnz(), 0);
}

TEST(DatasetsBadInputs, HeterophilousNpzWithEdgesOfShapeZeroByTwoLoads) {
  const TempDir dir;
  const std::string train = std::string("\x01\x00", 2), test = std::string("\x00\x01", 2);
  const std::string path = dir.write(
      "het.npz", npz_bytes({{"node_features", "<f4", "(2, 1)", bytes_of(std::vector<float>{1, 2})},
                            i64("node_labels", {0, 1}),
                            {"edges", "<i8", "(0, 2)", ""},
                            {"train_masks", "|b1", "(1, 2)", train},
                            {"val_masks", "|b1", "(1, 2)", std::string(2, '\0')},
                            {"test_masks", "|b1", "(1, 2)", test}}));

  const Dataset ds = load("heterophilous:" + path);

  EXPECT_EQ(ds.adjacency.nnz(), 0);
  EXPECT_EQ(ds.num_classes, 2);
}

TEST(DatasetsBadInputs, SavedNpzCarriesCrcsThatZlibAgreesWithForEmptyArrays) {
  const TempDir dir;
  Dataset ds = small_sparse();
  ds.train_idx = {0};
  ds.test_idx = {1}; // val_idx stays empty
  save_npz(ds, dir.file("s.npz"));
  const std::string zip = read_bytes(dir.file("s.npz"));
  const auto get = [&](std::size_t at, int bytes) {
    std::uint32_t v = 0;
    std::memcpy(&v, zip.data() + at, static_cast<std::size_t>(bytes));
    return bytes == 2 ? v & 0xFFFF : v;
  };

  int members = 0;
  for (std::size_t at = 0; get(at, 4) == 0x04034b50; ++members) {
    const std::size_t data = at + 30 + get(at + 26, 2) + get(at + 28, 2);
    const std::uint32_t size = get(at + 18, 4);
    const auto expected = static_cast<std::uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(zip.data() + data), size));
    EXPECT_EQ(get(at + 14, 4), expected) << zip.substr(at + 30, get(at + 26, 2));
    at = data + size;
  }

  EXPECT_GE(members, 6);
}

// ---- messages ---------------------------------------------------------------------------------

TEST(DatasetsBadInputs, FolderWithoutDatasetJsonSaysSoInsteadOfUnknownName) {
  const TempDir dir;
  std::filesystem::create_directories(dir.file("plain"));

  EXPECT_THAT(
      [&] { load(dir.file("plain")); },
      ThrowsMessage<IoError>(AllOf(HasSubstr(dir.file("plain")),
                                   HasSubstr("has no dataset.json (not a native dataset"))));
}

TEST(DatasetsBadInputs, SplitIndexBeyondTheStoredSplitsIsRefusedNamingHowMany) {
  const TempDir dir;
  save_npz(small_sbm(), dir.file("one.npz"));

  EXPECT_THAT([&] { load("npz:" + dir.file("one.npz"), 0, 2); },
              ThrowsMessage<InvalidArgument>(AllOf(HasSubstr("split index 2 is out of range"),
                                                   HasSubstr("one.npz' stores 1 split"),
                                                   HasSubstr("accepted: 0"))));
  EXPECT_THAT([&] { load("snap:" + dir.write("g.txt", "0 1\n"), 0, 1); },
              ThrowsMessage<InvalidArgument>(HasSubstr("stores no split")));
}

TEST(DatasetsBadInputs, NativeLabelOutOfRangeIsRefusedNamingLabelsBin) {
  const TempDir dir;
  Dataset ds = small_sparse();
  ds.labels[3] = 9; // num_classes stays 2
  save_native(ds, dir.file("g"));

  EXPECT_THAT([&] { load("native:" + dir.file("g")); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("labels.bin"),
                                               HasSubstr("label 9 at row 3 is outside [0, 2)"),
                                               HasSubstr("num_classes"))));
}

// ---- the npz writer --------------------------------------------------------------------------

TEST(DatasetsBadInputs, NpzWriterLeavesAPlantedTemporaryLinkAlone) {
  const TempDir dir;
  const std::string victim = dir.write("victim", "keep me");
  const std::string path = dir.file("out.npz");
  std::filesystem::create_symlink(victim, path + ".tmp." + std::to_string(::getpid()));

  save_npz(small_sparse(), path);

  EXPECT_EQ(read_bytes(victim), "keep me");
  EXPECT_TRUE(std::filesystem::is_regular_file(std::filesystem::symlink_status(path)));
  EXPECT_EQ(load("npz:" + path).num_nodes, 4);
}

} // namespace
} // namespace tessera::datasets::tests
