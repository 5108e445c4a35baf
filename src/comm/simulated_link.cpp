// A communicator decorator that holds messages back as a network link of a given bandwidth and
// latency would: how the communication modes are measured on machines whose ranks share memory.
#include "tessera/comm/communicator.hpp"
#include "tessera/comm/tags.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/timer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fmt/core.h>
#include <limits>
#include <thread>

namespace tessera::comm {

std::string to_string(const LinkModel& link) {
  return fmt::format("{:g} Gb/s, {:g} µs latency", link.gigabits_per_second, link.latency_us);
}

namespace {

class SteadyClock final : public LinkClock {
public:
  double now() override {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void sleep_until(double seconds) override {
    // A sleep overshoots by tens of µs (a link's latency): sleep short of the deadline, then
    // yield until it.
    constexpr double kSlack = 200e-6;
    const double wait = seconds - now();
    if (wait > kSlack) std::this_thread::sleep_for(std::chrono::duration<double>(wait - kSlack));
    while (now() < seconds)
      std::this_thread::yield();
  }
};

/// Inner transfers in flight, complete no sooner than `ready` on `clock`.
class HeldBack final : public Pending {
public:
  HeldBack(std::unique_ptr<Pending> inner, double ready, std::shared_ptr<LinkClock> clock)
      : inner_(std::move(inner)), ready_(ready), clock_(std::move(clock)) {}
  ~HeldBack() override = default; // the inner Pending waits for its own transfers

  void wait() override {
    if (inner_) inner_->wait();
    clock_->sleep_until(ready_);
  }
  bool test() override {
    const bool moved = !inner_ || inner_->test();
    return moved && clock_->now() >= ready_;
  }

private:
  std::unique_ptr<Pending> inner_;
  double ready_;
  std::shared_ptr<LinkClock> clock_;
};

class SimulatedLink final : public Communicator {
public:
  SimulatedLink(std::shared_ptr<Communicator> inner, LinkModel link,
                std::shared_ptr<LinkClock> clock)
      : inner_(std::move(inner)), link_(link), clock_(std::move(clock)),
        out_free_(static_cast<std::size_t>(inner_->size()), 0.0),
        in_free_(static_cast<std::size_t>(inner_->size()), 0.0) {}

  PeerWatch& peer_watch() override { return inner_->peer_watch(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  int local_rank() const override { return inner_->local_rank(); }
  int local_size() const override { return inner_->local_size(); }
  bool accepts_device_memory() const override { return inner_->accepts_device_memory(); }

  void allreduce_sum(std::span<float> values) override {
    held(reduction(values.size_bytes()), [&] { inner_->allreduce_sum(values); });
  }
  void allreduce_sum(std::span<double> values) override {
    held(reduction(values.size_bytes()), [&] { inner_->allreduce_sum(values); });
  }
  void allreduce_sum(std::span<std::int64_t> values) override {
    held(reduction(values.size_bytes()), [&] { inner_->allreduce_sum(values); });
  }
  void allreduce_max(std::span<double> values) override {
    held(reduction(values.size_bytes()), [&] { inner_->allreduce_max(values); });
  }
  std::unique_ptr<Pending> start_allreduce_sum(std::span<float> values) override {
    const double ready = clock_->now() + reduction(values.size_bytes());
    return std::make_unique<HeldBack>(inner_->start_allreduce_sum(values), ready, clock_);
  }
  std::vector<std::int64_t> alltoall(std::span<const std::int64_t> send) override {
    std::vector<std::int64_t> result;
    held(small_collective(), [&] { result = inner_->alltoall(send); });
    return result;
  }
  void broadcast(std::vector<std::byte>& values, int root) override {
    const double start = clock_->now();
    inner_->broadcast(values, root); // every rank knows the size only now
    clock_->sleep_until(start + std::ceil(std::log2(size())) * latency() +
                        seconds_for(values.size()));
  }
  std::vector<double> allgather(double value) override {
    std::vector<double> result;
    held(small_collective(), [&] { result = inner_->allgather(value); });
    return result;
  }

  std::unique_ptr<Pending> start_exchange(std::span<const SendMessage> sends,
                                          std::span<const RecvMessage> recvs, int tag) override {
    const double start = clock_->now();
    double ready = start;
    for (const SendMessage& m : sends)
      ready = std::max(ready, carry(out_free_, m.peer, m.data.size(), start));
    for (const RecvMessage& m : recvs)
      ready = std::max(ready, carry(in_free_, m.peer, m.data.size(), start));
    return std::make_unique<HeldBack>(inner_->start_exchange(sends, recvs, tag), ready, clock_);
  }
  void send(std::span<const std::byte> data, int peer, int tag) override {
    const double ready = carry(out_free_, peer, data.size(), clock_->now());
    inner_->send(data, peer, tag);
    clock_->sleep_until(ready);
  }
  std::vector<std::byte> receive(int peer, int tag) override {
    std::vector<std::byte> data = inner_->receive(peer, tag);
    // The size is known only once it came: its transfer starts counting now.
    clock_->sleep_until(carry(in_free_, peer, data.size(), clock_->now()));
    return data;
  }
  void barrier() override {
    held(small_collective(), [&] { inner_->barrier(); });
  }
  [[noreturn]] void abort(int code) noexcept override {
    inner_->abort(code);
    std::abort(); // not reached: the inner communicator ends the job
  }
  std::string describe() const override {
    return inner_->describe() + " over a simulated link of " + to_string(link_);
  }

  /// The inner communicator's duplicate over a link of its own (its messages do not queue
  /// behind this one's).
  std::shared_ptr<Communicator> concurrent_duplicate() override {
    std::shared_ptr<Communicator> inner = inner_->concurrent_duplicate();
    if (!inner) return nullptr;
    return std::make_shared<SimulatedLink>(std::move(inner), link_, clock_);
  }

private:
  double latency() const { return link_.latency_us * 1e-6; }
  double seconds_for(std::size_t bytes) const {
    return static_cast<double>(bytes) * 8.0 / (link_.gigabits_per_second * 1e9);
  }
  /// When a message of `bytes` on the link to or from `peer` (free at links[peer]) posted at
  /// `start` arrives; the link is busy while its bytes go out.
  double carry(std::vector<double>& links, int peer, std::size_t bytes, double start) {
    if (peer < 0 || peer >= size()) return start; // the inner communicator names the bad peer
    double& free = links[static_cast<std::size_t>(peer)];
    const double begin = std::max(free, start);
    free = begin + seconds_for(bytes);
    return free + latency();
  }
  /// A ring allreduce of `bytes`: 2(P-1) steps, each a latency and 1/P of the bytes.
  double reduction(std::size_t bytes) const {
    const double p = size();
    return 2 * (p - 1) * latency() + 2 * (p - 1) / p * seconds_for(bytes);
  }
  double small_collective() const { return 2.0 * (size() - 1) * latency(); }
  /// Runs a blocking collective and holds it back to `seconds` after it started.
  template <typename F> void held(double seconds, F call) {
    const double ready = clock_->now() + seconds;
    call();
    clock_->sleep_until(ready);
  }

  std::shared_ptr<Communicator> inner_;
  LinkModel link_;
  std::shared_ptr<LinkClock> clock_;
  std::vector<double> out_free_, in_free_; // per peer: when the link is free
};

} // namespace

std::vector<LinkEstimate> measure_links(Communicator& comm, std::span<const int> peers,
                                        LinkClock& clock, std::size_t large_bytes, int rounds) {
  constexpr std::size_t kSmall = 8;
  large_bytes = std::max(large_bytes, 2 * kSmall);
  rounds = std::max(rounds, 1);
  for (std::size_t i = 0; i < peers.size(); ++i) {
    if (peers[i] < 0 || peers[i] >= comm.size() || peers[i] == comm.rank() ||
        (i > 0 && peers[i] <= peers[i - 1])) {
      throw InvalidArgument(fmt::format("measure_links on rank {}: peer {} (of {} ranks) is this "
                                        "rank, no rank, or out of ascending order",
                                        comm.rank(), peers[i], comm.size()));
    }
  }
  std::vector<std::byte> out(large_bytes), in(large_bytes);
  const auto fastest_exchange = [&](int peer, std::size_t bytes) {
    const std::vector<SendMessage> sends{{peer, std::span<const std::byte>(out).first(bytes)}};
    const std::vector<RecvMessage> recvs{{peer, std::span<std::byte>(in).first(bytes)}};
    double fastest = std::numeric_limits<double>::infinity();
    for (int r = 0; r < rounds; ++r) {
      const double start = clock.now();
      comm.start_exchange(sends, recvs, tags::kLinkProbe)->wait();
      fastest = std::min(fastest, clock.now() - start);
    }
    return fastest;
  };
  std::vector<LinkEstimate> estimates;
  for (const int peer : peers) {
    const double small = fastest_exchange(peer, kSmall);
    const double large = fastest_exchange(peer, large_bytes);
    const double extra = std::max(large - small, 1e-12);
    estimates.push_back(
        {peer, small * 1e6, static_cast<double>(large_bytes - kSmall) * 8.0 / extra / 1e9});
  }
  return estimates;
}

std::shared_ptr<LinkClock> steady_link_clock() {
  return std::make_shared<SteadyClock>();
}

std::shared_ptr<Communicator> simulate_link(std::shared_ptr<Communicator> inner, LinkModel link,
                                            std::shared_ptr<LinkClock> clock) {
  if (!(link.gigabits_per_second > 0) || !(link.latency_us >= 0)) {
    throw InvalidArgument(fmt::format("simulate_link: a link of {} needs a bandwidth above 0 and "
                                      "a latency of 0 or more",
                                      to_string(link)));
  }
  if (inner->size() == 1) return inner;
  return std::make_shared<SimulatedLink>(std::move(inner), link, std::move(clock));
}

} // namespace tessera::comm
