// Out-of-line pieces of the tensor types and their explicit instantiations.
#include "tessera/core/tensor.hpp"

#include <algorithm>

namespace tessera {

std::string shape_string(std::int64_t rows, std::int64_t cols) {
  // Appended piecewise: GCC 12 warns falsely (-Wrestrict) on the chained operator+ form.
  std::string text = "[";
  text += std::to_string(rows);
  text += ", ";
  text += std::to_string(cols);
  text += "]";
  return text;
}

template <typename T>
DenseT<T> DenseT<T>::zeros(BackendPtr backend, std::int64_t rows, std::int64_t cols) {
  DenseT out(std::move(backend), rows, cols);
  out.fill(T{0});
  return out;
}

template <typename T>
void DenseT<T>::fill(T value) {
  T* p = data();
  const std::int64_t n = size();
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) p[i] = value;
}

template class DenseT<float>;
template class DenseT<double>;

}  // namespace tessera
