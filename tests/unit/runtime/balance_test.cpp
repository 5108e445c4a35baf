// Speed-aware balancing: the rebalancer's decisions on steady, noisy and badly modelled loads,
// and the speeds measured on a probe.
#include "tessera/runtime/balance.hpp"
#include "tessera/tessera.hpp"

#include <algorithm>
#include <cmath>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <numeric>
#include <random>

namespace tessera::runtime {
namespace {

/// A job of total work 1000 on ranks of `true_speed`: each epoch rank r computes for
/// overhead + work[r] / true_speed[r] (ms), times (1 + noise · a uniform draw in [-1, 1]). A move
/// cuts the work in proportion to the speeds the rebalancer asks for.
struct SimulatedJob {
  std::vector<double> true_speed;
  double overhead = 0.0;
  double noise = 0.0;
  std::vector<double> work;
  std::vector<std::vector<double>> moves; // the speeds of each move
  std::mt19937 rng{5};

  explicit SimulatedJob(std::vector<double> speeds)
      : true_speed(std::move(speeds)), work(true_speed.size(), 1000.0 / true_speed.size()) {}

  void cut(const std::vector<double>& speeds) {
    const double sum = std::accumulate(speeds.begin(), speeds.end(), 0.0);
    for (std::size_t r = 0; r < work.size(); ++r)
      work[r] = 1000.0 * speeds[r] / sum;
  }

  std::vector<double> epoch() {
    std::uniform_real_distribution<double> draw(-1.0, 1.0);
    std::vector<double> ms(work.size());
    for (std::size_t r = 0; r < work.size(); ++r)
      ms[r] = (overhead + work[r] / true_speed[r]) * (1.0 + noise * draw(rng));
    return ms;
  }

  /// `epochs` epochs under `rebalancer`, moving when it says so.
  void run(Rebalancer& rebalancer, int epochs) {
    rebalancer.start(work);
    for (int e = 0; e < epochs; ++e) {
      const std::optional<std::vector<double>> speeds = rebalancer.after_epoch(epoch());
      if (!speeds) continue;
      moves.push_back(*speeds);
      cut(*speeds);
      rebalancer.start(work);
    }
  }

  double imbalance() {
    const std::vector<double> ms = epoch();
    return *std::max_element(ms.begin(), ms.end()) /
           (std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size()));
  }
};

TEST(Rebalancer, ASteadySlowRankIsBalancedInOneMoveAndNeverMovedAgain) {
  SimulatedJob job({1.0, 1.0, 0.5, 0.25});
  Rebalancer rebalancer(1.1, 3);

  job.run(rebalancer, 200);

  ASSERT_EQ(job.moves.size(), 1u);
  EXPECT_NEAR(job.moves[0][3], 0.25, 1e-9);
  EXPECT_NEAR(job.moves[0][2], 0.5, 1e-9);
  EXPECT_TRUE(rebalancer.settled());
  EXPECT_NEAR(job.imbalance(), 1.0, 1e-9);
  ASSERT_EQ(rebalancer.imbalance_after().size(), 1u);
  EXPECT_NEAR(rebalancer.imbalance_after()[0], 1.0, 1e-9);
}

TEST(Rebalancer, AFixedCostPerEpochIsFittedFromTwoTilingsAndBalancedByTheSecondMove) {
  // Every rank spends 40 ms a step on what its share does not change (the optimizer, the loss):
  // the first move, fitted as work / time, falls short; the second fits fixed + per-work time
  // through both tilings, which a linear load satisfies exactly.
  SimulatedJob job({1.0, 0.25});
  job.overhead = 40.0;
  Rebalancer rebalancer(1.01, 3);

  job.run(rebalancer, 200);

  ASSERT_EQ(job.moves.size(), 2u); // imbalance 1.58, then 1.03, then 1
  EXPECT_LT(job.moves[1][1], job.moves[0][1]) << "the second move went back";
  EXPECT_TRUE(rebalancer.settled());
  EXPECT_NEAR(job.imbalance(), 1.0, 1e-9);
}

TEST(Rebalancer, NoiseWithinTheThresholdNeverMoves) {
  SimulatedJob job({1.0, 1.0, 1.0});
  job.noise = 0.04;
  Rebalancer rebalancer(1.1, 3);

  job.run(rebalancer, 300);

  EXPECT_TRUE(job.moves.empty());
  EXPECT_TRUE(rebalancer.settled());
}

TEST(Rebalancer, AMoveThatDoesNotHelpEndsRebalancing) {
  // A load no cut changes: rank 0 takes 300 ms a step and rank 1 100 ms, whatever they hold.
  Rebalancer rebalancer(1.1, 3);
  std::vector<double> work{500.0, 500.0};
  rebalancer.start(work);
  int moves = 0;
  for (int e = 0; e < 100; ++e) {
    if (const auto shares = rebalancer.after_epoch(std::vector<double>{300.0, 100.0})) {
      ++moves;
      work = {1000.0 * (*shares)[0] / ((*shares)[0] + (*shares)[1]),
              1000.0 * (*shares)[1] / ((*shares)[0] + (*shares)[1])};
      rebalancer.start(work);
    }
  }

  EXPECT_EQ(moves, 1);
  EXPECT_TRUE(rebalancer.settled());
  EXPECT_NEAR(rebalancer.imbalance_after().at(0), 1.5, 1e-9);
}

TEST(Rebalancer, ARankWhoseFixedTimeExceedsTheOthersGetsTheLeastShare) {
  // Rank 0 spends 2000 ms a step whatever it holds: balance is out of reach, and the fit gives
  // it the least share there is rather than a negative one.
  SimulatedJob job({1.0, 1.0, 1.0});
  Rebalancer rebalancer(1.1, 3);
  rebalancer.start(job.work);
  std::vector<std::vector<double>> moves;
  for (int e = 0; e < 100; ++e) {
    std::vector<double> ms = job.epoch();
    ms[0] += 2000.0;
    if (const auto shares = rebalancer.after_epoch(ms)) {
      moves.push_back(*shares);
      job.cut(*shares);
      rebalancer.start(job.work);
    }
  }

  ASSERT_GE(moves.size(), 2u);
  for (const std::vector<double>& shares : moves) {
    for (const double share : shares)
      EXPECT_GT(share, 0.0);
  }
  EXPECT_LT(moves.back()[0], 0.05);
  EXPECT_LE(moves.size(), 3u);
}

TEST(Rebalancer, TheFirstEpochOfATilingIsNotMeasured) {
  Rebalancer rebalancer(1.1, 3, 1);
  rebalancer.start({1.0, 1.0});

  EXPECT_FALSE(rebalancer.after_epoch(std::vector<double>{100.0, 1.0})); // allocating
  EXPECT_FALSE(rebalancer.after_epoch(std::vector<double>{1.0, 1.0}));
  EXPECT_TRUE(rebalancer.settled());
}

TEST(Rebalancer, ZeroMovesAllowedNeverMoves) {
  SimulatedJob job({1.0, 0.1});
  Rebalancer rebalancer(1.1, 0);

  job.run(rebalancer, 50);

  EXPECT_TRUE(job.moves.empty());
  EXPECT_GT(rebalancer.last_imbalance(), 1.5);
}

TEST(Rebalancer, BadSettingsAndTimesOfAnotherJobAreRefused) {
  EXPECT_THROW(Rebalancer(1.0, 3), InvalidArgument);
  EXPECT_THROW(Rebalancer(1.1, -1), InvalidArgument);
  EXPECT_THROW(Rebalancer(1.1, 3, 0), InvalidArgument);
  Rebalancer rebalancer(1.1, 3);
  rebalancer.start({1.0, 1.0});
  EXPECT_THROW(rebalancer.after_epoch(std::vector<double>{1.0, 1.0, 1.0}), DimensionMismatch);
}

TEST(BalanceTargets, OneRankMeasuresItsCostPerNonzeroAndPerRow) {
  const auto self = comm::make_self_communicator();
  const std::vector<std::int64_t> sizes{64, 16, 8};

  const BalanceTargets measured =
      measure_balance_targets(*self, make_cpu_backend(1), sizes, GcnOrder::Auto, {}, 1.0);
  const BalanceTargets given =
      measure_balance_targets(*self, make_cpu_backend(1), sizes, GcnOrder::Auto, {4.0}, 1.0);

  EXPECT_EQ(measured.speeds, std::vector<double>{1.0});
  EXPECT_EQ(given.speeds, std::vector<double>{1.0}); // scaled: the fastest is 1
  EXPECT_GT(measured.row_cost, 0.0);
  EXPECT_THROW(
      measure_balance_targets(*self, make_cpu_backend(1), sizes, GcnOrder::Auto, {1.0, 1.0}, 1.0),
      InvalidArgument);
}

TEST(BalanceTargets, SpeedsReadAsAFlagValue) {
  EXPECT_EQ(speeds_text(std::vector<double>{1.0, 0.256, 0.5}), "1.00,0.26,0.50");
  EXPECT_EQ(speeds_text(std::vector<double>{}), "");
}

} // namespace
} // namespace tessera::runtime
