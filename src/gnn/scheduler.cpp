// The scheduler: candidates, shapes, and the per-layer choice of order and exchange.
#include "tessera/gnn/scheduler.hpp"

#include "tessera/core/error.hpp"

#include <algorithm>

namespace tessera::gnn {

std::vector<comm::ExchangeOptions>
exchange_candidates(const comm::ExchangeOptions& base, std::span<const comm::HaloMode> modes,
                    std::span<const comm::HaloPrecision> precisions) {
  std::vector<comm::HaloMode> all_modes{comm::HaloMode::Exact};
  std::vector<comm::HaloPrecision> all_precisions{comm::HaloPrecision::Fp32};
  const auto add = [](auto& list, auto value) {
    if (std::find(list.begin(), list.end(), value) == list.end()) list.push_back(value);
  };
  add(all_modes, base.mode);
  add(all_precisions, base.precision);
  for (const comm::HaloMode mode : modes)
    add(all_modes, mode);
  for (const comm::HaloPrecision precision : precisions)
    add(all_precisions, precision);
  std::vector<comm::ExchangeOptions> candidates;
  for (const comm::HaloMode mode : all_modes) {
    for (const comm::HaloPrecision precision : all_precisions) {
      comm::ExchangeOptions o = base;
      o.mode = mode;
      o.precision = precision;
      candidates.push_back(o);
    }
  }
  return candidates;
}

std::vector<LayerShape> schedule_shapes(const ScheduleRequest& r) {
  std::vector<LayerShape> shapes;
  for (std::size_t i = 0; i + 1 < r.layer_sizes.size(); ++i) {
    LayerShape shape;
    shape.in = r.layer_sizes[i];
    shape.out = r.layer_sizes[i + 1];
    shape.transform_first = transforms_first(r.order, shape.in, shape.out);
    shape.has_halo = i > 0 || !r.cache_input_features;
    shape.input_gradient = i > 0;
    shape.input_rows = i == 0 && r.cache_input_features ? r.n_local : r.n_owned;
    shapes.push_back(shape);
    if (r.choose_order) {
      shape.transform_first = !shape.transform_first;
      shapes.push_back(shape);
    }
  }
  return shapes;
}

bool LayerPlan::inexact() const noexcept {
  return shape.has_halo && (exchange.mode != comm::HaloMode::Exact ||
                            exchange.precision != comm::HaloPrecision::Fp32);
}

std::vector<LayerPlan> schedule_layers(const ScheduleRequest& r, const CostModel& model,
                                       comm::Communicator& comm) {
  if (r.candidates.empty()) throw InvalidArgument("schedule_layers: no candidate exchange");
  if (r.choose_order && r.order != GcnOrder::Auto) {
    throw InvalidArgument("schedule_layers: choose_order needs GcnOrder::Auto, the order free");
  }
  const std::vector<LayerShape> shapes = schedule_shapes(r);
  const std::size_t orders = r.choose_order ? 2 : 1;
  const std::size_t layers = shapes.size() / orders;
  const std::size_t n = r.candidates.size();
  double step_ms = 0.0; // the step's compute, what a stale exchange hides behind
  for (std::size_t i = 0; i < layers; ++i)
    step_ms += model.predict(shapes[i * orders], comm::ExchangeOptions{}).compute_ms;
  const std::size_t plans = orders * n; // per layer: [order][candidate]
  std::vector<double> slowest(layers * plans);
  for (std::size_t i = 0; i < layers; ++i) {
    for (std::size_t o = 0; o < orders; ++o) {
      for (std::size_t c = 0; c < n; ++c)
        slowest[i * plans + o * n + c] =
            model.predict(shapes[i * orders + o], r.candidates[c], step_ms).total_ms();
    }
  }
  comm.allreduce_max(std::span<double>(slowest));
  std::vector<LayerPlan> result;
  for (std::size_t i = 0; i < layers; ++i) {
    const auto first = slowest.begin() + static_cast<std::ptrdiff_t>(i * plans);
    auto best = static_cast<std::size_t>(
        std::min_element(first, first + static_cast<std::ptrdiff_t>(plans)) - first);
    if (best % n != 0) {
      std::size_t exact = 0; // candidates[0] is exact fp32: the fastest exact plan of any order
      for (std::size_t o = 1; o < orders; ++o) {
        if (first[o * n] < first[exact]) exact = o * n;
      }
      if (first[best] > (1 - kInexactMargin) * first[exact]) best = exact;
    }
    LayerPlan plan;
    plan.shape = shapes[i * orders + best / n];
    plan.exchange = r.candidates[best % n];
    plan.predicted = model.predict(plan.shape, plan.exchange, step_ms);
    plan.slowest_ms = first[best];
    if (orders == 2) {
      const std::size_t o = best / n == 0 ? 1 : 0;
      const auto row = first + static_cast<std::ptrdiff_t>(o * n);
      plan.other_order_ms = *std::min_element(row, row + static_cast<std::ptrdiff_t>(n));
    }
    result.push_back(plan);
  }
  return result;
}

} // namespace tessera::gnn
