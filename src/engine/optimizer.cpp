// Adam / AdamW state and update loop.
#include "tessera/engine/optimizer.hpp"

#include "tessera/core/error.hpp"
#include "tessera/engine/chunk_manager.hpp"

#include <algorithm>
#include <limits>
#include <string>

namespace tessera {

template <typename T>
Adam<T>::Adam(BackendPtr backend, std::vector<Parameter<T>*> parameters, AdamConfig config)
    : backend_(std::move(backend)), parameters_(std::move(parameters)), config_(config) {
  // Under a chunk manager the moments get chunks of their own, after the weights' and grads'.
  const BackendPtr state = memory_for(backend_, TensorKind::OptimizerState);
  for (const Parameter<T>* p : parameters_) {
    m_.push_back(DenseT<T>::zeros(state, p->value.rows(), p->value.cols()));
    v_.push_back(DenseT<T>::zeros(state, p->value.rows(), p->value.cols()));
  }
}

template <typename T> void Adam<T>::step() {
  ++steps_;
  AdamConfig no_decay = config_;
  no_decay.weight_decay = 0.0f;
  // The update is element-wise: under a budget it runs a chunk's worth of elements at a time, so
  // a parameter, its gradient and moments (4x its size) need not be on the device together.
  ChunkManager* memory = manager_of(backend_);
  const std::size_t piece = memory != nullptr && memory->budgeted()
                                ? std::max<std::size_t>(1, memory->config().chunk_bytes / sizeof(T))
                                : std::numeric_limits<std::size_t>::max();
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    Parameter<T>& p = *parameters_[i];
    const std::size_t n = static_cast<std::size_t>(p.value.size());
    for (std::size_t begin = 0; begin < n; begin += piece) {
      const std::size_t count = std::min(piece, n - begin);
      const std::span<T> value(p.value.data() + begin, count), m(m_[i].data() + begin, count),
          v(v_[i].data() + begin, count);
      const std::span<const T> grad(p.grad.data() + begin, count);
      Pins pins(memory);
      pins.add(value.data(), value.size_bytes(), Access::ReadWrite);
      pins.add(grad.data(), grad.size_bytes(), Access::Read);
      pins.add(m.data(), m.size_bytes(), Access::ReadWrite);
      pins.add(v.data(), v.size_bytes(), Access::ReadWrite);
      ops::adam_step(*backend_, value, grad, m, v, p.decay ? config_ : no_decay, steps_);
    }
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
    Pins pins(manager_of(backend_));
    pins.add(m_[i].data(), m_[i].bytes(), Access::Read);
    pins.add(v_[i].data(), v_[i].bytes(), Access::Read);
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
    Pins pins(manager_of(backend_));
    pins.add(m_[i].data(), m_[i].bytes(), Access::Write);
    pins.add(v_[i].data(), v_[i].bytes(), Access::Write);
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
