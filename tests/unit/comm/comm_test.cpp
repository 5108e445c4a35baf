// comm on one process: the self communicator is the identity and refuses peers, a plan without
// peers exchanges nothing, and --simulate-link's text is parsed or refused by name.
#include "tessera/comm/communicator.hpp"
#include "tessera/comm/halo_exchange.hpp"
#include "tessera/comm/halo_plan.hpp"
#include "tessera/core/error.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

TEST(SimulatedLink, ParsesBandwidthAndLatency) {
  const comm::LinkModel plain = comm::parse_link_model("10");
  const comm::LinkModel slow = comm::parse_link_model("0.5:25");

  EXPECT_EQ(plain.gigabits_per_second, 10.0);
  EXPECT_EQ(plain.latency_us, 0.0);
  EXPECT_EQ(slow.gigabits_per_second, 0.5);
  EXPECT_EQ(slow.latency_us, 25.0);
  EXPECT_EQ(comm::to_string(slow), "0.5 Gb/s, 25 µs latency");
}

TEST(SimulatedLink, BadTextIsRefusedNamingTheFlagAndTheForm) {
  for (const std::string text : {"", "fast", "10:", "10:x", "0", "-1:5", "10:-5", "10Gb", "inf"}) {
    try {
      comm::parse_link_model(text);
      ADD_FAILURE() << "'" << text << "' was accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_THAT(e.what(), HasSubstr("--simulate-link '" + text + "'"));
      EXPECT_THAT(e.what(), HasSubstr("GBPS[:LATENCY_US]"));
    }
  }
}

TEST(SimulatedLink, OneRankHasNoLinkToSimulate) {
  const auto self = comm::make_self_communicator();

  EXPECT_EQ(comm::simulate_link(self, {10, 5}), self);
  EXPECT_THROW(comm::simulate_link(self, {0, 5}), InvalidArgument);
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

} // namespace
} // namespace tessera
