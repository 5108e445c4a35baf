// y = S · x over one rank's rows of a sparse aggregation matrix S, with the ghost rows of x
// brought by a halo exchange: the piece that makes a graph layer run distributed.
#pragma once

#include "tessera/comm/layer_exchange.hpp"
#include "tessera/engine/chunk_manager.hpp"
#include "tessera/engine/layers.hpp"
#include "tessera/gnn/halo_blocks.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tessera {

/// How a layer stores the activations it aggregates (the dense operand of S · x): float32, or
/// bfloat16 (half the bytes gathered; rounded to nearest, summed in float32). Gradients stay
/// float32.
enum class ActivationDType { Fp32, Bf16 };

/// "fp32" or "bf16".
std::string to_string(ActivationDType dtype);
/// The dtype named `text` (fp32, bf16); InvalidArgument naming the valid ones otherwise.
ActivationDType parse_activation_dtype(const std::string& text);

/// Sparse aggregation of a layer's input over a fixed matrix S and its transpose (both must
/// outlive the object), forward and backward, on one process or on one rank's tile.
///
/// On a tile S is [n_owned, n_local]: the rank's rows, columns in owned-then-ghost numbering
/// (graph::gcn_normalize_tile, graph::mean_aggregation, graph::sum_aggregation of the tile's
/// adjacency). Without a halo the input is [n_local, f] and already holds its ghost rows (one
/// process, where n_owned = n_local, or cached input features). With a halo (distribute()) the
/// input is the owned rows [n_owned, f]: forward gathers the ghost rows from their owners while
/// the interior rows aggregate; backward scatter-adds the ghost rows of Sᵀ·dy to their owners and
/// adds what the other ranks send for the owned rows. A layer built on it runs distributed
/// without knowing about ranks or the exchange's mode (a training step may get last epoch's
/// rows, an evaluation always gets exact ones); every rank must give the same layers a halo.
template <typename T> class Aggregation {
public:
  /// s: [n_owned, n_local]; s_t: sᵀ, [n_local, n_owned] (s itself when s is symmetric).
  Aggregation(BackendPtr backend, const CsrT<T>& s, const CsrT<T>& s_t);

  /// Exchanges the ghost rows through `halo` (outliving this object; nullptr: no exchange).
  /// The rows [0, n_interior) of S read no ghost row (partition::order_interior_first).
  void distribute(comm::LayerExchange<T>* halo, std::int64_t n_interior);
  /// Stores the input of forward() and forward_local() in `dtype` before multiplying (Bf16:
  /// float inputs only, and not in a chunk manager's memory; InvalidArgument otherwise). Every
  /// row is rounded on its own, so P ranks compute what one process does.
  void set_input_dtype(ActivationDType dtype);
  ActivationDType input_dtype() const noexcept { return input_dtype_; }
  /// Applies dropout (probability p in [0, 1), masks keyed as a Dropout module's of layer index
  /// `dropout_layer`) to the input of forward() while training, as that module before the layer
  /// would, in the pass that stores the input for the product: with Bf16 the rounding, with a
  /// halo the copy of the owned rows that are sent. Not in a chunk manager's memory
  /// (InvalidArgument). The input gradient is the caller's to mask (ops::dropout_backward).
  void set_input_dropout(float p, std::uint32_t dropout_layer);
  /// The input dropout's probability (0: none) and the layer index its masks are keyed by.
  float input_dropout() const noexcept { return input_dropout_; }
  std::uint32_t input_dropout_layer() const noexcept { return input_dropout_layer_; }
  /// The exchange given to distribute() (nullptr when none).
  const comm::LayerExchange<T>* halo() const noexcept { return halo_; }

  std::int64_t rows() const noexcept { return s_->rows(); }       ///< n_owned
  std::int64_t local_rows() const noexcept { return s_->cols(); } ///< n_local
  /// Rows the input has: n_owned with a halo, n_local without.
  std::int64_t input_rows() const noexcept { return halo_ != nullptr ? rows() : local_rows(); }

  /// For a layer built on this aggregation: throws DimensionMismatch naming `layer` unless x is
  /// [input_rows(), width], and InvalidArgument when x is sparse but must be exchanged.
  void check_layer_input(const std::string& layer, Input<T> x, std::int64_t width) const;

  /// y = S · x. x: [input_rows(), f], y: [rows(), f]. The step says whether it trains (the
  /// exchange may then deliver rows as its mode does) or evaluates (exact rows).
  void forward(const Step& step, ConstDenseView<T> x, DenseView<T> y);
  /// Rows [begin, end) of S · x into y ([end - begin, f]) as forward() makes them when it
  /// evaluates, for a caller that goes on with each block of rows (evaluation without keeping
  /// S · x whole). Only without a halo and with float inputs (rows_alone()).
  void forward_rows(ConstDenseView<T> x, std::int64_t begin, std::int64_t end, DenseView<T> y);
  /// Whether forward_rows() may be called: no halo, inputs multiplied as they are (not bf16).
  bool rows_alone() const noexcept {
    return halo_ == nullptr && input_dtype_ == ActivationDType::Fp32;
  }
  /// The [local_rows(), f] buffer forward_local() reads: write its first input_rows() rows.
  DenseView<T> local_input(std::int64_t f) { return local_.get(local_rows(), f); }
  /// y = S · x where x = local_input(f), its first input_rows() rows written by the caller (no
  /// copy, for a caller that computes x itself, e.g. x·W). y: [rows(), f].
  void forward_local(const Step& step, std::int64_t f, DenseView<T> y);

  /// dx = Sᵀ · dy. dy: [rows(), f]; returns dx: [input_rows(), f] (in a buffer of this object,
  /// valid until the next backward). With a halo the owned rows include the other ranks' terms.
  DenseView<T> backward(ConstDenseView<T> dy);

  /// Under a memory budget: forward(), forward_local() and backward() over 2-D tiles of S —
  /// row blocks of y by row blocks of x, each tile's rows of y, rows of x and entries of S
  /// acquired while it multiplies — so the working set is a few blocks whatever the sizes.
  /// With a halo, the rows exchanged are packed and unpacked block by block too (HaloInBlocks)
  /// and the exchange does not overlap the product. The partial products are summed in another
  /// order than forward()'s (within rounding of it). The tiles are made at the first call
  /// (column tiles of S and Sᵀ in the manager's matrix chunks).
  void forward_tiled(const Step& step, ConstDenseView<T> x, DenseView<T> y);
  void forward_local_tiled(const Step& step, std::int64_t f, DenseView<T> y);
  DenseView<T> backward_tiled(ConstDenseView<T> dy);
  /// Bytes of S and, when it is stored apart, Sᵀ.
  std::size_t matrix_bytes() const noexcept;

  /// Bytes of the reusable buffers (with the row-block exchange's, outside any chunks).
  std::size_t bytes() const noexcept {
    return local_.bytes() + d_local_.bytes() + input_bf16_.bytes() +
           (halo_in_blocks_ != nullptr ? halo_in_blocks_->bytes() : 0);
  }

private:
  /// Rows per block of the output, and columns per tile (rows per block of the input).
  struct TileShape {
    std::int64_t rows = 0, cols = 0;
  };
  /// A matrix cut into column tiles of shape.cols columns, and where each row block of
  /// shape.rows rows starts in each tile (so a 2-D tile's entries can be acquired alone).
  struct Tiles {
    TileShape shape;
    std::vector<CsrT<T>> columns; // [column tile]: S's shape, global column ids
    std::vector<Offset> starts;   // [column tile][row block + 1], host memory
  };
  const Tiles& tiles(const CsrT<T>& s, Tiles& cache, TileShape shape);
  /// The tiles' shape for products `width` wide.
  TileShape tile_shape(std::int64_t width) const;
  /// The exchange in row blocks over halo_ (made at the first call).
  HaloInBlocks<T>& halo_in_blocks();
  /// y = s · x over `t`.
  void multiply_tiled(const Tiles& t, ConstDenseView<T> x, DenseView<T> y);
  /// With input_dtype() Bf16, rows [begin, end) of x rounded into input_bf16_ (as [x.rows, f]),
  /// after dropout(p) with `key` over rows (global ids of x's rows) when p > 0; nothing
  /// otherwise.
  void round_rows(ConstDenseView<T> x, std::int64_t begin, std::int64_t end, float p = 0.0f,
                  const RngKey& key = {}, RowIds rows = {});
  /// y = s · x (s may be a row slice of S): from x's bfloat16 copy when input_dtype() is Bf16
  /// (round_rows() must have rounded the rows s reads).
  void multiply(CsrView<T> s, ConstDenseView<T> x, DenseView<T> y);

  BackendPtr backend_;
  const CsrT<T>* s_;
  const CsrT<T>* s_t_;
  Tiles tiles_, tiles_t_;
  comm::LayerExchange<T>* halo_ = nullptr;
  std::int64_t n_interior_ = 0;
  std::unique_ptr<HaloInBlocks<T>> halo_in_blocks_;
  Workspace<T> local_;   // [n_local, f]: the input with its ghost rows
  Workspace<T> d_local_; // [n_local, f]: Sᵀ · dy
  ActivationDType input_dtype_ = ActivationDType::Fp32;
  float input_dropout_ = 0.0f;
  std::uint32_t input_dropout_layer_ = 0;
  Workspace<Bf16> input_bf16_; // [n_local, f]: the input in bfloat16 (input_dtype_ Bf16)
};

/// y = S · x · W for a weight the caller owns, in the order that multiplies (and, distributed,
/// exchanges) the narrower matrix: S · (x·W) transform-first, (S · x) · W otherwise. GcnConv is
/// this plus a bias; SageConv's neighbour term is this.
template <typename T> class AggregateTransform {
public:
  /// s, s_t: as for Aggregation. transform_first: compute x·W before aggregating (required for
  /// a sparse input).
  AggregateTransform(BackendPtr backend, const CsrT<T>& s, const CsrT<T>& s_t,
                     bool transform_first);

  Aggregation<T>& aggregation() noexcept { return aggregation_; }
  const Aggregation<T>& aggregation() const noexcept { return aggregation_; }
  bool transforms_first() const noexcept { return transform_first_; }

  /// A pass over rows [begin, end) of y that the product has just written (a layer's bias and
  /// activation), run in place.
  using RowEpilogue = std::function<void(std::int64_t begin, std::int64_t end)>;

  /// y = S·x·W, then `epilogue` (when given) over every row of y. x:
  /// [aggregation().input_rows(), in], dense or (transform-first) sparse; w: [in, out];
  /// y: [aggregation().rows(), out], overwritten. `layer` names errors. `blocks` (a budgeted
  /// manager): the products run over row blocks and tiles of S, each piece acquired while it
  /// computes (Aggregation::forward_tiled). Aggregate-first on a CPU, the last product runs in
  /// cache-sized row blocks, each followed by the epilogue while its rows are still in cache.
  void forward(const Step& step, const std::string& layer, Input<T> x, ConstDenseView<T> w,
               DenseView<T> y, ChunkManager* blocks = nullptr, const RowEpilogue& epilogue = {});
  /// From dy: [rows, out] and the forward's x: w.grad per param_mode; returns dx: [input rows,
  /// in] per input_mode (empty for Ignore), in a buffer of this object. Accumulate adds to
  /// that buffer's previous contents (transform-first only); a sparse x has no gradient.
  DenseView<T> backward(const std::string& layer, Input<T> x, ConstDenseView<T> dy, Parameter<T>& w,
                        GradientMode input_mode, GradientMode param_mode,
                        ChunkManager* blocks = nullptr);

  /// Rows [begin, end) of the gradient at y, made when asked (a layer's activation backward) into
  /// a buffer that stays valid until the next call.
  using RowGradient = std::function<ConstDenseView<T>(std::int64_t begin, std::int64_t end)>;

  /// backward() of an aggregate-first product (InvalidArgument otherwise) without a memory
  /// budget, the gradient at y asked for block by block (on a CPU blocks of about 2 MiB, so it
  /// is never whole in memory), each block's share of dW and d(S·x) computed while it is in
  /// cache. Returns dx as backward() does.
  DenseView<T> backward_from_blocks(const std::string& layer, const RowGradient& dy_rows,
                                    Parameter<T>& w, GradientMode input_mode,
                                    GradientMode param_mode);

  /// Bytes of the reusable buffers.
  std::size_t bytes() const noexcept {
    return aggregation_.bytes() + mid_.bytes() + d_mid_.bytes() + d_input_.bytes() +
           scratch_.bytes();
  }
  /// What acquiring the product whole takes for x ([input rows, in]) and an output `out` wide
  /// (x in `memory`'s chunks): S (and Sᵀ), the input and its gradient (a sparse input has none:
  /// its offsets, columns and values), the output or its gradient, and the product in between
  /// with its gradient (x·W and Sᵀ·dy at the output's width transform-first; S·x and dy·Wᵀ at
  /// the input's width aggregate-first, and distributed the input with its ghost rows). What a
  /// layer built on it adds its own buffers and parameters to, to decide whether it runs in
  /// row blocks (Module::acquires_own_memory).
  std::size_t working_set_bytes(const ChunkManager& memory, const Input<T>& x,
                                std::int64_t out) const;

private:
  DenseView<T> backward_in_blocks(Input<T> x, ConstDenseView<T> dy, Parameter<T>& w,
                                  GradientMode input_mode, GradientMode param_mode,
                                  ChunkManager& blocks);
  /// The aggregate-first backward over row blocks of dy (from dy_rows): under `blocks` (dy's rows
  /// acquired through dy_tensor) or, without, cache-sized blocks on a CPU and one elsewhere.
  DenseView<T> backward_aggregate_first_in_blocks(const RowGradient& dy_rows,
                                                  const RowTensor& dy_tensor, Parameter<T>& w,
                                                  GradientMode input_mode, GradientMode param_mode,
                                                  ChunkManager* blocks);

  BackendPtr backend_;
  Aggregation<T> aggregation_;
  bool transform_first_;
  Workspace<T> mid_;       // [rows, in] = S·x (aggregate first)
  Workspace<T> d_mid_;     // [rows, in]: its gradient dy·Wᵀ
  Workspace<T> d_input_;   // [input rows, in] (transform first)
  Workspace<T> scratch_;   // [in, out]: dW of a sparse x when accumulating
  SparseRows sparse_rows_; // a sparse x's row offsets, when the products run in row blocks
};

} // namespace tessera
