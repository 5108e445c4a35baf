// Issue 39: whether a dataset's published recipe row-normalizes its features — known by name for
// the bag-of-words citation sets, recorded by the files Tessera writes, off for everything else.
#include "dataset_test_util.hpp"
#include "npz_bytes.hpp"
#include "tessera/core/error.hpp"
#include "tessera/datasets/row_block.hpp"

#include <filesystem>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <string>

namespace tessera::datasets::tests {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

constexpr const char* kSbm = "sbm:nodes=120,classes=3,avg-degree=4,features=3";

TEST(FeatureRecipe, TheCitationSetsAreKnownByName) {
  for (const char* name : {"cora", "cora-linqs", "cora_planetoid", "CiteSeer", "citeseer", "pubmed",
                           "pubmed-diabetes"}) {
    EXPECT_TRUE(recipe_row_normalizes(name)) << name;
  }
  for (const char* name : {"minesweeper", "roman-empire", "ogbn-arxiv", "sbm", "g", "", "acora"}) {
    EXPECT_FALSE(recipe_row_normalizes(name)) << name;
  }
}

TEST(FeatureRecipe, GeneratedDataHasNone) {
  EXPECT_FALSE(load(kSbm).row_normalize);
  EXPECT_FALSE(load("rmat:scale=6,edge-factor=4,features=3,classes=2").row_normalize);
}

TEST(FeatureRecipe, AnNpzAndANativeFolderKeepWhatTheDatasetSays) {
  const TempDir dir;
  Dataset marked = load(kSbm);
  marked.row_normalize = true;
  save_npz(marked, dir.file("marked.npz"));
  save_native(marked, dir.file("marked"));
  const Dataset plain = load(kSbm);
  save_npz(plain, dir.file("plain.npz"));
  save_native(plain, dir.file("plain"));

  EXPECT_TRUE(load("npz:" + dir.file("marked.npz")).row_normalize);
  EXPECT_TRUE(load(dir.file("marked")).row_normalize);
  EXPECT_TRUE(load_dataset_rows(cpu(), dir.file("marked"), {}, {0, 10}).row_normalize);
  EXPECT_FALSE(load("npz:" + dir.file("plain.npz")).row_normalize);
  EXPECT_FALSE(load(dir.file("plain")).row_normalize);
  EXPECT_FALSE(load_dataset_rows(cpu(), dir.file("plain"), {}, {0, 10}).row_normalize);
}

TEST(FeatureRecipe, AFileNamedForACitationSetFollowsItsRecipe) {
  const TempDir dir;
  save_npz(load(kSbm), dir.file("citeseer.npz"));

  EXPECT_TRUE(load("npz:" + dir.file("citeseer.npz")).row_normalize);
}

TEST(FeatureRecipe, AnNpzKeyThatIsNoFlagIsRefusedNamingIt) {
  const TempDir dir;
  const auto i64 = [](const std::string& key, const std::string& shape,
                      const std::vector<std::int64_t>& values) {
    return Member{key, "<i8", shape, bytes_of(values)};
  };
  const std::string path =
      dir.write("bad.npz",
                npz_bytes({i64("adj_indptr", "(3,)", {0, 1, 2}), i64("adj_indices", "(2,)", {1, 0}),
                           i64("row_normalize_features", "()", {2})}));

  EXPECT_THAT(
      [&] { load("npz:" + path); },
      ThrowsMessage<FormatError>(AllOf(HasSubstr("bad.npz"), HasSubstr("row_normalize_features"),
                                       HasSubstr("expected 0 or 1"))));
}

} // namespace
} // namespace tessera::datasets::tests
