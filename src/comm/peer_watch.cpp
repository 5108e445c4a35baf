// The limits and records of a rank's waits on its peers.
#include "tessera/comm/peer_watch.hpp"

#include "tessera/core/error.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/core.h>

namespace tessera::comm {

double PeerWatch::limit() const {
  if (fixed_) return *fixed_;
  if (epochs_.empty()) return kBeforeTrainingSeconds;
  return std::max(kMinimumSeconds, kEpochs * slowest_epoch_);
}

void PeerWatch::set_limit(std::optional<double> seconds) {
  if (seconds && !(std::isfinite(*seconds) && *seconds > 0)) {
    throw InvalidArgument(
        fmt::format("a peer timeout of {} s: expects a number of seconds > 0", *seconds));
  }
  fixed_ = seconds;
}

std::string PeerWatch::describe_limit() const {
  if (fixed_) return "the peer timeout given";
  if (epochs_.empty())
    return fmt::format("{:g} s before the first epoch ends", kBeforeTrainingSeconds);
  return fmt::format("the larger of {:g} s and {:g} x the slowest epoch, {:.3g} s", kMinimumSeconds,
                     kEpochs, slowest_epoch_);
}

void PeerWatch::epoch_ended(double seconds) {
  slowest_epoch_ = std::max(slowest_epoch_, seconds);
  epochs_.push_back(seconds);
}

void PeerWatch::wait_ended(double seconds, const std::string& what) {
  if (epochs_.empty()) return;
  std::vector<double> sorted = epochs_;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2),
                   sorted.end());
  const double median = std::max(sorted[sorted.size() / 2], 1e-6);
  if (seconds > kStallEpochs * median) stalls_.push_back({step_, what, seconds, seconds / median});
}

} // namespace tessera::comm
