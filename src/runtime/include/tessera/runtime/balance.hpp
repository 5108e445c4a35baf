// Speed-aware balancing of a job's parts: each rank's speed (given, or measured by the cost
// model on a probe), the cost of a row, and the rebalancer that refits the speeds from the
// epochs the ranks measure and says when to cut the graph again.
#pragma once

#include "tessera/comm/communicator.hpp"
#include "tessera/core/device.hpp"
#include "tessera/gnn/cost_model.hpp"
#include "tessera/gnn/gcn_conv.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tessera::runtime {

/// What a job's parts are balanced for: part p's target share is speeds[p] / sum(speeds), and a
/// vertex weighs its degree + 1 + row_cost (partition::VertexWeight::Cost).
struct BalanceTargets {
  std::vector<double> speeds; ///< [ranks] relative speeds, the fastest 1
  double row_cost = 0.0;      ///< what a row costs beyond its nonzeros, in nonzeros
};

/// Every rank predicts, with the cost model, the compute of a training step of a GCN of widths
/// `sizes` per nonzero and per row, from its backend's rates measured on a probe graph (a fixed
/// random graph, the same on every rank: every rank measures the same work), all ranks timing
/// together, each time scaled by the rank's `slowdown`. The speeds are `given` (one per rank,
/// scaled so the fastest is 1) or, when empty, the inverse of each rank's per-nonzero time; the
/// row cost is the mean of the ranks'. Collective over `comm`. Throws Error when a rank's
/// kernels took no measurable time (no speed to take from it).
BalanceTargets measure_balance_targets(comm::Communicator& comm, const BackendPtr& backend,
                                       std::span<const std::int64_t> sizes, GcnOrder order,
                                       const std::vector<double>& given, double slowdown);

/// "1.00,0.26,..." — speeds as a --rank-speeds value.
std::string speeds_text(std::span<const double> speeds);

/// Decides from the ranks' measured compute per epoch when to re-cut the graph and for which
/// shares (ROC's idea: fit each rank's cost to its measured times). It watches windows of
/// `window` epochs (the first epoch after a cut is skipped: it allocates) and takes each rank's
/// median compute. When max / mean exceeds `threshold` it fits each rank's time as
/// fixed + per_work · work — through the windows of the last two tilings when the rank's work
/// changed between them, else as per_work · work alone — and returns the shares of the total
/// work that equalize the fitted times (relative: the largest 1). It settles for good — never
/// moves again — once a window is balanced within the threshold, after `max_moves` moves, or
/// when a move did not lower the imbalance by at least kMinGain: so on a steady load it
/// converges in at most max_moves moves and never undoes a move. Pure: every rank feeds it the
/// same gathered times and gets the same answer.
class Rebalancer {
public:
  /// A move must lower the imbalance by this fraction to be followed by another.
  static constexpr double kMinGain = 0.05;

  /// threshold > 1; max_moves >= 0; window >= 1.
  Rebalancer(double threshold, int max_moves, int window = 3);

  /// The current tiling: each rank's work (nonzeros of its aggregation rows + row_cost · its
  /// rows). Call at the start and after every move; the next epoch is not measured.
  void start(std::vector<double> work);
  /// After an epoch, every rank's compute of it (ms). Returns the relative shares to cut for
  /// (part weights) when the window it closes calls for a move.
  std::optional<std::vector<double>> after_epoch(std::span<const double> compute_ms);

  /// The imbalance of the last window closed (0 before any), and whether it will move again.
  double last_imbalance() const noexcept { return last_imbalance_; }
  bool settled() const noexcept { return settled_; }
  int moves() const noexcept { return moves_; }
  /// The imbalance measured after each move (0 until a window after it closes), in order.
  const std::vector<double>& imbalance_after() const noexcept { return after_; }

private:
  /// The shares that equalize the ranks' fitted times, for this window's `compute`.
  std::vector<double> fit_shares(const std::vector<double>& compute) const;

  double threshold_;
  int max_moves_;
  int window_;
  std::vector<double> work_;
  std::vector<double> previous_work_, previous_compute_; // the window that made the last move
  std::vector<std::vector<double>> samples_;             // [epoch in window][rank]
  bool warming_ = true;
  bool settled_ = false;
  int moves_ = 0;
  double last_imbalance_ = 0.0;
  double before_ = 0.0; // the imbalance that triggered the last move
  std::vector<double> after_;
};

} // namespace tessera::runtime
