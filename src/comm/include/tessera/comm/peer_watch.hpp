// The watchdog of waits on peers: how long a rank may wait for another (in a halo exchange, a
// collective, a gradient sum) before the job ends with an error naming the rank it waited for
// and the step, so that a stopped or stuck rank never stalls a job forever without a word.
#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <vector>

namespace tessera::comm {

/// A wait on peers that lasted longer than 10 epochs and then ended: reported in the run summary.
struct Stall {
  std::string step;   ///< where the job stood ("epoch 12")
  std::string what;   ///< what waited ("a halo exchange of layer 1 (forward) with rank 1")
  double seconds = 0; ///< how long
  double epochs = 0;  ///< ... in median epochs
};

/// The limits and records of one rank's waits. A Communicator holds one (peer_watch()); its
/// blocking waits are bounded by limit() and end in PeerTimeout beyond it (MPI). Not thread-safe
/// (the communicator is not either), except cancel(), which another thread may call.
class PeerWatch {
public:
  /// The limit before the first epoch ends: loading and cutting a large graph take time.
  static constexpr double kBeforeTrainingSeconds = 600.0;
  /// Once epochs have run: the larger of this and kEpochs x the slowest epoch.
  static constexpr double kMinimumSeconds = 60.0;
  static constexpr double kEpochs = 50.0;
  /// A wait longer than this many median epochs that ends is a stall.
  static constexpr double kStallEpochs = 10.0;

  /// How long a wait may last, in seconds: the fixed limit when set (--peer-timeout), else
  /// kBeforeTrainingSeconds before any epoch ended, else max(kMinimumSeconds, kEpochs x the
  /// slowest epoch so far).
  double limit() const;
  /// Fixes the limit (seconds > 0), or (nullopt) goes back to the derived one. Throws
  /// InvalidArgument for a limit that is not positive and finite.
  void set_limit(std::optional<double> seconds);
  /// How limit() is set, for messages: "the peer timeout given" or "the larger of 60 s and 50 x the
  /// slowest epoch (0.12 s)".
  std::string describe_limit() const;

  /// Where the job stands, for messages: "loading" (the default), "epoch 12".
  void set_step(std::string step) { step_ = std::move(step); }
  const std::string& step() const noexcept { return step_; }

  /// An epoch of `seconds` ended: limit() and stalls are measured against the epochs so far.
  void epoch_ended(double seconds);
  /// A wait of `seconds` on `what` ended: kept as a stall when longer than kStallEpochs median
  /// epochs (never before the first epoch: loading waits are expected).
  void wait_ended(double seconds, const std::string& what);
  const std::vector<Stall>& stalls() const noexcept { return stalls_; }

  /// Ends the communicator's waits now and for good: a wait in progress on another thread, and
  /// every later one, throws PeerTimeout saying the waits were cancelled (the communicator is
  /// then unusable). For a thread that exchanges on a communicator of its own and must stop
  /// while its peers may never answer (the job is ending with an error).
  void cancel() noexcept { cancelled_ = true; }
  bool cancelled() const noexcept { return cancelled_; }
  /// The limit set by set_limit, if any (a duplicate communicator's watch takes it over).
  std::optional<double> fixed_limit() const noexcept { return fixed_; }

private:
  std::atomic<bool> cancelled_ = false;
  std::optional<double> fixed_;
  double slowest_epoch_ = 0.0;
  std::vector<double> epochs_;
  std::string step_ = "loading";
  std::vector<Stall> stalls_;
};

} // namespace tessera::comm
