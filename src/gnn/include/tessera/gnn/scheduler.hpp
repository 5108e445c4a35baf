// The communication-avoiding scheduler: for each layer of a distributed GCN, the product order
// and the halo exchange whose slowest rank the cost model predicts fastest. What `--schedule
// auto` runs; with one candidate (`--schedule fixed`) it only predicts.
#pragma once

#include "tessera/comm/communicator.hpp"
#include "tessera/comm/layer_exchange.hpp"
#include "tessera/gnn/cost_model.hpp"
#include "tessera/gnn/gcn_conv.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace tessera::gnn {

/// An inexact exchange costs accuracy: the scheduler takes one only when the model predicts it
/// this much faster than the fastest exact plan, more than the model's own error (within 16 %
/// per layer at 2 and 4 ranks on this project's 2-core machine, where measurements taken at
/// different moments differ by as much).
constexpr double kInexactMargin = 0.15;

/// The exchanges to choose among: exact fp32 first (so it wins ties), then `base`'s own mode and
/// precision, then every allowed mode and precision, each with `base`'s other settings.
std::vector<comm::ExchangeOptions>
exchange_candidates(const comm::ExchangeOptions& base, std::span<const comm::HaloMode> modes,
                    std::span<const comm::HaloPrecision> precisions);

/// What the scheduler plans for: one rank's distributed GCN.
struct ScheduleRequest {
  std::vector<std::int64_t> layer_sizes; ///< input width, hidden widths, classes
  GcnOrder order = GcnOrder::Auto;       ///< the model's product order
  bool choose_order = false;             ///< try both product orders (order Auto only)
  bool cache_input_features = true;      ///< ghost input rows fetched once: layer 0 has no halo
  std::int64_t n_owned = 0, n_local = 0; ///< owned rows; owned + ghost rows
  /// The exchanges each layer may take; [0] exact fp32 when there is more than one
  /// (exchange_candidates). One: every layer takes it, and the plan only predicts.
  std::vector<comm::ExchangeOptions> candidates;
};

/// The shapes the scheduler weighs, [layer][order]: per layer the order `order` gives first, then
/// (with choose_order) the other. What measure_rank_rates times.
std::vector<LayerShape> schedule_shapes(const ScheduleRequest& request);

/// One layer's plan.
struct LayerPlan {
  LayerShape shape;               ///< in the order chosen
  comm::ExchangeOptions exchange; ///< the exchange chosen
  LayerPrediction predicted;      ///< this rank's step under the plan
  double slowest_ms = 0.0;        ///< the slowest rank's predicted step under the plan
  /// With choose_order: the slowest rank's best step in the order not taken.
  std::optional<double> other_order_ms;
  /// Whether the layer exchanges rows inexactly (a halo, and not exact fp32).
  bool inexact() const noexcept;
};

/// Per layer, the plan whose slowest rank `model` predicts fastest: every rank's predictions are
/// reduced first (one allreduce), so every rank takes the same plans. Ties go to the order
/// `request.order` gives and to the earlier candidate; an inexact plan must beat the fastest
/// exact one by kInexactMargin. Collective over `comm`.
std::vector<LayerPlan> schedule_layers(const ScheduleRequest& request, const CostModel& model,
                                       comm::Communicator& comm);

} // namespace tessera::gnn
