// write_npy and write_npz (predictions, embeddings, exported weights): numpy's layout, the
// arrays read back by name, the refusals, and a planted link left alone.
#include "dataset_test_util.hpp"
#include "npz.hpp"
#include "tessera/core/error.hpp"
#include "tessera/datasets/numpy_files.hpp"

#include <cstring>
#include <filesystem>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <vector>

namespace tessera::datasets::tests {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

TEST(NumpyFiles, NpyHoldsNumpysHeaderThenTheValuesInCOrder) {
  const TempDir dir;
  const std::vector<float> values = {1.0f, -2.5f, 3.0f, 0.25f, 5.0f, 6.0f};
  write_npy(dir.file("a.npy"), {"a", {2, 3}, std::span<const float>(values)});

  const std::string bytes = read_bytes(dir.file("a.npy"));
  ASSERT_GT(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const std::size_t header =
      10 + static_cast<unsigned char>(bytes[8]) + 256 * static_cast<unsigned char>(bytes[9]);
  EXPECT_EQ(header % 64, 0u) << "the data starts at a multiple of 64, as numpy aligns it";
  const std::string dict = bytes.substr(10, header - 10);
  EXPECT_THAT(dict, HasSubstr("'descr': '<f4'"));
  EXPECT_THAT(dict, HasSubstr("'fortran_order': False"));
  EXPECT_THAT(dict, HasSubstr("'shape': (2, 3)"));
  EXPECT_EQ(dict.back(), '\n');
  ASSERT_EQ(bytes.size(), header + values.size() * sizeof(float));
  std::vector<float> read(values.size());
  std::memcpy(read.data(), bytes.data() + header, bytes.size() - header);
  EXPECT_EQ(read, values);
}

TEST(NumpyFiles, NpzArraysReadBackByNameWithTheirTypesAndShapes) {
  const TempDir dir;
  const std::vector<std::int64_t> ids = {4, 7, 9};
  const std::vector<float> rows = {0.1f, 0.9f, 0.5f, 0.5f, 1.0f, 0.0f};
  const std::vector<std::int32_t> small = {-1, 2};
  const NumpyArray arrays[] = {{"node_id", {3}, std::span<const std::int64_t>(ids)},
                               {"probabilities", {3, 2}, std::span<const float>(rows)},
                               {"small", {2}, std::span<const std::int32_t>(small)}};
  write_npz(dir.file("p.npz"), arrays);

  const detail::NpzReader reader(dir.file("p.npz"));
  EXPECT_THAT(reader.keys(), ::testing::ElementsAre("node_id", "probabilities", "small"));
  EXPECT_EQ(reader.info("node_id").descr, "<i8");
  EXPECT_EQ(reader.info("small").descr, "<i4");
  const auto id_array = reader.read<std::int64_t>("node_id");
  EXPECT_EQ(id_array.data, ids);
  const auto row_array = reader.read<float>("probabilities");
  EXPECT_EQ(row_array.shape, (std::vector<std::int64_t>{3, 2}));
  EXPECT_EQ(row_array.data, rows);
  EXPECT_EQ(reader.read<std::int32_t>("small").data, small);
}

TEST(NumpyFiles, AShapeThatDoesNotHoldTheValuesOrARepeatedNameIsRefusedBeforeWriting) {
  const TempDir dir;
  const std::vector<float> values(5, 1.0f);
  EXPECT_THAT(
      [&] {
        write_npy(dir.file("a.npy"), {"a", {2, 3}, std::span<const float>(values)});
      },
      ThrowsMessage<InvalidArgument>(HasSubstr("holds 6 elements, got 5")));
  const NumpyArray twice[] = {{"x", {5}, std::span<const float>(values)},
                              {"x", {5}, std::span<const float>(values)}};
  EXPECT_THAT([&] { write_npz(dir.file("b.npz"), twice); },
              ThrowsMessage<InvalidArgument>(HasSubstr("names array 'x' twice")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("a.npy")));
  EXPECT_FALSE(std::filesystem::exists(dir.file("b.npz")));
}

TEST(NumpyFiles, APlantedLinkIsRefusedNotFollowed) {
  const TempDir dir;
  const std::string victim = dir.write("victim.txt", "keep me");
  std::filesystem::create_symlink(victim, dir.file("out.npy"));
  std::filesystem::create_symlink(victim, dir.file("out.npz"));
  const std::vector<float> values = {1.0f};
  const NumpyArray array{"a", {1}, std::span<const float>(values)};

  EXPECT_THAT([&] { write_npy(dir.file("out.npy"), array); },
              ThrowsMessage<IoError>(HasSubstr("symbolic link")));
  EXPECT_THAT([&] { write_npz(dir.file("out.npz"), std::span<const NumpyArray>(&array, 1)); },
              ThrowsMessage<IoError>(HasSubstr("symbolic link")));
  EXPECT_EQ(read_bytes(victim), "keep me");
}

TEST(NumpyFiles, NpyPathsAreKnownByTheirSuffixInAnyCase) {
  EXPECT_TRUE(is_npy_path("out/p.npy"));
  EXPECT_TRUE(is_npy_path("P.NPY"));
  EXPECT_FALSE(is_npy_path("p.npz"));
  EXPECT_FALSE(is_npy_path("npy"));
}

} // namespace
} // namespace tessera::datasets::tests
