// Graph attention (Veličković et al., GAT): each node's new row is a softmax-weighted sum of its
// neighbours' (and its own) transformed rows, with one attention per head.
#pragma once

#include "tessera/comm/layer_exchange.hpp"
#include "tessera/engine/layers.hpp"
#include "tessera/engine/module.hpp"

#include <cstdint>
#include <string>

namespace tessera {

/// The settings of a GATConv beyond its widths.
struct GatOptions {
  std::int64_t heads = 1; ///< H, attention heads
  /// Concatenate the heads ([n, H·F] out) or average them ([n, F] out, the paper's last layer).
  bool concat = true;
  float negative_slope = 0.2f;    ///< LeakyReLU slope of the scores
  float attention_dropout = 0.0f; ///< dropout of the attention coefficients while training
  bool bias = true;               ///< adds a bias ([H·F] concatenated, [F] averaged)
  /// Each head's score reads every head's features (a_src, a_dst: [H, H·F], Platonov et al.'s
  /// GATModule) instead of its own (a_src, a_dst: [H, F], Veličković et al.).
  bool full_scores = false;
};

/// One GAT layer over the structure of A + I (ModelGraph's AggregationKind::Attention: a is
/// [n_owned, n_local], its transpose and the edge map; all must outlive the layer):
///   z = x·W ([·, H·F]);  s_dst[i, h] = z_i,h · a_dst[h],  s_src[j, h] = z_j,h · a_src[h]
///   (with full_scores: z_i · a_dst[h] and z_j · a_src[h], every head's features);
///   α[i→j, h] = softmax over i's edges of LeakyReLU(s_dst[i, h] + s_src[j, h]);
///   y_i,h = Σ_j α[i→j, h] · z_j,h, heads concatenated or averaged, plus the bias.
/// Transform-first, so a rank exchanges z's ghost rows (H·F wide) through its halo, like a
/// transform-first GcnConv, and computes every score and softmax of its own rows locally: P
/// ranks compute what one process does, and the exchange's modes (stale, compressed) apply as
/// they do to GCN. Attention dropout is keyed by the global ids of both ends of each edge.
/// Under a memory budget the layer runs whole (its working set must fit; InvalidArgument
/// otherwise, naming both).
template <typename T> class GatConv final : public Module<T> {
public:
  /// a: [n_owned, n_local] (values unread); a_t: its transpose ([n_local, n_owned]), whose edge
  /// q is a's edge edge_of[q] (edge_of in the matrices' memory). Weights are Glorot-drawn from
  /// (seed, 3·layer_index + {0, 1, 2}).
  GatConv(BackendPtr backend, const CsrT<T>& a, const CsrT<T>& a_t, const Offset* edge_of,
          std::int64_t in_features, std::int64_t head_features, const GatOptions& options,
          std::uint64_t seed, std::uint32_t layer_index);
  /// The same with the edge map read from `edge_of` at every call: matrices rebuilt in place (a
  /// mini-batch's blocks, ModelGraph::set_blocks) may bring a new one.
  GatConv(BackendPtr backend, const CsrT<T>& a, const CsrT<T>& a_t, const Buffer<Offset>& edge_of,
          std::int64_t in_features, std::int64_t head_features, const GatOptions& options,
          std::uint64_t seed, std::uint32_t layer_index);

  /// x: [input rows, in] dense or sparse (input rows: n_owned with a halo, n_local without) →
  /// [n_owned, H·F] (concat) or [n_owned, F].
  Context<T> forward(const Step& step, Input<T> x) override;
  /// d_output → d_input [input rows, in] (not for a sparse input); W, a_src, a_dst and the bias
  /// get their gradients.
  ConstDenseView<T> backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                             GradientMode input_mode, GradientMode param_mode) override;
  std::string name() const override;
  std::size_t bytes() const override;
  bool backward_reads_output() const override { return false; }

  /// Exchanges z's ghost rows through `halo` (outliving the layer; nullptr: the input holds its
  /// ghost rows). Every rank must do the same.
  void distribute(comm::LayerExchange<T>* halo) { halo_ = halo; }

  /// Width of the output: H·F (concat) or F.
  std::int64_t out_features() const noexcept;

private:
  /// Rows the input must have.
  std::int64_t input_rows() const noexcept;
  /// [H, H·F] with a's row h at columns [h·F, (h + 1)·F) and zeros elsewhere, so z · blockᵀ is
  /// every head's score at once: written into `block` when `fill` (the forward), as the forward
  /// left it otherwise; with full scores a itself, no copy.
  ConstDenseView<T> block_of(const Parameter<T>& attention, Workspace<T>& block, bool fill);
  /// grad (=|+=) the diagonal blocks of block_grad ([H, H·F]) per mode (all of it with full
  /// scores).
  void gather_blocks(ConstDenseView<T> block_grad, Parameter<T>& attention, GradientMode mode);
  /// [H·F, F]: H identities stacked, over H (the average of the heads), made at the first call.
  DenseView<T> mean_matrix();
  /// Throws InvalidArgument when the layer's working set exceeds the memory budget.
  void check_budget(const Input<T>& x) const;

  BackendPtr backend_;
  const CsrT<T>* a_;
  const CsrT<T>* a_t_;
  const Offset* edge_of_;
  const Buffer<Offset>* edge_buffer_ = nullptr; // when given: edge_of_ is read from it
  const Offset* edge_of() const noexcept {
    return edge_buffer_ != nullptr ? edge_buffer_->data() : edge_of_;
  }
  std::int64_t heads_, head_features_;
  GatOptions options_;
  std::uint32_t layer_;
  comm::LayerExchange<T>* halo_ = nullptr;
  Parameter<T> weight_;       // [in, H·F]
  Parameter<T> att_src_;      // [H, F]
  Parameter<T> att_dst_;      // [H, F]
  Parameter<T> bias_;         // [1, out] or empty
  Workspace<T> z_;            // [n_local, H·F] = x·W, ghost rows from their owners
  Workspace<T> src_block_;    // [H, H·F] (block_of)
  Workspace<T> dst_block_;    // [H, H·F]
  Workspace<T> score_src_;    // [n_local, H]
  Workspace<T> score_dst_;    // [n_owned, H]
  Workspace<T> alpha_;        // [nnz, H]: the attention
  Workspace<T> dropped_;      // [nnz, H]: the attention after dropout (training with dropout)
  Workspace<T> heads_out_;    // [n_owned, H·F]: the weighted sums (the output when concat)
  Workspace<T> output_;       // [n_owned, F] (averaged heads)
  Workspace<T> mean_;         // [H·F, F]: stacked identities / H (averaged heads)
  Workspace<T> d_heads_;      // [n_owned, H·F] (averaged heads)
  Workspace<T> d_edge_;       // [nnz, H]
  Workspace<T> d_score_src_;  // [n_local, H]
  Workspace<T> d_score_dst_;  // [n_owned, H]
  Workspace<T> d_z_;          // [n_local, H·F]
  Workspace<T> d_block_;      // [H, H·F]
  Workspace<T> d_input_;      // [input rows, in]
  Workspace<T> scratch_;      // weight-gradient scratch for sparse inputs
  bool dropped_last_ = false; // whether the last forward dropped attention
  bool mean_ready_ = false;   // whether mean_ holds the mean matrix
};

} // namespace tessera
