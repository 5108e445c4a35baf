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
                        HasSubstr("first: node 1"), HasSubstr("--allow-split-overlap"))));
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

} // namespace
} // namespace tessera::datasets::tests
