// The testing seam: checking the simulations, the slower device's hook, the link.
#include "tessera/runtime/simulation.hpp"

#include "tessera/comm/halo_plan.hpp"
#include "tessera/core/error.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fmt/core.h>
#include <stdexcept>
#include <thread>

namespace tessera::runtime {

double Simulation::slowdown(int rank) const {
  double slowdown = 1.0;
  for (const auto& [r, factor] : rank_speeds) {
    if (r == rank) slowdown = 1.0 / factor;
  }
  return slowdown;
}

void Simulation::check(int ranks, int epochs) const {
  for (const auto& [rank, factor] : rank_speeds) {
    if (rank < 0 || rank >= ranks) {
      throw InvalidArgument(fmt::format("--simulate-rank-speed {}:{} names rank {}, but the job "
                                        "has {} rank(s): expects a rank in [0, {}]",
                                        rank, factor, rank, ranks, ranks - 1));
    }
    if (!std::isfinite(factor) || factor <= 0 || factor > 1) {
      throw InvalidArgument(fmt::format("--simulate-rank-speed {}:{}: expects a factor in (0, 1] "
                                        "(the rank runs at that fraction of its measured speed)",
                                        rank, factor));
    }
  }
  if (fail_rank < 0) return;
  if (fail_rank >= ranks) {
    throw InvalidArgument(fmt::format("--inject-failure {}:{} names rank {}, but the job has {} "
                                      "rank(s): expects a rank in [0, {}]",
                                      fail_rank, fail_epoch, fail_rank, ranks, ranks - 1));
  }
  if (fail_epoch < 1 || fail_epoch > epochs) {
    throw InvalidArgument(fmt::format("--inject-failure {}:{} names epoch {}, but --epochs is {}: "
                                      "expects an epoch in [1, {}]",
                                      fail_rank, fail_epoch, fail_epoch, epochs, epochs));
  }
}

void Simulation::after_epoch(int rank, int epoch) const {
  if (rank == fail_rank && epoch == fail_epoch) {
    throw std::runtime_error(fmt::format("injected failure after epoch {}", epoch));
  }
}

SlowerDevice::SlowerDevice(Sequential<float>& model, double slowdown,
                           std::function<double()> blocked_seconds)
    : model_(model) {
  if (!std::isfinite(slowdown) || slowdown < 1.0) {
    throw InvalidArgument("a simulated slowdown must be a number >= 1, got " +
                          std::to_string(slowdown));
  }
  if (slowdown == 1.0) return;
  if (!blocked_seconds) blocked_seconds = [] { return 0.0; };
  Sequential<float>::TrainingHook hook;
  hook.before = [this, blocked_seconds] { blocked_before_ = blocked_seconds(); };
  hook.after = [this, slowdown, blocked_seconds](double seconds) {
    const double compute = std::max(0.0, seconds - (blocked_seconds() - blocked_before_));
    std::this_thread::sleep_for(std::chrono::duration<double>((slowdown - 1.0) * compute));
  };
  model_.set_training_hook(std::move(hook));
}

SlowerDevice::~SlowerDevice() {
  model_.set_training_hook({});
}

std::shared_ptr<comm::Communicator>
simulated_link(const Simulation& simulation, std::shared_ptr<comm::Communicator> comm,
               comm::Communicator& job_comm, const std::vector<std::int64_t>& sizes,
               bool cache_input_features, const comm::HaloPlan* plan) {
  const comm::LinkModel& link = simulation.link;
  if (!(link.gigabits_per_second > 0)) return comm;
  if (job_comm.size() > 1) {
    const double ranks = job_comm.size(), latency = link.latency_us * 1e-6;
    const double bytes_per_second = link.gigabits_per_second * 1e9 / 8.0;
    double parameters = 0.0; // a GCN's weights and biases (other models' are alike)
    for (std::size_t i = 0; i + 1 < sizes.size(); ++i)
      parameters += static_cast<double>(sizes[i] + 1) * static_cast<double>(sizes[i + 1]);
    const double gradient_bytes = 4.0 * parameters;
    double widths = 0.0; // of the layers whose rows cross the link
    for (std::size_t i = cache_input_features ? 1 : 0; i + 1 < sizes.size(); ++i)
      widths += static_cast<double>(std::min(sizes[i], sizes[i + 1]));
    const double halo_bytes =
        2.0 * 4.0 * widths * static_cast<double>(plan != nullptr ? plan->num_send_rows() : 0);
    const double peers = plan != nullptr ? static_cast<double>(plan->send_blocks().size()) : 0.0;
    double seconds[] = {2 * (ranks - 1) * latency +
                        (2 * (ranks - 1) / ranks * gradient_bytes + halo_bytes) / bytes_per_second +
                        2.0 * static_cast<double>(sizes.size()) * peers * latency};
    job_comm.allreduce_max(std::span<double>(seconds));
    constexpr double kDay = 86400.0;
    if (seconds[0] > kDay) {
      throw InvalidArgument(fmt::format(
          "--simulate-link {}: an epoch of this job would spend about {:.3g} days on that link "
          "(its gradient sums and halo rows, {:.3g} MiB on this rank): expects a link that "
          "carries an epoch within a day",
          comm::to_string(link), seconds[0] / kDay, (gradient_bytes + halo_bytes) / (1 << 20)));
    }
  }
  return comm::simulate_link(std::move(comm), link);
}

} // namespace tessera::runtime
