// The cost model: rates measured on the rank's own matrix, and per-layer predictions from them.
#include "tessera/gnn/cost_model.hpp"

#include "tessera/comm/halo_exchange.hpp"
#include "tessera/core/error.hpp"
#include "tessera/engine/machine_rates.hpp"
#include "tessera/ops/ops.hpp"

#include <algorithm>
#include <functional>
#include <numeric>
#include <random>

namespace tessera::gnn {

namespace {

constexpr int kRepeats = 3;

/// Times kernels on a backend: each timing runs `together` first (when set), then the kernel
/// once as a warm-up and the median of a few runs, each closed by a synchronize. With `idle` (a
/// rank with no rows) only `together` runs and the time is 0: every rank makes the same calls.
class KernelTimer {
public:
  KernelTimer(const Backend& backend, std::function<void()> together, bool idle)
      : backend_(backend), together_(std::move(together)), idle_(idle) {}

  /// Median seconds of `run`.
  template <typename F> double operator()(F&& run) const {
    if (together_) together_();
    if (idle_) return 0.0;
    run();
    backend_.synchronize();
    return median_seconds(kRepeats, [&] {
      run();
      backend_.synchronize();
    });
  }

private:
  const Backend& backend_;
  std::function<void()> together_;
  bool idle_;
};

/// bytes / seconds in GB/s (0 when nothing was timed).
double gbps(double bytes, double seconds) {
  return seconds > 0 ? bytes / seconds / 1e9 : 0.0;
}

} // namespace

double RankRates::spmm_gbps_at(std::int64_t width) const noexcept {
  double rate = 0.0;
  std::int64_t distance = -1;
  for (const auto& [w, r] : spmm_gbps) {
    const std::int64_t d = w > width ? w - width : width - w;
    if (distance < 0 || d < distance) {
      distance = d;
      rate = r;
    }
  }
  return rate;
}

namespace {

/// The GEMMs of `layer`'s step, as GcnConv runs them: milliseconds (median of a few). `n_owned`:
/// rows of the layer's output.
double layer_gemm_ms(const Backend& be, const BackendPtr& backend, const LayerShape& layer,
                     std::int64_t n_owned, const KernelTimer& time) {
  // Transform-first multiplies the input's rows (x·W, dW = xᵀ·d(xW), dx = d(xW)·Wᵀ); aggregate-
  // first the owned rows of Â·x ((Â·x)·W, dW = (Â·x)ᵀ·dy, d(Â·x) = dy·Wᵀ).
  const std::int64_t m = layer.transform_first ? layer.input_rows : n_owned;
  Dense x = Dense::zeros(backend, m, layer.in), w = Dense::zeros(backend, layer.in, layer.out);
  Dense y = Dense::zeros(backend, m, layer.out);
  double seconds = time([&] {
    ops::gemm(be, Transpose::No, Transpose::No, 1.0f, x.cview(), w.cview(), 0.0f, y.view());
  });
  seconds += time([&] {
    ops::gemm(be, Transpose::Yes, Transpose::No, 1.0f, x.cview(), y.cview(), 0.0f, w.view());
  });
  if (layer.input_gradient) {
    seconds += time([&] {
      ops::gemm(be, Transpose::No, Transpose::Yes, 1.0f, y.cview(), w.cview(), 0.0f, x.view());
    });
  }
  return 1e3 * seconds;
}

} // namespace

RankRates measure_rank_rates(const BackendPtr& backend, const Csr& s,
                             std::span<const LayerShape> layers,
                             const std::function<void()>& together) {
  RankRates rates;
  if (layers.empty()) return rates;
  const std::int64_t rows = s.rows();
  const Backend& be = *backend;
  const KernelTimer time(be, together, rows == 0); // (a rank without rows meets the others)
  std::vector<std::int64_t> widths;
  for (const LayerShape& layer : layers) {
    widths.push_back(layer.exchanged_width());
    rates.gemms.push_back({layer, layer_gemm_ms(be, backend, layer, rows, time)});
  }
  const std::int64_t w = std::max<std::int64_t>(*std::max_element(widths.begin(), widths.end()), 1);
  Dense x = Dense::zeros(backend, s.cols(), w), y = Dense::zeros(backend, rows, w);
  Dense weight = Dense::zeros(backend, w, w);
  std::vector<std::int64_t> sorted(widths.begin(), widths.end());
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  for (const std::int64_t width : sorted) {
    if (width < 1) continue;
    const ConstDenseView<float> in(x.data(), s.cols(), width);
    const DenseView<float> out(y.data(), rows, width);
    const double seconds = time([&] { ops::spmm(be, s.view(), in, out); });
    rates.spmm_gbps.emplace_back(width, gbps(spmm_model_bytes(rows, s.nnz(), width), seconds));
  }
  const ConstDenseView<float> x_rows = x.cview().slice_rows(0, rows);
  const double gemm_s = time([&] {
    ops::gemm(be, Transpose::No, Transpose::No, 1.0f, x_rows, weight.cview(), 0.0f, y.view());
  });
  rates.gemm_gflops = gbps(2.0 * static_cast<double>(rows) * static_cast<double>(w * w), gemm_s);

  std::vector<LocalId> ids(static_cast<std::size_t>(rows));
  std::iota(ids.begin(), ids.end(), LocalId{0});
  Buffer<LocalId> on_backend(backend, rows);
  backend->copy_from_host(on_backend.data(), ids.data(), ids.size() * sizeof(LocalId));
  const double copy_s = time([&] { ops::gather_rows(be, x_rows, on_backend.span(), y.view()); });
  const double row_bytes = static_cast<double>(w) * sizeof(float);
  rates.copy_gbps = gbps(2.0 * static_cast<double>(rows) * row_bytes, copy_s);

  // Messages are encoded on the host: a few thousand rows of random values.
  const std::int64_t sample = std::min<std::int64_t>(rows, 4096);
  std::vector<float> host(static_cast<std::size_t>(sample * w));
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (float& v : host)
    v = normal(rng);
  const ConstDenseView<float> values(host.data(), sample, w);
  std::vector<float> decoded(host.size());
  const RngKey key = RngKey::make(0, RngPurpose::HaloRounding, 0);
  for (const comm::HaloPrecision p : {comm::HaloPrecision::Bf16, comm::HaloPrecision::Int8}) {
    std::vector<std::byte> code(static_cast<std::size_t>(sample) *
                                comm::encoded_row_bytes(p, w, sizeof(float)));
    const double seconds = time([&] {
      comm::encode_rows(p, values, std::span<std::byte>(code), key, 0);
      comm::decode_rows(p, std::span<const std::byte>(code),
                        DenseView<float>(decoded.data(), sample, w));
    });
    rates.encode_gbps[static_cast<int>(p)] = gbps(static_cast<double>(sample) * row_bytes, seconds);
  }
  if (backend->kind() != DeviceKind::Cpu) {     // device rows staged through the host: a copy there
    const KernelTimer alone(be, {}, rows == 0); // device ranks only: not together
    const double seconds = alone(
        [&] { backend->copy_to_host(decoded.data(), x.data(), decoded.size() * sizeof(float)); });
    rates.encode_gbps[0] = gbps(static_cast<double>(sample) * row_bytes, seconds);
  }
  return rows > 0 ? rates : RankRates{};
}

CostModel::CostModel(RankRates rates, std::vector<comm::LinkEstimate> links,
                     std::shared_ptr<const comm::HaloPlan> plan, std::int64_t n_owned,
                     std::int64_t n_local, std::int64_t n_interior, std::int64_t nnz)
    : rates_(rates), links_(std::move(links)), plan_(std::move(plan)), n_owned_(n_owned),
      n_local_(n_local), n_interior_(n_interior), nnz_(nnz) {}

double CostModel::transfer_seconds(std::int64_t row_bytes) const {
  if (plan_ == nullptr) return 0.0;
  double slowest = 0.0;
  for (const comm::LinkEstimate& link : links_) {
    std::int64_t sent = 0, received = 0;
    for (const comm::HaloPlan::Block& b : plan_->send_blocks())
      sent += b.peer == link.peer ? b.count : 0;
    for (const comm::HaloPlan::Block& b : plan_->recv_blocks())
      received += b.peer == link.peer ? b.count : 0;
    if (sent + received == 0 || link.gigabits_per_second <= 0) continue;
    const double bytes = static_cast<double>(std::max(sent, received) * row_bytes);
    slowest =
        std::max(slowest, link.latency_us * 1e-6 + bytes * 8 / (link.gigabits_per_second * 1e9));
  }
  return slowest;
}

LayerPrediction predict_layer(const RankRates& rates, const PartCounts& part,
                              const LayerShape& layer, const comm::ExchangeOptions& exchange,
                              const WireSeconds& wire, double step_compute_ms) {
  const auto seconds = [](double amount, double per_second) {
    return per_second > 0 ? amount / per_second : 0.0;
  };
  const auto spmm = [&](std::int64_t rows, std::int64_t width) {
    return seconds(spmm_model_bytes(rows, part.nnz, width), rates.spmm_gbps_at(width) * 1e9);
  };
  const auto stream = [&](double bytes) { return seconds(bytes, rates.copy_gbps * 1e9); };
  // A GEMM with a narrow side is bound by its matrices' bytes, not its flops (a roofline).
  const auto gemm = [&](std::int64_t m, std::int64_t k, std::int64_t n) {
    const double dm = static_cast<double>(m), dk = static_cast<double>(k),
                 dn = static_cast<double>(n);
    return std::max(seconds(2.0 * dm * dk * dn, rates.gemm_gflops * 1e9),
                    stream((dm * dk + dk * dn + dm * dn) * sizeof(float)));
  };
  const std::int64_t in = layer.in, out = layer.out, n = layer.input_rows;
  const std::int64_t n_owned = part.n_owned, n_local = part.n_local;
  const double out_bytes = static_cast<double>(n_owned * out) * sizeof(float);

  // The products, forward then backward, and where each direction's messages may hide.
  double forward_spmm = 0.0, backward_spmm = 0.0, gemms = 0.0;
  if (layer.transform_first) {
    forward_spmm = spmm(n_owned, out);
    backward_spmm = spmm(n_local, out);
    gemms = gemm(n, in, out) * (layer.input_gradient ? 3 : 2); // x·W, dW, dx
  } else {
    forward_spmm = spmm(n_owned, in);
    backward_spmm = layer.input_gradient ? spmm(n_local, in) : 0.0;
    gemms = gemm(n_owned, in, out) * (layer.input_gradient ? 3 : 2); // (Â·x)·W, dW, d(Â·x)
  }
  for (const RankRates::LayerGemms& measured : rates.gemms) { // measured beats modelled
    const LayerShape& m = measured.shape;
    if (m.in == in && m.out == out && m.transform_first == layer.transform_first &&
        m.input_rows == n && m.input_gradient == layer.input_gradient) {
      gemms = 1e-3 * measured.ms;
    }
  }
  LayerPrediction p;
  double compute = forward_spmm + backward_spmm + gemms + stream(3 * out_bytes); // + bias
  double wait = 0.0, transfer = 0.0;
  const bool backward_exchange = layer.transform_first || layer.input_gradient;
  if (layer.has_halo) {
    const std::int64_t w = layer.exchanged_width();
    const auto row_bytes =
        static_cast<std::int64_t>(comm::encoded_row_bytes(exchange.precision, w, sizeof(float)));
    const double one_way = wire(row_bytes);
    const double rows_bytes =
        static_cast<double>((part.rows_sent + n_local - n_owned) * w) * sizeof(float);
    const double encode = rates.encode_gbps[static_cast<int>(exchange.precision)];
    const int directions = backward_exchange ? 2 : 1;
    // Packing sent rows (or adding received shares), and encoding both ends' rows.
    compute += directions * (stream(rows_bytes) + seconds(rows_bytes, encode * 1e9));
    if (exchange.mode == comm::HaloMode::Stale) { // its own copies of the rows in and out
      compute += directions * stream(2 * rows_bytes);
      // Smoothing: two axpy passes over the received rows (about half of rows_bytes).
      if (exchange.smoothing > 0) compute += directions * stream(3 * rows_bytes);
    }
    transfer = directions * one_way;
    const double forward_hidden =
        n_owned > 0 ? forward_spmm * static_cast<double>(part.n_interior) / n_owned : 0.0;
    const double backward_hidden =
        n_local > 0 ? backward_spmm * static_cast<double>(n_owned) / n_local : 0.0;
    if (exchange.mode == comm::HaloMode::Stale) {
      wait = directions * std::max(0.0, one_way - step_compute_ms * 1e-3);
    } else {
      // skip: the bitmaps go first, a round trip of no rows
      const double round_trip = exchange.mode == comm::HaloMode::Skip ? wire(0) : 0.0;
      wait = round_trip + std::max(0.0, one_way - forward_hidden);
      if (backward_exchange) wait += round_trip + std::max(0.0, one_way - backward_hidden);
    }
  }
  p.compute_ms = 1e3 * compute;
  p.transfer_ms = 1e3 * transfer;
  p.wait_ms = 1e3 * wait;
  return p;
}

LayerPrediction CostModel::predict(const LayerShape& layer, const comm::ExchangeOptions& exchange,
                                   double step_compute_ms) const {
  const PartCounts part{n_owned_, n_local_, n_interior_, nnz_,
                        plan_ != nullptr ? plan_->num_send_rows() : 0};
  return predict_layer(
      rates_, part, layer, exchange,
      [this](std::int64_t row_bytes) { return transfer_seconds(row_bytes); }, step_compute_ms);
}

PartCost predict_part_cost(const RankRates& rates, std::span<const LayerShape> layers,
                           std::int64_t rows, std::int64_t nnz) {
  const auto step_ms = [&](std::int64_t nonzeros) {
    const CostModel model(rates, {}, nullptr, rows, rows, rows, nonzeros);
    double ms = 0.0;
    for (const LayerShape& layer : layers)
      ms += model.predict(layer, comm::ExchangeOptions{}).compute_ms;
    return ms;
  };
  PartCost cost;
  if (rows <= 0 || nnz <= 0) return cost;
  const double at_nnz = step_ms(nnz), at_twice = step_ms(2 * nnz);
  cost.per_nonzero_ms = std::max(0.0, (at_twice - at_nnz) / static_cast<double>(nnz));
  cost.per_row_ms = std::max(0.0, (at_nnz - cost.per_nonzero_ms * static_cast<double>(nnz)) /
                                      static_cast<double>(rows));
  return cost;
}

comm::ExchangeOptions CostModel::choose(const LayerShape& layer,
                                        std::span<const comm::ExchangeOptions> candidates,
                                        double step_compute_ms) const {
  if (candidates.empty()) throw InvalidArgument("CostModel::choose: no candidate exchange");
  const comm::ExchangeOptions* best = &candidates.front();
  double best_ms = predict(layer, *best, step_compute_ms).total_ms();
  for (const comm::ExchangeOptions& c : candidates.subspan(1)) {
    const double ms = predict(layer, c, step_compute_ms).total_ms();
    if (ms < best_ms) {
      best = &c;
      best_ms = ms;
    }
  }
  return *best;
}

} // namespace tessera::gnn
