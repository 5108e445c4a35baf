// Linear, ReLU and Dropout modules and Glorot initialization.
#include "tessera/engine/layers.hpp"

#include "tessera/core/error.hpp"
#include "tessera/core/rng.hpp"
#include "tessera/engine/chunk_manager.hpp"
#include "tessera/engine/row_blocks.hpp"
#include "tessera/engine/weight_products.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/core.h>
#include <vector>

namespace tessera {

namespace {

/// A Context whose output is the dense view `y`.
template <typename T> Context<T> make_context(const Step& step, Input<T> x, ConstDenseView<T> y) {
  return Context<T>{x, Input<T>(y), step};
}

void check_probability(float p) {
  if (!(p >= 0.0f && p < 1.0f)) {
    throw InvalidArgument("dropout probability must be in [0, 1), got " + std::to_string(p));
  }
}

/// Elementwise layers write their input gradient; accumulating into it is not offered.
void require_overwrite(const std::string& layer, GradientMode mode) {
  if (mode == GradientMode::Accumulate) {
    throw InvalidArgument(layer +
                          " backward overwrites its input gradient; Accumulate is not offered");
  }
}

/// The row tensors of an elementwise forward that reads x and writes y, which may be x itself.
template <typename T> std::vector<RowTensor> output_rows(ConstDenseView<T> x, DenseView<T> y) {
  if (y.data == x.data) return {rows_of(y, Access::ReadWrite)};
  return {rows_of(x, Access::Read), rows_of(y, Access::Write)};
}

/// The row tensors of an elementwise backward that reads `reads` and d_output and writes dx, which
/// may be d_output itself (a backward in place: read and written as one).
template <typename T>
std::vector<RowTensor> gradient_rows(std::vector<RowTensor> reads, ConstDenseView<T> d_output,
                                     DenseView<T> dx) {
  if (dx.data == d_output.data) {
    reads.push_back(rows_of(dx, Access::ReadWrite));
  } else {
    reads.push_back(rows_of(d_output, Access::Read));
    reads.push_back(rows_of(dx, Access::Write));
  }
  return reads;
}

void check_width(const std::string& layer, std::int64_t expected, std::int64_t got) {
  if (expected != got) {
    throw DimensionMismatch(layer + " expects " + std::to_string(expected) +
                            " input features, got " + std::to_string(got));
  }
}

/// w: [rows, cols] (any backend) drawn U(-limit, limit) from the counter RNG under `key`.
template <typename T> void uniform_fill(DenseT<T>& w, double limit, const RngKey& key) {
  // Drawn on the host (the same values for every backend) about 1 MiB of rows at a time, each
  // block copied where w lives (a manager's allocator acquires what the copy writes): no host
  // copy of a whole weight, which would raise the peak memory of a run under a budget.
  const std::int64_t cols = std::max<std::int64_t>(w.cols(), 1);
  const std::int64_t block = std::clamp<std::int64_t>(
      (std::int64_t{1} << 20) / static_cast<std::int64_t>(sizeof(T)) / cols, 1,
      std::max<std::int64_t>(w.rows(), 1));
  std::vector<T> host(static_cast<std::size_t>(block * w.cols()));
  for (std::int64_t r0 = 0; r0 < w.rows(); r0 += block) {
    const std::int64_t r1 = std::min(w.rows(), r0 + block);
    for (std::int64_t r = r0; r < r1; ++r) {
      for (std::int64_t c = 0; c < w.cols(); ++c) {
        host[static_cast<std::size_t>((r - r0) * w.cols() + c)] =
            static_cast<T>((2.0 * uniform(key, r, c) - 1.0) * limit);
      }
    }
    w.backend()->copy_from_host(w.data() + r0 * w.cols(), host.data(),
                                static_cast<std::size_t>((r1 - r0) * w.cols()) * sizeof(T));
  }
}

} // namespace

template <typename T> void glorot_uniform(DenseT<T>& w, std::uint64_t seed, std::uint32_t layer) {
  uniform_fill(w, std::sqrt(6.0 / static_cast<double>(w.rows() + w.cols())),
               RngKey::make(seed, RngPurpose::WeightInit, layer));
}

template <typename T>
void fan_in_uniform(DenseT<T>& w, std::int64_t fan_in, std::uint64_t seed, std::uint32_t stream) {
  if (fan_in < 1) {
    throw InvalidArgument("fan_in_uniform: the fan-in must be at least 1, got " +
                          std::to_string(fan_in));
  }
  uniform_fill(w, 1.0 / std::sqrt(static_cast<double>(fan_in)),
               RngKey::make(seed, RngPurpose::FanInInit, stream));
}

// ---- Linear ----------------------------------------------------------------------------------

template <typename T>
Linear<T>::Linear(BackendPtr backend, std::int64_t in_features, std::int64_t out_features,
                  bool bias, std::uint64_t seed, std::uint32_t layer_index)
    : backend_(backend),
      weight_(make_weight<T>(backend, "linear" + std::to_string(layer_index) + ".weight",
                             in_features, out_features, seed, layer_index)),
      bias_(make_bias<T>(backend, "linear" + std::to_string(layer_index) + ".bias", out_features,
                         bias)),
      output_(backend), d_input_(backend) {
  this->register_parameter(weight_);
  this->register_parameter(bias_);
}

template <typename T> Context<T> Linear<T>::forward(const Step& step, Input<T> x) {
  check_width(name(), weight_.value.rows(), x.cols());
  DenseView<T> y = output_.get(x.rows(), weight_.value.cols());
  ChunkManager* blocks = own_memory(*this, backend_, x);
  std::vector<RowTensor> tensors = input_rows(sparse_rows_, *backend_, x, blocks);
  tensors.push_back(rows_of(y, Access::Write));
  for_row_blocks(blocks, x.rows(), tensors, [&](std::int64_t b, std::int64_t e) {
    multiply_weight(*backend_, x.slice_rows(b, e), weight_.value.cview(), y.slice_rows(b, e));
    add_bias(*backend_, y.slice_rows(b, e), bias_);
  });
  return make_context<T>(step, x, y);
}

template <typename T>
ConstDenseView<T> Linear<T>::backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                                      GradientMode input_mode, GradientMode param_mode) {
  if (input_mode != GradientMode::Ignore && ctx.input.is_sparse()) {
    throw InvalidArgument(name() + ": no gradient for a sparse input");
  }
  ChunkManager* blocks = own_memory(*this, backend_, ctx.input);
  // The sparse-accumulate scratch is the input-gradient buffer: a sparse input has no gradient.
  Pins sum(blocks);
  hold_gradient_sum(sum, ctx.input, weight_, param_mode, d_input_);
  DenseView<T> dx;
  if (input_mode != GradientMode::Ignore) dx = d_input_.get(ctx.input.rows(), weight_.value.rows());
  const T beta = input_mode == GradientMode::Accumulate ? T{1} : T{0};
  std::vector<RowTensor> tensors = input_rows(sparse_rows_, *backend_, ctx.input, blocks);
  tensors.push_back(rows_of(d_output, Access::Read));
  if (dx.data != nullptr) {
    tensors.push_back(rows_of(dx, beta == T{0} ? Access::Write : Access::ReadWrite));
  }
  for_row_blocks(blocks, d_output.rows, tensors, [&](std::int64_t b, std::int64_t e) {
    const ConstDenseView<T> dy = d_output.slice_rows(b, e);
    weight_gradient(*backend_, ctx.input.slice_rows(b, e), dy, weight_, block_mode(param_mode, b),
                    d_input_);
    bias_gradient(*backend_, dy, bias_, block_mode(param_mode, b));
    if (dx.data == nullptr) return;
    ops::gemm(*backend_, Transpose::No, Transpose::Yes, T{1}, dy, weight_.value.cview(), beta,
              dx.slice_rows(b, e));
  });
  return dx;
}

template <typename T>
bool Linear<T>::acquires_own_memory(const ChunkManager& memory, const Input<T>& x) const {
  // What Sequential would acquire at once: the parameters and their gradients, the input and
  // its gradient (a sparse input: its offsets, columns and values), the output.
  const std::size_t input =
      x.is_sparse() ? memory.tensor_size(x.sparse.row_ptr) + memory.tensor_size(x.sparse.col) +
                          memory.tensor_size(x.sparse.val)
                    : 2 * static_cast<std::size_t>(x.dense.size()) * sizeof(T);
  const std::size_t output = static_cast<std::size_t>(x.rows() * weight_.value.cols()) * sizeof(T);
  const std::size_t parameters = 2 * (weight_.value.bytes() + bias_.value.bytes());
  // Row blocks help only when the rows are what does not fit (a graph's nodes, not an MLP's
  // mini-batch beside its weights): else the layer runs whole, as without a budget.
  return input + output > parameters && exceeds_budget(memory, parameters + input + output);
}

template <typename T> std::string Linear<T>::name() const {
  return "Linear(" + std::to_string(weight_.value.rows()) + " -> " +
         std::to_string(weight_.value.cols()) + ")";
}

template <typename T> std::size_t Linear<T>::bytes() const {
  return 2 * (weight_.value.bytes() + bias_.value.bytes()) + output_.bytes() + d_input_.bytes();
}

// ---- Dropout ---------------------------------------------------------------------------------

template <typename T>
MaskedElementwise<T>::MaskedElementwise(BackendPtr backend, float p, std::uint32_t layer_index,
                                        const char* label)
    : backend_(backend), p_(p), layer_(layer_index), label_(label), output_(backend),
      d_input_(backend) {
  check_probability(p);
}

template <typename T> std::string MaskedElementwise<T>::name() const {
  return fmt::format("{}(p={:g})", label_, p_);
}

template <typename T>
bool MaskedElementwise<T>::acquires_own_memory(const ChunkManager& memory,
                                               const Input<T>& x) const {
  return elementwise_exceeds_budget(memory, x);
}

template <typename T> Context<T> MaskedElementwise<T>::forward(const Step& step, Input<T> x) {
  if (passes_through(step)) return Context<T>{x, x, step};
  if (x.is_sparse()) return sparse_forward(step, x);
  DenseView<T> y = output_.get(x.rows(), x.cols());
  forward_into(step, x.dense, y);
  return make_context<T>(step, x, y);
}

template <typename T>
Context<T> MaskedElementwise<T>::forward_in_place(const Step& step, DenseView<T> x) {
  if (!this->has_forward_in_place()) return Module<T>::forward_in_place(step, x); // refuses
  if (!passes_through(step)) forward_into(step, x, x);
  return make_context<T>(step, ConstDenseView<T>(x), x);
}

template <typename T> Context<T> MaskedElementwise<T>::sparse_forward(const Step&, Input<T>) {
  throw InvalidArgument(name() + " takes a dense input");
}

template <typename T>
ConstDenseView<T> MaskedElementwise<T>::backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                                                 GradientMode input_mode, GradientMode) {
  if (input_mode == GradientMode::Ignore) return {};
  if (ctx.input.is_sparse()) throw InvalidArgument(name() + ": no gradient for a sparse input");
  require_overwrite(name(), input_mode);
  if (passes_through(ctx.step)) return d_output;
  DenseView<T> dx = d_input_.get(d_output.rows, d_output.cols);
  backward_into(ctx, d_output, dx);
  return dx;
}

template <typename T>
ConstDenseView<T> MaskedElementwise<T>::backward_in_place(const Context<T>& ctx,
                                                          DenseView<T> d_output, GradientMode) {
  if (ctx.input.is_sparse()) throw InvalidArgument(name() + ": no gradient for a sparse input");
  if (!passes_through(ctx.step)) backward_into(ctx, d_output, d_output);
  return d_output;
}

template <typename T>
Dropout<T>::Dropout(BackendPtr backend, float p, std::uint32_t layer_index)
    : MaskedElementwise<T>(std::move(backend), p, layer_index, "Dropout") {}

template <typename T> bool Dropout<T>::passes_through(const Step& step) const {
  return !step.training || this->p_ == 0.0f;
}

template <typename T> Context<T> Dropout<T>::sparse_forward(const Step& step, Input<T> x) {
  const RngKey key = RngKey::make(step.seed, RngPurpose::Dropout, this->layer_, step.epoch);
  const std::int64_t entries = ops::nnz(*this->backend_, x.sparse); // row_ptr may be device memory
  if (sparse_values_.size() != entries) sparse_values_ = Buffer<T>(this->backend_, entries);
  ChunkManager* blocks = own_memory(*this, this->backend_, x);
  std::vector<RowTensor> tensors;
  if (blocks != nullptr) {
    tensors = sparse_rows_.of(*this->backend_, x.sparse, Access::Read);
    tensors.push_back({sparse_values_.data(), sizeof(T), Access::Write, sparse_rows_.offsets()});
  }
  for_row_blocks(blocks, x.rows(), tensors, [&](std::int64_t b, std::int64_t e) {
    ops::dropout_csr_values(*this->backend_, x.sparse.row_slice(b, e), sparse_values_.span(),
                            this->p_, key, rows_from(step.rows, b));
  });
  CsrView<T> y = x.sparse;
  y.val = sparse_values_.data();
  return Context<T>{x, Input<T>(y), step};
}

template <typename T>
void Dropout<T>::forward_into(const Step& step, ConstDenseView<T> x, DenseView<T> y) {
  const RngKey key = RngKey::make(step.seed, RngPurpose::Dropout, this->layer_, step.epoch);
  for_row_blocks(own_memory(*this, this->backend_, Input<T>(x)), x.rows, output_rows(x, y),
                 [&](std::int64_t b, std::int64_t e) {
                   ops::dropout_forward(*this->backend_, x.slice_rows(b, e), y.slice_rows(b, e),
                                        this->p_, key, rows_from(step.rows, b));
                 });
}

template <typename T>
void Dropout<T>::backward_into(const Context<T>& ctx, ConstDenseView<T> d_output, DenseView<T> dx) {
  const RngKey key = RngKey::make(ctx.step.seed, RngPurpose::Dropout, this->layer_, ctx.step.epoch);
  for_row_blocks(own_memory(*this, this->backend_, ctx.input), d_output.rows,
                 gradient_rows({}, d_output, dx), [&](std::int64_t b, std::int64_t e) {
                   ops::dropout_backward(*this->backend_, d_output.slice_rows(b, e),
                                         dx.slice_rows(b, e), this->p_, key,
                                         rows_from(ctx.step.rows, b));
                 });
}

template <typename T> std::size_t Dropout<T>::bytes() const {
  return MaskedElementwise<T>::bytes() + sparse_values_.bytes();
}

// ---- ReLU + dropout --------------------------------------------------------------------------

template <typename T>
ReluDropout<T>::ReluDropout(BackendPtr backend, float p, std::uint32_t layer_index)
    : MaskedElementwise<T>(std::move(backend), p, layer_index, "ReLU+Dropout") {}

template <typename T>
void ReluDropout<T>::forward_into(const Step& step, ConstDenseView<T> x, DenseView<T> y) {
  const float p = step.training ? this->p_ : 0.0f;
  const RngKey key = RngKey::make(step.seed, RngPurpose::Dropout, this->layer_, step.epoch);
  for_row_blocks(own_memory(*this, this->backend_, Input<T>(x)), x.rows, output_rows(x, y),
                 [&](std::int64_t b, std::int64_t e) {
                   ops::relu_dropout_forward(*this->backend_, x.slice_rows(b, e),
                                             y.slice_rows(b, e), p, key, rows_from(step.rows, b));
                 });
}

template <typename T>
void ReluDropout<T>::backward_into(const Context<T>& ctx, ConstDenseView<T> d_output,
                                   DenseView<T> dx) {
  const ConstDenseView<T> y = ctx.output.dense;
  for_row_blocks(
      own_memory(*this, this->backend_, ctx.input), d_output.rows,
      gradient_rows({rows_of(y, Access::Read)}, d_output, dx), [&](std::int64_t b, std::int64_t e) {
        ops::relu_dropout_backward(*this->backend_, y.slice_rows(b, e), d_output.slice_rows(b, e),
                                   dx.slice_rows(b, e), ctx.step.training ? this->p_ : 0.0f);
      });
}

// ---- pointwise activations (and a dropout after them) ----------------------------------------

template <typename T>
PointwiseActivation<T>::PointwiseActivation(BackendPtr backend, Pointwise kind, float p,
                                            std::uint32_t layer_index)
    : MaskedElementwise<T>(std::move(backend), p, layer_index,
                           kind == Pointwise::Elu ? "ELU" : "GELU"),
      kind_(kind) {}

template <typename T> std::string PointwiseActivation<T>::name() const {
  if (this->p_ == 0.0f) return this->label_;
  return fmt::format("{}+Dropout(p={:g})", this->label_, this->p_);
}

template <typename T>
void PointwiseActivation<T>::forward_into(const Step& step, ConstDenseView<T> x, DenseView<T> y) {
  const bool drop = step.training && this->p_ > 0.0f;
  const RngKey key = RngKey::make(step.seed, RngPurpose::Dropout, this->layer_, step.epoch);
  for_row_blocks(own_memory(*this, this->backend_, Input<T>(x)), x.rows, output_rows(x, y),
                 [&](std::int64_t b, std::int64_t e) {
                   const ConstDenseView<T> in = x.slice_rows(b, e);
                   const DenseView<T> out = y.slice_rows(b, e);
                   if (kind_ == Pointwise::Elu) {
                     ops::elu_forward(*this->backend_, in, out);
                   } else {
                     ops::gelu_forward(*this->backend_, in, out);
                   }
                   if (drop) {
                     ops::dropout_forward(*this->backend_, ConstDenseView<T>(out), out, this->p_,
                                          key, rows_from(step.rows, b));
                   }
                 });
}

template <typename T>
void PointwiseActivation<T>::backward_into(const Context<T>& ctx, ConstDenseView<T> d_output,
                                           DenseView<T> dx) {
  // ELU's derivative follows from its output, GELU's from its input.
  const ConstDenseView<T> read = kind_ == Pointwise::Elu ? ctx.output.dense : ctx.input.dense;
  const bool dropped = ctx.step.training && this->p_ > 0.0f;
  const RngKey key = RngKey::make(ctx.step.seed, RngPurpose::Dropout, this->layer_, ctx.step.epoch);
  // The dropout's gradient first (dx = dy · mask / (1 − p)), then the activation's over it.
  const T keep = dropped ? static_cast<T>(1.0f - this->p_) : T{1};
  for_row_blocks(own_memory(*this, this->backend_, ctx.input), d_output.rows,
                 gradient_rows({rows_of(read, Access::Read)}, d_output, dx),
                 [&](std::int64_t b, std::int64_t e) {
                   const ConstDenseView<T> r = read.slice_rows(b, e);
                   ConstDenseView<T> dy = d_output.slice_rows(b, e);
                   const DenseView<T> out = dx.slice_rows(b, e);
                   if (dropped) {
                     ops::dropout_backward(*this->backend_, dy, out, this->p_, key,
                                           rows_from(ctx.step.rows, b));
                     dy = ConstDenseView<T>(out);
                   }
                   if (kind_ == Pointwise::Elu) {
                     ops::elu_backward(*this->backend_, r, dy, out, keep);
                   } else {
                     ops::gelu_backward(*this->backend_, r, dy, out);
                   }
                 });
}

template <typename T>
LayerNorm<T>::LayerNorm(BackendPtr backend, std::int64_t features, std::string name_prefix, T eps)
    : backend_(std::move(backend)), eps_(eps),
      gamma_(make_bias<T>(backend_, name_prefix + ".gamma", features, true)),
      beta_(make_bias<T>(backend_, name_prefix + ".beta", features, true)), output_(backend_),
      normalized_(backend_), rstd_(backend_), d_input_(backend_), product_(backend_) {
  const std::vector<T> ones(static_cast<std::size_t>(features), T{1});
  backend_->copy_from_host(gamma_.value.data(), ones.data(), ones.size() * sizeof(T));
  this->register_parameter(gamma_);
  this->register_parameter(beta_);
}

template <typename T> Context<T> LayerNorm<T>::forward(const Step& step, Input<T> x) {
  const std::int64_t f = gamma_.value.cols();
  if (x.is_sparse() || x.cols() != f) {
    throw DimensionMismatch(name() + ": needs a dense input " + std::to_string(f) + " wide, got " +
                            shape_string(x.rows(), x.cols()) + (x.is_sparse() ? " (sparse)" : ""));
  }
  const std::int64_t n = x.rows();
  DenseView<T> y = output_.get(n, f);
  const DenseView<T> rstd = rstd_.get(n, 1);
  const auto width = static_cast<std::size_t>(f);
  ops::layer_norm_forward(*backend_, x.dense, std::span<const T>(gamma_.value.data(), width),
                          std::span<const T>(beta_.value.data(), width), eps_, y,
                          normalized_.get(n, f),
                          std::span<T>(rstd.data, static_cast<std::size_t>(n)));
  return make_context<T>(step, x, y);
}

template <typename T>
ConstDenseView<T> LayerNorm<T>::backward(const Context<T>&, ConstDenseView<T> d_output,
                                         GradientMode input_mode, GradientMode param_mode) {
  const std::int64_t n = d_output.rows, f = d_output.cols;
  const DenseView<T> dx = d_input_.get(n, f);
  const DenseView<T> product = product_.get(n, f);
  const DenseView<T> rstd = rstd_.get(n, 1);
  ops::layer_norm_backward(*backend_, d_output, ConstDenseView<T>(normalized_.get(n, f)),
                           std::span<const T>(rstd.data, static_cast<std::size_t>(n)),
                           std::span<const T>(gamma_.value.data(), static_cast<std::size_t>(f)), dx,
                           product);
  bias_gradient(*backend_, d_output, beta_, param_mode);
  bias_gradient(*backend_, ConstDenseView<T>(product), gamma_, param_mode);
  if (input_mode == GradientMode::Ignore) return {};
  require_overwrite(name(), input_mode);
  return dx;
}

template <typename T> std::string LayerNorm<T>::name() const {
  return "LayerNorm(" + std::to_string(gamma_.value.cols()) + ")";
}

template <typename T> std::size_t LayerNorm<T>::bytes() const {
  return 2 * (gamma_.value.bytes() + beta_.value.bytes()) + output_.bytes() + normalized_.bytes() +
         rstd_.bytes() + d_input_.bytes() + product_.bytes();
}

template <typename T>
BatchNorm<T>::BatchNorm(BackendPtr backend, std::int64_t features, std::string name_prefix,
                        comm::Communicator* comm, std::int64_t counted_rows, T eps)
    : backend_(std::move(backend)), comm_(comm), counted_rows_(counted_rows), eps_(eps),
      gamma_(make_bias<T>(backend_, name_prefix + ".gamma", features, true)),
      beta_(make_bias<T>(backend_, name_prefix + ".beta", features, true)), output_(backend_),
      normalized_(backend_), d_input_(backend_), sums_(backend_), stats_(backend_) {
  const std::vector<T> ones(static_cast<std::size_t>(features), T{1});
  backend_->copy_from_host(gamma_.value.data(), ones.data(), ones.size() * sizeof(T));
  this->register_parameter(gamma_);
  this->register_parameter(beta_);
}

template <typename T>
std::vector<double> BatchNorm<T>::global_sums(ConstDenseView<T> a, ConstDenseView<T> b,
                                              std::int64_t rows) {
  const std::int64_t f = a.cols;
  const auto width = static_cast<std::size_t>(f);
  const DenseView<T> sums = sums_.get(2, f);
  ops::column_sums(*backend_, a.slice_rows(0, rows), b.slice_rows(0, rows),
                   std::span<T>(sums.data, width), std::span<T>(sums.data + f, width));
  std::vector<T> host(2 * width);
  backend_->copy_to_host(host.data(), sums.data, host.size() * sizeof(T));
  std::vector<double> total(host.begin(), host.end());
  total.push_back(static_cast<double>(rows));
  if (comm_ != nullptr && comm_->size() > 1) comm_->allreduce_sum(std::span<double>(total));
  return total;
}

template <typename T> Context<T> BatchNorm<T>::forward(const Step& step, Input<T> x) {
  const std::int64_t f = gamma_.value.cols();
  if (x.is_sparse() || x.cols() != f) {
    throw DimensionMismatch(name() + ": needs a dense input " + std::to_string(f) + " wide, got " +
                            shape_string(x.rows(), x.cols()) + (x.is_sparse() ? " (sparse)" : ""));
  }
  const auto width = static_cast<std::size_t>(f);
  const std::vector<double> sums = global_sums(x.dense, x.dense, counted(x.rows()));
  counted_total_ = sums.back();
  const double n = std::max(counted_total_, 1.0);
  std::vector<T> stats(2 * width); // mean, rstd
  for (std::size_t c = 0; c < width; ++c) {
    const double mean = sums[c] / n;
    const double variance = std::max(0.0, sums[width + c] / n - mean * mean); // biased
    stats[c] = static_cast<T>(mean);
    stats[width + c] = static_cast<T>(1.0 / std::sqrt(variance + static_cast<double>(eps_)));
  }
  const DenseView<T> device_stats = stats_.get(4, f);
  backend_->copy_from_host(device_stats.data, stats.data(), stats.size() * sizeof(T));
  const DenseView<T> y = output_.get(x.rows(), f);
  ops::batch_norm_apply(*backend_, x.dense, std::span<const T>(device_stats.data, width),
                        std::span<const T>(device_stats.data + f, width),
                        std::span<const T>(gamma_.value.data(), width),
                        std::span<const T>(beta_.value.data(), width), y,
                        normalized_.get(x.rows(), f));
  return make_context<T>(step, x, y);
}

template <typename T>
ConstDenseView<T> BatchNorm<T>::backward(const Context<T>&, ConstDenseView<T> d_output,
                                         GradientMode input_mode, GradientMode param_mode) {
  const std::int64_t rows = d_output.rows, f = d_output.cols;
  const auto width = static_cast<std::size_t>(f);
  const ConstDenseView<T> xhat(normalized_.get(rows, f));
  // Σ dy and Σ dy·xhat over every row (ghost copies' too: their gradients reach the
  // statistics), summed over the ranks; before the ranks' sum they are dβ and dγ.
  const std::vector<double> sums = global_sums(d_output, xhat, rows);
  const DenseView<T> local = sums_.get(2, f);
  const auto set_gradient = [&](Parameter<T>& p, const T* from) {
    if (param_mode == GradientMode::Ignore) return;
    const std::span<T> grad(p.grad.data(), width);
    if (param_mode == GradientMode::Overwrite) {
      backend_->copy_within(grad.data(), from, width * sizeof(T));
    } else {
      ops::axpy(*backend_, T{1}, std::span<const T>(from, width), grad);
    }
  };
  set_gradient(beta_, local.data);
  set_gradient(gamma_, local.data + f);
  if (input_mode == GradientMode::Ignore) return {};
  require_overwrite(name(), input_mode);
  // The statistics' totals count the rows every rank counts.
  std::vector<T> means(2 * width, T{0});
  const double n = std::max(counted_total_, 1.0);
  for (std::size_t c = 0; c < 2 * width; ++c)
    means[c] = static_cast<T>(sums[c] / n);
  const DenseView<T> stats = stats_.get(4, f);
  backend_->copy_from_host(stats.data + 2 * f, means.data(), means.size() * sizeof(T));
  const DenseView<T> dx = d_input_.get(rows, f);
  const std::span<const T> rstd(stats.data + f, width), gamma(gamma_.value.data(), width);
  const std::int64_t own = counted(rows);
  ops::batch_norm_backward(*backend_, d_output.slice_rows(0, own), xhat.slice_rows(0, own), rstd,
                           gamma, std::span<const T>(stats.data + 2 * f, width),
                           std::span<const T>(stats.data + 3 * f, width), dx.slice_rows(0, own));
  if (own < rows) { // ghost copies: the direct term only (their owners count the statistics')
    const std::vector<T> zeros(width, T{0});
    backend_->copy_from_host(stats.data + 2 * f, zeros.data(), width * sizeof(T));
    ops::batch_norm_backward(*backend_, d_output.slice_rows(own, rows), xhat.slice_rows(own, rows),
                             rstd, gamma, std::span<const T>(stats.data + 2 * f, width),
                             std::span<const T>(stats.data + 2 * f, width),
                             dx.slice_rows(own, rows));
  }
  return dx;
}

template <typename T> std::string BatchNorm<T>::name() const {
  return "BatchNorm(" + std::to_string(gamma_.value.cols()) + ")";
}

template <typename T> std::size_t BatchNorm<T>::bytes() const {
  return 2 * (gamma_.value.bytes() + beta_.value.bytes()) + output_.bytes() + normalized_.bytes() +
         d_input_.bytes() + sums_.bytes() + stats_.bytes();
}

template <typename T>
FirstRows<T>::FirstRows(BackendPtr backend, std::int64_t rows)
    : backend_(std::move(backend)), rows_(rows), d_input_(backend_) {}

template <typename T> Context<T> FirstRows<T>::forward(const Step& step, Input<T> x) {
  if (x.rows() < rows_) {
    throw DimensionMismatch(name() + ": input " + shape_string(x.rows(), x.cols()) +
                            " has fewer rows than it keeps");
  }
  return Context<T>{x, x.first_rows(rows_), step};
}

template <typename T>
ConstDenseView<T> FirstRows<T>::backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                                         GradientMode input_mode, GradientMode) {
  if (input_mode == GradientMode::Ignore) return {};
  require_overwrite(name(), input_mode);
  if (ctx.input.is_sparse()) throw InvalidArgument(name() + ": no gradient for a sparse input");
  const DenseView<T> dx = d_input_.get(ctx.input.rows(), d_output.cols);
  backend_->zero_bytes(dx.data, static_cast<std::size_t>(dx.size()) * sizeof(T));
  ops::copy(*backend_, d_output, dx.slice_rows(0, d_output.rows));
  return dx;
}

template <typename T>
BinaryLogit<T>::BinaryLogit(BackendPtr backend)
    : backend_(std::move(backend)), output_(backend_), d_input_(backend_), selector_(backend_) {}

template <typename T> ConstDenseView<T> BinaryLogit<T>::selector() {
  const DenseView<T> s = selector_.get(1, 2);
  if (!selector_ready_) {
    const T host[2] = {T{0}, T{1}};
    backend_->copy_from_host(s.data, host, sizeof(host));
    selector_ready_ = true;
  }
  return ConstDenseView<T>(s);
}

template <typename T> Context<T> BinaryLogit<T>::forward(const Step& step, Input<T> x) {
  if (x.is_sparse() || x.cols() != 1) {
    throw DimensionMismatch(name() + ": needs one dense logit per row, got " +
                            shape_string(x.rows(), x.cols()) + (x.is_sparse() ? " (sparse)" : ""));
  }
  const DenseView<T> y = output_.get(x.rows(), 2);
  ops::gemm(*backend_, Transpose::No, Transpose::No, T{1}, x.dense, selector(), T{0}, y);
  return make_context<T>(step, x, y);
}

template <typename T>
ConstDenseView<T> BinaryLogit<T>::backward(const Context<T>&, ConstDenseView<T> d_output,
                                           GradientMode input_mode, GradientMode) {
  if (input_mode == GradientMode::Ignore) return {};
  const DenseView<T> dx = d_input_.get(d_output.rows, 1);
  const T beta = input_mode == GradientMode::Accumulate ? T{1} : T{0};
  ops::gemm(*backend_, Transpose::No, Transpose::Yes, T{1}, d_output, selector(), beta, dx);
  return dx;
}

template <typename T>
ResidualStart<T>::ResidualStart(BackendPtr backend)
    : backend_(std::move(backend)), d_input_(backend_) {}

template <typename T> Context<T> ResidualStart<T>::forward(const Step& step, Input<T> x) {
  if (x.is_sparse()) throw InvalidArgument("a residual branch needs a dense input");
  saved_ = x.dense;
  return Context<T>{x, x, step};
}

template <typename T>
ConstDenseView<T> ResidualStart<T>::backward(const Context<T>&, ConstDenseView<T> d_output,
                                             GradientMode input_mode, GradientMode) {
  if (add_ == nullptr) throw InvalidArgument("a residual branch was opened but never closed");
  if (input_mode == GradientMode::Ignore) return {};
  require_overwrite(name(), input_mode);
  const ConstDenseView<T> skip = add_->skip_gradient();
  Pins pins(manager_of(backend_)); // the skip's gradient is the ResidualAdd's, not ours
  pins.add_dense(skip, Access::Read);
  const DenseView<T> dx = d_input_.get(d_output.rows, d_output.cols);
  ops::copy(*backend_, d_output, dx);
  ops::axpy(*backend_, T{1}, std::span<const T>(skip.data, static_cast<std::size_t>(skip.size())),
            std::span<T>(dx.data, static_cast<std::size_t>(skip.size())));
  return dx;
}

template <typename T>
ResidualAdd<T>::ResidualAdd(BackendPtr backend, ResidualStart<T>& start)
    : backend_(std::move(backend)), start_(&start), output_(backend_), skip_(backend_) {
  start.close(this);
}

template <typename T> Context<T> ResidualAdd<T>::forward(const Step& step, Input<T> x) {
  if (x.is_sparse() || x.rows() > start_->saved().rows || x.cols() != start_->saved().cols) {
    throw DimensionMismatch("residual branch: its output " + shape_string(x.rows(), x.cols()) +
                            " must have its input's width and at most its rows, " +
                            shape_string(start_->saved().rows, start_->saved().cols));
  }
  const ConstDenseView<T> skip = start_->saved().slice_rows(0, x.rows());
  Pins pins(manager_of(backend_)); // the branch's input is the ResidualStart's
  pins.add_dense(skip, Access::Read);
  const DenseView<T> y = output_.get(skip.rows, skip.cols);
  ops::copy(*backend_, skip, y);
  ops::axpy(*backend_, T{1},
            std::span<const T>(x.dense.data, static_cast<std::size_t>(x.dense.size())),
            std::span<T>(y.data, static_cast<std::size_t>(y.size())));
  return make_context<T>(step, x, y);
}

template <typename T>
ConstDenseView<T> ResidualAdd<T>::backward(const Context<T>&, ConstDenseView<T> d_output,
                                           GradientMode, GradientMode) {
  // The branch's gradient goes on; the skip's copy waits for ResidualStart (the branch's
  // backward may discard d_output under a budget).
  const DenseView<T> skip = skip_.get(d_output.rows, d_output.cols);
  ops::copy(*backend_, d_output, skip);
  skip_view_ = ConstDenseView<T>(skip);
  return d_output;
}

template class MaskedElementwise<float>;
template class MaskedElementwise<double>;

#define TESSERA_INSTANTIATE(T)                                                                     \
  template void glorot_uniform<T>(DenseT<T>&, std::uint64_t, std::uint32_t);                       \
  template void fan_in_uniform<T>(DenseT<T>&, std::int64_t, std::uint64_t, std::uint32_t);         \
  template class Linear<T>;                                                                        \
  template class Dropout<T>;                                                                       \
  template class ReluDropout<T>;                                                                   \
  template class PointwiseActivation<T>;                                                           \
  template class LayerNorm<T>;                                                                     \
  template class BatchNorm<T>;                                                                     \
  template class FirstRows<T>;                                                                     \
  template class BinaryLogit<T>;                                                                   \
  template class ResidualStart<T>;                                                                 \
  template class ResidualAdd<T>
TESSERA_INSTANTIATE(float);
TESSERA_INSTANTIATE(double);
#undef TESSERA_INSTANTIATE

} // namespace tessera
