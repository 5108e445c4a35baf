// Aggregation: S · x and Sᵀ · dy with the halo exchange overlapped with the rows that need none.
#include "tessera/gnn/aggregation.hpp"

#include "tessera/core/error.hpp"
#include "tessera/engine/chunk_manager.hpp"
#include "tessera/engine/row_blocks.hpp"
#include "tessera/engine/weight_products.hpp"
#include "tessera/graph/graph.hpp"

#include <algorithm>
#include <type_traits>
#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace tessera {

std::string to_string(ActivationDType dtype) {
  return dtype == ActivationDType::Bf16 ? "bf16" : "fp32";
}

ActivationDType parse_activation_dtype(const std::string& text) {
  for (const ActivationDType dtype : {ActivationDType::Fp32, ActivationDType::Bf16}) {
    if (text == to_string(dtype)) return dtype;
  }
  throw InvalidArgument("unknown activation dtype '" + text + "'; valid: fp32, bf16");
}

template <typename T>
Aggregation<T>::Aggregation(BackendPtr backend, const CsrT<T>& s, const CsrT<T>& s_t)
    : backend_(std::move(backend)), s_(&s), s_t_(&s_t), local_(backend_), d_local_(backend_),
      input_bf16_(backend_) {
  if (s.rows() > s.cols() || s_t.rows() != s.cols() || s_t.cols() != s.rows()) {
    throw DimensionMismatch("aggregation matrix " + s.shape() + " and its transpose " +
                            s_t.shape() + " do not match (S must be [n_owned, n_local])");
  }
}

template <typename T>
void Aggregation<T>::distribute(comm::LayerExchange<T>* halo, std::int64_t n_interior) {
  if (halo != nullptr &&
      (halo->plan().n_owned() != rows() || halo->plan().n_local() != local_rows() ||
       n_interior < 0 || n_interior > rows())) {
    throw DimensionMismatch("the halo plan (" + std::to_string(halo->plan().n_owned()) +
                            " owned, " + std::to_string(halo->plan().n_local()) +
                            " local rows) does not fit aggregation matrix " + s_->shape() +
                            " with " + std::to_string(n_interior) + " interior rows");
  }
  halo_ = halo;
  n_interior_ = halo != nullptr ? n_interior : 0;
}

namespace {

/// Refuses `what` for an aggregation whose memory is a budget's chunks: the buffers it adds are
/// not among what the chunk manager acquires.
void refuse_under_budget(const BackendPtr& backend, const std::string& what) {
  if (manager_of(backend) != nullptr) {
    throw InvalidArgument(what + " cannot run under a memory budget (the chunk engine's) yet: "
                                 "train without a budget to use it");
  }
}

} // namespace

template <typename T> void Aggregation<T>::set_input_dtype(ActivationDType dtype) {
  if (dtype == ActivationDType::Bf16) {
    if (!std::is_same_v<T, float>) throw InvalidArgument("bf16 activations need a float32 model");
    refuse_under_budget(backend_, "bf16 activations");
  }
  input_dtype_ = dtype;
}

template <typename T> void Aggregation<T>::set_input_dropout(float p, std::uint32_t dropout_layer) {
  if (!(p >= 0.0f && p < 1.0f)) {
    throw InvalidArgument("aggregation input dropout: probability must be in [0, 1), got " +
                          std::to_string(p));
  }
  if (p > 0.0f) refuse_under_budget(backend_, "dropout fused into a layer's input");
  input_dropout_ = p;
  input_dropout_layer_ = dropout_layer;
}

template <typename T>
void Aggregation<T>::round_rows(ConstDenseView<T> x, std::int64_t begin, std::int64_t end, float p,
                                const RngKey& key, RowIds rows) {
  if constexpr (std::is_same_v<T, float>) {
    if (input_dtype_ != ActivationDType::Bf16) return;
    ops::dropout_to_bf16(*backend_, x.slice_rows(begin, end),
                         input_bf16_.get(x.rows, x.cols).slice_rows(begin, end), p, key,
                         rows_from(rows, begin));
  }
}

template <typename T>
void Aggregation<T>::multiply(CsrView<T> s, ConstDenseView<T> x, DenseView<T> y) {
  if constexpr (std::is_same_v<T, float>) {
    if (input_dtype_ == ActivationDType::Bf16) {
      ops::spmm_bf16(*backend_, s, ConstDenseView<Bf16>(input_bf16_.get(x.rows, x.cols)), y);
      return;
    }
  }
  ops::spmm(*backend_, s, x, y);
}

template <typename T>
void Aggregation<T>::check_layer_input(const std::string& layer, Input<T> x,
                                       std::int64_t width) const {
  if (x.cols() != width || x.rows() != input_rows()) {
    throw DimensionMismatch(layer + ": input " + shape_string(x.rows(), x.cols()) + " should be " +
                            shape_string(input_rows(), width));
  }
  if (halo_ != nullptr && x.is_sparse()) {
    throw InvalidArgument(layer + ": a sparse input must come with its ghost rows");
  }
}

namespace {

comm::Pass pass_of(const Step& step) {
  return step.training ? comm::Pass::Training : comm::Pass::Evaluation;
}

/// multiply(r, e) for the rows [0, rows) while `halo`'s messages are in flight. On the CPU in
/// slices of rows, the messages moved on between them: Open MPI progresses messages only inside
/// MPI calls, and a large one stalls (its fragments wait for both sides) while a rank multiplies
/// without calling it. A device's kernels are queued at once: the host polls right after anyway.
template <typename T, typename Multiply>
void multiply_while_exchanging(const Backend& backend, std::int64_t rows,
                               comm::LayerExchange<T>& halo, const Multiply& multiply) {
  constexpr std::int64_t kSlices = 16;
  const std::int64_t step = backend.kind() == DeviceKind::Cpu
                                ? std::max<std::int64_t>(1, (rows + kSlices - 1) / kSlices)
                                : std::max<std::int64_t>(1, rows);
  for (std::int64_t r = 0; r < rows; r += step) {
    multiply(r, std::min(rows, r + step));
    halo.progress();
  }
}

} // namespace

template <typename T>
void Aggregation<T>::forward(const Step& step, ConstDenseView<T> x, DenseView<T> y) {
  check_layer_input("aggregation over " + s_->shape(), Input<T>(x), x.cols);
  const float p = step.training ? input_dropout_ : 0.0f;
  const RngKey key = RngKey::make(step.seed, RngPurpose::Dropout, input_dropout_layer_, step.epoch);
  if (halo_ == nullptr) {
    Pins pins(manager_of(backend_));
    pins.add_csr(s_->view());
    if (input_dtype_ == ActivationDType::Bf16) { // dropout and rounding in one pass
      round_rows(x, 0, x.rows, p, key, step.rows);
      multiply(s_->view(), x, y);
      return;
    }
    if (p > 0.0f) {
      const DenseView<T> dropped = local_input(x.cols);
      ops::dropout_forward(*backend_, x, dropped, p, key, step.rows);
      x = ConstDenseView<T>(dropped);
    }
    multiply(s_->view(), x, y);
    return;
  }
  // The owned rows the others receive as ghosts, dropped here as a Dropout module would.
  ops::dropout_forward(*backend_, x, local_input(x.cols).slice_rows(0, rows()), p, key, step.rows);
  forward_local(step, x.cols, y);
}

template <typename T>
void Aggregation<T>::forward_rows(ConstDenseView<T> x, std::int64_t begin, std::int64_t end,
                                  DenseView<T> y) {
  if (!rows_alone()) {
    throw InvalidArgument("aggregation over " + s_->shape() +
                          ": rows alone only without a halo and with float inputs");
  }
  check_layer_input("aggregation over " + s_->shape(), Input<T>(x), x.cols);
  if (begin < 0 || end > rows() || begin > end || y.rows != end - begin || y.cols != x.cols) {
    throw DimensionMismatch("aggregation over " + s_->shape() + ": rows [" + std::to_string(begin) +
                            ", " + std::to_string(end) + ") into " + shape_string(y.rows, y.cols));
  }
  Pins pins(manager_of(backend_));
  pins.add_csr(s_->view());
  multiply(s_->view().row_slice(begin, end), x, y);
}

template <typename T>
void Aggregation<T>::forward_local(const Step& step, std::int64_t f, DenseView<T> y) {
  const DenseView<T> x = local_input(f);
  // Under a memory budget the matrix is in chunks: on the device only while it multiplies.
  Pins pins(manager_of(backend_));
  pins.add_csr(s_->view());
  if (halo_ == nullptr) {
    round_rows(ConstDenseView<T>(x), 0, x.rows);
    multiply(s_->view(), ConstDenseView<T>(x), y);
    discard(backend_, x); // read by nothing else
    return;
  }
  // The interior rows read owned rows only: they aggregate while the ghost rows travel.
  halo_->begin_gather(x, pass_of(step));
  const CsrView<T> s = s_->view();
  round_rows(ConstDenseView<T>(x), 0, rows());
  multiply_while_exchanging(*backend_, n_interior_, *halo_, [&](std::int64_t b, std::int64_t e) {
    multiply(s.row_slice(b, e), ConstDenseView<T>(x), y.slice_rows(b, e));
  });
  halo_->end_gather();
  round_rows(ConstDenseView<T>(x), rows(), local_rows());
  multiply(s.row_slice(n_interior_, rows()), ConstDenseView<T>(x),
           y.slice_rows(n_interior_, rows()));
  discard(backend_, x); // read by nothing else
}

template <typename T> DenseView<T> Aggregation<T>::backward(ConstDenseView<T> dy) {
  if (dy.rows != rows()) {
    throw DimensionMismatch("aggregation over " + s_->shape() + ": gradient " +
                            shape_string(dy.rows, dy.cols) + " should have " +
                            std::to_string(rows()) + " rows");
  }
  DenseView<T> dx = d_local_.get(local_rows(), dy.cols);
  Pins pins(manager_of(backend_));
  pins.add_csr(s_t_->view());
  if (halo_ == nullptr) {
    ops::spmm(*backend_, s_t_->view(), dy, dx);
    return dx;
  }
  // Ghost rows first, so their scatter-add to the owners runs while the owned rows compute;
  // the owners' contributions for this rank's rows are added at wait().
  const CsrView<T> s_t = s_t_->view();
  ops::spmm(*backend_, s_t.row_slice(rows(), local_rows()), dy,
            dx.slice_rows(rows(), local_rows()));
  halo_->begin_scatter_add(dx);
  multiply_while_exchanging(*backend_, rows(), *halo_, [&](std::int64_t b, std::int64_t e) {
    ops::spmm(*backend_, s_t.row_slice(b, e), dy, dx.slice_rows(b, e));
  });
  halo_->end_scatter_add();
  return dx.slice_rows(0, rows());
}

template <typename T> std::size_t Aggregation<T>::matrix_bytes() const noexcept {
  return s_->bytes() + (s_t_ != s_ ? s_t_->bytes() : 0);
}

namespace {

/// Rows [begin, end) of s (in any memory, read through its backend) as a CSR on the host.
template <typename T>
CsrT<T> host_rows(const CsrT<T>& s, std::int64_t begin, std::int64_t end, const BackendPtr& host) {
  const Backend& from = *s.backend();
  std::vector<Offset> offsets(static_cast<std::size_t>(end - begin + 1));
  from.copy_to_host(offsets.data(), s.row_ptr() + begin, offsets.size() * sizeof(Offset));
  const Offset first = offsets.front();
  CsrT<T> rows(host, end - begin, s.cols(), offsets.back() - first);
  for (std::size_t r = 0; r < offsets.size(); ++r)
    rows.row_ptr()[r] = offsets[r] - first;
  from.copy_to_host(rows.col(), s.col() + first,
                    static_cast<std::size_t>(rows.nnz()) * sizeof(LocalId));
  from.copy_to_host(rows.val(), s.val() + first, static_cast<std::size_t>(rows.nnz()) * sizeof(T));
  return rows;
}

} // namespace

template <typename T>
const typename Aggregation<T>::Tiles& Aggregation<T>::tiles(const CsrT<T>& s, Tiles& cache,
                                                            TileShape shape) {
  if (cache.shape.rows == shape.rows && cache.shape.cols == shape.cols) return cache;
  ChunkManager* memory = manager_of(backend_);
  // The tiles live apart from any module's working set: acquired only tile by tile.
  AllocationScope outside(memory, nullptr);
  cache = Tiles{};
  std::vector<std::int64_t> bounds{0};
  for (std::int64_t c = shape.cols; c < s.cols(); c += shape.cols)
    bounds.push_back(c);
  bounds.push_back(s.cols());
  const std::size_t columns = bounds.size() - 1;
  const std::int64_t row_blocks = (s.rows() + shape.rows - 1) / shape.rows;
  // S is read in blocks of rows holding about a chunk of entries, twice: to count each column
  // tile's entries per row, then to fill the tiles. The host holds one block and its piece of
  // one tile, and the tiles' row offsets: never S or a whole tile. (A thread count given to
  // make_cpu_backend would set OpenMP's for the whole process.)
  const BackendPtr host = make_cpu_backend();
  const std::size_t chunk =
      memory != nullptr ? memory->config().chunk_bytes : OffloadConfig{}.chunk_bytes;
  const std::size_t row_bytes =
      s.bytes() / static_cast<std::size_t>(std::max<std::int64_t>(s.rows(), 1));
  const std::int64_t staged = std::clamp<std::int64_t>(
      static_cast<std::int64_t>(chunk / std::max<std::size_t>(row_bytes, 1)), 1,
      std::max<std::int64_t>(s.rows(), 1));
  const auto for_each_block = [&](const auto& f) {
    for (std::int64_t r0 = 0; r0 < s.rows(); r0 += staged) {
      const std::int64_t r1 = std::min(s.rows(), r0 + staged);
      const CsrT<T> block = host_rows(s, r0, r1, host);
      for (std::size_t j = 0; j < columns; ++j)
        f(r0, j, graph::column_tile(block, std::span<const std::int64_t>(bounds), j));
    }
  };
  std::vector<std::vector<Offset>> offsets(columns, std::vector<Offset>{0});
  for (std::vector<Offset>& o : offsets)
    o.reserve(static_cast<std::size_t>(s.rows()) + 1);
  for_each_block([&](std::int64_t, std::size_t j, const CsrT<T>& piece) {
    for (std::int64_t r = 0; r < piece.rows(); ++r)
      offsets[j].push_back(offsets[j].back() + piece.row_ptr()[r + 1] - piece.row_ptr()[r]);
  });
  const BackendPtr matrices = memory_for(backend_, TensorKind::Matrix);
  for (std::size_t j = 0; j < columns; ++j) {
    const std::vector<Offset>& o = offsets[j];
    cache.columns.emplace_back(matrices, s.rows(), s.cols(), o.back());
    matrices->copy_from_host(cache.columns[j].row_ptr(), o.data(), o.size() * sizeof(Offset));
    for (std::int64_t i = 0; i <= row_blocks; ++i)
      cache.starts.push_back(o[static_cast<std::size_t>(std::min(s.rows(), i * shape.rows))]);
  }
  for_each_block([&](std::int64_t r0, std::size_t j, const CsrT<T>& piece) {
    CsrT<T>& tile = cache.columns[j];
    const Offset at = offsets[j][static_cast<std::size_t>(r0)];
    const auto n = static_cast<std::size_t>(piece.nnz());
    matrices->copy_from_host(tile.col() + at, piece.col(), n * sizeof(LocalId));
    matrices->copy_from_host(tile.val() + at, piece.val(), n * sizeof(T));
  });
  cache.shape = shape;
#ifdef __GLIBC__
  malloc_trim(0); // the host pieces' pages go back to the system, not to the heap's free lists
#endif
  return cache;
}

template <typename T>
void Aggregation<T>::multiply_tiled(const Tiles& t, ConstDenseView<T> x, DenseView<T> y) {
  ChunkManager* memory = manager_of(backend_);
  const auto [block_rows, block_cols] = t.shape;
  const std::int64_t row_blocks = (y.rows + block_rows - 1) / block_rows;
  for (std::int64_t i = 0; i < row_blocks; ++i) {
    const std::int64_t r0 = i * block_rows, r1 = std::min(y.rows, r0 + block_rows);
    const DenseView<T> out = y.slice_rows(r0, r1);
    Pins rows(memory); // the first column tile overwrites them, the others add to them
    rows.add_dense(ConstDenseView<T>(out), Access::Write);
    bool first = true;
    for (std::size_t j = 0; j < t.columns.size(); ++j) {
      const CsrT<T>& tile = t.columns[j];
      const std::int64_t c0 = static_cast<std::int64_t>(j) * block_cols;
      const Offset* starts = t.starts.data() + j * static_cast<std::size_t>(row_blocks + 1);
      const auto entries = static_cast<std::size_t>(starts[i + 1] - starts[i]);
      // A tile without entries in these rows adds nothing: its input block stays where it is
      // (unless every tile is empty: the last one then writes the zeros).
      if (entries == 0 && !(first && j + 1 == t.columns.size())) continue;
      Pins pins(memory);
      pins.add_dense(x.slice_rows(c0, std::min(x.rows, c0 + block_cols)), Access::Read);
      pins.add(tile.row_ptr() + r0, static_cast<std::size_t>(r1 - r0 + 1) * sizeof(Offset),
               Access::Read);
      pins.add(tile.col() + starts[i], entries * sizeof(LocalId), Access::Read);
      pins.add(tile.val() + starts[i], entries * sizeof(T), Access::Read);
      ops::spmm(*backend_, tile.view().row_slice(r0, r1), x, out, first ? T{0} : T{1});
      first = false;
    }
  }
}

template <typename T>
typename Aggregation<T>::TileShape Aggregation<T>::tile_shape(std::int64_t width) const {
  const ChunkManager* memory = manager_of(backend_);
  const std::int64_t n = std::max<std::int64_t>({rows(), local_rows(), 1});
  if (memory == nullptr || !memory->budgeted()) return {n, n};
  // An output block stays while every column tile adds to it; an input block comes in once per
  // output block, so tall output blocks move fewer bytes. Shares: a quarter of the budget for an
  // output block, an eighth for an input block, an eighth for S's entries in an output block's
  // rows (at their mean per row, over S and Sᵀ); the rest for what else is pinned (parameters).
  // Under a budget of few chunks, of what is left once the tile's five pieces (output and input
  // blocks, S's offsets, columns and values) and the parameters may each straddle a chunk
  // boundary: half, a quarter and a quarter of the budget less eight chunks.
  const OffloadConfig& config = memory->config();
  const std::size_t budget = config.device_bytes;
  const std::size_t usable =
      std::max(budget - std::min(budget, 8 * config.chunk_bytes), budget / 8);
  const auto rows_in = [n](std::size_t bytes, std::size_t row_bytes) {
    const auto fit = static_cast<std::int64_t>(bytes / std::max<std::size_t>(row_bytes, 1));
    return std::clamp<std::int64_t>(fit, 1, n);
  };
  const auto row_bytes = static_cast<std::size_t>(width) * sizeof(T);
  const std::size_t entry_bytes =
      std::max(s_->bytes() / static_cast<std::size_t>(std::max<std::int64_t>(rows(), 1)),
               s_t_->bytes() / static_cast<std::size_t>(std::max<std::int64_t>(local_rows(), 1)));
  const std::size_t out_share = std::min(budget / 4, usable / 2);
  const std::size_t quarter_share = std::min(budget / 8, usable / 4);
  return {std::min(rows_in(out_share, row_bytes), rows_in(quarter_share, entry_bytes)),
          rows_in(quarter_share, row_bytes)};
}

template <typename T> HaloInBlocks<T>& Aggregation<T>::halo_in_blocks() {
  if (halo_in_blocks_ == nullptr) halo_in_blocks_ = std::make_unique<HaloInBlocks<T>>(*halo_);
  return *halo_in_blocks_;
}

template <typename T>
void Aggregation<T>::forward_tiled(const Step& step, ConstDenseView<T> x, DenseView<T> y) {
  check_layer_input("aggregation over " + s_->shape(), Input<T>(x), x.cols);
  if (halo_ == nullptr) {
    multiply_tiled(tiles(*s_, tiles_, tile_shape(x.cols)), x, y);
    return;
  }
  const DenseView<T> local = local_input(x.cols);
  for_row_blocks(manager_of(backend_), rows(),
                 {rows_of(x, Access::Read), rows_of(local, Access::Write)},
                 [&](std::int64_t b, std::int64_t e) {
                   ops::copy(*backend_, x.slice_rows(b, e), local.slice_rows(b, e));
                 });
  forward_local_tiled(step, x.cols, y);
}

template <typename T>
void Aggregation<T>::forward_local_tiled(const Step& step, std::int64_t f, DenseView<T> y) {
  const DenseView<T> x = local_input(f);
  if (halo_ != nullptr) halo_in_blocks().gather(*manager_of(backend_), x, pass_of(step));
  multiply_tiled(tiles(*s_, tiles_, tile_shape(f)), ConstDenseView<T>(x), y);
  discard(backend_, x); // read by nothing else
}

template <typename T> DenseView<T> Aggregation<T>::backward_tiled(ConstDenseView<T> dy) {
  const TileShape shape = tile_shape(dy.cols);
  DenseView<T> dx = d_local_.get(local_rows(), dy.cols);
  // A symmetric S is its own transpose: one set of tiles.
  multiply_tiled(s_t_ == s_ ? tiles(*s_, tiles_, shape) : tiles(*s_t_, tiles_t_, shape), dy, dx);
  if (halo_ == nullptr) return dx;
  halo_in_blocks().scatter_add(*manager_of(backend_), dx);
  return dx.slice_rows(0, rows());
}

template <typename T>
AggregateTransform<T>::AggregateTransform(BackendPtr backend, const CsrT<T>& s, const CsrT<T>& s_t,
                                          bool transform_first)
    : backend_(std::move(backend)), aggregation_(backend_, s, s_t),
      transform_first_(transform_first), mid_(backend_), d_mid_(backend_), d_input_(backend_),
      scratch_(backend_) {}

template <typename T>
std::size_t AggregateTransform<T>::working_set_bytes(const ChunkManager& memory, const Input<T>& x,
                                                     std::int64_t out) const {
  const Aggregation<T>& a = aggregation_;
  const auto in_row = static_cast<std::size_t>(x.cols()) * sizeof(T);
  const auto out_row = static_cast<std::size_t>(out) * sizeof(T);
  const std::size_t input =
      x.is_sparse() ? static_cast<std::size_t>(x.rows() + 1) * sizeof(Offset) +
                          memory.tensor_size(x.sparse.col) + memory.tensor_size(x.sparse.val)
                    : 2 * static_cast<std::size_t>(x.dense.size()) * sizeof(T);
  const auto rows = static_cast<std::size_t>(a.rows());
  const auto local_rows = static_cast<std::size_t>(a.local_rows());
  const std::size_t between =
      transform_first_ ? 2 * local_rows * out_row
                       : 2 * rows * in_row + (a.halo() != nullptr ? 2 * local_rows * in_row : 0);
  return a.matrix_bytes() + input + rows * out_row + between;
}

template <typename T>
void AggregateTransform<T>::forward(const Step& step, const std::string& layer, Input<T> x,
                                    ConstDenseView<T> w, DenseView<T> y, ChunkManager* blocks,
                                    const RowEpilogue& epilogue) {
  if (transform_first_) { // y = S · (x·W), the ghost rows of x·W from their owners
    DenseView<T> xw = aggregation_.local_input(w.cols);
    if (blocks == nullptr) {
      multiply_weight(*backend_, x, w, xw.slice_rows(0, x.rows()));
      aggregation_.forward_local(step, w.cols, y);
    } else {
      std::vector<RowTensor> tensors = input_rows(sparse_rows_, *backend_, x, blocks);
      tensors.push_back(rows_of(xw, Access::Write));
      for_row_blocks(blocks, x.rows(), tensors, [&](std::int64_t b, std::int64_t e) {
        multiply_weight(*backend_, x.slice_rows(b, e), w, xw.slice_rows(b, e));
      });
      aggregation_.forward_local_tiled(step, w.cols, y);
    }
    if (epilogue) for_row_blocks(blocks, y.rows, {rows_of(y, Access::ReadWrite)}, epilogue);
    return;
  }
  if (x.is_sparse()) {
    throw InvalidArgument(layer + ": aggregate-first needs a dense input; use transform-first "
                                  "for sparse features");
  }
  if (!step.training && blocks == nullptr && aggregation_.rows_alone()) {
    // Evaluating in one process: no backward reads S · x, so it is made a block of rows at a
    // time (a [n, in] buffer less at the peak of inference on a large graph).
    constexpr std::int64_t kRows = 4096;
    const std::int64_t rows = aggregation_.rows();
    const DenseView<T> part = mid_.get(std::min(rows, kRows), w.rows);
    for (std::int64_t b = 0; b < rows; b += kRows) {
      const std::int64_t e = std::min(rows, b + kRows);
      const DenseView<T> sx = part.slice_rows(0, e - b);
      aggregation_.forward_rows(x.dense, b, e, sx);
      ops::gemm(*backend_, Transpose::No, Transpose::No, T{1}, ConstDenseView<T>(sx), w, T{0},
                y.slice_rows(b, e));
      if (epilogue) epilogue(b, e);
    }
    return;
  }
  DenseView<T> sx = mid_.get(aggregation_.rows(), w.rows); // y = (S · x) · W
  if (blocks == nullptr) {
    aggregation_.forward(step, x.dense, sx);
  } else {
    aggregation_.forward_tiled(step, x.dense, sx);
  }
  const auto transform = [&](std::int64_t b, std::int64_t e) {
    ops::gemm(*backend_, Transpose::No, Transpose::No, T{1}, ConstDenseView<T>(sx.slice_rows(b, e)),
              w, T{0}, y.slice_rows(b, e));
    if (epilogue) epilogue(b, e);
  };
  if (blocks == nullptr && epilogue && backend_->kind() == DeviceKind::Cpu) {
    for_cache_blocks(y.rows, static_cast<std::size_t>(y.cols) * sizeof(T), transform);
  } else {
    for_row_blocks(blocks, y.rows, {rows_of(sx, Access::Read), rows_of(y, Access::Write)},
                   transform);
  }
}

template <typename T>
DenseView<T> AggregateTransform<T>::backward(const std::string& layer, Input<T> x,
                                             ConstDenseView<T> dy, Parameter<T>& w,
                                             GradientMode input_mode, GradientMode param_mode,
                                             ChunkManager* blocks) {
  const std::int64_t in = w.value.rows();
  if (input_mode != GradientMode::Ignore && x.is_sparse()) {
    throw InvalidArgument(layer + ": no gradient for a sparse input");
  }
  if (blocks != nullptr) return backward_in_blocks(x, dy, w, input_mode, param_mode, *blocks);
  if (transform_first_) {
    // d(xW) = Sᵀ·dy (distributed, the ghost rows' share is added at their owners);
    // dW = xᵀ·d(xW); dx = d(xW)·Wᵀ.
    const DenseView<T> d_xw = aggregation_.backward(dy); // [input rows, out]
    weight_gradient(*backend_, x, ConstDenseView<T>(d_xw), w, param_mode, scratch_);
    DenseView<T> dx;
    if (input_mode != GradientMode::Ignore) {
      dx = d_input_.get(x.rows(), in);
      const T beta = input_mode == GradientMode::Accumulate ? T{1} : T{0};
      ops::gemm(*backend_, Transpose::No, Transpose::Yes, T{1}, ConstDenseView<T>(d_xw),
                w.value.cview(), beta, dx);
    }
    discard(backend_, d_xw);
    return dx;
  }
  // dW = (Sx)ᵀ·dy; d(Sx) = dy·Wᵀ; dx = Sᵀ·d(Sx).
  const DenseView<T> sx = mid_.get(aggregation_.rows(), in);
  weight_gradient(*backend_, Input<T>(ConstDenseView<T>(sx)), dy, w, param_mode, scratch_);
  discard(backend_, sx); // the forward's product, read by this backward only
  if (input_mode == GradientMode::Ignore) return {};
  if (input_mode == GradientMode::Accumulate) {
    throw InvalidArgument(layer + ": aggregate-first backward overwrites its input gradient");
  }
  DenseView<T> d_sx = d_mid_.get(aggregation_.rows(), in);
  ops::gemm(*backend_, Transpose::No, Transpose::Yes, T{1}, dy, w.value.cview(), T{0}, d_sx);
  const DenseView<T> dx = aggregation_.backward(ConstDenseView<T>(d_sx));
  discard(backend_, d_sx);
  return dx;
}

template <typename T>
DenseView<T> AggregateTransform<T>::backward_in_blocks(Input<T> x, ConstDenseView<T> dy,
                                                       Parameter<T>& w, GradientMode input_mode,
                                                       GradientMode param_mode,
                                                       ChunkManager& blocks) {
  const std::int64_t in = w.value.rows();
  const T beta = input_mode == GradientMode::Accumulate ? T{1} : T{0};
  if (transform_first_) { // as backward(), each product over row blocks or tiles
    const DenseView<T> d_xw = aggregation_.backward_tiled(dy);
    DenseView<T> dx;
    if (input_mode != GradientMode::Ignore) dx = d_input_.get(x.rows(), in);
    // weight_gradient sums a sparse x's blocks through this [in, out] buffer
    Pins sum(&blocks);
    hold_gradient_sum(sum, x, w, param_mode, scratch_);
    std::vector<RowTensor> tensors = input_rows(sparse_rows_, *backend_, x, &blocks);
    tensors.push_back(rows_of(d_xw, Access::Read));
    if (dx.data != nullptr) {
      tensors.push_back(rows_of(dx, beta == T{0} ? Access::Write : Access::ReadWrite));
    }
    for_row_blocks(&blocks, x.rows(), tensors, [&](std::int64_t b, std::int64_t e) {
      const ConstDenseView<T> d_block(d_xw.slice_rows(b, e));
      weight_gradient(*backend_, x.slice_rows(b, e), d_block, w, block_mode(param_mode, b),
                      scratch_);
      if (dx.data == nullptr) return;
      ops::gemm(*backend_, Transpose::No, Transpose::Yes, T{1}, d_block, w.value.cview(), beta,
                dx.slice_rows(b, e));
    });
    discard(backend_, d_xw);
    return dx;
  }
  return backward_aggregate_first_in_blocks(
      [&](std::int64_t b, std::int64_t e) { return dy.slice_rows(b, e); },
      rows_of(dy, Access::Read), w, input_mode, param_mode, &blocks);
}

template <typename T>
DenseView<T> AggregateTransform<T>::backward_from_blocks(const std::string& layer,
                                                         const RowGradient& dy_rows,
                                                         Parameter<T>& w, GradientMode input_mode,
                                                         GradientMode param_mode) {
  if (transform_first_) {
    throw InvalidArgument(layer + ": a gradient made block by block needs the aggregate-first "
                                  "order");
  }
  return backward_aggregate_first_in_blocks(dy_rows, RowTensor{}, w, input_mode, param_mode,
                                            nullptr);
}

template <typename T>
DenseView<T> AggregateTransform<T>::backward_aggregate_first_in_blocks(
    const RowGradient& dy_rows, const RowTensor& dy_tensor, Parameter<T>& w,
    GradientMode input_mode, GradientMode param_mode, ChunkManager* blocks) {
  const std::int64_t in = w.value.rows(), rows = aggregation_.rows();
  const DenseView<T> sx = mid_.get(rows, in);
  DenseView<T> d_sx;
  if (input_mode != GradientMode::Ignore) {
    if (input_mode == GradientMode::Accumulate) {
      throw InvalidArgument("aggregate-first backward overwrites its input gradient");
    }
    d_sx = d_mid_.get(rows, in);
  }
  // Per block: dW (+)= (Sx)ᵀ·dy and d(Sx) = dy·Wᵀ, while the block's dy is at hand.
  const auto block = [&](std::int64_t b, std::int64_t e) {
    const ConstDenseView<T> dy_block = dy_rows(b, e);
    weight_gradient(*backend_, Input<T>(ConstDenseView<T>(sx.slice_rows(b, e))), dy_block, w,
                    block_mode(param_mode, b), scratch_);
    if (d_sx.data == nullptr) return;
    ops::gemm(*backend_, Transpose::No, Transpose::Yes, T{1}, dy_block, w.value.cview(), T{0},
              d_sx.slice_rows(b, e));
  };
  if (blocks != nullptr) {
    for_row_blocks(blocks, rows,
                   {rows_of(sx, Access::Read), dy_tensor,
                    d_sx.data != nullptr ? rows_of(d_sx, Access::Write) : RowTensor{}},
                   block);
  } else if (backend_->kind() == DeviceKind::Cpu) {
    for_cache_blocks(rows, static_cast<std::size_t>(w.value.cols()) * sizeof(T), block);
  } else {
    block(0, rows);
  }
  discard(backend_, sx); // the forward's product, read by this backward only
  if (d_sx.data == nullptr) return {};
  const DenseView<T> dx = blocks != nullptr ? aggregation_.backward_tiled(ConstDenseView<T>(d_sx))
                                            : aggregation_.backward(ConstDenseView<T>(d_sx));
  discard(backend_, d_sx);
  return dx;
}

template class Aggregation<float>;
template class Aggregation<double>;
template class AggregateTransform<float>;
template class AggregateTransform<double>;

} // namespace tessera
