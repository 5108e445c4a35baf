// Inputs that cannot lie, part 2 (issue 37): files read as numpy reads them, shapes whose product
// overflows, inputs that are not regular files, bytes after the data, and stored splits checked
// and kept. Each test names the hostile case it tries; every one failed before its fix.
#include "assembly.hpp"
#include "dataset_test_util.hpp"
#include "npz.hpp"
#include "npz_bytes.hpp"
#include "tessera/core/error.hpp"
#include "tessera/datasets/row_block.hpp"
#include "tessera/graph/graph.hpp"

#include <filesystem>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <vector>
#include <zlib.h>

namespace tessera::datasets::tests {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::ThrowsMessage;

Member i64(const std::string& key, const std::vector<std::int64_t>& values) {
  // Appended piecewise: GCC 12 warns falsely (-Wrestrict) on the chained operator+ form.
  std::string shape = "(";
  shape += std::to_string(values.size());
  shape += ",)";
  return {key, "<i8", shape, bytes_of(values)};
}

Member mask(const std::string& key, const std::string& shape, const std::string& bits) {
  std::string data;
  for (const char bit : bits)
    data.push_back(bit == '1' ? '\x01' : '\x00');
  return {key, "|b1", shape, data};
}

/// A path graph 0-1-2-3-4-5 in Planetoid-style keys, labels 0/1, dense features, and `extra`
/// members (a split) after them.
std::string planetoid_npz(const TempDir& dir, const std::vector<Member>& extra,
                          const std::string& name = "g.npz") {
  std::vector<Member> members = {
      i64("adj_indptr", {0, 1, 3, 5, 7, 9, 10}),
      i64("adj_indices", {1, 0, 2, 1, 3, 2, 4, 3, 5, 4}),
      {"features", "<f4", "(6, 2)", bytes_of(std::vector<float>(12, 0.5f))},
      i64("labels", {0, 1, 0, 1, 0, 1})};
  members.insert(members.end(), extra.begin(), extra.end());
  return dir.write(name, npz_bytes(members));
}

/// The heterophilous layout over the same graph, with the given masks.
std::string heterophilous_npz(const TempDir& dir, const std::vector<Member>& masks) {
  std::vector<Member> members = {
      {"node_features", "<f4", "(6, 2)", bytes_of(std::vector<float>(12, 0.5f))},
      i64("node_labels", {0, 1, 0, 1, 0, 1}),
      {"edges", "<i8", "(5, 2)",
       bytes_of(std::vector<std::int64_t>{0, 1, 1, 2, 2, 3, 3, 4, 4, 5})}};
  members.insert(members.end(), masks.begin(), masks.end());
  return dir.write("het.npz", npz_bytes(members));
}

/// Writes `text` gzip'd to `path`.
void write_gzip(const std::string& path, const std::string& text) {
  gzFile file = gzopen(path.c_str(), "wb");
  gzwrite(file, text.data(), static_cast<unsigned>(text.size()));
  gzclose(file);
}

// ---- 1: a shape whose product overflows -------------------------------------------------------

TEST(DatasetsHostileInputs, NpyShapeWhoseProductOverflowsIsRefusedNamingFileArrayAndShape) {
  const TempDir dir;
  // (200, 2^62) elements wrap to 0 mod 2^64: over a 0-byte payload they passed the size check.
  const std::string path = planetoid_npz(
      dir, {{"attr_indptr", "<i8", "(200, 4611686018427387904)", ""}}, "overflow.npz");

  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(
                  AllOf(HasSubstr("overflow.npz"), HasSubstr("'attr_indptr'"),
                        HasSubstr("(200, 4611686018427387904)"), HasSubstr("overflows"))));
}

TEST(DatasetsHostileInputs, DenseFeaturesOfAWrappingWidthAreRefusedBeforeAnyAllocation) {
  const TempDir dir;
  const std::string path =
      dir.write("wide.npz", npz_bytes({i64("adj_indptr", {0, 0}),
                                       i64("adj_indices", {}),
                                       {"features", "<f4", "(1, 4611686018427387904)", ""},
                                       i64("labels", {0})}));

  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("'features'"), HasSubstr("overflows"))));
}

// ---- 2: inputs that are not regular files are refused before they are opened ------------------

TEST(DatasetsHostileInputs, FifoGivenAsAnyInputIsRefusedSayingWhatItIs) {
  const TempDir dir;
  const std::string fifo = dir.file("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);

  // Each would block forever in open() or read() waiting for a writer.
  for (const std::string format : {"npz", "snap", "linqs", "metis", "mtx", "planetoid"}) {
    EXPECT_THAT([&] { load(format + ":" + fifo); },
                ThrowsMessage<IoError>(AllOf(HasSubstr("pipe"), HasSubstr("FIFO (named pipe)"),
                                             HasSubstr("not a regular file"))))
        << format;
  }
}

TEST(DatasetsHostileInputs, FifoInsideANativeDatasetIsRefusedNamingIt) {
  const TempDir dir;
  save_native(load("sbm:nodes=60,classes=2,avg-degree=4,features=3", 1), dir.file("g"));
  std::filesystem::remove(dir.file("g/labels.bin"));
  ASSERT_EQ(::mkfifo(dir.file("g/labels.bin").c_str(), 0600), 0);

  EXPECT_THAT([&] { load(dir.file("g")); },
              ThrowsMessage<IoError>(AllOf(HasSubstr("labels.bin"), HasSubstr("FIFO"))));
}

// ---- 5: npz members numpy would read otherwise ------------------------------------------------

TEST(DatasetsHostileInputs, TwoNpzMembersOfOneNameAreRefusedNamingBoth) {
  const TempDir dir;
  // numpy's np.load takes the last of the two: 3 training nodes, not 1.
  const std::string path = planetoid_npz(
      dir, {i64("train_idx", {0}), i64("test_idx", {5}), i64("train_idx", {0, 1, 2})});

  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("g.npz"), HasSubstr("members 4"),
                                               HasSubstr("and 6"), HasSubstr("'train_idx'"))));
}

TEST(DatasetsHostileInputs, KeyAndKeyDotNpyAreTheSameArrayAndRefused) {
  const TempDir dir;
  std::string bytes = read_bytes(
      planetoid_npz(dir, {i64("train_idx", {1}), i64("train", {0}), i64("test_idx", {5})}));
  // "train.npy" renamed "train_idx" (as long) in the local header and the directory: a member
  // that numpy's np.load reads for "train_idx" before "train_idx.npy".
  for (std::size_t at; (at = bytes.find("train.npy")) != std::string::npos;)
    bytes.replace(at, 9, "train_idx");
  const std::string path = dir.write("raw.npz", bytes);

  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(
                  AllOf(HasSubstr("('train_idx.npy')"), HasSubstr("('train_idx')"))));
}

TEST(DatasetsHostileInputs, MemberWhoseLocalNameDiffersFromTheDirectoryIsRefused) {
  const TempDir dir;
  std::string bytes = read_bytes(planetoid_npz(dir, {}));
  // The first "labels.npy" is the local header's; the central directory keeps its own.
  bytes.replace(bytes.find("labels.npy"), 10, "lobels.npy");
  const std::string path = dir.write("renamed.npz", bytes);

  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("renamed.npz"), HasSubstr("'labels.npy'"),
                                               HasSubstr("'lobels.npy' in its own header"))));
}

// ---- 6: booleans are no ids, and masks hold booleans ------------------------------------------

TEST(DatasetsHostileInputs, BooleanTrainIdxIsRefusedSayingWhatItHoldsAndWhatIsWanted) {
  const TempDir dir;
  // Read as ids, this mask trained on nodes 0 and 1.
  const std::string path =
      planetoid_npz(dir, {mask("train_idx", "(6,)", "011100"), i64("test_idx", {5})});

  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(
                  AllOf(HasSubstr("'train_idx'"), HasSubstr("booleans"), HasSubstr("node ids"))));
}

TEST(DatasetsHostileInputs, BooleanEdgesAreRefusedNotReadAsOneEdge) {
  const TempDir dir;
  const std::string path = dir.write(
      "het.npz",
      npz_bytes({{"node_features", "<f4", "(3, 1)", bytes_of(std::vector<float>{1, 2, 3})},
                 i64("node_labels", {0, 1, 0}),
                 {"edges", "|b1", "(2, 2)", std::string("\x01\x01\x01\x01", 4)},
                 mask("train_masks", "(3,)", "100"),
                 mask("val_masks", "(3,)", "010"),
                 mask("test_masks", "(3,)", "001")}));

  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("'edges'"), HasSubstr("booleans"))));
}

TEST(DatasetsHostileInputs, FloatLabelsAndIdsNameTheirDtype) {
  const TempDir dir;
  const std::string path =
      planetoid_npz(dir, {{"train_idx", "<f8", "(1,)", bytes_of(std::vector<double>{1.0})},
                          i64("test_idx", {5})});

  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(
                  AllOf(HasSubstr("'train_idx'"), HasSubstr("<f8"), HasSubstr("node ids"))));
}

TEST(DatasetsHostileInputs, MaskOfIntegersOtherThanZeroAndOneIsRefused) {
  const TempDir dir;
  const std::string path = heterophilous_npz(
      dir, {{"train_masks", "|u1", "(1, 6)", std::string("\x02\x00\x00\x00\x00\x00", 6)},
            mask("val_masks", "(1, 6)", "010000"),
            mask("test_masks", "(1, 6)", "001000")});

  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("'train_masks'"), HasSubstr("value 2"),
                                               HasSubstr("not a mask value"))));
}

TEST(DatasetsHostileInputs, MaskOfZerosAndOnesAsIntegersIsAccepted) {
  const TempDir dir;
  const std::string path = heterophilous_npz(
      dir, {{"train_masks", "<i8", "(1, 6)", bytes_of(std::vector<std::int64_t>{1, 1, 0, 0, 0, 0})},
            mask("val_masks", "(1, 6)", "001000"),
            mask("test_masks", "(1, 6)", "000111")});

  const Dataset ds = load("npz:" + path);

  EXPECT_EQ(ds.train_idx, (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(ds.test_idx, (std::vector<std::int32_t>{3, 4, 5}));
}

// ---- 7: splits are checked, not taken on trust ------------------------------------------------

TEST(DatasetsHostileInputs, OverlappingTrainAndTestAreRefusedNamingPartsAndCount) {
  const TempDir dir;
  const std::string path = planetoid_npz(
      dir, {i64("train_idx", {0, 1, 2}), i64("val_idx", {3}), i64("test_idx", {1, 2, 5})});

  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(
                  AllOf(HasSubstr("g.npz"), HasSubstr("train and test"), HasSubstr("share 2 nodes"),
                        HasSubstr("first: node 1"), HasSubstr("allow split overlap"))));
}

TEST(DatasetsHostileInputs, ValidationEqualToTestIsRefused) {
  const TempDir dir;
  const std::string path = planetoid_npz(
      dir, {i64("train_idx", {0, 1}), i64("val_idx", {4, 5}), i64("test_idx", {4, 5})});

  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("val and test"), HasSubstr("share 2"))));
}

TEST(DatasetsHostileInputs, OverlapIsAcceptedWhenTheUserSaysSo) {
  const TempDir dir;
  const std::string path = planetoid_npz(
      dir, {i64("train_idx", {0, 1}), i64("val_idx", {4, 5}), i64("test_idx", {4, 5})});
  LoadOptions options;
  options.allow_split_overlap = true;

  const Dataset ds = load_dataset(cpu(), "npz:" + path, options);

  EXPECT_EQ(ds.val_idx, ds.test_idx);
}

TEST(DatasetsHostileInputs, NodeListedTwiceInOnePartIsRefused) {
  const TempDir dir;
  const std::string path = planetoid_npz(dir, {i64("train_idx", {0, 2, 0}), i64("test_idx", {5})});

  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("train part lists node 0 twice"))));
}

TEST(DatasetsHostileInputs, MasksOfDifferentSplitCountsAreRefusedNamingBoth) {
  const TempDir dir;
  const std::string path = heterophilous_npz(dir, {mask("train_masks", "(1, 6)", "110000"),
                                                   mask("val_masks", "(2, 6)", "001000001000"),
                                                   mask("test_masks", "(2, 6)", "000111000111")});

  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(
                  AllOf(HasSubstr("'train_masks' holds 1 split(s)"), HasSubstr("'val_masks' 2"))));
}

TEST(DatasetsHostileInputs, AllTrueTrainMaskIsRefusedAsOverlappingTheOthers) {
  const TempDir dir;
  const std::string path = heterophilous_npz(dir, {mask("train_masks", "(1, 6)", "111111"),
                                                   mask("val_masks", "(1, 6)", "001000"),
                                                   mask("test_masks", "(1, 6)", "000011")});

  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("het.npz"), HasSubstr("train and val"),
                                               HasSubstr("share 1 node"))));
}

TEST(DatasetsHostileInputs, UnlabelledNodeInASplitIsRefusedNamingFileSplitAndNode) {
  const TempDir dir;
  const std::string path = dir.write(
      "g.npz", npz_bytes({i64("adj_indptr", {0, 1, 2}),
                          i64("adj_indices", {1, 0}),
                          {"features", "<f4", "(2, 1)", bytes_of(std::vector<float>{1, 2})},
                          i64("labels", {0, -1}),
                          i64("train_idx", {0}),
                          i64("test_idx", {1})}));

  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("g.npz: array 'labels'"),
                                               HasSubstr("node 1 of the test part is unlabelled"),
                                               HasSubstr("-1 means unlabelled"))));
}

// ---- 8: a stored split that is empty or missing a part is not replaced ------------------------

TEST(DatasetsHostileInputs, AllFalseTrainMaskIsRefusedNotReplacedByARandomSplit) {
  const TempDir dir;
  const std::string path = heterophilous_npz(dir, {mask("train_masks", "(1, 6)", "000000"),
                                                   mask("val_masks", "(1, 6)", "001000"),
                                                   mask("test_masks", "(1, 6)", "000011")});

  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("het.npz"), HasSubstr("no train nodes"),
                                               HasSubstr("train 0, val 1, test 2"))));
}

TEST(DatasetsHostileInputs, ValAndTestWithoutTrainIsRefusedNamingWhatIsMissing) {
  const TempDir dir;
  const std::string path = planetoid_npz(dir, {i64("val_idx", {3}), i64("test_idx", {4, 5})});

  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("no train nodes"))));
}

TEST(DatasetsHostileInputs, EmptyTrainIdxArrayIsAStoredSplitWithoutTrain) {
  const TempDir dir;
  const std::string path = planetoid_npz(dir, {i64("train_idx", {})});

  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(HasSubstr("no train and no test nodes")));
}

TEST(DatasetsHostileInputs, SplitWithoutValidationIsKept) {
  const TempDir dir;
  const std::string path = planetoid_npz(dir, {i64("train_idx", {0, 1}), i64("test_idx", {4, 5})});

  Dataset ds = load("npz:" + path);
  const bool drawn = use_default_split_when_missing(ds, 1);

  EXPECT_FALSE(drawn);
  EXPECT_TRUE(ds.val_idx.empty());
  EXPECT_EQ(ds.train_idx, (std::vector<std::int32_t>{0, 1}));
}

// ---- 9: bytes after the data ------------------------------------------------------------------

TEST(DatasetsHostileInputs, BytesAfterAGzipStreamAreRefusedNamingTheOffset) {
  const TempDir dir;
  const std::string path = dir.file("edges.txt.gz");
  write_gzip(path, "0 1\n1 2\n");
  const auto size = std::filesystem::file_size(path);
  std::ofstream(path, std::ios::binary | std::ios::app) << "2 3\n9 9\n";

  EXPECT_THAT([&] { load("snap:" + path); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("edges.txt.gz"),
                                               HasSubstr("8 bytes after the end of the gzip data"),
                                               HasSubstr("from byte " + std::to_string(size)))));
}

TEST(DatasetsHostileInputs, ConcatenatedGzipMembersAndZeroPaddingAreRead) {
  const TempDir dir;
  const std::string first = dir.file("a.gz"), second = dir.file("b.gz");
  write_gzip(first, "0 1\n");
  write_gzip(second, "1 2\n");
  const std::string both =
      dir.write("both.txt.gz", read_bytes(first) + read_bytes(second) + std::string(16, '\0'));

  const Dataset ds = load("snap:" + both);

  EXPECT_EQ(ds.num_nodes, 3);
  EXPECT_EQ(ds.adjacency.nnz(), 4);
}

TEST(DatasetsHostileInputs, BytesAfterANativeArrayPayloadAreRefused) {
  const TempDir dir;
  save_native(load("sbm:nodes=60,classes=2,avg-degree=4,features=3", 1), dir.file("g"));
  std::ofstream(dir.file("g/labels.bin"), std::ios::binary | std::ios::app) << "tail";

  EXPECT_THAT([&] { load(dir.file("g")); },
              ThrowsMessage<FormatError>(
                  AllOf(HasSubstr("labels.bin"), HasSubstr("4 bytes after the payload"))));
}

// ---- 12: every stored split is kept -----------------------------------------------------------

/// Six nodes with three stored splits.
Dataset three_splits() {
  const TempDir dir;
  return load("npz:" + heterophilous_npz(dir, {mask("train_masks", "(3, 6)", "110000011000001100"),
                                               mask("val_masks", "(3, 6)", "001000000100000010"),
                                               mask("test_masks", "(3, 6)", "000111100011110001")}),
              0, 1);
}

TEST(DatasetsHostileInputs, EveryStoredSplitSurvivesAnNpzAndANativeCopy) {
  const TempDir dir;
  const Dataset original = three_splits();
  ASSERT_EQ(original.num_splits(), 3);
  save_npz(original, dir.file("copy.npz"));
  save_native(original, dir.file("copy"));

  for (const std::string& spec : {"npz:" + dir.file("copy.npz"), dir.file("copy")}) {
    for (int k = 0; k < 3; ++k) {
      const Dataset copy = load(spec, 0, k);
      SCOPED_TRACE(spec + " split " + std::to_string(k));
      EXPECT_EQ(copy.num_splits(), 3);
      EXPECT_EQ(copy.train_idx, original.all_splits[k].train);
      EXPECT_EQ(copy.val_idx, original.all_splits[k].val);
      EXPECT_EQ(copy.test_idx, original.all_splits[k].test);
    }
    EXPECT_THAT([&] { load(spec, 0, 3); },
                ThrowsMessage<InvalidArgument>(HasSubstr("stores 3 splits")));
  }
}

TEST(DatasetsHostileInputs, NativeRowsReadTheChosenSplit) {
  const TempDir dir;
  save_native(three_splits(), dir.file("copy"));
  LoadOptions options;
  options.split_index = 2;

  const RowBlock block = load_dataset_rows(cpu(), dir.file("copy"), options, {2, 6});

  EXPECT_EQ(block.train_idx, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(block.test_idx, (std::vector<std::int64_t>{5}));
}

// ---- a native adjacency in the form a Dataset promises -----------------------------------------

/// The path graph of planetoid_npz with its adjacency replaced by `rows` (a list of (column,
/// value) pairs per row), saved as a native folder: what a hand-edited or foreign file set holds.
std::string native_with_rows(const TempDir& dir,
                             const std::vector<std::vector<std::pair<int, float>>>& rows) {
  Dataset ds = load("npz:" + planetoid_npz(dir, {}));
  std::int64_t nnz = 0;
  for (const auto& row : rows)
    nnz += static_cast<std::int64_t>(row.size());
  Csr a(cpu(), ds.num_nodes, ds.num_nodes, nnz);
  a.row_ptr()[0] = 0;
  Offset k = 0;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    for (const auto& [c, v] : rows[r]) {
      a.col()[k] = c;
      a.val()[k++] = v;
    }
    a.row_ptr()[r + 1] = k;
  }
  ds.adjacency = std::move(a);
  save_native(ds, dir.file("native"), true);
  return dir.file("native");
}

/// The path graph 0-1-2-3-4-5 as rows of (column, value).
std::vector<std::vector<std::pair<int, float>>> path_rows() {
  return {{{1, 1.f}},           {{0, 1.f}, {2, 1.f}}, {{1, 1.f}, {3, 1.f}},
          {{2, 1.f}, {4, 1.f}}, {{3, 1.f}, {5, 1.f}}, {{4, 1.f}}};
}

TEST(DatasetsHostileInputs, NativeAdjacencyOutOfTheDatasetFormIsRefusedNamingFileRowAndColumn) {
  const TempDir dir;
  EXPECT_NO_THROW(load(native_with_rows(dir, path_rows())));
  const auto refused = [&](std::vector<std::vector<std::pair<int, float>>> rows,
                           const std::string& file, const std::string& problem) {
    const std::string native = native_with_rows(dir, rows);
    EXPECT_THAT([&] { load(native); },
                ThrowsMessage<FormatError>(AllOf(HasSubstr(file), HasSubstr(problem))))
        << problem;
    // The rows a rank reads are checked the same way, row numbers global.
    LoadOptions options;
    EXPECT_THAT(
        [&] {
          load_dataset_rows(cpu(), native, options, {2, 6});
        },
        ThrowsMessage<FormatError>(AllOf(HasSubstr(file), HasSubstr(problem))))
        << problem;
  };
  auto rows = path_rows();
  rows[3].insert(rows[3].begin() + 1, {3, 1.f}); // a self-loop
  refused(rows, "adj_col.bin", "self-loop at row 3, column 3");
  rows = path_rows();
  rows[4].push_back({5, 1.f}); // an edge twice
  refused(rows, "adj_col.bin", "column at row 4, column 5 follows column 5");
  rows = path_rows();
  rows[2][1].second = -1.f; // a negative weight, then one of 1e30
  refused(rows, "adj_val.bin", "edge value -1 at row 2, column 3");
  rows[2][1].second = 1e30f;
  refused(rows, "adj_val.bin", "edge value 1e+30 at row 2, column 3");
}

TEST(DatasetsHostileInputs, AsymmetricNativeAdjacencyIsRefusedInOneProcessAndByTheSumsOfBlocks) {
  const TempDir dir;
  auto rows = path_rows();
  rows[5].clear(); // (4, 5) without (5, 4)
  const std::string native = native_with_rows(dir, rows);
  EXPECT_THAT([&] { load(native); },
              ThrowsMessage<FormatError>(
                  AllOf(HasSubstr("adj_col.bin"), HasSubstr("edge (4, 5) has no mirror (5, 4)"))));
  // Two ranks' blocks: neither sees the asymmetry alone; their sums do.
  const auto summed = [&](const std::string& spec) {
    LoadOptions options;
    std::vector<std::int64_t> total(2, 0);
    for (const RowRange block : {RowRange{0, 3}, RowRange{3, 6}}) {
      const auto sums = symmetry_sums(load_dataset_rows(cpu(), spec, options, block));
      total[0] += sums[0];
      total[1] += sums[1];
    }
    return total;
  };
  EXPECT_THAT([&] { check_symmetry_sums(summed(native), "g"); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("'g'"), HasSubstr("not symmetric"))));
  EXPECT_NO_THROW(check_symmetry_sums(summed(native_with_rows(dir, path_rows())), "g"));
}

TEST(DatasetsHostileInputs, NativeDescriptionCountsMustBeIntegersNotTruncated) {
  const TempDir dir;
  save_native(load("sbm:nodes=60,classes=2,avg-degree=4,features=3", 1), dir.file("g"));
  const std::string path = dir.file("g/dataset.json");
  const std::string text = read_bytes(path);
  for (const auto& [field, value] :
       std::vector<std::pair<std::string, std::string>>{{"num_classes", "7.9"},
                                                        {"num_classes", "2.0"},
                                                        {"num_nodes", "\"60\""},
                                                        {"feature_width", "3.5"},
                                                        {"num_splits", "1e0"}}) {
    nlohmann::json description = nlohmann::json::parse(text);
    description[field] = nlohmann::json::parse(value);
    dir.write("g/dataset.json", description.dump());
    EXPECT_THAT([&] { load(dir.file("g")); },
                ThrowsMessage<FormatError>(AllOf(HasSubstr(path), HasSubstr("'" + field + "'"),
                                                 HasSubstr("not an integer"))))
        << field << " = " << value;
  }
}

// ---- text a spreadsheet or another editor writes
// -------------------------------------------------

/// A MUSAE triple "toy" in `dir` with the given edges and target text.
std::string musae_files(const TempDir& dir, const std::string& edges, const std::string& target) {
  dir.write("toy_target.csv", target);
  dir.write("toy.json", R"({"0": [0], "1": [1], "2": [0], "3": [1]})");
  return "musae:" + dir.write("toy_edges.csv", edges);
}

constexpr const char* kTarget = "id,name,type\n0,a,x\n1,b,y\n2,c,x\n3,d,y\n";

TEST(DatasetsHostileInputs, AByteOrderMarkBeforeTheFirstEdgeDoesNotMakeItAHeader) {
  const TempDir dir;
  const Dataset plain = load(musae_files(dir, "0,1\n1,2\n2,3\n", kTarget));
  const Dataset marked = load(musae_files(dir,
                                          "\xEF\xBB\xBF"
                                          "0,1\n1,2\n2,3\n",
                                          kTarget));
  EXPECT_EQ(plain.adjacency.nnz(), 6);
  EXPECT_EQ(marked.adjacency.nnz(), 6); // was 4: "\xEF\xBB\xBF0,1" taken for a header
  // A header after the mark is still a header; a target file with one reads the same.
  EXPECT_EQ(load(musae_files(dir,
                             "\xEF\xBB\xBF"
                             "id_1,id_2\n0,1\n1,2\n2,3\n",
                             std::string("\xEF\xBB\xBF") + kTarget))
                .adjacency.nnz(),
            6);
}

TEST(DatasetsHostileInputs, AFirstEdgeAfterSpacesIsRefusedNotDroppedAsAHeader) {
  const TempDir dir;
  EXPECT_THAT([&] { load(musae_files(dir, " 0,1\n1,2\n2,3\n", kTarget)); },
              ThrowsMessage<FormatError>(
                  AllOf(HasSubstr("toy_edges.csv:1:"), HasSubstr("expected a node id"))));
}

TEST(DatasetsHostileInputs, QuotedLabelsWithCommasAreWholeLabels) {
  const TempDir dir;
  // Three classes, two of which hold a comma: reading after the last comma merged them into two.
  const Dataset ds =
      load(musae_files(dir, "0,1\n1,2\n2,3\n",
                       "id,name,type\n0,a,\"state, gov\"\n1,b,\"city, gov\"\n2,c,company\n"
                       "3,d,\"state, gov\"\n"));
  EXPECT_EQ(ds.num_classes, 3);
  EXPECT_EQ(ds.labels[0], ds.labels[3]);
  EXPECT_NE(ds.labels[0], ds.labels[1]);
  EXPECT_THAT(
      [&] { load(musae_files(dir, "0,1\n", "id,name,type\n0,a,\"open\n1,b,x\n")); },
      ThrowsMessage<FormatError>(AllOf(HasSubstr("toy_target.csv:2:"), HasSubstr("never closed"))));
}

TEST(DatasetsHostileInputs, ControlCharactersAreEscapedInMessages) {
  const TempDir dir;
  // Old Mac line endings: one line holding carriage returns, which a terminal would obey.
  const std::string path = dir.write("cr.txt", "28 0\r1 2\r");
  try {
    load("snap:" + path);
    ADD_FAILURE() << "expected a refusal";
  } catch (const FormatError& e) {
    const std::string message = e.what();
    EXPECT_THAT(message, HasSubstr("found '0\\r1'"));
    EXPECT_EQ(message.find('\r'), std::string::npos);
  }
  // Characters a terminal shows as nothing: a byte order mark inside a line, a no-break space.
  for (const auto& [text, shown] :
       std::vector<std::pair<std::string, std::string>>{{"1\xEF\xBB\xBF 2\n", "found '1\\ufeff'"},
                                                        {"0\xC2\xA0"
                                                         "1\n",
                                                         "found '0\\u00a01'"}}) {
    const std::string file = dir.write("odd.txt", text);
    EXPECT_THAT([&] { load("snap:" + file); }, ThrowsMessage<FormatError>(HasSubstr(shown)))
        << shown;
  }
}

TEST(DatasetsHostileInputs, MetisWeightsThatAreNotNumbersAndSelfLoopsAreRefused) {
  const TempDir dir;
  const auto refused = [&](const std::string& text, const std::string& line,
                           const std::string& problem) {
    const std::string path = dir.write("g.graph", text);
    EXPECT_THAT(
        [&] { load("metis:" + path); },
        ThrowsMessage<FormatError>(AllOf(HasSubstr("g.graph:" + line + ":"), HasSubstr(problem))))
        << text;
  };
  refused("3 2 010\n5 2\nabc 1 3\n1 2\n", "3", "expected a vertex weight, found 'abc'");
  refused("3 2 010\n5 2\n-4 1 3\n1 2\n", "3", "vertex weight -4 of vertex 2 is negative");
  refused("3 2 001\n2 1\n1 xyz 3 1\n2 1\n", "3", "expected an edge weight, found 'xyz'");
  refused("3 2 001\n2 1\n1 0 3 1\n2 1\n", "3", "edge weight 0 of (2, 1) is not positive");
  refused("2 1\n1\n2\n", "2", "vertex 1 lists itself");
  // The same files with numbers load.
  EXPECT_EQ(
      load("metis:" + dir.write("g.graph", "3 2 011\n5 2 1\n4 1 1 3 2\n1 2 2\n")).adjacency.nnz(),
      4);
}

TEST(DatasetsHostileInputs, NpzMemberWhoseSizeRunsIntoTheNextMemberIsRefused) {
  const TempDir dir;
  std::string bytes = read_bytes(planetoid_npz(dir, {}));
  // The first member's sizes in the central directory, 8 bytes more: its data would take the
  // start of the next member's local header as its last values.
  const auto get32 = [&](std::size_t at) {
    std::uint32_t v = 0;
    for (int b = 3; b >= 0; --b)
      v = (v << 8) | static_cast<unsigned char>(bytes[at + static_cast<std::size_t>(b)]);
    return v;
  };
  const auto put32 = [&](std::size_t at, std::uint32_t v) {
    for (int b = 0; b < 4; ++b)
      bytes[at + static_cast<std::size_t>(b)] = static_cast<char>((v >> (8 * b)) & 0xFF);
  };
  const std::size_t cd = get32(bytes.size() - 22 + 16);
  const std::string original = bytes;
  put32(cd + 20, get32(cd + 20) + 8);
  put32(cd + 24, get32(cd + 24) + 8);
  const std::string path = dir.write("overlap.npz", bytes);

  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(
                  AllOf(HasSubstr("adj_indptr"), HasSubstr("into member 'adj_indices.npy'"))));
  // Only the uncompressed size (what a stored member's reader reads) 8 bytes more: the extent by
  // the compressed size looked fine.
  bytes = original;
  put32(cd + 24, get32(cd + 24) + 8);
  dir.write("overlap.npz", bytes);
  EXPECT_THAT(
      [&] { load("npz:" + path); },
      ThrowsMessage<FormatError>(AllOf(HasSubstr("adj_indptr"), HasSubstr("compressed size"))));
}

TEST(DatasetsHostileInputs, ValuesBeyondFloat32AreNamedAsSuchNotAsInfinite) {
  const TempDir dir;
  // Matrix Market, LINQS: 1e39 and 1e300 are finite numbers Tessera cannot hold.
  const std::string mtx =
      dir.write("v.mtx", "%%MatrixMarket matrix coordinate real symmetric\n3 3 1\n2 1 1e39\n");
  EXPECT_THAT([&] { load("mtx:" + mtx); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("v.mtx:3:"), HasSubstr("'1e39'"),
                                               HasSubstr("beyond float32's range"))));
  dir.write("t.cites", "a b\n");
  const std::string content = dir.write("t.content", "a 1 1e300 x\nb 0 1 y\n");
  EXPECT_THAT([&] { load("linqs:" + content); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("t.content:1:"), HasSubstr("'1e300'"),
                                               HasSubstr("beyond float32's range"))));
  // npz: a float64 feature of 1e300 (was "feature inf at row 0").
  std::vector<double> features(12, 0.5);
  features[5] = 1e300;
  const std::string npz =
      dir.write("f8.npz", npz_bytes({i64("adj_indptr", {0, 1, 3, 5, 7, 9, 10}),
                                     i64("adj_indices", {1, 0, 2, 1, 3, 2, 4, 3, 5, 4}),
                                     {"features", "<f8", "(6, 2)", bytes_of(features)},
                                     i64("labels", {0, 1, 0, 1, 0, 1})}));
  EXPECT_THAT([&] { load("npz:" + npz); },
              ThrowsMessage<FormatError>(AllOf(HasSubstr("'features'"), HasSubstr("1e+300"),
                                               HasSubstr("at index 5"),
                                               HasSubstr("beyond float32's range"))));
}

TEST(DatasetsHostileInputs, NegativeFeatureCountInAttrShapeIsNamed) {
  const TempDir dir;
  const std::string path = dir.write(
      "neg.npz", npz_bytes({i64("adj_indptr", {0, 1, 3, 5, 7, 9, 10}),
                            i64("adj_indices", {1, 0, 2, 1, 3, 2, 4, 3, 5, 4}),
                            i64("attr_indptr", {0, 0, 0, 0, 0, 0, 0}), i64("attr_indices", {}),
                            i64("attr_shape", {6, -5}), i64("labels", {0, 1, 0, 1, 0, 1})}));
  // Was "negative CSR shape [6, -5]", naming neither the file nor the array.
  EXPECT_THAT([&] { load("npz:" + path); },
              ThrowsMessage<FormatError>(
                  AllOf(HasSubstr(path), HasSubstr("'attr_shape'"), HasSubstr("-5 columns"))));
}

TEST(DatasetsHostileInputs, ANamedDatasetFileThatIsAFolderOrADeviceIsNamedAsSuch) {
  const TempDir dir;
  const std::filesystem::path file =
      std::filesystem::path(dir.file("email_eu_core")) / "email-Eu-core.txt.gz";
  std::filesystem::create_directories(file);
  LoadOptions options;
  options.data_dir = dir.file("");
  // Was "not found under data folder" for a file that is there.
  EXPECT_THAT([&] { load_dataset(cpu(), "email-eu-core", options); },
              ThrowsMessage<IoError>(AllOf(HasSubstr(file.string()), HasSubstr("is a folder"))));
  std::filesystem::remove(file);
  std::filesystem::create_symlink("/dev/zero", file);
  EXPECT_THAT(
      [&] { load_dataset(cpu(), "email-eu-core", options); },
      ThrowsMessage<IoError>(AllOf(HasSubstr(file.string()), HasSubstr("a character device"))));
}

TEST(DatasetsHostileInputs, AnNpzOutputIsKnownByItsSuffixInAnyCase) {
  // "G.NPZ" was written as a native folder of that name.
  EXPECT_TRUE(is_npz_path("g.npz"));
  EXPECT_TRUE(is_npz_path("/data/G.NPZ"));
  EXPECT_TRUE(is_npz_path("x.Npz"));
  EXPECT_FALSE(is_npz_path("npz"));
  EXPECT_FALSE(is_npz_path("/data/g.npz/"));
  EXPECT_FALSE(is_npz_path("/data/native"));
}

} // namespace
} // namespace tessera::datasets::tests
