// A chain of modules run forward in order and backward in reverse.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tessera/engine/module.hpp"

namespace tessera {

/// Modules applied one after another. Backward computes an input gradient only for modules
/// that have a trainable module before them, so nothing is spent on the input features.
template <typename T>
class Sequential {
 public:
  /// Appends `module`, taking ownership.
  void add(std::unique_ptr<Module<T>> module);

  /// Runs every module on x: [n, in_features]; returns the last output (for a classifier, logits
  /// [n, classes]), valid until the next forward. Throws InvalidArgument for a model without
  /// modules or whose last output is sparse.
  ConstDenseView<T> forward(const Step& step, Input<T> x);
  /// Back-propagates d_output ([n, classes], the last output's shape) through the last forward;
  /// parameter gradients per param_mode.
  void backward(ConstDenseView<T> d_output, GradientMode param_mode = GradientMode::Overwrite);

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

 private:
  std::vector<std::unique_ptr<Module<T>>> modules_;
  std::vector<Context<T>> contexts_;
  std::vector<bool> needs_input_grad_;
};

}  // namespace tessera
