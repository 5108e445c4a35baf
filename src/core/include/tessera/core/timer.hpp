// Wall-clock timing of named phases, for progress lines and the run report.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace tessera {

/// A monotonic stopwatch (steady_clock), running from construction.
class Stopwatch {
 public:
  Stopwatch() : start_(clock::now()) {}
  /// Starts timing again from now.
  void restart() { start_ = clock::now(); }
  /// Seconds since construction or the last restart.
  double seconds() const { return std::chrono::duration<double>(clock::now() - start_).count(); }

 private:
  using clock = std::chrono::steady_clock;
  clock::time_point start_;
};

/// The median of timings (the upper one of an even count); 0 for none.
inline double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  const auto mid = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), mid, values.end());
  return *mid;
}

}  // namespace tessera
