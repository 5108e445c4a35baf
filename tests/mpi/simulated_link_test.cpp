// The simulated link over real ranks, on a clock the test controls: an exchange completes when a
// link of the given speed would have carried it (messages to one peer queue, messages to
// different peers travel side by side), an allreduce when a ring would, and the bytes arrive
// intact; measure_links finds the link's speed and latency.
#include "mpi/mpi_test_main.hpp"

#include <algorithm>
#include <gtest/gtest.h>
#include <map>
#include <tessera/tessera.hpp>
#include <vector>

namespace tessera {
namespace {

using testing::world;

/// Time that passes only when someone sleeps.
class FakeClock final : public comm::LinkClock {
public:
  double now() override { return t; }
  void sleep_until(double seconds) override { t = std::max(t, seconds); }
  double t = 100.0;
};

constexpr double kGbps = 8.0;           // 1 GB/s: a byte per nanosecond
constexpr double kLatency = 1e-5;       // 10 µs
constexpr std::size_t kBytes = 1000000; // 1 ms on the link

/// A simulated link on a fake clock.
struct Link {
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  std::shared_ptr<comm::Communicator> comm =
      comm::simulate_link(world(), {kGbps, kLatency * 1e6}, clock);
};

/// One exchange's buffers: this rank sends kBytes to each ring neighbour and receives kBytes
/// from each (at 2 ranks the two neighbours are one peer).
struct RingMessages {
  int next = (world()->rank() + 1) % world()->size();
  int prev = (world()->rank() + world()->size() - 1) % world()->size();
  std::vector<std::byte> to_next = std::vector<std::byte>(kBytes, std::byte(world()->rank()));
  std::vector<std::byte> to_prev = std::vector<std::byte>(kBytes, std::byte(world()->rank() + 64));
  std::vector<std::byte> from_prev = std::vector<std::byte>(kBytes);
  std::vector<std::byte> from_next = std::vector<std::byte>(kBytes);

  std::unique_ptr<comm::Pending> start(comm::Communicator& link, int tag) {
    const std::vector<comm::SendMessage> sends{{next, to_next}, {prev, to_prev}};
    const std::vector<comm::RecvMessage> recvs{{prev, from_prev}, {next, from_next}};
    return link.start_exchange(sends, recvs, tag);
  }
  /// Messages to the busiest peer: they queue on its link.
  int per_peer() const { return next == prev ? 2 : 1; }
};

TEST(SimulatedLink, AnExchangeTakesWhatTheLinkWouldAndDeliversTheBytes) {
  if (world()->size() < 2) GTEST_SKIP() << "needs a peer";
  Link link;
  RingMessages m;
  const double start = link.clock->t;

  m.start(*link.comm, 31)->wait();

  // Two messages to one peer go one after the other; to two peers, side by side.
  EXPECT_NEAR(link.clock->t - start, m.per_peer() * 1e-3 + kLatency, 1e-12);
  EXPECT_EQ(m.from_prev.front(), std::byte(m.prev));
  EXPECT_EQ(m.from_prev.back(), std::byte(m.prev));
  EXPECT_EQ(m.from_next.back(), std::byte(m.next + 64));
}

TEST(SimulatedLink, ExchangesInFlightQueueOnTheLinkAndTestSaysWhenTheyAreDone) {
  if (world()->size() < 2) GTEST_SKIP() << "needs a peer";
  Link link;
  RingMessages first, second;
  const double start = link.clock->t;
  const double one = first.per_peer() * 1e-3; // one exchange's bytes on the busiest link

  auto a = first.start(*link.comm, 32);
  auto b = second.start(*link.comm, 33); // behind a's messages on every link
  EXPECT_FALSE(a->test());               // no simulated time has passed
  a->wait();
  EXPECT_NEAR(link.clock->t, start + one + kLatency, 1e-12);
  EXPECT_FALSE(b->test());
  b->wait();

  EXPECT_NEAR(link.clock->t, start + 2 * one + kLatency, 1e-12);
  EXPECT_TRUE(b->test());
}

TEST(SimulatedLink, AnAllreduceTakesWhatARingWouldAndSums) {
  Link link;
  std::vector<float> values(kBytes / sizeof(float), 1.0f);
  const double start = link.clock->t;

  link.comm->allreduce_sum(std::span<float>(values));

  const double p = world()->size();
  EXPECT_NEAR(link.clock->t - start, 2 * (p - 1) * kLatency + 2 * (p - 1) / p * 1e-3, 1e-12);
  EXPECT_EQ(values.front(), static_cast<float>(p));
  EXPECT_EQ(values.back(), static_cast<float>(p));
}

TEST(MeasureLinks, FindsTheSimulatedLinksSpeedAndLatencyToEachNeighbour) {
  if (world()->size() < 2) GTEST_SKIP() << "needs a peer";
  Link link;
  const RingMessages ring; // its neighbours
  std::vector<int> peers{ring.next, ring.prev};
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());

  const std::vector<comm::LinkEstimate> links = comm::measure_links(*link.comm, peers, *link.clock);

  ASSERT_EQ(links.size(), peers.size());
  for (std::size_t i = 0; i < links.size(); ++i) {
    EXPECT_EQ(links[i].peer, peers[i]);
    EXPECT_NEAR(links[i].gigabits_per_second, kGbps, 1e-6 * kGbps);
    EXPECT_NEAR(links[i].latency_us, kLatency * 1e6 + 8e-3, 1e-6); // 8 bytes take 8 ns
  }
}

TEST(MeasureLinks, ThisRankAmongItsPeersIsRefused) {
  const int self = world()->rank();
  auto clock = comm::steady_link_clock();
  EXPECT_THROW(comm::measure_links(*world(), std::span<const int>(&self, 1), *clock),
               InvalidArgument);
}

} // namespace
} // namespace tessera
