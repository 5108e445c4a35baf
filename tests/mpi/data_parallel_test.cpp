// DataParallel across real ranks: gradients marked ready in reverse order, in buckets holding
// different numbers of parameters (padding included), end as the sum over ranks, step after step.
#include "mpi/mpi_test_main.hpp"
#include "unit/engine/arena_backend.hpp"

#include <algorithm>
#include <gtest/gtest.h>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <tessera/tessera.hpp>
#include <vector>

namespace tessera {
namespace {

using testing::world;

/// Rank `rank`'s gradient of parameter `index` at `step`: random integers (exact float sums).
std::vector<float> gradient_of(int rank, int step, std::size_t index, std::int64_t size) {
  std::mt19937 engine(static_cast<std::uint32_t>(1000 * rank + 100 * step + index));
  std::uniform_int_distribution<int> value(-1000, 1000);
  std::vector<float> g(static_cast<std::size_t>(size));
  for (float& x : g)
    x = static_cast<float>(value(engine));
  return g;
}

/// Sizes in floats of gradients laid back to back (each start aligned to 64 bytes, so the
/// 5-float one leaves zero padding): with 256-byte buckets they form buckets of 3, 1 and 2
/// parameters (the 100-float one alone, larger than a bucket).
constexpr std::int64_t kSizes[] = {16, 5, 16, 100, 8, 8};

/// Marks every gradient ready last to first for `steps` steps of random data, and checks that
/// each gradient then holds the sum over ranks and the padding between them stays zero.
void check_sums(std::size_t bucket_bytes, std::size_t expected_buckets) {
  const int rank = world()->rank(), size = world()->size();
  const auto arena = std::make_shared<testing::ArenaBackend>(4096);
  const BackendPtr cpu = make_cpu_backend(1);
  std::vector<Parameter<float>> parameters;
  parameters.reserve(std::size(kSizes));
  for (std::size_t i = 0; i < std::size(kSizes); ++i) {
    std::string name = "p"; // (+ on a literal trips GCC 12's -Wrestrict false positive)
    name += std::to_string(i);
    parameters.push_back(
        {name, DenseT<float>::zeros(cpu, 1, kSizes[i]), DenseT<float>::zeros(arena, 1, kSizes[i])});
  }
  std::vector<Parameter<float>*> registered;
  for (Parameter<float>& p : parameters)
    registered.push_back(&p);
  DataParallel data_parallel(*world(), arena, registered, bucket_bytes);
  ASSERT_EQ(data_parallel.buckets(), expected_buckets);
  const float* padding = parameters[1].grad.data() + kSizes[1]; // 11 floats before p2

  for (int step = 0; step < 2; ++step) {
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      const std::vector<float> mine = gradient_of(rank, step, i, kSizes[i]);
      std::copy(mine.begin(), mine.end(), parameters[i].grad.data());
    }

    for (std::size_t i = parameters.size(); i-- > 0;)
      data_parallel.gradient_ready(parameters[i]);
    data_parallel.finish();

    for (std::size_t i = 0; i < parameters.size(); ++i) {
      std::vector<float> sum(static_cast<std::size_t>(kSizes[i]), 0.0f);
      for (int r = 0; r < size; ++r) {
        const std::vector<float> theirs = gradient_of(r, step, i, kSizes[i]);
        for (std::size_t k = 0; k < sum.size(); ++k)
          sum[k] += theirs[k];
      }
      for (std::size_t k = 0; k < sum.size(); ++k)
        ASSERT_EQ(parameters[i].grad.data()[k], sum[k]) << "step " << step << " p" << i << " " << k;
    }
    for (int k = 0; k < 11; ++k)
      ASSERT_EQ(padding[k], 0.0f) << "padding float " << k;
  }
}

TEST(DataParallel, GradientsMarkedInReverseHoldTheSumOverRanksInBucketsOfUnequalCounts) {
  check_sums(256, 3);
}

TEST(DataParallel, GradientsMarkedInReverseHoldTheSumOverRanksInOneBucket) {
  check_sums(std::size_t{25} << 20, 1);
}

TEST(DataParallel, SeparatelyAllocatedGradientsAreSummedOneBucketEach) {
  const int rank = world()->rank(), size = world()->size();
  const BackendPtr cpu = make_cpu_backend(1);
  Parameter<float> a{"a", DenseT<float>::zeros(cpu, 3, 3), DenseT<float>::zeros(cpu, 3, 3)};
  Parameter<float> b{"b", DenseT<float>::zeros(cpu, 1, 4), DenseT<float>::zeros(cpu, 1, 4)};
  a.grad.fill(static_cast<float>(rank + 1));
  b.grad.fill(-static_cast<float>(rank));
  DataParallel data_parallel(*world(), cpu, {&a, &b});

  data_parallel.gradient_ready(b);
  data_parallel.finish(); // a was never marked: finish starts its bucket too

  EXPECT_EQ(data_parallel.buckets(), 2u);
  EXPECT_EQ(a.grad(2, 2), static_cast<float>(size * (size + 1) / 2));
  EXPECT_EQ(b.grad(0, 3), -static_cast<float>(size * (size - 1) / 2));
}

TEST(DataParallel, GradientsLaidOutOtherwiseOnSomeRanksAreSummedOneBucketEach) {
  // Rank 0's gradients lie back to back (one bucket); the others' have a gap between the first
  // two (two buckets): the plans differ, so every gradient goes alone, the same on every rank.
  const int rank = world()->rank(), size = world()->size();
  const auto arena = std::make_shared<testing::ArenaBackend>(4096);
  const BackendPtr cpu = make_cpu_backend(1);
  Parameter<float> a{"a", DenseT<float>::zeros(cpu, 1, 16), DenseT<float>::zeros(arena, 1, 16)};
  if (rank != 0) arena->skip(256);
  Parameter<float> b{"b", DenseT<float>::zeros(cpu, 1, 16), DenseT<float>::zeros(arena, 1, 16)};
  Parameter<float> c{"c", DenseT<float>::zeros(cpu, 1, 16), DenseT<float>::zeros(arena, 1, 16)};
  a.grad.fill(static_cast<float>(rank + 1));
  b.grad.fill(2.0f);
  c.grad.fill(-static_cast<float>(rank));
  DataParallel data_parallel(*world(), arena, {&a, &b, &c});
  if (size > 1) {
    EXPECT_EQ(data_parallel.buckets(), 3u);
  }

  data_parallel.gradient_ready(c); // in the order backward marks them
  data_parallel.gradient_ready(b);
  data_parallel.gradient_ready(a);
  data_parallel.finish();

  for (int k = 0; k < 16; ++k) {
    ASSERT_EQ(a.grad.data()[k], static_cast<float>(size * (size + 1) / 2)) << k;
    ASSERT_EQ(b.grad.data()[k], 2.0f * static_cast<float>(size)) << k;
    ASSERT_EQ(c.grad.data()[k], -static_cast<float>(size * (size - 1) / 2)) << k;
  }
}

} // namespace
} // namespace tessera
