// comm on one process: the self communicator is the identity and refuses peers, and a plan
// without peers exchanges nothing.
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
