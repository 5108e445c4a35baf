// Sequential: forward in order, backward in reverse, input gradients only where needed.
#include "tessera/engine/sequential.hpp"

#include "tessera/core/error.hpp"
#include "tessera/core/timer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>

namespace tessera {

template <typename T> void Sequential<T>::add(std::unique_ptr<Module<T>> module) {
  // Module i needs an input gradient only when a module before it has parameters.
  const bool trainable_before =
      !modules_.empty() && (needs_input_grad_.back() || !modules_.back()->parameters().empty());
  needs_input_grad_.push_back(trainable_before);
  modules_.push_back(std::move(module));
  contexts_.emplace_back();
  owned_.emplace_back();
  module_seconds_.push_back(0.0);
}

template <typename T> void Sequential<T>::end_layer() {
  if (modules_.empty()) throw InvalidArgument("Sequential::end_layer on a model without modules");
  if (layer_ends_.empty() || layer_ends_.back() != modules_.size())
    layer_ends_.push_back(modules_.size());
}

template <typename T> void Sequential<T>::use_memory(ChunkManager* manager) {
  memory_ = manager;
  output_pins_ = std::make_unique<Pins>(manager);
}

namespace {

/// The bytes a dense view spans.
template <typename T> ByteRange bytes_of(ConstDenseView<T> x) {
  return {x.data, static_cast<std::size_t>(x.size()) * sizeof(T)};
}

/// A writable view of `x`: a module's own buffer, lent out read-only, whose lender is done with
/// it (what Sequential hands to a module's forward or backward in place).
template <typename T> DenseView<T> lent(ConstDenseView<T> x) {
  return DenseView<T>(const_cast<T*>(x.data), x.rows, x.cols);
}

/// Whether two byte ranges share a byte.
bool overlap(ByteRange a, ByteRange b) {
  const auto* a0 = static_cast<const std::byte*>(a.data);
  const auto* b0 = static_cast<const std::byte*>(b.data);
  return a.bytes != 0 && b.bytes != 0 && a0 < b0 + b.bytes && b0 < a0 + a.bytes;
}

/// Acquires the memory of a module input: a dense view's rows, or a CSR's arrays.
template <typename T> void pin_input(Pins& pins, const Input<T>& x, Access access) {
  if (x.is_sparse()) {
    pins.add_csr(x.sparse, access);
  } else {
    pins.add_dense(x.dense, access);
  }
}

} // namespace

template <typename T>
bool Sequential<T>::pin_module(Pins& pins, std::size_t i, const Input<T>& input, bool backward) {
  if (memory_ == nullptr) return false;
  const Module<T>& module = *modules_[i];
  for (Parameter<T>* p : modules_[i]->parameters()) {
    pins.add(p->value.data(), p->value.bytes(), Access::Read);
    if (backward) pins.add(p->grad.data(), p->grad.bytes(), Access::ReadWrite);
  }
  if (module.acquires_own_memory(*memory_, input)) return true; // the rest in blocks
  // Backward leaves out what the module says it does not read: the forward's output (in a
  // buffer it owns) and its input (owned by the module before it).
  const bool skip_output = backward && !module.backward_reads_output();
  const Input<T>& output = contexts_[i].output;
  const void* output_data = output.is_sparse() ? static_cast<const void*>(output.sparse.val)
                                               : static_cast<const void*>(output.dense.data);
  for (const ByteRange& r : owned_[i]) {
    const auto* begin = static_cast<const std::byte*>(r.data);
    const auto* at = static_cast<const std::byte*>(output_data);
    if (skip_output && at >= begin && at < begin + r.bytes) continue;
    pins.add(r, Access::ReadWrite);
  }
  if (!backward || module.backward_reads_input()) pin_input(pins, input, Access::Read);
  if (backward && !skip_output) pin_input(pins, output, Access::Read);
  return false;
}

template <typename T> void Sequential<T>::discard_output(std::size_t i, ByteRange keep) {
  const Context<T>& c = contexts_[i];
  if (memory_ == nullptr || c.output.is_sparse() || c.input.is_sparse()) return;
  const ByteRange output = bytes_of(c.output.dense);
  if (!overlap(output, bytes_of(c.input.dense)) && !overlap(output, keep))
    memory_->discard(output.data, output.bytes);
}

template <typename T> ConstDenseView<T> Sequential<T>::forward(const Step& step, Input<T> x) {
  if (modules_.empty()) throw InvalidArgument("Sequential::forward on an empty model");
  return forward(step, x, modules_.size());
}

template <typename T>
ConstDenseView<T> Sequential<T>::forward(const Step& step, Input<T> x, std::size_t modules) {
  if (modules < 1 || modules > modules_.size()) {
    throw InvalidArgument("Sequential::forward through " + std::to_string(modules) +
                          " modules of a model of " + std::to_string(modules_.size()));
  }
  if (output_pins_) output_pins_->clear();
  for (std::size_t i = 0; i < modules; ++i) {
    // An elementwise module writes its output over its input when that is the output of the
    // module before, in that module's own buffer, and no backward reads it: one buffer fewer.
    // (A dense output cannot be a sparse input passed on.)
    bool in_place = false;
    if (i > 0 && modules_[i]->has_forward_in_place() && !x.is_sparse() &&
        !modules_[i - 1]->backward_reads_output()) {
      const Input<T>& before = contexts_[i - 1].input;
      in_place = before.is_sparse() || !overlap(bytes_of(x.dense), bytes_of(before.dense));
    }
    Pins pins(memory_);
    const bool on_its_own = pin_module(pins, i, x, false);
    AllocationScope scope(memory_, on_its_own ? nullptr : &pins);
    if (in_place && !on_its_own) pins.add_dense(x.dense, Access::ReadWrite);
    const Stopwatch clock;
    if (step.training && hook_.before) hook_.before();
    contexts_[i] = in_place ? modules_[i]->forward_in_place(step, lent(x.dense))
                            : modules_[i]->forward(step, x);
    if (step.training) {
      if (hook_.after) hook_.after(clock.seconds());
      module_seconds_[i] += clock.seconds();
    }
    owned_[i].insert(owned_[i].end(), pins.allocated().begin(), pins.allocated().end());
    x = contexts_[i].output;
    // The input is dead once read, unless a backward reads it.
    if (i > 0 && (!step.training || (!modules_[i - 1]->backward_reads_output() &&
                                     !modules_[i]->backward_reads_input()))) {
      discard_output(i - 1, x.is_sparse() ? ByteRange{} : bytes_of(x.dense));
    }
  }
  if (x.is_sparse()) {
    throw InvalidArgument(modules == modules_.size()
                              ? "the last module of a model must give a dense output"
                              : "module " + std::to_string(modules - 1) + " (" +
                                    modules_[modules - 1]->name() + ") gives a sparse output");
  }
  if (output_pins_) pin_input(*output_pins_, x, Access::ReadWrite);
  return x.dense;
}

template <typename T>
void Sequential<T>::backward(ConstDenseView<T> d_output, GradientMode param_mode,
                             const std::function<void(Parameter<T>&)>& on_gradient) {
  if (output_pins_) output_pins_->clear();
  const ByteRange callers = bytes_of(d_output);
  for (std::size_t i = modules_.size(); i-- > 0;) {
    const GradientMode input_mode =
        needs_input_grad_[i] ? GradientMode::Overwrite : GradientMode::Ignore;
    // An elementwise module writes its input gradient over the one it receives when that is a
    // later module's buffer (never the caller's), dead once read: one gradient buffer fewer.
    const bool in_place = input_mode == GradientMode::Overwrite &&
                          modules_[i]->has_backward_in_place() && d_output.data != nullptr &&
                          !overlap(bytes_of(d_output), callers);
    Pins pins(memory_);
    const bool on_its_own = pin_module(pins, i, contexts_[i].input, true);
    AllocationScope scope(memory_, on_its_own ? nullptr : &pins);
    if (!on_its_own) pins.add_dense(d_output, in_place ? Access::ReadWrite : Access::Read);
    const Stopwatch clock;
    if (hook_.before) hook_.before();
    const ConstDenseView<T> d_input =
        in_place ? modules_[i]->backward_in_place(contexts_[i], lent(d_output), param_mode)
                 : modules_[i]->backward(contexts_[i], d_output, input_mode, param_mode);
    if (hook_.after) hook_.after(clock.seconds());
    module_seconds_[i] += clock.seconds();
    owned_[i].insert(owned_[i].end(), pins.allocated().begin(), pins.allocated().end());
    // Dead now: the gradient module i + 1 gave (unless passed through), and module i's output
    // (its readers, the backward of modules i and i + 1, are done). The last ones belong to the
    // caller.
    if (memory_ != nullptr && i + 1 < modules_.size()) {
      if (!overlap(bytes_of(d_output), bytes_of(d_input)))
        memory_->discard(d_output.data, bytes_of(d_output).bytes);
      discard_output(i);
    }
    d_output = d_input;
    if (on_gradient && param_mode != GradientMode::Ignore) {
      for (Parameter<T>* p : modules_[i]->parameters())
        on_gradient(*p);
    }
    if (!needs_input_grad_[i]) {
      for (std::size_t j = 0; j < i; ++j) // no backward reads them
        discard_output(j);
      break;
    }
  }
}

template <typename T> std::vector<Parameter<T>*> Sequential<T>::parameters() {
  std::vector<Parameter<T>*> all;
  for (auto& module : modules_) {
    for (Parameter<T>* p : module->parameters())
      all.push_back(p);
  }
  return all;
}

template <typename T> std::int64_t Sequential<T>::num_parameters() {
  std::int64_t total = 0;
  for (Parameter<T>* p : parameters())
    total += p->value.size();
  return total;
}

template <typename T> std::string Sequential<T>::summary() const {
  std::string text;
  for (const auto& module : modules_)
    text += module->name() + "\n";
  return text;
}

template <typename T> std::size_t Sequential<T>::bytes() const {
  std::size_t total = 0;
  for (const auto& module : modules_)
    total += module->bytes();
  return total;
}

template class Sequential<float>;
template class Sequential<double>;

} // namespace tessera
