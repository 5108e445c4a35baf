// Speed-aware balancing: the ranks' speeds from the cost model on a probe graph, and the
// rebalancer's windows over measured epochs.
#include "tessera/runtime/balance.hpp"

#include "tessera/core/error.hpp"
#include "tessera/core/timer.hpp"
#include "tessera/gnn/gcn_conv.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/core.h>
#include <numeric>
#include <random>

namespace tessera::runtime {

namespace {

/// The probe graph every rank measures: rows that each read themselves and kProbeReads - 1
/// rows drawn at random (fixed seed), so the SpMM gathers as a partitioned graph's does.
constexpr std::int64_t kProbeRows = 16384;
constexpr std::int64_t kProbeReads = 16;

Csr probe_matrix(const BackendPtr& backend) {
  const std::int64_t nnz = kProbeRows * kProbeReads;
  std::vector<Offset> row_ptr(static_cast<std::size_t>(kProbeRows) + 1);
  std::vector<LocalId> col(static_cast<std::size_t>(nnz));
  std::vector<float> val(static_cast<std::size_t>(nnz), 1.0f / kProbeReads);
  std::mt19937_64 rng(1);
  std::uniform_int_distribution<LocalId> any(0, static_cast<LocalId>(kProbeRows - 1));
  for (std::int64_t r = 0; r < kProbeRows; ++r) {
    row_ptr[r] = static_cast<Offset>(r * kProbeReads);
    LocalId* row = col.data() + r * kProbeReads;
    row[0] = static_cast<LocalId>(r);
    for (std::int64_t k = 1; k < kProbeReads; ++k)
      row[k] = any(rng);
    std::sort(row, row + kProbeReads);
  }
  row_ptr.back() = static_cast<Offset>(nnz);
  Csr probe(backend, kProbeRows, kProbeRows, nnz);
  backend->copy_from_host(probe.row_ptr(), row_ptr.data(), row_ptr.size() * sizeof(Offset));
  backend->copy_from_host(probe.col(), col.data(), col.size() * sizeof(LocalId));
  backend->copy_from_host(probe.val(), val.data(), val.size() * sizeof(float));
  return probe;
}

} // namespace

BalanceTargets measure_balance_targets(comm::Communicator& comm, const BackendPtr& backend,
                                       std::span<const std::int64_t> sizes, GcnOrder order,
                                       const std::vector<double>& given, double slowdown) {
  const int ranks = comm.size();
  if (!given.empty() && static_cast<int>(given.size()) != ranks) {
    throw InvalidArgument(fmt::format("{} rank speeds given for {} ranks", given.size(), ranks));
  }
  std::vector<gnn::LayerShape> shapes;
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
    gnn::LayerShape shape;
    shape.in = sizes[i];
    shape.out = sizes[i + 1];
    shape.transform_first = transforms_first(order, shape.in, shape.out);
    shape.input_gradient = i > 0;
    shape.input_rows = kProbeRows;
    shapes.push_back(shape);
  }
  const Csr probe = probe_matrix(backend);
  const gnn::RankRates rates =
      gnn::measure_rank_rates(backend, probe, shapes, [&comm] { comm.barrier(); });
  const gnn::PartCost cost = gnn::predict_part_cost(rates, shapes, kProbeRows, probe.nnz());

  // An allgather: each rank fills its own pair.
  std::vector<double> all(static_cast<std::size_t>(2 * ranks), 0.0);
  all[2 * comm.rank()] = cost.per_nonzero_ms * slowdown;
  all[2 * comm.rank() + 1] = cost.per_row_ms * slowdown;
  comm.allreduce_sum(std::span<double>(all));

  BalanceTargets targets;
  targets.speeds = given;
  for (int r = 0; r < ranks; ++r) {
    const gnn::PartCost rank_cost{all[2 * r], all[2 * r + 1]};
    if (rank_cost.per_nonzero_ms <= 0) { // a timer that saw no time: no speed to take
      throw Error(fmt::format("rank {} measured no time on the balancing probe; give the speeds "
                              "with --balance given --rank-speeds",
                              r));
    }
    targets.row_cost += rank_cost.row_cost() / ranks;
    if (given.empty()) targets.speeds.push_back(1.0 / rank_cost.per_nonzero_ms);
  }
  const double fastest = *std::max_element(targets.speeds.begin(), targets.speeds.end());
  for (double& s : targets.speeds)
    s /= fastest;
  return targets;
}

std::string speeds_text(std::span<const double> speeds) {
  std::string text;
  for (const double s : speeds)
    text += fmt::format("{}{:.2f}", text.empty() ? "" : ",", s);
  return text;
}

Rebalancer::Rebalancer(double threshold, int max_moves, int window)
    : threshold_(threshold), max_moves_(max_moves), window_(window) {
  if (!(threshold > 1.0) || max_moves < 0 || window < 1) {
    throw InvalidArgument(fmt::format("a rebalancer needs a threshold > 1, max_moves >= 0 and a "
                                      "window >= 1, got {}, {} and {}",
                                      threshold, max_moves, window));
  }
}

void Rebalancer::start(std::vector<double> work) {
  work_ = std::move(work);
  samples_.clear();
  warming_ = true;
}

std::optional<std::vector<double>> Rebalancer::after_epoch(std::span<const double> compute_ms) {
  if (settled_) return std::nullopt;
  if (compute_ms.size() != work_.size()) {
    throw DimensionMismatch(fmt::format("the rebalancer has the work of {} ranks, got the times "
                                        "of {}",
                                        work_.size(), compute_ms.size()));
  }
  if (warming_) { // the first epoch of a tiling allocates its buffers
    warming_ = false;
    return std::nullopt;
  }
  samples_.emplace_back(compute_ms.begin(), compute_ms.end());
  if (static_cast<int>(samples_.size()) < window_) return std::nullopt;

  const std::size_t ranks = work_.size();
  std::vector<double> compute(ranks);
  for (std::size_t r = 0; r < ranks; ++r) {
    std::vector<double> values;
    for (const std::vector<double>& epoch : samples_)
      values.push_back(epoch[r]);
    compute[r] = std::max(median(std::move(values)), 1e-6);
  }
  samples_.clear();
  const double mean = std::accumulate(compute.begin(), compute.end(), 0.0) / ranks;
  last_imbalance_ = *std::max_element(compute.begin(), compute.end()) / mean;

  if (moves_ > 0 && after_.back() == 0.0) {
    after_.back() = last_imbalance_;
    // A move that did not help is not followed by another: the model of the ranks' speeds does
    // not describe this load, and moving again could only trade one imbalance for another.
    if (last_imbalance_ > (1.0 - kMinGain) * before_) settled_ = true;
  }
  if (last_imbalance_ <= threshold_ || moves_ >= max_moves_) settled_ = true;
  if (settled_) return std::nullopt;

  std::vector<double> shares = fit_shares(compute);
  previous_work_ = work_;
  previous_compute_ = std::move(compute);
  ++moves_;
  before_ = last_imbalance_;
  after_.push_back(0.0);
  return shares;
}

std::vector<double> Rebalancer::fit_shares(const std::vector<double>& compute) const {
  // Each rank's time as fixed + per_work · work: from two tilings' windows when the rank's work
  // changed between them, else all of it per unit of work.
  const std::size_t ranks = work_.size();
  std::vector<double> fixed(ranks, 0.0), per_work(ranks);
  for (std::size_t r = 0; r < ranks; ++r) {
    const double work = std::max(work_[r], 1.0);
    per_work[r] = compute[r] / work;
    if (previous_work_.size() != ranks) continue;
    const double dw = work - std::max(previous_work_[r], 1.0);
    if (std::abs(dw) < 0.01 * work) continue;
    const double slope = (compute[r] - previous_compute_[r]) / dw;
    const double intercept = compute[r] - slope * work;
    if (slope > 0 && intercept >= 0) {
      per_work[r] = slope;
      fixed[r] = intercept;
    }
  }
  // The time T every rank reaches when the total work is shared out: sum (T - fixed) / per_work
  // = total; a rank whose fixed time alone exceeds T gets the least share there is.
  const double total = std::accumulate(work_.begin(), work_.end(), 0.0);
  const double least = 0.01 * total / static_cast<double>(ranks);
  std::vector<bool> floor(ranks, false);
  std::vector<double> shares(ranks, least);
  for (std::size_t pass = 0; pass < ranks; ++pass) {
    double inverse = 0.0, offset = 0.0, left = total;
    for (std::size_t r = 0; r < ranks; ++r) {
      if (floor[r]) {
        left -= least;
        continue;
      }
      inverse += 1.0 / per_work[r];
      offset += fixed[r] / per_work[r];
    }
    const double target = (left + offset) / inverse;
    bool changed = false;
    for (std::size_t r = 0; r < ranks; ++r) {
      if (floor[r]) continue;
      shares[r] = (target - fixed[r]) / per_work[r];
      if (shares[r] < least) {
        floor[r] = true;
        changed = true;
      }
    }
    if (!changed) break;
  }
  for (std::size_t r = 0; r < ranks; ++r)
    shares[r] = std::max(shares[r], least);
  const double largest = *std::max_element(shares.begin(), shares.end());
  for (double& share : shares)
    share /= largest;
  return shares;
}

} // namespace tessera::runtime
