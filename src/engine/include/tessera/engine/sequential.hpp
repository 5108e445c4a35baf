// A chain of modules run forward in order and backward in reverse.
#pragma once

#include "tessera/engine/chunk_manager.hpp"
#include "tessera/engine/module.hpp"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tessera {

/// Modules applied one after another. Backward computes an input gradient only for modules
/// that have a trainable module before them, so nothing is spent on the input features.
template <typename T> class Sequential {
public:
  /// Appends `module`, taking ownership.
  void add(std::unique_ptr<Module<T>> module);

  /// Runs the modules under `manager`'s budget (nullptr: plain memory): each module's forward
  /// and backward is a scope that acquires its parameters, its input and output, the gradient it
  /// receives and every buffer it allocated in earlier calls (learned as it allocates them), and
  /// releases them when it returns, so only one module's working set need be on the device.
  /// A module whose working set would not fit (Module::acquires_own_memory) gets its
  /// parameters only and acquires the rest itself, in row blocks. Backward leaves out what a
  /// module does not read (Module::backward_reads_input/output), and an output or input
  /// gradient no later call reads is discarded (ChunkManager::discard): it leaves the device
  /// without being written back.
  void use_memory(ChunkManager* manager);
  /// The manager given to use_memory (nullptr when none).
  ChunkManager* memory() const noexcept { return memory_; }

  /// Runs every module on x: [n, in_features]; returns the last output (for a classifier, logits
  /// [n, classes]), valid (and, under a manager, acquired) until the next forward or backward.
  /// Throws InvalidArgument for a model without modules or whose last output is sparse.
  ConstDenseView<T> forward(const Step& step, Input<T> x);
  /// Runs the first `modules` modules on x (1 <= modules <= the model's); returns the output of
  /// the last of them, valid as forward's: a layer's representation (layer_ends) in an
  /// evaluation step. Throws InvalidArgument for a count out of range or a sparse output.
  ConstDenseView<T> forward(const Step& step, Input<T> x, std::size_t modules);
  /// Back-propagates d_output ([n, classes], the last output's shape) through the last forward;
  /// parameter gradients per param_mode. on_gradient (optional, not called when param_mode is
  /// Ignore) receives each parameter of a module right after that module's backward has written
  /// its gradient, last module first: where data parallelism starts summing it over the ranks.
  void backward(ConstDenseView<T> d_output, GradientMode param_mode = GradientMode::Overwrite,
                const std::function<void(Parameter<T>&)>& on_gradient = {});

  /// Marks the module added last as the end of one of the model's layers: its output is that
  /// layer's representation of the rows (an embedding). Builders mark each hidden layer after
  /// its activation. Throws InvalidArgument on a model without modules.
  void end_layer();
  /// The marked layers in order: for each, the count of modules that compute it (forward with
  /// that count gives its representation).
  const std::vector<std::size_t>& layer_ends() const noexcept { return layer_ends_; }

  /// Every module's parameters, in module order; owned by the modules.
  std::vector<Parameter<T>*> parameters();
  /// Scalars in all parameters.
  std::int64_t num_parameters();
  /// One line per module.
  std::string summary() const;
  /// Bytes held by all modules (parameters, gradients and activation buffers).
  std::size_t bytes() const;
  /// The modules, in order.
  const std::vector<std::unique_ptr<Module<T>>>& modules() const { return modules_; }
  /// Seconds each module has spent in training forward and backward calls since it was added
  /// (host time: on a device, the time to queue its work and wait for what it waits for).
  const std::vector<double>& module_seconds() const { return module_seconds_; }

  /// What runs around each module's training forward and backward call: `before` just before
  /// it, `after` just after it (with the call's seconds so far), both inside the time counted
  /// in module_seconds. A probe of a profiler, or the simulated slower device of the testing
  /// seam (runtime/simulation.hpp). Either may be empty.
  struct TrainingHook {
    std::function<void()> before;
    std::function<void(double seconds)> after;
  };
  /// Installs `hook` (an empty one removes it).
  void set_training_hook(TrainingHook hook) { hook_ = std::move(hook); }

private:
  /// Acquires module i's working set into `pins` for a forward or backward call on `input`;
  /// returns true when the module acquires its own memory (only its parameters are acquired).
  bool pin_module(Pins& pins, std::size_t i, const Input<T>& input, bool backward);
  /// Discards module i's output (no-op without a manager, when it is the module's input (an
  /// identity) or when it shares bytes with `keep`).
  void discard_output(std::size_t i, ByteRange keep = {});

  ChunkManager* memory_ = nullptr;
  std::vector<std::vector<ByteRange>> owned_; // per module: buffers it allocated
  std::unique_ptr<Pins> output_pins_;         // the last output, until the next call
  std::vector<std::unique_ptr<Module<T>>> modules_;
  std::vector<Context<T>> contexts_;
  std::vector<bool> needs_input_grad_;
  std::vector<double> module_seconds_;
  std::vector<std::size_t> layer_ends_;
  TrainingHook hook_;
};

} // namespace tessera
