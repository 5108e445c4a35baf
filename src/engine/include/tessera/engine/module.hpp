// The module contract (tiny-cuda-nn style): forward returns a Context that backward consumes;
// explicit backward, no tape. Shared by the GNN layers and plain DNN layers.
#pragma once

#include "tessera/core/device.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/tensor.hpp"
#include "tessera/ops/ops.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

class ChunkManager;

/// What backward does with a gradient it could compute.
enum class GradientMode {
  Ignore,    ///< do not compute it
  Overwrite, ///< write it, replacing what was there
  Accumulate ///< add it to what is there
};

/// One step of a run: keys the random draws and switches training-only behaviour (dropout).
struct Step {
  std::uint64_t seed = 0;  ///< the run's seed
  std::uint32_t epoch = 0; ///< a new dropout mask per epoch
  bool training = true;    ///< false: dropout is the identity
  /// Global id of each local row (dropout masks are keyed by it, so tilings agree).
  RowIds rows;
};

/// A module's input: dense [n, f], or sparse [n, f] for bag-of-words features.
template <typename T> struct Input {
  ConstDenseView<T> dense; ///< used when sparse is unset
  CsrView<T> sparse;       ///< set (row_ptr non-null) for a sparse input

  /// An empty dense input; or one wrapping a dense or a sparse view.
  Input() = default;
  Input(ConstDenseView<T> d) : dense(d) {} // NOLINT: implicit by design
  Input(CsrView<T> s) : sparse(s) {}       // NOLINT: implicit by design

  /// Which view is in use, and its shape.
  bool is_sparse() const noexcept { return sparse.row_ptr != nullptr; }
  std::int64_t rows() const noexcept { return is_sparse() ? sparse.rows : dense.rows; }
  std::int64_t cols() const noexcept { return is_sparse() ? sparse.cols : dense.cols; }
  /// Rows [begin, end) (a row block of a layer that runs in blocks).
  Input slice_rows(std::int64_t begin, std::int64_t end) const noexcept {
    return is_sparse() ? Input(sparse.row_slice(begin, end)) : Input(dense.slice_rows(begin, end));
  }
  /// Rows [0, n) (e.g. a tile's owned rows of an input that also holds its ghost rows).
  Input first_rows(std::int64_t n) const noexcept { return slice_rows(0, n); }
};

/// What one forward call leaves for its backward: the input and output it saw and the step.
/// Views point into buffers the caller and the module own; they stay valid until the module's
/// next forward.
template <typename T> struct Context {
  Input<T> input;  ///< x: [n, in_features]
  Input<T> output; ///< y: [n, out_features]; may be `input` itself (an identity layer)
  Step step;       ///< the forward's step, so backward redraws the same masks
};

/// A trainable tensor and its gradient, both [rows, cols] on the module's backend.
template <typename T> struct Parameter {
  std::string name; ///< "linear0.weight" and the like, for messages
  DenseT<T> value;  ///< [rows, cols]
  DenseT<T> grad;   ///< [rows, cols], written by backward per its GradientMode
  /// Whether the optimizer applies weight decay to it.
  bool decay = true;
};

/// A layer: maps [n, in_features] to [n, out_features] (a graph layer on a rank's tile maps the
/// rows its input holds, owned and perhaps ghost, to the owned rows: see Aggregation). Output
/// and input-gradient buffers are owned by the module and allocated on the first call for a
/// given n, then reused; so one forward may be in flight per module at a time.
template <typename T> class Module {
public:
  virtual ~Module() = default;

  /// Runs the layer on x: [n, in_features]. The returned context's output is [n, out_features].
  virtual Context<T> forward(const Step& step, Input<T> x) = 0;

  /// Back-propagates d_output: [n, out_features]. Returns d_input: [n, in_features] when
  /// input_mode is not Ignore (an empty view otherwise); parameter gradients follow param_mode.
  virtual ConstDenseView<T> backward(const Context<T>& ctx, ConstDenseView<T> d_output,
                                     GradientMode input_mode, GradientMode param_mode) = 0;

  /// Whether the module offers forward_in_place (an elementwise layer whose backward does not
  /// read its input). False unless overridden.
  virtual bool has_forward_in_place() const { return false; }
  /// forward writing the output over x, which the caller gives up (Sequential does where x is
  /// the output of the module before, which no backward reads), so the module's own output
  /// buffer is never allocated. The context's output is x's memory. Only called when
  /// has_forward_in_place(); InvalidArgument otherwise.
  virtual Context<T> forward_in_place(const Step& step, DenseView<T> x) {
    (void)step;
    (void)x;
    throw InvalidArgument(name() + " has no forward in place");
  }

  /// Whether the module offers backward_in_place (an elementwise layer). False unless overridden.
  virtual bool has_backward_in_place() const { return false; }
  /// backward with input_mode Overwrite, writing d_input over d_output, which the caller gives
  /// up (Sequential does where the gradient is a buffer of the module after, dead once read), so
  /// the module's own input-gradient buffer is never allocated. Returns d_input: d_output's
  /// memory, or d_output itself where the layer is the identity. Only called when
  /// has_backward_in_place(); InvalidArgument otherwise.
  virtual ConstDenseView<T> backward_in_place(const Context<T>& ctx, DenseView<T> d_output,
                                              GradientMode param_mode) {
    (void)ctx;
    (void)d_output;
    (void)param_mode;
    throw InvalidArgument(name() + " has no backward in place");
  }

  /// Whether backward reads the bytes of ctx.input and of ctx.output (not only their shapes).
  /// Under a memory budget what backward does not read need not be on the device meanwhile,
  /// so a module that says false here lets a smaller budget train it. True unless overridden.
  virtual bool backward_reads_input() const { return true; }
  virtual bool backward_reads_output() const { return true; }
  /// Whether the module, called on `x` (its input), acquires its own memory under a budget (row
  /// blocks, tiles of a matrix) because its whole working set would not fit: Sequential then
  /// acquires only its parameters around its calls, and the buffers it allocates may exceed
  /// the budget. `memory` is the budget's manager (never nullptr). False unless overridden.
  virtual bool acquires_own_memory(const ChunkManager& memory, const Input<T>& x) const {
    (void)memory;
    (void)x;
    return false;
  }

  /// The module's trainable tensors: those it registered, in order (none by default).
  virtual std::vector<Parameter<T>*> parameters() { return registered_; }

  /// One line for summaries: "Linear(1433 -> 16)", "Dropout(p=0.5)".
  virtual std::string name() const = 0;
  /// Bytes of the buffers this module holds (parameters, outputs, saved tensors, gradients).
  virtual std::size_t bytes() const = 0;

protected:
  Module() = default;
  /// Registered parameters point into the module: it stays where it was made.
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// Makes `p` (a member: it lives as long as the module) one of parameters(), after those
  /// registered before; an empty one (an absent bias) is left out.
  void register_parameter(Parameter<T>& p) {
    if (!p.value.empty()) registered_.push_back(&p);
  }

private:
  std::vector<Parameter<T>*> registered_;
};

} // namespace tessera
