// The native dataset format: round trips, loading by folder path, and refusals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "tessera/core/error.hpp"
#include "tessera/datasets/dataset.hpp"
#include "test_data.hpp"
#include "unit/datasets/dataset_test_util.hpp"

namespace tessera::datasets::tests {
namespace {

using ::testing::HasSubstr;

TEST(DatasetsNative, GeneratedDenseDatasetRoundTrips) {
  const TempDir dir;
  const Dataset original = load("sbm:nodes=500,classes=4,avg-degree=6,features=9", 3);

  save_native(original, dir.file("sbm"));
  const Dataset back = load("native:" + dir.file("sbm"));

  expect_same_dataset(original, back);
  EXPECT_EQ(back.name, original.name);
}

TEST(DatasetsNative, SparseFeaturesRoundTripAndAFolderPathLoadsDirectly) {
  TESSERA_REQUIRE_DATA("email_eu_core/email-Eu-core.txt.gz");
  const TempDir dir;
  const Dataset original = load("email-eu-core");  // identity one-hot features, sparse

  save_native(original, dir.file("email"));
  const Dataset back = load(dir.file("email"));

  ASSERT_TRUE(back.features.is_sparse());
  expect_same_dataset(original, back);
}

TEST(DatasetsNative, FolderThatCannotBeCreatedIsAnIoErrorNamingIt) {
  const TempDir dir;
  std::ofstream(dir.file("plain")) << "a file, not a folder";
  const Dataset data = load("sbm:nodes=100,classes=2,avg-degree=4,features=3", 1);

  EXPECT_THAT([&] { save_native(data, dir.file("plain") + "/sbm"); },
              ::testing::ThrowsMessage<IoError>(HasSubstr(dir.file("plain") + "/sbm")));
}

TEST(DatasetsNative, CorruptedPayloadIsRefusedNamingTheFile) {
  const TempDir dir;
  save_native(load("sbm:nodes=200,classes=2,features=4", 1), dir.file("g"));
  const std::string path = dir.file("g/adj_col.bin");
  std::string bytes = read_bytes(path);
  bytes[bytes.size() - 1] ^= 0x5A;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;

  try {
    load("native:" + dir.file("g"));
    FAIL() << "expected FormatError";
  } catch (const FormatError& e) {
    EXPECT_THAT(e.what(), HasSubstr("adj_col.bin"));
    EXPECT_THAT(e.what(), HasSubstr("CRC"));
  }
}

TEST(DatasetsNative, FolderWithoutDescriptionIsRefused) {
  const TempDir dir;
  std::filesystem::create_directories(dir.file("empty"));

  EXPECT_THROW(load("native:" + dir.file("empty")), IoError);
}

}  // namespace
}  // namespace tessera::datasets::tests
