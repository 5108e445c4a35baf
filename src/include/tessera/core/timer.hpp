// Wall-clock timing of named phases, for progress lines and the run report.
#pragma once

#include <chrono>

namespace tessera {

/// A monotonic stopwatch.
class Stopwatch {
 public:
  Stopwatch() : start_(clock::now()) {}
  void restart() { start_ = clock::now(); }
  /// Seconds since construction or the last restart.
  double seconds() const { return std::chrono::duration<double>(clock::now() - start_).count(); }

 private:
  using clock = std::chrono::steady_clock;
  clock::time_point start_;
};

}  // namespace tessera
