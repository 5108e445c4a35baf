// comm on one process: the self communicator is the identity and refuses peers, a plan without
// peers exchanges nothing, --simulate-link's text is parsed or refused by name, and the halo
// precisions encode rows within their error bounds.
#include "tessera/comm/communicator.hpp"
#include "tessera/comm/halo_exchange.hpp"
#include "tessera/comm/halo_plan.hpp"
#include "tessera/comm/layer_exchange.hpp"
#include "tessera/comm/tags.hpp"
#include "tessera/core/error.hpp"

#include <cmath>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <set>

namespace tessera {
namespace {

using ::testing::HasSubstr;

TEST(SelfCommunicator, CollectivesOfOneRankReturnTheirInput) {
  const auto comm = comm::make_self_communicator();
  std::vector<double> values{1.5, -2.0};
  std::vector<std::byte> bytes{std::byte{7}};

  comm->allreduce_sum(std::span<double>(values));
  comm->allreduce_max(std::span<double>(values));
  comm->broadcast(bytes, 0);

  EXPECT_EQ(comm->rank(), 0);
  EXPECT_EQ(comm->size(), 1);
  EXPECT_EQ(values, (std::vector<double>{1.5, -2.0}));
  EXPECT_EQ(bytes, std::vector<std::byte>{std::byte{7}});
  EXPECT_EQ(comm->allgather(3.0), std::vector<double>{3.0});
  EXPECT_EQ(comm->alltoall(std::vector<std::int64_t>{5}), std::vector<std::int64_t>{5});
  EXPECT_EQ(comm->describe(), "one process");
}

TEST(SelfCommunicator, NamingAPeerIsRefused) {
  const auto comm = comm::make_self_communicator();
  const std::vector<std::byte> data(4);

  EXPECT_THAT([&] { comm->send(data, 1, 0); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("no rank 1")));
  EXPECT_THROW(comm->alltoall(std::vector<std::int64_t>{1, 2}), InvalidArgument);
}

TEST(SimulatedLink, OneRankHasNoLinkToSimulate) {
  const auto self = comm::make_self_communicator();

  EXPECT_EQ(comm::simulate_link(self, {10, 5}), self);
  EXPECT_THROW(comm::simulate_link(self, {0, 5}), InvalidArgument);
}

/// Rows of `width` values spanning several magnitudes, signs and exact zeros.
DenseT<float> spread_rows(std::int64_t rows, std::int64_t width) {
  DenseT<float> x = DenseT<float>::zeros(make_cpu_backend(1), rows, width);
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t j = 0; j < width; ++j) {
      const float magnitude = std::ldexp(1.0f, static_cast<int>((i * 7 + j) % 19) - 9);
      x(i, j) = (j % 5 == 4) ? 0.0f : ((i + j) % 2 ? -1.0f : 1.0f) * magnitude * (1.0f + 0.37f * j);
    }
  }
  return x;
}

/// x encoded and decoded with `precision` (rounding field `seed`).
DenseT<float> round_trip(comm::HaloPrecision precision, const DenseT<float>& x,
                         std::uint64_t seed = 1) {
  std::vector<std::byte> code(static_cast<std::size_t>(x.rows()) *
                              comm::encoded_row_bytes(precision, x.cols(), sizeof(float)));
  comm::encode_rows(precision, x.cview(), std::span<std::byte>(code),
                    RngKey::make(seed, RngPurpose::HaloRounding, 0), 0);
  DenseT<float> y = DenseT<float>::zeros(make_cpu_backend(1), x.rows(), x.cols());
  comm::decode_rows(precision, std::span<const std::byte>(code), y.view());
  return y;
}

TEST(HaloPrecision, Bf16KeepsEightBitsOfEveryValueAndFp32IsExact) {
  const DenseT<float> x = spread_rows(40, 33);
  const DenseT<float> exact = round_trip(comm::HaloPrecision::Fp32, x);
  const DenseT<float> half = round_trip(comm::HaloPrecision::Bf16, x);

  for (std::int64_t i = 0; i < x.rows(); ++i) {
    for (std::int64_t j = 0; j < x.cols(); ++j) {
      EXPECT_EQ(exact(i, j), x(i, j));
      EXPECT_LE(std::abs(half(i, j) - x(i, j)), std::ldexp(std::abs(x(i, j)), -8)) << i << "," << j;
    }
  }
  EXPECT_EQ(comm::encoded_row_bytes(comm::HaloPrecision::Bf16, 33, 4), 66u);
  EXPECT_EQ(comm::encoded_row_bytes(comm::HaloPrecision::Fp32, 33, 4), 132u);
}

TEST(HaloPrecision, Int8IsWithinOneStepOfItsRowsScaleUnbiasedAndRepeatable) {
  const DenseT<float> x = spread_rows(64, 40);
  const DenseT<float> y = round_trip(comm::HaloPrecision::Int8, x);

  double error_sum = 0;
  for (std::int64_t i = 0; i < x.rows(); ++i) {
    float largest = 0;
    for (std::int64_t j = 0; j < x.cols(); ++j)
      largest = std::max(largest, std::abs(x(i, j)));
    for (std::int64_t j = 0; j < x.cols(); ++j) {
      EXPECT_LE(std::abs(y(i, j) - x(i, j)), largest / 127.0f * 1.0001f) << i << "," << j;
      if (x(i, j) == 0.0f) {
        EXPECT_EQ(y(i, j), 0.0f);
      }
      error_sum += (y(i, j) - x(i, j)) / (largest / 127.0f);
    }
  }
  // Stochastic rounding is unbiased: the mean error, in steps, is near 0 (2560 draws: its
  // standard deviation is below 0.01).
  EXPECT_LT(std::abs(error_sum / static_cast<double>(x.size())), 0.05);
  const DenseT<float> again = round_trip(comm::HaloPrecision::Int8, x);
  const DenseT<float> other = round_trip(comm::HaloPrecision::Int8, x, 2);
  EXPECT_TRUE(std::equal(y.data(), y.data() + y.size(), again.data()));
  EXPECT_FALSE(std::equal(y.data(), y.data() + y.size(), other.data()));
  EXPECT_EQ(comm::encoded_row_bytes(comm::HaloPrecision::Int8, 40, 4), 44u);
}

TEST(HaloPrecision, NamesAreParsedAndOthersRefused) {
  EXPECT_EQ(comm::parse_halo_precision("bf16"), comm::HaloPrecision::Bf16);
  EXPECT_EQ(comm::parse_halo_precision("int8"), comm::HaloPrecision::Int8);
  EXPECT_EQ(comm::to_string(comm::parse_halo_precision("fp32")), "fp32");
  try {
    comm::parse_halo_precision("fp16");
    FAIL() << "fp16 was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_THAT(e.what(), HasSubstr("halo precision 'fp16': expects fp32, bf16 or int8"));
  }
}

TEST(MessageTags, AreDistinctAndLayersHaveTheirOwnRangeUpToMpisBound) {
  using namespace comm::tags;
  const std::set<int> fixed{kSparseRowCounts, kSparseRows, kLinkProbe,
                            kHaloPlan,        kTiles,      kFeatures};

  const int layers = (kLayersEnd - kLayersBegin) / kChannels;
  std::set<int> layer_tags;
  for (const int l : {0, 1, 2, layers - 1}) {
    for (const Channel c : {Channel::Forward, Channel::Backward, Channel::Evaluation})
      layer_tags.insert(layer(l, c));
  }

  EXPECT_EQ(fixed.size(), 6u);
  EXPECT_LT(*fixed.rbegin(), layer(0));
  EXPECT_EQ(layer_tags.size(), 12u);
  EXPECT_EQ(*layer_tags.begin(), layer(0));
  EXPECT_LE(*layer_tags.rbegin(), 32767);
  EXPECT_THROW(layer(-1), InvalidArgument);
  EXPECT_THROW(layer(layers), InvalidArgument);
}

TEST(ExchangeOptions, OutOfRangeNameTheirSetting) {
  comm::ExchangeOptions smoothing, threshold, age;
  smoothing.smoothing = 1.0;
  threshold.skip_threshold = -0.5;
  age.skip_max_age = 0;

  EXPECT_THAT([&] { smoothing.validate(); }, ::testing::ThrowsMessage<InvalidArgument>(
                                                 HasSubstr("staleness smoothing 1: expects")));
  EXPECT_THAT([&] { threshold.validate(); }, ::testing::ThrowsMessage<InvalidArgument>(
                                                 HasSubstr("halo skip threshold -0.5: expects")));
  EXPECT_THAT([&] { age.validate(); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("halo skip max age 0: expects")));
}

TEST(ExchangeOptions, DescribeSaysTheModeItsSettingsAndThePrecision) {
  comm::ExchangeOptions o;
  EXPECT_EQ(comm::describe(o), "exact, fp32 messages");
  o.mode = comm::HaloMode::Stale;
  o.smoothing = 0.9;
  o.precision = comm::HaloPrecision::Bf16;
  EXPECT_EQ(comm::describe(o), "stale (smoothing 0.9), bf16 messages");
  o.mode = comm::HaloMode::Skip;
  o.skip_threshold = 0.05;
  EXPECT_EQ(comm::describe(o), "skip (τ 0.05, every ≤ 4 epochs), bf16 messages");
}

TEST(HaloPlan, WithoutGhostsOnOneRankHasNoBlocks) {
  const auto comm = comm::make_self_communicator();
  const std::vector<GlobalId> owned{0, 1, 2};

  const comm::HaloPlan plan = comm::HaloPlan::build(*comm, owned, {}, {});

  EXPECT_EQ(plan.n_owned(), 3);
  EXPECT_EQ(plan.n_local(), 3);
  EXPECT_TRUE(plan.send_blocks().empty());
  EXPECT_TRUE(plan.recv_blocks().empty());
}

TEST(HaloPlan, GhostOfARankTheJobDoesNotHaveIsRefused) {
  const auto comm = comm::make_self_communicator();
  const std::vector<GlobalId> owned{0, 1}, ghosts{5};
  const std::vector<std::int32_t> owner{1};

  EXPECT_THAT([&] { comm::HaloPlan::build(*comm, owned, ghosts, owner); },
              ::testing::ThrowsMessage<InvalidArgument>(HasSubstr("ghost 0 has owner 1")));
}

TEST(HaloExchange, WithoutPeersMovesNothingAndLeavesTheRows) {
  const auto comm = comm::make_self_communicator();
  const auto cpu = make_cpu_backend(1);
  const std::vector<GlobalId> owned{0, 1};
  const auto plan =
      std::make_shared<const comm::HaloPlan>(comm::HaloPlan::build(*comm, owned, {}, {}));
  comm::HaloExchange<float> halo(comm, plan, cpu, 1);
  Dense x = Dense::zeros(cpu, 2, 3);
  x(1, 2) = 4.0f;

  halo.gather(x.view());

  EXPECT_EQ(x(1, 2), 4.0f);
  EXPECT_EQ(halo.stats().bytes_sent, 0);
  EXPECT_EQ(halo.stats().bytes_received, 0);
}

// ---- the watchdog of waits on peers (issue 37) -------------------------------------------------

TEST(PeerWatch, LimitIsTenMinutesBeforeTheFirstEpochThenFiftyTimesTheSlowestOrAMinute) {
  comm::PeerWatch watch;

  EXPECT_EQ(watch.limit(), 600.0);
  watch.epoch_ended(0.5);
  EXPECT_EQ(watch.limit(), 60.0);
  watch.epoch_ended(3.0);
  watch.epoch_ended(1.0);
  EXPECT_EQ(watch.limit(), 150.0);
  EXPECT_THAT(watch.describe_limit(), HasSubstr("50 x the slowest epoch, 3 s"));
}

TEST(PeerWatch, FixedLimitWinsAndMustBePositive) {
  comm::PeerWatch watch;
  watch.set_limit(2.5);
  watch.epoch_ended(100.0);

  EXPECT_EQ(watch.limit(), 2.5);
  EXPECT_EQ(watch.describe_limit(), "the peer timeout given");
  EXPECT_THROW(watch.set_limit(0.0), InvalidArgument);
  EXPECT_THROW(watch.set_limit(std::nan("")), InvalidArgument);
  watch.set_limit(std::nullopt);
  EXPECT_EQ(watch.limit(), 5000.0);
}

TEST(PeerWatch, ADuplicateCommunicatorHasAWatchOfItsOwnWithTheFixedLimit) {
  const auto self = comm::make_self_communicator();
  self->peer_watch().set_limit(4.0);
  const std::shared_ptr<comm::Communicator> copy = self->concurrent_duplicate();
  ASSERT_NE(copy, nullptr) << "one process without MPI: nothing is shared between threads";
  EXPECT_NE(&copy->peer_watch(), &self->peer_watch());
  EXPECT_EQ(copy->peer_watch().limit(), 4.0);
  EXPECT_EQ(copy->rank(), 0);
  EXPECT_EQ(copy->size(), 1);
  copy->peer_watch().cancel();
  EXPECT_TRUE(copy->peer_watch().cancelled());
  EXPECT_FALSE(self->peer_watch().cancelled());
  EXPECT_FALSE(comm::mpi_thread_multiple()) << "MPI is not initialized in this test";
}

TEST(PeerWatch, AWaitOfMoreThanTenMedianEpochsIsAStallAndNotBeforeTraining) {
  comm::PeerWatch watch;
  watch.set_step("loading");
  watch.wait_ended(100.0, "the hand-out of tiles"); // loading waits are expected

  for (const double seconds : {0.1, 0.2, 0.1})
    watch.epoch_ended(seconds);
  watch.set_step("epoch 4 (forward)");
  watch.wait_ended(0.9, "a quick wait");
  watch.wait_ended(2.5, "the halo exchange of layer 1 (forward)");

  ASSERT_EQ(watch.stalls().size(), 1u);
  EXPECT_EQ(watch.stalls()[0].step, "epoch 4 (forward)");
  EXPECT_EQ(watch.stalls()[0].what, "the halo exchange of layer 1 (forward)");
  EXPECT_DOUBLE_EQ(watch.stalls()[0].epochs, 25.0);
}

TEST(PeerWatch, TagsAreDescribedForTheWatchdogsMessages) {
  EXPECT_EQ(comm::tags::describe(comm::tags::layer(2, comm::tags::Channel::Backward)),
            "the halo exchange of layer 2 (backward)");
  EXPECT_EQ(comm::tags::describe(comm::tags::kTiles), "the hand-out of tiles");
  EXPECT_EQ(comm::tags::describe(9), "messages of tag 9");
}

} // namespace
} // namespace tessera
