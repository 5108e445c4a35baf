// GatConv forward and backward: z = x·W, per-node scores, the edge softmax and the weighted sum,
// with z's ghost rows from their owners and their gradients sent back.
#include "tessera/gnn/gat_conv.hpp"

#include "tessera/core/error.hpp"
#include "tessera/core/rng.hpp"
#include "tessera/engine/chunk_manager.hpp"
#include "tessera/engine/row_blocks.hpp"
#include "tessera/engine/weight_products.hpp"

#include <fmt/format.h>
#include <vector>

namespace tessera {

namespace {

comm::Pass pass_of(const Step& step) {
  return step.training ? comm::Pass::Training : comm::Pass::Evaluation;
}

/// Columns of a_src and a_dst: one head's features, or every head's with full scores.
std::int64_t score_width(const GatOptions& options, std::int64_t head_features) {
  return options.full_scores ? options.heads * head_features : head_features;
}

} // namespace

template <typename T>
GatConv<T>::GatConv(BackendPtr backend, const CsrT<T>& a, const CsrT<T>& a_t, const Offset* edge_of,
                    std::int64_t in_features, std::int64_t head_features, const GatOptions& options,
                    std::uint64_t seed, std::uint32_t layer_index)
    : backend_(std::move(backend)), a_(&a), a_t_(&a_t), edge_of_(edge_of), heads_(options.heads),
      head_features_(head_features), options_(options), layer_(layer_index),
      weight_(make_weight<T>(backend_, "gat" + std::to_string(layer_index) + ".weight", in_features,
                             options.heads * head_features, seed, 3 * layer_index)),
      att_src_(make_weight<T>(backend_, "gat" + std::to_string(layer_index) + ".att_src",
                              options.heads, score_width(options, head_features), seed,
                              3 * layer_index + 1)),
      att_dst_(make_weight<T>(backend_, "gat" + std::to_string(layer_index) + ".att_dst",
                              options.heads, score_width(options, head_features), seed,
                              3 * layer_index + 2)),
      bias_(make_bias<T>(backend_, "gat" + std::to_string(layer_index) + ".bias",
                         options.concat ? options.heads * head_features : head_features,
                         options.bias)),
      z_(backend_), src_block_(backend_), dst_block_(backend_), score_src_(backend_),
      score_dst_(backend_), alpha_(backend_), dropped_(backend_), heads_out_(backend_),
      output_(backend_), mean_(backend_), d_heads_(backend_), d_edge_(backend_),
      d_score_src_(backend_), d_score_dst_(backend_), d_z_(backend_), d_block_(backend_),
      d_input_(backend_), scratch_(backend_) {
  if (a.rows() > a.cols() || a_t.rows() != a.cols() || a_t.cols() != a.rows() ||
      a_t.nnz() != a.nnz() || (a.nnz() > 0 && edge_of == nullptr)) {
    throw DimensionMismatch("GATConv: attention structure " + a.shape() + " and its transpose " +
                            a_t.shape() + " (with its edge map) do not match");
  }
  if (options.heads < 1 || head_features < 1 || in_features < 1) {
    throw InvalidArgument(fmt::format("GATConv: {} heads of {} features from {} inputs: each must "
                                      "be at least 1",
                                      options.heads, head_features, in_features));
  }
  if (!(options.attention_dropout >= 0.0f && options.attention_dropout < 1.0f)) {
    throw InvalidArgument(fmt::format("GATConv: attention dropout must be in [0, 1), got {}",
                                      options.attention_dropout));
  }
  if (!(options.negative_slope >= 0.0f)) {
    throw InvalidArgument(
        fmt::format("GATConv: negative slope must be >= 0, got {}", options.negative_slope));
  }
  this->register_parameter(weight_);
  this->register_parameter(att_src_);
  this->register_parameter(att_dst_);
  this->register_parameter(bias_);
}

template <typename T>
GatConv<T>::GatConv(BackendPtr backend, const CsrT<T>& a, const CsrT<T>& a_t,
                    const Buffer<Offset>& edge_of, std::int64_t in_features,
                    std::int64_t head_features, const GatOptions& options, std::uint64_t seed,
                    std::uint32_t layer_index)
    : GatConv(std::move(backend), a, a_t, edge_of.data(), in_features, head_features, options, seed,
              layer_index) {
  edge_buffer_ = &edge_of;
}

template <typename T> std::int64_t GatConv<T>::out_features() const noexcept {
  return options_.concat ? heads_ * head_features_ : head_features_;
}

template <typename T> std::int64_t GatConv<T>::input_rows() const noexcept {
  return halo_ != nullptr ? a_->rows() : a_->cols();
}

template <typename T>
ConstDenseView<T> GatConv<T>::block_of(const Parameter<T>& attention, Workspace<T>& block,
                                       bool fill) {
  if (options_.full_scores) return attention.value.cview();
  const std::int64_t width = heads_ * head_features_;
  DenseView<T> b = block.get(heads_, width);
  if (!fill) return b;
  backend_->zero_bytes(b.data, static_cast<std::size_t>(b.size()) * sizeof(T));
  for (std::int64_t h = 0; h < heads_; ++h) {
    backend_->copy_within(b.data + h * width + h * head_features_,
                          attention.value.data() + h * head_features_,
                          static_cast<std::size_t>(head_features_) * sizeof(T));
  }
  return b;
}

template <typename T>
void GatConv<T>::gather_blocks(ConstDenseView<T> block_grad, Parameter<T>& attention,
                               GradientMode mode) {
  if (mode == GradientMode::Ignore) return;
  const std::int64_t width = heads_ * head_features_;
  if (options_.full_scores) {
    const auto all = static_cast<std::size_t>(heads_ * width);
    if (mode == GradientMode::Overwrite) {
      backend_->copy_within(attention.grad.data(), block_grad.data, all * sizeof(T));
    } else {
      ops::axpy(*backend_, T{1}, std::span<const T>(block_grad.data, all),
                std::span<T>(attention.grad.data(), all));
    }
    return;
  }
  for (std::int64_t h = 0; h < heads_; ++h) {
    const T* from = block_grad.data + h * width + h * head_features_;
    T* to = attention.grad.data() + h * head_features_;
    if (mode == GradientMode::Overwrite) {
      backend_->copy_within(to, from, static_cast<std::size_t>(head_features_) * sizeof(T));
    } else {
      ops::axpy(*backend_, T{1}, std::span<const T>(from, static_cast<std::size_t>(head_features_)),
                std::span<T>(to, static_cast<std::size_t>(head_features_)));
    }
  }
}

template <typename T> DenseView<T> GatConv<T>::mean_matrix() {
  const std::int64_t width = heads_ * head_features_;
  DenseView<T> m = mean_.get(width, head_features_);
  if (!mean_ready_) {
    std::vector<T> host(static_cast<std::size_t>(m.size()), T{0});
    for (std::int64_t h = 0; h < heads_; ++h) {
      for (std::int64_t f = 0; f < head_features_; ++f)
        host[static_cast<std::size_t>((h * head_features_ + f) * head_features_ + f)] =
            T{1} / static_cast<T>(heads_);
    }
    backend_->copy_from_host(m.data, host.data(), host.size() * sizeof(T));
    mean_ready_ = true;
  }
  return m;
}

template <typename T> void GatConv<T>::check_budget(const Input<T>& x) const {
  const ChunkManager* memory = manager_of(backend_);
  if (memory == nullptr) return;
  const auto n = static_cast<std::size_t>(a_->rows());
  const auto local = static_cast<std::size_t>(a_->cols());
  const auto width = static_cast<std::size_t>(heads_ * head_features_);
  const auto heads = static_cast<std::size_t>(heads_);
  const auto edges = static_cast<std::size_t>(a_->nnz());
  // What one call holds at once: both structures and the edge map, x and its gradient, z and
  // its gradient, the weighted sums and their gradient, the per-edge and per-node arrays.
  const std::size_t matrices =
      2 * (edges * (sizeof(LocalId) + sizeof(T)) + (n + local + 2) * sizeof(Offset)) +
      edges * sizeof(Offset);
  const std::size_t rows = 2 * static_cast<std::size_t>(x.rows() * x.cols()) * sizeof(T) +
                           (2 * local + 3 * n) * width * sizeof(T);
  const std::size_t per_edge = 3 * edges * heads * sizeof(T);
  const std::size_t per_node = 2 * (local + n) * heads * sizeof(T);
  const std::size_t total = matrices + rows + per_edge + per_node;
  if (exceeds_budget(*memory, total)) {
    throw InvalidArgument(fmt::format(
        "{} needs about {} of device memory at once (its graph's {} edges and {} rows), more "
        "than the memory budget of {} holds; raise the budget or train without one",
        name(), format_bytes(total), edges, local, format_bytes(memory->config().device_bytes)));
  }
}

template <typename T> Context<T> GatConv<T>::forward(const Step& step, Input<T> x) {
  const std::int64_t n = a_->rows(), local = a_->cols(), width = heads_ * head_features_;
  if (x.cols() != weight_.value.rows() || x.rows() != input_rows()) {
    throw DimensionMismatch(name() + ": input " + shape_string(x.rows(), x.cols()) + " should be " +
                            shape_string(input_rows(), weight_.value.rows()));
  }
  if (halo_ != nullptr && x.is_sparse()) {
    throw InvalidArgument(name() + ": a sparse input must come with its ghost rows");
  }
  check_budget(x);
  Pins pins(manager_of(backend_)); // the structures live in the matrices' chunks
  pins.add_csr(a_->view());
  pins.add(edge_of(), static_cast<std::size_t>(a_->nnz()) * sizeof(Offset), Access::Read);

  // z = x·W on the rows this rank holds; the ghost rows come from their owners.
  const DenseView<T> z = z_.get(local, width);
  multiply_weight(*backend_, x, weight_.value.cview(), z.slice_rows(0, x.rows()));
  const ConstDenseView<T> src_block = block_of(att_src_, src_block_, true);
  const ConstDenseView<T> dst_block = block_of(att_dst_, dst_block_, true);
  const DenseView<T> score_src = score_src_.get(local, heads_);
  const DenseView<T> score_dst = score_dst_.get(n, heads_);
  if (halo_ != nullptr) halo_->begin_gather(z, pass_of(step));
  // Scores of the owned rows while the ghost rows travel.
  ops::gemm(*backend_, Transpose::No, Transpose::Yes, T{1}, ConstDenseView<T>(z.slice_rows(0, n)),
            dst_block, T{0}, score_dst);
  ops::gemm(*backend_, Transpose::No, Transpose::Yes, T{1}, ConstDenseView<T>(z.slice_rows(0, n)),
            src_block, T{0}, score_src.slice_rows(0, n));
  if (halo_ != nullptr) halo_->end_gather();
  if (local > n) {
    ops::gemm(*backend_, Transpose::No, Transpose::Yes, T{1},
              ConstDenseView<T>(z.slice_rows(n, local)), src_block, T{0},
              score_src.slice_rows(n, local));
  }

  const T slope = static_cast<T>(options_.negative_slope);
  const DenseView<T> alpha = alpha_.get(a_->nnz(), heads_);
  ops::edge_softmax(*backend_, a_->view(), ConstDenseView<T>(score_dst),
                    ConstDenseView<T>(score_src), slope, alpha);
  ConstDenseView<T> weights(alpha);
  dropped_last_ = step.training && options_.attention_dropout > 0.0f;
  if (dropped_last_) {
    const DenseView<T> dropped = dropped_.get(a_->nnz(), heads_);
    ops::edge_dropout(*backend_, a_->view(), weights, options_.attention_dropout,
                      RngKey::make(step.seed, RngPurpose::AttentionDropout, layer_, step.epoch),
                      step.rows, dropped);
    weights = ConstDenseView<T>(dropped);
  }
  const DenseView<T> sums = heads_out_.get(n, width);
  ops::edge_spmm(*backend_, a_->view(), weights, ConstDenseView<T>(z), sums);
  DenseView<T> y = sums;
  if (!options_.concat) { // the mean of the heads: sums · [I; I; ...] / H
    y = output_.get(n, head_features_);
    ops::gemm(*backend_, Transpose::No, Transpose::No, T{1}, ConstDenseView<T>(sums),
              ConstDenseView<T>(mean_matrix()), T{0}, y);
  }
  add_bias(*backend_, y, bias_);
  return Context<T>{x, Input<T>(ConstDenseView<T>(y)), step};
}

template <typename T>
ConstDenseView<T> GatConv<T>::backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                                       GradientMode input_mode, GradientMode param_mode) {
  const std::int64_t n = a_->rows(), local = a_->cols(), width = heads_ * head_features_;
  const Input<T>& x = ctx.input;
  if (input_mode != GradientMode::Ignore && x.is_sparse()) {
    throw InvalidArgument(name() + ": no gradient for a sparse input");
  }
  Pins pins(manager_of(backend_));
  pins.add_csr(a_->view());
  pins.add_csr(a_t_->view());
  pins.add(edge_of(), static_cast<std::size_t>(a_->nnz()) * sizeof(Offset), Access::Read);
  bias_gradient(*backend_, d_output, bias_, param_mode);

  // The gradient at the weighted sums, every head's.
  ConstDenseView<T> d_sums = d_output;
  if (!options_.concat) {
    const DenseView<T> d_heads = d_heads_.get(n, width);
    ops::gemm(*backend_, Transpose::No, Transpose::Yes, T{1}, d_output,
              ConstDenseView<T>(mean_matrix()), T{0}, d_heads);
    d_sums = ConstDenseView<T>(d_heads);
  }
  const ConstDenseView<T> z(z_.get(local, width));
  const ConstDenseView<T> alpha(alpha_.get(a_->nnz(), heads_));
  const ConstDenseView<T> weights =
      dropped_last_ ? ConstDenseView<T>(dropped_.get(a_->nnz(), heads_)) : alpha;
  const ConstDenseView<T> score_src(score_src_.get(local, heads_));
  const ConstDenseView<T> score_dst(score_dst_.get(n, heads_));
  const DenseView<T> d_edge = d_edge_.get(a_->nnz(), heads_);
  const DenseView<T> d_score_dst = d_score_dst_.get(n, heads_);
  const DenseView<T> d_score_src = d_score_src_.get(local, heads_);
  const DenseView<T> d_z = d_z_.get(local, width);
  const T slope = static_cast<T>(options_.negative_slope);
  ops::edge_softmax_backward(*backend_, a_->view(), score_dst, score_src, slope, alpha, weights, z,
                             d_sums, d_score_dst, d_edge);
  ops::edge_spmm_transpose(*backend_, a_t_->view(), edge_of(), weights, d_sums,
                           ConstDenseView<T>(d_edge), d_z, d_score_src);

  // The scores' share: dz += d_s · block, and the attention vectors' gradients.
  const ConstDenseView<T> src_block = block_of(att_src_, src_block_, false);
  const ConstDenseView<T> dst_block = block_of(att_dst_, dst_block_, false);
  ops::gemm(*backend_, Transpose::No, Transpose::No, T{1}, ConstDenseView<T>(d_score_src),
            src_block, T{1}, d_z);
  ops::gemm(*backend_, Transpose::No, Transpose::No, T{1}, ConstDenseView<T>(d_score_dst),
            dst_block, T{1}, d_z.slice_rows(0, n));
  if (param_mode != GradientMode::Ignore) {
    const DenseView<T> d_block = d_block_.get(heads_, width);
    ops::gemm(*backend_, Transpose::Yes, Transpose::No, T{1}, ConstDenseView<T>(d_score_src), z,
              T{0}, d_block);
    gather_blocks(ConstDenseView<T>(d_block), att_src_, param_mode);
    ops::gemm(*backend_, Transpose::Yes, Transpose::No, T{1}, ConstDenseView<T>(d_score_dst),
              z.slice_rows(0, n), T{0}, d_block);
    gather_blocks(ConstDenseView<T>(d_block), att_dst_, param_mode);
  }

  // The ghost rows' gradients go to their owners, which add them to their own.
  if (halo_ != nullptr) {
    halo_->begin_scatter_add(d_z);
    halo_->end_scatter_add();
  }
  const ConstDenseView<T> d_xw(d_z.slice_rows(0, x.rows()));
  weight_gradient(*backend_, x, d_xw, weight_, param_mode, scratch_);
  if (input_mode == GradientMode::Ignore) return {};
  const DenseView<T> dx = d_input_.get(x.rows(), x.cols());
  const T beta = input_mode == GradientMode::Accumulate ? T{1} : T{0};
  ops::gemm(*backend_, Transpose::No, Transpose::Yes, T{1}, d_xw, weight_.value.cview(), beta, dx);
  return dx;
}

template <typename T> std::string GatConv<T>::name() const {
  return fmt::format("GATConv({} -> {}x{}, {}{})", weight_.value.rows(), heads_, head_features_,
                     options_.concat ? "concat" : "mean",
                     options_.full_scores ? ", full scores" : "");
}

template <typename T> std::size_t GatConv<T>::bytes() const {
  std::size_t total = 0;
  for (const Parameter<T>* p : {&weight_, &att_src_, &att_dst_, &bias_})
    total += p->value.bytes() + p->grad.bytes();
  for (const Workspace<T>* w :
       {&z_, &src_block_, &dst_block_, &score_src_, &score_dst_, &alpha_, &dropped_, &heads_out_,
        &output_, &mean_, &d_heads_, &d_edge_, &d_score_src_, &d_score_dst_, &d_z_, &d_block_,
        &d_input_, &scratch_})
    total += w->bytes();
  return total;
}

template class GatConv<float>;
template class GatConv<double>;

} // namespace tessera
