// Adam / AdamW state and update loop.
#include "tessera/engine/optimizer.hpp"

namespace tessera {

template <typename T>
Adam<T>::Adam(BackendPtr backend, std::vector<Parameter<T>*> parameters, AdamConfig config)
    : backend_(std::move(backend)), parameters_(std::move(parameters)), config_(config) {
  for (const Parameter<T>* p : parameters_) {
    m_.push_back(DenseT<T>::zeros(backend_, p->value.rows(), p->value.cols()));
    v_.push_back(DenseT<T>::zeros(backend_, p->value.rows(), p->value.cols()));
  }
}

template <typename T>
void Adam<T>::step() {
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

template <typename T>
std::size_t Adam<T>::bytes() const {
  std::size_t total = 0;
  for (std::size_t i = 0; i < m_.size(); ++i) total += m_[i].bytes() + v_[i].bytes();
  return total;
}

template class Adam<float>;
template class Adam<double>;

}  // namespace tessera
