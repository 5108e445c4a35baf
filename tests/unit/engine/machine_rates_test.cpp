// Machine rates measured the STREAM way: the best, median and worst of the timed runs, arrays
// sized past the last-level cache.
#include "tessera/engine/machine_rates.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera {
namespace {

TEST(MachineRates, TriadReportsBestMedianAndWorstOfItsRuns) {
  const MeasuredRate rate = stream_triad(std::int64_t{1} << 20, 4);

  EXPECT_EQ(rate.runs, 4);
  EXPECT_GT(rate.worst, 0.0);
  EXPECT_LE(rate.worst, rate.median);
  EXPECT_LE(rate.median, rate.best);
}

TEST(MachineRates, ReadOnlyBandwidthReportsBestMedianAndWorstOfItsRuns) {
  const MeasuredRate rate = stream_read(std::int64_t{1} << 20, 3);

  EXPECT_EQ(rate.runs, 3);
  EXPECT_GT(rate.worst, 0.0);
  EXPECT_LE(rate.worst, rate.median);
  EXPECT_LE(rate.median, rate.best);
}

TEST(MachineRates, SgemmReportsBestMedianAndWorstOfItsRuns) {
  const MeasuredRate rate = sgemm_rate(64, 32, 16, 3);

  EXPECT_EQ(rate.runs, 3);
  EXPECT_GT(rate.worst, 0.0);
  EXPECT_LE(rate.worst, rate.median);
  EXPECT_LE(rate.median, rate.best);
}

TEST(MachineRates, DefaultTriadArraysAreAtLeastFourTimesTheLastLevelCache) {
  const std::int64_t elements = default_triad_elements();

  EXPECT_GE(elements, std::int64_t{64} << 20);
  EXPECT_GE(elements * static_cast<std::int64_t>(sizeof(float)), 4 * last_level_cache_bytes());
  EXPECT_GE(last_level_cache_bytes(), 0);
}

TEST(MachineRates, DescribeGivesTheBestFirstThenTheSpread) {
  const MeasuredRate rate{28.14, 27.5, 25.0, 10};

  EXPECT_EQ(rate.describe("GB/s"), "28.1 GB/s (median 27.5, worst 25.0, 10 runs)");
}

} // namespace
} // namespace tessera
