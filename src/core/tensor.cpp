// Out-of-line pieces of the tensor types and their explicit instantiations.
#include "tessera/core/tensor.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

namespace tessera {

namespace {

/// The subscriptions to matrix releases, by id (few: one per CUDA backend).
struct Subscribers {
  std::mutex mutex;
  std::uint64_t next_id = 1;
  std::map<std::uint64_t, std::function<void(std::uint64_t)>> on_release;
};

Subscribers& subscribers() {
  // Never destroyed: a CsrT that is itself a static may be destroyed after any other static.
  static Subscribers* const instance = new Subscribers;
  return *instance;
}

} // namespace

std::uint64_t new_matrix_handle() noexcept {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

MatrixReleaseSubscription::MatrixReleaseSubscription(
    std::function<void(std::uint64_t)> on_release) {
  Subscribers& s = subscribers();
  const std::lock_guard lock(s.mutex);
  id_ = s.next_id++;
  s.on_release.emplace(id_, std::move(on_release));
}

MatrixReleaseSubscription::~MatrixReleaseSubscription() {
  Subscribers& s = subscribers();
  const std::lock_guard lock(s.mutex);
  s.on_release.erase(id_);
}

void detail::notify_matrix_released(std::uint64_t handle) noexcept {
  Subscribers& s = subscribers();
  // Held while calling, so a subscription's owner is not destroyed under its own callback.
  const std::lock_guard lock(s.mutex);
  for (const auto& [id, on_release] : s.on_release)
    on_release(handle);
}

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
  out.backend()->zero_bytes(out.data(), out.bytes());
  return out;
}

template <typename T> void DenseT<T>::fill(T value) {
  if (backend()->kind() != DeviceKind::Cpu) {
    throw InvalidArgument("DenseT::fill writes host memory; this matrix lives on " +
                          backend()->describe());
  }
  T* p = data();
  const std::int64_t n = size();
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i)
    p[i] = value;
}

template <typename T> DenseT<T> to_backend(const DenseT<T>& x, const BackendPtr& target) {
  if (x.backend() == nullptr) return {}; // a default-constructed matrix: nothing to copy
  DenseT<T> out(target, x.rows(), x.cols());
  copy_bytes(*target, out.data(), *x.backend(), x.data(), x.bytes());
  return out;
}

template <typename T> CsrT<T> to_backend(const CsrT<T>& x, const BackendPtr& target) {
  if (x.backend() == nullptr) return {}; // a default-constructed matrix: nothing to copy
  CsrT<T> out(target, x.rows(), x.cols(), x.nnz());
  copy_bytes(*target, out.row_ptr(), *x.backend(), x.row_ptr(),
             static_cast<std::size_t>(x.rows() + 1) * sizeof(Offset));
  copy_bytes(*target, out.col(), *x.backend(), x.col(),
             static_cast<std::size_t>(x.nnz()) * sizeof(LocalId));
  copy_bytes(*target, out.val(), *x.backend(), x.val(),
             static_cast<std::size_t>(x.nnz()) * sizeof(T));
  return out;
}

template class DenseT<float>;
template class DenseT<double>;
template DenseT<float> to_backend(const DenseT<float>&, const BackendPtr&);
template DenseT<double> to_backend(const DenseT<double>&, const BackendPtr&);
template CsrT<float> to_backend(const CsrT<float>&, const BackendPtr&);
template CsrT<double> to_backend(const CsrT<double>&, const BackendPtr&);

} // namespace tessera
