// Sequential: forward in order, backward in reverse, input gradients only where needed.
#include "tessera/engine/sequential.hpp"

#include "tessera/core/error.hpp"

namespace tessera {

template <typename T>
void Sequential<T>::add(std::unique_ptr<Module<T>> module) {
  // Module i needs an input gradient only when a module before it has parameters.
  const bool trainable_before =
      !modules_.empty() && (needs_input_grad_.back() || !modules_.back()->parameters().empty());
  needs_input_grad_.push_back(trainable_before);
  modules_.push_back(std::move(module));
  contexts_.emplace_back();
}

template <typename T>
ConstDenseView<T> Sequential<T>::forward(const Step& step, Input<T> x) {
  if (modules_.empty()) throw InvalidArgument("Sequential::forward on an empty model");
  for (std::size_t i = 0; i < modules_.size(); ++i) {
    contexts_[i] = modules_[i]->forward(step, x);
    x = contexts_[i].output;
  }
  if (x.is_sparse()) throw InvalidArgument("the last module of a model must give a dense output");
  return x.dense;
}

template <typename T>
void Sequential<T>::backward(ConstDenseView<T> d_output, GradientMode param_mode) {
  for (std::size_t i = modules_.size(); i-- > 0;) {
    const GradientMode input_mode =
        needs_input_grad_[i] ? GradientMode::Overwrite : GradientMode::Ignore;
    d_output = modules_[i]->backward(contexts_[i], d_output, input_mode, param_mode);
    if (!needs_input_grad_[i]) break;
  }
}

template <typename T>
std::vector<Parameter<T>*> Sequential<T>::parameters() {
  std::vector<Parameter<T>*> all;
  for (auto& module : modules_) {
    for (Parameter<T>* p : module->parameters()) all.push_back(p);
  }
  return all;
}

template <typename T>
std::int64_t Sequential<T>::num_parameters() {
  std::int64_t total = 0;
  for (Parameter<T>* p : parameters()) total += p->value.size();
  return total;
}

template <typename T>
std::string Sequential<T>::summary() const {
  std::string text;
  for (const auto& module : modules_) text += module->name() + "\n";
  return text;
}

template <typename T>
std::size_t Sequential<T>::bytes() const {
  std::size_t total = 0;
  for (const auto& module : modules_) total += module->bytes();
  return total;
}

template class Sequential<float>;
template class Sequential<double>;

}  // namespace tessera
