// Where native datasets may be written (io::OutputFolder), their JSON with non-UTF-8 names, and
// the bound on text lines that keeps an endless stream from being read into memory.
#include "dataset_test_util.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/text_input.hpp"

#include <filesystem>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <string>

namespace tessera::datasets::tests {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

Dataset small_sbm() {
  return load("sbm:nodes=120,classes=3,avg-degree=4,features=3", 5);
}

TEST(DatasetsNativeOutput, ExistingNativeDatasetIsReplacedOnlyWithReplace) {
  const TempDir dir;
  const std::string out = dir.file("g");
  save_native(small_sbm(), out);
  const Dataset other = load("sbm:nodes=80,classes=2,avg-degree=4,features=3", 9);

  EXPECT_THAT([&] { save_native(other, out); },
              ThrowsMessage<OutputExists>(
                  AllOf(HasSubstr(out), HasSubstr("replacing it was not asked for"))));
  EXPECT_EQ(load(out).num_nodes, 120);

  save_native(other, out, true);

  EXPECT_EQ(load(out).num_nodes, 80);
}

TEST(DatasetsNativeOutput, NonEmptyFolderThatIsNoNativeDatasetIsRefused) {
  const TempDir dir;
  dir.write("notes.txt", "mine");

  EXPECT_THAT([&] { save_native(small_sbm(), dir.file(""), true); },
              ThrowsMessage<IoError>(HasSubstr(dir.file(""))));
  EXPECT_FALSE(std::filesystem::exists(dir.file("dataset.json")));
}

TEST(DatasetsNativeOutput, RootFolderIsRefused) {
  EXPECT_THROW(save_native(small_sbm(), "/"), IoError);
}

TEST(DatasetsNativeOutput, NameThatIsNotUtf8IsWrittenAndReadBack) {
  const TempDir dir;
  Dataset ds = small_sbm();
  ds.name = "bad\xff\xfename";

  save_native(ds, dir.file("g"));
  const Dataset back = load(dir.file("g"));

  EXPECT_EQ(back.num_nodes, ds.num_nodes);
  EXPECT_THAT(back.name, HasSubstr("bad"));
}

TEST(DatasetsNativeOutput, LineLongerThanTheBoundIsRefusedNamingTheLine) {
  const TempDir dir;
  const std::string path = dir.write("long.txt", "0 1\n" + std::string(100, '7') + "\n");
  io::LineReader in(path, 16);
  std::string_view line;

  ASSERT_TRUE(in.next(line));

  EXPECT_THAT([&] { in.next(line); },
              ThrowsMessage<FormatError>(
                  AllOf(HasSubstr("long.txt:2:"), HasSubstr("longer than 16 bytes"))));
}

} // namespace
} // namespace tessera::datasets::tests
