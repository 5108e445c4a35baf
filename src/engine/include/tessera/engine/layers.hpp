// General layers on the module contract: Linear, ReLU and Dropout.
#pragma once

#include "tessera/comm/communicator.hpp"
#include "tessera/engine/module.hpp"
#include "tessera/engine/row_blocks.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

/// Glorot/Xavier uniform initialization of w: [in, out] (any backend) from the counter RNG, keyed
/// by (seed, layer) so every rank and backend draws the same weights.
template <typename T> void glorot_uniform(DenseT<T>& w, std::uint64_t seed, std::uint32_t layer);

/// PyTorch's nn.Linear start: w (a weight or a bias, any backend) drawn U(±1/√fan_in), keyed by
/// (seed, stream) in a field of its own (RngPurpose::FanInInit). InvalidArgument if fan_in < 1.
template <typename T>
void fan_in_uniform(DenseT<T>& w, std::int64_t fan_in, std::uint64_t seed, std::uint32_t stream);

/// One reusable [rows, cols] matrix on a backend, allocated on first use and reallocated only
/// when the shape asked for changes.
template <typename T> class Workspace {
public:
  /// Empty until the first get().
  explicit Workspace(BackendPtr backend) : backend_(std::move(backend)) {}
  /// A [rows, cols] view of this buffer, reallocated only when it holds fewer than rows·cols
  /// elements (a smaller shape, such as an epoch's last and smaller batch, reuses it: a buffer's
  /// address and chunks stay the same from call to call). Contents are uninitialized after a
  /// reallocation, otherwise what the last user left.
  DenseView<T> get(std::int64_t rows, std::int64_t cols) {
    if (rows * cols > matrix_.size()) matrix_ = DenseT<T>(backend_, rows, cols);
    return {matrix_.data(), rows, cols};
  }
  /// Bytes held now.
  std::size_t bytes() const { return matrix_.bytes(); }

private:
  BackendPtr backend_;
  DenseT<T> matrix_;
};

/// y = x · W + b. x: [n, in] dense or sparse, W: [in, out], b: [out].
template <typename T> class Linear final : public Module<T> {
public:
  /// W: [in_features, out_features], Glorot-initialized from (seed, layer_index), with weight
  /// decay; b: [1, out_features] zeros, without weight decay (absent when !bias).
  Linear(BackendPtr backend, std::int64_t in_features, std::int64_t out_features, bool bias,
         std::uint64_t seed, std::uint32_t layer_index);

  /// x: [n, in] dense or sparse; output [n, out]. Throws DimensionMismatch when x has another
  /// width than in_features.
  Context<T> forward(const Step& step, Input<T> x) override;
  /// d_output: [n, out]; returns d_input: [n, in] (empty when input_mode is Ignore), written to
  /// a buffer of this layer. Throws InvalidArgument for an input gradient of a sparse input.
  ConstDenseView<T> backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                             GradientMode input_mode, GradientMode param_mode) override;
  /// "Linear(in -> out)"; bytes of W, b, their gradients and the output and d_input buffers.
  std::string name() const override;
  std::size_t bytes() const override;
  bool backward_reads_output() const override { return false; }

  /// When its rows (input, output, input gradient) outweigh its parameters and the whole
  /// working set may exceed the budget (a graph's nodes, not a mini-batch): row blocks.
  bool acquires_own_memory(const ChunkManager& memory, const Input<T>& x) const override;

  /// W: [in_features, out_features].
  Parameter<T>& weight() { return weight_; }

private:
  BackendPtr backend_;
  Parameter<T> weight_;    // [in, out]
  Parameter<T> bias_;      // [1, out], empty when there is no bias
  Workspace<T> output_;    // [n, out]
  Workspace<T> d_input_;   // [n, in]
  SparseRows sparse_rows_; // a sparse x's row offsets, when it runs in row blocks
};

/// What the elementwise layers (Dropout, ReluDropout, the pointwise activations) share: the
/// probability and the layer index that key the masks (drawn from the counter RNG by (seed,
/// epoch, layer, global row id, column): identical on any tiling and backend, and redrawn, not
/// stored), the output and input-gradient buffers, running in row blocks when an elementwise
/// pass over the input, output and input gradient exceeds the budget, and forward and backward
/// either into those buffers or in place, around the two passes a layer defines (forward_into,
/// backward_into).
template <typename T> class MaskedElementwise : public Module<T> {
public:
  /// x: [n, f] dense (sparse: Dropout alone takes it); output [n, f], x itself where the step
  /// leaves x as it is (Dropout while not training). The step's rows key the masks.
  Context<T> forward(const Step& step, Input<T> x) override;
  /// d_output: [n, f]; returns d_input: [n, f] (d_output itself where the forward passed x on,
  /// empty when input_mode is Ignore). Throws InvalidArgument for an input gradient of a sparse
  /// input or input_mode Accumulate.
  ConstDenseView<T> backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                             GradientMode input_mode, GradientMode param_mode) override;
  bool has_forward_in_place() const override { return true; }
  Context<T> forward_in_place(const Step& step, DenseView<T> x) override;
  bool has_backward_in_place() const override { return true; }
  ConstDenseView<T> backward_in_place(const Context<T>& ctx, DenseView<T> d_output,
                                      GradientMode param_mode) override;
  /// "LABEL(p=...)".
  std::string name() const override;
  bool backward_reads_input() const override { return false; }
  bool acquires_own_memory(const ChunkManager& memory, const Input<T>& x) const override;
  /// Bytes of its output and d_input buffers.
  std::size_t bytes() const override { return output_.bytes() + d_input_.bytes(); }

protected:
  /// Throws InvalidArgument unless 0 <= p < 1.
  MaskedElementwise(BackendPtr backend, float p, std::uint32_t layer_index, const char* label);

  /// y = the layer on a dense x; y may be x.
  virtual void forward_into(const Step& step, ConstDenseView<T> x, DenseView<T> y) = 0;
  /// dx = d_output through the layer; dx may be d_output.
  virtual void backward_into(const Context<T>& ctx, ConstDenseView<T> d_output,
                             DenseView<T> dx) = 0;
  /// Whether `step` leaves x as it is (forward passes x on, backward d_output). False unless
  /// overridden.
  virtual bool passes_through(const Step& step) const {
    (void)step;
    return false;
  }
  /// The forward of a sparse x: InvalidArgument ("takes a dense input") unless overridden.
  virtual Context<T> sparse_forward(const Step& step, Input<T> x);

  BackendPtr backend_;
  float p_;
  std::uint32_t layer_;
  const char* label_;
  Workspace<T> output_;
  Workspace<T> d_input_;
};

/// Inverted dropout; identity when not training. A sparse input stays sparse (only its stored
/// values are dropped).
template <typename T> class Dropout final : public MaskedElementwise<T> {
public:
  /// Drops with probability p; throws InvalidArgument unless 0 <= p < 1. layer_index keys the
  /// masks (use the same one for a ReluDropout that must draw the same masks).
  Dropout(BackendPtr backend, float p, std::uint32_t layer_index);

  /// Bytes of its output, dropped sparse values and d_input buffers.
  std::size_t bytes() const override;
  bool backward_reads_output() const override { return false; }

private:
  /// y = x · mask / (1 − p).
  void forward_into(const Step& step, ConstDenseView<T> x, DenseView<T> y) override;
  /// dx = d_output · mask / (1 − p).
  void backward_into(const Context<T>& ctx, ConstDenseView<T> d_output, DenseView<T> dx) override;
  /// Not training, or p = 0.
  bool passes_through(const Step& step) const override;
  /// The stored values dropped, the structure kept.
  Context<T> sparse_forward(const Step& step, Input<T> x) override;

  Buffer<T> sparse_values_; // dropped values of a sparse input
  SparseRows sparse_rows_;  // a sparse input's row offsets, when it runs in row blocks
};

/// ReLU followed by dropout, fused: one pass forward and one backward, and no mask redrawn in
/// backward (the output is positive exactly where the input was positive and kept). Draws the
/// same masks as Dropout with the same layer index. Dense input only; dropout only while
/// training.
template <typename T> class ReluDropout : public MaskedElementwise<T> {
public:
  /// Throws InvalidArgument unless 0 <= p < 1.
  ReluDropout(BackendPtr backend, float p, std::uint32_t layer_index);

private:
  /// y = max(x, 0) · mask / (1 − p).
  void forward_into(const Step& step, ConstDenseView<T> x, DenseView<T> y) override;
  /// dx = d_output where the output is positive, over 1 − p.
  void backward_into(const Context<T>& ctx, ConstDenseView<T> d_output, DenseView<T> dx) override;
};

/// y = max(x, 0): ReLU+Dropout with p = 0, so both share one pass and one backward.
template <typename T> class Relu final : public ReluDropout<T> {
public:
  /// A ReluDropout with p = 0 (no masks drawn).
  explicit Relu(BackendPtr backend) : ReluDropout<T>(std::move(backend), 0.0f, 0) {}
  /// "ReLU".
  std::string name() const override { return "ReLU"; }
};

/// The pointwise activations without a mask that PointwiseActivation computes.
enum class Pointwise {
  Elu, ///< x where x > 0, else exp(x) − 1 (α = 1: GAT's activation); backward from the output
  Gelu ///< x · Φ(x), the erf form (PyTorch's nn.GELU()); backward from the input
};

/// A pointwise activation (Elu, Gelu below), then dropout with probability p while training
/// (EluDropout), in row blocks under a budget like the masked ones. Fused, the pair holds one
/// output and one input gradient instead of two of each: the dropout's masks are redrawn in
/// backward, and ELU's derivative reads the dropped output scaled back by 1 − p (where an
/// element was dropped its gradient is zero whatever the derivative).
template <typename T> class PointwiseActivation : public MaskedElementwise<T> {
public:
  /// In place for ELU, whose backward reads its output (GELU's reads its input).
  bool has_forward_in_place() const override { return kind_ == Pointwise::Elu; }
  /// "ELU", "GELU", or with dropout "ELU+Dropout(p=...)".
  std::string name() const override;
  bool backward_reads_input() const override { return kind_ == Pointwise::Gelu; }
  bool backward_reads_output() const override { return kind_ == Pointwise::Elu; }

protected:
  /// Dropout after the activation with probability p (0: none), its masks keyed by layer_index
  /// as Dropout's. Throws InvalidArgument unless 0 <= p < 1.
  PointwiseActivation(BackendPtr backend, Pointwise kind, float p = 0.0f,
                      std::uint32_t layer_index = 0);

private:
  /// y = the activation of x, then the dropout.
  void forward_into(const Step& step, ConstDenseView<T> x, DenseView<T> y) override;
  /// dx = d_output through the dropout and the activation.
  void backward_into(const Context<T>& ctx, ConstDenseView<T> d_output, DenseView<T> dx) override;

  Pointwise kind_;
};

/// ELU (α = 1).
template <typename T> class Elu final : public PointwiseActivation<T> {
public:
  explicit Elu(BackendPtr backend) : PointwiseActivation<T>(std::move(backend), Pointwise::Elu) {}
};

/// ELU then dropout, fused (GAT's activation and the next layer's input dropout): the masks are
/// Dropout's with the same layer index, so it computes what Elu followed by Dropout does.
template <typename T> class EluDropout final : public PointwiseActivation<T> {
public:
  /// Throws InvalidArgument unless 0 <= p < 1.
  EluDropout(BackendPtr backend, float p, std::uint32_t layer_index)
      : PointwiseActivation<T>(std::move(backend), Pointwise::Elu, p, layer_index) {}
};

/// GELU (erf form).
template <typename T> class Gelu final : public PointwiseActivation<T> {
public:
  explicit Gelu(BackendPtr backend) : PointwiseActivation<T>(std::move(backend), Pointwise::Gelu) {}
};

/// Layer normalization (Ba et al.) of each row: y = (x − mean) / sqrt(var + eps) · γ + β, with γ
/// ([1, f], ones) and β ([1, f], zeros) learned, without weight decay. Each row on its own, so
/// it needs nothing from other rows or ranks.
template <typename T> class LayerNorm final : public Module<T> {
public:
  LayerNorm(BackendPtr backend, std::int64_t features, std::string name_prefix, T eps = T(1e-5));

  /// x: [n, f] dense → [n, f].
  Context<T> forward(const Step& step, Input<T> x) override;
  ConstDenseView<T> backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                             GradientMode input_mode, GradientMode param_mode) override;
  /// "LayerNorm(f)".
  std::string name() const override;
  std::size_t bytes() const override;
  bool backward_reads_input() const override { return false; }
  bool backward_reads_output() const override { return false; }

private:
  BackendPtr backend_;
  T eps_;
  Parameter<T> gamma_; // [1, f]
  Parameter<T> beta_;  // [1, f]
  Workspace<T> output_, normalized_, rstd_, d_input_, product_;
};

/// Batch normalization of each column over the rows of every rank (synchronized BatchNorm): the
/// statistics of a call are its input's, summed across the ranks of `comm`, so P ranks compute
/// what one process does. The input's first `counted_rows` rows are this rank's own; rows past
/// them (a graph tile's ghost copies of other ranks' rows) are normalized with the same
/// statistics but counted by their owners. Full-graph training normalizes the whole graph each
/// call, so evaluation uses the statistics of the graph it evaluates (no running averages: none
/// to keep in a checkpoint). γ (ones) and β (zeros) are learned, without weight decay.
template <typename T> class BatchNorm final : public Module<T> {
public:
  /// comm: nullptr for one process. counted_rows < 0: every row is this rank's.
  BatchNorm(BackendPtr backend, std::int64_t features, std::string name_prefix,
            comm::Communicator* comm = nullptr, std::int64_t counted_rows = -1, T eps = T(1e-5));

  /// x: [n, f] dense → [n, f]. Collective over comm.
  Context<T> forward(const Step& step, Input<T> x) override;
  /// Collective over comm.
  ConstDenseView<T> backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                             GradientMode input_mode, GradientMode param_mode) override;
  /// "BatchNorm(f)".
  std::string name() const override;
  std::size_t bytes() const override;
  bool backward_reads_input() const override { return false; }
  bool backward_reads_output() const override { return false; }

private:
  /// Column sums of a and a · b over the rows, summed over the ranks with the row count:
  /// {Σ a, Σ a·b, N} on the host in double.
  std::vector<double> global_sums(ConstDenseView<T> a, ConstDenseView<T> b, std::int64_t rows);
  /// Rows of an input of n rows that the statistics count.
  std::int64_t counted(std::int64_t n) const noexcept {
    return counted_rows_ < 0 ? n : std::min(n, counted_rows_);
  }

  BackendPtr backend_;
  comm::Communicator* comm_;
  std::int64_t counted_rows_;
  double counted_total_ = 0; // rows the last forward's statistics counted, every rank's
  T eps_;
  Parameter<T> gamma_; // [1, f]
  Parameter<T> beta_;  // [1, f]
  Workspace<T> output_, normalized_, d_input_;
  Workspace<T> sums_;  // [2, f]: column sums on the backend
  Workspace<T> stats_; // [4, f]: mean, rstd, and the backward's two means (or zeros)
};

/// The first `rows` rows of its input, unchanged (a view): a graph-free model on a tile whose
/// input also holds ghost rows keeps the owned ones. Backward gives the dropped rows a zero
/// gradient.
template <typename T> class FirstRows final : public Module<T> {
public:
  FirstRows(BackendPtr backend, std::int64_t rows);

  /// x: [n >= rows, f] dense or sparse → its first rows.
  Context<T> forward(const Step& step, Input<T> x) override;
  ConstDenseView<T> backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                             GradientMode input_mode, GradientMode param_mode) override;
  std::string name() const override { return "FirstRows(" + std::to_string(rows_) + ")"; }
  std::size_t bytes() const override { return d_input_.bytes(); }
  bool backward_reads_input() const override { return false; }
  bool backward_reads_output() const override { return false; }

private:
  BackendPtr backend_;
  std::int64_t rows_;
  Workspace<T> d_input_;
};

/// One logit z per row → the two classes' logits [0, z]: softmax cross-entropy over them is binary
/// cross-entropy on z (softmax([0, z])₁ = σ(z)), so a binary task trains one logit, as PyTorch's
/// BCEWithLogitsLoss does, with every loss, metric and prediction of two classes unchanged.
template <typename T> class BinaryLogit final : public Module<T> {
public:
  explicit BinaryLogit(BackendPtr backend);

  /// x: [n, 1] dense → [n, 2].
  Context<T> forward(const Step& step, Input<T> x) override;
  /// d_output: [n, 2] → its second column, [n, 1].
  ConstDenseView<T> backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                             GradientMode input_mode, GradientMode param_mode) override;
  std::string name() const override { return "BinaryLogit([0, z])"; }
  std::size_t bytes() const override {
    return output_.bytes() + d_input_.bytes() + selector_.bytes();
  }
  bool backward_reads_input() const override { return false; }
  bool backward_reads_output() const override { return false; }

private:
  /// [1, 2] = [0, 1]: y = x · selector, dx = dy · selectorᵀ.
  ConstDenseView<T> selector();

  BackendPtr backend_;
  Workspace<T> output_, d_input_, selector_;
  bool selector_ready_ = false;
};

template <typename T> class ResidualAdd;

/// Where a residual branch leaves the chain (a Sequential stays a chain): passes x on unchanged
/// and keeps it for the ResidualAdd that closes the branch, y = x + branch(x); in backward it
/// adds the gradient the skip carried to the branch's. Pair it with exactly one ResidualAdd,
/// made after it, with the branch's modules between them. The branch may end with fewer rows
/// than it began with (a graph layer that reads ghost rows and writes the owned ones): the skip
/// then adds to the first rows.
template <typename T> class ResidualStart final : public Module<T> {
public:
  explicit ResidualStart(BackendPtr backend);

  /// x: [n, f] dense; the output is x itself.
  Context<T> forward(const Step& step, Input<T> x) override;
  /// d_output: the branch's input gradient; returns it plus the skip's, [n, f].
  ConstDenseView<T> backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                             GradientMode input_mode, GradientMode param_mode) override;
  std::string name() const override { return "Residual"; }
  std::size_t bytes() const override { return d_input_.bytes(); }
  /// x must outlive the branch: Sequential keeps a module's input while its backward reads it.
  bool backward_reads_input() const override { return true; }
  bool backward_reads_output() const override { return false; }

  /// The x of the last forward (what ResidualAdd adds).
  ConstDenseView<T> saved() const noexcept { return saved_; }
  /// Set by the ResidualAdd that closes the branch.
  void close(const ResidualAdd<T>* add) noexcept { add_ = add; }

private:
  BackendPtr backend_;
  ConstDenseView<T> saved_;
  const ResidualAdd<T>* add_ = nullptr;
  Workspace<T> d_input_;
};

/// Closes the branch `start` opened: y = branch(x) + x. Its backward passes the gradient to the
/// branch and keeps a copy for `start` (the skip).
template <typename T> class ResidualAdd final : public Module<T> {
public:
  /// start: made before this module, outliving it.
  ResidualAdd(BackendPtr backend, ResidualStart<T>& start);

  /// x: the branch's output, [n, f] as start's input; output [n, f].
  Context<T> forward(const Step& step, Input<T> x) override;
  /// Returns d_output itself (the branch's gradient) after copying it for the skip.
  ConstDenseView<T> backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                             GradientMode input_mode, GradientMode param_mode) override;
  std::string name() const override { return "+ Residual"; }
  std::size_t bytes() const override { return output_.bytes() + skip_.bytes(); }
  bool backward_reads_input() const override { return false; }
  bool backward_reads_output() const override { return false; }

  /// The gradient the skip carries, as of the last backward.
  ConstDenseView<T> skip_gradient() const noexcept { return skip_view_; }

private:
  BackendPtr backend_;
  ResidualStart<T>* start_;
  Workspace<T> output_;
  Workspace<T> skip_;
  ConstDenseView<T> skip_view_;
};

} // namespace tessera
