// The testing seam: simulated slower ranks, a simulated network link and injected failures —
// what tessera-train's Testing flags ask for — in one place. The job applies them around the
// paths a real run takes (a hook on the model, a decorator on the communicator, a check after an
// epoch), never inside them.
#pragma once

#include "tessera/comm/communicator.hpp"
#include "tessera/engine/sequential.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessera::comm {
class HaloPlan;
}

namespace tessera::runtime {

/// What a job simulates; the default simulates nothing.
struct Simulation {
  /// Simulated slower devices (--simulate-rank-speed R:FACTOR): rank R's training compute takes
  /// 1 / FACTOR as long as measured, FACTOR in (0, 1]; also what its measured speed sees.
  std::vector<std::pair<int, double>> rank_speeds;
  /// Holds the training's halo exchanges and gradient sums back as a network link of this
  /// speed would (--simulate-link); a bandwidth of 0: none, the ranks' own transport.
  comm::LinkModel link;
  /// --inject-failure RANK:EPOCH: that rank throws after that epoch (-1: never).
  int fail_rank = -1, fail_epoch = -1;

  /// Rank `rank`'s slowdown: 1 / its factor, 1 without one.
  double slowdown(int rank) const;
  /// Refuses ranks outside [0, ranks), factors outside (0, 1] and a failure no epoch reaches,
  /// naming the flag. The job's ranks and epochs.
  void check(int ranks, int epochs) const;
  /// Throws std::runtime_error("injected failure after epoch N") on the rank and epoch asked.
  void after_epoch(int rank, int epoch) const;
};

/// A simulated slower device on `model` while it lives: after each module's training forward and
/// backward it sleeps (slowdown - 1) times the call's compute — its time less what
/// `blocked_seconds` (a running total: halo waits and message posting) grew by during it — so
/// the messages a later module sends leave about when they would on the slower device. Nothing
/// with a slowdown of 1. Throws InvalidArgument for a slowdown below 1 or not finite.
class SlowerDevice {
public:
  SlowerDevice(Sequential<float>& model, double slowdown, std::function<double()> blocked_seconds);
  ~SlowerDevice();
  SlowerDevice(const SlowerDevice&) = delete;
  SlowerDevice& operator=(const SlowerDevice&) = delete;

private:
  Sequential<float>& model_;
  double blocked_before_ = 0.0;
};

/// `comm` behind the simulated link when `simulation` has one (else `comm` itself), after
/// refusing a link so slow that one epoch would take more than a day on it: the gradient sum (a
/// ring allreduce of a GCN of `layer_sizes`' parameters) and each layer's halo rows forward and
/// backward (`plan`'s; layer 0's only without `cache_input_features`) on the slowest rank.
/// Collective over `job_comm` (one allreduce).
std::shared_ptr<comm::Communicator>
simulated_link(const Simulation& simulation, std::shared_ptr<comm::Communicator> comm,
               comm::Communicator& job_comm, const std::vector<std::int64_t>& layer_sizes,
               bool cache_input_features, const comm::HaloPlan* plan);

} // namespace tessera::runtime
