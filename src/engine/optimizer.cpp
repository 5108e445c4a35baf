// Adam / AdamW state and update loop.
#include "tessera/engine/optimizer.hpp"

#include "tessera/core/error.hpp"

#include <string>

namespace tessera {

template <typename T>
Adam<T>::Adam(BackendPtr backend, std::vector<Parameter<T>*> parameters, AdamConfig config)
    : backend_(std::move(backend)), parameters_(std::move(parameters)), config_(config) {
  for (const Parameter<T>* p : parameters_) {
    m_.push_back(DenseT<T>::zeros(backend_, p->value.rows(), p->value.cols()));
    v_.push_back(DenseT<T>::zeros(backend_, p->value.rows(), p->value.cols()));
  }
}

template <typename T> void Adam<T>::step() {
  ++steps_;
  AdamConfig no_decay = config_;
  no_decay.weight_decay = 0.0f;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    Parameter<T>& p = *parameters_[i];
    const std::size_t n = static_cast<std::size_t>(p.value.size());
    ops::adam_step(*backend_, std::span<T>(p.value.data(), n), std::span<const T>(p.grad.data(), n),
                   std::span<T>(m_[i].data(), n), std::span<T>(v_[i].data(), n),
                   p.decay ? config_ : no_decay, steps_);
  }
}

template <typename T> AdamState<T> Adam<T>::state() const {
  AdamState<T> state;
  state.steps = steps_;
  const auto to_host = [this](const DenseT<T>& tensor) {
    std::vector<T> values(static_cast<std::size_t>(tensor.size()));
    backend_->copy_to_host(values.data(), tensor.data(), values.size() * sizeof(T));
    return values;
  };
  for (std::size_t i = 0; i < m_.size(); ++i) {
    state.m.push_back(to_host(m_[i]));
    state.v.push_back(to_host(v_[i]));
  }
  return state;
}

template <typename T> void Adam<T>::load_state(const AdamState<T>& state) {
  if (state.steps < 0) {
    throw InvalidArgument("Adam step count must be >= 0, got " + std::to_string(state.steps));
  }
  if (state.m.size() != m_.size() || state.v.size() != v_.size()) {
    throw DimensionMismatch("Adam state holds moments of " + std::to_string(state.m.size()) +
                            " and " + std::to_string(state.v.size()) +
                            " parameters, the model has " + std::to_string(m_.size()));
  }
  // Check every size before copying any, so a refused state leaves this one as it was.
  for (std::size_t i = 0; i < m_.size(); ++i) {
    const auto n = static_cast<std::size_t>(m_[i].size());
    if (state.m[i].size() != n || state.v[i].size() != n) {
      throw DimensionMismatch("Adam state of parameter '" + parameters_[i]->name + "' holds " +
                              std::to_string(state.m[i].size()) + " and " +
                              std::to_string(state.v[i].size()) + " values, the parameter has " +
                              std::to_string(n));
    }
  }
  for (std::size_t i = 0; i < m_.size(); ++i) {
    backend_->copy_from_host(m_[i].data(), state.m[i].data(), state.m[i].size() * sizeof(T));
    backend_->copy_from_host(v_[i].data(), state.v[i].data(), state.v[i].size() * sizeof(T));
  }
  steps_ = state.steps;
}

template <typename T> std::size_t Adam<T>::bytes() const {
  std::size_t total = 0;
  for (std::size_t i = 0; i < m_.size(); ++i)
    total += m_[i].bytes() + v_[i].bytes();
  return total;
}

template class Adam<float>;
template class Adam<double>;

} // namespace tessera
